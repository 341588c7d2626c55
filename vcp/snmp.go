package vcp

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"

	"golang.org/x/sys/unix"

	"github.com/msr-router/msr/internal/agentx"
	"github.com/msr-router/msr/internal/config"
)

// SNMP: the router as one box to a network management station. The VCP
// runs net-snmp's snmpd as the master agent, answering at every address
// of the VCP's namespace — the router's addresses on the mirrors, which
// the LBs redirect SNMP to (Table 1's Virtual CP rule), and its
// management address — and serves the router's own objects itself, as
// an AgentX subagent (RFC 2741) over snmpd's Unix socket: SNMPv2-MIB's
// system group and IF-MIB's ifTable and ifXTable for the router's
// external ports (snmpmib.go). snmpd's own MIB modules, which would
// describe the VCP host, are not loaded or not in the view: what a
// manager sees is the router, not the machines it is made of. A port
// going down or up sends linkDown/linkUp through snmpd to the trap
// receivers. Only the active VCP answers: a standby's mirrors send
// nothing out.

// SNMPConfig is the VCP's `snmp:` section.
type SNMPConfig struct {
	// Community is the SNMPv2c read-only community (none: no v1/v2c).
	Community string `yaml:"community"`
	// Sources are the prefixes the community is answered from (default:
	// the management network, the standby's or the back-ends' subnet):
	// a community crosses the network in clear.
	Sources []netip.Prefix `yaml:"sources"`
	// Users are SNMPv3 users, read-only, authPriv only.
	Users []SNMPUser `yaml:"users"`
	// SysName, SysLocation and SysContact are SNMPv2-MIB's (sysName's
	// default: the VCP's name).
	SysName     string `yaml:"sys_name"`
	SysLocation string `yaml:"sys_location"`
	SysContact  string `yaml:"sys_contact"`
	// Traps are where linkDown and linkUp go (SNMPv2c notifications).
	Traps []SNMPTrapReceiver `yaml:"traps"`
	// Listen is where snmpd answers (default udp:161: every address).
	Listen string     `yaml:"listen"`
	Pos    config.Pos `yaml:"-"`
}

// SNMPUser is an SNMPv3 user (USM, RFC 3414) with authentication and
// privacy.
type SNMPUser struct {
	Name         string `yaml:"name" msr:"required"`
	Auth         string `yaml:"auth"` // SHA-256 (default), SHA-512; SHA and MD5 with weak
	AuthPassword string `yaml:"auth_password" msr:"required"`
	Priv         string `yaml:"priv"` // AES (default); DES with weak
	PrivPassword string `yaml:"priv_password" msr:"required"`
	// Weak allows what is broken or nearly so (MD5, SHA-1, DES), for an
	// old manager.
	Weak bool       `yaml:"weak"`
	Pos  config.Pos `yaml:"-"`
}

// SNMPTrapReceiver is a trap sink.
type SNMPTrapReceiver struct {
	Host      netip.AddrPort `yaml:"host" msr:"required"` // ADDRESS:PORT, such as 192.0.2.10:162
	Community string         `yaml:"community"`           // default: the read community, or "public"
	Pos       config.Pos     `yaml:"-"`
}

// complete checks the section and fills its defaults.
// mgmt is the management network, as far as the file tells it.
func (s *SNMPConfig) complete(vcpName string, mgmt []netip.Prefix) error {
	if s.Community == "" && len(s.Users) == 0 {
		return s.Pos.Errorf("snmp: a community, users, or both")
	}
	if strings.ContainsAny(s.Community, " \t\"\n") {
		return s.Pos.Errorf("snmp community: no spaces or quotes")
	}
	if s.Community != "" && len(s.Sources) == 0 {
		if len(mgmt) == 0 {
			return s.Pos.Errorf("snmp community: sources, the prefixes that may read it (the file names no management network: no standby address, no back-ends' range)")
		}
		s.Sources = mgmt
	}
	for i, p := range s.Sources {
		s.Sources[i] = p.Masked()
	}
	if s.SysName == "" {
		s.SysName = vcpName
	}
	if s.Listen == "" {
		s.Listen = "udp:161"
	}
	for i := range s.Users {
		u := &s.Users[i]
		if u.Auth == "" {
			u.Auth = "SHA-256"
		}
		if u.Priv == "" {
			u.Priv = "AES"
		}
		switch u.Auth {
		case "SHA-256", "SHA-512":
		case "SHA", "MD5":
			if !u.Weak {
				return u.Pos.Errorf("snmp user %s: auth %s is weak: SHA-256 or SHA-512, or weak: true for an old manager", u.Name, u.Auth)
			}
		default:
			return u.Pos.Errorf("snmp user %s: auth %q: SHA-256 or SHA-512 (SHA, MD5 with weak: true)", u.Name, u.Auth)
		}
		switch u.Priv {
		case "AES":
		case "DES":
			if !u.Weak {
				return u.Pos.Errorf("snmp user %s: priv DES is weak: AES, or weak: true for an old manager", u.Name)
			}
		default:
			return u.Pos.Errorf("snmp user %s: priv %q: AES (DES with weak: true)", u.Name, u.Priv)
		}
		// RFC 3414 §11.2: passwords of at least 8 characters (snmpd
		// refuses shorter ones).
		if len(u.AuthPassword) < 8 || len(u.PrivPassword) < 8 {
			return u.Pos.Errorf("snmp user %s: passwords of at least 8 characters", u.Name)
		}
		for _, f := range []string{u.Name, u.AuthPassword, u.PrivPassword} {
			if strings.ContainsAny(f, " \t\"\n") {
				return u.Pos.Errorf("snmp user %s: no spaces or quotes in names and passwords", u.Name)
			}
		}
	}
	for i := range s.Traps {
		t := &s.Traps[i]
		if !t.Host.IsValid() {
			return t.Pos.Errorf("snmp trap receiver: ADDRESS:PORT")
		}
		if t.Community == "" {
			t.Community = s.Community
		}
		if t.Community == "" {
			t.Community = "public"
		}
	}
	return nil
}

// snmpdConf is snmpd's configuration. Only what the view routerView
// includes is answered: the system group, the interfaces and ifMIB
// groups (the subagent's), snmpd's own SNMP statistics and engine
// objects, and BGP4-MIB (FRR's bgpd, as a subagent, where it runs).
var snmpdConf = template.Must(template.New("snmpd").Parse(`# Written by msr vcp: do not edit, edit the VCP's snmp: section.
[snmp] persistentDir {{.Dir}}
[snmp] mibs :
agentAddress {{.Listen}}
master agentx
agentXSocket {{.Socket}}
agentXPerms 0660 0755 {{.Owner}} {{.Group}}
view routerView included .1.3.6.1.2.1.1
view routerView included .1.3.6.1.2.1.2
view routerView included .1.3.6.1.2.1.11
view routerView included .1.3.6.1.2.1.15
view routerView included .1.3.6.1.2.1.31
view routerView included .1.3.6.1.6.3
{{if .Community}}{{range .Sources}}{{if .Addr.Is4}}rocommunity {{$.Community}} {{.}} -V routerView{{else}}rocommunity6 {{$.Community}} {{.}} -V routerView{{end}}
{{end}}{{end}}{{range .Users}}createUser {{.Name}} {{.Auth}} "{{.AuthPassword}}" {{.Priv}} "{{.PrivPassword}}"
rouser {{.Name}} priv -V routerView
{{end}}{{range .Traps}}trap2sink {{.Host}} {{.Community}}
{{end}}`))

// snmpdModules are snmpd's MIB modules left out (-I -LIST: the one dash
// applies to the list): those that would answer for the VCP host's own
// interfaces and system group, which the subagent serves for the router.
// A registration more specific than the subagent's (snmpd's ifTable at
// 1.3.6.1.2.1.2.2 against its 1.3.6.1.2.1.2) would win whatever the
// priorities.
const snmpdModules = "-system_mib,interface,ifTable,ifXTable"

// snmpUser is the user snmpd runs as where it exists (Debian's).
const snmpUser = "Debian-snmp"

// snmpRunner runs snmpd and the subagent until ctx ends.
type snmpRunner struct {
	cfg    *SNMPConfig
	dir    string
	mib    *routerMIB
	agent  *Agent
	log    *slog.Logger
	socket string
	creds  *daemonCreds // who snmpd runs as
}

// startSNMP writes snmpd's config into dir and runs snmpd and the
// subagent (restarting either that dies) until ctx ends.
func (a *Agent) startSNMP(ctx context.Context, cfg *SNMPConfig, dir string) error {
	r := &snmpRunner{cfg: cfg, dir: filepath.Join(dir, "snmp"), agent: a, log: a.log.With("subsystem", "snmp")}
	r.socket = snmpSocket(dir)
	r.mib = newRouterMIB(a, cfg)
	// snmpd runs as its own user where there is one, the directory and
	// its files its own. The directory is searchable by FRR's daemons:
	// bgpd's BGP4-MIB subagent connects to the socket, whose group is
	// frr's (snmpd is made a member to give it).
	r.creds = &daemonCreds{owner: runAs(snmpUser, dir), caps: []uintptr{unix.CAP_NET_BIND_SERVICE}}
	if err := privateDir(r.dir, 0o711, r.creds.owner); err != nil {
		return fmt.Errorf("snmp: %w", err)
	}
	var b strings.Builder
	owner, group := "root", "root"
	if r.creds.owner != nil {
		owner, group = snmpUser, snmpUser
	}
	if g, err := user.LookupGroup("frr"); err == nil {
		group = "frr"
		if gid, err := strconv.Atoi(g.Gid); err == nil {
			r.creds.groups = []uint32{uint32(gid)}
		}
	}
	if err := snmpdConf.Execute(&b, struct {
		*SNMPConfig
		Dir, Socket, Owner, Group string
	}{cfg, r.dir, r.socket, owner, group}); err != nil {
		return err
	}
	conf := filepath.Join(r.dir, "snmpd.conf")
	if err := writePrivate(conf, []byte(b.String()), r.creds.owner); err != nil {
		return fmt.Errorf("snmp: %w", err)
	}
	// A previous run's persistent file holds its users' localized keys
	// and engine boots; users come from the config alone.
	os.Remove(filepath.Join(r.dir, "snmpd.conf.persistent"))
	go r.runSnmpd(ctx, conf)
	go r.runSubagent(ctx)
	return nil
}

// runSnmpd keeps snmpd running.
func (r *snmpRunner) runSnmpd(ctx context.Context, conf string) {
	for ctx.Err() == nil {
		// Left by a root snmpd of an older VCP, they would stop this one.
		os.Remove(r.socket)
		os.Remove(filepath.Join(r.dir, "snmpd.pid"))
		c, err := startChildAs(filepath.Join(r.dir, "snmpd.log"), nil, r.creds, "snmpd", "-f", "-Lo", "-C", "-c", conf,
			"-I", snmpdModules, "-p", filepath.Join(r.dir, "snmpd.pid"))
		if err != nil {
			r.log.Error("start snmpd", "err", err)
		} else {
			select {
			case <-ctx.Done():
				c.stop(os.Interrupt, 2*time.Second)
				return
			case <-c.exited:
				r.log.Error("snmpd died: restarting it", "status", c.status)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// snmpSocket is snmpd's AgentX socket in the VCP's run directory.
func snmpSocket(runDir string) string { return filepath.Join(runDir, "snmp", "agentx.sock") }

// The subagent's identity in snmpd's logs and the subtrees it serves.
var (
	subagentID = agentx.MustOID("1.3.6.1.4.1.8072.3.2.10")
	// registered: the system group's scalars one by one (sysORTable,
	// 1.3.6.1.2.1.1.8-9, stays snmpd's), ifNumber and ifTable, and ifMIB.
	registered = []agentx.OID{
		agentx.MustOID("1.3.6.1.2.1.1.1"), agentx.MustOID("1.3.6.1.2.1.1.2"), agentx.MustOID("1.3.6.1.2.1.1.3"),
		agentx.MustOID("1.3.6.1.2.1.1.4"), agentx.MustOID("1.3.6.1.2.1.1.5"), agentx.MustOID("1.3.6.1.2.1.1.6"),
		agentx.MustOID("1.3.6.1.2.1.1.7"), agentx.MustOID("1.3.6.1.2.1.2"), agentx.MustOID("1.3.6.1.2.1.31"),
	}
)

// runSubagent connects to snmpd (again whenever the session ends),
// registers the router's subtrees and sends the port traps.
func (r *snmpRunner) runSubagent(ctx context.Context) {
	events := r.agent.WatchPorts()
	for ctx.Err() == nil {
		s, err := agentx.Dial(ctx, r.socket, subagentID, "msr vcp: the router's system group and interfaces", r.mib)
		if err == nil {
			for _, o := range registered {
				if err = s.Register(o, 100); err != nil {
					break
				}
			}
			if err != nil {
				s.Close()
			}
		}
		if err != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
			continue
		}
		r.log.Info("AgentX subagent registered", "socket", r.socket)
		r.serve(ctx, s, events)
		s.Close()
	}
}

// serve sends a trap for each port event until the session or ctx ends.
func (r *snmpRunner) serve(ctx context.Context, s *agentx.Session, events <-chan PortEvent) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.Done():
			r.log.Warn("AgentX session ended", "err", s.Err())
			return
		case ev := <-events:
			trap, vars := r.mib.linkTrap(ev.Port)
			if err := s.Notify(trap, vars...); err != nil {
				r.log.Warn("send link trap", "port", ev.Port.Name, "err", err)
			} else {
				r.log.Info("link trap sent", "port", ev.Port.Name, "up", ev.Port.Up)
			}
		}
	}
}
