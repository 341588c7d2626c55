package soak

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/msr-router/msr/bench"
	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// The soak's operations (the churn besides BGP's): while the
// traffic runs, the operator drains and undrains back-ends, sets their
// weights and clears them, and reloads the router's config with another
// balancing mode and other OSPF costs, each through the active VCP's API
// as `msr ctl drain|undrain|weight|reload` does (a reload on both VCPs,
// whose files change together, as an operator deploys a config). After
// every step the router must hold what the operator last asked, whatever
// the faults did meanwhile (invariant operator_state): a drained back-end
// in no LB's table, a weight where it was set, every LB in the mode of
// the file, the active suite's OSPF interfaces at the file's cost. None
// of it may lose a frame.

// soakOpKinds are the operations drawn, one a step.
var soakOpKinds = []string{"drain", "weight", "reload"}

// soakModes are the balancing modes a reload draws from.
var soakModes = []string{"flowlet", "hash", "maglev"}

// opWait is how long an operation is retried while no VCP is active (a
// takeover under way): an operator's command fails then, and is given
// again.
const opWait = 5 * time.Second

// soakOps is the operator's state as the soak has set it, and what it did.
type soakOps struct {
	drained  string // the back-end drained ("": none)
	weighted string // the back-end whose weight is set ("": none)
	weight   uint32
	mode     string
	cost     uint32 // the OSPF ports' cost (0: the default, none in the file)
	done     map[string]int
}

// newSoakOps starts from the lab's own config: nothing drained or
// weighted, the file's mode.
func newSoakOps() *soakOps {
	return &soakOps{mode: "flowlet", done: map[string]int{}}
}

// A soakOp is an operation drawn: what it does, and its text; undo puts
// back the state expected before it, when it failed (the operator was
// told so: the router kept what it had, and must keep it).
type soakOp struct {
	text string
	do   func() error
	undo func()
}

// draw draws the next operation, and changes the state it expects. A
// drain or a weight refused changed nothing; a reload that failed on one
// VCP has its file written all the same, which that VCP reads when it
// starts: it is not undone.
func (o *soakOps) draw(rng *rand.Rand) *soakOp {
	before := *o
	op := o.drawOp(rng)
	op.undo = func() {
		if strings.HasPrefix(op.text, "reload") {
			return
		}
		done := o.done
		*o = before
		o.done = done
	}
	return op
}

// drawOp is draw's operation, without its undo.
func (o *soakOps) drawOp(rng *rand.Rand) *soakOp {
	switch kind := soakOpKinds[rng.IntN(len(soakOpKinds))]; kind {
	case "drain":
		if b := o.drained; b != "" {
			o.drained = ""
			return o.count("undrain", &soakOp{"undrain " + b, func() error { return onActive(func(c *vcpapi.Client) error { return c.Drain(b, false) }) }, nil})
		}
		b := demo.Backends[rng.IntN(len(demo.Backends))]
		o.drained = b
		return o.count("drain", &soakOp{"drain " + b, func() error { return onActive(func(c *vcpapi.Client) error { return c.Drain(b, true) }) }, nil})
	case "weight":
		if b := o.weighted; b != "" {
			o.weighted, o.weight = "", 0
			return o.count("weight", &soakOp{"weight " + b + " 0", func() error { return onActive(func(c *vcpapi.Client) error { return c.Weight(b, 0) }) }, nil})
		}
		b, mbps := demo.Backends[rng.IntN(len(demo.Backends))], uint32(2000+1000*rng.IntN(19))
		o.weighted, o.weight = b, mbps
		return o.count("weight", &soakOp{fmt.Sprintf("weight %s %d", b, mbps), func() error { return onActive(func(c *vcpapi.Client) error { return c.Weight(b, mbps) }) }, nil})
	default: // reload
		modes := slices.DeleteFunc(slices.Clone(soakModes), func(m string) bool { return m == o.mode })
		o.mode, o.cost = modes[rng.IntN(len(modes))], uint32(5+5*rng.IntN(20))
		o.weighted, o.weight = "", 0 // a reload puts back the file's capacities (a drain stays)
		mode, cost := o.mode, o.cost
		return o.count("reload", &soakOp{fmt.Sprintf("reload: mode %s, OSPF cost %d", mode, cost), func() error { return reloadVCPs(mode, cost) }, nil})
	}
}

func (o *soakOps) count(kind string, op *soakOp) *soakOp {
	o.done[kind]++
	return op
}

// onActive calls the active VCP's API, again while no VCP is active or
// the one that was is going (a takeover), for up to opWait.
func onActive(call func(*vcpapi.Client) error) error {
	start := time.Now()
	for {
		active, err := bench.ActiveVCP()
		if err == nil {
			if err = call(vcpapi.Local(active, "")); err == nil {
				return nil
			}
		}
		if time.Since(start) > opWait {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// vcpOSPF is an OSPF port of the default lab's VCP config, with its cost
// if it has one, and what follows it (its auth, or the end).
var vcpOSPF = regexp.MustCompile(`(?m)^(  ospf(?:v3)?:\n    - \{vlan: 11)(?:, cost: \d+)?(,|\})`)

// reloadVCPs writes mode and cost into both VCPs' files and has each
// reload it: the active applies it, the standby keeps it for when it
// takes over. A VCP being started again (killed by a fault in the same
// step) may have read its file before it was written: it is asked to
// reload too, once its API answers (skipped, the VCP kept the file it
// read: a harness fault, not the router's).
func reloadVCPs(mode string, cost uint32) error {
	var errs []error
	for _, v := range demo.VCPs {
		path := filepath.Join(demo.RunDir, v+".yaml")
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		cfg := regexp.MustCompile(`(?m)^mode: \w+$`).ReplaceAllString(string(b), "mode: "+mode)
		withCost := "${1}${2}"
		if cost != 0 {
			withCost = fmt.Sprintf("${1}, cost: %d${2}", cost)
		}
		cfg = vcpOSPF.ReplaceAllString(cfg, withCost)
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			return err
		}
	}
	for _, v := range demo.VCPs {
		start := time.Now()
		for {
			_, err := vcpapi.Local(v, "").Reload(false)
			if err == nil {
				break
			}
			if time.Since(start) > 2*opWait {
				errs = append(errs, fmt.Errorf("%s: %w", v, err))
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return errors.Join(errs...)
}

// check says how the router differs from what the operator last asked.
func (o *soakOps) check() error {
	active, err := bench.ActiveVCP()
	if err != nil {
		return err
	}
	es, err := vcpapi.Local(active, "").Elements()
	if err != nil {
		return fmt.Errorf("%s: %w", active, err)
	}
	var diffs []string
	macs := map[string]string{}
	for _, e := range es {
		if e.Role != "router" || !slices.Contains(demo.Backends, e.Name) {
			continue
		}
		macs[e.Name] = e.MAC
		if e.Drained != (e.Name == o.drained) {
			diffs = append(diffs, fmt.Sprintf("%s says %s drained %v", active, e.Name, e.Drained))
		}
		if e.Name == o.weighted && e.Capacity != o.weight {
			diffs = append(diffs, fmt.Sprintf("%s gives %s %d Mbit/s, set %d", active, e.Name, e.Capacity, o.weight))
		}
	}
	for _, lb := range demo.LBs {
		st, err := demo.LBStatus(lb)
		if err != nil {
			diffs = append(diffs, fmt.Sprintf("%s: %v", lb, err))
			continue
		}
		if st.Table.Mode != o.mode {
			diffs = append(diffs, fmt.Sprintf("%s balances in mode %s, the file's is %s", lb, st.Table.Mode, o.mode))
		}
		if o.drained != "" && st.Table.Shares[macs[o.drained]] > 0 {
			diffs = append(diffs, fmt.Sprintf("%s's table gives drained %s %d slots", lb, o.drained, st.Table.Shares[macs[o.drained]]))
		}
	}
	{
		cost := cmp.Or(o.cost, 10) // BIRD's, without one in the file (vcp/bird.go)
		out, err := exec.Command("birdc", "-s", filepath.Join(demo.RunDir, active, "bird.ctl"), "show", "ospf", "interface").Output()
		if err != nil {
			diffs = append(diffs, fmt.Sprintf("birdc show ospf interface on %s: %v", active, err))
		} else if want := fmt.Sprintf("Cost: %d\n", cost); strings.Count(string(out), want) < 2 { // OSPFv2's and OSPFv3's
			diffs = append(diffs, fmt.Sprintf("%s's OSPF interfaces not at cost %d: %q", active, cost, costs(string(out))))
		}
	}
	if diffs != nil {
		return errors.New(strings.Join(diffs, "; "))
	}
	return nil
}

// untilOpsHeld checks the operator's state until it holds, for up to
// opWait (a table is pushed within a hello interval, a takeover's within
// a second or two); the last difference if it never does.
func untilOpsHeld(o *soakOps) error {
	start := time.Now()
	for {
		err := o.check()
		if err == nil || time.Since(start) > opWait {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// costs are the Cost lines of `birdc show ospf interface`.
func costs(out string) []string {
	var c []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "Cost:") {
			c = append(c, strings.TrimSpace(l))
		}
	}
	return c
}

// restore puts the operator's state back as the lab began: nothing
// drained or weighted, mode flowlet, no OSPF cost.
func (o *soakOps) restore() error {
	var errs []error
	if o.drained != "" {
		errs = append(errs, onActive(func(c *vcpapi.Client) error { return c.Drain(o.drained, false) }))
	}
	if o.weighted != "" {
		errs = append(errs, onActive(func(c *vcpapi.Client) error { return c.Weight(o.weighted, 0) }))
	}
	if o.mode != "flowlet" || o.cost != 0 {
		errs = append(errs, reloadVCPs("flowlet", 0))
	}
	return errors.Join(errs...)
}
