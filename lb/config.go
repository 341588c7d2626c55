package lb

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/config"
	"github.com/msr-router/msr/internal/element"
	"github.com/msr-router/msr/internal/sflow"
)

// FileConfig is `msr lb --config FILE.yaml` as written: everything an LB
// needs without a VCP, and what it needs to find one. LoadConfig parses it
// once into the AgentConfig the agent runs.
type FileConfig struct {
	element.Config `yaml:",inline"`
	// PinDir keeps maps and links across restarts of the agent.
	PinDir string `yaml:"pin_dir"`
	Mode   string `yaml:"mode"`
	// FlowletGap ends a flowlet in flowlet mode: a flow whose packets
	// pause longer may move to another back-end. "auto" (the default):
	// a few times the measured spread of the paths through the back-ends
	// (pathprobe.go).
	FlowletGap      GapSetting             `yaml:"flowlet_gap"`
	Ports           map[string]*PortConfig `yaml:"ports" msr:"required"`
	Backends        []BackendConfig        `yaml:"backends"`
	VCPMAC          string                 `yaml:"vcp_mac"`
	RouterAddresses []netip.Addr           `yaml:"router_addresses"`
	ManagementAddr  netip.Addr             `yaml:"management_address"`
	// CapacityPPS caps the frames the LB balances a second (bpf/cap.h):
	// a slower machine, for the scale benchmarks. 0: no cap.
	CapacityPPS uint64 `yaml:"capacity_pps"`
	// Police overrides control-plane policing's rates, by class
	// (police.go: bgp, igp, bfd, mgmt, icmp, local).
	Police map[string]*PoliceRate `yaml:"police"`
	// FlowLabel balances IPv6 on the addresses and the flow label, where
	// a packet's is not zero, in place of its ports (RFC 6438): for
	// senders that label their flows, it spreads tunnelled and fragmented
	// traffic too.
	FlowLabel bool `yaml:"flow_label"`
	// Infrastructure is the router's inside beyond this host's own
	// prefixes (element.HostInfra): a frame from outside to or from it is
	// dropped (infra_dropped).
	Infrastructure []element.InfraPrefix `yaml:"infrastructure"`
	// SFlow exports sFlow v5 from the external ports (sflow.go).
	SFlow    *SFlowFileConfig `yaml:"sflow"`
	Warnings config.Warnings  `yaml:"-"`
	Pos      config.Pos       `yaml:"-"`
}

// SFlowFileConfig is the LB's sFlow export as written (sub_agent: default
// the LB's id).
type SFlowFileConfig = sflow.FileConfig

// PortConfig is one port in the file.
type PortConfig struct {
	// Role is external, internal, or auto (learned from DIST traffic).
	Role    string       `yaml:"role" msr:"required"`
	Address netip.Prefix `yaml:"address"`
	// Address6 is an external port's global IPv6 address: Ext NDP
	// answers for it and for the port's link-local address.
	Address6     netip.Prefix `yaml:"address6"`
	VLAN         uint16       `yaml:"vlan"`
	Default      bool         `yaml:"default"`
	CapacityMbps uint32       `yaml:"capacity_mbps" was:"speed_mbps"`
	// CapacityPPS caps the frames balanced out of an internal port a
	// second, as a DTX-n back-NIC is a bottleneck of its own.
	CapacityPPS uint64 `yaml:"capacity_pps"`
	// SFlowRate is an external port's sampling rate, 1 in N (0: off),
	// instead of sflow's sampling_rate.
	SFlowRate *uint32    `yaml:"sflow_rate"`
	Pos       config.Pos `yaml:"-"`
}

// BackendConfig is a statically known back-end. It is balanced to only
// while its hellos arrive.
type BackendConfig struct {
	MAC    string `yaml:"mac" msr:"required"`
	Weight uint16 `yaml:"weight"`
	// Ports are the internal ports it is reached through (default: all).
	Ports []string   `yaml:"ports"`
	Pos   config.Pos `yaml:"-"`
}

// AgentConfig is an LB's configuration as its agent runs it: the file
// parsed and checked once, every value in its own type.
type AgentConfig struct {
	element.Config
	PinDir          string
	Mode            Mode
	FlowletGap      time.Duration // 0: measured (auto)
	Ports           []PortSpec    // by name: a port's index is its place here
	Backends        []StaticBackend
	VCPMAC          net.HardwareAddr // nil: learned from the VCP's announcements
	RouterAddresses []netip.Addr
	ManagementAddr  netip.Addr
	CapacityPPS     uint64 // 0: no cap
	Police          [PoliceClasses]PoliceRate
	FlowLabel       bool
	Infrastructure  []element.InfraPrefix
	SFlow           *SFlowConfig // nil: no export
	// Warnings are the file's deprecated keys, for the agent to log.
	Warnings config.Warnings
}

// PortSpec is one port.
type PortSpec struct {
	Name         string
	Role         uint8 // RoleExternal, RoleInternal, RoleUnknown (auto)
	Auto         bool  // the role is learned from DIST traffic
	Address      netip.Prefix
	Address6     netip.Prefix // external ports; invalid: none
	VLAN         uint16
	Default      bool
	CapacityMbps uint32
	CapacityPPS  uint64 // internal ports; 0: no cap
	SFlowRate    uint32 // external ports: 1 in N frames sampled; 0: none
}

// SFlowConfig is the LB's sFlow export (SFlowFileConfig, checked and
// completed).
type SFlowConfig struct {
	Collectors      []netip.AddrPort
	AgentAddress    netip.Addr
	SubAgent        uint32
	CounterInterval time.Duration
	IPFIX           *sflow.IPFIXConfig // nil: none
}

// sFlow's defaults (internal/sflow).
const (
	DefaultSFlowRate            = sflow.DefaultRate
	DefaultSFlowCounterInterval = sflow.DefaultCounterInterval
)

// StaticBackend is a back-end the file names.
type StaticBackend struct {
	MAC    net.HardwareAddr
	Weight uint16
	Ports  []string // internal ports it is reached through; none: all
}

// Defaults.
const (
	DefaultHelloInterval  = element.DefaultHelloInterval
	DefaultHoldMultiplier = element.DefaultHoldMultiplier
	// DefaultFlowletGap is the gap before the paths are measured, and
	// the model's: a few times the spread of the LB-to-back-end path's
	// latency in the bench labs (p99 − p50 of bench rfc2544's latencies at
	// half of NDR, a few hundred microseconds). CONGA (SIGCOMM 2014) uses
	// 500 µs in a data centre. With flowlet_gap auto the LB measures the
	// spread itself and follows it (pathprobe.go).
	DefaultFlowletGap = time.Millisecond
)

// GapSetting is flowlet_gap as written: auto (0: measured) or a duration
// of 1µs to MaxFlowletGap.
type GapSetting time.Duration

func (g *GapSetting) UnmarshalText(b []byte) error {
	if string(b) == "auto" {
		*g = 0
		return nil
	}
	d, err := time.ParseDuration(string(b))
	if err != nil || d < time.Microsecond || d > MaxFlowletGap {
		return fmt.Errorf("%q: auto, or a duration of 1µs to %v", b, MaxFlowletGap)
	}
	*g = GapSetting(d)
	return nil
}

// LoadConfig reads, checks and parses an LB config file.
func LoadConfig(path string) (*AgentConfig, error) {
	return config.Load[AgentConfig, FileConfig](path)
}

// Parse fills defaults, checks what decoding cannot, and returns the
// configuration the agent runs.
func (c *FileConfig) Parse() (*AgentConfig, error) {
	if err := c.Config.Complete("lb", c.Pos); err != nil {
		return nil, err
	}
	if c.Mode == "" {
		c.Mode = "wrr"
	}
	if c.PinDir == "" {
		c.PinDir = "/sys/fs/bpf/msr/lb-" + c.Name
	}
	mode, err := ParseMode(c.Mode)
	if err != nil {
		return nil, c.Pos.Errorf("%v", err)
	}
	if err := element.CheckCapacity(c.CapacityPPS, c.Pos); err != nil {
		return nil, err
	}
	if len(c.Ports) > MaxPorts {
		return nil, c.Pos.Errorf("%d ports, at most %d", len(c.Ports), MaxPorts)
	}
	a := &AgentConfig{Config: c.Config, PinDir: c.PinDir, Mode: mode, FlowletGap: time.Duration(c.FlowletGap), RouterAddresses: c.RouterAddresses,
		ManagementAddr: c.ManagementAddr, CapacityPPS: c.CapacityPPS, FlowLabel: c.FlowLabel, Infrastructure: c.Infrastructure,
		Warnings: c.Warnings}
	for _, r := range c.RouterAddresses {
		if !r.IsValid() || r.IsUnspecified() || r.IsMulticast() || r.Is4In6() || r.Zone() != "" {
			return nil, c.Pos.Errorf("router_addresses: %s is no unicast address of the router", r)
		}
	}
	if c.ManagementAddr.IsValid() && !c.ManagementAddr.Is4() {
		return nil, c.Pos.Errorf("management_address %s: the management network is IPv4", c.ManagementAddr)
	}
	if a.Ports, err = c.parsePorts(); err != nil {
		return nil, err
	}
	if _, err := element.Inside(c.Infrastructure, nil, c.Pos); err != nil {
		return nil, err
	}
	for _, in := range c.Infrastructure {
		for _, p := range a.Ports {
			for _, ext := range []netip.Prefix{p.Address, p.Address6} {
				if ext.IsValid() && netip.Prefix(in).Overlaps(ext) {
					return nil, c.Ports[p.Name].Pos.Errorf("port %s's %s overlaps infrastructure %s: the router's inside is no external network", p.Name, ext, netip.Prefix(in))
				}
			}
		}
	}
	if a.Police, err = parsePolice(c.Police, c.Pos); err != nil {
		return nil, err
	}
	for _, b := range c.Backends {
		mac, err := net.ParseMAC(b.MAC)
		if err != nil {
			return nil, b.Pos.Errorf("back-end MAC %q: %v", b.MAC, err)
		}
		for _, pn := range b.Ports {
			if p := c.Ports[pn]; p == nil || p.Role == "external" {
				return nil, b.Pos.Errorf("back-end %s: %q is not an internal port", b.MAC, pn)
			}
		}
		a.Backends = append(a.Backends, StaticBackend{MAC: mac, Weight: max(b.Weight, 1), Ports: b.Ports})
	}
	if c.VCPMAC != "" {
		if a.VCPMAC, err = net.ParseMAC(c.VCPMAC); err != nil {
			return nil, c.Pos.Errorf("vcp_mac %q: %v", c.VCPMAC, err)
		}
	}
	if a.SFlow, err = c.parseSFlow(a.Ports); err != nil {
		return nil, err
	}
	return a, nil
}

// parseSFlow checks the sFlow section and gives each external port its
// sampling rate.
func (c *FileConfig) parseSFlow(ports []PortSpec) (*SFlowConfig, error) {
	s := c.SFlow
	if s == nil {
		for _, p := range c.Ports {
			if p.SFlowRate != nil {
				return nil, p.Pos.Errorf("sflow_rate without an sflow section: no collector to send to")
			}
		}
		return nil, nil
	}
	if err := s.Check(); err != nil {
		return nil, err
	}
	out := &SFlowConfig{Collectors: s.Collectors, AgentAddress: s.AgentAddress, SubAgent: s.SubAgent, CounterInterval: s.CounterInterval, IPFIX: s.IPFIX}
	if out.SubAgent == 0 {
		out.SubAgent = uint32(c.ID)
	}
	rate := s.SamplingRate
	for i := range ports {
		p := c.Ports[ports[i].Name]
		if ports[i].Role != RoleExternal {
			if p.SFlowRate != nil {
				return nil, p.Pos.Errorf("port %s: sflow_rate samples an external port's frames", ports[i].Name)
			}
			continue
		}
		ports[i].SFlowRate = rate
		if p.SFlowRate != nil {
			if *p.SFlowRate > sflow.MaxRate {
				return nil, p.Pos.Errorf("port %s: sflow_rate %d: at most %d", ports[i].Name, *p.SFlowRate, sflow.MaxRate)
			}
			ports[i].SFlowRate = *p.SFlowRate
		}
		if !out.AgentAddress.IsValid() {
			out.AgentAddress = ports[i].Address.Addr()
		}
	}
	if !out.AgentAddress.IsValid() {
		return nil, s.Pos.Errorf("sflow: no agent_address and no external port to take one from")
	}
	return out, nil
}

// parsePorts checks the ports: roles, external ports' addresses and
// VLANs, at most one default internal port.
func (c *FileConfig) parsePorts() ([]PortSpec, error) {
	var ports []PortSpec
	defaults, vlans := 0, map[uint16]string{}
	for _, name := range c.PortNames() {
		p := c.Ports[name]
		spec := PortSpec{Name: name, Address: p.Address, Address6: p.Address6, VLAN: p.VLAN, Default: p.Default, CapacityMbps: p.CapacityMbps, CapacityPPS: p.CapacityPPS}
		if err := dist.CheckName(name); err != nil || strings.Contains(name, "/") {
			return nil, p.Pos.Errorf("port %q: an interface's name of letters, digits and . _ - : @ +", name)
		}
		if err := element.CheckCapacity(p.CapacityPPS, p.Pos); err != nil {
			return nil, err
		}
		switch p.Role {
		case "external":
			if !p.Address.Addr().Is4() || p.VLAN == 0 || p.VLAN > 4094 {
				return nil, p.Pos.Errorf("external port %s needs an IPv4 address and a VLAN id 1-4094", name)
			}
			if a := p.Address6.Addr(); p.Address6.IsValid() && (!a.Is6() || a.Is4In6() || !a.IsGlobalUnicast() || a.Zone() != "" || p.Address6.Bits() > 127) {
				return nil, p.Pos.Errorf("port %s: address6 %s is no global IPv6 address with its prefix length", name, p.Address6)
			}
			if p.CapacityPPS != 0 {
				return nil, p.Pos.Errorf("port %s: capacity_pps caps an internal port (DTX-n); the LB's own capacity_pps caps what it balances", name)
			}
			if other, dup := vlans[p.VLAN]; dup {
				return nil, p.Pos.Errorf("port %s: VLAN %d is already port %s's", name, p.VLAN, other)
			}
			vlans[p.VLAN] = name
			spec.Role = RoleExternal
		case "internal", "auto":
			if p.Address.IsValid() || p.Address6.IsValid() || p.VLAN != 0 {
				return nil, p.Pos.Errorf("port %s: only external ports have an address and a VLAN", name)
			}
			spec.Role, spec.Auto = RoleInternal, p.Role == "auto"
			if spec.Auto {
				spec.Role = RoleUnknown
			}
		default:
			return nil, p.Pos.Errorf("port %s: role %q: use external, internal or auto", name, p.Role)
		}
		if p.Default {
			if p.Role == "external" {
				return nil, p.Pos.Errorf("port %s: the default port is an internal one", name)
			}
			defaults++
		}
		ports = append(ports, spec)
	}
	if defaults > 1 {
		return nil, c.Pos.Errorf("%d ports are marked default; mark one internal port", defaults)
	}
	return ports, nil
}

// PortNames lists the ports in a fixed order (port indices follow it).
func (c *FileConfig) PortNames() []string {
	names := make([]string, 0, len(c.Ports))
	for n := range c.Ports {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
