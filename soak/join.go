package soak

import (
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/msr-router/msr/bench"
	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// The soak's back-end added and removed: r4, a back-end
// the default lab does not have, joins the running router as an operator
// racks a new machine (demo.AddBackend: the VCP discovers it, configures
// it and feeds it the RIB, and it joins the tables once its FIB holds
// the table), and at the fault's next turn leaves as an operator takes
// one out (drained, out of every table, its agent stopped, its link
// down); then joins again (its link up, its agent started, undrained).
// The goal, either way: nothing lost.

// joinName is the back-end that joins and leaves; joinMAC its MAC
// (demo.AddBackend's).
const (
	joinName = "r4"
	joinMAC  = "02:00:00:00:b0:04"
	// joinWait bounds how long r4 takes to enter every LB's table (its
	// FIB filled: 0.45-0.63 s measured) or to leave them.
	joinWait = 15 * time.Second
)

// backendJoin is r4's state across the soak.
type backendJoin struct {
	msrBin string
	added  bool // r4's host is in the lab
	in     bool // r4 is in the router: running, undrained
}

// turn is the backend-join fault: r4 joining, or leaving if it is in.
func (j *backendJoin) turn() fault {
	what := joinName + " joining"
	if j.in {
		what = joinName + " leaving"
	}
	return &joinFault{join: j, what: what}
}

// A joinFault is r4 joining or leaving; its new agent has a new feed.
type joinFault struct {
	quiet
	join *backendJoin
	what string
}

func (f *joinFault) kind() string      { return "backend-join" }
func (f *joinFault) target() string    { return f.what }
func (f *joinFault) restarts() restart { return restartsFeed }
func (f *joinFault) exclusive() string { return joinName }

// inject joins r4 or takes it out, in turn.
func (f *joinFault) inject(*bench.RouterLab) error {
	if f.join.in {
		return f.join.leave()
	}
	return f.join.join()
}

func (j *backendJoin) join() error {
	if !j.added {
		if err := demo.AddBackend(j.msrBin, joinName, 10000); err != nil {
			return err
		}
		j.added = true
	} else {
		if _, err := demo.Exec(joinName, "ip", "link", "set", "eth0", "up"); err != nil {
			return err
		}
		if _, _, err := lab.Restart(demo.LabName, joinName, "router", syscall.SIGTERM); err != nil {
			return err
		}
		// It kept its drain (its settings): the operator undrains it once
		// the active VCP hears it again. Told before, only that VCP would
		// know it (the back-end, not heard, keeps the drain), and a
		// takeover meanwhile would lose it.
		for start := time.Now(); !heardByActive(joinName); time.Sleep(100 * time.Millisecond) {
			if time.Since(start) > joinWait {
				return fmt.Errorf("the active VCP does not hear %s %v after its agent started", joinName, joinWait)
			}
		}
		if err := onActive(func(c *vcpapi.Client) error { return c.Drain(joinName, false) }); err != nil {
			return err
		}
	}
	j.in = true
	return waitTables(true)
}

func (j *backendJoin) leave() error {
	if err := onActive(func(c *vcpapi.Client) error { return c.Drain(joinName, true) }); err != nil {
		return err
	}
	if err := waitTables(false); err != nil {
		return err
	}
	time.Sleep(time.Second) // the frames on their way through it
	st, err := lab.ReadState(demo.LabName)
	if err != nil {
		return err
	}
	for _, p := range st.Processes {
		if p.Host == joinName && p.Name == "router" && p.Running() {
			syscall.Kill(p.PID, syscall.SIGTERM)
			for start := time.Now(); p.Running(); time.Sleep(10 * time.Millisecond) {
				if time.Since(start) > 5*time.Second {
					return fmt.Errorf("%s's agent still running 5 s after SIGTERM", joinName)
				}
			}
		}
	}
	j.in = false
	_, err = demo.Exec(joinName, "ip", "link", "set", "eth0", "down")
	return err
}

// heardByActive says whether the active VCP hears the element name.
func heardByActive(name string) bool {
	active, err := bench.ActiveVCP()
	if err != nil {
		return false
	}
	st, err := vcpapi.Local(active, "").Status()
	if err != nil {
		return false
	}
	for _, e := range st.Elements {
		if e.Name == name && e.Alive {
			return true
		}
	}
	return false
}

// waitTables waits until r4 is in every LB's table, or in none.
func waitTables(in bool) error {
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		n := 0
		for _, lb := range demo.LBs {
			if st, err := demo.LBStatus(lb); err == nil && st.Table.Shares[joinMAC] > 0 {
				n++
			}
		}
		if in && n == len(demo.LBs) || !in && n == 0 {
			return nil
		}
		if time.Since(start) > joinWait {
			return fmt.Errorf("%s in %d of %d LBs' tables %v after it was to be %s", joinName, n, len(demo.LBs), joinWait, map[bool]string{true: "in", false: "out"}[in])
		}
	}
}

// backends are the back-ends whose FIBs the soak compares: the lab's,
// and r4 while it is in.
func (j *backendJoin) backends() []string {
	if j != nil && j.in {
		return append(slices.Clone(demo.Backends), joinName)
	}
	return demo.Backends
}
