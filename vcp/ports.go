package vcp

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/msr-router/msr/dist"
)

// The router's external ports as one box sees them: a port is up while
// the LB holding it is alive and says its link is up (the LB's kernel:
// administratively up with carrier). A change is logged, takes the
// suite's mirror of the port down or up with it (so the suite withdraws
// what it routed through the port, as on a router whose cable is
// pulled), and is told to whoever watches (SNMP's linkDown/linkUp traps,
// the web view's events).

// PortState is an external port's state.
type PortState struct {
	Name string
	VLAN uint16
	// Present: the LB holding the port is alive.
	Present    bool
	Up         bool
	AdminUp    bool
	FullDuplex bool
	SpeedMbps  uint32
	MTU        uint16
	// Since is when Up last changed (the VCP's start until it does);
	// Changes counts the changes.
	Since   time.Time
	Changes uint64
}

// PortEvent is a change of an external port's operational state.
type PortEvent struct {
	Port PortState
	At   time.Time
}

// portsSettle is how long after its start the VCP waits for an LB it has
// not heard yet before it calls that LB's ports down: LBs started with it
// may take longer than one hold time to send their first hello (a lab
// coming up on a busy machine), and a port called down at start-up is a
// linkDown trap and a mirror taken down for nothing.
const portsSettle = 3 * time.Second

// lbGoneGrace is how long an LB may be silent before its ports are
// called down: its data path forwards without its agent (pinned XDP
// programs and maps), so an agent restarting or stalled for a moment is
// not a line card pulled out, and taking the mirrors down for it made
// BIRD drop its BGP sessions on those ports ("Link down"), bgp1's routes
// with them (msr soak, finding 11: an LB's hellos 300 ms late). An LB
// agent killed and started again at once is silent for 0.1 s on a quiet
// machine but took 2.6-3.1 s under the soak's load (finding 15: 2 s was
// not enough, and bgp1's sessions went down for a minute). An LB gone for
// good has its ports down 4 s after its last hello, still within the
// peers' hold times (bgp1's 9 s), which the mechanism is there to beat.
const lbGoneGrace = 4 * time.Second

// followPorts updates the external ports' states from the live LBs'
// hellos; call it with a.mu held. Until portsSettle (or one hold time, if
// longer) after the VCP started it has not heard every LB yet: a port not
// heard of is not declared down before then.
func (a *Agent) followPorts(now time.Time) {
	heard := map[uint16]PortState{}
	for vlan, lp := range a.liveExternalPorts() {
		p := lp.PortStatus
		heard[vlan] = PortState{Name: portName(lp.lb, p), VLAN: vlan, Present: true, Up: p.Up(),
			AdminUp: p.AdminUp(), FullDuplex: p.FullDuplex(), SpeedMbps: p.SpeedMbps, MTU: p.MTU}
	}
	if a.ports == nil {
		a.ports = map[uint16]*PortState{}
	}
	settled := now.Sub(a.started) > max(a.cfg.Hold(), portsSettle)
	for _, ep := range a.cfg.ExternalPorts {
		old := a.ports[ep.VLAN]
		s, ok := heard[ep.VLAN]
		if !ok {
			if old == nil && !settled {
				continue
			}
			if old != nil && a.lbSilentFor(ep.LB, now) < lbGoneGrace {
				continue // its agent restarting or late: the port as it was
			}
			s = PortState{VLAN: ep.VLAN, Name: ep.LB} // its LB is gone: down, as a line card pulled out
			if old != nil {
				s.Name, s.SpeedMbps, s.MTU = old.Name, old.SpeedMbps, old.MTU
			}
		}
		switch {
		case old == nil:
			s.Since = a.started
		case old.Up == s.Up:
			s.Since, s.Changes = old.Since, old.Changes
		default:
			s.Since, s.Changes = now, old.Changes+1
		}
		a.ports[ep.VLAN] = &s
		if old != nil && old.Up == s.Up || old == nil && s.Up {
			continue
		}
		a.log.Info("port state", "port", s.Name, "vlan", s.VLAN, "up", s.Up, "admin_up", s.AdminUp)
		a.event("port %s %s", s.Name, map[bool]string{true: "up", false: "down"}[s.Up])
		if a.mirrors != nil {
			a.links.want(s.VLAN, s.Up, s.Name)
		}
		ev := PortEvent{Port: s, At: now}
		for _, w := range a.portWatchers {
			select {
			case w <- ev:
			default: // a watcher that does not keep up misses events, never blocks the VCP
			}
		}
	}
}

// lbSilentFor is how long the LB named lb has not been heard (forever:
// never). Call it with a.mu held.
func (a *Agent) lbSilentFor(lb string, now time.Time) time.Duration {
	silent := time.Duration(1<<63 - 1)
	for _, e := range a.elements {
		if e.hello.Role == dist.RoleLB && e.hello.Name == lb {
			silent = min(silent, now.Sub(e.last))
		}
	}
	return silent
}

// livePort is an external port as its LB's last hello tells it.
type livePort struct {
	dist.PortStatus
	lb string // the LB's name
}

// liveExternalPorts are the external ports of the LBs alive, by VLAN;
// call it with a.mu held.
func (a *Agent) liveExternalPorts() map[uint16]livePort {
	live := map[uint16]livePort{}
	known := a.knownPorts()
	for _, lb := range a.elements.sorted(dist.RoleLB) {
		if !lb.alive {
			continue
		}
		for _, p := range lb.hello.Ports {
			if p.Role == dist.PortExternal && p.VLAN != 0 && a.portKnown(known, lb.hello.Name, p) {
				live[p.VLAN] = livePort{p, lb.hello.Name}
			}
		}
	}
	return live
}

// lbPort is an external port by its LB and VLAN.
type lbPort struct {
	lb   string
	vlan uint16
}

// knownPorts are the config's external ports.
func (a *Agent) knownPorts() map[lbPort]bool {
	known := make(map[lbPort]bool, len(a.cfg.ExternalPorts))
	for _, ep := range a.cfg.ExternalPorts {
		known[lbPort{ep.LB, ep.VLAN}] = true
	}
	return known
}

// portKnown says whether the config has the external port an LB's hello
// announces. One it does not have (an LB's own file ahead of the
// router's, or an LB claiming another's VLAN) is neither a port of the
// router nor configured: it is counted and logged once, so that it can
// never take a configured port's state or name. Call with a.mu held.
func (a *Agent) portKnown(known map[lbPort]bool, lb string, p dist.PortStatus) bool {
	if known[lbPort{lb, p.VLAN}] {
		return true
	}
	key := fmt.Sprintf("%s VLAN %d", dist.PortName(lb, p.Name), p.VLAN)
	if a.unknownPorts == nil {
		a.unknownPorts = map[string]bool{}
	}
	if !a.unknownPorts[key] {
		a.unknownPorts[key] = true
		a.log.Warn("an LB announces an external port the config does not have: not a port of the router", "port", key)
	}
	return false
}

// WatchPorts returns a channel that receives every change of an external
// port's state from now on.
func (a *Agent) WatchPorts() <-chan PortEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := make(chan PortEvent, 64)
	a.portWatchers = append(a.portWatchers, w)
	return w
}

// PortStates are the external ports' states, by VLAN.
func (a *Agent) PortStates() map[uint16]PortState {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := make(map[uint16]PortState, len(a.ports))
	for v, s := range a.ports {
		m[v] = *s
	}
	return m
}

// mirrorLinks takes the mirrors' link states out of the VCP's lock: the
// ports' states are followed under a.mu (tick), and a mirror's link is
// set by netlink, which waits for the kernel's RTNL lock, for seconds at
// times (docs/reliability.md, finding 19): the VCP, holding a.mu, would
// handle no hello meanwhile, take every element for dead, and the
// standby took over. followPorts now only says what it wants, and
// applyMirrorLinks sets it, the last state of each mirror, outside the
// lock.
type mirrorLinks struct {
	mu    sync.Mutex
	links map[uint16]mirrorLink
	wake  chan struct{}
}

type mirrorLink struct {
	up   bool
	port string // the router's name of the port, for the log
}

func newMirrorLinks() *mirrorLinks {
	return &mirrorLinks{links: map[uint16]mirrorLink{}, wake: make(chan struct{}, 1)}
}

// want records a mirror's link state and wakes applyMirrorLinks.
func (l *mirrorLinks) want(vlan uint16, up bool, port string) {
	l.mu.Lock()
	l.links[vlan] = mirrorLink{up, port}
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default: // already woken: it reads the latest states
	}
}

// forget drops a removed mirror's wanted state.
func (l *mirrorLinks) forget(vlan uint16) {
	l.mu.Lock()
	delete(l.links, vlan)
	l.mu.Unlock()
}

// applyMirrorLinks sets the mirrors' links to what followPorts wants,
// until ctx ends.
func (a *Agent) applyMirrorLinks(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.links.wake:
		}
		a.links.mu.Lock()
		links := maps.Clone(a.links.links)
		a.links.mu.Unlock()
		for vlan, l := range links {
			start := time.Now()
			changed, err := a.mirrors.SetUp(vlan, l.up)
			if err != nil {
				a.log.Warn("mirror", "port", l.port, "err", err)
			}
			if took := time.Since(start); changed && took > time.Second {
				a.log.Warn("mirror's link took long to set (the kernel's RTNL lock)", "port", l.port, "up", l.up, "took", took.Round(time.Millisecond))
			}
		}
	}
}
