package router

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
)

// The RIB feed: the back-end takes its routes from the VCP by iBGP (seed
// 003: distribute the RIB, every back-end computes its own FIB). The VCP's
// routing suite is the route reflector; here GoBGP, embedded, is its
// client. The suite sends every path it has (ADD-PATH, RFC 7911); GoBGP's
// multipath keeps the equal best ones, so ECMP survives the trip: a route
// goes via the BGP next hops of all of them (which must be on an external
// port's subnet: external peers' addresses); a withdrawal of the last
// removes it. The FIB is changed route by route, never reloaded, so a
// session that comes back resyncs without flapping what did not change.

// RIBConfig is the iBGP session with the VCP.
type RIBConfig struct {
	Neighbor netip.Addr `yaml:"neighbor" msr:"required"` // the VCP's address on the interconnect
	ASN      uint32     `yaml:"asn" msr:"required"`      // the router's AS (iBGP)
	RouterID netip.Addr `yaml:"router_id"`               // default: this host's interconnect address
}

// ribFeed runs the BGP speaker.
type ribFeed struct {
	s   *server.BgpServer
	log *slog.Logger
	// paths are the multipath set of each prefix: path -> its next hop.
	// Only the watch goroutine touches it.
	paths map[netip.Prefix]map[pathKey]netip.Addr
}

// pathKey names one path of a prefix: who sent it, and its ADD-PATH id.
type pathKey struct {
	peer netip.Addr
	id   uint32
}

// startRIB starts the speaker and applies its best paths with add and del.
func startRIB(ctx context.Context, cfg *RIBConfig, routerID netip.Addr, log *slog.Logger,
	add func(netip.Prefix, []netip.Addr) error, del func(netip.Prefix) error) (*ribFeed, error) {
	s := server.NewBgpServer()
	go s.Serve()
	if err := s.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{Asn: cfg.ASN, RouterId: routerID.String(), ListenPort: -1,
		UseMultiplePaths: true}}); err != nil {
		s.Stop()
		return nil, fmt.Errorf("start BGP: %w", err)
	}
	f := &ribFeed{s: s, log: log, paths: map[netip.Prefix]map[pathKey]netip.Addr{}}
	err := s.WatchEvent(ctx, server.WatchEventMessageCallbacks{
		OnBestPath: func(paths []*apiutil.Path, _ time.Time) {
			for _, p := range paths {
				f.apply(p, add, del)
			}
		},
	}, server.WatchBestPath(true))
	if err != nil {
		s.Stop()
		return nil, fmt.Errorf("watch BGP: %w", err)
	}
	peer := &api.Peer{
		Conf: &api.PeerConf{NeighborAddress: cfg.Neighbor.String(), PeerAsn: cfg.ASN},
		// Graceful restart: while the VCP is away the back-end keeps
		// forwarding with the routes it has (RFC 4724).
		GracefulRestart: &api.GracefulRestart{Enabled: true, RestartTime: 120},
		AfiSafis: []*api.AfiSafi{{
			Config:            &api.AfiSafiConfig{Family: &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}, Enabled: true},
			MpGracefulRestart: &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}},
			AddPaths:          &api.AddPaths{Config: &api.AddPathsConfig{Receive: true}},
		}},
		Timers: &api.Timers{Config: &api.TimersConfig{ConnectRetry: 1, HoldTime: 9, KeepaliveInterval: 3}},
	}
	if err := s.AddPeer(ctx, &api.AddPeerRequest{Peer: peer}); err != nil {
		s.Stop()
		return nil, fmt.Errorf("add BGP peer %s: %w", cfg.Neighbor, err)
	}
	return f, nil
}

// apply takes one change of a prefix's multipath set (GoBGP reports the
// paths that joined or changed, and those that left) and sets the route to
// the set's next hops, or removes it when the set is empty.
func (f *ribFeed) apply(p *apiutil.Path, add func(netip.Prefix, []netip.Addr) error, del func(netip.Prefix) error) {
	nlri, ok := p.Nlri.(*bgp.IPAddrPrefix)
	if !ok || !nlri.Prefix.Addr().Is4() {
		return
	}
	prefix, key := nlri.Prefix.Masked(), pathKey{p.PeerAddress, p.RemoteID}
	set := f.paths[prefix]
	if p.Withdrawal {
		delete(set, key)
	} else {
		nh, ok := nextHop(p)
		if !ok {
			return
		}
		if set == nil {
			set = map[pathKey]netip.Addr{}
			f.paths[prefix] = set
		}
		set[key] = nh
	}
	hops := nextHops(set)
	if len(hops) == 0 {
		delete(f.paths, prefix)
		if err := del(prefix); err != nil {
			f.log.Warn("RIB withdraw", "prefix", prefix, "err", err)
		}
		return
	}
	if err := add(prefix, hops); err != nil {
		f.log.Warn("RIB route", "prefix", prefix, "via", hops, "err", err)
	}
}

func nextHop(p *apiutil.Path) (netip.Addr, bool) {
	for _, a := range p.Attrs {
		if nh, ok := a.(*bgp.PathAttributeNextHop); ok {
			return nh.Value, true
		}
	}
	return netip.Addr{}, false
}

// nextHops are a set's distinct next hops, sorted (so the same set is
// the same route), at most ECMPMax.
func nextHops(set map[pathKey]netip.Addr) []netip.Addr {
	var hops []netip.Addr
	for _, nh := range set {
		if !slices.Contains(hops, nh) {
			hops = append(hops, nh)
		}
	}
	slices.SortFunc(hops, func(a, b netip.Addr) int { return a.Compare(b) })
	return hops[:min(len(hops), ECMPMax)]
}

// Stop ends the speaker.
func (f *ribFeed) Stop() { f.s.Stop() }
