package bench

import (
	"io"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestVCPScale runs `msr bench vcp` small: a real VCP, 100 back-ends and 4
// LBs of 15 external ports each from the DIST load generator. Every LB
// installs a table of every back-end, every back-end gathers the 60
// ports' paged config, the VCP refuses none of the generator's frames
// (each identity is authenticated and in sequence), and one back-end's
// death reaches every LB within its hold time and two ticks.
func TestVCPScale(t *testing.T) {
	msr := filepath.Join(t.TempDir(), "msr")
	if out, err := exec.Command("go", "build", "-o", msr, "../cmd/msr").CombinedOutput(); err != nil {
		t.Fatalf("build msr: %v\n%s", err, out)
	}
	r, err := VCPScale(VCPScaleOptions{Backends: 100, LBs: 4, PortsPerLB: 15, Duration: 3 * time.Second, Msr: msr}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", r)
	if r.Refused != 0 || r.PushEntries != 4*99 || r.PushFrames < 4 || r.VCPCPU <= 0 || r.VCPRSSMB <= 0 || r.Ports != 60 || r.FirstPortsS <= 0 || r.TxBytesPerSecond <= 0 {
		t.Errorf("%+v", r)
	}
	if r.HellosPerSecond < 0.8*104*10 {
		t.Errorf("%.0f hellos a second, want about 1,040", r.HellosPerSecond)
	}
	if r.DeathToTables < float64(r.HoldMs) || r.DeathToTables > float64(r.HoldMs+2*r.HelloIntervalMs+100) {
		t.Errorf("a back-end's death reached every LB %.0f ms after its last hello; hold %d ms, ticks %d ms", r.DeathToTables, r.HoldMs, r.HelloIntervalMs)
	}
}
