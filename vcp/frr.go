package vcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/template"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/routetable"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// FRR is the VCP's alternative routing suite (`routing: {suite: frr}`):
// zebra, bgpd, staticd and, with OSPF, RIP, OSPFv3 or RIPng, ospfd, ripd,
// ospf6d or ripngd, in the VCP's namespace, bound to the mirrors like
// BIRD. The same router config gives the same
// behaviour: BGP with the external peers (importing, announcing nothing),
// static routes, OSPF on the mirrors, and the RIB to the back-ends by iBGP
// (route reflector of a listen range, every path: addpath-tx-all-paths,
// graceful restart), enabled once the external sessions have converged.
//
// FRR's daemons run as its own user (zebra and staticd have no way to keep
// root), so their run directory is given to that user.
type FRR struct {
	cfg  *RoutingConfig
	dir  string
	log  *slog.Logger
	stop chan struct{}
	sup  *supervisor

	// links follows OSPFv3's and RIPng's routes for the back-ends
	// (linkroutes.go); nil without them or without back-ends.
	links *linkRouteWatch

	mu    sync.Mutex
	procs []*child
}

var frrConf = template.Must(template.New("frr").Funcs(template.FuncMap{"portsMap": portsMap}).Parse(`{{define "zebra"}}! Written by msr vcp: do not edit, edit the VCP's config.
hostname vcp
{{range .RAPorts}}! Router advertisements (RFC 4861 §6): solicited and every 30 s, the
! port's prefix (SLAAC on a /64), this router a default router.
interface x{{.VLAN}}
 description {{.Name}}
 no ipv6 nd suppress-ra
 ipv6 nd ra-interval 30
 ipv6 nd ra-lifetime 90
 ipv6 nd prefix {{.Address6.Masked}}
!
{{end}}{{end}}{{define "staticd"}}! Written by msr vcp: do not edit, edit the VCP's config.
{{range .Static}}{{if .Via.Is6}}ipv6{{else}}ip{{end}} route {{.To}} {{.Via}}
{{end}}{{end}}{{define "ospfd"}}! Written by msr vcp: do not edit, edit the VCP's config.
router ospf
 ospf router-id {{.RouterID}}
{{template "ospfExports" .}}{{range .OSPF}}interface x{{.VLAN}}
 description {{$.PortName .VLAN}}
 ip ospf area 0
 ip ospf cost {{if .Cost}}{{.Cost}}{{else}}10{{end}}
 ip ospf hello-interval 1
 ip ospf dead-interval 4
{{if .Passive}} ip ospf passive
{{end}}{{with .Auth}} ip ospf authentication message-digest
 ip ospf message-digest-key {{.KeyID}} md5 {{.Secret}}
{{end}}!
{{end}}{{end}}{{define "ospf6d"}}! Written by msr vcp: do not edit, edit the VCP's config.
! The interfaces first: within router ospf6, "interface x10" is taken for
! the start of its old "interface IFNAME area AREA" and refused.
{{range .OSPFv3}}interface x{{.VLAN}}
 description {{$.PortName .VLAN}}
 ipv6 ospf6 area 0.0.0.0
 ipv6 ospf6 cost {{if .Cost}}{{.Cost}}{{else}}10{{end}}
 ipv6 ospf6 hello-interval 1
 ipv6 ospf6 dead-interval 4
{{if .Passive}} ipv6 ospf6 passive
{{end}}{{with .Auth}} ipv6 ospf6 authentication key-id {{.KeyID}} hash-algo {{.FRRHashAlgo}} key {{.Secret}}
{{end}}!
{{end}}router ospf6
 ospf6 router-id {{.RouterID}}
{{template "ospfExports" .}}{{end}}{{define "ripngd"}}! Written by msr vcp: do not edit, edit the VCP's config.
router ripng
{{range .RIPng}} network x{{.VLAN}}
{{end}}{{template "ripExports" .}}{{if .RIPExporting "ospf"}} redistribute ospf6
{{end}}{{template "ripPorts" .}}{{end}}{{define "ripd"}}! Written by msr vcp: do not edit, edit the VCP's config.
{{range .RIP}}{{if .Auth}}key chain msr-x{{.VLAN}}
 key {{.Auth.KeyID}}
  key-string {{.Auth.Secret}}
 exit
exit
interface x{{.VLAN}}
 ip rip authentication mode md5
 ip rip authentication key-chain msr-x{{.VLAN}}
exit
{{end}}{{end}}router rip
 version 2
{{range .RIP}} network x{{.VLAN}}
{{end}}{{template "ripExports" .}}{{if .RIPExporting "ospf"}} redistribute ospf
{{end}}{{template "ripPorts" .}}{{end}}{{define "ospfExports"}}{{/* ospf_export's kinds, as AS-external routes, in ospfd and ospf6d alike */}}{{if .OSPFExporting "connected"}} redistribute connected route-map MSR-OSPF-CONNECTED
{{end}}{{if .OSPFExporting "static"}} redistribute static
{{end}}{{if .OSPFExporting "bgp"}} redistribute bgp
{{end}}!
{{if .OSPFExporting "connected"}}! The external ports' networks only, never the interconnect's.
{{portsMap "MSR-OSPF-CONNECTED" .Ports}}!
{{end}}{{end}}{{define "ripExports"}}{{/* rip_export's kinds but OSPF's, which each RIP names its own way */}}{{if .RIPExporting "connected"}} redistribute connected route-map MSR-RIP-CONNECTED
{{end}}{{if .RIPExporting "static"}} redistribute static
{{end}}{{if .RIPExporting "bgp"}} redistribute bgp
{{end}}{{end}}{{define "ripPorts"}}!
{{if .RIPExporting "connected"}}! The external ports' networks only, never the interconnect's.
{{portsMap "MSR-RIP-CONNECTED" .Ports}}!
{{end}}{{end}}{{define "bfdd"}}! Written by msr vcp: do not edit, edit the VCP's config.
bfd
 profile msr
  receive-interval {{.BFDIntervalMs}}
  transmit-interval {{.BFDIntervalMs}}
  detect-multiplier {{.BFDMultiplier}}
 exit
!
{{end}}{{define "bgpd"}}! Written by msr vcp: do not edit, edit the VCP's config.
frr defaults traditional
{{if .AgentX}}! BGP4-MIB through the VCP's snmpd (AgentX).
agentx
{{end}}router bgp {{.ASN}}
 bgp router-id {{.RouterID}}
 no bgp ebgp-requires-policy
 bgp graceful-restart
{{range .BGP}} neighbor {{.Neighbor}} remote-as {{.ASN}}
 neighbor {{.Neighbor}} description {{$.PeerPort .Neighbor}}
 neighbor {{.Neighbor}} timers connect 1
{{if .Password}} neighbor {{.Neighbor}} password {{.Password}}
{{end}}{{if .BFD}} neighbor {{.Neighbor}} bfd profile msr
{{end}}{{if .GTSM}} neighbor {{.Neighbor}} ttl-security hops 1
{{end}}{{if .HoldTime}} neighbor {{.Neighbor}} timers {{.Keepalive}} {{.HoldTime}}
{{end}}{{end}}{{with .Backends}} ! Our route-map towards the back-ends sets attributes of reflected routes.
 bgp route-reflector allow-outbound-policy
 neighbor BACKENDS peer-group
 neighbor BACKENDS remote-as {{$.ASN}}
{{if .Password}} neighbor BACKENDS password {{.Password}}
{{end}} neighbor BACKENDS shutdown
 bgp listen range {{.Range}} peer-group BACKENDS
{{end}} address-family ipv4 unicast
{{if .RedistConnected}}  redistribute connected route-map MSR-CONNECTED
{{end}}{{if or .Backends .RedistStatic}}  redistribute static route-map MSR-STATIC
{{end}}{{if and .OSPF (or .Backends .RedistOSPF)}}  redistribute ospf route-map MSR-OSPF
{{end}}{{if and .RIP (or .Backends .RedistRIP)}}  redistribute rip route-map MSR-RIP
{{end}}{{if .Backends}}  neighbor BACKENDS route-reflector-client
  neighbor BACKENDS addpath-tx-all-paths
  neighbor BACKENDS route-map MSR-BACKENDS out
{{end}}{{range .BGP}}{{.AF4}}{{end}} exit-address-family
{{if .HasIPv6}} ! IPv6 (MP-BGP): with the peers that carry it, and to the back-ends
 ! over their IPv4 sessions.
 address-family ipv6 unicast
{{if .RedistConnected}}  redistribute connected route-map MSR-CONNECTED
{{end}}{{if or .Backends .RedistStatic}}  redistribute static route-map MSR-STATIC
{{end}}{{if and .OSPFv3 .RedistOSPF}}  redistribute ospf6 route-map MSR-OSPF6
{{end}}{{if and .RIPng .RedistRIP}}  redistribute ripng route-map MSR-RIPNG
{{end}}{{if .Backends}}  neighbor BACKENDS activate
  neighbor BACKENDS route-reflector-client
  neighbor BACKENDS addpath-tx-all-paths
  neighbor BACKENDS route-map MSR-BACKENDS out
{{end}}{{range .BGP}}{{.AF6}}{{end}} exit-address-family
{{end}}!
! What is redistributed is tagged by kind (1 connected: the external
! ports' networks only; 2 static; 3 OSPF; 4 RIP; 5 OSPFv3; 6 RIPng); each
! peer's export route-map permits its kinds, BGP-learned routes by their
! non-empty AS path.
bgp as-path access-list MSR-LEARNED seq 5 permit .
{{range $i, $p := .Ports}}route-map MSR-CONNECTED permit {{$p.Seq}}
 match interface x{{$p.VLAN}}
 set tag 1
{{end}}route-map MSR-STATIC permit 10
 set tag 2
route-map MSR-OSPF permit 10
 set tag 3
route-map MSR-RIP permit 10
 set tag 4
route-map MSR-OSPF6 permit 10
 set tag 5
route-map MSR-RIPNG permit 10
 set tag 6
! The back-ends have the ports' networks themselves. What they are sent
! says where it came from and its distance, as large communities
! (ASN:1:origin, ASN:3:distance; docs/vcp.md), in place of any the route
! had.
route-map MSR-BACKENDS deny 5
 match tag 1
! OSPFv3's and RIPng's routes, via link-local next hops bgpd would replace
! with its own address, reach the back-ends in LINK_ROUTES instead
! (linkroutes.go).
route-map MSR-BACKENDS deny 6
 match tag 5
route-map MSR-BACKENDS deny 7
 match tag 6
route-map MSR-BACKENDS permit 10
 match tag 2
 set large-community {{.ASN}}:1:2 {{.ASN}}:3:1
route-map MSR-BACKENDS permit 20
 match tag 3
 set large-community {{.ASN}}:1:3 {{.ASN}}:3:110
route-map MSR-BACKENDS permit 30
 match tag 4
 set large-community {{.ASN}}:1:8 {{.ASN}}:3:120
{{range $i, $b := .BGP}}{{if eq $b.ASN $.ASN}}route-map MSR-BACKENDS permit {{$b.IBGPSeq $i}}
 match peer {{$b.Neighbor}}
 set large-community {{$.ASN}}:1:7 {{$.ASN}}:3:200
{{end}}{{end}}route-map MSR-BACKENDS permit 1000
 set large-community {{.ASN}}:1:7 {{.ASN}}:3:20
{{range .BGP}}{{.RouteMap}}{{.PrefixLists}}{{end}}! The default import policy of an eBGP peer without import_prefixes
! (RFC 7454): no martian, none of the router's own networks, no default
! route unless allow_default.
{{.FRRImportPolicy}}ip prefix-list MSR-NOTHING seq 5 deny any
ipv6 prefix-list MSR-NOTHING6 seq 5 deny any
{{end}}`))

// frrPeer is a BGP neighbour with the keepalive its hold time implies,
// its export route-map, its prefix lists, and its lines in each address
// family.
type frrPeer struct {
	BGPPeer
	Keepalive   uint16
	RouteMap    string
	PrefixLists string // MSR-IMPORT[6]-i and MSR-EXPORT[6]-i
	AF4, AF6    string
}

// IBGPSeq is peer i's entry in MSR-BACKENDS when it is an iBGP peer
// (distance 200, not eBGP's 20).
func (p frrPeer) IBGPSeq(i int) int { return 100 + 10*i }

// newFRRPeer is peer i as bgpd.conf writes it.
// Its routes come in through the route-map policy unless it is "".
func newFRRPeer(i int, b BGPPeer, policy string) frrPeer {
	p := frrPeer{BGPPeer: b, Keepalive: max(b.HoldTime/3, 1), RouteMap: exportRouteMap(i, b)}
	var lists strings.Builder
	p.AF4 = peerFamily(i, b, false, policy, &lists)
	p.AF6 = peerFamily(i, b, true, policy, &lists)
	p.PrefixLists = lists.String()
	return p
}

// peerFamily is peer i's lines in the address family of v6, and its
// prefix lists of that family written to lists. A session carries its
// transport's family (an IPv6 one only IPv6, though bgpd activates IPv4
// on every session) and IPv6 on an IPv4 one with ipv6, its next hop then
// the router's IPv6 address on the port (bgpd's next-hop-self takes the
// interface's global address). Each family's import and export lists are
// the patterns of that family: a list that has none of them passes
// nothing of it, as with BIRD (BGPPeer.Channels).
func peerFamily(i int, b BGPPeer, v6 bool, policy string, lists *strings.Builder) string {
	var s strings.Builder
	n := b.Neighbor
	carries := b.Neighbor.Is6() == v6 || (v6 && b.IPv6)
	switch {
	case !v6 && !carries:
		return fmt.Sprintf("  no neighbor %s activate\n", n)
	case !carries:
		return ""
	case v6:
		fmt.Fprintf(&s, "  neighbor %s activate\n", n)
	}
	suffix, ip := "", "ip"
	if v6 {
		suffix, ip = "6", "ipv6"
	}
	fmt.Fprintf(&s, "  neighbor %s route-map MSR-EXPORT-%d out\n  neighbor %s next-hop-self\n", n, i, n)
	if policy != "" {
		fmt.Fprintf(&s, "  neighbor %s route-map %s in\n", n, policy)
	}
	for _, l := range []struct {
		name, dir string
		ps        []PrefixPattern
	}{{"MSR-IMPORT", "in", ofFamily(b.ImportPrefixes, v6)}, {"MSR-EXPORT", "out", ofFamily(b.ExportPrefixes, v6)}} {
		switch {
		case l.ps == nil:
		case len(l.ps) == 0:
			fmt.Fprintf(&s, "  neighbor %s prefix-list MSR-NOTHING%s %s\n", n, suffix, l.dir)
		default:
			fmt.Fprintf(&s, "  neighbor %s prefix-list %s%s-%d %s\n", n, l.name, suffix, i, l.dir)
			for k, p := range l.ps {
				fmt.Fprintf(lists, "%s prefix-list %s%s-%d seq %d permit %s\n", ip, l.name, suffix, i, 5*(k+1), p.FRR())
			}
		}
	}
	if b.MaxPrefixes > 0 {
		fmt.Fprintf(&s, "  neighbor %s maximum-prefix %d", n, b.MaxPrefixes)
		if b.MaxPrefixesRestart > 0 {
			fmt.Fprintf(&s, " restart %d", int(b.MaxPrefixesRestart/time.Minute))
		}
		s.WriteString("\n")
	}
	return s.String()
}

// portsMap is a route-map that permits what is on the external ports
// (ospfd's and ripd's redistribution of connected networks).
func portsMap(name string, ports []frrPort) string {
	var s strings.Builder
	for _, p := range ports {
		fmt.Fprintf(&s, "route-map %s permit %d\n match interface x%d\n", name, p.Seq, p.VLAN)
	}
	return s.String()
}

// frrPort is an external port as MSR-CONNECTED matches it.
type frrPort struct {
	VLAN uint16
	Seq  int
}

// frrTags are the tags MSR-CONNECTED, MSR-STATIC and MSR-OSPF give
// what they redistribute.
var frrTags = map[string]int{"connected": 1, "static": 2, "ospf": 3, "rip": 4}

// frrTags6 are the tags of what OSPFv3 and RIPng give BGP, which a peer
// exporting ospf or rip is sent too.
var frrTags6 = map[string]int{"ospf": 5, "rip": 6}

// exportRouteMap is peer i's MSR-EXPORT-i: a permit for each kind it
// exports, else a deny.
func exportRouteMap(i int, b BGPPeer) string {
	var s strings.Builder
	exports := b.Exports()
	if b.ExportsNothing() {
		exports = nil
	}
	for k, kind := range exports {
		fmt.Fprintf(&s, "route-map MSR-EXPORT-%d permit %d\n", i, 10*(k+1))
		if kind == "bgp" {
			s.WriteString(" match as-path MSR-LEARNED\n")
		} else {
			fmt.Fprintf(&s, " match tag %d\n", frrTags[kind])
		}
		if t, ok := frrTags6[kind]; ok {
			fmt.Fprintf(&s, "route-map MSR-EXPORT-%d permit %d\n match tag %d\n", i, 10*(k+1)+5, t)
		}
	}
	if s.Len() == 0 {
		fmt.Fprintf(&s, "route-map MSR-EXPORT-%d deny 10\n", i)
	}
	return s.String()
}

// StartFRR writes FRR's configuration and starts its daemons, in the
// calling thread's namespace. Each daemon is supervised: one that dies is
// logged with how and started again at once (the others reconnect to
// zebra by themselves); after crashLimit deaths in crashWindow, failed is
// called and the agent gives up its mastership.
func StartFRR(cfg *RoutingConfig, log *slog.Logger, failed func()) (*FRR, error) {
	f := &FRR{cfg: cfg, dir: filepath.Join(cfg.RunDir, "frr"), log: log, stop: make(chan struct{})}
	f.sup = &supervisor{stop: f.stop, log: log, failed: failed}
	if err := f.writeConfig(); err != nil {
		return nil, err
	}
	daemons := []string{"zebra", "staticd"}
	if cfg.BFDPeers() {
		daemons = append(daemons, "bfdd") // before bgpd, which registers its sessions
	}
	daemons = append(daemons, "bgpd")
	if len(cfg.OSPF) > 0 {
		daemons = append(daemons, "ospfd")
	}
	if len(cfg.RIP) > 0 {
		daemons = append(daemons, "ripd")
	}
	if len(cfg.OSPFv3) > 0 {
		daemons = append(daemons, "ospf6d")
	}
	if len(cfg.RIPng) > 0 {
		daemons = append(daemons, "ripngd")
	}
	for _, d := range daemons {
		proc, err := f.startDaemon(d)
		if err != nil {
			f.Stop()
			return nil, err
		}
		f.mu.Lock()
		f.procs = append(f.procs, proc)
		f.mu.Unlock()
		if d == "zebra" {
			// The others connect to zebra's socket when it is there.
			for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
				if _, err := os.Stat(filepath.Join(f.dir, "zserv.api")); err == nil {
					break
				}
			}
		}
	}
	f.mu.Lock()
	for i, p := range f.procs {
		go f.sup.watch(daemons[i], "restarting it", p, func() (*child, error) {
			next, err := f.startDaemon(daemons[i])
			if err == nil {
				f.mu.Lock()
				if stopped(f.stop) { // Stop has seen the old process, not this one
					f.mu.Unlock()
					next.stop(syscall.SIGTERM, 2*time.Second)
					return nil, errSuiteStopped
				}
				f.procs[i] = next
				f.mu.Unlock()
				if daemons[i] == "bgpd" && cfg.Backends != nil {
					// It starts with the back-ends' sessions shut, as at
					// first: open them once it has converged.
					go f.holdFeed(next)
				}
			}
			return next, err
		})
	}
	bgpd := f.procs[slices.Index(daemons, "bgpd")]
	f.mu.Unlock()
	if cfg.Backends != nil && len(cfg.OSPFv3)+len(cfg.RIPng) > 0 {
		var vlans []uint16
		for _, p := range cfg.OSPFv3 {
			vlans = append(vlans, p.VLAN)
		}
		for _, p := range cfg.RIPng {
			vlans = append(vlans, p.VLAN)
		}
		f.links = startLinkRouteWatch(f.stop, vlans, log)
	}
	if cfg.Backends != nil {
		go f.holdFeed(bgpd)
	}
	return f, nil
}

func (f *FRR) startDaemon(d string) (*child, error) {
	argv := []string{"/usr/lib/frr/" + d, "-f", filepath.Join(f.dir, d+".conf"),
		"-i", filepath.Join(f.dir, d+".pid"), "-z", filepath.Join(f.dir, "zserv.api"), "--vty_socket", f.dir, "-P", "0", "--log", "stdout"}
	var env []string
	if d == "bgpd" && f.cfg.AgentX != "" {
		// bgpd's snmp module is a net-snmp subagent: it reads frr.conf
		// from SNMPCONFPATH for the master's socket.
		argv = append(argv, "-M", "snmp")
		env = append(env, "SNMPCONFPATH="+filepath.Join(f.dir, "snmp"))
	}
	return startChildEnv(filepath.Join(f.dir, d+".log"), env, argv...)
}

// writeConfig writes each daemon's configuration into a directory FRR's
// user owns.
func (f *FRR) writeConfig() error {
	if err := os.MkdirAll(f.cfg.RunDir, runDirMode(f.cfg)); err != nil {
		return err
	}
	frr := daemonUser("frr")
	if err := privateDir(f.dir, 0o700, frr); err != nil {
		return err
	}
	data := struct {
		*RoutingConfig
		BGP                                                  []frrPeer
		Ports                                                []frrPort
		RedistConnected, RedistStatic, RedistOSPF, RedistRIP bool
	}{RoutingConfig: f.cfg}
	for i, b := range f.cfg.BGP {
		data.BGP = append(data.BGP, newFRRPeer(i, b, f.cfg.frrPolicyMap(b)))
		data.RedistConnected = data.RedistConnected || b.Exporting("connected")
		data.RedistStatic = data.RedistStatic || b.Exporting("static")
		data.RedistOSPF = data.RedistOSPF || b.Exporting("ospf")
		data.RedistRIP = data.RedistRIP || b.Exporting("rip")
	}
	for i, p := range f.cfg.Ports {
		data.Ports = append(data.Ports, frrPort{p.VLAN, 10 * (i + 1)})
	}
	if f.cfg.AgentX != "" {
		snmpDir := filepath.Join(f.dir, "snmp")
		if err := privateDir(snmpDir, 0o700, frr); err != nil {
			return err
		}
		conf := "# Written by msr vcp: bgpd's AgentX subagent (BGP4-MIB).\nagentXSocket " + f.cfg.AgentX + "\n[snmp] mibs :\n"
		if err := writePrivate(filepath.Join(snmpDir, "frr.conf"), []byte(conf), frr); err != nil {
			return err
		}
	}
	for _, d := range []string{"zebra", "staticd", "ospfd", "ripd", "ospf6d", "ripngd", "bfdd", "bgpd"} {
		var b strings.Builder
		if err := frrConf.ExecuteTemplate(&b, d, data); err != nil {
			return err
		}
		if d == "staticd" {
			for _, sf := range f.cfg.StaticFiles {
				load, ip := routetable.Load, "ip"
				if sf.Via.Is6() {
					load, ip = routetable.Load6, "ipv6"
				}
				ps, err := load(sf.File)
				if err != nil {
					return err
				}
				for _, p := range ps {
					fmt.Fprintf(&b, "%s route %s %s\n", ip, p, sf.Via)
				}
			}
		}
		if err := writePrivate(filepath.Join(f.dir, d+".conf"), []byte(b.String()), frr); err != nil {
			return err
		}
	}
	return nil
}

// vtysh runs FRR commands.
func (f *FRR) vtysh(commands ...string) (string, error) {
	args := []string{"--vty_socket", f.dir}
	for _, c := range commands {
		args = append(args, "-c", c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), suiteQueryTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "vtysh", args...).CombinedOutput()
	if ctx.Err() != nil {
		return string(out), fmt.Errorf("vtysh %s: no answer within %v", strings.Join(commands, "; "), suiteQueryTimeout)
	}
	return string(out), err
}

// frrSummary is `show bgp summary json`, the part used: each address
// family's peers.
type frrSummary struct {
	IPv4 frrFamilySummary `json:"ipv4Unicast"`
	IPv6 frrFamilySummary `json:"ipv6Unicast"`
}

type frrFamilySummary struct {
	Peers map[string]frrPeerSummary `json:"peers"`
}

type frrPeerSummary struct {
	State       string `json:"state"`
	PfxRcd      int    `json:"pfxRcd"`
	PfxSnt      int    `json:"pfxSnt"`
	DynamicPeer bool   `json:"dynamicPeer"`
}

// Peers are the sessions of both families, each once: its state, and
// the prefixes received and sent in every family it carries.
func (s *frrSummary) Peers() map[string]frrPeerSummary {
	out := map[string]frrPeerSummary{}
	for _, f := range []frrFamilySummary{s.IPv4, s.IPv6} {
		for addr, p := range f.Peers {
			if q, ok := out[addr]; ok {
				p.PfxRcd += q.PfxRcd
				p.PfxSnt += q.PfxSnt
			}
			out[addr] = p
		}
	}
	return out
}

func (f *FRR) summary() (*frrSummary, error) {
	out, err := f.vtysh("show bgp summary json")
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, out)
	}
	var s frrSummary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		return nil, fmt.Errorf("show bgp summary: %v", err)
	}
	return &s, nil
}

// holdFeed enables the back-ends' sessions once the external ones have
// converged (feedGate); bgpd is the process whose feed it holds.
func (f *FRR) holdFeed(bgpd *child) {
	external := map[string]bool{}
	for _, b := range f.cfg.BGP {
		external[b.Neighbor.String()] = true
	}
	feedGate(f.stop, bgpd.exited, f.log, func() (bool, int, error) {
		s, err := f.summary()
		if err != nil {
			return false, 0, err
		}
		up, n, peers := true, 0, s.Peers()
		for addr := range external {
			p, ok := peers[addr]
			up = up && ok && p.State == "Established"
			n += p.PfxRcd
		}
		return up, n, nil
	}, func() error {
		out, err := f.vtysh("configure terminal", fmt.Sprintf("router bgp %d", f.cfg.ASN), "no neighbor BACKENDS shutdown")
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
}

// LinkRoutes are OSPFv3's and RIPng's routes for the back-ends
// (linkroutes.go); ok is false without them, or while they are held back.
func (f *FRR) LinkRoutes() (routes []dist.LinkRoute, generation uint32, ok bool) {
	if f.links == nil {
		return nil, 0, false
	}
	return f.links.Routes()
}

// Status is FRR's BGP summary, OSPF neighbours and route summary, as text.
func (f *FRR) Status() vcpapi.SuiteStatus {
	bgp, _ := f.vtysh("show bgp summary")
	ospf := ""
	if len(f.cfg.OSPF) > 0 {
		ospf, _ = f.vtysh("show ip ospf neighbor")
	}
	routes, _ := f.vtysh("show ip route summary")
	if f.cfg.HasIPv6() {
		routes6, _ := f.vtysh("show ipv6 route summary")
		routes += routes6
	}
	return vcpapi.SuiteStatus{Protocols: bgp + ospf, Routes: routes}
}

// Protocols are FRR's BGP sessions (external and back-ends) and OSPF
// neighbours, in BIRD's terms.
func (f *FRR) Protocols() []vcpapi.Protocol {
	var ps []vcpapi.Protocol
	if s, err := f.summary(); err == nil {
		for addr, p := range s.Peers() {
			pr := vcpapi.Protocol{Name: addr, Proto: "BGP", State: "start", Info: p.State, Imported: p.PfxRcd, Exported: p.PfxSnt}
			pr.Neighbor, _ = netip.ParseAddr(addr)
			if p.State == "Established" {
				pr.State = "up"
			}
			// "Idle (PfxCt)": shut for its maximum-prefix.
			pr.LimitHit = strings.Contains(p.State, "PfxCt")
			ps = append(ps, pr)
		}
	}
	if len(f.cfg.OSPF) > 0 {
		out, _ := f.vtysh("show ip ospf neighbor json")
		var n struct {
			Neighbors map[string][]struct {
				State   string `json:"nbrState"`
				Address string `json:"ifaceAddress"`
			} `json:"neighbors"`
		}
		if json.Unmarshal([]byte(out), &n) == nil {
			for id, list := range n.Neighbors {
				for _, x := range list {
					pr := vcpapi.Protocol{Name: "ospf " + id, Proto: "OSPF", State: "up", Info: x.State}
					pr.Neighbor, _ = netip.ParseAddr(x.Address)
					ps = append(ps, pr)
				}
			}
		}
	}
	return ps
}

// IGPNeighbors are the neighbours of FRR's OSPF (ospfd's, and ospf6d's by
// their link-local addresses), RIP (the sources ripd heard, on the port
// whose subnet holds each) and RIPng (the link-local next hops of the
// routes ripngd learned, with their mirrors: its status does not say a
// source's interface, so a RIPng neighbour that announces nothing is not
// one), on the mirrors only.
func (f *FRR) IGPNeighbors() []IGPNeighbor {
	var ns []IGPNeighbor
	if len(f.cfg.OSPF) > 0 {
		out, _ := f.vtysh("show ip ospf neighbor json")
		ns = append(ns, parseFRROSPFNeighbors(out)...)
	}
	if len(f.cfg.OSPFv3) > 0 {
		out, _ := f.vtysh("show ipv6 ospf6 neighbor detail json")
		ns = append(ns, parseFRROSPF6Neighbors(out)...)
	}
	if len(f.cfg.RIP) > 0 {
		out, _ := f.vtysh("show ip rip status")
		for _, a := range parseFRRRIPSources(out) {
			for _, p := range f.cfg.Ports {
				if p.Address.Masked().Contains(a) && slices.ContainsFunc(f.cfg.RIP, func(r RIPPort) bool { return r.VLAN == p.VLAN }) {
					ns = append(ns, IGPNeighbor{Addr: a, VLAN: p.VLAN})
				}
			}
		}
	}
	if len(f.cfg.RIPng) > 0 {
		out, _ := f.vtysh("show ipv6 ripng")
		ns = append(ns, parseFRRRIPngNextHops(out)...)
	}
	return ns
}

// parseFRROSPFNeighbors reads `show ip ospf neighbor json`: each
// neighbour's address and its interface, "x11:198.51.100.1".
func parseFRROSPFNeighbors(out string) []IGPNeighbor {
	var n struct {
		Neighbors map[string][]struct {
			Address string `json:"ifaceAddress"`
			Iface   string `json:"ifaceName"`
		} `json:"neighbors"`
	}
	if json.Unmarshal([]byte(out), &n) != nil {
		return nil
	}
	var ns []IGPNeighbor
	for _, list := range n.Neighbors {
		for _, x := range list {
			name, _, _ := strings.Cut(x.Iface, ":")
			if a, err := netip.ParseAddr(x.Address); err == nil && mirrorVLAN(name) != 0 {
				ns = append(ns, IGPNeighbor{Addr: a, VLAN: mirrorVLAN(name)})
			}
		}
	}
	return ns
}

// parseFRROSPF6Neighbors reads `show ipv6 ospf6 neighbor detail json`:
// "ROUTER-ID%IFACE" to each neighbour's interface and link-local address.
func parseFRROSPF6Neighbors(out string) []IGPNeighbor {
	var n map[string]struct {
		Iface string `json:"interface"`
		Addr  string `json:"linkLocalAddress"`
	}
	if json.Unmarshal([]byte(out), &n) != nil {
		return nil
	}
	var ns []IGPNeighbor
	for _, x := range n {
		if a, err := netip.ParseAddr(x.Addr); err == nil && mirrorVLAN(x.Iface) != 0 {
			ns = append(ns, IGPNeighbor{Addr: a.WithZone(""), VLAN: mirrorVLAN(x.Iface)})
		}
	}
	slices.SortFunc(ns, func(a, b IGPNeighbor) int { return a.Addr.Compare(b.Addr) })
	return ns
}

// parseFRRRIPSources reads the "Routing Information Sources" of `show ip
// rip status`: a line per source, its address first.
func parseFRRRIPSources(out string) []netip.Addr {
	_, sources, ok := strings.Cut(out, "Routing Information Sources:")
	if !ok {
		return nil
	}
	var as []netip.Addr
	for _, line := range strings.Split(sources, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			if a, err := netip.ParseAddr(f[0]); err == nil {
				as = append(as, a)
			}
		}
	}
	return as
}

// parseFRRRIPngNextHops reads `show ipv6 ripng`: a learned route's next
// hop and the interface it came by ("Via"), on the line after its
// prefix; each neighbour once.
func parseFRRRIPngNextHops(out string) []IGPNeighbor {
	var ns []IGPNeighbor
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		a, err := netip.ParseAddr(f[0])
		if v := mirrorVLAN(f[1]); err == nil && v != 0 && !a.IsUnspecified() {
			n := IGPNeighbor{Addr: a.WithZone(""), VLAN: v}
			if !slices.Contains(ns, n) {
				ns = append(ns, n)
			}
		}
	}
	return ns
}

// Networks is the number of routes in zebra's tables, both families.
func (f *FRR) Networks() (int, error) {
	n := 0
	for _, ip := range []string{"ip", "ipv6"} {
		out, err := f.vtysh("show " + ip + " route summary json")
		if err != nil {
			return 0, fmt.Errorf("routing suite: %v: %s", err, out)
		}
		var s struct {
			Total int `json:"routesTotal"`
		}
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			return 0, fmt.Errorf("show %s route summary: %v", ip, err)
		}
		n += s.Total
	}
	return n, nil
}

// RoutesFor are zebra's routes for an address.
func (f *FRR) RoutesFor(addr netip.Addr) []vcpapi.SuiteRoute {
	ip := "ip"
	if addr.Is6() {
		ip = "ipv6"
	}
	out, _ := f.vtysh("show " + ip + " route " + addr.String() + " json")
	var m map[string][]struct {
		Prefix   string `json:"prefix"`
		Protocol string `json:"protocol"`
		Selected bool   `json:"selected"`
		Nexthops []struct {
			IP        string `json:"ip"`
			Interface string `json:"interfaceName"`
		} `json:"nexthops"`
	}
	if json.Unmarshal([]byte(out), &m) != nil {
		return nil
	}
	var rs []vcpapi.SuiteRoute
	for _, list := range m {
		for _, r := range list {
			sr := vcpapi.SuiteRoute{Prefix: r.Prefix, Protocol: r.Protocol, Best: r.Selected}
			for _, nh := range r.Nexthops {
				if nh.IP != "" {
					sr.Via = append(sr.Via, nh.IP)
				} else {
					sr.Dev = nh.Interface
				}
			}
			rs = append(rs, sr)
		}
	}
	return rs
}

// Reconfigure: FRR's daemons read their files at start only, and applying
// a difference to a running FRR is frr-reload's job, which needs the
// integrated configuration msr does not write. A changed routing section
// is refused: nothing applied, restart msr vcp.
func (f *FRR) Reconfigure(cfg *RoutingConfig) error {
	return fmt.Errorf("nothing applied: with FRR a change of the routing section needs a restart of msr vcp")
}

// Check refuses what Reconfigure would.
func (f *FRR) Check(cfg *RoutingConfig) error { return f.Reconfigure(cfg) }

// AskRIP does nothing: ripd and ripngd ask only when an interface comes
// up, and have no command to ask again, so with FRR a RIP neighbour's
// routes come with its next periodic update (docs/vcp.md).
func (f *FRR) AskRIP() {}

// Stop ends FRR's daemons.
func (f *FRR) Stop() {
	f.mu.Lock()
	if !stopped(f.stop) {
		close(f.stop)
	}
	procs := slices.Clone(f.procs)
	f.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].stop(syscall.SIGTERM, 2*time.Second)
	}
}
