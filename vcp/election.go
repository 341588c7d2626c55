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
