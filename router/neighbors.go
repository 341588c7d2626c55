package router

import (
	"bytes"
	"net"
	"net/netip"
	"time"

	"github.com/msr-router/msr/dist"
)

// What a back-end believes of its neighbours on the external ports, and
// from whom (docs/operations.md, "Hardening"; RFC 4861 §7.2.5; the
// reasoning of Dynamic ARP Inspection). Every ARP reply and Neighbor
// Advertisement from outside reaches every back-end (the LBs relay them
// all), so a host on a port must not be able to name itself any
// address it likes:
//
//   - an entry is made only from an answer to a question the router
//     asked within askWindow: this back-end's request, or another's it
//     saw on the interconnect (their requests are flooded to every
//     back-end), so an unsolicited reply or gratuitous ARP makes none;
//   - an answer that repeats an entry's MAC refreshes it;
//   - one that names another MAC (a hijack, or a host that really
//     changed its NIC) starts a probe: the old MAC is asked directly,
//     probeTries times probeWait apart; if it answers, the change is
//     refused (neigh_change_refused), if it stays silent, the new MAC
//     takes the entry (neigh_changed). An advertisement without the
//     Override flag changes nothing (RFC 4861 §7.2.5);
//   - each port holds at most its share of a family's table
//     (neighborLimit): a scan that makes the router ask for every address
//     of a /64, answered by an accomplice, fills only its port's share;
//     there, a next hop of the FIB takes the place of the entry longest
//     unheard that is not one, and anything else is refused
//     (neigh_port_full).
const (
	askWindow  = 5 * time.Second // longer than arpTries × arpRetry
	probeWait  = time.Second
	probeTries = 2
	// maxAsked bounds the questions remembered: beyond, a question is
	// not remembered and its answer makes no entry (neigh_asked_full).
	maxAsked = 16384
)

// claim is what an ARP reply or Neighbor Advertisement says: that key's
// address is at mac. override is false for an advertisement without the
// Override flag.
type claim struct {
	key      NeighborKey
	mac      net.HardwareAddr
	override bool
}

// neighProbe is a MAC change waiting for the old MAC to answer.
type neighProbe struct {
	old, new net.HardwareAddr
	sent     time.Time
	tries    int
}

// asked records that the router asked for key at now. Call with a.neighMu
// held.
func (a *Agent) askedFor(key NeighborKey, now time.Time) {
	if _, ok := a.asked[key]; !ok && len(a.asked) >= maxAsked {
		a.neighCounters["neigh_asked_full"]++
		return
	}
	a.asked[key] = now
}

// wasAsked says whether the router asked for key within askWindow of now.
func (a *Agent) wasAsked(key NeighborKey, now time.Time) bool {
	t, ok := a.asked[key]
	return ok && now.Sub(t) <= askWindow || a.pending[key] != nil
}

// hear applies a claim heard at now; the send it returns sends what was
// held for the neighbour. Call with a.neighMu held, and the send once it is
// released.
func (a *Agent) hear(c claim, etherType uint16, now time.Time) (send func()) {
	nothing := func() {}
	n := a.neigh[c.key]
	switch {
	case n != nil && n.static:
		if !bytes.Equal(n.mac, c.mac) {
			a.neighCounters["neigh_static_kept"]++
		}
		return nothing
	case n == nil:
		if !a.wasAsked(c.key, now) {
			a.neighCounters["neigh_unsolicited"]++
			return nothing
		}
		if !a.roomFor(c.key) {
			a.neighCounters["neigh_port_full"]++
			return nothing
		}
		delete(a.asked, c.key)
		return a.learned(c.key, c.mac, etherType)
	case bytes.Equal(n.mac, c.mac):
		if p := a.probes[c.key]; p != nil {
			delete(a.probes, c.key)
			a.neighCounters["neigh_change_refused"]++
			a.log.Warn("a neighbour's MAC change refused: the old MAC answered", "ip", c.key.IP, "vlan", c.key.VLAN, "mac", n.mac.String(), "claimed", p.new.String())
		}
		return a.learned(c.key, c.mac, etherType)
	case !c.override:
		a.neighCounters["neigh_not_override"]++
		return nothing
	}
	if p := a.probes[c.key]; p != nil {
		p.new = c.mac // the latest claim takes the entry if the old MAC stays silent
		return nothing
	}
	a.probes[c.key] = &neighProbe{old: n.mac, new: c.mac}
	a.probe(c.key, now)
	return nothing
}

// neighborLimit is how many entries of one family a port may hold: an
// equal share of the data path's table.
func (a *Agent) neighborLimit() int {
	return MaxNeighbors / max(len(a.neighPorts), 1)
}

// portFamily names one port's entries of one family, for their count.
type portFamily struct {
	vlan uint16
	v4   bool
}

func familyOf(k NeighborKey) portFamily { return portFamily{k.VLAN, k.IP.Is4()} }

// setNeigh puts an entry in a.neigh, counted. Call with a.neighMu held.
func (a *Agent) setNeigh(k NeighborKey, n *neighbor) {
	if a.neigh[k] == nil {
		a.neighCount[familyOf(k)]++
	}
	a.neigh[k] = n
}

// delNeigh takes an entry out of a.neigh. Call with a.neighMu held.
func (a *Agent) delNeigh(k NeighborKey) {
	if a.neigh[k] != nil {
		a.neighCount[familyOf(k)]--
		delete(a.neigh, k)
	}
}

// roomFor says whether key's port has room for one more entry of its
// family, making it, for a next hop of the FIB, by forgetting the entry
// longest unheard that is not one. Call with a.neighMu held.
func (a *Agent) roomFor(key NeighborKey) bool {
	if a.neighCount[familyOf(key)] < a.neighborLimit() {
		return true
	}
	if !a.isNextHop(key) {
		return false
	}
	var oldest NeighborKey
	var oldestAt time.Time
	for k, e := range a.neigh {
		if familyOf(k) == familyOf(key) && !a.isNextHop(k) && (oldestAt.IsZero() || e.updated.Before(oldestAt)) {
			oldest, oldestAt = k, e.updated
		}
	}
	if oldestAt.IsZero() {
		return false
	}
	a.delNeigh(oldest)
	a.neighbors.SetNeighbor(oldest.IP, oldest.VLAN, nil)
	a.neighCounters["neigh_evicted"]++
	return true
}

// isNextHop says whether key is a gateway of a route in the FIB.
func (a *Agent) isNextHop(key NeighborKey) bool {
	port, ok := a.portOfVLAN(key.VLAN)
	return ok && a.nh != nil && a.nh.has(nhKey{gw: key.IP, port: port.Index})
}

// setStatic takes the operator's static neighbours (STATIC_NEIGHBORS):
// each an entry no claim changes, on a port this back-end serves; one
// that left the set is forgotten, to be learned as any other.
func (a *Agent) setStatic(ns []dist.StaticNeighbor) {
	a.neighMu.Lock()
	want := map[NeighborKey]net.HardwareAddr{}
	for _, n := range ns {
		if _, ok := a.portOfVLAN(n.VLAN); ok {
			want[NeighborKey{n.Addr, n.VLAN}] = n.MAC
		}
	}
	for k, e := range a.neigh {
		if e.static && want[k] == nil {
			a.delNeigh(k)
			a.neighbors.SetNeighbor(k.IP, k.VLAN, nil)
		}
	}
	var sends []func()
	for k, mac := range want {
		if e := a.neigh[k]; e != nil && e.static && bytes.Equal(e.mac, mac) {
			continue
		}
		etherType := uint16(0x0800)
		if k.IP.Is6() {
			etherType = 0x86dd
		}
		delete(a.probes, k)
		sends = append(sends, a.learned(k, mac, etherType))
		if e := a.neigh[k]; e != nil {
			e.static = true
		}
	}
	a.neighMu.Unlock()
	for _, send := range sends {
		send()
	}
}

// probe asks the old MAC of a claimed change directly, once more.
func (a *Agent) probe(key NeighborKey, now time.Time) {
	p := a.probes[key]
	port, ok := a.portOfVLAN(key.VLAN)
	if !ok {
		delete(a.probes, key)
		return
	}
	p.sent, p.tries = now, p.tries+1
	a.neighCounters["neigh_probes"]++
	if key.IP.Is4() {
		a.transmit(p.old, key.VLAN, 0x0806, arpRequest(a.mac, port.Addr.Addr(), key.IP))
		return
	}
	if port.Addr6.IsValid() {
		a.transmit(p.old, key.VLAN, 0x86dd, unicastSolicitation(a.mac, port.Addr6.Addr(), key.IP))
	}
}

// tickProbes asks again, or gives the entry to the new MAC when the old
// one stayed silent through every try. Call with a.neighMu held.
func (a *Agent) tickProbes(now time.Time) (sends []func()) {
	for k, p := range a.probes {
		if now.Sub(p.sent) < probeWait {
			continue
		}
		if p.tries < probeTries {
			a.probe(k, now)
			continue
		}
		delete(a.probes, k)
		if n := a.neigh[k]; n == nil || !bytes.Equal(n.mac, p.old) {
			continue // expired or flushed meanwhile
		}
		a.neighCounters["neigh_changed"]++
		a.log.Info("a neighbour's MAC changed: the old MAC stayed silent", "ip", k.IP, "vlan", k.VLAN, "old", p.old.String(), "new", p.new.String())
		etherType := uint16(0x0800)
		if k.IP.Is6() {
			etherType = 0x86dd
		}
		sends = append(sends, a.learned(k, p.new, etherType))
	}
	for k, t := range a.asked {
		if now.Sub(t) > askWindow {
			delete(a.asked, k)
		}
	}
	return sends
}

// portOfAddr is the port whose IPv4 subnet (or, for IPv6, whose subnet
// or link) on vlan holds ip, and false for none.
func (a *Agent) portOfAddr(ip netip.Addr, vlan uint16) (*Port, bool) {
	for i := range a.neighPorts {
		p := &a.neighPorts[i]
		if p.VLAN != vlan {
			continue
		}
		if ip.Is4() && p.Addr.Masked().Contains(ip) {
			return p, true
		}
		// On the port's subnet, or link-local on its link (OSPFv3's next
		// hops: the VLAN says which link).
		if ip.Is6() && p.Addr6.IsValid() && (p.Addr6.Masked().Contains(ip) || ip.IsLinkLocalUnicast()) {
			return p, true
		}
	}
	return nil, false
}
