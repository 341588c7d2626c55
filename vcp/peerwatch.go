package vcp

import (
	"cmp"
	"context"
	"net/netip"
	"slices"
	"time"
)

// The peer watch follows the suite's external BGP sessions once a second,
// and reads its OSPF and RIP neighbours for the LBs' peer buckets.
// A session the suite shut because its peer sent more prefixes than
// max_prefixes allows (BIRD's import limit, FRR's maximum-prefix) is
// logged, with the peer, its port and the limit, and counted per peer:
// `msr vcp status` and `msr ctl status` show prefix_limit_hits. The suite
// itself restarts the session after max_prefixes_restart, or leaves it
// down until an operator acts.
const peerWatchInterval = time.Second

// watchPeers runs the watch until ctx ends.
func (a *Agent) watchPeers(ctx context.Context) {
	t := time.NewTicker(peerWatchInterval)
	defer t.Stop()
	hit := map[netip.Addr]bool{} // the session is down for its limit now
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		suite := a.currentSuite()
		if suite == nil {
			clear(hit)
			continue
		}
		igp := suite.IGPNeighbors()
		slices.SortFunc(igp, func(x, y IGPNeighbor) int { return cmp.Or(x.Addr.Compare(y.Addr), cmp.Compare(x.VLAN, y.VLAN)) })
		a.mu.Lock()
		a.igpNeighbors = igp
		a.mu.Unlock()
		for _, p := range suite.Protocols() {
			if p.Proto != "BGP" || !p.Neighbor.IsValid() {
				continue
			}
			if p.LimitHit && !hit[p.Neighbor] {
				a.prefixLimitHit(p.Neighbor)
			}
			hit[p.Neighbor] = p.LimitHit
		}
	}
}

// prefixLimitHit logs and counts one shut session.
func (a *Agent) prefixLimitHit(peer netip.Addr) {
	a.mu.Lock()
	a.limitHits[peer.String()]++
	n := a.limitHits[peer.String()]
	routing := a.cfg.Routing
	a.mu.Unlock()
	args := []any{"peer", peer, "times", n}
	if routing != nil {
		args = append(args, "port", routing.PeerPort(peer))
		for _, b := range routing.BGP {
			if b.Neighbor == peer {
				args = append(args, "max_prefixes", b.MaxPrefixes)
				if b.MaxPrefixesRestart > 0 {
					args = append(args, "restart_after", b.MaxPrefixesRestart)
				} else {
					args = append(args, "restart_after", "never: the session stays down until the config changes or the suite restarts")
				}
			}
		}
	}
	a.log.Warn("BGP peer sent more prefixes than max_prefixes: session shut", args...)
}
