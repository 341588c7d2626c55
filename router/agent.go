package router

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/perf"
	"golang.org/x/sys/unix"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/acl"
	"github.com/msr-router/msr/internal/config"
	"github.com/msr-router/msr/internal/element"
	"github.com/msr-router/msr/internal/iflink"
	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/internal/routetable"
	"github.com/msr-router/msr/internal/trace"
	"github.com/msr-router/msr/internal/xdp"
	"github.com/msr-router/msr/router/routerapi"
)

// Agent is `msr router`: it loads the data path, keeps its FIB, next hops,
// neighbours and ACL, and runs the slow path.
type Agent struct {
	cfg *AgentConfig
	dp  *Dataplane
	// neighbors is where learned neighbours go: dp (a fake in unit
	// tests).
	neighbors interface {
		SetNeighbor(ip netip.Addr, vlan uint16, mac net.HardwareAddr) error
	}
	link   link.Link
	conn   *dist.Conn
	sender *dist.Sender
	raw    int // AF_PACKET socket for what the slow path sends
	slow   *perf.Reader
	busy   *BusyMeter // the data path's CPU time, for hellos and status
	mac    net.HardwareAddr
	hostIP netip.Addr // this host's address on the interconnect
	// hostPrefix is hostIP with its subnet: hellos report it, so that the
	// VCP finds the back-end's API.
	hostPrefix netip.Prefix
	rib        *ribFeed
	// ribPassword is the RIB feed's TCP-MD5 key (dist.Key.RIBPassword).
	ribPassword string
	log         *slog.Logger

	// helloMu, not mu, guards what the hello loop keeps: hellos, how the
	// hellos kept their interval, and lastHello, when the last one left
	// (timeHello); lastHelloState, what the last hello said when a.mu was
	// free (helloState).
	helloMu        sync.Mutex
	hellos         routerapi.HelloTiming
	lastHello      time.Time
	lastHelloState helloState
	helloStateRead bool

	mu sync.Mutex
	// set are the settings in force (settings.go): the file's, or the
	// VCP's; aclFromVCP: the VCP sent an ACL (else the file's stays).
	set        settings
	aclFromVCP bool
	// configsRefused counts the VCP's configs with more ports than the
	// maps hold (portsFit), refusedPorts the last one's ports.
	configsRefused uint64
	refusedPorts   int
	// portsDigest is dist.PortsDigest of the ports served (0: none),
	// kept by writePorts for the hellos.
	portsDigest uint64
	// adopted: the FIB was adopted from a previous run (so it is ready
	// before the feed's End-of-RIB).
	adopted   bool
	hostAddrs []netip.Addr   // this host's own addresses on the interconnect
	inside    []netip.Prefix // the router's infrastructure (rt_infra)
	ports     []Port         // by index
	nh        *nextHops
	trace     trace.Recorder // msr trace's reports (trace.go)
	// operator: the routes the operator added (AddOperatorRoute).
	operator map[netip.Prefix]bool
	icmp     *icmpLimiter
	counters map[string]uint64
	capPPS   uint64 // the data path's capacity now (capacity_pps, or set at run time)
	// dirty: routes changed since the state was last saved. Saving waits
	// for a quiet second (at most saveEvery), or a table arriving route by
	// route from the RIB feed would write the whole state over and over.
	dirty      bool
	lastChange time.Time
	lastSave   time.Time

	// neighMu, not mu, guards the neighbours (neighbors.go): ARP and NDP
	// are learned while route work holds mu, as long as a whole table's
	// snapshot may take. A holder of mu may take neighMu; never the other
	// way round.
	neighMu    sync.Mutex
	neighPorts []Port // a copy of ports
	neigh      map[NeighborKey]*neighbor
	pending    map[NeighborKey]*pendingARP
	asked      map[NeighborKey]time.Time   // questions the router put (neighbors.go)
	probes     map[NeighborKey]*neighProbe // MAC changes claimed, the old MAC asked
	// neighCount is neigh's entries by port and family (neighbors.go).
	neighCount map[portFamily]int
	heldBytes  int // of every pending neighbour's packets
	// neighCounters are the counters of the neighbours and of the slow
	// path's reader (count), shown with counters.
	neighCounters map[string]uint64

	// linkMu guards port, the interface's state as last followed, and
	// readLinkState, how it is read (nil: iflink.Read; a test's fake
	// makes the kernel slow).
	linkMu        sync.Mutex
	port          iflink.State
	readLinkState func(string) (iflink.State, error)
}

// saveQuiet and saveEvery bound how long the saved state lags the FIB.
const (
	saveQuiet = time.Second
	saveEvery = 10 * time.Second
)

type neighbor struct {
	mac     net.HardwareAddr
	updated time.Time
	static  bool // the operator's (STATIC_NEIGHBORS): no claim changes it
}

// pendingARP is a next hop being resolved and the packets waiting for it
// (bytes of them).
type pendingARP struct {
	packets [][]byte
	bytes   int
	sent    time.Time
	tries   int
}

// Neighbour timing: an entry is refreshed by ARP after neighRefresh and
// forgotten after neighExpire; a request is retried every arpRetry, at
// most arpTries times. While it is asked for, up to holdBytes of packets
// wait for a neighbour, as Linux's unres_qlen_bytes (212,992; before, 16
// packets: a few milliseconds of a busy flow, less than an ARP exchange
// takes on a loaded machine), and up to holdTotalBytes for all of them
// together, so that a scan of a connected subnet's unused addresses
// holds little.
const (
	neighRefresh   = 4 * time.Minute
	neighExpire    = 5 * time.Minute
	arpRetry       = time.Second
	arpTries       = 3
	holdBytes      = 212_992
	holdTotalBytes = 4 << 20
)

// NewAgent sets the back-end up: call it inside its network namespace.
func NewAgent(cfg *AgentConfig, log *slog.Logger) (*Agent, error) {
	a := &Agent{cfg: cfg, raw: -1, log: log.With("component", "router", "router", cfg.Name),
		neigh:   map[NeighborKey]*neighbor{},
		pending: map[NeighborKey]*pendingARP{}, asked: map[NeighborKey]time.Time{}, probes: map[NeighborKey]*neighProbe{}, neighCount: map[portFamily]int{}, neighCounters: map[string]uint64{}, counters: map[string]uint64{}, operator: map[netip.Prefix]bool{},
		icmp: newICMPLimiter(cfg.ICMPRate, cfg.ICMPBurst, cfg.Hold())}
	a.set = fileSettings(cfg)
	if len(cfg.Ports) == 0 {
		if s, ok := a.loadSettings(); ok {
			a.set = s
			a.log.Info("serving the VCP's settings of the previous run until it speaks", "ports", portsText(s.Ports))
		} else {
			a.log.Info("no ports in the file: waiting for the VCP's")
		}
	}
	if err := a.setup(); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

func (a *Agent) setup() error {
	keys, err := a.cfg.Keys(false)
	if err != nil {
		return err
	}
	a.ribPassword = keys.RIB
	if a.sender, err = dist.NewSender(a.cfg.ID, keys.Seal); err != nil {
		return err
	}
	ifi, err := net.InterfaceByName(a.cfg.Interface)
	if err != nil {
		return fmt.Errorf("internal interface: %w", err)
	}
	a.mac = ifi.HardwareAddr
	a.readLink()
	if err := netns.EnsureBPFFS(); err != nil {
		return err
	}
	if err := os.MkdirAll(a.cfg.PinDir, 0o700); err != nil {
		return err
	}
	if a.dp, err = LoadDataplane(a.cfg.PinDir, Sizes{FIB6Lines: a.cfg.FIB6Lines, Ports: a.cfg.MaxPorts}, a.cfg.Force); err != nil {
		return err
	}
	for _, m := range a.dp.Migrated {
		a.log.Warn("data path map of an older layout migrated", "map", m.Map, "entries", m.Entries, "empty", m.Empty, "why", m.Why)
	}
	a.neighbors = a.dp
	a.nh = newNextHops(a.dp)
	a.busy = NewBusyMeter(a.dp.Program())
	a.capPPS = a.cfg.CapacityPPS
	if err := a.dp.writeSlowRates(a.cfg.SlowRates); err != nil {
		return err
	}
	if err := a.dp.SetCap(a.capPPS); err != nil {
		return err
	}
	if err := a.program(ifi); err != nil {
		return err
	}
	if a.link, _, err = xdp.AdoptOrAttach(filepath.Join(a.cfg.PinDir, "link_"+ifi.Name), a.dp.Program(), ifi.Index); err != nil {
		return err
	}
	if a.conn, err = dist.Listen(a.cfg.Interface, keys.Ring); err != nil {
		return err
	}
	if err := a.cfg.PersistReplay(a.conn, ""); err != nil {
		return err
	}
	if a.raw, err = rawSocket(ifi.Index); err != nil {
		return err
	}
	a.slow, err = a.dp.SlowReader()
	a.adoptNeighbors()
	return err
}

// program writes ports, local addresses, connected and static routes and
// the ACL into the data path.
func (a *Agent) program(ifi *net.Interface) error {
	addrs, _ := ifi.Addrs()
	for _, ad := range addrs {
		if p, err := netip.ParsePrefix(ad.String()); err == nil && p.Addr().Is4() {
			a.hostAddrs = append(a.hostAddrs, p.Addr())
			if !a.hostIP.IsValid() {
				a.hostIP, a.hostPrefix = p.Addr(), p
			}
		}
	}
	host, err := element.HostInfra(func(string) bool { return false })
	if err != nil {
		return fmt.Errorf("this host's prefixes: %w", err)
	}
	if a.inside, err = element.Inside(a.cfg.Infrastructure, host, config.Pos{}); err != nil {
		return err
	}
	if err := a.dp.SetInfra(a.inside); err != nil {
		return err
	}
	if err := a.writePorts(a.dp.Ports); err != nil {
		return err
	}
	// Every VLAN's check, a previous run's too, as the settings say.
	if err := a.writeURPF(); err != nil {
		return err
	}
	if err := a.dp.SetACL(a.mac, a.set.ACL); err != nil {
		return err
	}
	// A reused data path is adopted, so it never stops forwarding; else
	// (or if the saved state does not match it) the FIB starts empty.
	if !a.dp.Reused || !a.adopt() {
		a.dp.FIB.Reset()
		a.dp.FIB6.Reset()
	} else {
		a.adopted = a.dp.FIB.Len() > len(a.ports)
	}
	if err := a.setConnected(); err != nil {
		return err
	}
	for _, r := range a.cfg.Routes {
		if err := a.setRoute(r.To, r.Via); err != nil {
			return fmt.Errorf("%s: %w", r.Pos, err)
		}
	}
	for _, f := range a.cfg.RouteFiles {
		ps, err := routetable.Load(f.File)
		if err != nil {
			return fmt.Errorf("%s: %w", f.Pos, err)
		}
		// Longest-first order would rewrite entries more often; the FIB
		// takes them shortest first.
		sort.Slice(ps, func(i, j int) bool { return ps[i].Bits() < ps[j].Bits() })
		for _, p := range ps {
			if err := a.setRoute(p, f.Via); err != nil {
				return fmt.Errorf("%s: %s: %w", f.Pos, f.File, err)
			}
		}
	}
	return a.save()
}

func rawSocket(ifindex int) (int, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("raw socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifindex}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind raw socket: %w", err)
	}
	return fd, nil
}

// adoptNeighbors takes the neighbours a previous run left in the pinned
// map, so that forwarding goes on, but as about to expire: each is asked
// again at once and forgotten within seconds unless it answers.
func (a *Agent) adoptNeighbors() {
	a.neighMu.Lock()
	defer a.neighMu.Unlock()
	now := time.Now()
	var k rtxdpRtNeighKey
	// An entry's MAC is its first 6 bytes, whatever the layout's length.
	v := make([]byte, a.dp.objs.RtNeighbors.ValueSize())
	for it := a.dp.objs.RtNeighbors.Iterate(); it.Next(&k, v); {
		ip := netip.AddrFrom4([4]byte{byte(k.Ip), byte(k.Ip >> 8), byte(k.Ip >> 16), byte(k.Ip >> 24)})
		a.setNeigh(NeighborKey{ip, k.Vlan}, &neighbor{mac: net.HardwareAddr(bytes.Clone(v[:6])), updated: now.Add(-neighExpire + 3*arpRetry)})
	}
	var k6 rtxdpRtNeigh6Key
	var v6 rtxdpRtNeigh
	for it := a.dp.objs.RtNeighbors6.Iterate(); it.Next(&k6, &v6); {
		a.setNeigh(NeighborKey{netip.AddrFrom16(k6.Ip), k6.Vlan}, &neighbor{mac: net.HardwareAddr(bytes.Clone(v6.Mac[:])), updated: now.Add(-neighExpire + 3*arpRetry)})
	}
	for key := range a.neigh {
		if port, ok := a.portOfVLAN(key.VLAN); ok {
			a.pending[key] = &pendingARP{tries: 1, sent: now}
			a.solicit(key, port)
		}
	}
}

// ErrNoPort is returned for a gateway on no port's subnet.
var ErrNoPort = errors.New("gateway is on no port's subnet")

// AddRoute installs or replaces a route; via lists its gateways (ECMP),
// which must be on a port's subnet.
func (a *Agent) AddRoute(p netip.Prefix, via []netip.Addr) error {
	if len(via) == 0 || len(via) > ECMPMax {
		return fmt.Errorf("route %s: 1 to %d gateways", p, ECMPMax)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.setRoute(p, via); err != nil {
		return err
	}
	a.dirty, a.lastChange = true, time.Now()
	return nil
}

// addLearned applies a route from the RIB feed. A port's own subnet stays
// connected: a learned route for it is ignored, as a router prefers a
// connected route to any learned one.
func (a *Agent) addLearned(p netip.Prefix, via []netip.Addr) error {
	if a.isConnected(p) {
		return nil
	}
	return a.AddRoute(p, via)
}

// deleteLearned withdraws a route of the RIB feed (never a connected one).
func (a *Agent) deleteLearned(p netip.Prefix) error {
	if a.isConnected(p) {
		return nil
	}
	return a.DeleteRoute(p)
}

func (a *Agent) isConnected(p netip.Prefix) bool {
	for _, port := range a.ports {
		if port.Addr.Masked() == p.Masked() || port.Addr6.IsValid() && port.Addr6.Masked() == p.Masked() {
			return true
		}
	}
	return false
}

// setConnected routes each port's subnets to the port, and those of a
// port the VCP has down nowhere: as a router drops a down interface's
// connected routes, so that what is sent there is unreachable (ICMP) and
// not lost silently into a dead LB. A learned route for such a subnet is
// still ignored (addLearned): it was never kept. Call with a.mu held (or
// before Run).
func (a *Agent) setConnected() error {
	for i, p := range a.ports {
		subnets := []netip.Prefix{p.Addr.Masked()}
		if p.Addr6.IsValid() {
			subnets = append(subnets, p.Addr6.Masked())
		}
		for _, s := range subnets {
			if err := a.connect(s, a.portDown(i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// portDown says whether the VCP has port i down. Call with a.mu held.
func (a *Agent) portDown(i int) bool { return i < len(a.set.Ports) && a.set.Ports[i].Down }

// connect sets a port's connected route, or deletes it when the port is
// down. Call with a.mu held.
func (a *Agent) connect(p netip.Prefix, down bool) error {
	if !down {
		return a.setRoute(p, nil)
	}
	fib := a.fib(p.Addr())
	g, ok := fib.Routes().Get(p)
	if !ok {
		return nil
	}
	if err := fib.Delete(p); err != nil {
		return err
	}
	a.nh.release(g)
	a.dirty, a.lastChange = true, time.Now()
	return nil
}

// table is the longest-prefix-match table of one family: FIB or FIB6.
type table interface {
	Set(netip.Prefix, uint32) error
	Delete(netip.Prefix) error
	Routes() *routeSet
	Lookup(netip.Addr) uint32
	Len() int
}

// fib is the table of addr's family.
func (a *Agent) fib(addr netip.Addr) table {
	if addr.Is6() && !addr.Is4In6() {
		return a.dp.FIB6
	}
	return a.dp.FIB
}

// AddOperatorRoute is AddRoute for the operator (the API's msr router
// route add): the route is kept apart from the RIB feed's, whose new
// feeds hold only their own as stale (heldRoutes).
func (a *Agent) AddOperatorRoute(p netip.Prefix, via []netip.Addr) error {
	if err := a.AddRoute(p, via); err != nil {
		return err
	}
	a.mu.Lock()
	a.operator[p.Masked()] = true
	a.mu.Unlock()
	return nil
}

// DeleteOperatorRoute is DeleteRoute for the operator.
func (a *Agent) DeleteOperatorRoute(p netip.Prefix) error {
	a.mu.Lock()
	delete(a.operator, p.Masked())
	a.mu.Unlock()
	return a.DeleteRoute(p)
}

// DeleteRoute removes a route.
func (a *Agent) DeleteRoute(p netip.Prefix) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	p = p.Masked()
	fib := a.fib(p.Addr())
	old, _ := fib.Routes().Get(p)
	if err := fib.Delete(p); err != nil {
		return err
	}
	a.nh.release(old)
	a.dirty, a.lastChange = true, time.Now()
	return nil
}

// setRoute resolves gateways to next hops and a group, then sets the FIB
// entry; nil via is a connected route on the port whose subnet p is.
func (a *Agent) setRoute(p netip.Prefix, via []netip.Addr) error {
	p = p.Masked()
	var keys []nhKey
	if via == nil {
		port, ok := a.portOf(p.Addr())
		if !ok {
			return fmt.Errorf("connected route %s: on no port", p)
		}
		keys = append(keys, nhKey{port: port})
	}
	for _, gw := range via {
		if gw.Is6() != p.Addr().Is6() {
			return fmt.Errorf("route %s via %s: the gateway's family is not the route's", p, gw)
		}
		port, ok := a.portOf(gw)
		if !ok {
			return fmt.Errorf("route %s via %s: %w", p, gw, ErrNoPort)
		}
		keys = append(keys, nhKey{gw: gw.WithZone(""), port: port})
	}
	// The route takes its new group before it lets go of the old one: a
	// route set to what it is keeps its group.
	g, err := a.nh.acquire(keys)
	if err != nil {
		return err
	}
	fib := a.fib(p.Addr())
	old, _ := fib.Routes().Get(p)
	if err := fib.Set(p, g); err != nil {
		a.nh.release(g)
		return err
	}
	a.nh.release(old)
	return nil
}

// portOf is the port whose subnet holds addr, or for a link-local address
// the port whose VLAN is its zone (fe80::1%11: a neighbour on VLAN 11).
func (a *Agent) portOf(addr netip.Addr) (uint16, bool) {
	if addr.Is6() && addr.IsLinkLocalUnicast() {
		vlan, err := strconv.Atoi(addr.Zone())
		for _, p := range a.ports {
			if err == nil && int(p.VLAN) == vlan && p.Addr6.IsValid() {
				return p.Index, true
			}
		}
		return 0, false
	}
	for _, p := range a.ports {
		if p.Addr.Masked().Contains(addr) || p.Addr6.IsValid() && p.Addr6.Masked().Contains(addr) {
			return p.Index, true
		}
	}
	return 0, false
}

// Run handles the slow path and sends hellos until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	a.mu.Lock()
	rib := a.set.RIB
	a.mu.Unlock()
	if err := a.startRIB(ctx, rib); err != nil {
		return err
	}
	defer a.stopRIB()
	stopTrace, err := a.startTrace()
	if err != nil {
		return err
	}
	defer stopTrace()
	go a.receive(ctx)
	go func() {
		<-ctx.Done()
		a.slow.Close()
	}()
	go a.maintain(ctx)
	go a.maintainNeighbors(ctx)
	go a.saveLoop(ctx)
	go a.followLink(ctx.Done())
	go a.busy.Run(ctx)
	queue := make(chan []byte, slowQueueLen)
	go a.routeSlow(ctx, queue)
	for {
		rec, err := a.slow.Read()
		if errors.Is(err, perf.ErrClosed) {
			return nil
		}
		if err != nil {
			a.log.Error("slow path", "err", err)
			continue
		}
		if rec.LostSamples > 0 {
			a.count("slow_lost", rec.LostSamples)
			continue
		}
		a.dispatchSlow(rec.RawSample, queue)
	}
}

// maintain sends hellos every hello interval. Nothing here waits on the
// kernel's RTNL lock, on a file, or on a.mu while route work holds it: a
// hello late by three intervals is a back-end dead to every LB and VCP
// (links.go, helloState).
func (a *Agent) maintain(ctx context.Context) {
	t := time.NewTicker(a.cfg.HelloInterval)
	defer t.Stop()
	due := time.Now()
	for {
		woke := time.Now()
		a.sendHello()
		a.timeHello(due, woke, time.Now())
		select {
		case <-ctx.Done():
			return
		case due = <-t.C:
		}
	}
}

// maintainNeighbors retries and expires ARP every hello interval, under
// a.mu: in a loop of its own, not the hellos'.
func (a *Agent) maintainNeighbors(ctx context.Context) {
	t := time.NewTicker(a.cfg.HelloInterval)
	defer t.Stop()
	for {
		a.tickNeighbors(time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// timeHello records when a hello left: due is when its tick was, woke
// when the loop ran, sent when the hello was out. A hello two intervals
// or more after the one before is counted late, and one a hold time late
// is logged with its parts: the soak's VCPs took back-ends for dead some
// fifty times a run with their hellos 320-700 ms apart on arrival.
func (a *Agent) timeHello(due, woke, sent time.Time) {
	a.helloMu.Lock()
	defer a.helloMu.Unlock()
	h := &a.hellos
	h.Sent++
	if !a.lastHello.IsZero() {
		gap := sent.Sub(a.lastHello)
		if gap >= 2*a.cfg.HelloInterval {
			h.Late++
		}
		if ms := float64(gap.Microseconds()) / 1000; ms > h.LongestGapMs {
			h.LongestGapMs = ms
			h.WokeLateMs = float64(woke.Sub(due).Microseconds()) / 1000
			h.SendMs = float64(sent.Sub(woke).Microseconds()) / 1000
		}
		if hold := a.cfg.Hold(); gap >= hold {
			a.log.Warn("hello late: the LBs and VCPs may have taken this back-end for dead", "gap", gap.Round(time.Millisecond),
				"hold", hold, "woke_late", woke.Sub(due).Round(time.Millisecond), "send", sent.Sub(woke).Round(time.Millisecond))
		}
	}
	a.lastHello = sent
}

// saveLoop saves the state once routes have changed, looking every hello
// interval. Copy under the lock, encode and write outside it: a full table
// takes seconds to encode, and routes keep arriving meanwhile. It is not
// the hellos' loop, which those seconds would silence.
func (a *Agent) saveLoop(ctx context.Context) {
	t := time.NewTicker(a.cfg.HelloInterval)
	defer t.Stop()
	for {
		var snap *savedState
		a.mu.Lock()
		if now := time.Now(); a.dirty && (now.Sub(a.lastChange) >= saveQuiet || now.Sub(a.lastSave) >= saveEvery) {
			snap = a.snapshot()
			a.dirty, a.lastSave = false, now
		}
		a.mu.Unlock()
		if snap != nil {
			if err := a.write(snap); err != nil {
				a.log.Error("save state", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sendHello tells the VCP and the LBs the back-end is there: its
// interconnect port (with this host's address on it, where the VCP finds
// its API), the router's external ports it serves (so the VCP sees whether
// they are the router's), its load, and whether it is ready for flows.
func (a *Agent) sendHello() {
	hs := a.helloState()
	ready, nACL, ports, drained, capacity, version := hs.ready, hs.nACL, hs.ports, hs.drained, hs.capacity, hs.version
	st, err := a.dp.Stats(nACL)
	if err != nil {
		return
	}
	// The back-end's one interface, as last followed (links.go); the
	// router's external ports it serves ride on it (VLANs), so they share
	// its state.
	l := a.portLink()
	flags := element.PortFlags(l)
	h := &dist.Hello{Role: dist.RoleRouter, HelloIntervalMs: uint16(a.cfg.HelloInterval / time.Millisecond), HoldMultiplier: a.cfg.HoldMultiplier,
		Capacity: a.cfg.CapacityMbps, Installed: uint32(hs.installed), Name: a.cfg.Name, Ports: []dist.PortStatus{{Index: 0, Role: dist.PortInternal, MAC: a.mac, Name: a.cfg.Interface,
			Prefix: a.hostPrefix, Flags: flags, SpeedMbps: l.SpeedMbps, MTU: uint16(l.MTU), RxPackets: st.RxPackets, RxBytes: st.RxBytes,
			TxPackets: st.Forwarded, TxBytes: st.ForwardedBytes, RxDropped: st.Drops["cap"]}}}
	for i, p := range ports {
		name := p.Name
		if len(name) > dist.NameLen {
			name = ""
		}
		h.Ports = append(h.Ports, dist.PortStatus{Index: uint8(i + 1), Role: dist.PortExternal, VLAN: p.VLAN, MAC: a.mac, Prefix: p.Address,
			Flags: flags, SpeedMbps: l.SpeedMbps, MTU: p.MTU, Name: name})
	}
	if !ready {
		h.Flags |= dist.HelloFlagDraining
	}
	if drained { // the operator's, kept here for any VCP to see
		h.Flags |= dist.HelloFlagDraining | dist.HelloFlagDrained
	}
	if capacity > 0 {
		h.Capacity = capacity
		h.Flags |= dist.HelloFlagCapacitySet
	}
	h.OperatorVersion = version
	h.PortsDigest = hs.digest
	h.Busy, _ = a.busy.Permyriad()
	f, err := a.sender.Seal(dist.GroupMAC, a.mac, h)
	if err == nil {
		err = a.conn.Send(f)
	}
	if err != nil {
		a.log.Error("send hello", "err", err)
	}
}

// helloState is what a hello says of the agent's settings and FIB.
type helloState struct {
	ready           bool
	nACL, installed int
	ports           []PortSpec
	drained         bool
	capacity        uint32
	version         uint64
	digest          uint64
}

// helloState reads what the hello says under a.mu, if a.mu is free, and
// otherwise takes what the last hello said: a hello must not wait behind
// route work or a state save's copy of a full table, which hold a.mu for
// hundreds of milliseconds on a busy machine (the soak: hellos 310-790 ms
// apart, their sending up to 500 ms of it). What it says is then one
// interval old at most but for the lock's holding.
func (a *Agent) helloState() helloState {
	locked := a.mu.TryLock()
	if !locked {
		a.helloMu.Lock()
		last, ok := a.lastHelloState, a.helloStateRead
		a.helloMu.Unlock()
		if ok {
			return last
		}
		a.mu.Lock() // the first hello: nothing said yet
	}
	// The hello lists the first ports only; the digest stands for all.
	hs := helloState{nACL: len(a.set.ACL), ports: slices.Clone(a.set.Ports[:min(len(a.set.Ports), dist.MaxPorts-1)]), drained: a.set.Drained,
		capacity: a.set.CapacityMbps, version: a.set.OperatorVersion, installed: a.dp.FIB.Len() + a.dp.FIB6.Len(), digest: a.portsDigest}
	rib, nPorts, adopted := a.rib, len(a.ports), a.adopted
	a.mu.Unlock()
	hs.ready = isReady(nPorts, rib, adopted)
	a.helloMu.Lock()
	a.lastHelloState, a.helloStateRead = hs, true
	a.helloMu.Unlock()
	return hs
}

// count counts for the slow path's reader, which does not wait for mu.
func (a *Agent) count(what string, n uint64) {
	a.neighMu.Lock()
	a.neighCounters[what] += n
	a.neighMu.Unlock()
}

// Close releases this process's handles; pinned maps and the pinned link
// keep the data path forwarding.
// Rekey reads the agent's DIST key files again: its hellos are sealed
// with the first element key, and every key the files hold is accepted (a
// key rollover's step, at SIGHUP).
func (a *Agent) Rekey() error { return a.cfg.Rekey(false, a.sender, a.conn) }

func (a *Agent) Close() error {
	if a.slow != nil {
		a.slow.Close()
	}
	if a.conn != nil {
		a.conn.Close()
	}
	if a.raw >= 0 {
		unix.Close(a.raw)
	}
	if a.link != nil {
		a.link.Close()
	}
	if a.dp != nil {
		return a.dp.Close()
	}
	return nil
}

// Remove detaches the data path and deletes the pins.
func (a *Agent) Remove() error {
	if a.link != nil {
		a.link.Unpin()
	}
	a.Close()
	return os.RemoveAll(a.cfg.PinDir)
}

// Routes lists the routes, sorted: the FIB's, each with its next hops and
// where it came from.
func (a *Agent) Routes() []routerapi.RouteInfo {
	return a.RoutesPage(netip.Prefix{}, math.MaxInt)
}

// RoutesPage is at most limit of the routes in Routes' order, those after
// the prefix after (none: from the first). Only the page's routes are
// described, so a full table is read a page at a time in little memory.
func (a *Agent) RoutesPage(after netip.Prefix, limit int) []routerapi.RouteInfo {
	a.mu.Lock()
	all := make([]netip.Prefix, 0, a.dp.FIB.Len()+a.dp.FIB6.Len())
	for _, fib := range []table{a.dp.FIB, a.dp.FIB6} {
		for p := range fib.Routes().All() {
			all = append(all, p)
		}
	}
	a.mu.Unlock()
	// IPv4 first, each family by address then length; sorted without
	// the agent's lock, which a full table would hold for long.
	slices.SortFunc(all, comparePrefix)
	from := 0
	if after.IsValid() {
		var found bool
		if from, found = slices.BinarySearchFunc(all, after, comparePrefix); found {
			from++
		}
	}
	out := []routerapi.RouteInfo{}
	a.mu.Lock()
	for _, p := range all[from:min(len(all), from+min(limit, len(all)))] {
		// A route the FIB dropped while the list was sorted is left out.
		if g, ok := a.fib(p.Addr()).Routes().Get(p); ok {
			out = append(out, a.routeInfo(p, g))
		}
	}
	a.mu.Unlock()
	return a.withOrigins(out)
}

// comparePrefix orders prefixes as the API lists routes: IPv4 before
// IPv6, by address, then by length.
func comparePrefix(p, q netip.Prefix) int {
	if c := p.Addr().Compare(q.Addr()); c != 0 {
		return c
	}
	return p.Bits() - q.Bits()
}

// RoutesDigest is the FIB's routes in a figure (routerapi.RoutesDigest):
// a route whose next hops have no gateway is connected, as Routes says.
func (a *Agent) RoutesDigest() routerapi.RoutesDigest {
	a.mu.Lock()
	defer a.mu.Unlock()
	d := routerapi.RoutesDigest{Connected: []string{}}
	var sum uint64
	viaGateway := map[uint32]bool{} // by next-hop group
	add := func(p netip.Prefix, g uint32) {
		gw, ok := viaGateway[g]
		if !ok {
			for _, id := range a.nh.group(g) {
				if k, _ := a.nh.next(id); k.gw.IsValid() {
					gw = true
					break
				}
			}
			viaGateway[g] = gw
		}
		if !gw {
			d.Connected = append(d.Connected, p.String())
			return
		}
		d.Routes++
		sum += routerapi.PrefixHash(p)
	}
	for p, g := range a.dp.FIB.Routes().All() {
		add(p, g)
	}
	for p, g := range a.dp.FIB6.Routes().All() {
		add(p, g)
	}
	d.Sum = routerapi.DigestSum(sum)
	changed := a.dp.FIB.ChangedAt()
	if t6 := a.dp.FIB6.ChangedAt(); t6.After(changed) {
		changed = t6
	}
	d.FIBChanged = routerapi.Stamp(changed)
	if a.rib != nil {
		d.TableArrived = a.rib.TableArrived()
	}
	return d
}

// Route returns the route for exactly p, if there is one.
func (a *Agent) Route(p netip.Prefix) []routerapi.RouteInfo {
	return a.withOrigins(a.longestMatch(p.Addr(), p.Bits(), p.Bits()))
}

// Lookup returns the FIB's longest match for addr, if there is one.
func (a *Agent) Lookup(addr netip.Addr) []routerapi.RouteInfo {
	return a.withOrigins(a.longestMatch(addr, addr.BitLen(), 0))
}

// longestMatch is the FIB's longest route for addr of length most down to
// least, or none.
func (a *Agent) longestMatch(addr netip.Addr, most, least int) []routerapi.RouteInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	routes := a.fib(addr).Routes()
	for bits := most; bits >= least; bits-- {
		p := netip.PrefixFrom(addr, bits).Masked()
		if g, ok := routes.Get(p); ok {
			return []routerapi.RouteInfo{a.routeInfo(p, g)}
		}
	}
	return []routerapi.RouteInfo{}
}

// withOrigins says where each route came from: connected (a port's own
// subnet), what the RIB feed's suite said of it (origin.go), or api (added
// through this back-end's own API). Call without a.mu: the feed's lock
// comes first.
func (a *Agent) withOrigins(rs []routerapi.RouteInfo) []routerapi.RouteInfo {
	a.mu.Lock()
	rib := a.rib
	a.mu.Unlock()
	for i := range rs {
		r := &rs[i]
		if len(r.Via) == 0 {
			r.Protocol = "connected"
			continue
		}
		r.Protocol = "api"
		if rib == nil {
			continue
		}
		if o, ok := rib.bestOrigin(netip.MustParsePrefix(r.Prefix)); ok {
			r.Protocol = cmp.Or(originName(o.code), "rib")
			if o.distance {
				r.Distance = int(o.preference())
			} else {
				r.Preference = int(o.preference())
			}
		}
	}
	return rs
}

func (a *Agent) routeInfo(p netip.Prefix, g uint32) routerapi.RouteInfo {
	ri := routerapi.RouteInfo{Prefix: p.String()}
	for _, id := range a.nh.group(g) {
		k, _ := a.nh.next(id)
		if k.gw.IsValid() {
			ri.Via = append(ri.Via, k.gw.String())
		} else if int(k.port) < len(a.set.Ports) {
			ri.Port = a.set.Ports[k.port].Name
		}
		if ri.VLAN == 0 && int(k.port) < len(a.set.Ports) {
			ri.VLAN = a.set.Ports[k.port].VLAN
		}
	}
	return ri
}

// Status reports routes, neighbours, counters.
func (a *Agent) Status() *routerapi.Status {
	a.mu.Lock()
	nACL := len(a.set.ACL)
	a.mu.Unlock()
	st, _ := a.dp.Stats(nACL)
	// The feed's lock is taken before the agent's (it adds routes holding
	// it), so ask it first.
	a.mu.Lock()
	rib := a.rib
	a.mu.Unlock()
	var ribStatus *routerapi.RIBStatus
	if rib != nil {
		rs := rib.Status()
		ribStatus = &rs
	}
	ready := a.ready()
	mem := a.memory()
	a.mu.Lock()
	defer a.mu.Unlock()
	s := &routerapi.Status{Memory: mem, Ready: ready, ACL: []string{}, Ports: portsText(a.set.Ports), RIB: ribStatus, Drained: a.set.Drained, CapacityMbps: a.set.CapacityMbps, Name: a.cfg.Name, ID: a.cfg.ID, Routes: a.dp.FIB.Len(), Tbl8Used: a.dp.FIB.Tbl8Used(), FIBChanges: a.dp.FIB.Changes() + a.dp.FIB6.Changes(),
		Routes6: a.dp.FIB6.Len(), FIB6LinesUsed: a.dp.FIB6.LinesUsed(), FIB6Lines: a.dp.FIB6.Lines(), FIB6Groups: a.dp.FIB6.Groups(),
		Neighbors: map[string]string{}, Stats: st.api(), SlowPath: map[string]uint64{}, CapacityPPS: a.capPPS}
	a.helloMu.Lock()
	s.Hellos = a.hellos
	a.helloMu.Unlock()
	if a.conn != nil {
		s.DIST = a.conn.Counters()
		s.DISTRoleRefused = s.DIST["role_refused"]
		s.DIST["config_too_many_ports"] = a.configsRefused
	}
	s.MaxPorts = a.dp.Ports
	if st != nil {
		s.CapDrop, s.InfraDropped, s.URPFDropped = st.Drops["cap"], st.Drops["infra"], st.Drops["urpf"]
		if busy, ok := a.busy.Permyriad(); ok {
			s.Busy = float64(busy) / 10000
		}
	}
	for _, r := range a.set.ACL {
		s.ACL = append(s.ACL, acl.Text(r.wire()))
	}
	for _, p := range a.inside {
		s.Infrastructure = append(s.Infrastructure, p.String())
	}
	s.SlowRates = map[string]routerapi.SlowRate{}
	for i, r := range a.cfg.SlowRates {
		s.SlowRates[SlowNames[i]] = routerapi.SlowRate{PPS: r.PPS, Burst: r.Burst}
	}
	for k, v := range a.counters {
		s.SlowPath[k] = v
	}
	a.neighMu.Lock()
	defer a.neighMu.Unlock()
	for k, v := range a.neighCounters {
		s.SlowPath[k] += v
	}
	for k, n := range a.neigh {
		s.Neighbors[fmt.Sprintf("%s vlan %d", k.IP, k.VLAN)] = n.mac.String()
		if n.static {
			s.StaticNeighbors = append(s.StaticNeighbors, fmt.Sprintf("%s vlan %d", k.IP, k.VLAN))
		}
	}
	slices.Sort(s.StaticNeighbors)
	for k := range a.pending {
		s.Pending = append(s.Pending, fmt.Sprintf("%s vlan %d", k.IP, k.VLAN))
	}
	return s
}

// SetCapacity changes the data path's capacity at run time (0: no cap),
// as a slower or busier machine: the VCP's load-aware weights are shown
// by lowering one back-end's.
func (a *Agent) SetCapacity(pps uint64) error {
	if pps > element.MaxCapacityPPS {
		return fmt.Errorf("capacity %d pps: at most %d (0: no cap)", pps, element.MaxCapacityPPS)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.dp.SetCap(pps); err != nil {
		return err
	}
	a.capPPS = pps
	a.log.Info("capacity set", "capacity_pps", pps)
	return nil
}

// tokenBucket rate-limits ICMP errors.
type tokenBucket struct {
	rate, burst, tokens float64
	last                time.Time
}

func (b *tokenBucket) take(now time.Time) bool {
	if !b.last.IsZero() {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
