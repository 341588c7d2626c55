package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/msr-router/msr/demo"
)

// TestUpgradeInPlace: `msr ctl upgrade` rolls a build of the next map
// layout (-tags msr_next_layout: the back-ends' neighbour entries 8
// bytes longer) over the default lab while h1 pings h3 every 10 ms and
// iperf3 carries 4 TCP streams of 50 Mbit/s: every back-end is drained,
// upgraded in place and undrained, every LB upgraded in place, then the
// standby VCP and the active one, whose stop hands the router to the
// other; no ping is lost, no stream stalls, and each back-end migrated
// its neighbours into the new layout rather than starting them empty.
func TestUpgradeInPlace(t *testing.T) {
	upDefaultLab(t, 300)
	dir := t.TempDir()
	next := filepath.Join(dir, "msr")
	build := exec.Command("go", "build", "-tags", "msr_next_layout", "-ldflags", "-X main.version=next-layout", "-o", next, "./cmd/msr")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the next layout: %v\n%s", err, out)
	}

	iperf3Server(t)
	streams := make(chan []float64, 1)
	go func() {
		// Paced, 4 x 50 Mbit/s: the path is not full, so a ping lost is
		// the upgrade's, not a queue's (CI's machine lost 5 of 1,200 with
		// the streams flat out).
		intervals, _, err := iperf3(t, "h1", 20*time.Second, 4, "-b", "50M")
		if err != nil {
			t.Errorf("iperf3 across the upgrade: %v", err)
		}
		streams <- intervals
	}()
	ping := make(chan string, 1)
	go func() {
		out, _ := demo.Exec("h1", "ping", "-c", "2000", "-i", "0.01", "-q", demo.H3)
		ping <- out
	}()
	time.Sleep(time.Second)
	out, errOut, code := msr(t, "ctl", "--name", "vcp1", "upgrade", "--binary", next, "--drain-wait", "1s", "--vcps", "vcp1,vcp2")
	t.Logf("msr ctl upgrade:\n%s%s", out, errOut)
	if code != 0 {
		t.Fatalf("msr ctl upgrade: exit %d", code)
	}
	for _, e := range []string{"r1", "r2", "r3", "lb1", "lb2", "vcp1", "vcp2"} {
		if !strings.Contains(out, e+" ") || !strings.Contains(out, "next-layout") {
			t.Errorf("the upgrade did not report %s on the new build", e)
		}
	}
	if p := <-ping; !strings.Contains(p, " 2000 received") {
		t.Errorf("pings across the upgrade: %s", p)
	}
	for i, bps := range <-streams {
		if bps < 1e6 {
			t.Errorf("second %d of the transfer: %.0f bit/s: forwarding stopped", i, bps)
		}
	}
	for _, r := range []string{"r1", "r2", "r3"} {
		log, _ := os.ReadFile(filepath.Join("/run/msr/labs/default/logs", r+".router.log"))
		if !strings.Contains(string(log), `msg="data path map of an older layout migrated" component=router router=`+r+` map=rt_neighbors`) ||
			strings.Contains(string(log), "empty=true") {
			t.Errorf("%s did not migrate its neighbours:\n%s", r, lastLines(string(log), 20))
		}
	}
	ps, _ := exec.Command("ps", "-eo", "args").Output()
	if n := strings.Count(string(ps), next+" "); n != 7 {
		t.Errorf("%d agents run the new build, want 7 (3 back-ends, 2 LBs, 2 VCPs):\n%s", n, ps)
	}
	if v := demo.Look().VCP; v != "vcp2" {
		t.Errorf("the active VCP after the upgrade: %q, want vcp2 (vcp1 upgraded last, handing it over)", v)
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
