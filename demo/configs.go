package demo

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/api"
	"github.com/msr-router/msr/internal/routetable"
	"github.com/msr-router/msr/router/routerapi"
)

// The default lab's element configs (labs/default.yaml draws the
// topology): written into the run directory before the lab comes up.

// Lab-wide facts the demo and its tests use.
const (
	H1, H2, H3 = "192.0.2.10", "198.51.100.10", "203.0.113.10"
	// The hosts' IPv6 addresses: the lab is dual stack.
	H1v6, H2v6, H3v6 = "2001:db8:10::10", "2001:db8:11::10", "2001:db8:12::10"
	OSPFHost         = "10.99.0.1"      // on ospf1's loopback, in the route it originates
	OSPFRoute        = "10.99.0.0/16"   // what ospf1 originates
	OSPFHost6        = "2001:db8:f0::1" // and over OSPFv3
	OSPFRoute6       = "2001:db8:f0::/48"
	RIPngHost        = "2001:db8:f1::1" // ospf1's too, in the route it gives by RIPng
	RIPngRoute       = "2001:db8:f1::/48"
	RouterAddr1      = "192.0.2.1" // the router's address on h1's network
	RouterAddr1v6    = "2001:db8:10::1"
	VCPAPI           = "10.0.0.1:8179"
	BGPPeer          = "203.0.113.20" // bgp1, on h3's network
)

var configs = template.Must(template.New("").Parse(`
{{define "lb1"}}name: lb1
key_file: {{.Run}}/key
api_listen: 10.0.0.31:8181
{{template "apisec" .}}pin_dir: /sys/fs/bpf/msr-default-lb1
ports:
  e0: {role: external, address: 192.0.2.1/24, address6: "2001:db8:10::1/64", vlan: 10}
  e1: {role: external, address: 198.51.100.1/24, address6: "2001:db8:11::1/64", vlan: 11}
  i0: {role: internal, default: true}
{{end}}
{{define "lb2"}}name: lb2
key_file: {{.Run}}/key
api_listen: 10.0.0.32:8181
{{template "apisec" .}}pin_dir: /sys/fs/bpf/msr-default-lb2
ports:
  e0: {role: external, address: 203.0.113.1/24, address6: "2001:db8:12::1/64", vlan: 12}
  i0: {role: internal, default: true}
  i1: {role: internal}
{{end}}
{{define "router"}}name: {{.Name}}
key_file: {{.Run}}/key
{{template "apisec" .}}interface: eth0
capacity_mbps: {{.Capacity}}
pin_dir: /sys/fs/bpf/msr-{{.Lab}}-{{.Name}}
{{with .FIB6Lines}}fib6_lines: {{.}}   # sized for bgp1's IPv6 table (msr demo --prefixes6)
{{end}}{{end}}
{{define "vcp"}}name: {{.Name}}
key_file: {{.Run}}/key
{{template "apisec" .}}interface: eth0
api_listen: 10.0.0.1:8179
mode: flowlet
standby: {address: 10.0.0.1/24, peers: [10.0.0.2, 10.0.0.3]}   # VRRP between vcp1 and vcp2 only
lbs:
  lb1: {api: 10.0.0.31:8181}
  lb2: {api: 10.0.0.32:8181}
external_ports:
  - {lb: lb1, mac: "02:00:00:00:e0:00", address: 192.0.2.1/24, address6: "2001:db8:10::1/64", vlan: 10, description: "to h1"}
  - {lb: lb1, mac: "02:00:00:00:e1:00", address: 198.51.100.1/24, address6: "2001:db8:11::1/64", vlan: 11, description: "to h2 and ospf1"}
  - {lb: lb2, mac: "02:00:00:00:e2:00", address: 203.0.113.1/24, address6: "2001:db8:12::1/64", vlan: 12, description: "to h3 and bgp1"}
# SNMP at the router's addresses (docs/operations.md): v2c "public"
# from the management network and the NOC hosts h1 and h3 only, a v3
# user, link traps to h1.
snmp:
  community: public
  sources: [10.0.0.0/24, 192.0.2.0/24, 203.0.113.0/24]
  sys_name: msr-default
  sys_location: "msr default lab"
  sys_contact: "noc@example.net"
  users:
    - {name: msrops, auth: SHA-256, auth_password: msr-auth-secret, priv: AES, priv_password: msr-priv-secret}
  traps:
    - {host: "192.0.2.10:162"}
{{if or .SFlow.IsValid .IPFIX.IsValid}}# sFlow from the external ports, the router one agent (its address on
# h1's network), each LB a sub-agent (msr demo up --sflow); the samples'
# flows as IPFIX (--ipfix).
sflow:
  collectors: [{{if .SFlow.IsValid}}"{{.SFlow}}"{{end}}]
  agent_address: 192.0.2.1
  sampling_rate: {{.SFlowRate}}
  counter_interval: 5s
{{if .IPFIX.IsValid}}  ipfix: {collectors: ["{{.IPFIX}}"], idle_timeout: 2s}
{{end}}{{end}}acl:
  - {action: deny, proto: tcp, dst: 192.0.2.0/24, dport: 23}
routing:
  asn: 65000
  run_dir: {{.Run}}/{{.Name}}
  bgp:
    - {neighbor: 203.0.113.20, asn: 65020, hold_time: 9}
    - {neighbor: "2001:db8:12::20", asn: 65020, hold_time: 9}
  ospf:
    - {vlan: 11, auth: {secret: {{.OSPFSecret}}}}   # HMAC-SHA-256, key 1
  ospfv3:
    - {vlan: 11, auth: {secret: {{.OSPFSecret}}}}
  ripng:
    - {vlan: 11}
  backends: {listen: 10.0.0.1, range: 10.0.0.0/24}
{{end}}
{{define "ospf1"}}router id 198.51.100.20;
protocol device {}
protocol static { ipv4; route 10.99.0.0/16 blackhole; }
protocol static static6 { ipv6; route 2001:db8:f0::/48 blackhole; route 2001:db8:f1::/48 blackhole; }
protocol ospf v2 {
	ipv4 { import all; export where source = RTS_STATIC; };
	area 0 { interface "eth0" { hello 1; dead 4; retransmit 2; authentication cryptographic; password "{{.OSPFSecret}}" { id 1; algorithm hmac sha256; }; }; };
}
protocol ospf v3 ospf6 {
	ipv6 { import all; export where net = 2001:db8:f0::/48; };
	area 0 { interface "eth0" { hello 1; dead 4; retransmit 2; authentication cryptographic; password "{{.OSPFSecret}}" { id 1; algorithm hmac sha256; }; }; };
}
protocol rip ng ripng {
	ipv6 { import all; export where net = 2001:db8:f1::/48; };
	interface "eth0" {};
}
{{end}}
{{define "text"}}{{.}}{{end}}
{{define "apisec"}}# The management API: TLS with the lab's certificate, which the lab's CA
# signed, read and admin tokens (msr cert); the metrics and the web view
# public.
api_security:
  cert: {{.Run}}/api/api.crt
  key: {{.Run}}/api/api.key
  ca: {{.Run}}/api/ca.crt
  read_token_file: {{.Run}}/api/read.token
  admin_token_file: {{.Run}}/api/admin.token
  public: [metrics, view]
{{end}}
{{define "mon.sh"}}# mon: Prometheus scraping every agent of the router (msr demo up
# --monitoring), or nothing.
{{if .Monitoring}}mkdir -p {{.Run}}/prometheus
exec prometheus --config.file={{.Run}}/prometheus.yml --storage.tsdb.path={{.Run}}/prometheus \
	--web.listen-address={{.PrometheusAddr}} --storage.tsdb.retention.time=1d
{{else}}exec sleep infinity
{{end}}{{end}}
{{define "prometheus.yml"}}# Written by msr demo: every agent of the default lab, scraped each second.
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: vcp
    scheme: https
    tls_config: {ca_file: {{.Run}}/api/ca.crt}
    static_configs: [{targets: ["{{.VCP}}"]}]
  - job_name: lb
    scheme: https
    tls_config: {ca_file: {{.Run}}/api/ca.crt}
    static_configs: [{targets: [{{range $i, $t := .LBs}}{{if $i}}, {{end}}"{{$t}}"{{end}}]}]
  - job_name: router
    scheme: https
    tls_config: {ca_file: {{.Run}}/api/ca.crt}
    static_configs: [{targets: [{{range $i, $t := .Routers}}{{if $i}}, {{end}}"{{$t}}"{{end}}]}]
{{end}}
{{define "bgp1.sh"}}# bgp1: addresses behind some of its prefixes, then FRR's bgpd.
{{range .Hosts}}ip addr add {{.}}/32 dev lo
{{end}}{{range .Hosts6}}ip addr add {{.}}/128 dev lo
{{end}}mkdir -p {{.Run}}/bgp1
exec /usr/lib/frr/bgpd -f {{.Run}}/bgp1-bgpd.conf -Z -S -i {{.Run}}/bgp1-bgpd.pid --vty_socket {{.Run}}/bgp1 -P 0 --log stdout
{{end}}`))

// Plan is what the demo wrote: where, and what bgp1 announces.
type Plan struct {
	Run      string
	Prefixes []netip.Prefix // bgp1's
	Hosts    []netip.Addr   // addresses behind some of them, on bgp1
	// Prefixes6 and Hosts6 are bgp1's IPv6 prefixes (over its IPv6
	// session) and addresses behind some of them.
	Prefixes6 []netip.Prefix
	Hosts6    []netip.Addr
	// OSPFSecret signs OSPF and OSPFv3 between the router and ospf1
	// (HMAC-SHA-256), fresh for each lab.
	OSPFSecret string
	// SFlow, SFlowRate and IPFIX are the router's sFlow collector,
	// sampling rate and IPFIX collector (Options), in the VCPs' configs.
	SFlow, IPFIX netip.AddrPort
	SFlowRate    uint32
}

// Prefixes6 is how many IPv6 prefixes bgp1 announces unless asked for
// more: the 2015 snapshot's /32 to /48, evenly drawn.
const Prefixes6 = 200

// WriteConfigs writes every element's config, a fresh key, and bgp1's
// prefixes (n real ones from the RouteViews snapshot, grown beyond it if
// n is larger; a few with a host behind them) into run; n6 IPv6 ones
// likewise from the 2015 IPv6 snapshot (0: Prefixes6), the back-ends'
// IPv6 FIB pool sized for them; the LBs' sFlow export as o says.
func WriteConfigs(run string, o Options) (*Plan, error) {
	n, n6 := o.Prefixes, o.Prefixes6
	if err := os.MkdirAll(run, 0o755); err != nil {
		return nil, err
	}
	all, err := routetable.Load(routetable.PyASN)
	if err != nil {
		return nil, fmt.Errorf("bgp1's prefixes: %w (scripts/deps.sh fetches the table)", err)
	}
	if n > len(all)*9/10 {
		// More than the snapshot holds (after the filter below): grown
		// with its prefix-length distribution, for a full-table lab.
		all = routetable.Synthesize(all, n*5/4, 1)
	}
	p := &Plan{Run: run, SFlow: o.SFlow, SFlowRate: o.SFlowRate, IPFIX: o.IPFIX}
	step := max(len(all)/n, 1)
	for i := 0; i < len(all) && len(p.Prefixes) < n; i += step {
		if q := all[i]; peerPrefix(q) {
			p.Prefixes = append(p.Prefixes, q)
		}
	}
	for _, q := range p.Prefixes[:3] {
		p.Hosts = append(p.Hosts, q.Addr().Next())
	}
	all6, err := routetable.Load6(routetable.PyASN6)
	if err != nil {
		return nil, fmt.Errorf("bgp1's IPv6 prefixes: %w (scripts/deps.sh fetches the table)", err)
	}
	if n6 == 0 {
		n6 = Prefixes6
	}
	if n6 > len(all6)*3/4 {
		all6 = routetable.Synthesize6(all6, n6*3/2, 1) // some fall outside /32-/48
	}
	var fit []netip.Prefix
	for _, q := range all6 {
		if peerPrefix6(q) {
			fit = append(fit, q)
		}
	}
	if len(fit) < n6 {
		return nil, fmt.Errorf("bgp1's IPv6 prefixes: %d of /32 to /48, %d asked for", len(fit), n6)
	}
	for i := range n6 { // evenly drawn
		p.Prefixes6 = append(p.Prefixes6, fit[i*len(fit)/n6])
	}
	for _, q := range p.Prefixes6[:3] {
		p.Hosts6 = append(p.Hosts6, q.Addr().Next())
	}
	// The management API's credentials, as `msr cert` makes them: one
	// certificate for every management address of the lab, two tokens.
	hosts := []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.31", "10.0.0.32", "127.0.0.1"}
	for i := 11; i <= 19; i++ {
		hosts = append(hosts, fmt.Sprintf("10.0.0.%d", i))
	}
	if err := api.MakeCredentials(filepath.Join(run, "api"), hosts); err != nil {
		return nil, err
	}
	secret := make([]byte, 12)
	rand.Read(secret)
	p.OSPFSecret = hex.EncodeToString(secret)
	// Fresh DIST keys each run: the element key and the VCP's pair,
	// whose private half only the VCPs' configs name.
	for _, f := range []string{dist.ElementKeyFile, dist.VCPKeyFile, dist.VCPPublicKeyFile} {
		os.Remove(filepath.Join(run, f))
	}
	if err := dist.MakeKeys(run, 1, dist.DefaultVCPKeyID); err != nil {
		return nil, err
	}
	write := func(file, tmpl string, data any) error {
		var b strings.Builder
		if err := configs.ExecuteTemplate(&b, tmpl, data); err != nil {
			return err
		}
		// The elements' files hold secrets (SNMP's users, routing keys):
		// root's alone. The hosts' daemons (bgp1's bgpd runs as frr) read
		// theirs.
		mode := os.FileMode(0o600)
		if strings.HasPrefix(file, "bgp1") {
			mode = 0o644
		}
		path := filepath.Join(run, file)
		if err := os.WriteFile(path, []byte(b.String()), mode); err != nil {
			return err
		}
		return os.Chmod(path, mode)
	}
	type element struct {
		Run, Lab   string
		Name       string
		Capacity   int
		FIB6Lines  int    // 0: the default pool
		OSPFSecret string // the VCPs'
		// SFlow, SFlowRate and IPFIX: the VCPs' sFlow and IPFIX export
		// (none: invalid).
		SFlow, IPFIX netip.AddrPort
		SFlowRate    uint32
	}
	fib6Lines := 0
	if lines := routerapi.FIB6LinesFor(p.Prefixes6, 16); lines > routerapi.DefaultFIB6Lines*3/4 {
		fib6Lines = lines*5/4 + 16384 // room for what the peers add later, and copies on write
	}
	steps := []error{
		write("lb1.yaml", "lb1", p), write("lb2.yaml", "lb2", p),
		write("vcp1.yaml", "vcp", element{Run: run, Name: "vcp1", OSPFSecret: p.OSPFSecret, SFlow: p.SFlow, SFlowRate: p.SFlowRate, IPFIX: p.IPFIX}),
		write("vcp2.yaml", "vcp", element{Run: run, Name: "vcp2", OSPFSecret: p.OSPFSecret, SFlow: p.SFlow, SFlowRate: p.SFlowRate, IPFIX: p.IPFIX}),
		write("ospf1-bird.conf", "ospf1", p),
		write("bgp1-bgpd.conf", "text", BGP1(p).Config()), write("bgp1.sh", "bgp1.sh", p),
	}
	for i, c := range []int{10000, 10000, 5000} { // r3 at half capacity
		name := fmt.Sprintf("r%d", i+1)
		steps = append(steps, write(name+".yaml", "router", element{Run: run, Lab: LabName, Name: name, Capacity: c, FIB6Lines: fib6Lines}))
	}
	for _, err := range steps {
		if err != nil {
			return nil, err
		}
	}
	return p, nil
}

// APIFile is one of the lab's management API credentials (api.crt,
// read.token, admin.token): msr ctl --ca, --token-file.
func APIFile(name string) string { return filepath.Join(RunDir, "api", name) }

// PrometheusAddr is where `msr demo up --monitoring` runs Prometheus (on
// mon, on the management network); Targets are the agents' APIs it
// scrapes, by job.
const PrometheusAddr = "10.0.0.40:9090"

// Targets are the agents' management APIs, by Prometheus job.
var Targets = map[string][]string{
	"vcp":    {VCPAPI},
	"lb":     {"10.0.0.31:8181", "10.0.0.32:8181"},
	"router": {"10.0.0.11:8180", "10.0.0.12:8180", "10.0.0.13:8180"},
}

// writeMonitoring writes mon's script: Prometheus and its config when
// on, nothing to run when not.
func writeMonitoring(run string, on bool) error {
	data := struct {
		Run, PrometheusAddr, VCP string
		Monitoring               bool
		LBs, Routers             []string
	}{run, PrometheusAddr, VCPAPI, on, Targets["lb"], Targets["router"]}
	for _, f := range []string{"mon.sh", "prometheus.yml"} {
		var b strings.Builder
		if err := configs.ExecuteTemplate(&b, f, data); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(run, f), []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// peerPrefix says whether a RouteViews prefix is one the labs' BGP peers
// announce: /8 to /24, off the lab's networks, no Martian.
func peerPrefix(q netip.Prefix) bool {
	return q.Bits() >= 8 && q.Bits() <= 24 && !labNet(q) && !routetable.Martian(q)
}

// peerPrefix6 is peerPrefix for IPv6: /32 to /48, off the lab's
// 2001:db8::/32, no Martian.
func peerPrefix6(q netip.Prefix) bool {
	return q.Bits() >= 32 && q.Bits() <= 48 && !labNet6.Overlaps(q) && !routetable.Martian(q)
}

// labNet6 holds the labs' own IPv6 networks.
var labNet6 = netip.MustParsePrefix("2001:db8::/32")

// labNet says whether a prefix overlaps the lab's own networks.
func labNet(p netip.Prefix) bool {
	for _, l := range []string{"10.0.0.0/8", "192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "127.0.0.0/8"} {
		if p.Overlaps(netip.MustParsePrefix(l)) {
			return true
		}
	}
	return false
}
