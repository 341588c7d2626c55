package vcp

import (
	"bufio"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
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
	Pos            config.Pos    `yaml:"-"`
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
vrrp_instance msr {
	state BACKUP
	nopreempt
	interface {{.Interface}}
	virtual_router_id {{.VRID}}
	priority {{.Priority}}
	advert_int {{.Advert}}
	virtual_ipaddress {
		{{.Address}} dev {{.Interface}}
	}
	track_file {
		suite_failed
	}
}
`))

// Election runs keepalived and reports its verdicts.
type Election struct {
	proc *child
	fifo *os.File
	// track is keepalived's tracked file: 0, or 1 to make the instance
	// faulty (Fault).
	track string
	// Active receives true when this VCP becomes VRRP master, false when
	// it stops being master.
	Active chan bool
}

// StartElection writes keepalived's configuration into dir and starts it
// in the calling thread's namespace.
func StartElection(name, iface string, cfg *StandbyConfig, standby bool, dir string, log *slog.Logger) (*Election, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	fifo := filepath.Join(dir, "vrrp.fifo")
	os.Remove(fifo)
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		return nil, fmt.Errorf("notify FIFO: %w", err)
	}
	track := filepath.Join(dir, "suite-failed")
	if err := os.WriteFile(track, []byte("0\n"), 0o644); err != nil {
		return nil, err
	}
	conf, err := electionConfig(name, iface, fifo, track, cfg, standby)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "keepalived.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	// Read and write, so that the FIFO never reads end-of-file while
	// keepalived reopens it.
	f, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	e := &Election{fifo: f, track: track, Active: make(chan bool, 4)}
	// keepalived dies with msr vcp: a dead VCP must stop advertising itself.
	e.proc, err = startChild(filepath.Join(dir, "keepalived.log"), "keepalived", "--dont-fork", "--log-console", "--log-detail",
		"--vrrp", "--use-file", path, "--pid", filepath.Join(dir, "keepalived.pid"), "--vrrp_pid", filepath.Join(dir, "vrrp.pid"))
	if err != nil {
		f.Close()
		return nil, err
	}
	go e.read(log)
	return e, nil
}

// electionConfig is keepalived's configuration.
func electionConfig(name, iface, fifo, track string, cfg *StandbyConfig, standby bool) (string, error) {
	// The standby also starts later, so that when both start together the
	// other wins even though neither preempts.
	prio, delay := cfg.Priority, ""
	if standby {
		prio = min(prio, 100)
		delay = fmt.Sprintf("%.2f", max(time.Second, 10*cfg.AdvertInterval).Seconds())
	}
	var conf strings.Builder
	err := keepalivedConf.Execute(&conf, map[string]any{"Name": name, "FIFO": fifo, "TrackFile": track, "Interface": iface, "VRID": cfg.VRID,
		"Priority": prio, "StartupDelay": delay, "Advert": fmt.Sprintf("%.2f", cfg.AdvertInterval.Seconds()), "Address": cfg.Address})
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
		e.Active <- f[2] == "MASTER"
	}
}

// Fault makes this VCP's VRRP instance faulty: keepalived gives up the
// address at once, and the standby takes over.
func (e *Election) Fault() error { return os.WriteFile(e.track, []byte("1\n"), 0o644) }

// Stop ends keepalived; it gives up the address on its way out.
func (e *Election) Stop() {
	e.proc.stop(syscall.SIGTERM, 3*time.Second)
	e.fifo.Close()
}
