package vcp

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/template"
	"time"

	"golang.org/x/sys/unix"

	"github.com/msr-router/msr/internal/config"
)

// The hot standby. Which VCP is active is decided by VRRP (RFC 5798), run
// by keepalived: a proven election, not one of msr's own. The winner holds
// the VCP's virtual address on the interconnect (where the back-ends' RIB
// feed and the management API reach the VCP); msr learns the outcome from
// keepalived's notify FIFO and acts on it: the active VCP announces itself
// (the LBs send control traffic to its MAC), pushes the LBs' tables and
// runs the routing suite; a standby listens to hellos only.
//
// Both VCPs start as BACKUP with nopreempt, so that a VCP that comes back
// never takes over from the one that replaced it.

// StandbyConfig is the VRRP election between two VCPs.
type StandbyConfig struct {
	// Address is the VCP's virtual address on the interconnect: the
	// routing section's backends.listen, and where api_listen may be.
	Address  netip.Prefix `yaml:"address" msr:"required"`
	VRID     uint8        `yaml:"vrid"`     // VRRP virtual router id; default 51
	Priority uint8        `yaml:"priority"` // default 150, and 100 with --standby
	// AdvertInterval is VRRP's; a dead active is noticed after ~3 of them.
	AdvertInterval time.Duration `yaml:"advert_interval"` // default 100ms
	// Peers are the VCPs' own addresses on the interconnect, this one's
	// among them. VRRP goes between them by unicast, and an advert from
	// any other source is dropped (VRRPv3 has no authentication: a host
	// of the interconnect announcing priority 255 by multicast would take
	// the VCP's address).
	Peers []netip.Addr `yaml:"peers" msr:"required"`
	Pos   config.Pos   `yaml:"-"`
}

var keepalivedConf = template.Must(template.New("keepalived").Parse(`# Written by msr vcp: do not edit, edit the VCP's config.
global_defs {
	router_id {{.Name}}
	vrrp_version 3
	notify_fifo {{.FIFO}}
	script_user root
	enable_script_security
{{if .StartupDelay}}	vrrp_startup_delay {{.StartupDelay}}
{{end}}}
# Non-zero when msr vcp's routing suite keeps dying: the instance is
# faulty, and the standby takes over.
vrrp_track_file suite_failed {
	file {{.TrackFile}}
	weight 0
}
# 1 while msr vcp is the active VCP: its priority is then above any
# other's, so that when both are master for a moment (the machine stood
# still past the master-down time) the active one stays master.
vrrp_track_file active {
	file {{.ActiveFile}}
	weight {{.ActiveWeight}}
}
vrrp_instance msr {
	state BACKUP
	nopreempt
	interface {{.Interface}}
	virtual_router_id {{.VRID}}
	priority {{.Priority}}
	advert_int {{.Advert}}
	# VRRP by unicast between the configured VCPs only.
	unicast_src_ip {{.Self}}
	unicast_peer {
{{range .Others}}		{{.}}
{{end}}	}
	check_unicast_src
	virtual_ipaddress {
		{{.Address}} dev {{.Interface}}
	}
	track_file {
		suite_failed
		active
	}
}
`))

// Election runs keepalived and reports its verdicts.
type Election struct {
	fifo *os.File
	// track is keepalived's tracked file: 0, or 1 to make the instance
	// faulty (Fault). active is 1 while this VCP is active (Holding).
	track, active string
	// Active receives true when this VCP becomes VRRP master, false when
	// it stops being master.
	Active chan bool

	dir  string
	argv []string
	log  *slog.Logger
	stop chan struct{}
	mu   sync.Mutex
	proc *child
}

// StartElection writes keepalived's configuration into dir and starts it
// in the calling thread's namespace, supervised: a keepalived that ends
// while the VCP runs is started again.
func StartElection(name, iface string, cfg *StandbyConfig, standby bool, dir string, log *slog.Logger) (*Election, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	fifo := filepath.Join(dir, "vrrp.fifo")
	os.Remove(fifo)
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		return nil, fmt.Errorf("notify FIFO: %w", err)
	}
	track, active := filepath.Join(dir, "suite-failed"), filepath.Join(dir, "active")
	for _, f := range []string{track, active} {
		if err := os.WriteFile(f, []byte("0\n"), 0o644); err != nil {
			return nil, err
		}
	}
	self, err := ownPeer(iface, cfg.Peers)
	if err != nil {
		return nil, err
	}
	conf, err := electionConfig(name, iface, fifo, track, active, cfg, standby, self)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "keepalived.conf")
	if err := writePrivate(path, []byte(conf), nil); err != nil {
		return nil, err
	}
	// Read and write, so that the FIFO never reads end-of-file while
	// keepalived reopens it.
	f, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	e := &Election{fifo: f, track: track, active: active, Active: make(chan bool, 4), dir: dir, log: log, stop: make(chan struct{}),
		argv: []string{"keepalived", "--dont-fork", "--log-console", "--log-detail", "--vrrp", "--use-file", path,
			"--pid", filepath.Join(dir, "keepalived.pid"), "--vrrp_pid", filepath.Join(dir, "vrrp.pid")}}
	// keepalived dies with msr vcp: a dead VCP must stop advertising itself.
	if e.proc, err = e.start(); err != nil {
		f.Close()
		return nil, err
	}
	go e.read(log)
	go e.supervise()
	return e, nil
}

// start starts keepalived once the one a VCP that died in this run
// directory left is gone: keepalived refuses to run beside it, and says
// so with exit status 0 ("daemon is already running"). That one withdraws
// on its parent's death (priority 0, its addresses removed), which takes
// it a moment; a VCP restarted at once (kill -9 and a supervisor) had no
// keepalived at all, so no election: a second takeover found nobody.
func (e *Election) start() (*child, error) {
	waitOldKeepalived(e.dir, 3*time.Second)
	return startChild(filepath.Join(e.dir, "keepalived.log"), e.argv...)
}

// supervise starts keepalived again when it ends while the VCP runs (a
// second later, not in a loop): without it this VCP has no say in the
// election.
func (e *Election) supervise() {
	for {
		e.mu.Lock()
		proc := e.proc
		e.mu.Unlock()
		select {
		case <-e.stop:
			return
		case <-proc.exited:
		}
		// It withdrew as it ended (its addresses removed): this VCP is no
		// longer the master, whatever keepalived said last. Told so, an
		// active VCP stands down as soon as the other announces itself
		// (stepDown): before, it stayed active until its new keepalived
		// said BACKUP, two seconds later, and meanwhile, no longer hearing
		// the back-ends, pushed the LBs an empty table (the soak: 1,987
		// frames lost when the active VCP's keepalived was killed).
		e.Active <- false
		select {
		case <-e.stop:
			return
		case <-time.After(time.Second):
		}
		e.log.Error("keepalived ended: restarting it", "status", proc.status)
		next, err := e.start()
		if err != nil {
			e.log.Error("keepalived", "err", err)
			next = &child{exited: make(chan struct{})} // try again in a second
			close(next.exited)
		}
		e.mu.Lock()
		e.proc = next
		e.mu.Unlock()
		select {
		case <-e.stop: // Stop came while it started: it stopped the one before
			if next.cmd != nil {
				next.stop(syscall.SIGTERM, 3*time.Second)
			}
			return
		default:
		}
	}
}

// waitOldKeepalived waits up to grace for the keepalived processes whose
// pid files are in dir (and whose command line names dir) to end, and
// kills those left.
func waitOldKeepalived(dir string, grace time.Duration) {
	for _, name := range []string{"keepalived.pid", "vrrp.pid"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 1 {
			continue
		}
		for end := time.Now().Add(grace); keepalivedOf(pid, dir) && time.Now().Before(end); {
			time.Sleep(20 * time.Millisecond)
		}
		if keepalivedOf(pid, dir) {
			syscall.Kill(pid, syscall.SIGKILL)
			for end := time.Now().Add(time.Second); keepalivedOf(pid, dir) && time.Now().Before(end); {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
}

// keepalivedOf says whether pid is a running keepalived of dir's (its
// command line names keepalived and dir; a zombie's is empty).
func keepalivedOf(pid int, dir string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && bytes.Contains(b, []byte("keepalived")) && bytes.Contains(b, []byte(dir))
}

// activeWeight is what the active VCP adds to its VRRP priority
// (Holding): up to 254, the highest priority keepalived advertises, which
// no configured priority of the other VCP exceeds. Never 0, which would
// make the track file a fault switch.
func activeWeight(cfg *StandbyConfig) int { return max(1, 254-int(cfg.Priority)) }

// electionConfig is keepalived's configuration.
// ownPeer is this host's address on iface among peers.
func ownPeer(iface string, peers []netip.Addr) (netip.Addr, error) {
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return netip.Addr{}, err
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}, err
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && slices.Contains(peers, p.Addr()) {
			return p.Addr(), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("standby peers %v: none is this host's address on %s", peers, iface)
}

// self is this VCP's address among cfg.Peers.
func electionConfig(name, iface, fifo, track, active string, cfg *StandbyConfig, standby bool, self netip.Addr) (string, error) {
	// The standby also starts later, so that when both start together the
	// other wins even though neither preempts.
	prio, delay := cfg.Priority, ""
	if standby {
		prio = min(prio, 100)
		delay = fmt.Sprintf("%.2f", max(time.Second, 10*cfg.AdvertInterval).Seconds())
	}
	var conf strings.Builder
	err := keepalivedConf.Execute(&conf, map[string]any{"Name": name, "FIFO": fifo, "TrackFile": track, "ActiveFile": active, "ActiveWeight": activeWeight(cfg),
		"Interface": iface, "VRID": cfg.VRID,
		"Priority": prio, "StartupDelay": delay, "Advert": fmt.Sprintf("%.2f", cfg.AdvertInterval.Seconds()), "Address": cfg.Address,
		"Self": self, "Others": slices.DeleteFunc(slices.Clone(cfg.Peers), func(a netip.Addr) bool { return a == self })})
	return conf.String(), err
}

// read turns keepalived's notifications, such as
// `INSTANCE "msr" MASTER 150`, into verdicts.
func (e *Election) read(log *slog.Logger) {
	sc := bufio.NewScanner(e.fifo)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || f[0] != "INSTANCE" {
			continue
		}
		log.Info("VRRP", "state", f[2])
		switch f[2] {
		case "MASTER":
			e.Active <- true
		case "MASTER_RX_LOWER_PRI":
			// An event, not a state: this master heard a lower
			// priority's advert (the other VCP's, ending a split brain)
			// and stays master, answering it. Taken for "not master",
			// it left both VCPs standby for good (msr soak, finding 9).
		default: // BACKUP, FAULT, STOP
			e.Active <- false
		}
	}
}

// Fault makes this VCP's VRRP instance faulty: keepalived gives up the
// address at once, and the standby takes over.
func (e *Election) Fault() error { return os.WriteFile(e.track, []byte("1\n"), 0o644) }

// Holding tells keepalived whether this VCP is the active one: while it
// is, its priority is raised above any other VCP's (activeWeight), so that
// a split brain after the whole machine stood still ends with the active
// VCP still master, rather than with the higher configured priority
// (else a standby of higher priority takes the router after a stall, and
// an operator's undrain given to the old one can be lost with it).
func (e *Election) Holding(active bool) error {
	v := "0\n"
	if active {
		v = "1\n"
	}
	return os.WriteFile(e.active, []byte(v), 0o644)
}

// Rejoin ends Fault: the instance is a backup again (nopreempt: it takes
// the address only when no other VCP holds it).
func (e *Election) Rejoin() error { return os.WriteFile(e.track, []byte("0\n"), 0o644) }

// Stop ends keepalived; it gives up the address on its way out.
func (e *Election) Stop() {
	close(e.stop)
	e.mu.Lock()
	proc := e.proc
	e.mu.Unlock()
	if proc.cmd != nil {
		proc.stop(syscall.SIGTERM, 3*time.Second)
	}
	e.fifo.Close()
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
	a.active, a.suite, a.askedRIP = active, suite, false
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
		a.kickSFlow()
	} else {
		a.log.Info("standby")
	}
}
