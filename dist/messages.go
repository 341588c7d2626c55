package dist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// MsgType is the DIST message type, byte 1 of the header.
type MsgType uint8

// Message types. docs/dist.md gives each body's layout.
const (
	TypeHello       MsgType = 1
	TypePortConfig  MsgType = 2
	TypeTableUpdate MsgType = 3
	TypeVCPAnnounce MsgType = 4
	TypeProbe       MsgType = 5
	// The VCP's configuration of a back-end (backend.go).
	TypeBackendConfig MsgType = 6
	TypeACLConfig     MsgType = 7
	// The suite's routes via link-local next hops (linkroutes.go).
	TypeLinkRoutes MsgType = 8
	// The operator's static neighbours (neighbors.go).
	TypeStaticNeighbors MsgType = 9
	// The router's configured neighbours on an LB's ports (peers.go).
	TypePeers MsgType = 10
)

func (t MsgType) String() string {
	switch t {
	case TypeHello:
		return "HELLO"
	case TypePortConfig:
		return "PORT_CONFIG"
	case TypeTableUpdate:
		return "TABLE_UPDATE"
	case TypeVCPAnnounce:
		return "VCP_ANNOUNCE"
	case TypeProbe:
		return "PROBE"
	case TypeBackendConfig:
		return "BACKEND_CONFIG"
	case TypeACLConfig:
		return "ACL_CONFIG"
	case TypeLinkRoutes:
		return "LINK_ROUTES"
	case TypeStaticNeighbors:
		return "STATIC_NEIGHBORS"
	case TypePeers:
		return "PEERS"
	}
	return fmt.Sprintf("TYPE_%d", uint8(t))
}

// elementMay says whether an element key may seal the type: hellos and
// probes. Every other type configures an element and needs the VCP's key.
func (t MsgType) elementMay() bool { return t == TypeHello || t == TypeProbe }

// Message is the body of a DIST frame.
type Message interface {
	Type() MsgType
	appendBody(b []byte) ([]byte, error)
	decodeBody(b []byte) error
}

func newMessage(t MsgType) (Message, error) {
	switch t {
	case TypeHello:
		return new(Hello), nil
	case TypePortConfig:
		return new(PortConfig), nil
	case TypeTableUpdate:
		return new(TableUpdate), nil
	case TypeVCPAnnounce:
		return new(VCPAnnounce), nil
	case TypeProbe:
		return new(Probe), nil
	case TypeBackendConfig:
		return new(BackendConfig), nil
	case TypeACLConfig:
		return new(ACLConfig), nil
	case TypeLinkRoutes:
		return new(LinkRoutes), nil
	case TypeStaticNeighbors:
		return new(StaticNeighbors), nil
	case TypePeers:
		return new(Peers), nil
	}
	return nil, fmt.Errorf("%w %d", ErrType, uint8(t))
}

// Role is what an element is.
type Role uint8

const (
	RoleLB     Role = 1
	RoleRouter Role = 2
	RoleVCP    Role = 3
)

// PortRole says which side of the router a port faces.
type PortRole uint8

const (
	PortUnknown  PortRole = 0
	PortExternal PortRole = 1
	PortInternal PortRole = 2
)

// String is the role's name: unknown, external, internal.
func (r PortRole) String() string {
	if r > PortInternal {
		return "unknown"
	}
	return [...]string{"unknown", "external", "internal"}[r]
}

// Port flags. In a HELLO, Up is the port's operational state (RFC 2863:
// administratively up with carrier), AdminUp its administrative state and
// FullDuplex its duplex, as the element's kernel reports them; a PORT_CONFIG
// knows only Up, DefaultInternal and URPF: an external port whose frames
// the LB balances tagged with its VLAN, so that the back-end checks their
// source (unicast RPF, BackendPort.URPF).
const (
	PortFlagUp              = 1 << 0
	PortFlagDefaultInternal = 1 << 1
	PortFlagAdminUp         = 1 << 2
	PortFlagFullDuplex      = 1 << 3
	PortFlagURPF            = 1 << 4
	portFlagsKnown          = PortFlagUp | PortFlagDefaultInternal | PortFlagURPF
	helloPortFlagsKnown     = portFlagsKnown | PortFlagAdminUp | PortFlagFullDuplex
)

// Limits of the message bodies.
const (
	NameLen         = 16
	MaxPorts        = 16
	MaxTableEntries = 112
	helloFixedLen   = 32
	helloPortLen    = 80
	// helloPortLenV0 is a port without its name: what elements sent
	// before ports were named. Still read, so that elements can be
	// upgraded one at a time (docs/dist.md).
	helloPortLenV0   = 64
	portConfigHdrLen = 16
	portConfigLen    = 40
	// portConfigLenV0 is a port without its IPv6 address: what VCPs sent
	// before IPv6 (2026-11-23), still taken.
	portConfigLenV0 = 24
	tableHdrLen     = 16
	tableEntryLen   = 12
	announceLen     = 16
	probeLen        = 8
)

// PortStatus is one port as an element reports it in its HELLO.
type PortStatus struct {
	Index     uint8            `json:"index"`
	Role      PortRole         `json:"role"`
	VLAN      uint16           `json:"vlan"`
	MAC       net.HardwareAddr `json:"mac"`
	Prefix    netip.Prefix     `json:"prefix"`
	Flags     uint8            `json:"flags"`
	SpeedMbps uint32           `json:"speed_mbps"`
	MTU       uint16           `json:"mtu"`
	RxPackets uint64           `json:"rx_packets"`
	RxBytes   uint64           `json:"rx_bytes"`
	TxPackets uint64           `json:"tx_packets"`
	TxBytes   uint64           `json:"tx_bytes"`
	RxDropped uint64           `json:"rx_dropped"`
	// Name is the port's own name on its element (its interface); the
	// router calls the port ELEMENT/NAME everywhere (lb1/e0).
	Name string `json:"name,omitempty"`
}

// Up says the port is up: administratively up and with carrier.
func (p PortStatus) Up() bool { return p.Flags&PortFlagUp != 0 }

// AdminUp says the port is administratively up.
func (p PortStatus) AdminUp() bool { return p.Flags&PortFlagAdminUp != 0 }

// FullDuplex says the port's link is full duplex.
func (p PortStatus) FullDuplex() bool { return p.Flags&PortFlagFullDuplex != 0 }

// Hello is sent by every element to GroupMAC every hello interval; it is
// how elements are discovered and how the VCP learns their ports and load.
type Hello struct {
	Role            Role   `json:"role"`
	Flags           uint8  `json:"flags"`
	HelloIntervalMs uint16 `json:"hello_interval_ms"`
	HoldMultiplier  uint8  `json:"hold_multiplier"`
	// Capacity is the element's forwarding capacity in Mbit/s, the basis of
	// its balancing weight.
	Capacity uint32 `json:"capacity"`
	// Installed is what the element has installed, so that the VCP can
	// reconcile and show it: an LB the generation of the balancing table it
	// holds from the VCP (0: none), a back-end the number of routes in its
	// FIB.
	Installed uint32 `json:"installed"`
	// Busy is the element's data path's CPU time, in ten-thousandths of
	// one core (15000: one and a half cores' worth), over its last
	// measurement; 0 when not measured (router/busy.go). Bytes 6-7 of the
	// body, reserved (zero) before 2026-11-23: a receiver of that time
	// refuses a hello with them set, so VCPs and LBs are upgraded first.
	Busy  uint16       `json:"busy_permyriad"`
	Name  string       `json:"name"`
	Ports []PortStatus `json:"ports"`
	// OperatorVersion is a back-end's: the version of the operator's drain
	// and weight it keeps (BackendConfig.OperatorVersion; 0: none yet). A
	// VCP takes a newer one from the hello even while active, so that two
	// VCPs active at once (a split brain) end with the operator's last
	// word, not with whichever pushed last.
	OperatorVersion uint64 `json:"operator_version,omitempty"`
	// PortsDigest is a back-end's: PortsDigest of the router's external
	// ports it serves (0: none sent), so that the VCP sees it serves every
	// one it was sent where the hello lists no more than MaxPorts-1.
	PortsDigest uint64 `json:"ports_digest,omitempty"`
}

// A back-end's hello flags. HelloFlagDraining marks a back-end that asks
// to receive no new flows: not ready yet, or drained by the operator,
// which HelloFlagDrained says (with Draining); HelloFlagCapacitySet says
// its Capacity is the operator's weight, not its own. The operator's two
// come from the VCP's BACKEND_CONFIG and are kept by the back-end, so
// that a VCP taking over finds them in the hellos (bits 1-2 since
// 2026-11-24: a receiver from before refuses them, so VCPs and LBs are
// upgraded first).
const (
	HelloFlagDraining    = 1 << 0
	HelloFlagDrained     = 1 << 1
	HelloFlagCapacitySet = 1 << 2
	helloFlagsKnown      = HelloFlagDraining | HelloFlagDrained | HelloFlagCapacitySet
	// helloFlagOperatorVersion is the wire's own: the operator's version
	// (8 bytes) follows the ports. Set when OperatorVersion is not 0, and
	// not kept in Flags (since 2026-11-24; a receiver from before refuses
	// it, so VCPs are upgraded first).
	helloFlagOperatorVersion = 1 << 3
	// helloFlagPortsDigest: the ports' digest (8 bytes) follows the ports,
	// before the operator's version (since 2026-11-28; a receiver from
	// before refuses it, so VCPs and LBs are upgraded first).
	helloFlagPortsDigest = 1 << 4
)

func (*Hello) Type() MsgType { return TypeHello }

func (m *Hello) appendBody(b []byte) ([]byte, error) {
	if err := validRole(m.Role); err != nil {
		return nil, err
	}
	if len(m.Ports) > MaxPorts {
		return nil, fmt.Errorf("%d ports, at most %d", len(m.Ports), MaxPorts)
	}
	name, err := encodeName(m.Name)
	if err != nil {
		return nil, err
	}
	flags := m.Flags &^ (helloFlagOperatorVersion | helloFlagPortsDigest)
	if m.OperatorVersion != 0 {
		flags |= helloFlagOperatorVersion
	}
	if m.PortsDigest != 0 {
		flags |= helloFlagPortsDigest
	}
	b = append(b, uint8(m.Role), flags)
	b = binary.BigEndian.AppendUint16(b, m.HelloIntervalMs)
	b = append(b, m.HoldMultiplier, uint8(len(m.Ports)))
	b = binary.BigEndian.AppendUint16(b, m.Busy)
	b = binary.BigEndian.AppendUint32(b, m.Capacity)
	b = binary.BigEndian.AppendUint32(b, m.Installed)
	b = append(b, name...)
	for _, p := range m.Ports {
		if b, err = p.append(b); err != nil {
			return nil, err
		}
	}
	if m.PortsDigest != 0 {
		b = binary.BigEndian.AppendUint64(b, m.PortsDigest)
	}
	if m.OperatorVersion != 0 {
		b = binary.BigEndian.AppendUint64(b, m.OperatorVersion)
	}
	return b, nil
}

func (p *PortStatus) append(b []byte) ([]byte, error) {
	addr, bits, err := encodePrefix(p.Prefix)
	if err != nil {
		return nil, err
	}
	if len(p.MAC) != 6 || p.Role > PortInternal || p.Flags&^helloPortFlagsKnown != 0 {
		return nil, fmt.Errorf("port %d: bad MAC, role or flags", p.Index)
	}
	b = append(b, p.Index, uint8(p.Role))
	b = binary.BigEndian.AppendUint16(b, p.VLAN)
	b = append(b, p.MAC...)
	b = append(b, bits, p.Flags)
	b = append(b, addr[:]...)
	b = binary.BigEndian.AppendUint32(b, p.SpeedMbps)
	b = binary.BigEndian.AppendUint16(b, p.MTU)
	b = append(b, 0, 0)
	for _, v := range []uint64{p.RxPackets, p.RxBytes, p.TxPackets, p.TxBytes, p.RxDropped} {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	name, err := encodeName(p.Name)
	if err != nil {
		return nil, fmt.Errorf("port %d: %w", p.Index, err)
	}
	return append(b, name...), nil
}

func (m *Hello) decodeBody(b []byte) error {
	if len(b) < helloFixedLen {
		return errShort
	}
	var version, digest uint64
	var err error
	if b[1]&helloFlagOperatorVersion != 0 {
		if version, b, err = cutTrailer64(b, helloFixedLen, "operator's version"); err != nil {
			return err
		}
	}
	if b[1]&helloFlagPortsDigest != 0 {
		if digest, b, err = cutTrailer64(b, helloFixedLen, "ports' digest"); err != nil {
			return err
		}
	}
	n := int(b[5])
	portLen := helloPortLen
	if n > 0 && len(b) == helloFixedLen+n*helloPortLenV0 {
		portLen = helloPortLenV0 // unnamed ports
	}
	if n > MaxPorts || len(b) != helloFixedLen+n*portLen {
		return fmt.Errorf("%d ports in %d bytes", n, len(b))
	}
	name, err := decodeName(b[16:32])
	if err != nil {
		return err
	}
	*m = Hello{
		Role: Role(b[0]), Flags: b[1] &^ (helloFlagOperatorVersion | helloFlagPortsDigest), OperatorVersion: version, PortsDigest: digest,
		HelloIntervalMs: binary.BigEndian.Uint16(b[2:4]),
		HoldMultiplier:  b[4],
		Busy:            binary.BigEndian.Uint16(b[6:8]),
		Capacity:        binary.BigEndian.Uint32(b[8:12]),
		Installed:       binary.BigEndian.Uint32(b[12:16]),
		Name:            name,
	}
	if n > 0 {
		m.Ports = make([]PortStatus, n)
	}
	if err := validRole(m.Role); err != nil {
		return err
	}
	if m.Flags&^helloFlagsKnown != 0 {
		return errReserved
	}
	for i := range m.Ports {
		if err := m.Ports[i].decode(b[helloFixedLen+i*portLen:][:portLen]); err != nil {
			return fmt.Errorf("port %d: %w", i, err)
		}
	}
	return nil
}

func (p *PortStatus) decode(b []byte) error {
	prefix, err := decodePrefix(b[12:16], b[10])
	if err != nil {
		return err
	}
	if b[1] > uint8(PortInternal) || b[11]&^helloPortFlagsKnown != 0 || b[22] != 0 || b[23] != 0 {
		return errReserved
	}
	c := func(off int) uint64 { return binary.BigEndian.Uint64(b[off : off+8]) }
	*p = PortStatus{
		Index: b[0], Role: PortRole(b[1]),
		VLAN:      binary.BigEndian.Uint16(b[2:4]),
		MAC:       net.HardwareAddr(append([]byte(nil), b[4:10]...)),
		Prefix:    prefix,
		Flags:     b[11],
		SpeedMbps: binary.BigEndian.Uint32(b[16:20]),
		MTU:       binary.BigEndian.Uint16(b[20:22]),
		RxPackets: c(24), RxBytes: c(32), TxPackets: c(40), TxBytes: c(48), RxDropped: c(56),
	}
	if len(b) == helloPortLen {
		if p.Name, err = decodeName(b[helloPortLenV0:]); err != nil {
			return err
		}
	}
	return validVLAN(p.VLAN)
}

// PortName is what the whole router calls the port named port on element:
// ELEMENT/PORT (lb1/e0), in every view (the console, the elements'
// status, the suite's interface descriptions, the logs).
func PortName(element, port string) string { return element + "/" + port }

// PortSetting is one port's configuration pushed by the VCP. The port is
// named by its MAC; Index is the LB's own index for it.
type PortSetting struct {
	Index  uint8            `json:"index"`
	Role   PortRole         `json:"role"`
	VLAN   uint16           `json:"vlan"`
	MAC    net.HardwareAddr `json:"mac"`
	Prefix netip.Prefix     `json:"prefix"`
	// Prefix6 is the router's IPv6 address on an external port (none:
	// IPv4 only).
	Prefix6 netip.Prefix `json:"prefix6,omitzero"`
	Flags   uint8        `json:"flags"`
	MTU     uint16       `json:"mtu"`
}

// PortConfig is sent by the VCP to one LB (Target) to set its ports' roles,
// VLAN ids and addresses.
type PortConfig struct {
	Target uint64        `json:"target"`
	Ports  []PortSetting `json:"ports"`
}

func (*PortConfig) Type() MsgType { return TypePortConfig }

func (m *PortConfig) appendBody(b []byte) ([]byte, error) {
	if len(m.Ports) > MaxPorts {
		return nil, fmt.Errorf("%d ports, at most %d", len(m.Ports), MaxPorts)
	}
	b = binary.BigEndian.AppendUint64(b, m.Target)
	b = append(b, uint8(len(m.Ports)), 0, 0, 0, 0, 0, 0, 0)
	for _, p := range m.Ports {
		addr, bits, err := encodePrefix(p.Prefix)
		if err != nil {
			return nil, err
		}
		if len(p.MAC) != 6 || p.Role > PortInternal || p.Flags&^portFlagsKnown != 0 || validVLAN(p.VLAN) != nil {
			return nil, fmt.Errorf("port %d: bad MAC, role, flags or VLAN", p.Index)
		}
		b = append(b, p.Index, uint8(p.Role))
		b = binary.BigEndian.AppendUint16(b, p.VLAN)
		b = append(b, p.MAC...)
		b = append(b, bits, p.Flags)
		b = append(b, addr[:]...)
		b = binary.BigEndian.AppendUint16(b, p.MTU)
		addr6, bits6, err := encodePrefix6(p.Prefix6)
		if err != nil {
			return nil, fmt.Errorf("port %d: %w", p.Index, err)
		}
		b = append(b, bits6, 0, 0, 0, 0, 0)
		b = append(b, addr6[:]...)
	}
	return b, nil
}

func (m *PortConfig) decodeBody(b []byte) error {
	if len(b) < portConfigHdrLen {
		return errShort
	}
	n := int(b[8])
	entryLen := portConfigLen
	if n > 0 && len(b) == portConfigHdrLen+n*portConfigLenV0 {
		entryLen = portConfigLenV0
	}
	if n > MaxPorts || len(b) != portConfigHdrLen+n*entryLen {
		return fmt.Errorf("%d ports in %d bytes", n, len(b))
	}
	if !allZero(b[9:16]) {
		return errReserved
	}
	*m = PortConfig{Target: binary.BigEndian.Uint64(b[0:8])}
	if n > 0 {
		m.Ports = make([]PortSetting, n)
	}
	for i := range m.Ports {
		e := b[portConfigHdrLen+i*entryLen:][:entryLen]
		prefix, err := decodePrefix(e[12:16], e[10])
		if err != nil {
			return fmt.Errorf("port %d: %w", i, err)
		}
		var prefix6 netip.Prefix
		if entryLen == portConfigLen {
			if prefix6, err = decodePrefix6(e[24:40], e[18]); err != nil {
				return fmt.Errorf("port %d: %w", i, err)
			}
		} else if e[18] != 0 {
			return fmt.Errorf("port %d: %w", i, errReserved)
		}
		if e[1] > uint8(PortInternal) || e[11]&^portFlagsKnown != 0 || !allZero(e[19:24]) {
			return fmt.Errorf("port %d: %w", i, errReserved)
		}
		m.Ports[i] = PortSetting{
			Index: e[0], Role: PortRole(e[1]),
			VLAN:   binary.BigEndian.Uint16(e[2:4]),
			MAC:    net.HardwareAddr(append([]byte(nil), e[4:10]...)),
			Prefix: prefix, Prefix6: prefix6, Flags: e[11],
			MTU: binary.BigEndian.Uint16(e[16:18]),
		}
		if err := validVLAN(m.Ports[i].VLAN); err != nil {
			return fmt.Errorf("port %d: %w", i, err)
		}
	}
	return nil
}

// BalanceMode is how an LB spreads data packets over back-ends.
type BalanceMode uint8

// The modes: their numbers are bpf/lb.h's enum lb_mode (lb's tests hold
// them to it), their names what configs and the console say.
const (
	ModeWRR    BalanceMode = 1
	ModeHash   BalanceMode = 2
	ModeMaglev BalanceMode = 3
	// ModeFlowlet keeps a flow on its back-end within a burst and lets
	// it move, by the weights, after a gap (bpf/lb.bpf.c, flowlet).
	ModeFlowlet BalanceMode = 4
)

var balanceModeNames = map[BalanceMode]string{ModeWRR: "wrr", ModeHash: "hash", ModeMaglev: "maglev", ModeFlowlet: "flowlet"}

// ParseBalanceMode reads a mode's name.
func ParseBalanceMode(s string) (BalanceMode, error) {
	for m, name := range balanceModeNames {
		if name == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("balancing mode %q: use wrr, hash, maglev or flowlet", s)
}

func (m BalanceMode) String() string {
	if name, ok := balanceModeNames[m]; ok {
		return name
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// Table update flags.
const (
	// TableFlush starts a new table: entries of earlier frames of any
	// generation are discarded.
	TableFlush = 1 << 0
	// TableLast ends a table: the LB builds it and swaps it in atomically.
	TableLast = 1 << 1
)

// TableEntry is one back-end in a balancing table.
type TableEntry struct {
	MAC    net.HardwareAddr `json:"mac"`
	Port   uint8            `json:"port"`
	Weight uint16           `json:"weight"`
}

// TableUpdate is sent by the VCP to one LB. A table too big for one frame
// spans several of the same Generation: the first with TableFlush, the
// last with TableLast.
type TableUpdate struct {
	Target     uint64       `json:"target"`
	Generation uint32       `json:"generation"`
	Flags      uint8        `json:"flags"`
	Mode       BalanceMode  `json:"mode"`
	Entries    []TableEntry `json:"entries"`
}

func (*TableUpdate) Type() MsgType { return TypeTableUpdate }

func (m *TableUpdate) appendBody(b []byte) ([]byte, error) {
	if len(m.Entries) > MaxTableEntries {
		return nil, fmt.Errorf("%d entries, at most %d per frame", len(m.Entries), MaxTableEntries)
	}
	if m.Mode < ModeWRR || m.Mode > ModeFlowlet || m.Flags&^(TableFlush|TableLast) != 0 {
		return nil, errors.New("bad mode or flags")
	}
	b = binary.BigEndian.AppendUint64(b, m.Target)
	b = binary.BigEndian.AppendUint32(b, m.Generation)
	b = append(b, m.Flags, uint8(m.Mode))
	b = binary.BigEndian.AppendUint16(b, uint16(len(m.Entries)))
	for _, e := range m.Entries {
		if len(e.MAC) != 6 {
			return nil, errors.New("entry MAC must be 6 bytes")
		}
		b = append(b, e.MAC...)
		b = append(b, e.Port, 0)
		b = binary.BigEndian.AppendUint16(b, e.Weight)
		b = append(b, 0, 0)
	}
	return b, nil
}

func (m *TableUpdate) decodeBody(b []byte) error {
	if len(b) < tableHdrLen {
		return errShort
	}
	n := int(binary.BigEndian.Uint16(b[14:16]))
	if n > MaxTableEntries || len(b) != tableHdrLen+n*tableEntryLen {
		return fmt.Errorf("%d entries in %d bytes", n, len(b))
	}
	*m = TableUpdate{
		Target:     binary.BigEndian.Uint64(b[0:8]),
		Generation: binary.BigEndian.Uint32(b[8:12]),
		Flags:      b[12], Mode: BalanceMode(b[13]),
	}
	if n > 0 {
		m.Entries = make([]TableEntry, n)
	}
	if m.Mode < ModeWRR || m.Mode > ModeFlowlet || m.Flags&^(TableFlush|TableLast) != 0 {
		return errReserved
	}
	for i := range m.Entries {
		e := b[tableHdrLen+i*tableEntryLen:][:tableEntryLen]
		if e[7] != 0 || e[10] != 0 || e[11] != 0 {
			return fmt.Errorf("entry %d: %w", i, errReserved)
		}
		m.Entries[i] = TableEntry{
			MAC:    net.HardwareAddr(append([]byte(nil), e[0:6]...)),
			Port:   e[6],
			Weight: binary.BigEndian.Uint16(e[8:10]),
		}
	}
	return nil
}

// VCP states carried in VCPAnnounce.
const (
	VCPActive  uint8 = 1
	VCPStandby uint8 = 2
)

// VCPAnnounce is sent by each VCP to GroupMAC every hello interval: elements
// learn the active VCP's MAC (the frame's source) and its management API.
// Which VCP is active is decided by VRRP (keepalived), not by DIST.
type VCPAnnounce struct {
	State           uint8      `json:"state"`
	Priority        uint8      `json:"priority"`
	HelloIntervalMs uint16     `json:"hello_interval_ms"`
	APIAddr         netip.Addr `json:"api_addr"`
	APIPort         uint16     `json:"api_port"`
	// TableGeneration is the latest table generation the VCP has computed.
	TableGeneration uint32 `json:"table_generation"`
}

func (*VCPAnnounce) Type() MsgType { return TypeVCPAnnounce }

func (m *VCPAnnounce) appendBody(b []byte) ([]byte, error) {
	if m.State != VCPActive && m.State != VCPStandby {
		return nil, errors.New("bad VCP state")
	}
	if !m.APIAddr.Is4() {
		return nil, errors.New("API address must be IPv4")
	}
	a := m.APIAddr.As4()
	b = append(b, m.State, m.Priority)
	b = binary.BigEndian.AppendUint16(b, m.HelloIntervalMs)
	b = append(b, a[:]...)
	b = binary.BigEndian.AppendUint16(b, m.APIPort)
	b = append(b, 0, 0)
	return binary.BigEndian.AppendUint32(b, m.TableGeneration), nil
}

func (m *VCPAnnounce) decodeBody(b []byte) error {
	if len(b) != announceLen {
		return fmt.Errorf("%d bytes, want %d", len(b), announceLen)
	}
	if (b[0] != VCPActive && b[0] != VCPStandby) || b[10] != 0 || b[11] != 0 {
		return errReserved
	}
	*m = VCPAnnounce{
		State: b[0], Priority: b[1],
		HelloIntervalMs: binary.BigEndian.Uint16(b[2:4]),
		APIAddr:         netip.AddrFrom4([4]byte(b[4:8])),
		APIPort:         binary.BigEndian.Uint16(b[8:10]),
		TableGeneration: binary.BigEndian.Uint32(b[12:16]),
	}
	return nil
}

// Probe measures an LB's path to one back-end through the switch: the LB
// sends it to the back-end's MAC, the back-end's data path sends it
// straight back (bpf/router.bpf.c, dist), and the LB times the round
// trip. A probe is sealed as it will return (SealProbe): only its sender
// can check it, and only once reflected.
type Probe struct {
	// SentNs is when the LB sent it (its clock, ns since the Unix epoch).
	SentNs uint64 `json:"sent_ns"`
}

func (*Probe) Type() MsgType { return TypeProbe }

func (m *Probe) appendBody(b []byte) ([]byte, error) {
	return binary.BigEndian.AppendUint64(b, m.SentNs), nil
}

func (m *Probe) decodeBody(b []byte) error {
	if len(b) != probeLen {
		return fmt.Errorf("%d bytes, want %d", len(b), probeLen)
	}
	m.SentNs = binary.BigEndian.Uint64(b)
	return nil
}

var (
	errShort    = errors.New("body too short")
	errReserved = errors.New("reserved or unknown value set")
)

func validRole(r Role) error {
	if r < RoleLB || r > RoleVCP {
		return fmt.Errorf("unknown role %d", r)
	}
	return nil
}

// validVLAN accepts 0 (untagged) and the 802.1Q ids 1-4094.
// cutTrailer64 reads the non-zero u64 (what) that ends b, whose header
// is hdrLen bytes, and returns b without it.
func cutTrailer64(b []byte, hdrLen int, what string) (uint64, []byte, error) {
	if len(b) < hdrLen+8 {
		return 0, nil, errShort
	}
	v := binary.BigEndian.Uint64(b[len(b)-8:])
	if v == 0 {
		return 0, nil, fmt.Errorf("%s 0: %w", what, errReserved)
	}
	return v, b[:len(b)-8], nil
}

func validVLAN(v uint16) error {
	if v > 4094 {
		return fmt.Errorf("VLAN id %d out of range", v)
	}
	return nil
}

// encodePrefix returns an IPv4 prefix's address and length; the zero
// Prefix (no address) encodes as 0.0.0.0/0.
func encodePrefix(p netip.Prefix) ([4]byte, uint8, error) {
	if !p.IsValid() {
		return [4]byte{}, 0, nil
	}
	if !p.Addr().Is4() {
		return [4]byte{}, 0, fmt.Errorf("prefix %s is not IPv4", p)
	}
	return p.Addr().As4(), uint8(p.Bits()), nil
}

// encodePrefix6 is an IPv6 prefix's address and length; none is all zero.
func encodePrefix6(p netip.Prefix) ([16]byte, uint8, error) {
	if !p.IsValid() {
		return [16]byte{}, 0, nil
	}
	if !p.Addr().Is6() || p.Addr().Is4In6() || p.Addr().IsUnspecified() || p.Bits() == 0 {
		return [16]byte{}, 0, fmt.Errorf("prefix %s is not an IPv6 address and subnet", p)
	}
	return p.Addr().As16(), uint8(p.Bits()), nil
}

// decodePrefix6 reads what encodePrefix6 wrote: length 0 is none, with
// the address all zero.
func decodePrefix6(addr []byte, bits uint8) (netip.Prefix, error) {
	a := netip.AddrFrom16([16]byte(addr))
	if bits > 128 {
		return netip.Prefix{}, fmt.Errorf("IPv6 prefix length %d", bits)
	}
	if bits == 0 {
		if !a.IsUnspecified() {
			return netip.Prefix{}, errReserved
		}
		return netip.Prefix{}, nil
	}
	if a.IsUnspecified() || a.Is4In6() {
		return netip.Prefix{}, fmt.Errorf("IPv6 address %s", a)
	}
	return netip.PrefixFrom(a, int(bits)), nil
}

func decodePrefix(addr []byte, bits uint8) (netip.Prefix, error) {
	a := netip.AddrFrom4([4]byte(addr))
	if bits > 32 {
		return netip.Prefix{}, fmt.Errorf("prefix length %d", bits)
	}
	if bits == 0 && a.IsUnspecified() {
		return netip.Prefix{}, nil
	}
	return netip.PrefixFrom(a, int(bits)), nil
}

// CheckName says whether s may name an element or a port: at most
// NameLen bytes of letters, digits and . _ - : / @ +. Names reach the
// routing suite's configuration (BIRD's descriptions, FRR's, comments),
// so nothing that quotes, ends a statement or starts a comment there
// passes, from a file or from the wire.
func CheckName(s string) error {
	if len(s) > NameLen {
		return fmt.Errorf("name %q longer than %d bytes", s, NameLen)
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._-:/@+", c) >= 0) {
			return fmt.Errorf("name %q: %q is not allowed: letters, digits and . _ - : / @ + only", s, c)
		}
	}
	return nil
}

// encodeName pads an element name with NULs to NameLen bytes.
func encodeName(s string) ([]byte, error) {
	if err := CheckName(s); err != nil {
		return nil, err
	}
	b := make([]byte, NameLen)
	copy(b, s)
	return b, nil
}

func decodeName(b []byte) (string, error) {
	n := 0
	for n < len(b) && b[n] != 0 {
		n++
	}
	if !allZero(b[n:]) {
		return "", errors.New("name: bytes after NUL")
	}
	s := string(b[:n])
	if _, err := encodeName(s); err != nil {
		return "", err
	}
	return s, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
