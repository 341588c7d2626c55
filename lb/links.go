package lb

import (
	"time"

	"github.com/msr-router/msr/internal/iflink"
)

// The LB's ports as links: their state (carrier, MTU, speed, duplex) is
// the kernel's, read at start and followed through rtnetlink's link
// events, with a poll behind the events. A change sends a hello at once,
// so the VCP learns that an external port went down within a frame's
// time, not a hello interval later (the router's port is then out of
// service: the suite's mirror of it goes down with it).

// linkPoll is how often the ports are read besides the events.
const linkPoll = time.Second

// readLinks reads every port's state.
func (a *Agent) readLinks() {
	for _, p := range a.ports {
		if s, err := iflink.Read(p.name); err == nil {
			p.link = s
		} else {
			a.log.Warn("read port state", "port", a.portName(p), "err", err)
		}
	}
}

// followLinks follows the ports' state until done is closed.
func (a *Agent) followLinks(done <-chan struct{}) {
	names := make([]string, len(a.ports))
	for i, p := range a.ports {
		names[i] = p.name
	}
	if err := iflink.Watch(names, done, a.linkChanged); err != nil {
		a.log.Warn("follow port state: polling only", "err", err)
	}
	iflink.Poll(names, linkPoll, done, a.linkChanged)
}

// linkChanged records a port's new state; a change of its operational
// state is logged and told in a hello at once.
func (a *Agent) linkChanged(s iflink.State) {
	a.mu.Lock()
	var p *agentPort
	for _, q := range a.ports {
		if q.name == s.Name {
			p = q
		}
	}
	if p == nil || p.link == s {
		a.mu.Unlock()
		return
	}
	was := p.link
	p.link = s
	if s.Up() != was.Up() {
		p.linkChanges++
		p.linkSince = time.Now()
	}
	a.mu.Unlock()
	if s.Up() != was.Up() || s.AdminUp != was.AdminUp {
		a.log.Info("port state", "port", a.portName(p), "up", s.Up(), "admin_up", s.AdminUp, "carrier", s.Carrier, "oper", s.OperState)
		a.sendHello()
	}
}
