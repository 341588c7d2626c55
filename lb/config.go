package lb

import (
	"net"
	"net/netip"
	"sort"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/config"
)

// FileConfig is `msr lb --config FILE.yaml`: everything an LB needs
// without a VCP, and what it needs to find one.
type FileConfig struct {
	Name string `yaml:"name" msr:"required"`
	// ID is the element id in DIST; default: a hash of the name.
	ID      uint64 `yaml:"id"`
	KeyFile string `yaml:"key_file" msr:"required"`
	KeyID   uint8  `yaml:"key_id"`
	// PinDir keeps maps and links across restarts of the agent.
	PinDir string `yaml:"pin_dir"`
	Socket string `yaml:"socket"`
	// APIListen is the API's address on the management network
	// (HOST:PORT), beside the local socket; changes need the key's token.
	APIListen       netip.AddrPort         `yaml:"api_listen"`
	HelloInterval   time.Duration          `yaml:"hello_interval"`
	HoldMultiplier  uint8                  `yaml:"hold_multiplier"`
	Mode            string                 `yaml:"mode"`
	Ports           map[string]*PortConfig `yaml:"ports" msr:"required"`
	Backends        []BackendConfig        `yaml:"backends"`
	VCPMAC          string                 `yaml:"vcp_mac"`
	RouterAddresses []netip.Addr           `yaml:"router_addresses"`
	ManagementAddr  netip.Addr             `yaml:"management_address"`
	Pos             config.Pos             `yaml:"-"`
}

// PortConfig is one port in the file.
type PortConfig struct {
	// Role is external, internal, or auto (learned from DIST traffic).
	Role      string       `yaml:"role" msr:"required"`
	Address   netip.Prefix `yaml:"address"`
	VLAN      uint16       `yaml:"vlan"`
	Default   bool         `yaml:"default"`
	SpeedMbps uint32       `yaml:"speed_mbps"`
	Pos       config.Pos   `yaml:"-"`
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

// Defaults.
const (
	DefaultHelloInterval  = 100 * time.Millisecond
	DefaultHoldMultiplier = 3
)

// LoadConfig reads and checks an LB config file.
func LoadConfig(path string) (*FileConfig, error) {
	c := &FileConfig{}
	if err := config.DecodeFile(path, c); err != nil {
		return nil, err
	}
	if err := c.complete(); err != nil {
		return nil, err
	}
	return c, nil
}

// complete fills defaults and checks what decoding cannot.
func (c *FileConfig) complete() error {
	if c.ID == 0 {
		c.ID = dist.ElementID("lb", c.Name)
	}
	if c.KeyID == 0 {
		c.KeyID = 1
	}
	if c.HelloInterval == 0 {
		c.HelloInterval = DefaultHelloInterval
	}
	if c.HoldMultiplier == 0 {
		c.HoldMultiplier = DefaultHoldMultiplier
	}
	if c.Mode == "" {
		c.Mode = "wrr"
	}
	if c.Socket == "" {
		c.Socket = "/run/msr/lb-" + c.Name + ".sock"
	}
	if c.PinDir == "" {
		c.PinDir = "/sys/fs/bpf/msr/lb-" + c.Name
	}
	if _, err := ParseMode(c.Mode); err != nil {
		return c.Pos.Errorf("%v", err)
	}
	if c.HelloInterval < 10*time.Millisecond || c.HelloInterval > time.Minute {
		return c.Pos.Errorf("hello_interval %v: use 10ms to 1m", c.HelloInterval)
	}
	if len(c.Ports) > MaxPorts {
		return c.Pos.Errorf("%d ports, at most %d", len(c.Ports), MaxPorts)
	}
	defaults, vlans := 0, map[uint16]string{}
	for _, name := range c.PortNames() {
		p := c.Ports[name]
		switch p.Role {
		case "external":
			if !p.Address.Addr().Is4() || p.VLAN == 0 || p.VLAN > 4094 {
				return p.Pos.Errorf("external port %s needs an IPv4 address and a VLAN id 1-4094", name)
			}
			if other, dup := vlans[p.VLAN]; dup {
				return p.Pos.Errorf("port %s: VLAN %d is already port %s's", name, p.VLAN, other)
			}
			vlans[p.VLAN] = name
		case "internal", "auto":
			if p.Address.IsValid() || p.VLAN != 0 {
				return p.Pos.Errorf("port %s: only external ports have an address and a VLAN", name)
			}
		default:
			return p.Pos.Errorf("port %s: role %q: use external, internal or auto", name, p.Role)
		}
		if p.Default {
			if p.Role == "external" {
				return p.Pos.Errorf("port %s: the default port is an internal one", name)
			}
			defaults++
		}
	}
	if defaults > 1 {
		return c.Pos.Errorf("%d ports are marked default; mark one internal port", defaults)
	}
	for _, b := range c.Backends {
		if _, err := net.ParseMAC(b.MAC); err != nil {
			return b.Pos.Errorf("back-end MAC %q: %v", b.MAC, err)
		}
		for _, pn := range b.Ports {
			if p := c.Ports[pn]; p == nil || p.Role == "external" {
				return b.Pos.Errorf("back-end %s: %q is not an internal port", b.MAC, pn)
			}
		}
	}
	if c.VCPMAC != "" {
		if _, err := net.ParseMAC(c.VCPMAC); err != nil {
			return c.Pos.Errorf("vcp_mac %q: %v", c.VCPMAC, err)
		}
	}
	return nil
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
