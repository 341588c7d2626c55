package lb

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/cilium/ebpf/link"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/api"
	"github.com/msr-router/msr/internal/config"
	"github.com/msr-router/msr/internal/element"
	"github.com/msr-router/msr/internal/iflink"
	"github.com/msr-router/msr/internal/inet"
	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/internal/trace"
	"github.com/msr-router/msr/internal/xdp"
	"github.com/msr-router/msr/lb/lbapi"
	"github.com/msr-router/msr/router/routerapi"
)

// Agent is `msr lb`: it loads and attaches the data path, keeps its maps
// in line with the configuration, the VCP's messages and the back-ends'
// hellos, and sends the LB's own hellos.
type Agent struct {
	cfg    *AgentConfig
	mode   Mode
	dp     *Dataplane
	sender *dist.Sender
	links  []link.Link
	conns  map[string]*dist.Conn
	log    *slog.Logger

	// routes are the samples' routes, asked of the back-ends (routes.go).
	routes *routeCache
	// sflow is the sFlow export (sflow.go).
	sflow *exporter
	// trace is msr trace's reports (trace.go).
	trace trace.Recorder

	mu        sync.Mutex
	ports     []*agentPort   // by index
	inside    []netip.Prefix // the router's infrastructure (lb_infra)
	backends  map[string]*backendState
	vcpMAC    net.HardwareAddr
	vcpTable  *vcpTable // nil until the VCP sends one
	assembly  *vcpTable
	installed string // identity of the installed table
	tableGen  uint32
	table     *Table
	tableOf   []Backend // what table was built from
	// found is the back-ends of the table a previous run left in the
	// pinned maps, foundMode its mode: until the VCP's table arrives, an
	// agent with no configured back-ends keeps it (wanted).
	found     []Backend
	foundMode Mode
	// listening: until one hold time after the agent started listening,
	// it has not heard every live back-end yet and keeps the table it found.
	listening time.Time
	// paths times the paths through the back-ends; flowletGap is the gap
	// lb_cfg holds (the configured one, or the measured one).
	paths      *pathMeter
	flowletGap time.Duration
	// panicking: every back-end fell silent at once and the table keeps
	// them all (wanted); allSilent counts the times it began.
	panicking bool
	allSilent uint64
	// peers are the router's peers on this LB's ports as the VCP last
	// sent them (lb_peers holds those on a port it has); peersUnplaced
	// counts the ones on no port of this LB.
	peers         []dist.Peer
	peersUnplaced int
}

type agentPort struct {
	name      string
	ifindex   int
	index     uint8
	mac       net.HardwareAddr
	role      uint8
	auto      bool // role learned from DIST traffic
	vlan      uint16
	urpf      bool // balanced tagged, for the back-end's unicast RPF
	prefix    netip.Prefix
	prefix6   netip.Prefix // external ports' IPv6 address; invalid: none
	isDefault bool
	speed     uint32 // the configured capacity (capacity_mbps)
	capPPS    uint64 // internal ports: DTX-n's cap; 0: none
	sflowRate uint32 // external ports: 1 in N sampled for sFlow; 0: none
	// link is the port's state as the kernel says (links.go); linkChanges
	// counts its operational changes since the agent started, the last
	// at linkSince.
	link        iflink.State
	linkChanges uint64
	linkSince   time.Time
}

type backendState struct {
	mac      net.HardwareAddr
	api      netip.AddrPort // its management API (invalid: none known)
	name     string
	capacity uint32
	draining bool
	last     time.Time // its last hello's arrival, by the kernel's clock
	// inTable says a table with it is installed; left and leftAfter say
	// when the first table without it was installed, and how long after
	// its last hello (by the hellos' own stamps: what a test of the
	// expiry reads, rather than its own polling's clock).
	inTable          bool
	left             time.Time
	leftAfterHello   time.Duration
	leftDecidedAfter time.Duration // when the table without it was wanted
	leftHeardLag     time.Duration // how far behind its DIST sockets the agent read then
}

type vcpTable struct {
	generation uint32
	mode       Mode
	entries    []dist.TableEntry
}

// NewAgent sets the LB up: call it inside the LB's network namespace
// (interface names, XDP attachment and DIST sockets are resolved there).
// What it starts keeps working from any thread.
func NewAgent(cfg *AgentConfig, log *slog.Logger) (*Agent, error) {
	keys, err := cfg.Keys(false)
	if err != nil {
		return nil, err
	}
	sender, err := dist.NewSender(cfg.ID, keys.Seal)
	if err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, mode: cfg.Mode, sender: sender, conns: map[string]*dist.Conn{}, vcpMAC: cfg.VCPMAC,
		backends: map[string]*backendState{}, log: log.With("component", "lb", "lb", cfg.Name), paths: newPathMeter(), flowletGap: cfg.FlowletGap}
	if a.flowletGap == 0 {
		a.flowletGap = DefaultFlowletGap // until the paths are measured
	}
	// The back-ends' APIs (the samples' routes): with the deployment's
	// read token, else its admin one, and certificate.
	access, err := cfg.APISecurity.Access(api.Token(keys.Element.Secret))
	if err != nil {
		return nil, err
	}
	tc, err := api.ClientTLS(cfg.APISecurity.Trust())
	if err != nil {
		return nil, err
	}
	a.routes = newRouteCache(cmp.Or(access.Read, access.Admin), tc)
	if err := a.setup(keys.Ring); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

func (a *Agent) setup(keys dist.Keyring) error {
	if err := netns.EnsureBPFFS(); err != nil {
		return err
	}
	if err := os.MkdirAll(a.cfg.PinDir, 0o700); err != nil {
		return fmt.Errorf("pin directory: %w", err)
	}
	dp, err := LoadDataplane(a.cfg.PinDir, a.cfg.Force)
	if err != nil {
		return err
	}
	a.dp = dp
	for _, m := range dp.Migrated {
		a.log.Warn("data path map of an older layout migrated", "map", m.Map, "entries", m.Entries, "empty", m.Empty, "why", m.Why)
	}
	for i, pc := range a.cfg.Ports {
		ifi, err := net.InterfaceByName(pc.Name)
		if err != nil {
			return fmt.Errorf("port %s: %w", pc.Name, err)
		}
		a.ports = append(a.ports, &agentPort{name: pc.Name, ifindex: ifi.Index, index: uint8(i), mac: ifi.HardwareAddr, role: pc.Role,
			vlan: pc.VLAN, prefix: pc.Address, prefix6: pc.Address6, isDefault: pc.Default, speed: pc.CapacityMbps, capPPS: pc.CapacityPPS, auto: pc.Auto, sflowRate: pc.SFlowRate})
	}
	if a.sflow, err = newExporter(a); err != nil {
		return err
	}
	a.readLinks()
	skip := func(ifname string) bool {
		return slices.ContainsFunc(a.ports, func(p *agentPort) bool { return p.name == ifname })
	}
	host, err := element.HostInfra(skip)
	if err != nil {
		return fmt.Errorf("this host's prefixes: %w", err)
	}
	if a.inside, err = element.Inside(a.cfg.Infrastructure, host, config.Pos{}); err != nil {
		return err
	}
	if err := a.reconcileMaps(); err != nil {
		return err
	}
	a.adoptTable()
	for _, p := range a.ports {
		l, adopted, err := xdp.AdoptOrAttach(filepath.Join(a.cfg.PinDir, "link_"+p.name), a.dp.Program(), p.ifindex)
		if err != nil {
			return fmt.Errorf("port %s: %w", p.name, err)
		}
		if adopted {
			a.log.Info("adopted pinned XDP link", "port", a.portName(p))
		}
		a.links = append(a.links, l)
		if p.role != RoleExternal {
			c, err := dist.Listen(p.name, keys)
			if err != nil {
				return err
			}
			a.conns[p.name] = c
			if err := a.cfg.PersistReplay(c, p.name); err != nil {
				return err
			}
		}
	}
	return nil
}

// adoptTable takes the table a previous run left in the pinned maps as
// the installed one. A restarted agent whose back-ends come from the VCP
// would otherwise install an empty table one hold time after it started,
// when the VCP's table had not reached it yet (the VCP itself in a
// takeover), and drop every frame as no_backend until it did: msr soak,
// finding 24. A table naming a port this agent does not have (another
// lab's pins) is not adopted.
func (a *Agent) adoptTable() {
	t, err := a.dp.ActiveTable()
	if err != nil {
		a.log.Warn("read the pinned balancing table", "err", err)
		return
	}
	if len(t.Slots) == 0 {
		return
	}
	bs := BackendsOf(t)
	for _, b := range bs {
		if int(b.PortIndex) >= len(a.ports) || a.ports[b.PortIndex].ifindex != b.Ifindex {
			return
		}
	}
	a.found, a.foundMode = bs, t.Mode
	a.table, a.tableOf, a.installed = t, bs, fmt.Sprint(t.Mode, bs)
	a.log.Info("adopted balancing table", "mode", t.Mode, "backends", len(bs), "slots", len(t.Slots))
}

// reconcileMaps writes every port, address and the LB-wide config, and
// removes what a previous run (or a previous lab) left in pinned maps.
func (a *Agent) reconcileMaps() error {
	// Write what is wanted before removing what is not, so that a
	// restarted agent never leaves a gap in a running data path.
	for _, p := range a.ports {
		if err := a.writePort(p); err != nil {
			return err
		}
	}
	ports, own, vlans := map[uint32]bool{}, map[uint64]bool{}, map[uint32]bool{}
	for _, p := range a.ports {
		ports[uint32(p.ifindex)] = true
		own[macKey(p.mac)] = true
		if p.role == RoleExternal {
			vlans[uint32(p.vlan)] = true
		}
	}
	xdp.DeleteStale(a.dp.objs.LbPorts, func(k uint32, _ lbxdpLbPort) bool { return ports[k] })
	xdp.DeleteStale(a.dp.objs.LbOwnMacs, func(k uint64, _ uint32) bool { return own[k] })
	var staleVLANs []uint32
	var vid uint32
	var eg lbxdpLbEgress
	for it := a.dp.objs.LbVlans.Iterate(); it.Next(&vid, &eg); {
		if eg.Ifindex != 0 && !vlans[vid] {
			staleVLANs = append(staleVLANs, vid)
		}
	}
	for _, vid := range staleVLANs {
		a.dp.ClearVLAN(uint16(vid)) // an array: entries are zeroed, not deleted
	}
	addrs := map[netip.Addr]uint32{}
	for _, addr := range a.cfg.RouterAddresses {
		addrs[addr] = AddrRouter
	}
	for _, p := range a.ports {
		for _, addr := range p.routerAddrs() {
			addrs[addr] = AddrRouter
		}
	}
	if a.cfg.ManagementAddr.IsValid() {
		addrs[a.cfg.ManagementAddr] = AddrMgmt
	}
	keepAddr, keepAddr6 := map[uint32]bool{}, map[lbxdpLbAddr6]bool{}
	for addr, flags := range addrs {
		if err := a.dp.SetRouterAddr(addr, flags); err != nil {
			return err
		}
		if addr.Is4() {
			keepAddr[be32(addr)] = true
		} else {
			keepAddr6[lbxdpLbAddr6{Addr: in6(addr)}] = true
		}
	}
	xdp.DeleteStale(a.dp.objs.LbRouterAddrs, func(k uint32, _ uint32) bool { return keepAddr[k] })
	xdp.DeleteStale(a.dp.objs.LbRouterAddrs6, func(k lbxdpLbAddr6, _ uint32) bool { return keepAddr6[k] })
	if err := a.dp.SetInfra(a.inside); err != nil {
		return err
	}
	if err := a.writeCaps(); err != nil {
		return err
	}
	for c, r := range a.cfg.Police {
		if err := a.dp.SetPolice(PoliceClass(c), r); err != nil {
			return err
		}
	}
	return a.writeConfig()
}

// writeCaps writes the LB's capacity and every port's, and clears the
// rest of lb_caps (a port index a previous run used).
func (a *Agent) writeCaps() error {
	caps := map[uint32]uint64{CapElement: a.cfg.CapacityPPS}
	for _, p := range a.ports {
		caps[CapPort+uint32(p.index)] = p.capPPS
	}
	for i := CapElement; i < CapPort+uint32(MaxPorts); i++ {
		if err := a.dp.SetCap(i, caps[i]); err != nil {
			return err
		}
	}
	return nil
}

// routerAddrs are an external port's addresses, which are the router's:
// its IPv4 address, its link-local IPv6 address (its MAC's EUI-64) and its
// global IPv6 address; none for other ports.
func (p *agentPort) routerAddrs() []netip.Addr {
	if p.role != RoleExternal {
		return nil
	}
	var addrs []netip.Addr
	for _, q := range []netip.Prefix{p.prefix, p.prefix6} {
		if q.IsValid() {
			addrs = append(addrs, q.Addr())
		}
	}
	return append(addrs, inet.LinkLocal(p.mac))
}

func (a *Agent) writePort(p *agentPort) error {
	return a.dp.SetPort(Port{Ifindex: p.ifindex, Index: p.index, Role: p.role, MAC: p.mac, VLAN: p.vlan, Addr: p.prefix.Addr(), Addr6: p.prefix6.Addr(), URPF: p.urpf, SampleRate: p.sflowRate})
}

func (a *Agent) defaultPort() *agentPort {
	for _, p := range a.ports {
		if p.isDefault && p.role == RoleInternal {
			return p
		}
	}
	for _, p := range a.ports {
		if p.role == RoleInternal {
			return p
		}
	}
	return nil
}

func (a *Agent) writeConfig() error {
	c := Config{VCPMAC: a.vcpMAC, ManagementAddr: a.cfg.ManagementAddr, FlowletGap: a.flowletGap, FlowLabel: a.cfg.FlowLabel}
	if d := a.defaultPort(); d != nil {
		c.DefaultIntIfindex = d.ifindex
	}
	return a.dp.SetConfig(c)
}

// Run receives DIST frames and sends hellos until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	a.listening = time.Now()
	var wg sync.WaitGroup
	stopTrace, err := a.startTrace()
	if err != nil {
		return err
	}
	defer stopTrace()
	if err := a.sflow.runFrom(ctx); err != nil {
		return err
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.routes.run(ctx, a.backendAPIs)
	}()
	defer a.sflow.wg.Wait()
	for name, c := range a.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.receive(ctx, name, c)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.followLinks(ctx.Done())
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		probe := time.NewTicker(ProbeInterval)
		defer probe.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-probe.C:
				a.paths.closeRounds(now)
				a.measureGap()
				a.probePaths(now)
			}
		}
	}()
	// Hellos on their own clock: a table being built and installed (a
	// Maglev table of 65,537 slots on a busy machine) must not hold them
	// back, or the VCPs take this LB for dead, its ports down with it
	// (msr soak, finding 11).
	wg.Add(1)
	go func() {
		defer wg.Done()
		hello := time.NewTicker(a.cfg.HelloInterval)
		defer hello.Stop()
		for {
			a.sendHello()
			select {
			case <-ctx.Done():
				return
			case <-hello.C:
			}
		}
	}()
	// Expiry is checked four times per hello interval, so a back-end
	// leaves the table at most a quarter interval after its hold time.
	tick := time.NewTicker(a.cfg.HelloInterval / 4)
	defer tick.Stop()
	for {
		if err := a.applyTable(); err != nil {
			a.log.Error("install balancing table", "err", err)
		}
		select {
		case <-ctx.Done():
			wg.Wait()
			return nil
		case <-tick.C:
		}
	}
}

func (a *Agent) receive(ctx context.Context, port string, c *dist.Conn) {
	for ctx.Err() == nil {
		f, err := c.Recv(200 * time.Millisecond)
		if errors.Is(err, dist.ErrTimeout) {
			continue
		}
		if err != nil {
			a.log.Error("receive DIST", "port", dist.PortName(a.cfg.Name, port), "err", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		a.handle(port, f)
	}
}

// handle applies one authenticated DIST frame.
func (a *Agent) handle(port string, f *dist.Frame) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sense(port)
	switch m := f.Msg.(type) {
	case *dist.Hello:
		if m.Role == dist.RoleRouter {
			b := a.backends[f.Src.String()]
			if b == nil {
				b = &backendState{mac: f.Src}
				a.backends[f.Src.String()] = b
				a.log.Info("back-end up", "mac", f.Src.String(), "name", m.Name)
			}
			b.name, b.capacity, b.last = m.Name, m.Capacity, f.Received
			b.api, _ = routerapi.APIOf(m)
			b.draining = m.Flags&dist.HelloFlagDraining != 0
		}
	case *dist.Probe:
		if f.Header.Sender == a.sender.ID {
			a.paths.returned(f.Header.Seq, f.Src, f.Received)
		}
	case *dist.VCPAnnounce:
		if m.State == dist.VCPActive && !bytes.Equal(a.vcpMAC, f.Src) {
			a.vcpMAC = f.Src
			a.log.Info("VCP", "mac", f.Src)
			if err := a.writeConfig(); err != nil {
				a.log.Error("write config", "err", err)
			}
		}
	case *dist.PortConfig:
		if m.Target == a.cfg.ID {
			a.applyPortConfig(m)
		}
	case *dist.TableUpdate:
		if m.Target == a.cfg.ID {
			a.assemble(m)
		}
	case *dist.Peers:
		if m.Target == a.cfg.ID {
			a.peers = m.Peers
			a.applyPeers()
		}
	}
}

// applyPeers sets lb_peers to the peers the VCP sent on this LB's
// external ports, found by their VLANs: again whenever the ports change.
func (a *Agent) applyPeers() {
	var set []Peer
	unplaced := 0
	for _, pr := range a.peers {
		i := slices.IndexFunc(a.ports, func(p *agentPort) bool { return p.role == RoleExternal && p.vlan == pr.VLAN })
		if i < 0 {
			unplaced++
			continue
		}
		set = append(set, Peer{PeerKey: PeerKey{Addr: pr.Addr, Port: a.ports[i].index}, GTSM: pr.Flags&dist.PeerGTSM != 0})
	}
	if err := a.dp.SetPeers(set); err != nil {
		a.log.Error("PEERS", "err", err)
		return
	}
	if unplaced != a.peersUnplaced {
		a.log.Info("peers", "held", len(set), "on no port of this LB", unplaced)
	}
	a.peersUnplaced = unplaced
}

// sense makes an auto port internal once DIST arrives on it: the LB
// learns its ports' roles by sensing DIST traffic.
func (a *Agent) sense(port string) {
	for _, p := range a.ports {
		if p.name == port && p.auto && p.role == RoleUnknown {
			p.role = RoleInternal
			a.log.Info("port sensed internal", "port", a.portName(p))
			if err := a.writePort(p); err != nil {
				a.log.Error("write port", "err", err)
			}
			a.writeConfig()
		}
	}
}

func (a *Agent) applyPortConfig(m *dist.PortConfig) {
	for _, s := range m.Ports {
		for _, p := range a.ports {
			if !bytes.Equal(p.mac, s.MAC) {
				continue
			}
			if p.role == RoleExternal && p.vlan != 0 && p.vlan != s.VLAN {
				a.dp.ClearVLAN(p.vlan)
			}
			p.role, p.vlan, p.prefix, p.prefix6 = uint8(s.Role), s.VLAN, s.Prefix, s.Prefix6
			p.isDefault = s.Flags&dist.PortFlagDefaultInternal != 0
			p.urpf = s.Flags&dist.PortFlagURPF != 0
			if p.role != RoleExternal {
				p.sflowRate = 0
			}
			if err := a.writePort(p); err != nil {
				a.log.Error("PORT_CONFIG", "port", a.portName(p), "err", err)
			}
			for _, addr := range p.routerAddrs() {
				a.dp.SetRouterAddr(addr, AddrRouter)
			}
		}
	}
	a.applySampleRates()
	a.writeConfig()
	a.applyPeers()
}

// assemble collects the frames of one table generation; a frame of
// another generation before LAST abandons the partial table (docs/dist.md).
func (a *Agent) assemble(m *dist.TableUpdate) {
	if m.Flags&dist.TableFlush != 0 || a.assembly == nil || a.assembly.generation != m.Generation {
		if m.Flags&dist.TableFlush == 0 {
			a.assembly = nil
			return
		}
		a.assembly = &vcpTable{generation: m.Generation, mode: Mode(m.Mode)}
	}
	a.assembly.entries = append(a.assembly.entries, m.Entries...)
	if m.Flags&dist.TableLast != 0 {
		a.vcpTable, a.assembly = a.assembly, nil
		a.log.Info("table from VCP", "generation", m.Generation, "entries", len(a.vcpTable.entries))
	}
}

// alive says whether a back-end's hellos are current: judged against the
// time up to which the LB has read every port's hellos (heardUpTo).
func (a *Agent) alive(mac net.HardwareAddr, now time.Time) bool {
	b := a.backends[mac.String()]
	return b != nil && !b.draining && a.heardUpTo(now).Sub(b.last) <= a.hold()
}

// heardUpTo is the time up to which the LB has read every DIST frame its
// ports' sockets received: now, or earlier if a receive loop is behind
// (dist.Conn.CaughtUp). A back-end whose hellos wait in a socket's queue
// is not silent: judged against the LB's own clock, a stall of the LB's
// process dropped back-ends that had sent all along, and the flows they
// carried moved twice.
func (a *Agent) heardUpTo(now time.Time) time.Time {
	heard := now
	for _, c := range a.conns {
		heard = c.HeardUpTo(heard)
	}
	return heard
}

// hold is how long a back-end stays alive after its last hello.
func (a *Agent) hold() time.Duration {
	return a.cfg.Hold()
}

// wanted computes the table the LB should have now: the VCP's entries, or
// the configured back-ends, or (neither yet) the table found in the maps
// at start, less those whose hellos stopped. When the
// hellos of every one stopped at once, it keeps them all (but those
// draining): the LB's own view is then the likelier fault (its process or
// the interconnect stalled: the soak saw both LBs drop all four back-ends
// for 1.2 s after a takeover, finding 16), and an empty table drops every
// frame, where back-ends truly gone lose no more than it would. Envoy's
// panic threshold is the same rule at 50%; one back-end gone of several is
// still dropped at once.
func (a *Agent) wanted(now time.Time) (Mode, []Backend) {
	mode := a.mode
	portByIndex := map[uint8]*agentPort{}
	for _, p := range a.ports {
		portByIndex[p.index] = p
	}
	var live, listed []Backend // the live ones; every one not draining
	// sort puts one of the table's back-ends with the live ones and, not
	// draining and heard at least once, the listed ones.
	sort := func(b Backend, heard bool) {
		if a.alive(b.MAC, now) {
			live = append(live, b)
		}
		if heard && !a.draining(b.MAC) {
			listed = append(listed, b)
		}
	}
	switch {
	case a.vcpTable != nil:
		mode = a.vcpTable.mode
		for _, e := range a.vcpTable.entries {
			if p := portByIndex[e.Port]; p != nil && p.role == RoleInternal {
				sort(Backend{MAC: e.MAC, Ifindex: p.ifindex, PortIndex: p.index, Weight: e.Weight}, true)
			}
		}
	case len(a.cfg.Backends) == 0 && a.found != nil:
		mode = a.foundMode
		for _, b := range a.found {
			sort(b, true)
		}
	default: // the file's, listed once heard
		for _, bc := range a.cfg.Backends {
			for _, p := range a.ports {
				if p.role == RoleInternal && (len(bc.Ports) == 0 || slices.Contains(bc.Ports, p.name)) {
					sort(Backend{MAC: bc.MAC, Ifindex: p.ifindex, PortIndex: p.index, Weight: bc.Weight}, a.backends[bc.MAC.String()] != nil)
				}
			}
		}
	}
	panicking := len(live) == 0 && len(listed) > 0
	if panicking != a.panicking {
		a.panicking = panicking
		if panicking {
			a.allSilent++
			a.log.Warn("every back-end silent at once: keeping them all in the table", "backends", len(listed))
		} else {
			a.log.Info("back-ends heard again")
		}
	}
	if panicking {
		return mode, listed
	}
	return mode, live
}

// draining says whether the back-end's last hello said it is draining
// (the operator's drain, or not ready).
func (a *Agent) draining(mac net.HardwareAddr) bool {
	b := a.backends[mac.String()]
	return b != nil && b.draining
}

// installHook, when set (a test), runs before each table install: a
// slow install on a busy machine.
var installHook func()

// applyTable installs the wanted table if it differs from the installed
// one.
func (a *Agent) applyTable() error {
	if time.Since(a.listening) < a.hold() {
		return nil
	}
	decided := time.Now()
	a.mu.Lock()
	mode, bs := a.wanted(decided)
	heard := a.heardUpTo(decided)
	id := fmt.Sprint(mode, bs)
	if id == a.installed {
		a.mu.Unlock()
		return nil
	}
	prev, prevBs := a.table, a.tableOf
	a.mu.Unlock()
	t, err := RebuildTable(prev, prevBs, mode, bs)
	if err != nil {
		return err
	}
	if installHook != nil {
		installHook()
	}
	if err := a.dp.InstallTable(t); err != nil {
		return err
	}
	installed := time.Now()
	a.mu.Lock()
	a.installed, a.table, a.tableOf = id, t, bs
	a.tableGen++
	a.markLeft(bs, decided, heard, installed)
	a.mu.Unlock()
	a.log.Info("balancing table installed", "mode", mode, "backends", len(bs), "slots", len(t.Slots))
	return nil
}

// markLeft notes, for each back-end heard, whether the table just
// installed (at; wanted at decided, when the agent had read its DIST
// sockets up to heard) holds it, and when one it held is left out.
func (a *Agent) markLeft(bs []Backend, decided, heard, at time.Time) {
	in := map[string]bool{}
	for _, b := range bs {
		in[b.MAC.String()] = true
	}
	for mac, b := range a.backends {
		switch {
		case in[mac]:
			b.inTable, b.left = true, time.Time{}
		case b.inTable:
			b.inTable, b.left, b.leftAfterHello, b.leftDecidedAfter = false, at, at.Sub(b.last), decided.Sub(b.last)
			b.leftHeardLag = decided.Sub(heard)
		}
	}
}

func (a *Agent) sendHello() {
	a.mu.Lock()
	// The generation reported is the VCP's table this LB holds (0: none),
	// so that the VCP sees an LB that restarted and pushes it again.
	var gen uint32
	if a.vcpTable != nil {
		gen = a.vcpTable.generation
	}
	h := &dist.Hello{Role: dist.RoleLB, HelloIntervalMs: uint16(a.cfg.HelloInterval / time.Millisecond),
		HoldMultiplier: a.cfg.HoldMultiplier, Installed: gen, Name: a.cfg.Name}
	d := a.defaultPort()
	for _, p := range a.ports {
		st, err := a.dp.Stats(p.index)
		if err != nil {
			continue
		}
		flags := element.PortFlags(p.link)
		if p == d {
			flags |= dist.PortFlagDefaultInternal
		}
		if p.role == RoleInternal {
			h.Capacity += p.speed
		}
		h.Ports = append(h.Ports, dist.PortStatus{Index: p.index, Role: dist.PortRole(p.role), VLAN: p.vlan, Name: p.name,
			MAC: p.mac, Prefix: p.prefix, Flags: flags, SpeedMbps: p.link.SpeedMbps, MTU: uint16(p.link.MTU),
			RxPackets: st.RxPackets, RxBytes: st.RxBytes, TxPackets: st.TxPackets, TxBytes: st.TxBytes})
	}
	a.mu.Unlock()
	if d == nil {
		return
	}
	c := a.conns[d.name]
	frame, err := a.sender.Seal(dist.GroupMAC, d.mac, h)
	if err == nil && c != nil {
		err = c.Send(frame)
	}
	if err != nil {
		a.log.Error("send hello", "err", err)
	}
}

// Close detaches nothing: the pinned links keep the data path forwarding
// while the agent is away. It closes sockets and this process's handles.
func (a *Agent) Close() error {
	for _, c := range a.conns {
		c.Close()
	}
	if a.sflow != nil {
		a.sflow.close()
	}
	for _, l := range a.links {
		l.Close()
	}
	if a.dp != nil {
		return a.dp.Close()
	}
	return nil
}

// Remove detaches the data path and deletes the pins: the LB stops.
func (a *Agent) Remove() error {
	for _, l := range a.links {
		l.Unpin()
	}
	a.Close()
	return os.RemoveAll(a.cfg.PinDir)
}

// SlotTable reports the installed table.
func (a *Agent) SlotTable() *lbapi.SlotTable {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := &lbapi.SlotTable{Generation: a.tableGen, Slots: []string{}}
	if a.table != nil {
		t.Mode = a.table.Mode.String()
		for _, sl := range a.table.Slots {
			t.Slots = append(t.Slots, sl.MAC.String())
		}
	}
	return t
}

// Status reports ports, counters, back-ends and the table.
func (a *Agent) Status() *lbapi.Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	s := &lbapi.Status{Name: a.cfg.Name, ID: a.cfg.ID, CapacityPPS: a.cfg.CapacityPPS, DIST: map[string]map[string]uint64{}, AllBackendsSilent: a.allSilent}
	if a.vcpMAC != nil {
		s.VCPMAC = a.vcpMAC.String()
	}
	for _, p := range a.inside {
		s.Infrastructure = append(s.Infrastructure, p.String())
	}
	d := a.defaultPort()
	for _, p := range a.ports {
		st, _ := a.dp.Stats(p.index)
		ps := lbapi.PortStatus{Name: a.portName(p), Interface: p.name, Ifindex: p.ifindex, Index: p.index, Role: roleName(p.role), MAC: p.mac.String(),
			VLAN: p.vlan, Default: p == d, URPF: p.urpf, CapacityPPS: p.capPPS, Stats: st.api(),
			Link: lbapi.Link{Up: p.link.Up(), AdminUp: p.link.AdminUp, Carrier: p.link.Carrier, OperState: p.link.OperState, MTU: p.link.MTU,
				SpeedMbps: p.link.SpeedMbps, FullDuplex: p.link.FullDuplex, Changes: p.linkChanges}}
		if !p.linkSince.IsZero() {
			ps.Link.SinceS = now.Sub(p.linkSince).Seconds()
		}
		if st != nil {
			s.CapDrop += st.Drops["cap"] + st.Drops["port_cap"]
			s.InfraDropped += st.Drops["infra"]
			s.GTSMDropped += st.Drops["gtsm"]
		}
		if p.prefix.IsValid() {
			ps.Address = p.prefix.String()
		}
		if p.prefix6.IsValid() {
			ps.Address6 = p.prefix6.String()
		}
		if p.role == RoleExternal {
			ps.LinkLocal = inet.LinkLocal(p.mac).String()
		}
		s.Ports = append(s.Ports, ps)
	}
	for _, b := range a.backends {
		bs := lbapi.BackendStatus{MAC: b.mac.String(), Name: b.name, Alive: a.alive(b.mac, now),
			Draining: b.draining, Capacity: b.capacity, LastHelloMs: now.Sub(b.last).Milliseconds()}
		if !b.left.IsZero() {
			bs.LeftTableAgoMs, bs.LeftAfterHelloMs = now.Sub(b.left).Milliseconds(), float64(b.leftAfterHello.Microseconds())/1000
			bs.LeftDecidedAfterHelloMs = float64(b.leftDecidedAfter.Microseconds()) / 1000
			bs.LeftHeardLagMs = float64(b.leftHeardLag.Microseconds()) / 1000
		}
		s.Backends = append(s.Backends, bs)
	}
	sort.Slice(s.Backends, func(i, j int) bool { return s.Backends[i].MAC < s.Backends[j].MAC })
	s.SFlow = a.sflow.status()
	s.Table = lbapi.TableStatus{Generation: a.tableGen, Shares: map[string]int{}}
	if a.table != nil {
		s.Table.Mode = a.table.Mode.String()
		s.Table.Slots = len(a.table.Slots)
		for _, sl := range a.table.Slots {
			s.Table.Shares[sl.MAC.String()]++
		}
	}
	for name, c := range a.conns {
		s.DIST[name] = c.Counters()
		s.DISTRoleRefused += s.DIST[name]["role_refused"]
	}
	s.FlowletGapUs, s.FlowletGapAuto = a.flowletGap.Microseconds(), a.cfg.FlowletGap == 0
	s.Paths = a.paths.status()
	peers, gtsm, _ := a.dp.PeerStats()
	for k, c := range peers {
		ps := lbapi.PeerStatus{Addr: k.Addr.String(), GTSM: gtsm[k], Passed: c.Passed, Dropped: c.Dropped, GTSMDropped: c.GTSMDropped}
		if int(k.Port) < len(a.ports) {
			ps.Port = a.portName(a.ports[k.Port])
		}
		s.Peers = append(s.Peers, ps)
	}
	slices.SortFunc(s.Peers, func(x, y lbapi.PeerStatus) int {
		return cmp.Or(cmp.Compare(x.Port, y.Port), cmp.Compare(x.Addr, y.Addr))
	})
	s.PeersUnplaced = a.peersUnplaced
	counts, _ := a.dp.PoliceStats()
	for c, r := range a.cfg.Police {
		n := counts[c]
		s.Police = append(s.Police, lbapi.PoliceClass{Class: PoliceClass(c).String(), PPS: r.PPS, PerSourcePPS: r.PerSourcePPS, Burst: r.Burst,
			Passed: n.Passed, DroppedSource: n.DroppedSource, DroppedClass: n.DroppedClass})
	}
	return s
}

// portName is the router's name of one of its ports: LB/INTERFACE.
func (a *Agent) portName(p *agentPort) string { return dist.PortName(a.cfg.Name, p.name) }

func roleName(r uint8) string {
	switch r {
	case RoleExternal:
		return "external"
	case RoleInternal:
		return "internal"
	}
	return "unknown"
}
