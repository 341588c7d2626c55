package router

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/router/routerapi"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"golang.org/x/sys/unix"
)

// The RIB feed: the back-end takes its routes from the VCP by iBGP (seed
// 003: distribute the RIB, every back-end computes its own FIB). The VCP's
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
// An embedded GoBGP server did this before, at a cost: a full table took
// 7.9 s and 0.8–1.0 GB per back-end (docs/benchmarks.md), two thirds of it
// in GoBGP's own RIB, which duplicated what the FIB holds.

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
	paths  map[netip.Prefix][]ribPath
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

// A table's arrival, a first load or a graceful restart's refresh after a
// takeover, makes garbage: the UPDATEs parsed, the stale paths beside the
// new ones. Go collects it, but keeps the heap it grew to (up to twice the
// live heap, GOGC=100) until its scavenger returns it: a back-end's
// resident memory after four takeovers with a full table stood at 580-654
// MB for a live heap of 220-270 MB (docs/reliability.md). So while a
// table arrives the runtime collects as usual (GOGC=100: the load is not
// slowed by collections), and at the End-of-RIB that ends the arrival of a
// big one it collects and returns the memory at once (one collection,
// 0.3-0.5 s of one CPU with a full table, in its own goroutine), then
// holds the table with heldGCPercent: the heap grows a quarter of the
// live heap between collections, not as much again. Once for every
// arrival, however soon after the last: a session's establishment set
// GOGC=100 again, and a soak's run 19 skipped the release (then a 30 s
// guard) after takeovers 50 s apart, the agents growing 400-424 MB to
// 627-656 MB.
// While it holds the table, the feed has the runtime return its memory
// every heldRelease too (keepReleased): the heap then stays within a
// minute's garbage (hellos, the API, a state save under churn) of the
// live heap, and the resident memory with it, for a collection a minute.
const (
	releaseMin    = 50_000
	heldGCPercent = 25
	heldRelease   = time.Minute
)

// tableArriving and tableHeld are ribFeed's arriving and release.
func tableArriving() { debug.SetGCPercent(100) }

func tableHeld() {
	debug.SetGCPercent(heldGCPercent)
	debug.FreeOSMemory()
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
		cancel: cancel, done: make(chan struct{}), paths: map[netip.Prefix][]ribPath{}, refusedFor: map[string]bool{},
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
		f.paths[p] = ps
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
	s.Prefixes, s.Paths, s.Stale = len(f.paths), f.nPaths, f.nStale
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

// holdsBigTable says (f.mu held) whether the feed, with a release, holds
// a table that has arrived whole (nothing stale) and is big enough to
// release: releaseMin paths or more.
func (f *ribFeed) holdsBigTable() bool {
	return f.release != nil && f.nStale == 0 && f.nPaths >= f.releaseMin
}

// keepReleased calls release every releaseEvery (heldRelease) while the
// feed holds a big table that has arrived (nothing stale, releaseMin
// paths or more), counted from the last release, whichever made it. It
// looks six times a period: looking once a period, an End-of-RIB's
// release between two looks made the next skipped, so the memory went
// back up to twice the period apart, and a minute's floor of the soak's
// watch was a collection's level, not a release's (runs 34 and 36: a
// restarted agent's second half-watch with no release in it).
func (f *ribFeed) keepReleased(ctx context.Context) {
	t := time.NewTicker(f.releaseEvery / 6)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f.mu.Lock()
		held := f.synced.Load() && f.holdsBigTable() && time.Since(f.lastRelease) >= f.releaseEvery
		if held {
			f.lastRelease = time.Now()
		}
		f.mu.Unlock()
		if held {
			f.releaseNow()
		}
	}
}

// releaseNow calls release, and records the memory the agent holds just
// after it (Status's Release).
func (f *ribFeed) releaseNow() {
	f.release()
	m := measureRelease()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.releases++
	m.Releases = f.releases
	f.st.Release = &m
}

// sessionLost keeps the routes as stale if the suite does graceful
// restart, for its restart time; else they go now.
func (f *ribFeed) sessionLost() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.st.GR {
		f.nStale, f.stale6 = 0, 0
		for p, ps := range f.paths {
			for i := range ps {
				if !ps[i].link {
					ps[i].stale = true
					f.nStale++
					if family(p) {
						f.stale6++
					}
				}
			}
		}
		f.staleUntil = time.Now().Add(ribRestartTime * time.Second)
		return
	}
	for p, ps := range f.paths {
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
	for p, ps := range f.paths {
		if family(p) != v6 {
			continue
		}
		fresh := slices.DeleteFunc(ps, func(r ribPath) bool { return r.stale })
		if gone := len(ps) - len(fresh); gone > 0 || len(fresh) == 0 {
			f.nPaths, f.nStale = f.nPaths-gone, f.nStale-gone
			if v6 {
				f.stale6 -= gone
			}
			// A refresh whose paths came under new ids via other next
			// hops (a new suite's) appended them beside the stale: the
			// prefix's array, longer than its paths now, would be held
			// for the table's life.
			f.set(p, slices.Clone(fresh))
		}
	}
	if f.nStale == 0 {
		f.staleUntil = time.Time{}
	}
}

// session runs one BGP session until it fails or ctx ends.
func (f *ribFeed) session(ctx context.Context) error {
	c, err := dialRIB(ctx, netip.AddrPortFrom(f.cfg.Neighbor, 179), f.cfg.password)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	if err := c.send(f.open()); err != nil {
		return err
	}
	f.setState("open")
	s := &ribSession{f: f, c: c, hold: ribHoldTime * time.Second, keepalives: make(chan struct{})}
	defer close(s.keepalives)
	for {
		msg, err := s.read()
		if err == nil {
			err = s.handle(msg)
		}
		if err != nil {
			return err
		}
	}
}

// ribConn is a session's connection. Messages are sent whole, from the
// session and from its keepalive timer.
type ribConn struct {
	net.Conn
	wmu sync.Mutex
}

// dialRIB connects to the suite, signing every segment with password
// (TCP-MD5) when there is one.
func dialRIB(ctx context.Context, to netip.AddrPort, password string) (*ribConn, error) {
	d := net.Dialer{Timeout: 3 * time.Second}
	if password != "" {
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			sig := unix.TCPMD5Sig{Keylen: uint16(len(password))}
			copy(sig.Key[:], password)
			sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&sig.Addr))
			sa.Family, sa.Addr = unix.AF_INET, to.Addr().As4()
			var serr error
			err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptTCPMD5Sig(int(fd), unix.IPPROTO_TCP, unix.TCP_MD5SIG, &sig) })
			return cmp.Or(err, serr)
		}
	}
	conn, err := d.DialContext(ctx, "tcp", to.String())
	if err != nil {
		return nil, err
	}
	return &ribConn{Conn: conn}, nil
}

func (c *ribConn) send(m *bgp.BGPMessage) error {
	b, err := m.Serialize()
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.SetWriteDeadline(time.Now().Add(ribHoldTime * time.Second))
	_, err = c.Write(b)
	return err
}

// ribSession is one session's BGP state (RFC 4271 §8, the receiving side
// of it: we never send UPDATEs).
type ribSession struct {
	f           *ribFeed
	c           *ribConn
	hold        time.Duration // agreed in the OPENs; 0: no keepalives
	opt         *bgp.MarshallingOption
	established bool
	keepalives  chan struct{} // closed when the session ends
}

// read reads the next message within the hold time; a malformed one is
// answered with its NOTIFICATION.
func (s *ribSession) read() (*bgp.BGPMessage, error) {
	if s.hold > 0 {
		s.c.SetReadDeadline(time.Now().Add(s.hold))
	}
	msg, err := readBGP(s.c, s.opt)
	var me *bgp.MessageError
	if errors.As(err, &me) {
		s.c.send(bgp.NewBGPNotificationMessage(me.TypeCode, me.SubTypeCode, me.Data))
	}
	return msg, err
}

// handle takes one message; an error ends the session.
func (s *ribSession) handle(msg *bgp.BGPMessage) error {
	switch body := msg.Body.(type) {
	case *bgp.BGPOpen:
		return s.opened(body)
	case *bgp.BGPKeepAlive:
		if !s.established {
			s.established = true
			s.f.setEstablished()
		}
	case *bgp.BGPUpdate:
		if !s.established {
			return errors.New("UPDATE before the session was established")
		}
		s.f.update(body)
	case *bgp.BGPNotification:
		return fmt.Errorf("the suite closed the session: NOTIFICATION %d/%d", body.ErrorCode, body.ErrorSubcode)
	}
	return nil
}

// opened takes the suite's OPEN: the capabilities agreed, a KEEPALIVE to
// confirm, and keepalives every third of the hold time from then on.
func (s *ribSession) opened(o *bgp.BGPOpen) error {
	hold, opt, err := s.f.opened(o)
	if err != nil {
		s.c.send(bgp.NewBGPNotificationMessage(bgp.BGP_ERROR_OPEN_MESSAGE_ERROR, bgp.BGP_ERROR_SUB_BAD_PEER_AS, nil))
		return err
	}
	s.hold, s.opt = hold, opt
	if err := s.c.send(bgp.NewBGPKeepAliveMessage()); err != nil {
		return err
	}
	if hold > 0 {
		go s.keepAlive()
	}
	return nil
}

// keepAlive sends a KEEPALIVE every third of the hold time until the
// session ends.
func (s *ribSession) keepAlive() {
	t := time.NewTicker(s.hold / 3)
	defer t.Stop()
	for {
		select {
		case <-s.keepalives:
			return
		case <-t.C:
			if s.c.send(bgp.NewBGPKeepAliveMessage()) != nil {
				return
			}
		}
	}
}

// setState and setEstablished keep the feed's status.
func (f *ribFeed) setState(state string) {
	f.mu.Lock()
	f.st.State = state
	f.mu.Unlock()
}

func (f *ribFeed) setEstablished() {
	f.mu.Lock()
	f.st.State, f.st.Established, f.st.LastError = "established", time.Now().UTC().Format(time.RFC3339), ""
	f.st.Sessions++
	f.eors = 0
	f.tableArrived.Store(0)
	f.arrived = true
	f.mu.Unlock()
	if f.arriving != nil {
		f.arriving()
	}
	f.log.Info("RIB feed established")
}

// open is our OPEN: IPv4 and IPv6 unicast, 4-octet AS, graceful restart
// (our forwarding state survives our own restarts: the FIB is pinned),
// ADD-PATH receive, for both families.
func (f *ribFeed) open() *bgp.BGPMessage {
	as2 := uint16(bgp.AS_TRANS)
	if f.cfg.ASN <= 0xffff {
		as2 = uint16(f.cfg.ASN)
	}
	caps := []bgp.ParameterCapabilityInterface{
		bgp.NewCapMultiProtocol(bgp.RF_IPv4_UC),
		bgp.NewCapMultiProtocol(bgp.RF_IPv6_UC),
		bgp.NewCapFourOctetASNumber(f.cfg.ASN),
		bgp.NewCapGracefulRestart(false, false, ribRestartTime, []*bgp.CapGracefulRestartTuple{
			bgp.NewCapGracefulRestartTuple(bgp.RF_IPv4_UC, true), bgp.NewCapGracefulRestartTuple(bgp.RF_IPv6_UC, true)}),
		bgp.NewCapAddPath([]*bgp.CapAddPathTuple{
			bgp.NewCapAddPathTuple(bgp.RF_IPv4_UC, bgp.BGP_ADD_PATH_RECEIVE), bgp.NewCapAddPathTuple(bgp.RF_IPv6_UC, bgp.BGP_ADD_PATH_RECEIVE)}),
	}
	m, _ := bgp.NewBGPOpenMessage(as2, ribHoldTime, f.routerID, []bgp.OptionParameterInterface{bgp.NewOptionParameterCapability(caps)})
	return m
}

// opened checks the suite's OPEN and agrees on the hold time, ADD-PATH
// and graceful restart.
func (f *ribFeed) opened(o *bgp.BGPOpen) (time.Duration, *bgp.MarshallingOption, error) {
	asn := uint32(o.MyAS)
	addPath, gr := false, false
	var families uint8 // agreed by multiprotocol capabilities; none: IPv4 alone (RFC 4760)
	addPaths := map[bgp.Family]bgp.BGPAddPathMode{}
	var grTime uint16
	for _, p := range o.OptParams {
		c, ok := p.(*bgp.OptionParameterCapability)
		if !ok {
			continue
		}
		for _, cap := range c.Capability {
			switch v := cap.(type) {
			case *bgp.CapFourOctetASNumber:
				asn = v.CapValue
			case *bgp.CapMultiProtocol:
				switch v.CapValue {
				case bgp.RF_IPv4_UC:
					families |= 1
				case bgp.RF_IPv6_UC:
					families |= 2
				}
			case *bgp.CapAddPath:
				for _, t := range v.Tuples {
					if (t.Family == bgp.RF_IPv4_UC || t.Family == bgp.RF_IPv6_UC) && t.Mode&bgp.BGP_ADD_PATH_SEND != 0 {
						addPaths[t.Family] = bgp.BGP_ADD_PATH_RECEIVE
					}
				}
				addPath = addPaths[bgp.RF_IPv4_UC] != 0
			case *bgp.CapGracefulRestart:
				for _, t := range v.Tuples {
					gr = gr || t.AFI == bgp.AFI_IP && t.SAFI == bgp.SAFI_UNICAST
				}
				grTime = v.Time
			}
		}
	}
	if asn != f.cfg.ASN {
		return 0, nil, fmt.Errorf("the suite is AS %d, not our AS %d (iBGP)", asn, f.cfg.ASN)
	}
	hold := min(time.Duration(o.HoldTime), ribHoldTime) * time.Second
	if o.HoldTime == 0 {
		hold = 0
	}
	var opt *bgp.MarshallingOption
	if len(addPaths) > 0 {
		opt = &bgp.MarshallingOption{AddPath: addPaths}
	}
	if families == 0 {
		families = 1
	}
	f.mu.Lock()
	f.st.AddPath, f.st.GR = addPath, gr
	f.families = families
	f.mu.Unlock()
	f.log.Info("RIB feed open", "hold", hold, "add_path", addPath, "graceful_restart", gr, "restart_time", grTime)
	return hold, opt, nil
}

// readBGP reads one message.
func readBGP(r io.Reader, opt *bgp.MarshallingOption) (*bgp.BGPMessage, error) {
	var hdr [bgp.BGP_HEADER_LENGTH]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(hdr[16])<<8 | int(hdr[17])
	if n < bgp.BGP_HEADER_LENGTH || n > bgp.BGP_MAX_MESSAGE_LENGTH {
		return nil, bgp.NewMessageError(bgp.BGP_ERROR_MESSAGE_HEADER_ERROR, bgp.BGP_ERROR_SUB_BAD_MESSAGE_LENGTH, hdr[16:18], fmt.Sprintf("message of %d bytes", n))
	}
	b := make([]byte, n)
	copy(b, hdr[:])
	if _, err := io.ReadFull(r, b[bgp.BGP_HEADER_LENGTH:]); err != nil {
		return nil, err
	}
	if opt == nil {
		return bgp.ParseBGPMessage(b)
	}
	return bgp.ParseBGPMessage(b, opt)
}

// update applies one UPDATE: withdrawals, then the announced paths with
// their attributes (IPv4 in the UPDATE itself or in MP_REACH_NLRI, IPv6
// in MP_REACH_NLRI, each with its own next hop); an empty one is IPv4's
// End-of-RIB, one holding only an empty MP_UNREACH_NLRI its family's.
func (f *ribFeed) update(u *bgp.BGPUpdate) {
	came := time.Now() // before the lock: the wait for it is the FIB's lag too
	type announce struct {
		nlri bgp.PathNLRI
		nh   netip.Addr
	}
	withdrawn := u.WithdrawnRoutes
	var announced []announce
	attr := ribPath{localPref: 100}
	var nh4 netip.Addr
	eor := -1 // the family whose End-of-RIB this is: 0 IPv4, 1 IPv6
	for _, a := range u.PathAttributes {
		switch v := a.(type) {
		case *bgp.PathAttributeNextHop:
			nh4 = v.Value
		case *bgp.PathAttributeLocalPref:
			attr.localPref = v.Value
		case *bgp.PathAttributeMultiExitDisc:
			attr.med = v.Value
		case *bgp.PathAttributeOrigin:
			attr.origin = v.Value
		case *bgp.PathAttributeAsPath:
			for _, seg := range v.Value {
				attr.asLen += uint16(seg.ASLen())
			}
		case *bgp.PathAttributeLargeCommunities:
			attr.from = originOf(v, f.cfg.ASN)
			attr.linkVLAN = linkVLANOf(v, f.cfg.ASN)
		case *bgp.PathAttributeMpReachNLRI:
			if (v.AFI == bgp.AFI_IP || v.AFI == bgp.AFI_IP6) && v.SAFI == bgp.SAFI_UNICAST {
				nh := v.Nexthop
				if !nh.IsGlobalUnicast() && v.LinkLocalNexthop.IsLinkLocalUnicast() {
					nh = v.LinkLocalNexthop // RFC 2545: a neighbour known by its link-local address only
				}
				for _, n := range v.Value {
					announced = append(announced, announce{n, nh})
				}
			}
		case *bgp.PathAttributeMpUnreachNLRI:
			if (v.AFI == bgp.AFI_IP || v.AFI == bgp.AFI_IP6) && v.SAFI == bgp.SAFI_UNICAST {
				withdrawn = append(withdrawn, v.Value...)
				if len(u.PathAttributes) == 1 && len(v.Value) == 0 {
					eor = 0
					if v.AFI == bgp.AFI_IP6 {
						eor = 1
					}
				}
			}
		}
	}
	for _, n := range u.NLRI {
		announced = append(announced, announce{n, nh4})
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st.Updates++
	if len(withdrawn) == 0 && len(announced) == 0 && len(u.PathAttributes) == 0 {
		eor = 0
	}
	if eor >= 0 {
		n := 0 // the family's prefixes
		for p := range f.paths {
			if p.Addr().Is6() == (eor == 1) {
				n++
			}
		}
		f.log.Info("RIB feed: End-of-RIB", "family", []string{"ipv4", "ipv6"}[eor], "prefixes", n)
		if eor == 0 {
			f.synced.Store(true)
		}
		f.sweepStale(eor == 1)
		if f.eors |= 1 << eor; f.eors&f.families == f.families && f.tableArrived.Load() == 0 {
			f.tableArrived.Store(came.UnixNano())
		}
		if f.holdsBigTable() && f.arrived {
			f.arrived, f.lastRelease = false, time.Now()
			go f.releaseNow()
		}
		return
	}
	for _, w := range withdrawn {
		p, ok := prefixOf(w.NLRI)
		if !ok {
			continue
		}
		ps := f.paths[p]
		if i := slices.IndexFunc(ps, func(r ribPath) bool { return !r.link && r.id == w.ID }); i >= 0 {
			f.nPaths--
			if ps[i].stale {
				f.unstale(p)
			}
			f.set(p, slices.Delete(ps, i, i+1))
		}
	}
	for _, a := range announced {
		p, ok := prefixOf(a.nlri.NLRI)
		linkLocal := a.nh.Is6() && a.nh.IsLinkLocalUnicast() && attr.linkVLAN != 0
		if !ok || a.nh.Is6() != family(p) || !a.nh.IsGlobalUnicast() && !linkLocal {
			continue // no next hop of its family on a port's subnet or link: nothing to forward to
		}
		r := attr
		r.id, r.nh = a.nlri.ID, a.nh
		if linkLocal {
			r.nh = a.nh.WithZone(strconv.Itoa(int(attr.linkVLAN))) // the port's VLAN names the link
		}
		ps := f.paths[p]
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

// prefixOf is a unicast NLRI's prefix, of either family.
func prefixOf(n bgp.NLRI) (netip.Prefix, bool) {
	p, ok := n.(*bgp.IPAddrPrefix)
	if !ok || p.Prefix.Addr().Is4In6() {
		return netip.Prefix{}, false
	}
	return p.Prefix.Masked(), true
}

// set records a prefix's paths and applies its best ones. Call with f.mu
// held.
func (f *ribFeed) set(p netip.Prefix, ps []ribPath) {
	if len(ps) == 0 {
		if _, had := f.paths[p]; !had {
			return
		}
		delete(f.paths, p)
	} else {
		f.paths[p] = ps
	}
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

// bestPaths are the paths as good as the best: the suite's preference or
// distance first (origin.go), then BGP's higher LOCAL_PREF, shorter
// AS_PATH, lower ORIGIN, lower MED.
func bestPaths(ps []ribPath) []ribPath {
	better := func(a, b ribPath) int { // < 0: a is better
		return cmp.Or(cmp.Compare(a.from.rank, b.from.rank), cmp.Compare(b.localPref, a.localPref), cmp.Compare(a.asLen, b.asLen),
			cmp.Compare(a.origin, b.origin), cmp.Compare(a.med, b.med))
	}
	var best []ribPath
	for _, p := range ps {
		switch {
		case len(best) == 0:
			best = append(best, p)
		case better(p, best[0]) < 0:
			best = append(best[:0], p)
		case better(p, best[0]) == 0:
			best = append(best, p)
		}
	}
	return best
}

// bestHops are the distinct next hops of the best paths, sorted, at most
// ECMPMax: BGP multipath.
func bestHops(ps []ribPath) []netip.Addr {
	var hops []netip.Addr
	for _, p := range bestPaths(ps) {
		if !slices.Contains(hops, p.nh) {
			hops = append(hops, p.nh)
		}
	}
	slices.SortFunc(hops, func(a, b netip.Addr) int { return a.Compare(b) })
	return hops[:min(len(hops), ECMPMax)]
}

// bestOrigin is where the suite learned p's best path, if the feed has p.
func (f *ribFeed) bestOrigin(p netip.Prefix) (routeOrigin, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if best := bestPaths(f.paths[p]); len(best) > 0 {
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
	for p, ps := range f.paths {
		if _, kept := want[p]; kept || !slices.ContainsFunc(ps, func(r ribPath) bool { return r.link }) {
			continue
		}
		rest := slices.DeleteFunc(slices.Clone(ps), func(r ribPath) bool { return r.link })
		f.nPaths -= len(ps) - len(rest)
		f.set(p, rest)
		changed++
	}
	for p, links := range want {
		ps := f.paths[p]
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
