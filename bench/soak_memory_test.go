package bench

import (
	"strings"
	"testing"
	"time"
)

// TestMemWatchGrown: floors compared, not samples nor peaks. A resident
// memory that swings 15% with the GC's cycle but does not grow holds,
// whichever phase the first and last samples fall on (run 24's r3 began
// on a trough); so does one with a refresh's spike in its last minute
// alone (run 25's peaks), and one whose floors wander by a tenth with no
// trend; one whose floor grows by more than a tenth breaks it; a process
// watched under a minute is not compared.
func TestMemWatchGrown(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	w := &memWatch{samples: map[string][]rssSample{}}
	for i := 0; i <= 194; i++ { // 9.7 minutes, every 3 s, ending on a crest
		at := t0.Add(time.Duration(i) * memEvery)
		saw := int64(330_000 + (i%13)*4_000) // 330-378 MB, a 39 s cycle
		grow := saw + int64(i*400)           // the same, 78 MB higher at the end
		spike := int64(330_000)
		if i >= 180 && i < 186 {
			spike = 500_000 // a takeover's refresh, then the release
		}
		// Floors that wander by a tenth a minute with no trend, the first
		// minute's the lowest and the last's the highest (run 26's r3:
		// 305 → 336 MB).
		wander := []int64{305_000, 340_000, 320_000, 335_000, 300_000, 345_000, 330_000, 310_000, 336_000, 336_000}[i/20] + int64(i%3)*20_000
		rss := map[string]int64{"r1 pid 1": saw, "r2 pid 2": grow, "r4 pid 4": spike, "r5 pid 5": wander}
		if i >= 190 {
			rss["r3 pid 3"] = 500_000 + int64(i-190)*50_000 // 12 s watched: not compared
		}
		w.sample(rss, at)
	}
	// A first sample on the trough and the last on a crest is 14.5%:
	// what one look at each end would have failed on.
	if ss := w.samples["r1 pid 1"]; float64(ss[len(ss)-1].kB) < 1.1*float64(ss[0].kB) {
		t.Fatalf("the fixture's sawtooth: %d then %d", ss[0].kB, ss[len(ss)-1].kB)
	}
	broken, compared, levels := w.grown()
	if compared != 4 || len(levels) != 4 {
		t.Errorf("compared %d processes (%q), want 4 (r3 watched 12 s)", compared, levels)
	}
	if len(broken) != 1 || !strings.HasPrefix(broken[0], "r2 pid 2 ") {
		t.Errorf("broken %q, want r2 alone", broken)
	}
	if !strings.Contains(levels[2], "500000 kB") {
		t.Errorf("r4's spike not reported as its peak: %q", levels[2])
	}
}

// TestMemWatchShortWatch: a process watched between one and two minutes is
// judged on the halves of its watch.
func TestMemWatchShortWatch(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	w := &memWatch{samples: map[string][]rssSample{}}
	for i := 0; i <= 30; i++ { // 90 s
		kB := int64(300_000)
		if i > 10 {
			kB = 340_000
		}
		w.sample(map[string]int64{"r4 pid 9": kB}, t0.Add(time.Duration(i)*memEvery))
	}
	if broken, compared, _ := w.grown(); compared != 1 || len(broken) != 1 {
		t.Errorf("90 s watched, 13%% more in its second half: broken %q, compared %d", broken, compared)
	}
}
