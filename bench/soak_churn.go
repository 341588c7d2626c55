package bench

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/msr-router/msr/demo"
)

// The soak's BGP churn (issue 17 §1): while a step's traffic runs, bgp1
// withdraws and announces again, in turn, the half of its IPv4 prefixes
// the traffic does not cross, so that the router learns and forgets
// routes all the time while the frames to every other destination must
// still arrive. bgp1 is FRR's bgpd: an outbound route-map towards the
// router (MSR-CHURN) denies a prefix list of the churned prefixes or
// not, and `clear bgp … soft out` sends the difference at once. At the end
// of a step the churn stops with every prefix announced, so that the
// router converges and its FIBs are compared with its RIB in quiet.

// bgp1Router is the router's address as bgp1 peers with it over IPv4.
const bgp1Router = "203.0.113.1"

// bgpChurn is bgp1's churn: its prefixes, and what it sent.
type bgpChurn struct {
	vty      string // bgp1's vty socket directory
	prefixes []netip.Prefix
	// Period is the time between two turns; each turn withdraws or
	// announces every prefix: 2·len(prefixes)/Period route changes a
	// second.
	period time.Duration

	updates0 uint64 // bgp1's UPDATEs sent to the router before the churn

	mu      sync.Mutex
	turns   int           // turns made
	running time.Duration // time churned
}

// SoakChurn is the churn's account in the soak's report.
type SoakChurn struct {
	Prefixes int `json:"prefixes"`
	// ChangesPerS is route changes (announcements and withdrawals) bgp1
	// sent a second while churning, on average; UpdatesSent the BGP
	// UPDATE messages bgp1 sent the router meanwhile (FRR's count: an
	// UPDATE carries many prefixes).
	ChangesPerS float64 `json:"changes_per_s"`
	UpdatesSent uint64  `json:"updates_sent"`
	ChurnedS    float64 `json:"churned_s"`
}

// newBGPChurn sets bgp1 up to churn every IPv4 prefix of its table that
// holds none of keep (the traffic's destinations), at rate route changes
// a second.
func newBGPChurn(plan *demo.Plan, keep []netip.Addr, rate float64) (*bgpChurn, error) {
	c := &bgpChurn{vty: filepath.Join(demo.RunDir, "bgp1")}
	kept := map[netip.Prefix]bool{}
	for _, p := range plan.Prefixes {
		for _, a := range keep {
			if p.Contains(a) {
				kept[p] = true
			}
		}
	}
	cmds := []string{"configure terminal"}
	for _, p := range plan.Prefixes {
		if !kept[p] {
			c.prefixes = append(c.prefixes, p)
			cmds = append(cmds, fmt.Sprintf("ip prefix-list MSR-CHURNED seq %d permit %s", 5*len(c.prefixes), p))
		}
	}
	if len(c.prefixes) == 0 {
		return nil, fmt.Errorf("churn: every prefix of bgp1's carries traffic")
	}
	c.period = time.Duration(float64(len(c.prefixes)) / rate * float64(time.Second))
	cmds = append(cmds, "route-map MSR-CHURN permit 10", "exit", "router bgp 65020", "address-family ipv4 unicast",
		"neighbor "+bgp1Router+" route-map MSR-CHURN out")
	if out, err := c.vtysh(cmds...); err != nil {
		return nil, fmt.Errorf("churn: set bgp1 up: %v: %s", err, out)
	}
	c.updates0 = c.updatesSent()
	return c, nil
}

// updatesSent is FRR's count of the UPDATE messages bgp1 sent the router.
func (c *bgpChurn) updatesSent() uint64 {
	out, err := c.vtysh("show bgp neighbors " + bgp1Router + " json")
	if err != nil {
		return 0
	}
	var n map[string]struct {
		MessageStats struct {
			UpdatesSent uint64 `json:"updatesSent"`
		} `json:"messageStats"`
	}
	if json.Unmarshal([]byte(out), &n) != nil {
		return 0
	}
	return n[bgp1Router].MessageStats.UpdatesSent
}

// kept is plan without the churned prefixes: what the router has at least
// whether they are announced or not (demo.Look's convergence while the
// churn runs).
func (c *bgpChurn) kept(plan *demo.Plan) *demo.Plan {
	p := *plan
	p.Prefixes = nil
	churned := map[netip.Prefix]bool{}
	for _, q := range c.prefixes {
		churned[q] = true
	}
	for _, q := range plan.Prefixes {
		if !churned[q] {
			p.Prefixes = append(p.Prefixes, q)
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

// set withdraws the churned prefixes, or announces them again.
func (c *bgpChurn) set(withdrawn bool) error {
	change := "no route-map MSR-CHURN deny 5"
	if withdrawn {
		change = "route-map MSR-CHURN deny 5\n match ip address prefix-list MSR-CHURNED"
	}
	cmds := append([]string{"configure terminal"}, strings.Split(change, "\n")...)
	cmds = append(cmds, "end", "clear bgp ipv4 unicast "+bgp1Router+" soft out")
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
	if withdrawn {
		if aerr := c.set(false); err == nil {
			err = aerr
		}
	}
	c.mu.Lock()
	c.running += time.Since(start)
	c.mu.Unlock()
	return err
}

// report is the churn's account so far.
func (c *bgpChurn) report() *SoakChurn {
	c.mu.Lock()
	r := &SoakChurn{Prefixes: len(c.prefixes), ChurnedS: c.running.Seconds()}
	if c.running > 0 {
		r.ChangesPerS = float64(c.turns*len(c.prefixes)) / c.running.Seconds()
	}
	c.mu.Unlock()
	if n := c.updatesSent(); n > c.updates0 {
		r.UpdatesSent = n - c.updates0
	}
	return r
}
