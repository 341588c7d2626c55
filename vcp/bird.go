package vcp

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/template"
	"time"

	"golang.org/x/sys/unix"

	"github.com/msr-router/msr/internal/routetable"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// BIRD is the VCP's default routing suite: BIRD 2, bound to the mirrors,
// speaking the router's protocols for the whole cluster.
type BIRD struct {
	cfg    *RoutingConfig
	socket string
	log    *slog.Logger
	stop   chan struct{}
	sup    *supervisor

	mu      sync.Mutex
	proc    *child
	feeding bool // the back-ends' sessions are enabled (holdFeed)
}

// suiteConf is what the template renders: the config, and whether the
// back-ends' sessions start disabled.
type suiteConf struct {
	*RoutingConfig
	HoldFeed bool
}

var birdConf = template.Must(template.New("bird").Parse(`# Written by msr vcp: do not edit, edit the VCP's config.
log stderr all;
router id {{.RouterID}};
# Started in graceful-restart recovery (-R), BIRD waits at most this long
# for its peers' End-of-RIB.
graceful restart wait 30;

protocol device {}

# The default import policy of an eBGP peer without import_prefixes
# (RFC 7454): no martian, none of the router's own networks, no default
# route unless allow_default.
{{.BIRDPolicySets}}
# The external ports' subnets, from the mirrors; a port whose link is
# down (its mirror loses carrier with it) is not announced.
protocol direct {
	ipv4;
	interface "x*";
	check link yes;
}
{{if .HasIPv6}}
protocol direct direct6 {
	ipv6;
	interface "x*";
	check link yes;
}
{{end}}{{range $i, $b := .BGP}}
protocol bgp peer{{$i}} {
	description "{{$.PeerPort $b.Neighbor}}";
	local as {{$.ASN}};
	neighbor {{$b.Neighbor}} as {{$b.ASN}};
{{if $b.HoldTime}}	hold time {{$b.HoldTime}};
{{end}}	connect delay time 1;   # not BIRD's 5 s: after a takeover every second counts
	connect retry time 5;   # not BIRD's 120 s: a SYN sent while the peer's link was down backs off to 16 s and more; a new one every 5 s
	graceful restart on;
{{if $b.Password}}	password "{{$b.Password}}";   # TCP-MD5
{{end}}{{if $b.BFD}}	bfd on;   # down when BFD says the peer is gone
{{end}}{{if $b.GTSM}}	ttl security on;   # GTSM: sent at TTL 255, taken only at 255 (RFC 5082)
{{end}}{{if $b.MaxPrefixesRestart}}	error wait time {{$b.RestartSeconds}}, {{$b.RestartSeconds}};   # max_prefixes_restart
{{else}}	error wait time 5, 300;   # not BIRD's 60 s: a session ended by an error (its hold time, while the port was down) starts again 5 s later; a flapping one backs off to 300 s
{{end}}	# What the router announces (export: {{$b.Exports}}), with its own
	# address on the peer's port as next hop: one router, not its gateways.
{{range $.PeerChannels $b}}	{{.Family}} {
		import {{.Import}};
		export {{.Export}};
		{{.NextHop}}
{{with $b.BIRDLimit}}		{{.}}
{{end}}	};
{{end}}}
{{end}}{{if .BFDPeers}}
# BFD with the peers that have bfd: {{.BFDInterval}} x {{.BFDMultiplier}}.
protocol bfd {
	interface "x*" { interval {{.BFDIntervalMs}} ms; multiplier {{.BFDMultiplier}};{{with .BFDAuth}}
		# Signed and checked (bfd_auth), key {{.KeyID}}.
		authentication {{.BIRDBFDAlgorithm}};
		password "{{.Secret}}" { id {{.KeyID}}; };
	{{end}} };
}
{{end}}{{if or .Static4 .StaticFiles4}}
protocol static {
	ipv4;
	check link yes;   # routes via a port whose link is down are withdrawn
{{range .Static4}}	route {{.To}} via {{.Via}};
{{end}}{{range .StaticFiles4}}	include "{{$.RunDir}}/static{{.I}}.conf";
{{end}}}
{{end}}{{if or .Static6 .StaticFiles6}}
protocol static static6 {
	ipv6;
	check link yes;
{{range .Static6}}	route {{.To}} via {{.Via}};
{{end}}{{range .StaticFiles6}}	include "{{$.RunDir}}/static{{.I}}.conf";
{{end}}}
{{end}}{{if .OSPF}}
protocol ospf v2 {
	# ospf_export: {{if .OSPFExport}}{{.OSPFExport}}{{else}}nothing{{end}}, as AS-external routes.
	ipv4 { import all; export {{.BIRDOSPFExport}}; };
	area 0 {
{{range .OSPF}}		# {{$.PortName .VLAN}}
		interface "x{{.VLAN}}" { cost {{if .Cost}}{{.Cost}}{{else}}10{{end}}; hello 1; dead 4;{{if .Passive}} stub yes;{{end}}{{template "auth" .Auth}} };
{{end}}	};
}
{{end}}{{if .OSPFv3}}
protocol ospf v3 ospf6 {
	ipv6 { import all; export {{.BIRDOSPFExport}}; };
	area 0 {
{{range .OSPFv3}}		# {{$.PortName .VLAN}}
		interface "x{{.VLAN}}" { cost {{if .Cost}}{{.Cost}}{{else}}10{{end}}; hello 1; dead 4;{{if .Passive}} stub yes;{{end}}{{template "auth" .Auth}} };
{{end}}	};
}
{{end}}{{if .RIP}}
protocol rip rip4 {
	# What it learned by RIP, and rip_export: {{.RIPExports}}.
	ipv4 { import all; export {{.BIRDRIPExport}}; };
{{range .RIP}}	interface "x{{.VLAN}}" { version 2;{{template "auth" .Auth}} };   # {{$.PortName .VLAN}}
{{end}}}
{{end}}{{if .RIPng}}
protocol rip ng ripng {
	ipv6 { import all; export {{.BIRDRIPExport}}; };
{{range .RIPng}}	interface "x{{.VLAN}}" {};   # {{$.PortName .VLAN}}
{{end}}}
{{end}}{{with .RAPorts}}
# Router advertisements (RFC 4861 §6) on the ports that ask for them
# (router_advertisements): solicited and every 10-30 s, each port's
# prefixes (its address6's: SLAAC on a /64), this router a default router.
protocol radv {
{{range .}}	interface "x{{.VLAN}}" { min ra interval 10; max ra interval 30; };   # {{.Name}}
{{end}}}
{{end}}{{with .Backends}}
# The RIB to every back-end: iBGP, this suite their route reflector. What
# BGP, OSPF and static routes give goes; the ports' own subnets do not (each
# back-end has them). Next hops are gateways on the ports' subnets, which
# the back-ends mirror.
# Each route says where it came from and its preference, as large
# communities (ASN, 1, origin) and (ASN, 2, preference) (docs/vcp.md,
# router/origin.go); a peer's own of the router's ASN go first.
filter to_backends {
	if !(source ~ [RTS_BGP, RTS_STATIC, RTS_OSPF, RTS_OSPF_IA, RTS_OSPF_EXT1, RTS_OSPF_EXT2, RTS_RIP]) then reject;
	# A route with no gateway is a port's own subnet as OSPF or RIP sees
	# it, beside the direct route refused above: add paths would send it
	# too. Of IPv6 BIRD could not (its next hop kept, there is none:
	# "Invalid NEXT_HOP attribute - zero address" at every feed's start).
	if dest = RTD_UNICAST && gw = :: then reject;
	bgp_large_community.delete([({{$.ASN}}, *, *)]);
	if source = RTS_STATIC then bgp_large_community.add(({{$.ASN}}, 1, 2));
	if source = RTS_OSPF then bgp_large_community.add(({{$.ASN}}, 1, 3));
	if source = RTS_OSPF_IA then bgp_large_community.add(({{$.ASN}}, 1, 4));
	if source = RTS_OSPF_EXT1 then bgp_large_community.add(({{$.ASN}}, 1, 5));
	if source = RTS_OSPF_EXT2 then bgp_large_community.add(({{$.ASN}}, 1, 6));
	if source = RTS_BGP then bgp_large_community.add(({{$.ASN}}, 1, 7));
	if source = RTS_RIP then bgp_large_community.add(({{$.ASN}}, 1, 8));
	bgp_large_community.add(({{$.ASN}}, 2, preference));
	# A link-local next hop (OSPFv3's) is a neighbour's on one port: its
	# VLAN goes with it, as (ASN, 4, VLAN). Set here, it is kept (BIRD
	# sends only a global gateway on its own).
	if net.type = NET_IP6 then {
		if gw ~ fe80::/10 then {
			bgp_next_hop = gw;
{{range $.Ports}}			if ifname = "x{{.VLAN}}" then bgp_large_community.add(({{$.ASN}}, 4, {{.VLAN}}));
{{end}}		}
	}
	accept;
}

protocol bgp backends {
{{if $.HoldFeed}}	disabled;       # until the suite's own sessions have converged (Suite.holdFeed)
{{end}}	local {{.Listen}} as {{$.ASN}};
	neighbor range {{.Range}} internal;
{{if .Password}}	password "{{.Password}}";   # TCP-MD5, from the deployment key
{{end}}	rr client;
	graceful restart on;
	error wait time 1, 10;   # not BIRD's 60-300 s: a feed ended by an error (its hold time expired while this suite took a full table) is back at once, its routes kept meanwhile
	ipv4 {
		import none;
		export filter to_backends;
		add paths tx;   # every path, so that ECMP reaches the back-ends
	};
{{if $.HasIPv6}}	# IPv6 over the same session (MP-BGP): the same routes of the other
	# family, their next hops the gateways on the ports' IPv6 subnets.
	ipv6 {
		import none;
		export filter to_backends;
		next hop keep;
		add paths tx;
	};
{{end}}}
{{end}}{{define "auth"}}{{with .}}
			# Signed and checked (the port's auth), key {{.KeyID}}.
			authentication cryptographic;
			password "{{.Secret}}" { id {{.KeyID}}; algorithm {{.BIRDAlgorithm}}; };
		{{end}}{{end}}`))

// StartBIRD writes BIRD's configuration and starts it. Call it in
// the VCP's namespace: the process inherits it. With recovery (a VCP
// taking over) BIRD starts in graceful-restart recovery (`bird -R`): it
// tells its BGP neighbours it restarted with its forwarding state kept.
//
// Either way the back-ends' sessions start disabled, and are enabled once
// the suite's own sessions have converged (holdFeed): a back-end that kept
// its routes through a VCP's restart or takeover (graceful restart) must
// not be sent a partial RIB and End-of-RIB, or it would drop, then relearn,
// every route the peers had not re-sent yet.
//
// BIRD is supervised: when it dies, the VCP logs how, and starts it again
// at once in graceful-restart recovery, its back-ends' sessions held again
// until it has converged. The peers (graceful restart) and the back-ends
// (the RIB feed keeps stale routes) forward on meanwhile. After
// crashLimit deaths in crashWindow it calls failed: the agent gives up its
// mastership to the standby.
func StartBIRD(cfg *RoutingConfig, recovery bool, log *slog.Logger, failed func()) (*BIRD, error) {
	s := &BIRD{cfg: cfg, socket: filepath.Join(cfg.RunDir, "bird", "bird.ctl"), log: log, stop: make(chan struct{})}
	s.sup = &supervisor{stop: s.stop, log: log, failed: failed}
	proc, err := s.start(recovery)
	if err != nil {
		return nil, err
	}
	go s.sup.watch("bird", "restarting it in graceful-restart recovery", proc, func() (*child, error) { return s.start(true) })
	return s, nil
}

// start writes the config (the back-ends' sessions held) and starts BIRD.
func (s *BIRD) start(recovery bool) (*child, error) {
	s.mu.Lock()
	s.feeding = s.cfg.Backends == nil
	cfg := s.cfg
	s.mu.Unlock()
	path, err := s.writeConfig(cfg)
	if err != nil {
		return nil, err
	}
	creds, err := s.socketDir(cfg)
	if err != nil {
		return nil, err
	}
	args := []string{"bird", "-f", "-c", path, "-s", s.socket}
	if recovery {
		args = append(args, "-R")
	}
	proc, err := startChildAs(filepath.Join(cfg.RunDir, "bird.log"), nil, creds, args...)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if stopped(s.stop) {
		// Stop came while it started (the supervisor restarting a BIRD
		// that died a third time as the VCP stands down): Stop has seen
		// the old process, not this one.
		s.mu.Unlock()
		proc.stop(os.Interrupt, 2*time.Second)
		return nil, errSuiteStopped
	}
	s.proc = proc
	feeding := s.feeding
	s.mu.Unlock()
	if !feeding {
		go s.holdFeed(proc)
	}
	return proc, nil
}

// holdFeed enables the back-ends' sessions once BIRD has converged
// (feedGate): its graceful-restart recovery over (every peer that does
// graceful restart has sent its End-of-RIB), every external BGP session
// Established, the imported routes steady.
//
// A peer that restarted itself (the Restart State bit: it waits for our
// End-of-RIB, and BIRD does not wait for its own) may send its routes
// more than feedSettle after its session came up — FRR's bgpd does, a
// second or more after our End-of-RIB — so until it has sent a route, or
// restartedPeerSettle has passed since its session was seen up, it counts
// as not converged. Without this the soak saw a takeover feed the
// back-ends 998 of 1,198 routes with End-of-RIB, and their routes to bgp1
// flap.
//
// It holds proc's feed: once proc ends, its restart's gate takes over.
func (s *BIRD) holdFeed(proc *child) {
	established := map[string]time.Time{} // when each peer was first seen Established
	feedGate(s.stop, proc.exited, s.log, func() (bool, int, error) {
		out, err := s.Query("show protocols all")
		if err != nil {
			return false, 0, err // not up yet
		}
		restarting := restartingPeers(out)
		// The routes the protocols imported: `show route count` would walk
		// the whole table five times a second.
		up, n := true, 0
		for _, p := range parseProtocols(out) {
			n += p.Imported
			if p.Proto != "BGP" || !strings.HasPrefix(p.Name, "peer") {
				continue
			}
			if p.Info != "Established" {
				up = false
				delete(established, p.Name)
				continue
			}
			if _, ok := established[p.Name]; !ok {
				established[p.Name] = time.Now()
			}
			if restarting[p.Name] && p.Imported == 0 && time.Since(established[p.Name]) < restartedPeerSettle {
				up = false
			}
		}
		if status, _ := s.Query("show status"); strings.Contains(status, "Graceful restart recovery in progress") {
			up = false
		}
		return up, n, nil
	}, func() error {
		if out, err := s.Query("enable backends"); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		s.mu.Lock()
		s.feeding = true
		s.mu.Unlock()
		return nil
	})
}

// birdCaps are the capabilities BIRD keeps as its own user, those its
// own -u keeps but CAP_NET_BROADCAST, which Linux checks nowhere BIRD
// goes: BGP's and RIP's ports, OSPF's raw sockets, the kernel's routes
// and interfaces.
var birdCaps = []uintptr{unix.CAP_NET_BIND_SERVICE, unix.CAP_NET_ADMIN, unix.CAP_NET_RAW}

// socketDir makes the directory of BIRD's control socket, BIRD's own
// (it makes the socket anew at each start), and RUNDIR/bird.ctl a link
// to the socket for birdc. It returns who BIRD runs as.
func (s *BIRD) socketDir(cfg *RoutingConfig) (*daemonCreds, error) {
	o := runAs("bird", cfg.RunDir)
	if err := privateDir(filepath.Dir(s.socket), 0o700, o); err != nil {
		return nil, err
	}
	link := filepath.Join(cfg.RunDir, "bird.ctl")
	os.Remove(link)
	if err := os.Symlink(filepath.Join("bird", "bird.ctl"), link); err != nil {
		return nil, err
	}
	return &daemonCreds{owner: o, caps: birdCaps}, nil
}

// writeConfig writes BIRD's configuration (and its static route files)
// into the run directory and returns its path.
func (s *BIRD) writeConfig(cfg *RoutingConfig) (string, error) {
	return s.writeConfigAs(cfg, "bird.conf")
}

// writeConfigAs writes cfg's BIRD config as name in the run dir.
func (s *BIRD) writeConfigAs(cfg *RoutingConfig, name string) (string, error) {
	if err := os.MkdirAll(cfg.RunDir, runDirMode(cfg)); err != nil {
		return "", err
	}
	s.mu.Lock()
	hold := !s.feeding
	s.mu.Unlock()
	var conf bytes.Buffer
	if err := birdConf.Execute(&conf, suiteConf{cfg, hold}); err != nil {
		return "", err
	}
	for i, f := range cfg.StaticFiles {
		if err := writeStaticFile(filepath.Join(cfg.RunDir, fmt.Sprintf("static%d.conf", i)), f); err != nil {
			return "", err
		}
	}
	// BIRD reads it again, as its own user, at each reconfiguration.
	path := filepath.Join(cfg.RunDir, name)
	return path, writePrivate(path, conf.Bytes(), runAs("bird", cfg.RunDir))
}

// Check has BIRD parse the config cfg renders (`configure check` of a
// file beside its own), applying nothing: its error names the line.
func (s *BIRD) Check(cfg *RoutingConfig) error {
	path, err := s.writeConfigAs(cfg, "bird-check.conf")
	if err != nil {
		return err
	}
	defer os.Remove(path)
	out, err := s.Query(fmt.Sprintf("configure check %q", path))
	if err == nil && strings.Contains(out, "Configuration OK") {
		return nil
	}
	// BIRD's own words, its greeting and "Reading configuration" left out.
	var why []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, "BIRD ") && !strings.HasPrefix(l, "Reading configuration") {
			why = append(why, strings.TrimSpace(l))
		}
	}
	if len(why) == 0 && err != nil {
		why = append(why, err.Error())
	}
	return fmt.Errorf("BIRD refused the new configuration, nothing applied: %s", strings.Join(why, "; "))
}

// Reconfigure gives the running suite a new configuration: BIRD compares
// it with the old one and restarts only the protocols that changed.
func (s *BIRD) Reconfigure(cfg *RoutingConfig) error {
	if _, err := s.writeConfig(cfg); err != nil {
		return err
	}
	out, err := s.Query("configure")
	if err != nil || !strings.Contains(out, "Reconfigur") {
		return fmt.Errorf("BIRD refused the new configuration: %v: %s", err, out)
	}
	s.mu.Lock()
	s.cfg = cfg // what a restart starts with
	s.mu.Unlock()
	return nil
}

// writeStaticFile turns a pyasn file's prefixes of the gateway's family
// into BIRD static routes.
func writeStaticFile(path string, f StaticFile) error {
	load := routetable.Load
	if f.Via.Is6() {
		load = routetable.Load6
	}
	ps, err := load(f.File)
	if err != nil {
		return err
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(out, 1<<20)
	for _, p := range ps {
		fmt.Fprintf(w, "\troute %s via %s;\n", p, f.Via)
	}
	if err := w.Flush(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Query runs a birdc command and returns its output.
func (s *BIRD) Query(command string) (string, error) {
	return s.queryWithin(command, suiteQueryTimeout)
}

// suiteQueryTimeout bounds a birdc (or vtysh) command: a suite busy
// (taking over with a full table, or stopped) must not hold the VCP's API
// or its loops. suiteStatusTimeout is BIRD's status's share: `msr ctl
// status` and the soak's look for the active VCP answer within it, the
// suite's part saying it did not answer.
const (
	suiteQueryTimeout  = 10 * time.Second
	suiteStatusTimeout = 1500 * time.Millisecond
)

func (s *BIRD) queryWithin(command string, d time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	out, err := exec.CommandContext(ctx, "birdc", append([]string{"-s", s.socket}, strings.Fields(command)...)...).CombinedOutput()
	if ctx.Err() != nil {
		return string(out), fmt.Errorf("birdc %s: no answer within %v", command, d)
	}
	return string(out), err
}

// Status asks BIRD for its protocols and route count, as text, both at
// once and each within suiteStatusTimeout.
func (s *BIRD) Status() vcpapi.SuiteStatus {
	var p, r string
	var wg sync.WaitGroup
	wg.Add(2)
	for _, q := range []struct {
		command string
		out     *string
	}{{"show protocols", &p}, {"show route count", &r}} {
		go func() {
			defer wg.Done()
			out, err := s.queryWithin(q.command, suiteStatusTimeout)
			if err != nil && out == "" {
				out = err.Error()
			}
			*q.out = out
		}()
	}
	wg.Wait()
	return vcpapi.SuiteStatus{Protocols: p, Routes: r}
}

// AskRIP restarts BIRD's RIP protocols, which then send their requests
// and their own tables (BIRD has no command that sends one alone). What
// they learned before is learned again within a round trip. The IPv4 one
// is named rip4: `rip` is a keyword to birdc, and `restart rip` a syntax
// error. A RIPv2 with authentication on any
// port is left alone: the restarted protocol numbers its packets from the
// clock's second again (RFC 4822's sequence number), not above what it
// sent in the second before, and its neighbours dropped its updates as
// replays until its next regular one, up to 30 s later.
func (s *BIRD) AskRIP() {
	s.mu.Lock()
	cfg := s.cfg
	s.mu.Unlock()
	for _, p := range []struct {
		name  string
		ports []RIPPort
	}{{"rip4", cfg.RIP}, {"ripng", cfg.RIPng}} {
		if len(p.ports) == 0 || slices.ContainsFunc(p.ports, func(r RIPPort) bool { return r.Auth != nil }) {
			continue
		}
		if out, err := s.Query("restart " + p.name); err != nil || !strings.Contains(out, "restarted") {
			s.log.Warn("asking the RIP neighbours again", "protocol", p.name, "err", err, "birdc", strings.TrimSpace(out))
		}
	}
}

// Stop ends BIRD.
func (s *BIRD) Stop() {
	s.mu.Lock()
	if !stopped(s.stop) {
		close(s.stop)
	}
	proc := s.proc
	s.mu.Unlock()
	proc.stop(os.Interrupt, 2*time.Second)
}

// Protocols are BIRD's protocols with their states and route counts.
func (s *BIRD) Protocols() []vcpapi.Protocol {
	out, _ := s.Query("show protocols all")
	return parseProtocols(out)
}

// IGPNeighbors asks each of BIRD's OSPF and RIP protocols for its
// neighbours.
func (s *BIRD) IGPNeighbors() []IGPNeighbor {
	var out []IGPNeighbor
	for _, p := range s.Protocols() {
		switch p.Proto {
		case "OSPF":
			text, _ := s.Query("show ospf neighbors " + p.Name)
			out = append(out, parseIGPNeighbors(text, false)...)
		case "RIP":
			text, _ := s.Query("show rip neighbors " + p.Name)
			out = append(out, parseIGPNeighbors(text, true)...)
		}
	}
	return out
}

// Networks is the number of prefixes in BIRD's table.
func (s *BIRD) Networks() (int, error) {
	out, err := s.Query("show route count")
	if err != nil {
		return 0, fmt.Errorf("routing suite: %v: %s", err, out)
	}
	_, n, err := parseRouteCount(out)
	return n, err
}

// RoutesFor are BIRD's routes for an address.
func (s *BIRD) RoutesFor(addr netip.Addr) []vcpapi.SuiteRoute {
	out, _ := s.Query("show route for " + addr.String())
	return parseRoutes(out)
}
