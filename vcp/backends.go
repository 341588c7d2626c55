package vcp

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/acl"
	"github.com/msr-router/msr/router/routerapi"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// The VCP configures the back-ends from the router's one config as it
// configures the LBs: every back-end gets the router's external
// ports (VLAN, address, MTU, name), the RIB feed to dial and the router's
// ACL in BACKEND_CONFIG and ACL_CONFIG (docs/dist.md), so that a back-end's
// own file holds only its identity and one added at run time needs
// nothing else.

// backendRefresh is how often the VCP sends a back-end its settings
// anyway: a lost frame, or settings its hello cannot show (the ACL), are
// set right within it.
const backendRefresh = 10 * time.Second

// backendPush is what the VCP last sent one back-end.
type backendPush struct {
	id   string // identity of the settings sent
	sent time.Time
	// unapplied counts the sends of the same settings its hellos did not
	// show since: each waits twice as long as the one before.
	unapplied int
}

// backendWarnAfter is how many sends of the same settings a back-end may
// leave unapplied before the VCP says so (once): one that refuses them
// (more ports than its max_ports) is sent them again less and less often.
const backendWarnAfter = 4

// backendSettings are what a back-end should serve: the router's external
// ports in the config's order, named as the router names them, those
// known down so (a port not heard of yet is not: a VCP just started or
// taking over must not withdraw every connected route), and the RIB feed
// when the suite distributes one.
func (a *Agent) backendSettings() (*dist.BackendConfig, *dist.ACLConfig) {
	m := &dist.BackendConfig{}
	lbs := map[string]*element{}
	for _, e := range a.elements {
		if e.hello.Role == dist.RoleLB {
			lbs[e.hello.Name] = e
		}
	}
	for _, ep := range a.cfg.ExternalPorts {
		m.Ports = append(m.Ports, dist.BackendPort{Name: externalPortName(ep, lbs[ep.LB]), VLAN: ep.VLAN, Prefix: ep.Address, Prefix6: ep.Address6, MTU: ep.mtu(),
			URPF: a.cfg.urpfOf(ep), Down: a.ports[ep.VLAN] != nil && !a.ports[ep.VLAN].Up})
	}
	if r := a.cfg.Routing; r != nil && r.Backends != nil {
		m.RIBNeighbor, m.RIBASN = r.Backends.Listen, r.ASN
	}
	if !a.cfg.HasACL {
		return m, nil
	}
	return m, &dist.ACLConfig{Rules: a.cfg.ACLRules}
}

// staticNeighbors are the external ports' static neighbours, the whole
// set (complete has kept it within one frame).
func (a *Agent) staticNeighbors() *dist.StaticNeighbors {
	m := &dist.StaticNeighbors{Neighbors: []dist.StaticNeighbor{}}
	for _, ep := range a.cfg.ExternalPorts {
		for _, n := range ep.Neighbors {
			m.Neighbors = append(m.Neighbors, dist.StaticNeighbor{Addr: n.Address, VLAN: ep.VLAN, MAC: n.mac})
		}
	}
	return m
}

// externalPortName is what the router calls an external port: LB/PORT
// as its LB (nil: not heard) names it in hellos (lb1/e0), or LB/vlanN
// until that LB is heard.
func externalPortName(ep ExternalPortConfig, lb *element) string {
	if lb != nil {
		for _, p := range lb.hello.Ports {
			if bytes.Equal(p.MAC, ep.mac) && p.Name != "" {
				if n := dist.PortName(ep.LB, p.Name); len(n) <= dist.NameLen {
					return n
				}
			}
		}
	}
	if n := fmt.Sprintf("%s/vlan%d", ep.LB, ep.VLAN); len(n) <= dist.NameLen {
		return n
	}
	return fmt.Sprintf("vlan%d", ep.VLAN)
}

// configureBackend sends one back-end its settings when they changed,
// when its hello shows other ports, and every backendRefresh; at most
// once per hello interval. A VCP whose config names no external ports
// knows none to give, and leaves the back-ends to their files. Call with
// a.mu held.
func (a *Agent) configureBackend(r *element, now time.Time) {
	if len(a.cfg.ExternalPorts) == 0 {
		return
	}
	p := a.backendPushes[r.id]
	if p == nil {
		p = &backendPush{}
		a.backendPushes[r.id] = p
	}
	if now.Sub(p.sent) < a.cfg.HelloInterval {
		return
	}
	s := a.backendSnapshotAt(now)
	m := s.m // each back-end's copy: its own target and operator's settings
	m.Target, m.Drained, m.Capacity = r.id, a.op.drained[r.hello.Name], a.op.capacities[r.hello.Name]
	m.OperatorVersion = a.op.versions[r.hello.Name]
	id := s.id + fmt.Sprint(m.Drained, m.Capacity, m.OperatorVersion)
	applied := backendPortsApplied(r.hello, m.Ports, s.digest) && operatorApplied(r.hello, &m)
	unapplied := p.unapplied
	switch {
	case id != p.id || applied:
		unapplied = 0
	case now.Sub(p.sent) < a.cfg.HelloInterval<<min(p.unapplied, 6):
		return
	default:
		unapplied++
	}
	if id == p.id && applied && now.Sub(p.sent) < backendRefresh {
		p.unapplied = unapplied
		return
	}
	if !a.backendBudget.take(now, len(m.Ports)) {
		return // the next tick's
	}
	if p.unapplied = unapplied; unapplied == backendWarnAfter {
		a.log.Warn("a back-end does not serve the settings sent; sent again less often", "backend", r.hello.Name, "ports", len(m.Ports), "sends", unapplied)
	}
	a.backendGeneration++
	pages, err := dist.BackendConfigPages(&m, a.backendGeneration)
	for _, page := range pages {
		if err == nil {
			err = a.send(r.mac, page)
		}
	}
	if err != nil {
		a.log.Error("BACKEND_CONFIG", "backend", r.hello.Name, "err", err)
		return
	}
	if s.acl != nil {
		acl := *s.acl
		acl.Target = r.id
		if err := a.send(r.mac, &acl); err != nil {
			a.log.Error("ACL_CONFIG", "backend", r.hello.Name, "err", err)
			return
		}
	}
	statics := *s.statics
	statics.Target = r.id
	if err := a.send(r.mac, &statics); err != nil {
		a.log.Error("STATIC_NEIGHBORS", "backend", r.hello.Name, "err", err)
		return
	}
	if s.sendLinks {
		pages, err := dist.LinkRoutePages(r.id, s.generation, s.links)
		for _, page := range pages {
			if err == nil {
				err = a.send(r.mac, page)
			}
		}
		if err != nil {
			a.log.Error("LINK_ROUTES", "backend", r.hello.Name, "err", err)
			return
		}
	}
	if id != p.id {
		a.log.Info("back-end configured", "backend", r.hello.Name, "ports", len(m.Ports), "rib", m.RIBNeighbor, "acl_rules", len(a.cfg.ACLRules))
	}
	p.id, p.sent = id, now
}

// linkRoutes are the suite's routes via link-local next hops that its
// RIB feed cannot carry, for LINK_ROUTES (FRR's OSPFv3 and RIPng:
// linkroutes.go); ok is false when there are none to send. Call with
// a.mu held.
func (a *Agent) linkRoutes() (routes []dist.LinkRoute, generation uint32, ok bool) {
	s, has := a.suite.(interface {
		LinkRoutes() ([]dist.LinkRoute, uint32, bool)
	})
	if !has {
		return nil, 0, false
	}
	return s.LinkRoutes()
}

// backendPortsPerTick paces BACKEND_CONFIG: the ports sent to back-ends
// in one tick, at most (about 550 frames; one back-end always goes). A
// thousand ports to 512 back-ends at once is 18,000 frames, which the
// VCP's own hellos would queue behind; paced, they are sent over 3.4 s
// (docs/scaling.md, the VCP at 1,035 ports).
const backendPortsPerTick = 16384

// sendBudget is what one tick may still send.
type sendBudget struct {
	at   time.Time
	left int
}

// take says whether cost fits in the tick now's budget, and takes it;
// the first of a tick always fits.
func (b *sendBudget) take(now time.Time, cost int) bool {
	if !b.at.Equal(now) {
		b.at, b.left = now, backendPortsPerTick
	}
	if cost > b.left && b.left < backendPortsPerTick {
		return false
	}
	b.left -= cost
	return true
}

// backendSnapshot is what every back-end is sent but for its own target
// and operator's settings, computed once a tick rather than once a
// back-end: with a thousand ports and hundreds of back-ends the ports'
// names, digest and identity string are most of the VCP's work.
type backendSnapshot struct {
	at         time.Time
	m          dist.BackendConfig
	acl        *dist.ACLConfig
	statics    *dist.StaticNeighbors
	links      []dist.LinkRoute
	generation uint32
	sendLinks  bool
	digest     uint64 // of m.Ports
	id         string // identity of all the above
}

// backendSnapshotAt is the settings at the tick now, computed at its
// first back-end. Call with a.mu held.
func (a *Agent) backendSnapshotAt(now time.Time) *backendSnapshot {
	if s := a.backendSnap; s != nil && s.at.Equal(now) {
		return s
	}
	m, acl := a.backendSettings()
	s := &backendSnapshot{at: now, m: *m, acl: acl, statics: a.staticNeighbors(), digest: dist.PortsDigest(m.Ports)}
	s.links, s.generation, s.sendLinks = a.linkRoutes()
	s.id = fmt.Sprint(m, acl, s.generation, s.statics)
	a.backendSnap = s
	return s
}

// backendPortsApplied says whether a back-end's hello shows the ports it
// should serve: their digest (of want), or (a back-end from before
// digests, which serves at most MaxPorts-1) its external ports after its
// interconnect port.
func backendPortsApplied(h *dist.Hello, want []dist.BackendPort, digest uint64) bool {
	if h.PortsDigest != 0 {
		return len(want) > 0 && h.PortsDigest == digest
	}
	var got []dist.PortStatus
	for _, p := range h.Ports {
		if p.Role == dist.PortExternal {
			got = append(got, p)
		}
	}
	if len(got) != min(len(want), dist.MaxPorts-1) {
		return false
	}
	for i, g := range got {
		w := want[i]
		if g.VLAN != w.VLAN || g.Prefix != w.Prefix || g.MTU != w.MTU {
			return false
		}
	}
	return true
}

// operatorApplied says whether a back-end's hello shows the operator's
// drain and weight it was sent, and their version: one killed before it
// kept them (its settings file) comes back without, and is sent them
// again at once, before a standby takes its hello's word for them.
func operatorApplied(h *dist.Hello, m *dist.BackendConfig) bool {
	capacitySet := h.Flags&dist.HelloFlagCapacitySet != 0
	return (h.Flags&dist.HelloFlagDrained != 0) == m.Drained && capacitySet == (m.Capacity != 0) && (!capacitySet || h.Capacity == m.Capacity) &&
		h.OperatorVersion == m.OperatorVersion
}

// ACL is the router's ACL with each rule's hits summed over the
// back-ends that apply it (their status shows the same rules), asked of
// each back-end's API.
func (a *Agent) ACL() *vcpapi.ACLView {
	a.mu.Lock()
	v := &vcpapi.ACLView{Configured: a.cfg.HasACL, Rules: []vcpapi.ACLRuleView{}, Backends: []vcpapi.ACLOfBackend{}}
	var want []string
	for i, r := range a.cfg.ACLRules {
		want = append(want, acl.Text(r))
		v.Rules = append(v.Rules, vcpapi.ACLRuleView{Index: i, Rule: want[i]})
	}
	var names []string
	for _, r := range a.elements.sorted(dist.RoleRouter) {
		if r.alive {
			names = append(names, r.hello.Name)
		}
	}
	a.mu.Unlock()
	for _, name := range names {
		b := vcpapi.ACLOfBackend{Name: name}
		c, err := a.elementClient(name)
		var st *routerapi.Status
		if err == nil {
			st, err = routerapi.New(c).Status()
		}
		if err != nil {
			b.Error = err.Error()
			v.Backends = append(v.Backends, b)
			continue
		}
		b.Rules = len(st.ACL)
		if st.Stats != nil && len(st.Stats.ACLPermit) == len(st.ACL) && len(st.Stats.ACLDeny) == len(st.ACL) {
			for i := range st.ACL {
				b.Hits = append(b.Hits, st.Stats.ACLPermit[i]+st.Stats.ACLDeny[i])
			}
		}
		b.Applied = v.Configured && slices.Equal(st.ACL, want) && len(b.Hits) == len(want)
		if b.Applied {
			for i, h := range b.Hits {
				v.Rules[i].Hits += h
			}
		}
		v.Backends = append(v.Backends, b)
	}
	return v
}
