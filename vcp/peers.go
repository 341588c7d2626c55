package vcp

import (
	"fmt"
	"slices"
	"time"

	"github.com/msr-router/msr/dist"
)

// Each LB polices the router's configured neighbours on its ports in
// buckets of their own and checks GTSM on their BGP (lb/peers.go): the
// VCP sends it their set in PEERS (docs/dist.md) when it changes, and
// every backendRefresh anyway, a lost frame or a restarted LB being set
// right within it.

// peersOf are the router's peers on one LB's external ports: its BGP
// peers (and so their BFD), each with its port's VLAN and GTSM, then the
// OSPF and RIP neighbours the suite hears there, as many as PEERS holds.
// Call with a.mu held.
func (a *Agent) peersOf(lb string) []dist.Peer {
	out := []dist.Peer{}
	if a.cfg.Routing == nil {
		return out
	}
	for _, b := range a.cfg.Routing.BGP {
		ep := a.cfg.portOf(b.Neighbor)
		if ep.LB != lb {
			continue
		}
		p := dist.Peer{Addr: b.Neighbor, VLAN: ep.VLAN}
		if b.GTSM() {
			p.Flags |= dist.PeerGTSM
		}
		out = append(out, p)
	}
	for _, n := range a.igpNeighbors {
		on := slices.ContainsFunc(a.cfg.ExternalPorts, func(ep ExternalPortConfig) bool { return ep.LB == lb && ep.VLAN == n.VLAN })
		known := slices.ContainsFunc(out, func(p dist.Peer) bool { return p.Addr == n.Addr && p.VLAN == n.VLAN })
		if on && !known && len(out) < dist.MaxPeers {
			out = append(out, dist.Peer{Addr: n.Addr, VLAN: n.VLAN})
		}
	}
	return out
}

// sendPeers sends one LB its peers when they changed since they were
// last sent, or backendRefresh after. Call with a.mu held.
func (a *Agent) sendPeers(lb *element, p *lbPush, now time.Time) {
	peers := a.peersOf(lb.hello.Name)
	id := fmt.Sprint(peers)
	if id == p.peers && now.Sub(p.peersSent) < backendRefresh {
		return
	}
	if err := a.send(lb.mac, &dist.Peers{Target: lb.id, Peers: peers}); err != nil {
		a.log.Error("PEERS", "lb", lb.hello.Name, "err", err)
		return
	}
	p.peers, p.peersSent = id, now
}
