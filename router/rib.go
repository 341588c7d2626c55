package router

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/router/routerapi"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// The RIB feed: the back-end takes its routes from the VCP by iBGP (the
// RIB is distributed, every back-end computes its own FIB). The VCP's
// routing suite (BIRD) is the route reflector; the back-end is its client,
// a BGP speaker that only receives (RFC 4271), with BGP's own messages
// encoded and decoded by GoBGP's packet library.
//
// It is not a whole BGP implementation because it needs so little of one:
// one neighbour, two address families (IPv4 and, by MP-BGP over the same
// session, IPv6 unicast: RFC 4760), nothing to send. What it does have:
//   - ADD-PATH receive (RFC 7911): the suite sends every path it has, and
//     the paths equal on LOCAL_PREF, AS_PATH length, ORIGIN and MED to the
//     best are the route's next hops, so ECMP survives the trip;
//   - graceful restart (RFC 4724) as helper: when the session goes, the
//     routes stay (stale) for the suite's restart time; when it comes back,
//     what is sent again replaces them, and at End-of-RIB whatever was not
//     sent again goes. The FIB changes route by route, never reloaded, so a
//     resync changes nothing that did not change.
//
// Its session is rib_session.go's, decoding and best path rib_update.go's,
// memory upkeep rib_memory.go's. An embedded GoBGP server would hold a
// second copy of the table in its own RIB (docs/benchmarks.md measured
// 0.8–1.0 GB a back-end with one).

// RIBConfig is the iBGP session with the VCP.
type RIBConfig struct {
	Neighbor netip.Addr `yaml:"neighbor" msr:"required"` // the VCP's address on the interconnect
	ASN      uint32     `yaml:"asn" msr:"required"`      // the router's AS (iBGP)
	RouterID netip.Addr `yaml:"router_id"`               // default: this host's interconnect address
	// password is the session's TCP-MD5 key (RFC 2385), derived from the
	// deployment key (dist.Key.RIBPassword) as the VCP derives it: a host
	// on the interconnect without the key can neither open the feed nor
	// reset it. The agent sets it.
	password string
}

// Timers of the session: the VCP's takeover must be noticed in seconds.
const (
	ribHoldTime     = 9 // seconds; keepalives every third of what is agreed
	ribConnectRetry = time.Second
	ribRestartTime  = 120 // seconds we ask the suite to keep our routes
)

// ribPath is one path of a prefix, as the suite sent it.
// Its fields are in the order that packs it in 48 bytes (a full table
// holds one for each of 600,000 prefixes; 56 took 64).
type ribPath struct {
	nh        netip.Addr
	id        uint32 // ADD-PATH path identifier (0 without ADD-PATH)
	localPref uint32
	med       uint32
	asLen     uint16
	linkVLAN  uint16      // a link-local next hop's port VLAN (origin.go's lcLinkVLAN)
	from      routeOrigin // where the suite learned it (origin.go)
	origin    uint8
	stale     bool // from before the session came back (graceful restart)
	// link: from the VCP's LINK_ROUTES (setLinkRoutes), not the session:
	// a route via a link-local next hop the suite's BGP cannot carry
	// (FRR's OSPFv3 and RIPng). The session's loss and End-of-RIB leave
	// it; its id is its place among its prefix's link paths.
	link bool
}

// ribFeed runs the session and keeps every prefix's paths.
type ribFeed struct {
	cfg      *RIBConfig
	routerID netip.Addr
	log      *slog.Logger
	add      func(netip.Prefix, []netip.Addr) error
	del      func(netip.Prefix) error
	cancel   context.CancelFunc
	done     chan struct{}

	mu     sync.Mutex
	paths  *ribStore
	nPaths int // paths in paths, and how many of them are stale (stale6: IPv6's)
	nStale int
	stale6 int
	// staleUntil: after a session loss, when the stale paths go if no
	// End-of-RIB has swept them (zero: none stale).
	staleUntil time.Time
	st         routerapi.RIBStatus
	// refusedFor: the causes of refused routes logged already.
	refusedFor map[string]bool
	// synced: the suite's first End-of-RIB came; the FIB holds the table.
	// Read without f.mu: the hellos ask it (ready), and f.mu is held
	// through a whole UPDATE's routes (a full table's withdrawal: 300-500
	// ms a message on the soak's busy machine, and the hello waited).
	synced atomic.Bool
	// arriving is called when a session is established (a table is to
	// arrive: tableArriving), release at the first End-of-RIB after it
	// that leaves nothing stale with releaseMin paths held or more
	// (tableHeld); nil: nothing. arrived: a session was established and
	// its table's release is still to come.
	arriving, release func()
	releaseMin        int
	arrived           bool
	lastRelease       time.Time
	releases          uint64 // made so far (st.Release's count)
	// releaseEvery is keepReleased's period (heldRelease).
	releaseEvery time.Duration
	// families: the address families the session carries (bit 0 IPv4,
	// bit 1 IPv6: those the suite's OPEN agreed to); eors: those whose
	// End-of-RIB has come on it. tableArrived is when the last of them
	// came (Unix nanoseconds, read without f.mu: RoutesDigest), the
	// suite's table then whole in the FIB; 0 while none has, or the
	// session is down.
	families, eors uint8
	tableArrived   atomic.Int64
}

// family is a prefix's address family as the feed keys what is per
// family (End-of-RIB, stale paths): true for IPv6.
func family(p netip.Prefix) bool { return p.Addr().Is6() }

// startRIB starts the session; routes go to the FIB through add and del.
// held are routes the FIB holds from before the feed (holdStale).
func startRIB(ctx context.Context, cfg *RIBConfig, routerID netip.Addr, log *slog.Logger,
	add func(netip.Prefix, []netip.Addr) error, del func(netip.Prefix) error, held map[netip.Prefix][]netip.Addr) (*ribFeed, error) {
	if !routerID.Is4() {
		return nil, fmt.Errorf("RIB feed: router id %v: an IPv4 address", routerID)
	}
	ctx, cancel := context.WithCancel(ctx)
	f := &ribFeed{cfg: cfg, routerID: routerID, log: log.With("rib", cfg.Neighbor), add: add, del: del,
		cancel: cancel, done: make(chan struct{}), paths: newRIBStore(), refusedFor: map[string]bool{},
		arriving: tableArriving, release: tableHeld, releaseMin: releaseMin, releaseEvery: heldRelease}
	f.st.Neighbor, f.st.State = cfg.Neighbor.String(), "connecting"
	f.holdStale(held)
	go f.run(ctx)
	go f.keepReleased(ctx)
	return f, nil
}

// holdStale takes routes the FIB holds from before the feed (a previous
// run's, adopted, or an ended feed's) as stale paths, as graceful restart
// keeps a restarting speaker's forwarding state (RFC 4724 §4.1): the
// suite sends again what it still has, and at its End-of-RIB the rest go,
// or after ribRestartTime without one, so that a route withdrawn while
// no feed ran does not stay in the FIB. Ranked below any path the suite
// sends (the worst origin, no LOCAL_PREF), one forwards only until
// then.
func (f *ribFeed) holdStale(held map[netip.Prefix][]netip.Addr) {
	if len(held) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for p, gws := range held {
		ps := make([]ribPath, 0, len(gws))
		for _, gw := range gws {
			ps = append(ps, ribPath{nh: gw, from: routeOrigin{rank: math.MaxUint16}, stale: true})
		}
		f.paths.put(p, ps)
		f.nPaths += len(ps)
		f.nStale += len(ps)
		if family(p) {
			f.stale6 += len(ps)
		}
	}
	f.staleUntil = time.Now().Add(ribRestartTime * time.Second)
	f.log.Info("RIB feed: routes held from before it, stale until its End-of-RIB", "prefixes", len(held), "paths", f.nStale)
}

// Stop ends the session (the routes stay in the FIB).
func (f *ribFeed) Stop() {
	f.cancel()
	<-f.done
}

// Synced says whether the suite's End-of-RIB came once: the FIB holds
// its table.
func (f *ribFeed) Synced() bool { return f.synced.Load() }

// Status reports the session and the paths held.
func (f *ribFeed) Status() routerapi.RIBStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.st
	s.Prefixes, s.Paths, s.Stale = f.paths.len(), f.nPaths, f.nStale
	s.TableArrived = f.TableArrived()
	return s
}

// TableArrived is when the session's table arrived whole, its End-of-RIB
// come for every family it carries (RFC 3339, nanoseconds); "" while it
// has not, or there is no session.
func (f *ribFeed) TableArrived() string { return routerapi.Stamp(unixNano(f.tableArrived.Load())) }

func (f *ribFeed) run(ctx context.Context) {
	defer close(f.done)
	for ctx.Err() == nil {
		err := f.session(ctx)
		if ctx.Err() != nil {
			return
		}
		f.mu.Lock()
		was := f.st.State
		f.st.State, f.st.LastError = "connecting", err.Error()
		f.tableArrived.Store(0)
		f.mu.Unlock()
		if was == "established" {
			f.log.Warn("RIB feed lost", "err", err)
			f.sessionLost()
		}
		select {
		case <-ctx.Done():
		case <-time.After(ribConnectRetry):
		}
		f.sweepIfExpired()
	}
}

// sessionLost keeps the routes as stale if the suite does graceful
// restart, for its restart time; else they go now.
func (f *ribFeed) sessionLost() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.st.GR {
		f.nStale, f.stale6 = 0, 0
		for p, shared := range f.paths.all() {
			ps := slices.Clone(shared)
			for i := range ps {
				if !ps[i].link {
					ps[i].stale = true
					f.nStale++
					if family(p) {
						f.stale6++
					}
				}
			}
			f.paths.put(p, ps)
		}
		f.staleUntil = time.Now().Add(ribRestartTime * time.Second)
		return
	}
	for p, ps := range f.paths.all() {
		links := slices.DeleteFunc(slices.Clone(ps), func(r ribPath) bool { return !r.link })
		f.nPaths -= len(ps) - len(links)
		f.set(p, links)
	}
	f.nStale, f.stale6 = 0, 0
}

func (f *ribFeed) sweepIfExpired() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.staleUntil.IsZero() && time.Now().After(f.staleUntil) {
		f.log.Warn("RIB feed: graceful restart time over, stale routes go")
		f.sweepStale(false)
		f.sweepStale(true)
	}
}

// sweepStale removes every path of one family (v6: IPv6) not sent again
// since the session came back (that family's End-of-RIB, or the restart
// time over). Call with f.mu held.
//
// With none of the family's paths stale it has nothing to do, and does
// not go over the table: after a takeover's refresh that sent every route
// again, the IPv4 End-of-RIB's sweep of 600,000 prefixes held f.mu, and
// the FIB's last word on the table, 0.1-1 s on the soak's busy machine.
func (f *ribFeed) sweepStale(v6 bool) {
	if v6 && f.stale6 == 0 || !v6 && f.nStale-f.stale6 == 0 {
		if f.nStale == 0 {
			f.staleUntil = time.Time{}
		}
		return
	}
	for p, ps := range f.paths.all() {
		if family(p) != v6 {
			continue
		}
		fresh := slices.DeleteFunc(slices.Clone(ps), func(r ribPath) bool { return r.stale })
		if gone := len(ps) - len(fresh); gone > 0 || len(fresh) == 0 {
			f.nPaths, f.nStale = f.nPaths-gone, f.nStale-gone
			if v6 {
				f.stale6 -= gone
			}
			f.set(p, fresh)
		}
	}
	if f.nStale == 0 {
		f.staleUntil = time.Time{}
	}
}

// update applies one UPDATE (decodeUpdate): withdrawals, then the
// announced paths; an End-of-RIB sweeps its family's stale paths.
func (f *ribFeed) update(msg *bgp.BGPUpdate) {
	came := time.Now() // before the lock: the wait for it is the FIB's lag too
	u := decodeUpdate(msg, f.cfg.ASN)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st.Updates++
	if u.eor >= 0 {
		n := f.paths.len() - f.paths.len6() // the family's prefixes
		if u.eor == 1 {
			n = f.paths.len6()
		}
		f.log.Info("RIB feed: End-of-RIB", "family", []string{"ipv4", "ipv6"}[u.eor], "prefixes", n)
		if u.eor == 0 {
			f.synced.Store(true)
		}
		f.sweepStale(u.eor == 1)
		if f.eors |= 1 << u.eor; f.eors&f.families == f.families && f.tableArrived.Load() == 0 {
			f.tableArrived.Store(came.UnixNano())
		}
		if f.holdsBigTable() && f.arrived {
			f.arrived, f.lastRelease = false, time.Now()
			go f.releaseNow()
		}
		return
	}
	for _, w := range u.withdrawn {
		p, ok := prefixOf(w.NLRI)
		if !ok {
			continue
		}
		ps := f.paths.get(p)
		if i := slices.IndexFunc(ps, func(r ribPath) bool { return !r.link && r.id == w.ID }); i >= 0 {
			f.nPaths--
			if ps[i].stale {
				f.unstale(p)
			}
			f.set(p, slices.Delete(ps, i, i+1))
		}
	}
	for _, a := range u.announced {
		p, ok := prefixOf(a.nlri.NLRI)
		linkLocal := a.nh.Is6() && a.nh.IsLinkLocalUnicast() && u.attr.linkVLAN != 0
		if !ok || a.nh.Is6() != family(p) || !a.nh.IsGlobalUnicast() && !linkLocal {
			continue // no next hop of its family on a port's subnet or link: nothing to forward to
		}
		r := u.attr
		r.id, r.nh = a.nlri.ID, a.nh
		if linkLocal {
			r.nh = a.nh.WithZone(strconv.Itoa(int(u.attr.linkVLAN))) // the port's VLAN names the link
		}
		ps := f.paths.get(p)
		i := slices.IndexFunc(ps, func(x ribPath) bool { return !x.link && x.id == a.nlri.ID })
		if i < 0 {
			// A new suite's refresh sends the routes again under ids of
			// its own: a stale path via the same next hop is the route
			// sent again, and the new path takes its place. Appended
			// beside it instead, a full table's refresh made each
			// prefix's array anew (and the End-of-RIB's sweep again),
			// the heap left spread over half-used spans: the back-ends'
			// resident memory rose a tenth after each takeover.
			i = slices.IndexFunc(ps, func(x ribPath) bool { return x.stale && x.nh == r.nh })
		}
		if i >= 0 {
			if ps[i].stale {
				f.unstale(p)
			}
			ps[i] = r
		} else {
			f.nPaths++
			ps = append(ps, r)
		}
		f.set(p, ps)
	}
}

// unstale counts one of p's stale paths gone or sent again. Call with f.mu
// held.
func (f *ribFeed) unstale(p netip.Prefix) {
	f.nStale--
	if family(p) {
		f.stale6--
	}
}

// set records a prefix's paths and applies its best ones. Call with f.mu
// held.
func (f *ribFeed) set(p netip.Prefix, ps []ribPath) {
	if len(ps) == 0 && !f.paths.has(p) {
		return
	}
	f.paths.put(p, ps)
	f.apply(p, bestHops(ps))
}

// apply puts a prefix's next hops in the FIB, or removes it.
func (f *ribFeed) apply(p netip.Prefix, hops []netip.Addr) {
	if len(hops) == 0 {
		if err := f.del(p); err != nil {
			f.log.Warn("RIB withdraw", "prefix", p, "err", err)
		}
		return
	}
	if err := f.add(p, hops); err != nil {
		// Counted, and logged once per cause: a full table refuses every
		// route after the first, and a line for each would cost more
		// than the routes.
		f.st.Refused++
		cause := err // the innermost error: ErrFIB6Full, ErrNoPort, ... without the route's own words
		for inner := errors.Unwrap(cause); inner != nil; inner = errors.Unwrap(cause) {
			cause = inner
		}
		if !f.refusedFor[cause.Error()] {
			f.refusedFor[cause.Error()] = true
			f.log.Warn("RIB route refused (the next refused for this cause are counted, not logged: msr router status)", "prefix", p, "via", hops, "err", err)
		}
	}
}

// bestOrigin is where the suite learned p's best path, if the feed has p.
func (f *ribFeed) bestOrigin(p netip.Prefix) (routeOrigin, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if best := bestPaths(f.paths.shared(p)); len(best) > 0 {
		return best[0].from, true
	}
	return routeOrigin{}, false
}

// setLinkRoutes makes routes the feed's link paths (ribPath.link), in
// place of the ones it had: the VCP's whole set (LINK_ROUTES). Each is
// ranked with the session's paths of its prefix by the suite's distance,
// as the suite ranked them, its next hop the neighbour's link-local
// address on the port of its VLAN.
func (f *ribFeed) setLinkRoutes(routes []dist.LinkRoute) {
	want := map[netip.Prefix][]ribPath{}
	for _, r := range routes {
		if r.Check() != nil {
			continue
		}
		ps := want[r.Prefix]
		ps = append(ps, ribPath{nh: r.Via.WithZone(strconv.Itoa(int(r.VLAN))), id: uint32(len(ps)), localPref: 100, linkVLAN: r.VLAN,
			from: routeOrigin{code: r.Origin, rank: uint16(r.Distance), distance: true}, link: true})
		want[r.Prefix] = ps
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	changed := 0
	for p, ps := range f.paths.all() {
		if _, kept := want[p]; kept || !slices.ContainsFunc(ps, func(r ribPath) bool { return r.link }) {
			continue
		}
		rest := slices.DeleteFunc(slices.Clone(ps), func(r ribPath) bool { return r.link })
		f.nPaths -= len(ps) - len(rest)
		f.set(p, rest)
		changed++
	}
	for p, links := range want {
		ps := f.paths.shared(p)
		rest := slices.DeleteFunc(slices.Clone(ps), func(r ribPath) bool { return r.link })
		had := slices.DeleteFunc(slices.Clone(ps), func(r ribPath) bool { return !r.link })
		if slices.Equal(had, links) {
			continue
		}
		f.nPaths += len(links) - len(had)
		f.set(p, append(rest, links...))
		changed++
	}
	if changed > 0 {
		f.log.Info("RIB feed: link-local routes from the VCP", "routes", len(routes), "prefixes_changed", changed)
	}
}
