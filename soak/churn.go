package soak

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/msr-router/msr/demo"
)

// The soak's BGP churn: while a step's traffic runs, bgp1
// withdraws and announces again, in turn, the half of its IPv4 and IPv6
// prefixes the traffic does not cross, so that the router learns and
// forgets routes of both families all the time while the frames to every
// other destination must still arrive. bgp1 is FRR's bgpd, announcing
// each prefix with a `network` statement: a turn removes the churned
// prefixes' statements or puts them back, and bgpd withdraws or
// announces those prefixes alone. (Before, an outbound route-map denied
// them or not and `clear bgp … soft out` sent the difference: bgpd then
// went over its whole table for each turn, a second and more of a full
// table's, and the churn fell short of its rate: runs 19-23.) At the end
// of a step the churn stops with every prefix announced, so that the
// router converges and its FIBs are compared with its RIB in quiet.

// bgp1Router and bgp1Router6 are the router's addresses as bgp1 peers
// with it, over IPv4 and over IPv6.
const (
	bgp1Router  = "203.0.113.1"
	bgp1Router6 = "2001:db8:12::1"
)

// bgpChurn is bgp1's churn: its prefixes, and what it sent.
type bgpChurn struct {
	vty       string // bgp1's vty socket directory
	prefixes  []netip.Prefix
	prefixes6 []netip.Prefix
	// Period is the time between two turns; each turn withdraws or
	// announces every prefix of both families: (len(prefixes) +
	// len(prefixes6))/period route changes a second.
	period time.Duration

	updates0 uint64 // bgp1's UPDATEs sent to the router before the churn

	mu      sync.Mutex
	turns   int           // turns made
	running time.Duration // time churned
}

// ChurnReport is the churn's account in the soak's report.
type ChurnReport struct {
	Prefixes  int `json:"prefixes"`
	Prefixes6 int `json:"prefixes6"`
	// ChangesPerS is route changes (announcements and withdrawals) bgp1
	// sent a second while churning, on average; UpdatesSent the BGP
	// UPDATE messages bgp1 sent the router meanwhile (FRR's count: an
	// UPDATE carries many prefixes).
	ChangesPerS float64 `json:"changes_per_s"`
	UpdatesSent uint64  `json:"updates_sent"`
	ChurnedS    float64 `json:"churned_s"`
}

// churnedMax is how many prefixes of a family the churn swings at most:
// the lab's small table's half (1,000 a family, the traffic crossing the
// other half); of a full table, that many drawn evenly from it, so that
// the churn runs over the whole table as an Internet peer's does, at the
// same rate. A turn swings every churned prefix, and over a full table a
// turn's vtysh waits while bgp1's bgpd sends the table again after a
// takeover, so the churn falls short of its rate; a larger turn made
// the rate but broke invariants a smaller one held (docs/reliability.md).
const churnedMax = 500

// newBGPChurn sets bgp1 up to churn the IPv4 and IPv6 prefixes of its
// table that hold none of keep (the traffic's destinations), churnedMax
// of each family at most, evenly drawn, at rate route changes a second.
func newBGPChurn(plan *demo.Plan, keep []netip.Addr, rate float64) (*bgpChurn, error) {
	c := &bgpChurn{vty: filepath.Join(demo.RunDir, "bgp1")}
	// The prefixes the traffic crosses: every one of the table's that
	// holds a destination.
	kept := map[netip.Prefix]bool{}
	for _, a := range keep {
		for bits := a.BitLen(); bits >= 0; bits-- {
			p, _ := a.Prefix(bits)
			kept[p] = true
		}
	}
	churned := func(ps []netip.Prefix) []netip.Prefix {
		var out []netip.Prefix
		for _, p := range ps {
			if !kept[p.Masked()] {
				out = append(out, p)
			}
		}
		if len(out) <= churnedMax {
			return out
		}
		drawn := make([]netip.Prefix, churnedMax)
		for i := range drawn {
			drawn[i] = out[i*len(out)/churnedMax]
		}
		return drawn
	}
	c.prefixes, c.prefixes6 = churned(plan.Prefixes), churned(plan.Prefixes6)
	if len(c.prefixes) == 0 || len(c.prefixes6) == 0 {
		return nil, fmt.Errorf("churn: every IPv4 (%d) or IPv6 (%d) prefix of bgp1's carries traffic", len(plan.Prefixes), len(plan.Prefixes6))
	}
	c.period = time.Duration(float64(len(c.prefixes)+len(c.prefixes6)) / rate * float64(time.Second))
	c.updates0 = c.updatesSent()
	return c, nil
}

// updatesSent is FRR's count of the UPDATE messages bgp1 sent the
// router, on both sessions.
func (c *bgpChurn) updatesSent() uint64 {
	var sum uint64
	for _, peer := range []string{bgp1Router, bgp1Router6} {
		out, err := c.vtysh("show bgp neighbors " + peer + " json")
		if err != nil {
			continue
		}
		var n map[string]struct {
			MessageStats struct {
				UpdatesSent uint64 `json:"updatesSent"`
			} `json:"messageStats"`
		}
		if json.Unmarshal([]byte(out), &n) == nil {
			sum += n[peer].MessageStats.UpdatesSent
		}
	}
	return sum
}

// kept is plan without the churned prefixes: what the router has at least
// whether they are announced or not (demo.Look's convergence while the
// churn runs).
func (c *bgpChurn) kept(plan *demo.Plan) *demo.Plan {
	p := *plan
	p.Prefixes, p.Prefixes6 = nil, nil
	churned := map[netip.Prefix]bool{}
	for _, q := range append(slices.Clone(c.prefixes), c.prefixes6...) {
		churned[q] = true
	}
	for _, q := range plan.Prefixes {
		if !churned[q] {
			p.Prefixes = append(p.Prefixes, q)
		}
	}
	for _, q := range plan.Prefixes6 {
		if !churned[q] {
			p.Prefixes6 = append(p.Prefixes6, q)
		}
	}
	return &p
}

// vtysh runs commands on bgp1's bgpd.
func (c *bgpChurn) vtysh(commands ...string) (string, error) {
	args := []string{"--vty_socket", c.vty, "-d", "bgpd"}
	for _, cmd := range commands {
		args = append(args, "-c", cmd)
	}
	out, err := exec.Command("vtysh", args...).CombinedOutput()
	if err == nil && strings.Contains(string(out), "%") { // "% Unknown command" and the like
		err = fmt.Errorf("vtysh said so")
	}
	return string(out), err
}

// set withdraws the churned prefixes of both families, or announces them
// again: their `network` statements removed or put back.
func (c *bgpChurn) set(withdrawn bool) error {
	no := ""
	if withdrawn {
		no = "no "
	}
	cmds := []string{"configure terminal", "router bgp 65020", "address-family ipv4 unicast"}
	for _, p := range c.prefixes {
		cmds = append(cmds, no+"network "+p.String())
	}
	cmds = append(cmds, "exit-address-family", "address-family ipv6 unicast")
	for _, p := range c.prefixes6 {
		cmds = append(cmds, no+"network "+p.String())
	}
	cmds = append(cmds, "end")
	if out, err := c.vtysh(cmds...); err != nil {
		return fmt.Errorf("churn: %v: %s", err, out)
	}
	return nil
}

// run churns until stop closes, a turn every period (the first at once),
// and leaves every prefix announced.
func (c *bgpChurn) run(stop <-chan struct{}) error {
	start := time.Now()
	t := time.NewTicker(c.period)
	defer t.Stop()
	withdrawn := false
	var err error
	for {
		withdrawn = !withdrawn
		if err = c.set(withdrawn); err != nil {
			break
		}
		c.mu.Lock()
		c.turns++
		c.mu.Unlock()
		select {
		case <-stop:
		case <-t.C:
			continue
		}
		break
	}
	if withdrawn { // a turn too: every churned prefix announced again
		aerr := c.set(false)
		if aerr == nil {
			c.mu.Lock()
			c.turns++
			c.mu.Unlock()
		}
		if err == nil {
			err = aerr
		}
	}
	c.mu.Lock()
	c.running += time.Since(start)
	c.mu.Unlock()
	return err
}

// churned is how many prefixes the churn swings, both families'; none
// without a churn.
func (c *bgpChurn) churned() int {
	if c == nil {
		return 0
	}
	return len(c.prefixes) + len(c.prefixes6)
}

// report is the churn's account so far.
func (c *bgpChurn) report() *ChurnReport {
	c.mu.Lock()
	r := &ChurnReport{Prefixes: len(c.prefixes), Prefixes6: len(c.prefixes6), ChurnedS: c.running.Seconds()}
	if c.running > 0 {
		r.ChangesPerS = float64(c.turns*(len(c.prefixes)+len(c.prefixes6))) / c.running.Seconds()
	}
	c.mu.Unlock()
	if n := c.updatesSent(); n > c.updates0 {
		r.UpdatesSent = n - c.updates0
	}
	return r
}
