package router

import (
	"fmt"
	"net/netip"
	"sort"

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
	CapacityPPS uint64                 `yaml:"capacity_pps"`
	PinDir      string                 `yaml:"pin_dir"`
	Ports       map[string]*PortConfig `yaml:"ports" msr:"required"`
	Routes      []RouteConfig          `yaml:"routes"`
	// RouteFiles load many routes at once: every prefix of a pyasn-format
	// file (such as a RouteViews snapshot), via the file's gateways.
	RouteFiles      []RouteFileConfig `yaml:"route_files"`
	ACL             []ACLConfig       `yaml:"acl"`
	RouterAddresses []netip.Addr      `yaml:"router_addresses"`
	// RIB is the iBGP session with the VCP that feeds the FIB (none:
	// static routes only).
	RIB *RIBConfig `yaml:"rib"`
	// ICMPRate bounds the ICMP errors sent per second (RFC 1812 §4.3.2.8).
	ICMPRate int             `yaml:"icmp_rate"`
	Warnings config.Warnings `yaml:"-"`
	Pos      config.Pos      `yaml:"-"`
}

// AgentConfig is a back-end's configuration as its agent runs it: the
// file parsed and checked once, every value in its own type.
type AgentConfig struct {
	element.Config
	Interface    string
	CapacityMbps uint32
	CapacityPPS  uint64 // 0: no cap
	PinDir       string
	Ports        []PortSpec // by name: a port's index is its place here
	Routes       []RouteConfig
	RouteFiles   []RouteFileConfig
	ACL          []ACLRule
	// RouterAddresses are more of the router's own addresses (the
	// management address): the slow path answers them.
	RouterAddresses []netip.Addr
	RIB             *RIBConfig
	ICMPRate        int
	// Warnings are the file's deprecated keys, for the agent to log.
	Warnings config.Warnings
}

// PortSpec is one external port of the router, as the back-end serves it.
type PortSpec struct {
	Name    string
	VLAN    uint16
	Address netip.Prefix
	MTU     uint16
}

// PortConfig is one external port of the router, mirrored on the back-end.
type PortConfig struct {
	VLAN    uint16       `yaml:"vlan" msr:"required"`
	Address netip.Prefix `yaml:"address" msr:"required"`
	MTU     uint16       `yaml:"mtu"`
	Pos     config.Pos   `yaml:"-"`
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
type ACLConfig struct {
	Action string       `yaml:"action" msr:"required"` // permit or deny
	Src    netip.Prefix `yaml:"src"`
	Dst    netip.Prefix `yaml:"dst"`
	Proto  string       `yaml:"proto"` // tcp, udp, icmp, or a number
	Sport  string       `yaml:"sport"` // N or N-M
	Dport  string       `yaml:"dport"`
	Pos    config.Pos   `yaml:"-"`
}

// LoadConfig reads, checks and parses a router config file.
func LoadConfig(path string) (*AgentConfig, error) {
	c := &FileConfig{}
	if err := config.DecodeFile(path, c); err != nil {
		return nil, err
	}
	return c.Parse()
}

// Parse fills defaults, checks what decoding cannot, and returns the
// configuration the agent runs.
func (c *FileConfig) Parse() (*AgentConfig, error) {
	if err := c.complete(); err != nil {
		return nil, err
	}
	a := &AgentConfig{Config: c.Config, Interface: c.Interface, CapacityMbps: c.CapacityMbps, CapacityPPS: c.CapacityPPS, PinDir: c.PinDir,
		Routes: c.Routes, RouteFiles: c.RouteFiles, RouterAddresses: c.RouterAddresses, RIB: c.RIB, ICMPRate: c.ICMPRate, Warnings: c.Warnings}
	for _, name := range c.PortNames() {
		p := c.Ports[name]
		a.Ports = append(a.Ports, PortSpec{Name: name, VLAN: p.VLAN, Address: p.Address, MTU: p.MTU})
	}
	for _, acl := range c.ACL {
		r, err := acl.rule()
		if err != nil {
			return nil, acl.Pos.Errorf("ACL rule: %v", err)
		}
		a.ACL = append(a.ACL, r)
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
		c.ICMPRate = 100
	}
	if c.PinDir == "" {
		c.PinDir = "/sys/fs/bpf/msr/router-" + c.Name
	}
	if len(c.Ports) > MaxPorts {
		return c.Pos.Errorf("%d ports, at most %d", len(c.Ports), MaxPorts)
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
	}
	for _, r := range c.Routes {
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
	if len(c.ACL) > MaxACL {
		return c.Pos.Errorf("%d ACL rules, at most %d", len(c.ACL), MaxACL)
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
		if c.Ports[name].Address.Masked().Contains(a) {
			return uint16(i), true
		}
	}
	return 0, false
}

func (a ACLConfig) rule() (ACLRule, error) {
	r := ACLRule{Src: a.Src, Dst: a.Dst, SportHi: 65535, DportHi: 65535}
	switch a.Action {
	case "deny":
		r.Deny = true
	case "permit":
	default:
		return r, fmt.Errorf("action %q: permit or deny", a.Action)
	}
	switch a.Proto {
	case "", "any":
	case "tcp":
		r.Proto = 6
	case "udp":
		r.Proto = 17
	case "icmp":
		r.Proto = 1
	default:
		var n int
		if _, err := fmt.Sscanf(a.Proto, "%d", &n); err != nil || n < 1 || n > 255 || fmt.Sprint(n) != a.Proto {
			return r, fmt.Errorf("proto %q: tcp, udp, icmp or 1-255", a.Proto)
		}
		r.Proto = uint8(n)
	}
	var err error
	if r.SportLo, r.SportHi, err = portRange(a.Sport); err != nil {
		return r, err
	}
	if r.DportLo, r.DportHi, err = portRange(a.Dport); err != nil {
		return r, err
	}
	if (a.Sport != "" || a.Dport != "") && r.Proto != 6 && r.Proto != 17 {
		return r, fmt.Errorf("ports need proto tcp or udp")
	}
	return r, nil
}

func portRange(s string) (uint16, uint16, error) {
	if s == "" {
		return 0, 65535, nil
	}
	var lo, hi int
	if n, _ := fmt.Sscanf(s, "%d-%d", &lo, &hi); n == 2 && lo <= hi && hi <= 65535 && lo >= 0 && fmt.Sprintf("%d-%d", lo, hi) == s {
		return uint16(lo), uint16(hi), nil
	}
	if n, _ := fmt.Sscanf(s, "%d", &lo); n == 1 && lo >= 0 && lo <= 65535 && fmt.Sprint(lo) == s {
		return uint16(lo), uint16(lo), nil
	}
	return 0, 0, fmt.Errorf("port %q: N or N-M, 0-65535", s)
}
