package vcp

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/api"
	"github.com/msr-router/msr/internal/trace"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// Agent is `msr vcp`: discovery, topology, balancing control.
type Agent struct {
	cfg     *Config
	conn    *dist.Conn
	sender  *dist.Sender
	mirrors *Mirrors
	suite   Suite // nil without routing, and while standby
	// election is VRRP between this VCP and its twin (nil: always active).
	election *Election
	log      *slog.Logger
	// sflowKick has syncSFlow look at the LBs' exports now (sflow.go).
	sflowKick chan struct{}
	token     string      // of the management API, for relaying to elements
	apiTLS    *tls.Config // the elements' APIs' TLS (nil: plain HTTP)
	// ribPassword is the RIB feed's TCP-MD5 key (dist.Key.RIBPassword).
	ribPassword string

	reloadMu sync.Mutex // one reload at a time
	// history is the configs applied (nil without a state dir), pending
	// the commit-confirmed change waiting for its confirm; both under
	// reloadMu (confirm.go).
	history *configHistory
	pending *pendingConfirm
	mu      sync.Mutex
	// active: this VCP configures the LBs and runs the suite; a standby
	// only keeps the topology from hellos.
	active   bool
	elements topology
	// op is what the operator said of the back-ends (operator.go).
	op operatorState
	// links are the mirrors' link states followPorts wants, set outside
	// a.mu (applyMirrorLinks).
	links *mirrorLinks
	// loads are the back-ends' load states, by name (load.go)
	loads  map[string]*loadState
	pushed map[uint64]*lbPush
	// askedRIP: since it became active, the suite's RIP asked its
	// neighbours again once every LB followed this VCP (askRIP).
	askedRIP bool
	// backendPushes is what each back-end was last sent (backends.go),
	// backendSnap what every one is sent at the latest tick.
	backendPushes map[uint64]*backendPush
	backendSnap   *backendSnapshot
	backendBudget sendBudget
	// backendGeneration names each paged BACKEND_CONFIG sent.
	backendGeneration uint32
	// lastPush is the last tick that sent a table (Status's last_push).
	lastPush *vcpapi.PushStatus
	// limitHits counts, by BGP peer, the sessions the suite shut for
	// max_prefixes (peerwatch.go).
	limitHits map[string]uint64
	// igpNeighbors are the suite's OSPF and RIP neighbours as the peer
	// watch last read them: sent to the LBs as peers (peers.go).
	igpNeighbors []IGPNeighbor
	// allSilent: no back-end that may carry traffic is heard, though some
	// were (tick); the tables keep them all (table). allSilentCount counts
	// the times it began.
	allSilent      bool
	allSilentCount uint64
	// twinActive is when another VCP last announced itself active
	// (authenticated DIST); faulted, that this VCP's suite failed and it
	// gave the router up (suiteFailed). Both guard stepping down
	// (stepDown).
	twinActive time.Time
	faulted    bool
	faultedAt  time.Time
	// started is when the agent started; ports are the external ports'
	// states (ports.go), told to portWatchers as they change;
	// ifTableChanged is when a reload last added or removed a port.
	started        time.Time
	ports          map[uint16]*PortState
	portWatchers   []chan PortEvent
	ifTableChanged time.Time
	// unknownPorts are the external ports LBs announced that the config
	// does not have, each logged once (ports.go).
	unknownPorts map[string]bool
	// rates and events are the web view's (view.go).
	rates  rateMeter
	events []vcpapi.ViewEvent
	traces []trace.Walk // the last walks traced, oldest first (maxTraces)
	// talkers is the LBs' top talkers, asked every few seconds.
	talkers talkersCache
}

// topology is the router as the elements' hellos show it: every LB and
// back-end heard, by element id.
type topology map[uint64]*element

// sorted lists the elements of a role by name.
func (t topology) sorted(role dist.Role) []*element {
	var out []*element
	for _, e := range t {
		if e.hello.Role == role {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].hello.Name < out[j].hello.Name })
	return out
}

// named is the element of a role called name, nil if none is heard.
func (t topology) named(role dist.Role, name string) *element {
	for _, e := range t {
		if e.hello.Role == role && e.hello.Name == name {
			return e
		}
	}
	return nil
}

// element is one LB or back-end as its hellos describe it.
type element struct {
	id    uint64
	mac   net.HardwareAddr // the source of its hellos
	hello *dist.Hello
	first time.Time
	last  time.Time // its last hello's arrival, by the kernel's clock
	alive bool
}

// lbPush is what the VCP last sent one LB.
type lbPush struct {
	generation uint32
	table      string // identity of the entries and mode
	ports      string // identity of the port settings
	sent       time.Time
	peers      string // identity of the peers (PEERS), sent at peersSent
	peersSent  time.Time
}

// NewAgent opens the VCP's DIST socket: call it in the VCP's namespace.
func NewAgent(cfg *Config, log *slog.Logger) (*Agent, error) {
	keys, err := cfg.Keys(true)
	if err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, log: log.With("component", "vcp", "vcp", cfg.Name),
		elements: topology{}, op: newOperatorState(), links: newMirrorLinks(), loads: map[string]*loadState{},
		pushed: map[uint64]*lbPush{}, backendPushes: map[uint64]*backendPush{}, limitHits: map[string]uint64{},
		ribPassword: keys.RIB, started: time.Now(), ports: map[uint16]*PortState{}, sflowKick: make(chan struct{}, 1)}
	if a.sender, err = dist.NewSender(cfg.ID, keys.Seal); err != nil {
		return nil, err
	}
	// The other elements' APIs (the console's relay, the back-ends' ACL
	// hits): with the deployment's admin token and certificate.
	access, err := cfg.APISecurity.Access(api.Token(keys.Element.Secret))
	if err != nil {
		return nil, err
	}
	a.token = access.Admin
	if a.apiTLS, err = api.ClientTLS(cfg.APISecurity.Trust()); err != nil {
		return nil, err
	}
	if a.conn, err = dist.Listen(cfg.Interface, keys.Ring); err != nil {
		return nil, err
	}
	if err := cfg.PersistReplay(a.conn, ""); err != nil {
		a.conn.Close()
		return nil, err
	}
	if err := a.openHistory(); err != nil {
		a.conn.Close()
		return nil, err
	}
	if a.mirrors, err = NewMirrors(cfg.Interface, cfg.ExternalPorts); err != nil {
		a.conn.Close()
		return nil, err
	}
	if err := privateDir(cfg.runDir(), runDirMode(cfg.Routing), nil); err != nil {
		a.Close()
		return nil, err
	}
	if cfg.Standby == nil {
		a.active = true
		a.mirrors.SetActive(true)
		if cfg.Routing != nil {
			// Not in graceful-restart recovery: BIRD would wait for every
			// peer's End-of-RIB (seconds, measured), and a VCP alone has
			// no twin whose routes the back-ends hold. holdFeed still waits
			// for the sessions.
			a.describePorts(cfg)
			if a.suite, err = StartSuite(cfg.Routing, false, a.log, a.suiteFailed); err != nil {
				a.Close()
				return nil, err
			}
		}
		return a, nil
	}
	// The API may listen on the virtual address, which only the active VCP
	// holds: let a standby bind it before it has it.
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_nonlocal_bind", []byte("1"), 0); err != nil {
		a.log.Warn("ip_nonlocal_bind", "err", err)
	}
	if a.election, err = StartElection(cfg.Name, cfg.Interface, cfg.Standby, cfg.AsStandby, cfg.runDir(), a.log); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// Run receives hellos, announces the VCP and keeps every LB configured,
// until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	go a.receive(ctx)
	go a.mirrors.Run(ctx)
	go a.applyMirrorLinks(ctx)
	go a.watchPeers(ctx)
	go a.syncSFlow(ctx)
	if a.cfg.SNMP != nil {
		if err := a.startSNMP(ctx, a.cfg.SNMP, a.cfg.runDir()); err != nil {
			return err
		}
	}
	t := time.NewTicker(a.cfg.HelloInterval)
	defer t.Stop()
	var elected chan bool // nil without an election: never ready
	if a.election != nil {
		elected = a.election.Active
	}
	var down stepDown
	var up takeOver
	for {
		a.announce()
		now := time.Now()
		a.tick(now)
		if down.due(a, now) {
			a.become(false)
		}
		a.rejoin(now)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-up.confirmed:
			up = takeOver{}
			a.become(true)
		case active := <-elected:
			switch {
			case active:
				down = stepDown{}
				if up.elected(a, time.Now()) {
					a.become(true)
				}
			case up.cancel():
				a.log.Warn("VRRP made this VCP master for less than the confirmation: not taken over (both were master for a moment: a split brain ended)",
					"master_for", time.Since(up.since).Round(time.Millisecond), "confirm", a.takeoverConfirm())
				a.event("%s was VRRP master for %v only: not taken over", a.cfg.Name, time.Since(up.since).Round(time.Millisecond))
			case down.asked(a, time.Now()):
				a.become(false)
			}
		}
	}
}

func (a *Agent) receive(ctx context.Context) {
	for ctx.Err() == nil {
		f, err := a.conn.Recv(200 * time.Millisecond)
		if errors.Is(err, dist.ErrTimeout) {
			continue
		}
		if err != nil {
			a.log.Error("receive DIST", "err", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if an, ok := f.Msg.(*dist.VCPAnnounce); ok && an.State == dist.VCPActive && f.Header.Sender != a.cfg.ID {
			a.mu.Lock()
			a.twinActive = time.Now()
			a.mu.Unlock()
		}
		if h, ok := f.Msg.(*dist.Hello); ok && h.Role != dist.RoleVCP {
			a.heard(f.Header.Sender, f.Src, h, f.Received)
			if h.Role == dist.RoleLB {
				a.nameMirrors(h)
			}
		}
	}
}

// nameMirrors gives the mirrors of an LB's external ports the router's
// names of those ports, and logs each name once it is known.
func (a *Agent) nameMirrors(h *dist.Hello) {
	for _, p := range h.Ports {
		if p.Role != dist.PortExternal || p.VLAN == 0 {
			continue
		}
		name := portName(h.Name, p)
		if changed, err := a.mirrors.Describe(p.VLAN, name); err != nil {
			a.log.Warn("mirror", "port", name, "err", err)
		} else if changed {
			a.log.Info("external port", "port", name, "vlan", p.VLAN, "address", p.Prefix, "mirror", fmt.Sprintf("x%d", p.VLAN))
		}
	}
}

// heard records a hello: a new element, or one that came back.
// heard takes an element's hello, which the kernel received at arrived.
func (a *Agent) heard(id uint64, mac net.HardwareAddr, h *dist.Hello, arrived time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	e := a.elements[id]
	switch {
	case e == nil:
		e = &element{id: id, first: now}
		a.elements[id] = e
		a.log.Info("element appeared", "id", fmt.Sprintf("%#x", id), "role", roleName(h.Role), "name", h.Name)
		a.event("%s %s appeared", roleName(h.Role), h.Name)
		if h.Role == dist.RoleLB {
			a.kickSFlow()
		}
	case !e.alive:
		// The silence between two hellos' arrivals: past the hold, the
		// element (or the interconnect) was late, not this VCP.
		silent := arrived.Sub(e.last).Round(time.Millisecond)
		a.log.Info("element came back", "name", h.Name, "silent", silent)
		a.event("%s %s came back (silent %v)", roleName(h.Role), h.Name, silent)
		if h.Role == dist.RoleLB {
			a.kickSFlow()
		}
	}
	if h.Role == dist.RoleRouter && (!a.active || e.hello == nil || h.OperatorVersion > a.op.versions[h.Name]) {
		if a.active && e.hello != nil {
			// Another VCP, active at the same time, was told later.
			a.log.Warn("a back-end keeps a newer operator's state than this active VCP: taken", "backend", h.Name,
				"version", h.OperatorVersion, "ours", a.op.versions[h.Name])
			a.event("%s: the operator's newer drain and weight, sent by another VCP, taken", h.Name)
		}
		a.adoptOperator(h)
	}
	e.mac, e.hello, e.last, e.alive = mac, h, arrived, true
	for _, p := range h.Ports {
		a.rates.observe(h.Name+"/"+fmt.Sprint(p.Index), now, p.RxPackets, p.RxBytes)
	}
	a.observeLoad(h.Name, h, now)
}

func (a *Agent) hold(h *dist.Hello) time.Duration {
	return time.Duration(h.HelloIntervalMs) * time.Millisecond * time.Duration(max(h.HoldMultiplier, 1))
}

// heardUpTo is the time up to which this VCP has read every hello the
// kernel received: now, or, if its receive loop is behind (the process
// stood still, and this ticker ran first), when that loop last caught up
// (dist.Conn.CaughtUp). An element is judged silent against it, so that
// hellos queued in the socket are not taken for hellos never sent.
func (a *Agent) heardUpTo(now time.Time) time.Time {
	if a.conn == nil {
		return now
	}
	return a.conn.HeardUpTo(now)
}

// tick notices dead elements and pushes what each live LB should have.
func (a *Agent) tick(now time.Time) {
	heard := a.heardUpTo(now)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range a.elements {
		if e.alive && heard.Sub(e.last) > a.hold(e.hello) {
			e.alive = false
			a.log.Info("element died", "name", e.hello.Name)
			a.event("%s %s died (no hello for %v)", roleName(e.hello.Role), e.hello.Name, a.hold(e.hello))
		}
	}
	a.followPorts(now)
	if silent := a.everyBackendSilent(); silent != a.allSilent {
		a.allSilent = silent
		if silent {
			a.allSilentCount++
			a.log.Warn("every back-end silent at once: the LBs' tables keep them all")
			a.event("every back-end silent at once: the tables keep them all (this VCP deaf, more likely than every back-end dead)")
		} else {
			a.log.Info("back-ends heard again")
		}
	}
	if !a.active {
		return
	}
	push := &vcpapi.PushStatus{At: now}
	for _, r := range a.elements.sorted(dist.RoleRouter) {
		if r.alive {
			a.configureBackend(r, now)
		}
	}
	for _, lb := range a.elements.sorted(dist.RoleLB) {
		if lb.alive {
			a.configure(lb, now, push)
		}
	}
	if push.LBs > 0 {
		push.Ms = float64(time.Since(now).Microseconds()) / 1000
		a.lastPush = push
	}
	a.askRIP()
}

// askRIP has the suite's RIP ask its neighbours again, once after this
// VCP became active, when every live LB holds the table it sent: the LBs
// relay a VCP's mirrors from then on (Suite.AskRIP). Call it with a.mu
// held.
func (a *Agent) askRIP() {
	r := a.cfg.Routing
	if a.askedRIP || a.suite == nil || r == nil || len(r.RIP)+len(r.RIPng) == 0 {
		return
	}
	lbs := 0
	for _, lb := range a.elements.sorted(dist.RoleLB) {
		if !lb.alive {
			continue
		}
		p := a.pushed[lb.id]
		if p == nil || p.table == "" || lb.hello.Installed != p.generation {
			return
		}
		lbs++
	}
	if lbs > 0 {
		a.askedRIP = true
		go a.suite.AskRIP()
	}
}

// configure sends one LB its port settings and table when they differ from
// what was last sent, or when the LB reports another table generation
// (it restarted). At most one push per hello interval per LB.
func (a *Agent) configure(lb *element, now time.Time, push *vcpapi.PushStatus) {
	p := a.pushed[lb.id]
	if p == nil {
		p = &lbPush{}
		a.pushed[lb.id] = p
	}
	if now.Sub(p.sent) < a.cfg.HelloInterval {
		return
	}
	ports := a.portSettings(lb)
	if id := fmt.Sprint(ports); id != p.ports || !a.portsApplied(lb, ports) {
		if err := a.send(lb.mac, &dist.PortConfig{Target: lb.id, Ports: ports}); err != nil {
			a.log.Error("PORT_CONFIG", "lb", lb.hello.Name, "err", err)
			return
		}
		p.ports, p.sent = id, now
	}
	a.sendPeers(lb, p, now)
	mode, entries := a.table(lb)
	id := fmt.Sprint(mode, entries)
	if id == p.table && lb.hello.Installed == p.generation {
		return
	}
	// After a takeover, number on from what the LB holds.
	p.generation = max(p.generation, lb.hello.Installed) + 1
	frames, err := a.sendTable(lb, p.generation, mode, entries)
	if err != nil {
		a.log.Error("TABLE_UPDATE", "lb", lb.hello.Name, "err", err)
		return
	}
	push.LBs++
	push.Entries += len(entries)
	push.Frames += frames
	p.table, p.sent = id, now
	a.log.Info("table pushed", "lb", lb.hello.Name, "generation", p.generation, "entries", len(entries))
}

// portSettings are an LB's ports as the router's config wants them: the
// configured external ones, the others internal (keeping the LB's default).
func (a *Agent) portSettings(lb *element) []dist.PortSetting {
	var out []dist.PortSetting
	for _, hp := range lb.hello.Ports {
		s := dist.PortSetting{Index: hp.Index, Role: dist.PortInternal, MAC: hp.MAC, MTU: hp.MTU,
			Flags: hp.Flags & dist.PortFlagDefaultInternal}
		for _, ep := range a.cfg.ExternalPorts {
			if ep.LB == lb.hello.Name && bytes.Equal(ep.mac, hp.MAC) {
				s.Role, s.VLAN, s.Prefix, s.Prefix6, s.Flags = dist.PortExternal, ep.VLAN, ep.Address, ep.Address6, 0
				if a.cfg.urpfOf(ep) != dist.URPFOff {
					s.Flags = dist.PortFlagURPF
				}
				if ep.MTU != 0 {
					s.MTU = ep.MTU
				}
			}
		}
		out = append(out, s)
	}
	return out
}

// portsApplied says whether the LB's hello shows the settings in force.
func (a *Agent) portsApplied(lb *element, want []dist.PortSetting) bool {
	for i, hp := range lb.hello.Ports {
		w := want[i]
		if hp.Role != w.Role || hp.VLAN != w.VLAN || hp.Prefix.Masked() != w.Prefix.Masked() || hp.Prefix.Addr() != w.Prefix.Addr() {
			return false
		}
	}
	return true
}

func (a *Agent) send(dst net.HardwareAddr, m dist.Message) error {
	f, err := a.sender.Seal(dst, a.conn.MAC(), m)
	if err != nil {
		return err
	}
	return a.conn.Send(f)
}

// announce tells every element where the VCP is, and whether it is the
// active one (LBs follow only the active).
func (a *Agent) announce() {
	a.mu.Lock()
	state := dist.VCPStandby
	if a.active {
		state = dist.VCPActive
	}
	a.mu.Unlock()
	if err := a.send(dist.GroupMAC, &dist.VCPAnnounce{State: state, Priority: 100,
		HelloIntervalMs: uint16(a.cfg.HelloInterval / time.Millisecond), APIAddr: netip.IPv4Unspecified()}); err != nil {
		a.log.Error("announce", "err", err)
	}
}

// currentSuite is the running suite, or nil (a reload may change it).
func (a *Agent) currentSuite() Suite {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.suite
}

// Close stops the suite and releases the DIST socket (the mirrors' sockets
// close when Run ends).
func (a *Agent) Close() error {
	if a.election != nil {
		a.election.Stop()
	}
	if suite := a.currentSuite(); suite != nil {
		suite.Stop()
	}
	return a.conn.Close()
}

func roleName(r dist.Role) string {
	switch r {
	case dist.RoleLB:
		return "lb"
	case dist.RoleRouter:
		return "router"
	case dist.RoleVCP:
		return "vcp"
	}
	return "unknown"
}
