package bench

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// TestRIB runs the RIB benchmark small: 2000 routes to two back-ends, three
// announce/withdraw pairs, every element an msr process; then three
// receive-only clients of the VCP's reflector, each a BIRD of its own;
// then 2000 IPv6 routes.
func TestRIB(t *testing.T) {
	msr := filepath.Join(t.TempDir(), "msr")
	if out, err := exec.Command("go", "build", "-o", msr, "../cmd/msr").CombinedOutput(); err != nil {
		t.Fatalf("build msr: %v\n%s", err, out)
	}
	r, err := RIB(RIBOptions{Routes: "2000", Backends: 2, Changes: 3, Clients: 3, Msr: msr})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", r)
	if r.Routes != 2000 || r.DistributeSeconds <= 0 || r.ChangeMs.N != 6 || r.VCPToFIBMs.P50 <= 0 || len(r.BackendRSSMB) != 2 ||
		r.Clients != 3 || r.ClientsFanoutS <= 0 || r.SuiteRSSMB <= 0 || r.ClientsSuiteRSSMB <= 0 {
		t.Errorf("%+v", r)
	}
	// An IPv6 table: 2,000 prefixes of the 2015 snapshot, static routes
	// via an IPv6 gateway, to every back-end's IPv6 FIB over the feed's
	// IPv6 channel.
	r, err = RIB(RIBOptions{Routes: "2000v6", Backends: 2, Changes: 1, Msr: msr})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", r)
	if r.Routes != 2000 || !r.IPv6 || r.DistributeSeconds <= 0 || r.ChangeMs.N != 2 {
		t.Errorf("IPv6: %+v", r)
	}
}
