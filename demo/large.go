package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/template"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/api"
	"github.com/msr-router/msr/internal/routetable"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/router/routerapi"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// The large lab: a router as large as this machine carries, to show that
// the router grows by its elements. 16 LBs of 4 external ports each (64
// ports, VLANs 100-163), 8 back-ends, both VCPs, and one host on every
// external port. Port P of LB L is 10.L.P.1/24 and 2001:db8:L:P::1/64,
// its host hLeP .10 and ::10. The hosts of the first eight LBs' e0 are
// BGP peers (FRR, AS 65100+L, each announcing its own RouteViews
// prefixes); those of the next four run OSPF (BIRD, 10.(200+L).0.0/16).
// The interconnect is 10.0.0.0/24 as in the default lab: back-ends .11 up,
// the VCPs .2 and .3 (the router's VCP address .1), the LBs' management
// NICs .100+L.
const (
	LargeLab    = "large"
	LargeRunDir = "/run/msr/large"
	// LargeLBs × LargePortsPerLB are the external ports it starts with;
	// AddLargeLB adds LBs after them.
	LargeLBs        = 16
	LargePortsPerLB = 4
	LargeBackends   = 8
	// The hosts on e0 of LBs 1-8 are BGP peers, of 9-12 OSPF neighbours.
	largeBGPPeers  = 8
	largeOSPFPeers = 4
	// largePeerPrefixes is how many prefixes each BGP peer announces, in
	// each family.
	largePeerPrefixes = 16
	largeFirstVLAN    = 100
	// largeMaxLBs: the 17th joins at run time; the addressing holds to 99.
	largeMaxLBs = 99
)

// LargePort is one external port of the large lab and its host.
type LargePort struct {
	LB, Port            int
	Name                string // lbL/eP, as the router names it
	VLAN                uint16
	Host                string // hLeP
	Router, Router6     netip.Addr
	HostAddr, HostAddr6 netip.Addr
}

// LargePeer is a BGP peer of the large lab.
type LargePeer struct {
	Host      string
	ASN       uint32
	Port      LargePort
	Prefixes  []netip.Prefix
	Prefixes6 []netip.Prefix
}

// LargePlan is what the large lab is: its ports and peers.
type LargePlan struct {
	Run        string
	LBs        int
	Ports      []LargePort
	Peers      []LargePeer
	OSPF       []LargePort // the ports with an OSPF neighbour
	OSPFSecret string
}

func largePort(l, p int) LargePort {
	return LargePort{LB: l, Port: p, Name: fmt.Sprintf("lb%d/e%d", l, p),
		VLAN: uint16(largeFirstVLAN + (l-1)*LargePortsPerLB + p), Host: fmt.Sprintf("h%de%d", l, p),
		Router: netip.AddrFrom4([4]byte{10, byte(l), byte(p), 1}), HostAddr: netip.AddrFrom4([4]byte{10, byte(l), byte(p), 10}),
		Router6: netip.MustParseAddr(fmt.Sprintf("2001:db8:%d:%d::1", l, p)), HostAddr6: netip.MustParseAddr(fmt.Sprintf("2001:db8:%d:%d::10", l, p))}
}

// lbPorts are LB l's ports.
func lbPorts(l int) []LargePort {
	var out []LargePort
	for p := range LargePortsPerLB {
		out = append(out, largePort(l, p))
	}
	return out
}

// OSPFRouteOf is what the OSPF neighbour on LB l's e0 originates, and
// OSPFHostOf the address behind it.
func OSPFRouteOf(l int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(200 + l), 0, 0}), 16)
}
func OSPFHostOf(l int) netip.Addr { return netip.AddrFrom4([4]byte{10, byte(200 + l), 0, 1}) }

// PlanLarge is the large lab's plan with lbs LBs; its peers' prefixes are
// drawn from the RouteViews snapshots, none twice.
func PlanLarge(lbs int) (*LargePlan, error) {
	p := &LargePlan{Run: LargeRunDir, LBs: lbs}
	for l := 1; l <= lbs; l++ {
		p.Ports = append(p.Ports, lbPorts(l)...)
	}
	v4, v6, err := drawPeerPrefixes(largeBGPPeers * largePeerPrefixes)
	if err != nil {
		return nil, err
	}
	for i := range largeBGPPeers {
		l := i + 1
		p.Peers = append(p.Peers, LargePeer{Host: fmt.Sprintf("h%de0", l), ASN: uint32(65100 + l), Port: largePort(l, 0),
			Prefixes:  v4[i*largePeerPrefixes : (i+1)*largePeerPrefixes],
			Prefixes6: v6[i*largePeerPrefixes : (i+1)*largePeerPrefixes]})
	}
	for i := range largeOSPFPeers {
		p.OSPF = append(p.OSPF, largePort(largeBGPPeers+i+1, 0))
	}
	return p, nil
}

// drawPeerPrefixes draws n IPv4 prefixes (/8 to /24) and n IPv6 ones (/32
// to /48) evenly from the snapshots, off the lab's networks.
func drawPeerPrefixes(n int) (v4, v6 []netip.Prefix, err error) {
	all, err := routetable.Load(routetable.PyASN)
	if err != nil {
		return nil, nil, fmt.Errorf("the peers' prefixes: %w (scripts/deps.sh fetches the table)", err)
	}
	all6, err := routetable.Load6(routetable.PyASN6)
	if err != nil {
		return nil, nil, fmt.Errorf("the peers' IPv6 prefixes: %w", err)
	}
	var fit, fit6 []netip.Prefix
	for _, q := range all {
		if peerPrefix(q) {
			fit = append(fit, q)
		}
	}
	for _, q := range all6 {
		if peerPrefix6(q) {
			fit6 = append(fit6, q)
		}
	}
	if len(fit) < n || len(fit6) < n {
		return nil, nil, fmt.Errorf("the peers' prefixes: %d and %d in the snapshots, %d wanted", len(fit), len(fit6), n)
	}
	for i := range n {
		v4 = append(v4, fit[i*len(fit)/n])
		v6 = append(v6, fit6[i*len(fit6)/n])
	}
	return v4, v6, nil
}

var largeTemplates = template.Must(configs.Clone()).Funcs(template.FuncMap{"add": func(a, b int) int { return a + b }})

func init() {
	template.Must(largeTemplates.Parse(`
{{define "large-lb"}}name: lb{{.LB}}
key_file: {{.Run}}/key
api_listen: 10.0.0.{{add 100 .LB}}:8181
{{template "apisec" .}}pin_dir: /sys/fs/bpf/msr-large-lb{{.LB}}
ports:
{{range .Ports}}  e{{.Port}}: {role: external, address: {{.Router}}/24, address6: "{{.Router6}}/64", vlan: {{.VLAN}}}
{{end}}  i0: {role: internal, default: true}
{{end}}
{{define "large-vcp"}}name: {{.Name}}
key_file: {{.Run}}/key
{{template "apisec" .}}interface: eth0
api_listen: 10.0.0.1:8179
mode: flowlet
standby: {address: 10.0.0.1/24, peers: [10.0.0.2, 10.0.0.3]}
lbs:
{{range .LBNumbers}}  lb{{.}}: {api: 10.0.0.{{add 100 .}}:8181}
{{end}}external_port_ranges:
  - {lbs: "lb[1-{{.LBs}}]", ports: "[0-{{add .PortsPerLB -1}}]", mac: "02:00:00:{lb:02x}:e{port}:00", vlan: {{.FirstVLAN}},
     address: "10.{lb}.{port}.1/24", address6: "2001:db8:{lb}:{port}::1/64", description: "to h{lb}e{port}"}
snmp:
  community: public
  sources: [10.0.0.0/24, 10.1.0.0/24]
  sys_name: msr-large
  sys_location: "msr large lab"
  sys_contact: "noc@example.net"
  traps:
    - {host: "10.1.0.10:162"}
routing:
  asn: 65000
  run_dir: {{.Run}}/{{.Name}}
  bgp:
{{range .Peers}}    - {neighbor: {{.Port.HostAddr}}, asn: {{.ASN}}, hold_time: 9}
    - {neighbor: "{{.Port.HostAddr6}}", asn: {{.ASN}}, hold_time: 9}
{{end}}  ospf:
{{range .OSPF}}    - {vlan: {{.VLAN}}, auth: {secret: {{$.OSPFSecret}}}}
{{end}}  backends: {listen: 10.0.0.1, range: 10.0.0.0/24}
{{end}}
{{define "large-ospf"}}router id {{.Port.HostAddr}};
protocol device {}
protocol static { ipv4; route {{.Route}} blackhole; }
protocol ospf v2 {
	ipv4 { import all; export where source = RTS_STATIC; };
	area 0 { interface "eth0" { hello 1; dead 4; retransmit 2; authentication cryptographic; password "{{.Secret}}" { id 1; algorithm hmac sha256; }; }; };
}
{{end}}
{{define "large-bgp.sh"}}# {{.Host}}: an address behind its first prefixes, then FRR's bgpd.
ip addr add {{.Host4}}/32 dev lo
ip addr add {{.Host6}}/128 dev lo
mkdir -p {{.Run}}/{{.Name}}
exec /usr/lib/frr/bgpd -f {{.Run}}/{{.Name}}-bgpd.conf -Z -S -i {{.Run}}/{{.Name}}-bgpd.pid --vty_socket {{.Run}}/{{.Name}} -P 0 --log stdout
{{end}}
{{define "large-host"}}  {{.Port.Host}}:
    interfaces:
      eth0: {addresses: [{{.Port.HostAddr}}/24, "{{.Port.HostAddr6}}/64"], xdp_pass: on, tx_checksum: off, qdisc: pfifo_fast}
    routes:
      - {to: default, via: {{.Port.Router}}}
      - {to: default, via: "{{.Port.Router6}}"}
{{with .Process}}    processes:
      - {{.}}
{{end}}{{end}}
{{define "large-lbhost"}}  lb{{.LB}}:
    interfaces:
{{range .Ports}}      e{{.Port}}: {mac: "02:00:00:{{printf "%02x" .LB}}:e{{.Port}}:00"}
{{end}}      i0: {mac: "02:00:00:{{printf "%02x" .LB}}:10:00", vlan_offload: off}
      m0: {addresses: [10.0.0.{{add 100 .LB}}/24], mac: "02:00:00:{{printf "%02x" .LB}}:1f:00"}
    processes:
      - {name: lb, command: [setpriv, "--bounding-set=-all,+net_admin,+net_raw,+bpf,+perfmon,+sys_resource", --, {{.MSR}}, lb, --config, {{.Run}}/lb{{.LB}}.yaml]}
{{end}}
{{define "large-lblinks"}}{{range .Ports}}  - ends: [lb{{.LB}}:e{{.Port}}, {{.Host}}:eth0]
{{end}}  - ends: [lb{{.LB}}:i0, sw1:l{{.LB}}i]
  - ends: [lb{{.LB}}:m0, sw1:l{{.LB}}m]
{{end}}
{{define "large-lbswitch"}}      l{{.LB}}i: {xdp_pass: on, vlan_offload: off}
      l{{.LB}}m: {}
{{end}}`))
}

// largeLB is what an LB's templates take.
type largeLB struct {
	Run, MSR string
	LB       int
	Ports    []LargePort
}

// largeHost is what a host's template takes.
type largeHost struct {
	Port    LargePort
	Process string
}

// largeHostProcess is the process a host runs: bgpd on a BGP peer, BIRD
// on an OSPF neighbour, none on the others.
func (p *LargePlan) largeHostProcess(host string) string {
	for _, peer := range p.Peers {
		if peer.Host == host {
			return fmt.Sprintf("{name: bgpd, command: [sh, %s/%s.sh]}", p.Run, host)
		}
	}
	for _, o := range p.OSPF {
		if o.Host == host {
			return fmt.Sprintf(`{name: bird, command: [sh, -c, "ip addr add %s/32 dev lo && exec bird -f -c %s/%s-bird.conf -s %s/%s-bird.ctl"]}`,
				OSPFHostOf(o.LB), p.Run, host, p.Run, host)
		}
	}
	return ""
}

// labText is the lab file of LBs first to last, with the interconnect,
// back-ends and VCPs when whole (the lab itself, not an extension).
func (p *LargePlan) labText(msr string, first, last int, whole bool) (string, error) {
	var hosts, switchPorts, links strings.Builder
	for l := first; l <= last; l++ {
		lb := largeLB{Run: p.Run, MSR: msr, LB: l, Ports: lbPorts(l)}
		for _, port := range lb.Ports {
			if err := largeTemplates.ExecuteTemplate(&hosts, "large-host", largeHost{port, p.largeHostProcess(port.Host)}); err != nil {
				return "", err
			}
		}
		for tmpl, b := range map[string]*strings.Builder{"large-lbhost": &hosts, "large-lbswitch": &switchPorts, "large-lblinks": &links} {
			if err := largeTemplates.ExecuteTemplate(b, tmpl, lb); err != nil {
				return "", err
			}
		}
	}
	if whole {
		setpriv := "setpriv, \"--bounding-set=-all,+net_admin,+net_raw,+bpf,+perfmon,+sys_resource\", --, " + msr
		for r := 1; r <= LargeBackends; r++ {
			fmt.Fprintf(&hosts, "  r%d:\n    interfaces:\n      eth0: {addresses: [10.0.0.%d/24], mac: \"02:00:00:00:b0:%02x\", vlan_offload: off, tx_checksum: off}\n"+
				"    processes:\n      - {name: router, command: [%s, router, --config, %s/r%d.yaml]}\n", r, 10+r, r, setpriv, p.Run, r)
			fmt.Fprintf(&switchPorts, "      r%d: {xdp_pass: on, vlan_offload: off}\n", r)
			fmt.Fprintf(&links, "  - ends: [r%d:eth0, sw1:r%d]\n", r, r)
		}
		vcpCaps := "setpriv, \"--bounding-set=-all,+net_admin,+net_raw,+net_bind_service,+setuid,+setgid,+chown,+fowner,+dac_override,+kill,+sys_admin,+sys_resource\", --, " + msr
		for v, standby := range []string{"", ", --standby"} {
			fmt.Fprintf(&hosts, "  vcp%d:\n    interfaces:\n      eth0: {addresses: [10.0.0.%d/24], mac: \"02:00:00:00:cc:%02x\", vlan_offload: off, tx_checksum: off}\n"+
				"    processes:\n      - {name: vcp, command: [%s, vcp, --config, %s/vcp%d.yaml%s]}\n", v+1, v+2, v+1, vcpCaps, p.Run, v+1, standby)
			fmt.Fprintf(&switchPorts, "      v%d: {vlan_offload: off}\n", v+1)
			fmt.Fprintf(&links, "  - ends: [vcp%d:eth0, sw1:v%d]\n", v+1, v+1)
		}
	}
	return fmt.Sprintf("# The large lab (demo/large.go), LBs %d to %d.\nname: %s\nhosts:\n%sswitches:\n  sw1:\n    interfaces:\n%slinks:\n%s",
		first, last, LargeLab, hosts.String(), switchPorts.String(), links.String()), nil
}

// writeLarge writes a file of the lab's run directory: the elements'
// files root's alone (they hold secrets), the hosts' daemons' readable.
func (p *LargePlan) writeLarge(file, tmpl string, data any, mode os.FileMode) error {
	var b strings.Builder
	if err := largeTemplates.ExecuteTemplate(&b, tmpl, data); err != nil {
		return err
	}
	path := filepath.Join(p.Run, file)
	if err := os.WriteFile(path, []byte(b.String()), mode); err != nil {
		return err
	}
	return os.Chmod(path, mode)
}

// writeVCPs writes both VCPs' files for the plan's LBs.
func (p *LargePlan) writeVCPs() error {
	var numbers []int
	for l := 1; l <= p.LBs; l++ {
		numbers = append(numbers, l)
	}
	for _, name := range VCPs {
		data := struct {
			*LargePlan
			Name                  string
			LBNumbers             []int
			PortsPerLB, FirstVLAN int
		}{p, name, numbers, LargePortsPerLB, largeFirstVLAN}
		if err := p.writeLarge(name+".yaml", "large-vcp", data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// WriteLargeConfigs writes every element's and peer's file of the large
// lab with lbs LBs, fresh keys and credentials, and returns its plan.
func WriteLargeConfigs(lbs int) (*LargePlan, error) {
	p, err := PlanLarge(lbs)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(p.Run, 0o755); err != nil {
		return nil, err
	}
	hosts := []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "127.0.0.1"}
	for i := 11; i <= 10+LargeBackends; i++ {
		hosts = append(hosts, fmt.Sprintf("10.0.0.%d", i))
	}
	for l := 1; l <= largeMaxLBs; l++ {
		hosts = append(hosts, fmt.Sprintf("10.0.0.%d", 100+l))
	}
	if err := api.MakeCredentials(filepath.Join(p.Run, "api"), hosts); err != nil {
		return nil, err
	}
	secret := make([]byte, 12)
	rand.Read(secret)
	p.OSPFSecret = hex.EncodeToString(secret)
	for _, f := range []string{dist.ElementKeyFile, dist.VCPKeyFile, dist.VCPPublicKeyFile} {
		os.Remove(filepath.Join(p.Run, f))
	}
	if err := dist.MakeKeys(p.Run, 1, dist.DefaultVCPKeyID); err != nil {
		return nil, err
	}
	for l := 1; l <= lbs; l++ {
		if err := p.writeLarge(fmt.Sprintf("lb%d.yaml", l), "large-lb", largeLB{Run: p.Run, LB: l, Ports: lbPorts(l)}, 0o600); err != nil {
			return nil, err
		}
	}
	for r := 1; r <= LargeBackends; r++ {
		data := struct {
			Run, Lab, Name      string
			Capacity, FIB6Lines int
		}{p.Run, LargeLab, fmt.Sprintf("r%d", r), 10000, 0}
		if err := p.writeLarge(data.Name+".yaml", "router", data, 0o600); err != nil {
			return nil, err
		}
	}
	if err := p.writeVCPs(); err != nil {
		return nil, err
	}
	for _, peer := range p.Peers {
		conf := PeerBGP{Hostname: peer.Host, ASN: peer.ASN, RouterID: peer.Port.HostAddr.String(), Router: peer.Port.Router.String(),
			Router6: peer.Port.Router6.String(), RouterASN: 65000, Prefixes: peer.Prefixes, Prefixes6: peer.Prefixes6}.Config()
		script := struct{ Run, Name, Host, Host4, Host6 string }{p.Run, peer.Host, peer.Host, peer.Prefixes[0].Addr().Next().String(), peer.Prefixes6[0].Addr().Next().String()}
		if err := p.writeLarge(peer.Host+"-bgpd.conf", "text", conf, 0o644); err != nil {
			return nil, err
		}
		if err := p.writeLarge(peer.Host+".sh", "large-bgp.sh", script, 0o644); err != nil {
			return nil, err
		}
	}
	for _, o := range p.OSPF {
		if err := p.writeOSPF(o); err != nil {
			return nil, err
		}
	}
	return p, p.save()
}

// writeOSPF writes the BIRD config of the OSPF neighbour on port o.
func (p *LargePlan) writeOSPF(o LargePort) error {
	data := struct {
		Port   LargePort
		Route  netip.Prefix
		Secret string
	}{o, OSPFRouteOf(o.LB), p.OSPFSecret}
	return p.writeLarge(o.Host+"-bird.conf", "large-ospf", data, 0o644)
}

// save keeps the plan in the run directory, for add-lb.
func (p *LargePlan) save() error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(p.Run, "plan.json"), b, 0o600)
}

// LoadLargePlan is the running large lab's plan.
func LoadLargePlan() (*LargePlan, error) {
	b, err := os.ReadFile(filepath.Join(LargeRunDir, "plan.json"))
	if err != nil {
		return nil, fmt.Errorf("the large lab's plan: %w (msr demo up --size large first)", err)
	}
	p := &LargePlan{}
	return p, json.Unmarshal(b, p)
}

// UpLarge writes the large lab's files and builds it (msr is this
// binary). The default lab must be down: the two name their elements
// alike, and an element's local socket is named by its name.
func UpLarge(msr string) (*LargePlan, error) {
	if labs, _ := lab.Labs(); slices.Contains(labs, LabName) {
		return nil, fmt.Errorf("the default lab is up: msr demo down first (the large lab's elements have its names)")
	}
	DownLarge()
	p, err := WriteLargeConfigs(LargeLBs)
	if err != nil {
		return nil, err
	}
	spec, err := p.Spec(msr)
	if err != nil {
		return nil, err
	}
	if _, err := lab.Up(spec); err != nil {
		return nil, err
	}
	return p, nil
}

// Spec is the large lab of the plan's LBs as a lab, msr every element's
// program.
func (p *LargePlan) Spec(msr string) (*lab.Spec, error) {
	text, err := p.labText(msr, 1, p.LBs, true)
	if err != nil {
		return nil, err
	}
	return lab.Load("large.yaml", []byte(text))
}

// KillLargeLB kills LB l's host as a line card pulled out: its agent
// first (SIGKILL: a host that dies says nothing, so the VCP finds out by
// its silence), then every link of it down.
func KillLargeLB(l int) error {
	st, err := lab.ReadState(LargeLab)
	if err != nil {
		return err
	}
	host := fmt.Sprintf("lb%d", l)
	for _, p := range st.Processes {
		if p.Host == host && p.Name == "lb" {
			if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil {
				return fmt.Errorf("%s's agent: %w", host, err)
			}
		}
	}
	return largeLBLinks(l, "down")
}

// ReviveLargeLB brings LB l's host back: every link up, its agent started
// again.
func ReviveLargeLB(l int) error {
	if err := largeLBLinks(l, "up"); err != nil {
		return err
	}
	_, _, err := lab.Restart(LargeLab, fmt.Sprintf("lb%d", l), "lb", syscall.SIGKILL)
	return err
}

// largeLBLinks sets every link of LB l's host down or up.
func largeLBLinks(l int, state string) error {
	var batch strings.Builder
	for p := range LargePortsPerLB {
		fmt.Fprintf(&batch, "link set e%d %s\n", p, state)
	}
	batch.WriteString("link set i0 " + state + "\nlink set m0 " + state + "\n")
	cmd := exec.Command("ip", "-n", lab.Namespace(LargeLab, fmt.Sprintf("lb%d", l)), "-batch", "-")
	cmd.Stdin = strings.NewReader(batch.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("lb%d's links %s: %v %s", l, state, err, out)
	}
	return nil
}

// DownLarge removes the large lab and what its agents pinned.
func DownLarge() error {
	err := lab.Down(LargeLab)
	removePins("msr-large-")
	return err
}

// removePins removes the maps pinned by agents whose pin directories
// start with prefix, and the back-ends' saved states.
func removePins(prefix string) {
	pins, _ := filepath.Glob("/sys/fs/bpf/" + prefix + "*")
	for _, p := range pins {
		name := strings.TrimPrefix(filepath.Base(p), prefix)
		os.RemoveAll(p)
		os.Remove(routerapi.StatePath(name))
		os.Remove(routerapi.StatePath(name) + ".settings")
	}
}

// AddLargeLB adds the next LB to the running large lab with its 4 ports
// and their hosts (an OSPF neighbour on its e0), as an operator racks a
// line card: its file written,
// its host, links and agent started, then both VCPs' files given its
// ports and reloaded (the standby first), so that the router takes them
// while it runs.
func AddLargeLB(msr string, p *LargePlan) error {
	l := p.LBs + 1
	if l > largeMaxLBs {
		return fmt.Errorf("lb%d: the large lab's addressing holds %d LBs", l, largeMaxLBs)
	}
	ports := lbPorts(l)
	if err := p.writeLarge(fmt.Sprintf("lb%d.yaml", l), "large-lb", largeLB{Run: p.Run, LB: l, Ports: ports}, 0o600); err != nil {
		return err
	}
	// An OSPF neighbour on its e0, which the VCPs' suite takes at the
	// reload (OSPFRouteOf's addressing holds to LB 55).
	if l <= 55 {
		p.OSPF = append(p.OSPF, ports[0])
		if err := p.writeOSPF(ports[0]); err != nil {
			return err
		}
	}
	text, err := p.labText(msr, l, l, false)
	if err != nil {
		return err
	}
	spec, err := lab.Load(fmt.Sprintf("lb%d.yaml", l), []byte(text))
	if err != nil {
		return err
	}
	if _, err := lab.Extend(spec); err != nil {
		return err
	}
	p.LBs, p.Ports = l, append(p.Ports, ports...)
	if err := p.writeVCPs(); err != nil {
		return err
	}
	if err := p.save(); err != nil {
		return err
	}
	for _, v := range []string{"vcp2", "vcp1"} {
		if _, err := vcpapi.Local(v, "").Reload(false); err != nil {
			return fmt.Errorf("%s reload: %w", v, err)
		}
	}
	return nil
}

// LargeSnapshot is the large router at one moment.
type LargeSnapshot struct {
	VCP     string
	Alive   map[string]bool // element -> alive, as the active VCP hears it
	Tables  map[string]bool // LB -> its table applied
	Routes  map[string]int  // back-end -> FIB routes
	Routes6 map[string]int
	Up      int // external ports up
}

// LookLarge reads the active VCP's and every back-end's local API.
func LookLarge() *LargeSnapshot {
	s := &LargeSnapshot{Alive: map[string]bool{}, Tables: map[string]bool{}, Routes: map[string]int{}, Routes6: map[string]int{}}
	for r := 1; r <= LargeBackends; r++ {
		name := fmt.Sprintf("r%d", r)
		if st, err := routerapi.Local(name, "").Status(); err == nil {
			s.Routes[name], s.Routes6[name] = st.Routes, st.Routes6
		}
	}
	for _, v := range VCPs {
		st, err := vcpapi.Local(v, "").Status()
		if err != nil || st.Role != "active" {
			continue
		}
		s.VCP = v
		for _, e := range st.Elements {
			s.Alive[e.Name] = e.Alive
		}
		for _, t := range st.Tables {
			s.Tables[t.LB] = t.Applied
		}
		if ports, err := vcpapi.Local(v, "").Ports(); err == nil {
			for _, pt := range ports.Ports {
				if pt.Role == "external" && pt.Up {
					s.Up++
				}
			}
		}
	}
	return s
}

// Converged says what is missing before the large router is ready: an
// active VCP, every element alive, every LB's table applied, every port
// up, and on every back-end the peers' routes, the ports' and the OSPF
// neighbours'.
func (s *LargeSnapshot) Converged(p *LargePlan) []string {
	var missing []string
	if s.VCP == "" {
		return []string{"an active VCP"}
	}
	for l := 1; l <= p.LBs; l++ {
		name := fmt.Sprintf("lb%d", l)
		if !s.Alive[name] || !s.Tables[name] {
			missing = append(missing, name)
		}
	}
	if s.Up < len(p.Ports) {
		missing = append(missing, fmt.Sprintf("ports up %d/%d", s.Up, len(p.Ports)))
	}
	want := len(p.Ports) + len(p.OSPF) + len(p.Peers)*largePeerPrefixes
	want6 := len(p.Ports) + len(p.Peers)*largePeerPrefixes
	for r := 1; r <= LargeBackends; r++ {
		name := fmt.Sprintf("r%d", r)
		if !s.Alive[name] || s.Routes[name] < want || s.Routes6[name] < want6 {
			missing = append(missing, fmt.Sprintf("%s (routes %d/%d, IPv6 %d/%d)", name, s.Routes[name], want, s.Routes6[name], want6))
		}
	}
	return missing
}

// WaitLarge waits until the large router has converged, or ctx ends.
func WaitLarge(ctx context.Context, p *LargePlan, w io.Writer) error {
	start := time.Now()
	last := ""
	for {
		missing := LookLarge().Converged(p)
		if len(missing) == 0 {
			fmt.Fprintf(w, "converged in %.1f s\n", time.Since(start).Seconds())
			return nil
		}
		if m := strings.Join(missing, ", "); m != last && time.Since(start) > 5*time.Second {
			fmt.Fprintf(w, "  waiting for %s\n", m)
			last = m
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not converged: %s", strings.Join(missing, ", "))
		case <-time.After(time.Second):
		}
	}
}

// ExecLarge runs a command in a host of the large lab.
func ExecLarge(host string, argv ...string) (string, error) { return execIn(LargeLab, host, argv) }
