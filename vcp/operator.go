package vcp

import (
	"fmt"
	"time"

	"github.com/msr-router/msr/dist"
)

// The operator's word on a back-end (drain, weight), versioned so that
// it outlives a VCP takeover: the back-ends keep the newest and report it
// in their hellos.

// operatorState is what the operator said of the back-ends, by name, as
// this VCP holds it: drained, capacities set from the console
// (SetCapacity), and the version of each back-end's pair
// (dist.BackendConfig.OperatorVersion): an operator's change here takes
// one above every one seen (nextOperatorVersion), and a hello with a
// newer one, sent the change through another VCP, is taken even while
// active.
type operatorState struct {
	drained    map[string]bool
	capacities map[string]uint32
	versions   map[string]uint64
}

func newOperatorState() operatorState {
	return operatorState{drained: map[string]bool{}, capacities: map[string]uint32{}, versions: map[string]uint64{}}
}

// adoptOperator takes what the operator asked of a back-end (drained, a
// weight) from its hello: the back-end keeps what the active VCP sent it
// (BACKEND_CONFIG), so a standby follows it all along and has it when it
// takes over, and an active VCP takes it for a back-end it hears for the
// first time (it started after the operator spoke), or one whose version
// of them is newer than this VCP's (another VCP was told later: a split
// brain). Call with a.mu held.
func (a *Agent) adoptOperator(h *dist.Hello) {
	a.op.versions[h.Name] = h.OperatorVersion
	a.op.drained[h.Name] = h.Flags&dist.HelloFlagDrained != 0
	if h.Flags&dist.HelloFlagCapacitySet != 0 {
		a.op.capacities[h.Name] = h.Capacity
	} else {
		delete(a.op.capacities, h.Name)
	}
}

// Drain takes a back-end out of every table (no new flows to it), or puts
// it back. The back-end is told, keeps it and says so in its hellos
// (configureBackend, adoptOperator): the drain outlives this VCP.
func (a *Agent) Drain(name string, drain bool) error {
	return a.operate(name, func() { a.op.drained[name] = drain })
}

// SetCapacity sets a back-end's capacity, so its weight, until the config
// is reloaded (0: back to the config's or its own). The back-end is told
// and keeps it, as a drain: a VCP that takes over has it.
func (a *Agent) SetCapacity(name string, mbps uint32) error {
	return a.operate(name, func() {
		if mbps == 0 {
			delete(a.op.capacities, name)
		} else {
			a.op.capacities[name] = mbps
		}
	})
}

// operate makes an operator's change to the back-end name (change, called
// with a.mu held), stamps it with a new version, and waits until the
// back-end keeps it. A standby refuses: the active VCP holds the state.
func (a *Agent) operate(name string, change func()) error {
	a.mu.Lock()
	if !a.active {
		a.mu.Unlock()
		return errStandby
	}
	e := a.elements.named(dist.RoleRouter, name)
	if e == nil {
		a.mu.Unlock()
		return fmt.Errorf("no back-end %q", name)
	}
	change()
	a.nextOperatorVersion(name, time.Now())
	a.mu.Unlock()
	return a.untilBackendKeeps(e)
}

// nextOperatorVersion stamps an operator's change to a back-end's drain
// or weight: its milliseconds since 1970, or one above the version this
// VCP holds where that is higher (a clock stepped back), so that the
// change is newer than every one before it, whichever VCP took them.
// Call with a.mu held.
func (a *Agent) nextOperatorVersion(name string, now time.Time) uint64 {
	v := max(uint64(now.UnixMilli()), a.op.versions[name]+1)
	a.op.versions[name] = v
	return v
}

// keptWait bounds how long the console waits for a back-end to show the
// drain or weight it was sent.
const keptWait = 2 * time.Second

// untilBackendKeeps sends the back-end its settings at once and waits
// until its hello shows the operator's drain and weight: only then does
// the console say done, for only then do they outlive this VCP (a VCP
// killed between the console's answer and its next push lost an undrain:
// the back-end still said drained, and the VCP that took over believed
// it; msr soak, finding 12). A back-end not heard waits as long for it to
// be heard again: this VCP, itself stalled, may have just found every
// element silent, a moment before their queued hellos came (msr soak run
// 31 lost an undrain so, answered at once in that moment: finding 31). A
// back-end not heard within keptWait (dead), or a VCP that configures
// none (no external ports), keeps them in this VCP alone.
func (a *Agent) untilBackendKeeps(e *element) error {
	a.mu.Lock()
	configures := len(a.cfg.ExternalPorts) > 0 && a.conn != nil
	a.mu.Unlock()
	if !configures {
		return nil
	}
	pushed := false
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		a.mu.Lock()
		if e.alive && !pushed {
			if p := a.backendPushes[e.id]; p != nil {
				p.sent = time.Time{} // now, not at the next hello interval
			}
			a.configureBackend(e, time.Now())
			pushed = true
		}
		m := &dist.BackendConfig{Drained: a.op.drained[e.hello.Name], Capacity: a.op.capacities[e.hello.Name], OperatorVersion: a.op.versions[e.hello.Name]}
		kept := e.alive && operatorApplied(e.hello, m)
		a.mu.Unlock()
		switch {
		case kept:
			return nil
		case time.Since(start) <= keptWait:
		case !pushed:
			return nil // dead: it is sent when the back-end is heard again
		default:
			return fmt.Errorf("back-end %s did not show the change within %v: it will be sent again, check with msr ctl elements", e.hello.Name, keptWait)
		}
	}
}
