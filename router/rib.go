package router

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
)

// The RIB feed: the back-end takes its routes from the VCP by iBGP (seed
// 003: distribute the RIB, every back-end computes its own FIB). The VCP's
// routing suite is the route reflector; here GoBGP, embedded, is its
// client. Each best path becomes a route via its BGP next hop (which must be
// on an external port's subnet: an external peer's address); a withdrawal
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
}

// startRIB starts the speaker and applies its best paths with add and del.
func startRIB(ctx context.Context, cfg *RIBConfig, routerID netip.Addr, log *slog.Logger,
	add func(netip.Prefix, []netip.Addr) error, del func(netip.Prefix) error) (*ribFeed, error) {
	s := server.NewBgpServer()
	go s.Serve()
	if err := s.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{Asn: cfg.ASN, RouterId: routerID.String(), ListenPort: -1}}); err != nil {
		s.Stop()
		return nil, fmt.Errorf("start BGP: %w", err)
	}
	f := &ribFeed{s: s, log: log}
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
		Timers:          &api.Timers{Config: &api.TimersConfig{ConnectRetry: 1, HoldTime: 9, KeepaliveInterval: 3}},
	}
	if err := s.AddPeer(ctx, &api.AddPeerRequest{Peer: peer}); err != nil {
		s.Stop()
		return nil, fmt.Errorf("add BGP peer %s: %w", cfg.Neighbor, err)
	}
	return f, nil
}

func (f *ribFeed) apply(p *apiutil.Path, add func(netip.Prefix, []netip.Addr) error, del func(netip.Prefix) error) {
	nlri, ok := p.Nlri.(*bgp.IPAddrPrefix)
	if !ok || !nlri.Prefix.Addr().Is4() {
		return
	}
	if p.Withdrawal {
		if err := del(nlri.Prefix); err != nil {
			f.log.Warn("RIB withdraw", "prefix", nlri.Prefix, "err", err)
		}
		return
	}
	for _, a := range p.Attrs {
		if nh, ok := a.(*bgp.PathAttributeNextHop); ok {
			if err := add(nlri.Prefix, []netip.Addr{nh.Value}); err != nil {
				f.log.Warn("RIB route", "prefix", nlri.Prefix, "via", nh.Value, "err", err)
			}
			return
		}
	}
}

// Stop ends the speaker.
func (f *ribFeed) Stop() { f.s.Stop() }
