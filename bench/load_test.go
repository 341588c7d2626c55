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
	trial := func(d time.Duration) (loss float64, shares map[string]float64, r3pps float64) {
		t.Helper()
		first := demo.Look()
		tr, err := r.trial(size, rate, d)
		if err != nil {
			t.Fatal(err)
		}
		last := demo.Look()
		return tr.lossRatio(), demo.Shares(first, last), float64(last.RxPkts["r3"]-first.RxPkts["r3"]) / last.Time.Sub(first.Time).Seconds()
	}
	loss, shares, _ := trial(2 * time.Second)
	t.Logf("before: loss %.6f, shares r1 %.3f r2 %.3f r3 %.3f", loss, shares["r1"], shares["r2"], shares["r3"])
	if shares["r3"] < 0.18 || shares["r3"] > 0.22 {
		t.Fatalf("before: r3 carried %.3f, want its capacity's 0.2", shares["r3"])
	}
	const slower = 0.5 * 0.2 * rate // half of what its share brings it
	if err := routerapi.Local("r3", "").SetCapacity(slower); err != nil {
		t.Fatal(err)
	}
	loss, shares, _ = trial(5 * time.Second)
	t.Logf("the 5 s after r3's capacity fell to %.0f pps: loss %.6f, shares r1 %.3f r2 %.3f r3 %.3f", slower, loss, shares["r1"], shares["r2"], shares["r3"])
	before, err := routerapi.Local("r3", "").Status()
	if err != nil {
		t.Fatal(err)
	}
	loss, shares, r3pps := trial(3 * time.Second)
	after, err := routerapi.Local("r3", "").Status()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("then: loss %.6f, shares r1 %.3f r2 %.3f r3 %.3f, r3 %.0f pps, its cap drops %d", loss, shares["r1"], shares["r2"], shares["r3"], r3pps, after.CapDrop-before.CapDrop)
	if after.CapDrop != before.CapDrop || loss > 1e-4 || r3pps > 1.02*slower {
		t.Errorf("5 s after r3 slowed to %.0f pps: it dropped %d at its cap, the router lost %.6f, r3 carried %.0f pps", slower, after.CapDrop-before.CapDrop, loss, r3pps)
	}
	if r1 := shares["r1"]; shares["r2"] < r1*0.95 || shares["r2"] > r1*1.05 {
		t.Errorf("r1 and r2 (equal capacities) carried %.3f and %.3f", r1, shares["r2"])
	}
}
