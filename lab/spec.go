// Package lab builds msr's world on one machine: a topology described by
// one YAML file becomes network namespaces (hosts and switches), veth pairs
// (links) and Linux bridges (switches), with addresses, routes, neighbours,
// sysctls, per-interface settings and processes. Every namespace of lab L is
// named "msr.L.NODE", so labs coexist and `Down` removes exactly what `Up`
// made; the lab's state and its processes' logs live in RunDir/L.
//
// The file is checked completely before anything is created (Load), and a
// failure half-way through Up rolls back what was made.
package lab

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/msr-router/msr/internal/config"
)

// Spec is a lab topology file.
type Spec struct {
	Name     string                 `yaml:"name"`
	Hosts    map[string]*HostSpec   `yaml:"hosts"`
	Switches map[string]*SwitchSpec `yaml:"switches"`
	Links    []LinkSpec             `yaml:"links"`
	Pos      config.Pos             `yaml:"-"`
	// KeepGoing keeps a lab up whose processes die in their first second
	// (`msr lab up --keep-going`): State.Failed names them.
	KeepGoing bool `yaml:"-"`
}

// HostSpec is a namespace standing for one machine.
type HostSpec struct {
	Interfaces map[string]*IfaceSpec `yaml:"interfaces"`
	Routes     []RouteSpec           `yaml:"routes"`
	Neighbors  []NeighborSpec        `yaml:"neighbors"`
	Sysctls    map[string]string     `yaml:"sysctls"`
	Processes  []ProcessSpec         `yaml:"processes"`
	Pos        config.Pos            `yaml:"-"`
}

// SwitchSpec is a Linux bridge in a namespace of its own; its ports are the
// link ends attached to it, configurable like host interfaces.
type SwitchSpec struct {
	// XDP gives the bridge a fast path (bpf/xdpswitch.bpf.c): a program on
	// every port forwards a unicast frame to the port its destination was
	// learned on, as an XDP frame; the rest goes to the bridge. Every
	// port's peer must take XDP frames (an XDP program, or GRO on).
	XDP        bool                  `yaml:"xdp"`
	Interfaces map[string]*IfaceSpec `yaml:"interfaces"`
	Pos        config.Pos            `yaml:"-"`
}

// IfaceSpec is the configuration of one interface (a veth end).
type IfaceSpec struct {
	Addresses []netip.Prefix `yaml:"addresses"`
	MAC       string         `yaml:"mac"`
	MTU       int            `yaml:"mtu"`
	// VLANOffload off (the lab default is the kernel's: on) keeps 802.1Q
	// tags in the frame where XDP can see them (docs/lab.md).
	VLANOffload *bool `yaml:"vlan_offload"`
	// TxChecksum off makes the kernel fill checksums before a frame leaves,
	// as generators need.
	TxChecksum *bool `yaml:"tx_checksum"`
	GRO        *bool `yaml:"gro"`
	// Threaded NAPI moves the veth's receive work to a kernel thread that
	// may run on another core.
	Threaded *bool `yaml:"threaded"`
	// XDPPass attaches an XDP program that passes everything, so that
	// the veth receives what its peer's XDP program sends by XDP_TX or
	// XDP_REDIRECT (bpf/xdppass.bpf.c says why GRO is not enough).
	XDPPass bool `yaml:"xdp_pass"`
	// Qdisc gives the interface a root qdisc (pfifo_fast: the only one
	// this kernel has built in). A veth has none by default, and without
	// one it drops what its peer's XDP ring cannot take at once instead of
	// pushing back on the sender: a TCP sender into an XDP data path then
	// loses thousands of segments a second (measured in the default lab:
	// 27,388 retransmits in 5 s of iperf3, 61 with pfifo_fast).
	Qdisc string     `yaml:"qdisc"`
	Pos   config.Pos `yaml:"-"`
}

// RouteSpec is one static route; To is a prefix or "default".
type RouteSpec struct {
	To  string     `yaml:"to" msr:"required"`
	Via netip.Addr `yaml:"via"`
	Dev string     `yaml:"dev"`
	Pos config.Pos `yaml:"-"`
}

// NeighborSpec is a permanent ARP entry.
type NeighborSpec struct {
	IP  netip.Addr `yaml:"ip" msr:"required"`
	MAC string     `yaml:"mac" msr:"required"`
	Dev string     `yaml:"dev" msr:"required"`
	Pos config.Pos `yaml:"-"`
}

// ProcessSpec is a program started in a host once its network is up.
type ProcessSpec struct {
	Name    string     `yaml:"name" msr:"required"`
	Command []string   `yaml:"command" msr:"required"`
	Pos     config.Pos `yaml:"-"`
}

// LinkSpec joins two interfaces, each written "node:interface".
type LinkSpec struct {
	Ends []string `yaml:"ends" msr:"required"`
	// Queues gives each end that many receive and transmit queues (0 or
	// 1: one). A veth hands a frame to the peer's queue of the sending
	// CPU, so with one queue a CPU, every CPU that sends also receives, as
	// a NIC's RSS spreads its queues over the cores.
	Queues int        `yaml:"queues"`
	Pos    config.Pos `yaml:"-"`
}

// MaxQueues is the most queues a lab's link has.
const MaxQueues = 16

// Endpoint is one end of a link.
type Endpoint struct{ Node, Iface string }

// MaxIfaceName is IFNAMSIZ-1: the kernel refuses longer interface names.
const MaxIfaceName = 15

var (
	labNameRE  = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)
	nodeNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)
	ifaceRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	macRE      = regexp.MustCompile(`^[0-9a-f]{2}(:[0-9a-f]{2}){5}$`)
	sysctlRE   = regexp.MustCompile(`^net\.[a-z0-9_.-]+$`)
	procNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
)

// LoadFile reads and checks a lab file.
func LoadFile(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read lab file: %w", err)
	}
	return Load(path, data)
}

// Load parses and checks a lab file's contents; file names it in errors
// and, when the file has no name:, gives the lab its name.
func Load(file string, data []byte) (*Spec, error) {
	s := &Spec{}
	if err := config.Decode(file, data, s); err != nil {
		return nil, err
	}
	if s.Name == "" {
		s.Name = strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	return s, nil
}

// check finds everything that would make Up fail or build the wrong thing.
func (s *Spec) check() error {
	if !labNameRE.MatchString(s.Name) {
		return s.Pos.Errorf("lab name %q: use 1-32 lowercase letters, digits and dashes", s.Name)
	}
	if len(s.Hosts)+len(s.Switches) == 0 {
		return s.Pos.Errorf("a lab needs at least one host")
	}
	for _, name := range sortedKeys(s.Switches) {
		sw := s.Switches[name]
		if err := checkNodeName(name, sw.Pos); err != nil {
			return err
		}
		if _, dup := s.Hosts[name]; dup {
			return sw.Pos.Errorf("switch %q has the name of a host", name)
		}
		if len(name) > MaxIfaceName {
			return sw.Pos.Errorf("switch %q: the bridge is named after it, at most %d characters", name, MaxIfaceName)
		}
		for ifname, ifc := range sw.Interfaces {
			if err := checkIface(ifname, ifc); err != nil {
				return err
			}
			if len(ifc.Addresses) > 0 {
				return ifc.Pos.Errorf("switch port %s:%s cannot have addresses", name, ifname)
			}
			if sw.XDP && ifc.XDPPass {
				return ifc.Pos.Errorf("switch port %s:%s: xdp_pass and the switch's xdp both attach a program; the switch's is enough", name, ifname)
			}
		}
	}
	addrs := map[netip.Addr]config.Pos{}
	for _, name := range sortedKeys(s.Hosts) {
		if err := s.Hosts[name].check(name, addrs); err != nil {
			return err
		}
	}
	return s.checkLinks()
}

func checkNodeName(name string, pos config.Pos) error {
	if !nodeNameRE.MatchString(name) {
		return pos.Errorf("name %q: use 1-32 lowercase letters, digits and dashes", name)
	}
	return nil
}

func checkIface(name string, ifc *IfaceSpec) error {
	switch {
	case len(name) > MaxIfaceName:
		return ifc.Pos.Errorf("interface name %q is %d characters, the kernel allows %d", name, len(name), MaxIfaceName)
	case !ifaceRE.MatchString(name) || name == "lo":
		return ifc.Pos.Errorf("interface name %q: use letters, digits, '_', '.', '-'; not lo", name)
	case ifc.MAC != "" && !macRE.MatchString(ifc.MAC):
		return ifc.Pos.Errorf("interface %s: MAC %q is not of the form 02:00:00:00:00:01", name, ifc.MAC)
	case ifc.Threaded != nil && *ifc.Threaded && (ifc.GRO == nil || !*ifc.GRO):
		// A veth has NAPI only with GRO or XDP; the kernel refuses
		// threaded NAPI without it.
		return ifc.Pos.Errorf("interface %s: threaded NAPI needs gro: on", name)
	case ifc.MTU != 0 && (ifc.MTU < 68 || ifc.MTU > 65535):
		return ifc.Pos.Errorf("interface %s: MTU %d outside 68-65535", name, ifc.MTU)
	}
	return nil
}

func (h *HostSpec) check(name string, addrs map[netip.Addr]config.Pos) error {
	if err := checkNodeName(name, h.Pos); err != nil {
		return err
	}
	for _, ifname := range sortedKeys(h.Interfaces) {
		ifc := h.Interfaces[ifname]
		if err := checkIface(ifname, ifc); err != nil {
			return err
		}
		for _, p := range ifc.Addresses {
			if !p.Addr().Is4() && (!p.Addr().Is6() || p.Addr().Is4In6() || p.Addr().IsMulticast()) {
				return ifc.Pos.Errorf("%s:%s: address %s is neither IPv4 nor a unicast IPv6 address", name, ifname, p)
			}
			if prev, clash := addrs[p.Addr()]; clash {
				return ifc.Pos.Errorf("%s:%s: address %s is already used at %s", name, ifname, p.Addr(), prev)
			}
			addrs[p.Addr()] = ifc.Pos
		}
	}
	for _, r := range h.Routes {
		if r.To != "default" {
			if _, err := netip.ParsePrefix(r.To); err != nil {
				return r.Pos.Errorf("route to %q: not a prefix such as 10.0.0.0/8, nor default", r.To)
			}
		}
		if !r.Via.IsValid() && r.Dev == "" {
			return r.Pos.Errorf("route to %s needs via or dev", r.To)
		}
		if r.Dev != "" && h.Interfaces[r.Dev] == nil {
			return r.Pos.Errorf("route to %s: host %s has no interface %q", r.To, name, r.Dev)
		}
	}
	for _, n := range h.Neighbors {
		if !macRE.MatchString(n.MAC) || h.Interfaces[n.Dev] == nil {
			return n.Pos.Errorf("neighbor %s: needs a MAC like 02:00:00:00:00:01 and an interface of host %s", n.IP, name)
		}
	}
	for k := range h.Sysctls {
		if !sysctlRE.MatchString(k) {
			return h.Pos.Errorf("host %s: sysctl %q: only net.* sysctls belong to a network namespace", name, k)
		}
	}
	seen := map[string]bool{}
	for _, p := range h.Processes {
		if !procNameRE.MatchString(p.Name) || seen[p.Name] {
			return p.Pos.Errorf("process %q of host %s: names are unique, lowercase letters, digits, '-', '_'", p.Name, name)
		}
		seen[p.Name] = true
		if len(p.Command) == 0 {
			return p.Pos.Errorf("process %s of host %s: empty command", p.Name, name)
		}
		for _, arg := range p.Command {
			if strings.Contains(arg, "MSR_BIN") || strings.Contains(arg, "MSR_RUN") {
				return p.Pos.Errorf("process %s of host %s: %q is a placeholder that msr demo fills (this file is its template): run msr demo up", p.Name, name, arg)
			}
		}
	}
	return nil
}

// iface returns the settings of node:ifname, if the file gives any.
func (s *Spec) iface(e Endpoint) *IfaceSpec {
	if h := s.Hosts[e.Node]; h != nil {
		return h.Interfaces[e.Iface]
	}
	if sw := s.Switches[e.Node]; sw != nil {
		return sw.Interfaces[e.Iface]
	}
	return nil
}

func (s *Spec) checkLinks() error {
	used := map[Endpoint]config.Pos{}
	for _, l := range s.Links {
		if len(l.Ends) != 2 {
			return l.Pos.Errorf("a link has exactly two ends, not %d", len(l.Ends))
		}
		if l.Queues < 0 || l.Queues > MaxQueues {
			return l.Pos.Errorf("a link has 1 to %d queues, not %d", MaxQueues, l.Queues)
		}
		for _, end := range l.Ends {
			e, err := ParseEndpoint(end)
			if err != nil {
				return l.Pos.Errorf("%v", err)
			}
			if s.Hosts[e.Node] == nil && s.Switches[e.Node] == nil {
				return l.Pos.Errorf("link end %q: no host or switch %q", end, e.Node)
			}
			if len(e.Iface) > MaxIfaceName || !ifaceRE.MatchString(e.Iface) || e.Iface == "lo" {
				return l.Pos.Errorf("link end %q: interface names are at most %d letters, digits, '_', '.', '-'", end, MaxIfaceName)
			}
			if _, ok := s.Switches[e.Node]; ok && e.Iface == e.Node {
				return l.Pos.Errorf("link end %q: the bridge of switch %s has that name", end, e.Node)
			}
			if prev, dup := used[e]; dup {
				return l.Pos.Errorf("interface %s is already linked at %s", end, prev)
			}
			used[e] = l.Pos
		}
	}
	for _, name := range sortedKeys(s.Hosts) {
		for ifname, ifc := range s.Hosts[name].Interfaces {
			if _, ok := used[Endpoint{name, ifname}]; !ok {
				return ifc.Pos.Errorf("interface %s:%s is not the end of any link", name, ifname)
			}
		}
	}
	for _, name := range sortedKeys(s.Switches) {
		for ifname, ifc := range s.Switches[name].Interfaces {
			if _, ok := used[Endpoint{name, ifname}]; !ok {
				return ifc.Pos.Errorf("interface %s:%s is not the end of any link", name, ifname)
			}
		}
	}
	return nil
}

// ParseEndpoint splits "node:iface".
func ParseEndpoint(s string) (Endpoint, error) {
	node, iface, ok := strings.Cut(s, ":")
	if !ok || node == "" || iface == "" {
		return Endpoint{}, fmt.Errorf("link end %q is not of the form node:interface", s)
	}
	return Endpoint{node, iface}, nil
}

// Namespace returns the network namespace of node in lab name.
// Names have no dots, so "msr.LAB.NODE" is unambiguous where dashes would
// not be (lab "a" node "b-c" against lab "a-b" node "c").
func Namespace(lab, node string) string { return "msr." + lab + "." + node }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Peer returns the other end of the link that e is an end of.
func (s *Spec) Peer(e Endpoint) (Endpoint, bool) {
	for _, l := range s.Links {
		a, _ := ParseEndpoint(l.Ends[0])
		z, _ := ParseEndpoint(l.Ends[1])
		switch e {
		case a:
			return z, true
		case z:
			return a, true
		}
	}
	return Endpoint{}, false
}

// MAC returns the MAC address the file gives interface e, if any.
func (s *Spec) MAC(e Endpoint) (net.HardwareAddr, bool) {
	ifc := s.iface(e)
	if ifc == nil || ifc.MAC == "" {
		return nil, false
	}
	mac, err := net.ParseMAC(ifc.MAC)
	return mac, err == nil
}
