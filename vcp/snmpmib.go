package vcp

import (
	"cmp"
	"math"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/agentx"
	"github.com/msr-router/msr/internal/metrics"
)

// routerMIB is what the subagent serves: the router's system group
// (SNMPv2-MIB, RFC 3418) and its external ports as interfaces (IF-MIB,
// RFC 2863), built from the VCP's view at each request.
//
// An external port's ifIndex is its VLAN: unique in the router, stable
// across restarts and reorderings of the config. Counters are the LB's
// for the port (its data path's), so they grow with the traffic through
// the router; the LB does not tell unicast from the rest, so every frame
// is counted as unicast. A port whose LB is gone is notPresent.
type routerMIB struct {
	agent *Agent
	cfg   *SNMPConfig
}

func newRouterMIB(a *Agent, cfg *SNMPConfig) *routerMIB { return &routerMIB{agent: a, cfg: cfg} }

// Object identifiers.
var (
	oidSystem  = agentx.MustOID("1.3.6.1.2.1.1")
	oidIfNum   = agentx.MustOID("1.3.6.1.2.1.2.1.0")
	oidIfEntry = agentx.MustOID("1.3.6.1.2.1.2.2.1")
	oidIfX     = agentx.MustOID("1.3.6.1.2.1.31.1.1.1")
	// ifTableLastChange.0
	oidIfTableLastChange = agentx.MustOID("1.3.6.1.2.1.31.1.5.0")
	oidLinkDown          = agentx.MustOID("1.3.6.1.6.3.1.1.5.3")
	oidLinkUp            = agentx.MustOID("1.3.6.1.6.3.1.1.5.4")
)

// ifOperStatus and ifAdminStatus values.
const (
	ifUp         int32 = 1
	ifDown       int32 = 2
	ifNotPresent int32 = 6
	ifTypeEther  int32 = 6 // ethernetCsmacd (IANAifType-MIB)
	truthTrue    int32 = 1
	truthFalse   int32 = 2
)

// sysServices: a router, the internet layer (RFC 3418: 2^(3-1)).
const sysServices = 4

// port is an external port as the MIB shows it.
type mibPort struct {
	state    PortState
	present  bool // its LB is alive
	mac      []byte
	alias    string
	counters dist.PortStatus
}

// ports are the external ports in ifIndex (VLAN) order.
func (m *routerMIB) ports() []mibPort {
	a := m.agent
	a.mu.Lock()
	defer a.mu.Unlock()
	live := a.liveExternalPorts()
	var out []mibPort
	for _, ep := range a.cfg.ExternalPorts {
		p := mibPort{mac: ep.mac, alias: ep.Description}
		if st := a.ports[ep.VLAN]; st != nil {
			p.state = *st
		} else {
			p.state = PortState{VLAN: ep.VLAN, Name: ep.LB, Since: a.started, MTU: ep.mtu()}
		}
		lp, ok := live[ep.VLAN]
		p.counters, p.present = lp.PortStatus, ok && p.state.Present
		out = append(out, p)
	}
	return out
}

// ticks is a time as sysUpTime's TimeTicks: hundredths of a second since
// the VCP started.
func (m *routerMIB) ticks(t time.Time) uint32 {
	d := t.Sub(m.agent.started)
	if d < 0 {
		return 0
	}
	return uint32(d / (10 * time.Millisecond))
}

// Variables is every variable served, now.
func (m *routerMIB) Variables() []agentx.VarBind {
	now := time.Now()
	vs := []agentx.VarBind{
		{Name: oidSystem.Append(1, 0), Type: agentx.OctetString, Value: "msr multi-stage software router " + cmp.Or(metrics.Version, "(development build)")},
		{Name: oidSystem.Append(2, 0), Type: agentx.ObjectIdentifier, Value: subagentID},
		{Name: oidSystem.Append(3, 0), Type: agentx.TimeTicks, Value: m.ticks(now)},
		{Name: oidSystem.Append(4, 0), Type: agentx.OctetString, Value: m.cfg.SysContact},
		{Name: oidSystem.Append(5, 0), Type: agentx.OctetString, Value: m.cfg.SysName},
		{Name: oidSystem.Append(6, 0), Type: agentx.OctetString, Value: m.cfg.SysLocation},
		{Name: oidSystem.Append(7, 0), Type: agentx.Integer, Value: int32(sysServices)},
	}
	ports := m.ports()
	vs = append(vs, agentx.VarBind{Name: oidIfNum, Type: agentx.Integer, Value: int32(len(ports))})
	for _, p := range ports {
		vs = append(vs, m.ifEntry(p)...)
		vs = append(vs, m.ifXEntry(p)...)
	}
	// ifTableLastChange: when an entry was last added or removed (a
	// reload's ports), zero if never (RFC 2863); a port's state changing
	// is its own ifLastChange.
	m.agent.mu.Lock()
	changed := m.agent.ifTableChanged
	m.agent.mu.Unlock()
	var lastChange uint32
	if !changed.IsZero() {
		lastChange = m.ticks(changed)
	}
	vs = append(vs, agentx.VarBind{Name: oidIfTableLastChange, Type: agentx.TimeTicks, Value: lastChange})
	return vs
}

// status is a port's ifAdminStatus and ifOperStatus.
func (p mibPort) status() (admin, oper int32) {
	admin, oper = ifUp, ifDown
	if p.present && !p.state.AdminUp {
		admin = ifDown
	}
	switch {
	case !p.present:
		oper = ifNotPresent
	case p.state.Up:
		oper = ifUp
	}
	return admin, oper
}

// ifEntry is the port's row of ifTable.
func (m *routerMIB) ifEntry(p mibPort) []agentx.VarBind {
	i := uint32(p.state.VLAN)
	col := func(c uint32, t agentx.Type, v any) agentx.VarBind {
		return agentx.VarBind{Name: oidIfEntry.Append(c, i), Type: t, Value: v}
	}
	admin, oper := p.status()
	c := p.counters
	return []agentx.VarBind{
		col(1, agentx.Integer, int32(i)),
		col(2, agentx.OctetString, p.state.Name),
		col(3, agentx.Integer, ifTypeEther),
		col(4, agentx.Integer, int32(p.state.MTU)),
		col(5, agentx.Gauge32, uint32(min(uint64(p.state.SpeedMbps)*1e6, math.MaxUint32))),
		col(6, agentx.OctetString, p.mac),
		col(7, agentx.Integer, admin),
		col(8, agentx.Integer, oper),
		col(9, agentx.TimeTicks, m.ticks(p.state.Since)),
		col(10, agentx.Counter32, uint32(c.RxBytes)),
		col(11, agentx.Counter32, uint32(c.RxPackets)),
		col(13, agentx.Counter32, uint32(c.RxDropped)),
		col(14, agentx.Counter32, uint32(0)),
		col(16, agentx.Counter32, uint32(c.TxBytes)),
		col(17, agentx.Counter32, uint32(c.TxPackets)),
		col(19, agentx.Counter32, uint32(0)),
		col(20, agentx.Counter32, uint32(0)),
	}
}

// ifXEntry is the port's row of ifXTable, with the 64-bit counters.
func (m *routerMIB) ifXEntry(p mibPort) []agentx.VarBind {
	i := uint32(p.state.VLAN)
	col := func(c uint32, t agentx.Type, v any) agentx.VarBind {
		return agentx.VarBind{Name: oidIfX.Append(c, i), Type: t, Value: v}
	}
	c := p.counters
	return []agentx.VarBind{
		col(1, agentx.OctetString, p.state.Name),
		col(2, agentx.Counter32, uint32(0)),
		col(3, agentx.Counter32, uint32(0)),
		col(4, agentx.Counter32, uint32(0)),
		col(5, agentx.Counter32, uint32(0)),
		col(6, agentx.Counter64, c.RxBytes),
		col(7, agentx.Counter64, c.RxPackets),
		col(8, agentx.Counter64, uint64(0)),
		col(9, agentx.Counter64, uint64(0)),
		col(10, agentx.Counter64, c.TxBytes),
		col(11, agentx.Counter64, c.TxPackets),
		col(12, agentx.Counter64, uint64(0)),
		col(13, agentx.Counter64, uint64(0)),
		col(14, agentx.Integer, truthTrue), // ifLinkUpDownTrapEnable: enabled
		col(15, agentx.Gauge32, p.state.SpeedMbps),
		col(16, agentx.Integer, truthFalse), // ifPromiscuousMode
		col(17, agentx.Integer, truthTrue),  // ifConnectorPresent
		col(18, agentx.OctetString, p.alias),
		col(19, agentx.TimeTicks, uint32(0)), // ifCounterDiscontinuityTime
	}
}

// linkTrap is linkDown or linkUp for a port (IF-MIB's notifications,
// with ifIndex, ifAdminStatus and ifOperStatus).
func (m *routerMIB) linkTrap(s PortState) (agentx.OID, []agentx.VarBind) {
	trap := oidLinkDown
	if s.Up {
		trap = oidLinkUp
	}
	p := mibPort{state: s, present: s.Present}
	admin, oper := p.status()
	i := uint32(s.VLAN)
	return trap, []agentx.VarBind{
		{Name: oidIfEntry.Append(1, i), Type: agentx.Integer, Value: int32(i)},
		{Name: oidIfEntry.Append(7, i), Type: agentx.Integer, Value: admin},
		{Name: oidIfEntry.Append(8, i), Type: agentx.Integer, Value: oper},
	}
}
