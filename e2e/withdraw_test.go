package e2e

import (
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/router/routerapi"
)

// TestBackendRestartMidWithdrawal: r1's agent is down while bgp1's
// routes are withdrawn (bgp1's link down past its BGP hold time), and
// comes back with the FIB it adopts, which still routes them. Its new
// feed's table has none of them: at the table's End-of-RIB they go, and
// r1 routes as r2 and r3 do, within seconds of starting. When the link
// comes back, so do the routes, on every back-end.
func TestBackendRestartMidWithdrawal(t *testing.T) {
	plan := upDefaultLab(t, 100)
	p := plan.Prefixes[0] // bgp1's
	routes := func(b string) (n int, routed bool, err error) {
		c := routerapi.Local(b, "")
		st, err := c.Status()
		if err != nil {
			return 0, false, err
		}
		rs, err := c.Route(p.String())
		return st.Routes + st.Routes6, len(rs) > 0, err
	}
	for _, b := range demo.Backends {
		if _, routed, err := routes(b); err != nil || !routed {
			t.Fatalf("%s does not route bgp1's %v before: %v", b, p, err)
		}
	}
	bgp1Link := func(state string) {
		t.Helper()
		if out, err := exec.Command("ip", "-n", lab.Namespace(demo.LabName, "ext3"), "link", "set", "q2", state).CombinedOutput(); err != nil {
			t.Fatalf("bgp1's link %s: %v: %s", state, err, out)
		}
	}
	syscall.Kill(labPID(t, demo.LabName, "r1"), syscall.SIGKILL)
	bgp1Link("down")
	t.Cleanup(func() { bgp1Link("up") })
	down := time.Now()
	waitFor(t, 30*time.Second, "bgp1's routes withdrawn from r2 and r3", func() bool {
		_, routed2, err2 := routes("r2")
		_, routed3, err3 := routes("r3")
		return err2 == nil && err3 == nil && !routed2 && !routed3
	})
	t.Logf("bgp1's routes left r2 and r3 %v after its link went down", time.Since(down).Round(100*time.Millisecond))

	if _, _, err := lab.Restart(demo.LabName, "r1", "router", syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	var last string
	for {
		// r2's count now: bgp1's IPv6 routes may leave it a moment after
		// the IPv4 ones.
		n, routed, err := routes("r1")
		want, _, err2 := routes("r2")
		st, serr := routerapi.Local("r1", "").Status()
		if err == nil && err2 == nil && serr == nil && st.RIB != nil {
			last = fmt.Sprintf("%d routes (r2: %d), bgp1's %v routed: %v; feed %s, table arrived %q, %d stale", n, want, p, routed, st.RIB.State, st.RIB.TableArrived, st.RIB.Stale)
			if st.RIB.TableArrived != "" && !routed && n == want {
				break
			}
		}
		if time.Since(started) > 15*time.Second {
			t.Fatalf("r1 15 s after its agent started: %s; want bgp1's routes gone at its feed's End-of-RIB", last)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("r1 routes as r2 does %v after its agent started: %s", time.Since(started).Round(100*time.Millisecond), last)

	bgp1Link("up")
	up := time.Now()
	waitFor(t, 30*time.Second, "bgp1's routes back on every back-end", func() bool {
		for _, b := range demo.Backends {
			if _, routed, err := routes(b); err != nil || !routed {
				return false
			}
		}
		return true
	})
	t.Logf("bgp1's routes back on every back-end %v after its link came up", time.Since(up).Round(100*time.Millisecond))
}
