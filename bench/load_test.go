package bench

import (
	"testing"
	"time"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/internal/msrtest"
	"github.com/msr-router/msr/router/routerapi"
)

// TestLoadAwareWeights: in the whole router (the default lab, the LBs in
// the demo's flowlet mode, the instrument's 1,000 flows from h1 to h3),
// one back-end is made slower at run time (r3's capacity lowered to half
// of what its share brings it). It drops at first; within 5 s the VCP has
// lowered its weight from what its hellos say it dropped (vcp/load.go),
// and then the router loses nothing and r3 carries no more than its
// capacity.
func TestLoadAwareWeights(t *testing.T) {
	bin, remove, err := msrtest.Build("../cmd/msr")
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	r, err := openRouterSession(bin, 1000, false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const rate, size = 40_000.0, 64
	// status is r3's: its frames forwarded, and dropped at its cap.
	status := func() (forwarded, capDrops uint64) {
		t.Helper()
		st, err := routerapi.Local("r3", "").Status()
		if err != nil || st.Stats == nil {
			t.Fatalf("r3's status: %+v, %v", st, err)
		}
		return st.Stats.Forwarded, st.CapDrop
	}
	// trial says r3's rate as the frames it forwarded over the time the
	// generator sent (its own clock, first frame to last): not its frames
	// received between two looks, which count the LBs' probes and hellos
	// too (about 100 a second, under no cap) and are timed by looks that
	// read every element in turn (CI: r3 at 4,211 pps that way, over its
	// cap of 4,000 and its bucket's 256 frames, with not one dropped at
	// the cap).
	trial := func(d time.Duration) (loss float64, shares map[string]float64, r3pps float64, capDrops uint64) {
		t.Helper()
		fwd0, cap0 := status()
		first := demo.Look()
		tr, err := r.trial(size, rate, d)
		if err != nil {
			t.Fatal(err)
		}
		last := demo.Look()
		fwd1, cap1 := status()
		t.Logf("offered %.0f pps (%d frames in %v, %d pace restarts)", float64(tr.sent)/tr.window.Seconds(), tr.sent, tr.window, tr.paceRestarts)
		return tr.lossRatio(), demo.Shares(first, last), float64(fwd1-fwd0) / tr.window.Seconds(), cap1 - cap0
	}
	loss, shares, _, _ := trial(2 * time.Second)
	t.Logf("before: loss %.6f, shares r1 %.3f r2 %.3f r3 %.3f", loss, shares["r1"], shares["r2"], shares["r3"])
	if shares["r3"] < 0.18 || shares["r3"] > 0.22 {
		t.Fatalf("before: r3 carried %.3f, want its capacity's 0.2", shares["r3"])
	}
	const slower = 0.5 * 0.2 * rate // half of what its share brings it
	if err := routerapi.Local("r3", "").SetCapacity(slower); err != nil {
		t.Fatal(err)
	}
	loss, shares, _, _ = trial(5 * time.Second)
	t.Logf("the 5 s after r3's capacity fell to %.0f pps: loss %.6f, shares r1 %.3f r2 %.3f r3 %.3f", slower, loss, shares["r1"], shares["r2"], shares["r3"])
	loss, shares, r3pps, capDrops := trial(3 * time.Second)
	t.Logf("then: loss %.6f, shares r1 %.3f r2 %.3f r3 %.3f, r3 forwarded %.0f pps, its cap drops %d", loss, shares["r1"], shares["r2"], shares["r3"], r3pps, capDrops)
	// At most its capacity and its bucket (256 frames) over the trial.
	if most := slower + 256/3.0; capDrops != 0 || loss > 1e-4 || r3pps > most {
		t.Errorf("5 s after r3 slowed to %.0f pps: it dropped %d at its cap, the router lost %.6f, r3 forwarded %.0f pps (at most %.0f)", slower, capDrops, loss, r3pps, most)
	}
	if r1 := shares["r1"]; shares["r2"] < r1*0.95 || shares["r2"] > r1*1.05 {
		t.Errorf("r1 and r2 (equal capacities) carried %.3f and %.3f", r1, shares["r2"])
	}
}
