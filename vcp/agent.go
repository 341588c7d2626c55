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
	"github.com/msr-router/msr/vcp/vcpapi"
)

// Agent is `msr vcp`: discovery, topology, balancing control.
type Agent struct {
	cfg     *FileConfig
	conn    *dist.Conn
	sender  *dist.Sender
	mirrors *Mirrors
	suite   Suite // nil without routing, and while standby
	// election is VRRP between this VCP and its twin (nil: always active).
	election *Election
	log      *slog.Logger
	token    string      // of the management API, for relaying to elements
	apiTLS   *tls.Config // the elements' APIs' TLS (nil: plain HTTP)
	// ribPassword is the RIB feed's TCP-MD5 key (dist.Key.RIBPassword).
	ribPassword string

	reloadMu sync.Mutex // one reload at a time
	mu       sync.Mutex
	// active: this VCP configures the LBs and runs the suite; a standby
	// only keeps the topology from hellos.
	active   bool
	elements map[uint64]*element
	drained  map[string]bool // back-end names
	// capacities set from the console (SetCapacity), by back-end name
	capacities map[string]uint32
	// operatorVersions are the versions of each back-end's drain and
	// weight as this VCP holds them (dist.BackendConfig.OperatorVersion),
	// by name: an operator's change here takes one above every one seen
	// (nextOperatorVersion), and a hello with a newer one, sent the
	// change through another VCP, is taken even while active.
	operatorVersions map[string]uint64
	// links are the mirrors' link states followPorts wants, set outside
	// a.mu (applyMirrorLinks).
	links *mirrorLinks
	// loads are the back-ends' load states, by name (load.go)
	loads  map[string]*loadState
	pushed map[uint64]*lbPush
	// backendPushes is what each back-end was last sent (backends.go).
	backendPushes map[uint64]*backendPush
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
	// states (ports.go), told to portWatchers as they change.
	started      time.Time
	ports        map[uint16]*PortState
	portWatchers []chan PortEvent
	// rates and events are the web view's (view.go).
	rates  rateMeter
	events []vcpapi.ViewEvent
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
func NewAgent(cfg *FileConfig, log *slog.Logger) (*Agent, error) {
	keys, err := cfg.Keys(true)
	if err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, log: log.With("component", "vcp", "vcp", cfg.Name),
		elements: map[uint64]*element{}, drained: map[string]bool{}, capacities: map[string]uint32{}, operatorVersions: map[string]uint64{}, links: newMirrorLinks(), loads: map[string]*loadState{},
		pushed: map[uint64]*lbPush{}, backendPushes: map[uint64]*backendPush{}, limitHits: map[string]uint64{},
		ribPassword: keys.RIB, started: time.Now(), ports: map[uint16]*PortState{}}
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

// takeOver confirms VRRP's word that this standby is now master before
// the VCP takes the router: it must stay master for takeoverConfirm.
// When the whole machine stands still for longer than VRRP's master-down
// time (three adverts, 300 ms by default), the standby's keepalived
// declares itself master, the active one answers with its higher
// priority, and the standby is backup again some 40 ms later. Taking
// over at once in that blip moved the LBs' control traffic to the VCP
// that held no BGP session: its kernel reset bgp1's session, whose routes
// went and came back (TestSoak in CI: 1,190 frames lost, no_route on
// every back-end, in a step with no fault). A dead twin's standby waits
// takeoverConfirm longer; the data path does not depend on the VCP, and
// the peers' hold times are seconds.
type takeOver struct {
	since     time.Time
	confirmed <-chan time.Time // nil: no takeover pending
}

// takeoverConfirm is how long VRRP must keep this VCP master before it
// takes over: two of its adverts.
func (a *Agent) takeoverConfirm() time.Duration {
	if a.cfg.Standby == nil {
		return 0
	}
	return 2 * a.cfg.Standby.AdvertInterval
}

// elected handles VRRP's "master": it says whether to take over now (an
// active VCP told again), and otherwise starts the confirmation.
func (t *takeOver) elected(a *Agent, now time.Time) bool {
	a.mu.Lock()
	active := a.active
	a.mu.Unlock()
	if active {
		return true
	}
	if t.confirmed == nil {
		t.since, t.confirmed = now, time.After(a.takeoverConfirm())
	}
	return false
}

// cancel ends a pending takeover (VRRP said backup before it was
// confirmed), and says whether one was pending.
func (t *takeOver) cancel() bool {
	pending := t.confirmed != nil
	t.confirmed = nil
	return pending
}

// stepDown guards the VCP's mastership against a stranger on the
// interconnect: VRRPv3 is not authenticated, so keepalived's word that
// another host holds the address is not enough to stop the router's
// routing. The active VCP steps down when another VCP announces itself
// active in authenticated DIST, or when its own suite failed (Fault);
// otherwise it waits stepDownWait for such an announcement, then logs
// that no VCP claims the router and stays active.
type stepDown struct {
	since  time.Time // when VRRP said standby (zero: it did not)
	warned bool
}

// stepDownWait is how long an active VCP told to stand down waits for its
// twin's authenticated announcement: several of the twin's hellos.
const stepDownWait = time.Second

// asked handles VRRP's "standby" and says whether to step down now.
func (d *stepDown) asked(a *Agent, now time.Time) bool {
	a.mu.Lock()
	active, faulted, twin := a.active, a.faulted, a.twinActive
	a.mu.Unlock()
	if !active || faulted || now.Sub(twin) < stepDownWait {
		*d = stepDown{}
		return true
	}
	*d = stepDown{since: now}
	return false
}

// due says whether a pending step-down should happen now: the twin has
// announced itself active since.
func (d *stepDown) due(a *Agent, now time.Time) bool {
	if d.since.IsZero() {
		return false
	}
	a.mu.Lock()
	twin := a.twinActive
	a.mu.Unlock()
	if !twin.Before(d.since) {
		*d = stepDown{}
		return true
	}
	if now.Sub(d.since) > stepDownWait && !d.warned {
		d.warned = true
		a.log.Error("VRRP says another host holds the VCP's address, but no VCP announces itself active: staying active (a stranger on the interconnect?)")
	}
	return false
}

// suiteFailed gives up this VCP's mastership when its routing suite keeps
// dying: keepalived's tracked file marks the instance faulty, keepalived
// gives the address up, the standby (whose suite is healthy) takes over
// and this VCP becomes a standby. After FaultHold it rejoins the election
// as a backup (rejoin): it takes the router back only if no VCP holds it,
// so a router whose VCPs have both failed in turn is not left without
// one. Alone, a VCP has no one to give the router to: it keeps restarting
// the suite.
func (a *Agent) suiteFailed() {
	if a.election == nil {
		a.log.Error("the routing suite keeps dying and there is no standby to take over: restarting it again")
		return
	}
	a.log.Error("the routing suite keeps dying: handing the router over to the standby")
	a.mu.Lock()
	a.faulted, a.faultedAt = true, time.Now()
	a.mu.Unlock()
	if err := a.election.Fault(); err != nil {
		a.log.Error("hand over to the standby", "err", err)
	}
}

// FaultHold is how long a VCP whose suite failed stays out of the
// election (suiteFailed): long enough that a suite dying in a loop does
// not take the router back at once, well within the back-ends' and the
// peers' graceful-restart time (120 s), which keeps the routes while no
// VCP is active.
const FaultHold = 10 * time.Second

// rejoin ends a fault held FaultHold: keepalived makes the instance a
// backup again, which becomes master only where no VCP is.
func (a *Agent) rejoin(now time.Time) {
	a.mu.Lock()
	due := a.faulted && now.Sub(a.faultedAt) >= FaultHold
	if due {
		a.faulted = false
	}
	a.mu.Unlock()
	if !due {
		return
	}
	if err := a.election.Rejoin(); err != nil {
		a.log.Error("rejoin the election", "err", err)
		return
	}
	a.log.Info("rejoining the election as a standby: the routing suite failed " + FaultHold.String() + " ago")
	a.mu.Lock()
	a.event("%s rejoined the election as a standby", a.cfg.Name)
	a.mu.Unlock()
}

// become makes this VCP the active one, or a standby, as VRRP decided.
// Taking over: the suite starts in graceful-restart recovery (it holds
// back what it tells the back-ends until its own sessions have converged,
// so their FIBs do not flap), every LB gets its ports and table again, and
// the announcement that follows makes the LBs send control traffic here.
func (a *Agent) become(active bool) {
	a.mu.Lock()
	was, routing := a.active, a.cfg.Routing
	a.mu.Unlock()
	if active && !was {
		a.describePorts(a.cfg)
	}
	if active == was {
		return
	}
	var suite Suite
	if active && routing != nil {
		var err error
		if suite, err = StartSuite(routing, true, a.log, a.suiteFailed); err != nil {
			// As a suite that keeps dying: the standby's may start.
			a.log.Error("taking over: routing suite", "err", err)
			go a.suiteFailed()
		}
	}
	a.mu.Lock()
	old := a.suite
	a.active, a.suite = active, suite
	for _, p := range a.pushed {
		p.ports, p.table, p.sent = "", "", time.Time{}
	}
	if active {
		a.event("%s became the active VCP", a.cfg.Name)
	} else {
		a.event("%s became a standby", a.cfg.Name)
	}
	a.mu.Unlock()
	a.mirrors.SetActive(active)
	if a.election != nil {
		if err := a.election.Holding(active); err != nil {
			a.log.Error("VRRP: the active VCP's priority", "err", err)
		}
	}
	if old != nil {
		old.Stop()
	}
	if active {
		a.log.Info("active: this VCP took over")
	} else {
		a.log.Info("standby")
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
	case !e.alive:
		// The silence between two hellos' arrivals: past the hold, the
		// element (or the interconnect) was late, not this VCP.
		silent := arrived.Sub(e.last).Round(time.Millisecond)
		a.log.Info("element came back", "name", h.Name, "silent", silent)
		a.event("%s %s came back (silent %v)", roleName(h.Role), h.Name, silent)
	}
	if h.Role == dist.RoleRouter && (!a.active || e.hello == nil || h.OperatorVersion > a.operatorVersions[h.Name]) {
		if a.active && e.hello != nil {
			// Another VCP, active at the same time, was told later.
			a.log.Warn("a back-end keeps a newer operator's state than this active VCP: taken", "backend", h.Name,
				"version", h.OperatorVersion, "ours", a.operatorVersions[h.Name])
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

// adoptOperator takes what the operator asked of a back-end (drained, a
// weight) from its hello: the back-end keeps what the active VCP sent it
// (BACKEND_CONFIG), so a standby follows it all along and has it when it
// takes over, and an active VCP takes it for a back-end it hears for the
// first time (it started after the operator spoke), or one whose version
// of them is newer than this VCP's (another VCP was told later: a split
// brain). Call with a.mu held.
func (a *Agent) adoptOperator(h *dist.Hello) {
	a.operatorVersions[h.Name] = h.OperatorVersion
	a.drained[h.Name] = h.Flags&dist.HelloFlagDrained != 0
	if h.Flags&dist.HelloFlagCapacitySet != 0 {
		a.capacities[h.Name] = h.Capacity
	} else {
		delete(a.capacities, h.Name)
	}
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
	for _, r := range a.sorted(dist.RoleRouter) {
		if r.alive {
			a.configureBackend(r, now)
		}
	}
	for _, lb := range a.sorted(dist.RoleLB) {
		if lb.alive {
			a.configure(lb, now, push)
		}
	}
	if push.LBs > 0 {
		push.Ms = float64(time.Since(now).Microseconds()) / 1000
		a.lastPush = push
	}
}

// sorted lists the elements of a role by name.
func (a *Agent) sorted(role dist.Role) []*element {
	var out []*element
	for _, e := range a.elements {
		if e.hello.Role == role {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].hello.Name < out[j].hello.Name })
	return out
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

// everyBackendSilent says whether no back-end that may carry traffic (not
// drained, nor draining by its last hello) is heard while some such were
// heard before. The VCP's own deafness is then more likely than every
// back-end dead at once: its hello reader held up, or every back-end's hellos
// held up together by the kernel's RTNL lock (docs/reliability.md,
// finding 20). The LBs do the same with their
// own view (finding 16). Call with a.mu held.
func (a *Agent) everyBackendSilent() bool {
	known := false
	for _, r := range a.elements {
		if r.hello.Role != dist.RoleRouter || !a.mayCarry(r) {
			continue
		}
		if r.alive {
			return false
		}
		known = true
	}
	return known
}

// mayCarry says whether a back-end may be in the tables when heard: not
// drained by the operator, nor draining by its last hello.
func (a *Agent) mayCarry(r *element) bool {
	return !a.drained[r.hello.Name] && r.hello.Flags&dist.HelloFlagDraining == 0
}

// table computes an LB's balancing table: every live, undrained back-end
// through every internal port of the LB, weighted by capacity (configured,
// else from its hellos) times its load factor (load.go), the largest 100.
// When every back-end is silent at once (everyBackendSilent), every
// undrained one: an empty table drops everything, and the data path of a
// back-end whose hellos are late still forwards.
func (a *Agent) table(lb *element) (dist.BalanceMode, []dist.TableEntry) {
	mode := a.cfg.modeOf(lb.hello.Name)
	var routers []*element
	var caps []uint64
	var maxCap uint64
	for _, r := range a.sorted(dist.RoleRouter) {
		if (r.alive || a.allSilent) && a.mayCarry(r) {
			c := a.effectiveCapacity(r)
			routers, caps = append(routers, r), append(caps, c)
			maxCap = max(maxCap, c)
		}
	}
	var entries []dist.TableEntry
	for _, hp := range lb.hello.Ports {
		if hp.Role != dist.PortInternal {
			continue
		}
		for i, r := range routers {
			w := uint16(max(1, (caps[i]*100+maxCap/2)/max(maxCap, 1)))
			entries = append(entries, dist.TableEntry{MAC: r.mac, Port: hp.Index, Weight: w})
		}
	}
	return mode, entries
}

// effectiveCapacity is a back-end's capacity times its load factor, in
// thousandths of a Mbit/s (so that a small factor keeps its resolution;
// a u64, as a capacity of up to 2^32 Mbit/s times 1000 needs).
func (a *Agent) effectiveCapacity(r *element) uint64 {
	return uint64(max(1, float64(a.capacity(r))*1000*a.loadFactor(r.hello.Name)))
}

func (a *Agent) capacity(r *element) uint32 {
	if c := a.capacities[r.hello.Name]; c > 0 {
		return c
	}
	if b := a.cfg.Backends[r.hello.Name]; b != nil && b.CapacityMbps > 0 {
		return b.CapacityMbps
	}
	return max(r.hello.Capacity, 1)
}

// sendTable sends a table in as many frames as it takes: FLUSH on the
// first, LAST on the last (docs/dist.md).
func (a *Agent) sendTable(lb *element, gen uint32, mode dist.BalanceMode, entries []dist.TableEntry) (frames int, err error) {
	for start := 0; ; start += dist.MaxTableEntries {
		end := min(start+dist.MaxTableEntries, len(entries))
		m := &dist.TableUpdate{Target: lb.id, Generation: gen, Mode: mode, Entries: entries[start:end]}
		if start == 0 {
			m.Flags |= dist.TableFlush
		}
		if end == len(entries) {
			m.Flags |= dist.TableLast
		}
		if err := a.send(lb.mac, m); err != nil {
			return frames, err
		}
		frames++
		if end == len(entries) {
			return frames, nil
		}
	}
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

// Drain takes a back-end out of every table (no new flows to it), or puts
// it back. The back-end is told, keeps it and says so in its hellos
// (configureBackend, adoptOperator): the drain outlives this VCP.
func (a *Agent) Drain(name string, drain bool) error {
	a.mu.Lock()
	if !a.active {
		a.mu.Unlock()
		return errStandby
	}
	for _, e := range a.elements {
		if e.hello.Role == dist.RoleRouter && e.hello.Name == name {
			a.drained[name] = drain
			a.nextOperatorVersion(name, time.Now())
			a.mu.Unlock()
			return a.untilBackendKeeps(e)
		}
	}
	a.mu.Unlock()
	return fmt.Errorf("no back-end %q", name)
}

// nextOperatorVersion stamps an operator's change to a back-end's drain
// or weight: its milliseconds since 1970, or one above the version this
// VCP holds where that is higher (a clock stepped back), so that the
// change is newer than every one before it, whichever VCP took them.
// Call with a.mu held.
func (a *Agent) nextOperatorVersion(name string, now time.Time) uint64 {
	v := max(uint64(now.UnixMilli()), a.operatorVersions[name]+1)
	a.operatorVersions[name] = v
	return v
}

// keptWait bounds how long the console waits for a back-end to show the
// drain or weight it was sent.
const keptWait = 2 * time.Second

// untilBackendKeeps sends the back-end its settings at once and waits
// until its hello shows the operator's drain and weight: only then does
// the console say done, for only then do they outlive this VCP (a VCP
// killed between the console's answer and its next push lost an undrain:
// the back-end still said drained, and the VCP that took over believed
// it; msr soak, finding 12). A back-end not heard waits as long for it to
// be heard again: this VCP, itself stalled, may have just found every
// element silent, a moment before their queued hellos came (msr soak run
// 31 lost an undrain so, answered at once in that moment: finding 31). A
// back-end not heard within keptWait (dead), or a VCP that configures
// none (no external ports), keeps them in this VCP alone.
func (a *Agent) untilBackendKeeps(e *element) error {
	a.mu.Lock()
	configures := len(a.cfg.ExternalPorts) > 0 && a.conn != nil
	a.mu.Unlock()
	if !configures {
		return nil
	}
	pushed := false
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		a.mu.Lock()
		if e.alive && !pushed {
			if p := a.backendPushes[e.id]; p != nil {
				p.sent = time.Time{} // now, not at the next hello interval
			}
			a.configureBackend(e, time.Now())
			pushed = true
		}
		m := &dist.BackendConfig{Drained: a.drained[e.hello.Name], Capacity: a.capacities[e.hello.Name], OperatorVersion: a.operatorVersions[e.hello.Name]}
		kept := e.alive && operatorApplied(e.hello, m)
		a.mu.Unlock()
		switch {
		case kept:
			return nil
		case time.Since(start) <= keptWait:
		case !pushed:
			return nil // dead: it is sent when the back-end is heard again
		default:
			return fmt.Errorf("back-end %s did not show the change within %v: it will be sent again, check with msr ctl elements", e.hello.Name, keptWait)
		}
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
