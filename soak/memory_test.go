package soak

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/msr-router/msr/router/routerapi"
)

// TestMemWatchGrown: floors compared, not samples nor peaks. A resident
// memory that swings 15% with the GC's cycle but does not grow holds,
// whichever phase the first and last samples fall on (one beginning on a
// trough); so does one with a refresh's spike in its last minute alone,
// and one whose floors wander by a tenth with no
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
		// minute's the lowest and the last's the highest (305 → 336 MB).
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

// TestMemWatchGaps: a process not sampled for a window (the soak's own,
// seen in h1's namespace now and then) is judged on the
// windows it was sampled in; a window without a sample has no floor.
func TestMemWatchGaps(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	w := &memWatch{samples: map[string][]rssSample{}}
	for i := 0; i <= 100; i++ { // 5 minutes, the second and third without a sample
		if i >= 20 && i < 60 {
			continue
		}
		w.sample(map[string]int64{"r1 pid 1": 300_000 + int64(i%4)*10_000, "r2 pid 2": 300_000 + int64(i)*1_000}, t0.Add(time.Duration(i)*memEvery))
	}
	broken, compared, levels := w.grown()
	if compared != 2 || len(broken) != 1 || !strings.HasPrefix(broken[0], "r2 pid 2 floor 300000 → 380000 kB (trend 300000 → 380000)") {
		t.Errorf("compared %d, broken %q, want r2 alone, its trend from its floors; levels %q", compared, broken, levels)
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

// TestMemWatchReleases: a back-end agent is judged on its resident memory
// just after its releases. Floors that rise 13% between the halves of a
// restarted agent's watch (runs 34, 36, 38) with its releases level hold;
// releases that climb 15% break it; a back-end watched 90 s with one
// release is not compared; an LB agent, and a back-end whose table is too
// small to release (TestSoak's), are still judged on their floors. A
// release from before the watch followed the process, and one reported
// twice, are not counted.
func TestMemWatchReleases(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	w := newMemWatch([]string{"r1", "r2", "r3", "r4"})
	for i := 0; i <= 140; i++ { // 7 minutes, every 3 s
		at := t0.Add(time.Duration(i) * memEvery)
		rss := map[string]int64{"r2 pid 2": 330_000 + int64(i%13)*4_000, "lb1 pid 4": 29_000 + int64(i%5)*100}
		if i <= 50 { // 2.5 minutes
			rss["r1 pid 1"] = 300_000 + int64(i%7)*10_000
			if i > 25 {
				rss["r1 pid 1"] += 40_000
			}
		}
		if i <= 30 {
			rss["r3 pid 3"] = 300_000
		}
		if i <= 40 {
			rss["r4 pid 5"] = 60_000
		}
		w.sample(rss, at)
	}
	release := func(host string, pid int, n uint64, after time.Duration, kB int64) {
		w.released(host, routerapi.MemoryRelease{PID: pid, At: t0.Add(after).UTC().Format("2006-01-02T15:04:05.000Z07:00"), Releases: n,
			ResidentKB: kB, HeapLiveKB: kB - 110_000})
	}
	release("r1", 1, 1, -10*time.Second, 250_000) // before the watch
	for n := uint64(2); n <= 4; n++ {
		release("r1", 1, n, time.Duration(n-1)*time.Minute-30*time.Second, 300_000+int64(n%2)*6_000)
		release("r1", 1, n, time.Duration(n-1)*time.Minute-30*time.Second, 300_000+int64(n%2)*6_000) // asked again
	}
	for n := uint64(1); n <= 7; n++ {
		release("r2", 2, n, time.Duration(n)*time.Minute-20*time.Second, 300_000+int64(n-1)*7_500) // 300 → 345 MB
	}
	release("r3", 3, 1, 40*time.Second, 300_000)
	if got := len(w.releases["r1 pid 1"]); got != 3 {
		t.Fatalf("r1's releases %d, want 3 (one before its watch, three asked twice)", got)
	}
	broken, compared, levels := w.grown()
	t.Logf("%q", levels)
	if compared != 4 {
		t.Errorf("compared %d, want 4 (r1, r2, lb1, r4; r3 one release in 90 s)", compared)
	}
	if len(broken) != 1 || !strings.HasPrefix(broken[0], "r2 pid 2 resident just after its releases 300000 → 345000 kB") {
		t.Errorf("broken %q, want r2 alone, on its releases", broken)
	}
	if !slices.ContainsFunc(levels, func(l string) bool { return strings.HasPrefix(l, "r3 pid 3 not compared: 1 release") }) {
		t.Errorf("r3 not said not compared: %q", levels)
	}
	if !slices.ContainsFunc(levels, func(l string) bool { return strings.HasPrefix(l, "lb1 pid 4 floor 29000 → 29000 kB") }) {
		t.Errorf("lb1 not judged on its floors: %q", levels)
	}
	if !slices.ContainsFunc(levels, func(l string) bool { return strings.HasPrefix(l, "r4 pid 5 floor 60000 → 60000 kB") }) {
		t.Errorf("r4, no release, not judged on its floors: %q", levels)
	}
}

// TestMemWatchRestarted: an agent upgraded in place keeps its pid (a
// process over a minute old), but its new program is watched apart from
// the old one, once a minute old: the old flat at 330 MB, the new one
// loading its table from 150 MB for 45 s, then flat at 330 MB, breaks
// nothing; the same samples under one watch (no restart said) break it.
func TestMemWatchRestarted(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	feed := func(w *memWatch, restart bool) {
		for i := 0; i <= 200; i++ { // 10 minutes, every 3 s
			at := t0.Add(time.Duration(i) * memEvery)
			kB := int64(330_000)
			if i == 100 && restart {
				w.restarted("r1", at)
			}
			if i >= 100 && i < 115 {
				kB = 150_000 + int64(i-100)*12_000
			}
			if i < 100 && !restart {
				continue // the old program not watched: under a minute old
			}
			w.sample(map[string]int64{"r1 pid 7": kB}, at)
		}
	}
	w := newMemWatch(nil)
	feed(w, true)
	broken, compared, _ := w.grown()
	if len(broken) != 0 || compared != 2 {
		t.Errorf("upgraded in place: broken %q, %d compared; want none broken, the old program and the new one compared", broken, compared)
	}
	if ss := w.samples["r1 pid 7"]; len(ss) == 0 || ss[0].at.Before(t0.Add(100*memEvery+time.Minute)) {
		t.Errorf("the new program's first sample is from its first minute")
	}
	w = newMemWatch(nil)
	feed(w, false)
	if broken, _, _ := w.grown(); len(broken) != 1 {
		t.Errorf("the same without the restart said: broken %q, want r1", broken)
	}
}
