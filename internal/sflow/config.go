package sflow

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/msr-router/msr/internal/config"
)

// FileConfig is an sFlow export as a config file writes it (the VCP's for
// the router, an LB's for itself): the collectors (ADDR:PORT), the
// router's agent address, the sub-agent id (an LB's; default its id), the
// external ports' sampling rate (1 in N; a port's sflow_rate overrides
// it, 0 off), and how often each port's counters are sent.
//
// IPFIX, if set, has the same samples summed into flows and sent as IPFIX
// records too; the sFlow collectors may then be none.
type FileConfig struct {
	Collectors      []netip.AddrPort `yaml:"collectors"`
	AgentAddress    netip.Addr       `yaml:"agent_address"`
	SubAgent        uint32           `yaml:"sub_agent"`
	SamplingRate    uint32           `yaml:"sampling_rate"`
	CounterInterval time.Duration    `yaml:"counter_interval"`
	IPFIX           *IPFIXConfig     `yaml:"ipfix"`
	Pos             config.Pos       `yaml:"-"`
}

// IPFIXConfig is the IPFIX export of the samples' flows: its collectors,
// and how long a flow is summed before it is reported (active_timeout)
// and how long it may go unsampled before its last report (idle_timeout).
type IPFIXConfig struct {
	Collectors    []netip.AddrPort `yaml:"collectors" msr:"required"`
	ActiveTimeout time.Duration    `yaml:"active_timeout"`
	IdleTimeout   time.Duration    `yaml:"idle_timeout"`
	Pos           config.Pos       `yaml:"-"`
}

// IPFIX's defaults: a flow reported each minute while it lasts, and 15 s
// after its last sample.
const (
	DefaultActiveTimeout = time.Minute
	DefaultIdleTimeout   = 15 * time.Second
)

// CheckIPFIX: one to MaxCollectors unicast collectors, an active timeout
// of 1 s to 1 h, an idle one of 1 s up to the active one. Its errors
// begin "ipfix".
func CheckIPFIX(collectors []netip.AddrPort, active, idle time.Duration) error {
	if len(collectors) == 0 {
		return errors.New("ipfix: no collectors")
	}
	if err := CheckCollectors(collectors); err != nil {
		return fmt.Errorf("ipfix: %w", err)
	}
	if active < time.Second || active > time.Hour {
		return fmt.Errorf("ipfix active_timeout %v: 1s to 1h", active)
	}
	if idle < time.Second || idle > active {
		return fmt.Errorf("ipfix idle_timeout %v: 1s to the active_timeout", idle)
	}
	return nil
}

// The defaults: the specification's counter interval; a sampling rate
// suited to links of a few Gbit/s.
const (
	DefaultRate            = 1000
	DefaultCounterInterval = 20 * time.Second
)

// Limits on what an export may ask: MaxRate keeps the data path's draw
// of the gap (1 to 2 x rate - 1) within 32 bits.
const (
	MaxCollectors = 8
	MaxRate       = 1 << 30
)

// Check checks c and completes its defaults (rate, interval).
func (c *FileConfig) Check() error {
	if len(c.Collectors) == 0 && c.IPFIX == nil {
		return c.Pos.Errorf("sflow: no collectors (sFlow's, or ipfix's)")
	}
	if x := c.IPFIX; x != nil {
		x.ActiveTimeout = cmp.Or(x.ActiveTimeout, DefaultActiveTimeout)
		x.IdleTimeout = cmp.Or(x.IdleTimeout, min(DefaultIdleTimeout, x.ActiveTimeout))
		if err := CheckIPFIX(x.Collectors, x.ActiveTimeout, x.IdleTimeout); err != nil {
			return x.Pos.Errorf("sflow %v", err)
		}
	}
	if err := CheckCollectors(c.Collectors); err != nil {
		return c.Pos.Errorf("sflow %v", err)
	}
	if c.AgentAddress.IsValid() && !Unicast(c.AgentAddress) {
		return c.Pos.Errorf("sflow agent_address %s: a unicast address", c.AgentAddress)
	}
	if c.SamplingRate == 0 {
		c.SamplingRate = DefaultRate
	}
	if c.SamplingRate > MaxRate {
		return c.Pos.Errorf("sflow sampling_rate %d: at most %d", c.SamplingRate, MaxRate)
	}
	if c.CounterInterval == 0 {
		c.CounterInterval = DefaultCounterInterval
	}
	if err := CheckInterval(c.CounterInterval); err != nil {
		return c.Pos.Errorf("sflow counter_interval %v", err)
	}
	return nil
}

// CheckCollectors: at most MaxCollectors, each a unicast ADDR:PORT.
func CheckCollectors(cs []netip.AddrPort) error {
	if len(cs) > MaxCollectors {
		return fmt.Errorf("%d collectors, at most %d", len(cs), MaxCollectors)
	}
	for _, c := range cs {
		if !c.IsValid() || c.Port() == 0 || !Unicast(c.Addr()) {
			return fmt.Errorf("collector %s: a unicast ADDR:PORT", c)
		}
	}
	return nil
}

// CheckInterval: a counter interval of 1 s to 1 h.
func CheckInterval(d time.Duration) error {
	if d < time.Second || d > time.Hour {
		return fmt.Errorf("%v: 1s to 1h", d)
	}
	return nil
}

// Unicast says whether a is an address a datagram can be sent to or come
// from: valid, not unspecified, multicast or broadcast.
func Unicast(a netip.Addr) bool {
	return a.IsValid() && !a.IsUnspecified() && !a.IsMulticast() && a != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}
