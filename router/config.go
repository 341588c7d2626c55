package router

import (
	"fmt"
	"net/netip"
	"sort"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/acl"
	"github.com/msr-router/msr/internal/config"
	"github.com/msr-router/msr/internal/element"
)

// FileConfig is `msr router --config FILE.yaml` as written: a back-end's
// ports, static routes and ACL, for setups without a VCP. LoadConfig
// parses it once into the AgentConfig the agent runs.
type FileConfig struct {
	element.Config `yaml:",inline"`
	// Interface is the back-end's port on the interconnect.
	Interface string `yaml:"interface" msr:"required" was:"internal"`
	// CapacityMbps is announced in hellos: the VCP's basis for weights.
	CapacityMbps uint32 `yaml:"capacity_mbps"`
	// CapacityPPS caps the frames the back-end routes a second
	// (bpf/cap.h): a slower machine, for the scale benchmarks. 0: no cap.
	CapacityPPS uint64 `yaml:"capacity_pps"`
	PinDir      string `yaml:"pin_dir"`
	// FIB6Lines sizes the IPv6 FIB's pool of 64-byte lines (allocated at
	// start): default 262,144 (16 MiB); a full table of today takes about
	// one line a prefix (docs/router.md).
	FIB6Lines int `yaml:"fib6_lines"`
	// MaxPorts sizes the maps of the router's external ports: default
	// 1,024, at most 4,094 (one per VLAN id). A VCP's BACKEND_CONFIG with
	// more is refused and counted (configs_refused).
	MaxPorts int `yaml:"max_ports"`
	// Ports are the router's external ports; none: the VCP's (its
	// BACKEND_CONFIG), a back-end's file then holding only its identity.
	Ports  map[string]*PortConfig `yaml:"ports"`
	Routes []RouteConfig          `yaml:"routes"`
	// RouteFiles load many routes at once: every prefix of a pyasn-format
	// file (such as a RouteViews snapshot), via the file's gateways.
	RouteFiles      []RouteFileConfig `yaml:"route_files"`
	ACL             []ACLConfig       `yaml:"acl"`
	RouterAddresses []netip.Addr      `yaml:"router_addresses"`
	// RIB is the iBGP session with the VCP that feeds the FIB (none:
	// static routes only).
	RIB *RIBConfig `yaml:"rib"`
	// ICMPRate and ICMPBurst bound the ICMP errors the router sends a
	// second, each kind apart, shared among its back-ends (icmprate.go;
	// RFC 1812 §4.3.2.8).
	ICMPRate  int `yaml:"icmp_rate"`
	ICMPBurst int `yaml:"icmp_burst"`
	// Infrastructure is the router's inside beyond this host's own
	// prefixes (element.HostInfra): this host's addresses take no other
	// source (infra_dropped).
	Infrastructure []element.InfraPrefix `yaml:"infrastructure"`
	// SlowPath overrides the slow path's rates, by reason (slowrates.go).
	SlowPath map[string]*SlowRate `yaml:"slow_path"`
	Warnings config.Warnings      `yaml:"-"`
	Pos      config.Pos           `yaml:"-"`
}

// AgentConfig is a back-end's configuration as its agent runs it: the
// file parsed and checked once, every value in its own type.
type AgentConfig struct {
	element.Config
	Interface    string
	CapacityMbps uint32
	CapacityPPS  uint64 // 0: no cap
	PinDir       string
	FIB6Lines    int
	MaxPorts     int
	Ports        []PortSpec // by name: a port's index is its place here
	Routes       []RouteConfig
	RouteFiles   []RouteFileConfig
	ACL          []ACLRule
	// RouterAddresses are more of the router's own addresses (the
	// management address): the slow path answers them.
	RouterAddresses []netip.Addr
	RIB             *RIBConfig
	ICMPRate        int
	ICMPBurst       int
	Infrastructure  []element.InfraPrefix
	SlowRates       [len(SlowNames)]SlowRate
	// Warnings are the file's deprecated keys, for the agent to log.
	Warnings config.Warnings
}

// PortSpec is one external port of the router, as the back-end serves it.
type PortSpec struct {
	Name     string
	VLAN     uint16
	Address  netip.Prefix
	Address6 netip.Prefix // none: the port has no global IPv6 address
	MTU      uint16
	// URPF is the port's unicast RPF (RFC 3704): what its LB balances
	// from it arrives tagged with its VLAN and is checked by the data path.
	URPF dist.URPFMode
	// Down: the VCP has the port down (its link, or its LB dead). It
	// keeps its index and addresses, not its connected routes.
	Down bool `json:",omitempty"`
}

// PortConfig is one external port of the router, mirrored on the back-end.
type PortConfig struct {
	VLAN    uint16       `yaml:"vlan" msr:"required"`
	Address netip.Prefix `yaml:"address" msr:"required"`
	// Address6 is its IPv6 address and subnet (dual stack).
	Address6 netip.Prefix `yaml:"address6"`
	MTU      uint16       `yaml:"mtu"`
	// URPF is off, loose or strict (RFC 3704; docs/operations.md,
	// "Hardening"); what the VCP sends takes its place.
	URPF string     `yaml:"urpf"`
	Pos  config.Pos `yaml:"-"`
}

// RouteConfig is a static route: to a prefix via one gateway or several
// (ECMP).
type RouteConfig struct {
	To  netip.Prefix `yaml:"to" msr:"required"`
	Via []netip.Addr `yaml:"via" msr:"required"`
	Pos config.Pos   `yaml:"-"`
}

// RouteFileConfig is a file of prefixes routed via the same gateways.
type RouteFileConfig struct {
	File string       `yaml:"file" msr:"required"`
	Via  []netip.Addr `yaml:"via" msr:"required"`
	Pos  config.Pos   `yaml:"-"`
}

// ACLConfig is one rule; rules apply in order, the first match decides.
type ACLConfig = acl.Config

// LoadConfig reads, checks and parses a router config file.
func LoadConfig(path string) (*AgentConfig, error) {
	return config.Load[AgentConfig, FileConfig](path)
}

// Parse fills defaults, checks what decoding cannot, and returns the
// configuration the agent runs.
func (c *FileConfig) Parse() (*AgentConfig, error) {
	if err := c.complete(); err != nil {
		return nil, err
	}
	a := &AgentConfig{Config: c.Config, Interface: c.Interface, CapacityMbps: c.CapacityMbps, CapacityPPS: c.CapacityPPS, PinDir: c.PinDir,
		FIB6Lines: c.FIB6Lines, MaxPorts: c.MaxPorts, Routes: c.Routes, RouteFiles: c.RouteFiles, RouterAddresses: c.RouterAddresses, RIB: c.RIB, ICMPRate: c.ICMPRate, ICMPBurst: c.ICMPBurst,
		Infrastructure: c.Infrastructure, Warnings: c.Warnings}
	if _, err := element.Inside(c.Infrastructure, nil, c.Pos); err != nil {
		return nil, err
	}
	var err error
	if a.SlowRates, err = parseSlowRates(c.SlowPath, c.Pos); err != nil {
		return nil, err
	}
	for _, name := range c.PortNames() {
		p := c.Ports[name]
		mode, err := dist.ParseURPF(p.URPF)
		if err != nil {
			return nil, p.Pos.Errorf("port %s: %v", name, err)
		}
		a.Ports = append(a.Ports, PortSpec{Name: name, VLAN: p.VLAN, Address: p.Address, Address6: p.Address6, MTU: p.MTU, URPF: mode})
	}
	rules, err := acl.Parse(c.ACL, MaxACL, c.Pos)
	if err != nil {
		return nil, err
	}
	for _, r := range rules {
		a.ACL = append(a.ACL, aclRule(r))
	}
	return a, nil
}

func (c *FileConfig) complete() error {
	if err := c.Config.Complete("router", c.Pos); err != nil {
		return err
	}
	if c.CapacityMbps == 0 {
		c.CapacityMbps = 1000
	}
	if err := element.CheckCapacity(c.CapacityPPS, c.Pos); err != nil {
		return err
	}
	if c.ICMPRate == 0 {
		c.ICMPRate = DefaultICMPRate
	}
	if c.ICMPBurst == 0 {
		c.ICMPBurst = DefaultICMPBurst
	}
	if c.ICMPRate < 0 || c.ICMPBurst < 0 {
		return c.Pos.Errorf("icmp_rate %d, icmp_burst %d: at least 1 (0: the default)", c.ICMPRate, c.ICMPBurst)
	}
	if c.PinDir == "" {
		c.PinDir = "/sys/fs/bpf/msr/router-" + c.Name
	}
	if c.FIB6Lines == 0 {
		c.FIB6Lines = DefaultFIB6Lines
	}
	if c.FIB6Lines < 1024 || c.FIB6Lines > 16<<20 {
		return c.Pos.Errorf("fib6_lines %d: 1024 to %d", c.FIB6Lines, 16<<20)
	}
	if c.MaxPorts == 0 {
		c.MaxPorts = DefaultPorts
	}
	if c.MaxPorts < 1 || c.MaxPorts > MaxPorts {
		return c.Pos.Errorf("max_ports %d: 1 to %d", c.MaxPorts, MaxPorts)
	}
	if len(c.Ports) > c.MaxPorts {
		return c.Pos.Errorf("%d ports, more than max_ports (%d)", len(c.Ports), c.MaxPorts)
	}
	vlans := map[uint16]string{}
	for _, name := range c.PortNames() {
		p := c.Ports[name]
		if p.VLAN == 0 || p.VLAN > 4094 || !p.Address.Addr().Is4() {
			return p.Pos.Errorf("port %s needs a VLAN id 1-4094 and an IPv4 address", name)
		}
		if other, dup := vlans[p.VLAN]; dup {
			return p.Pos.Errorf("port %s: VLAN %d is already port %s's", name, p.VLAN, other)
		}
		vlans[p.VLAN] = name
		if p.MTU == 0 {
			p.MTU = 1500
		}
		if p.MTU < 576 {
			return p.Pos.Errorf("port %s: MTU %d below IPv4's 576", name, p.MTU)
		}
		if p.Address6.IsValid() {
			if !p.Address6.Addr().Is6() || p.Address6.Addr().Is4In6() || p.Address6.Addr().IsLinkLocalUnicast() || p.Address6.Addr().IsMulticast() {
				return p.Pos.Errorf("port %s: address6 %s is not a global IPv6 address", name, p.Address6)
			}
			if p.MTU < 1280 {
				return p.Pos.Errorf("port %s: MTU %d below IPv6's 1280 (RFC 8200 §5)", name, p.MTU)
			}
		}
	}
	for _, r := range c.Routes {
		for _, gw := range r.Via {
			if gw.Is6() != r.To.Addr().Is6() {
				return r.Pos.Errorf("route to %s: gateway %s is of the other address family", r.To, gw)
			}
		}
		if err := c.checkVia(r.Via); err != nil {
			return r.Pos.Errorf("route to %s: %v", r.To, err)
		}
	}
	for _, f := range c.RouteFiles {
		if err := c.checkVia(f.Via); err != nil {
			return f.Pos.Errorf("route file %s: %v", f.File, err)
		}
	}
	if c.RIB != nil && c.RIB.ASN == 0 {
		return c.Pos.Errorf("rib: asn 0 is reserved")
	}
	return nil
}

// checkVia checks a route's gateways: 1 to ECMPMax, each on a port's
// subnet.
func (c *FileConfig) checkVia(via []netip.Addr) error {
	if len(via) == 0 || len(via) > ECMPMax {
		return fmt.Errorf("1 to %d gateways", ECMPMax)
	}
	for _, gw := range via {
		if _, ok := c.portFor(gw); !ok {
			return fmt.Errorf("gateway %s is on no port's subnet", gw)
		}
	}
	return nil
}

// PortNames lists the ports in a fixed order (their indices).
func (c *FileConfig) PortNames() []string {
	names := make([]string, 0, len(c.Ports))
	for n := range c.Ports {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// portFor finds the port whose subnet holds a.
func (c *FileConfig) portFor(a netip.Addr) (uint16, bool) {
	for i, name := range c.PortNames() {
		p := c.Ports[name]
		if p.Address.Masked().Contains(a) || p.Address6.IsValid() && p.Address6.Masked().Contains(a) {
			return uint16(i), true
		}
	}
	return 0, false
}

// wire is r as DIST and the console write it.
func (r ACLRule) wire() dist.ACLRule {
	return dist.ACLRule{Src: r.Src, Dst: r.Dst, Proto: r.Proto, Deny: r.Deny, SportLo: r.SportLo, SportHi: r.SportHi, DportLo: r.DportLo, DportHi: r.DportHi}
}

// aclRule is a rule of the file's ACL as the data path takes it.
func aclRule(r dist.ACLRule) ACLRule {
	return ACLRule{Src: r.Src, Dst: r.Dst, Proto: r.Proto, Deny: r.Deny, SportLo: r.SportLo, SportHi: r.SportHi, DportLo: r.DportLo, DportHi: r.DportHi}
}
