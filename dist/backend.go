package dist

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
)

// The VCP configures the back-ends as it configures the LBs (the virtual
// control plane coordinates the elements): a back-end's own file
// holds only its identity, and BACKEND_CONFIG and ACL_CONFIG bring it the
// router's external ports, its own addresses, the RIB feed to dial and the
// router's ACL. docs/dist.md gives the layouts.

// Limits of the back-end messages.
const (
	// MaxBackendAddrs bounds the router's own addresses besides its
	// ports' (the management address) in one BACKEND_CONFIG.
	MaxBackendAddrs = 16
	// MaxACLRules is the back-end data path's ACL size (router.MaxACL).
	MaxACLRules    = 64
	backendHdrLen  = 20
	backendPortLen = 44
	// backendPageLen is the paging header that follows the header when
	// flag bit 3 says the ports are paged.
	backendPageLen = 8
	// MaxRouterPorts is the most external ports the router has: one per
	// VLAN id inside (1-4094), each a back-end's rt_ports entry.
	MaxRouterPorts = 4094
	// backendPortLenV0 is a port without its IPv6 address: what VCPs sent
	// before IPv6 (2026-11-23), still taken.
	backendPortLenV0 = 28
	aclHdrLen        = 16
	aclRuleLen       = 20
	// aclRule6Len is a rule of the layout with 16-byte addresses, sent when
	// a rule is IPv6's (header byte 9 says which layout).
	aclRule6Len     = 44
	aclActionPermit = 1
	aclActionDeny   = 2
)

// BackendPort is one external port of the router as a back-end serves it:
// the VLAN its frames carry inside, the router's address on it, its MTU,
// and the name the router gives it (lb1/e0). Down says the port is down
// (its link, or its LB dead): the back-end keeps its index but routes
// nothing to its subnets, as a router drops a down interface's connected
// routes.
type BackendPort struct {
	Name    string       `json:"name"`
	VLAN    uint16       `json:"vlan"`
	Prefix  netip.Prefix `json:"prefix"`
	Prefix6 netip.Prefix `json:"prefix6,omitzero"` // none: IPv4 only
	MTU     uint16       `json:"mtu"`
	URPF    URPFMode     `json:"urpf,omitzero"`
	Down    bool         `json:"down,omitzero"`
}

// portFlagDown is BackendPort.Down in a port's flags byte; its other bits
// are reserved.
const portFlagDown = 0x01

// URPFMode is an external port's unicast reverse-path check (RFC 3704)
// of the sources of what arrives on it: none, a route to the source
// (loose), or a route to it through the same port (strict).
type URPFMode uint8

const (
	URPFOff    URPFMode = 0
	URPFLoose  URPFMode = 1
	URPFStrict URPFMode = 2
)

// URPFModes name the modes, in the configs and the status.
var URPFModes = [...]string{"off", "loose", "strict"}

// ParseURPF reads a mode by its name; "" is off.
func ParseURPF(s string) (URPFMode, error) {
	if s == "" {
		return URPFOff, nil
	}
	for i, n := range URPFModes {
		if n == s {
			return URPFMode(i), nil
		}
	}
	return URPFOff, fmt.Errorf("urpf %q: off, loose or strict", s)
}

func (m URPFMode) String() string {
	if int(m) < len(URPFModes) {
		return URPFModes[m]
	}
	return fmt.Sprintf("urpf_%d", uint8(m))
}

// BackendConfig is sent by the active VCP to one back-end (Target): the
// router's external ports, its other own addresses of either family
// (Addrs: the slow path answers them), and the RIB feed (the VCP's iBGP listener and the
// router's AS; an invalid RIBNeighbor: no feed), and what the operator
// asked of this back-end: Drained (no new flows: `msr ctl drain`) and
// Capacity (its weight: `msr ctl weight`; 0: its own). The back-end keeps
// the operator's two and reports them in its hellos (HelloFlagDrained,
// HelloFlagCapacitySet), so that they outlive the VCP that was told: a
// standby takes them from the hellos.
type BackendConfig struct {
	Target      uint64        `json:"target"`
	RIBNeighbor netip.Addr    `json:"rib_neighbor"`
	RIBASN      uint32        `json:"rib_asn"`
	Ports       []BackendPort `json:"ports"`
	Addrs       []netip.Addr  `json:"addrs"`
	Drained     bool          `json:"drained,omitempty"`
	Capacity    uint32        `json:"capacity_mbps,omitempty"`
	// OperatorVersion orders the operator's changes (Drained, Capacity):
	// the VCP that took one stamps it with a version above every one it
	// has seen (its milliseconds since 1970 where that is higher), and the
	// back-end keeps the drain and weight of the highest version it was
	// sent, whichever VCP sent it, and says which in its hellos. So two
	// VCPs active at once (a split brain, each pushing its own view) cannot
	// undo the operator's last word: the one behind takes the newer from
	// the hellos. 0: no version (the back-end takes it as any other).
	OperatorVersion uint64 `json:"operator_version,omitempty"`
	// Generation, Page and Pages page the ports of a router with more than
	// MaxPorts (BackendConfigPages): every page carries all but the ports,
	// and a back-end applies the config once it holds every page of one
	// generation from one VCP (BackendConfigSet). Pages 0: one message,
	// unpaged, as before 2026-11-28.
	Generation uint32 `json:"generation,omitempty"`
	Page       uint8  `json:"page,omitempty"`
	Pages      uint8  `json:"pages,omitempty"`
}

// BACKEND_CONFIG's flags (byte 19, reserved before 2026-11-24).
const (
	backendFlagDrained  = 1 << 0
	backendFlagCapacity = 1 << 1 // the operator's capacity follows the addresses
	// backendFlagOperatorVersion: the operator's version (8 bytes) ends
	// the message (since 2026-11-24).
	backendFlagOperatorVersion = 1 << 2
	// backendFlagPaged: the paging header follows the header (since
	// 2026-11-28; a back-end from before refuses it, so back-ends are
	// upgraded before a router passes MaxPorts external ports).
	backendFlagPaged  = 1 << 3
	backendFlagsKnown = backendFlagDrained | backendFlagCapacity | backendFlagOperatorVersion | backendFlagPaged
)

// BackendConfigPages splits m into the messages that carry it: m itself
// when its ports fit one unpaged message (at most MaxPorts, which every
// back-end takes), else pages of generation, each with as many ports as a
// frame holds beside m's addresses and trailers.
func BackendConfigPages(m *BackendConfig, generation uint32) ([]*BackendConfig, error) {
	if len(m.Ports) > MaxRouterPorts {
		return nil, fmt.Errorf("%d ports, at most %d", len(m.Ports), MaxRouterPorts)
	}
	if len(m.Ports) <= MaxPorts {
		one := *m
		one.Generation, one.Page, one.Pages = 0, 0, 0
		return []*BackendConfig{&one}, nil
	}
	room := MaxBodyLen - backendHdrLen - backendPageLen - 4 - 8 // the capacity and the version, if any
	for _, a := range m.Addrs {
		room -= a.BitLen() / 8
	}
	perPage := min(room/backendPortLen, 255)
	n := (len(m.Ports) + perPage - 1) / perPage
	if perPage < 1 || n > 255 {
		return nil, fmt.Errorf("%d ports and %d addresses do not fit 255 pages", len(m.Ports), len(m.Addrs))
	}
	pages := make([]*BackendConfig, n)
	for i := range pages {
		page := *m
		page.Ports = m.Ports[i*perPage : min((i+1)*perPage, len(m.Ports))]
		page.Generation, page.Page, page.Pages = generation, uint8(i), uint8(n)
		pages[i] = &page
	}
	return pages, nil
}

// PortsDigest is a digest of the router's external ports as a back-end
// serves them (each port's VLAN, addresses, MTU, uRPF, name and state, in
// order): its hello says it (Hello.PortsDigest), the VCP compares it with
// the ports it sent. Never 0, which a hello reserves for none.
func PortsDigest(ports []BackendPort) uint64 {
	h := fnv.New64a()
	var b []byte
	for _, p := range ports {
		b = binary.BigEndian.AppendUint16(b[:0], p.VLAN)
		b = p.Prefix.AppendTo(append(b, ' '))
		b = p.Prefix6.AppendTo(append(b, ' '))
		b = binary.BigEndian.AppendUint16(b, p.MTU)
		b = append(b, uint8(p.URPF))
		b = append(append(b, p.Name...), 0)
		if p.Down {
			b = append(b, 'd')
		}
		h.Write(b)
	}
	return max(h.Sum64(), 1)
}

// BackendConfigSet gathers the pages of BACKEND_CONFIG into configs: a
// config is whole when it holds every page of one generation from one
// sender. A page of another sender or generation starts a new set.
type BackendConfigSet struct {
	sender     uint64
	generation uint32
	pages      []*BackendConfig
	have       int
}

// Add takes one message; it returns the whole config when the message
// completes one (an unpaged message at once), else nil.
func (s *BackendConfigSet) Add(sender uint64, m *BackendConfig) *BackendConfig {
	if m.Pages == 0 {
		return m
	}
	if s.pages == nil || sender != s.sender || m.Generation != s.generation || len(s.pages) != int(m.Pages) {
		*s = BackendConfigSet{sender: sender, generation: m.Generation, pages: make([]*BackendConfig, m.Pages)}
	}
	if s.pages[m.Page] == nil {
		s.have++
	}
	s.pages[m.Page] = m
	if s.have < len(s.pages) {
		return nil
	}
	whole := *s.pages[0]
	whole.Ports = nil
	for _, p := range s.pages {
		whole.Ports = append(whole.Ports, p.Ports...)
	}
	whole.Generation, whole.Page, whole.Pages = 0, 0, 0
	*s = BackendConfigSet{}
	return &whole
}

func (*BackendConfig) Type() MsgType { return TypeBackendConfig }

func (m *BackendConfig) appendBody(b []byte) ([]byte, error) {
	maxPorts := MaxPorts
	if m.Pages > 0 {
		maxPorts = 255
		if m.Page >= m.Pages {
			return nil, fmt.Errorf("page %d of %d", m.Page, m.Pages)
		}
	}
	if len(m.Ports) > maxPorts || len(m.Addrs) > MaxBackendAddrs {
		return nil, fmt.Errorf("%d ports, %d addresses: at most %d, %d", len(m.Ports), len(m.Addrs), maxPorts, MaxBackendAddrs)
	}
	var rib [4]byte
	if m.RIBNeighbor.IsValid() {
		if !m.RIBNeighbor.Is4() || m.RIBNeighbor.IsUnspecified() {
			return nil, fmt.Errorf("RIB neighbour %s is not an IPv4 address", m.RIBNeighbor)
		}
		rib = m.RIBNeighbor.As4()
	}
	var addrs4, addrs6 []netip.Addr
	for _, a := range m.Addrs {
		switch {
		case a.Is4() && !a.IsUnspecified():
			addrs4 = append(addrs4, a)
		case a.Is6() && !a.Is4In6() && !a.IsUnspecified():
			addrs6 = append(addrs6, a)
		default:
			return nil, fmt.Errorf("address %s is not a unicast address", a)
		}
	}
	b = binary.BigEndian.AppendUint64(b, m.Target)
	b = append(b, rib[:]...)
	b = binary.BigEndian.AppendUint32(b, m.RIBASN)
	var flags uint8
	if m.Drained {
		flags |= backendFlagDrained
	}
	if m.Capacity != 0 {
		flags |= backendFlagCapacity
	}
	if m.OperatorVersion != 0 {
		flags |= backendFlagOperatorVersion
	}
	if m.Pages > 0 {
		flags |= backendFlagPaged
	}
	b = append(b, uint8(len(m.Ports)), uint8(len(addrs4)), uint8(len(addrs6)), flags)
	if m.Pages > 0 {
		b = binary.BigEndian.AppendUint32(b, m.Generation)
		b = append(b, m.Page, m.Pages, 0, 0)
	}
	for _, p := range m.Ports {
		addr, bits, err := encodePrefix(p.Prefix)
		if err != nil {
			return nil, err
		}
		if p.VLAN == 0 || validVLAN(p.VLAN) != nil || !p.Prefix.IsValid() {
			return nil, fmt.Errorf("port %q: needs a VLAN id 1-4094 and an address", p.Name)
		}
		name, err := encodeName(p.Name)
		if err != nil {
			return nil, err
		}
		addr6, bits6, err := encodePrefix6(p.Prefix6)
		if err != nil {
			return nil, fmt.Errorf("port %q: %w", p.Name, err)
		}
		b = binary.BigEndian.AppendUint16(b, p.VLAN)
		b = append(b, bits, bits6)
		b = append(b, addr[:]...)
		if p.URPF > URPFStrict {
			return nil, fmt.Errorf("port %q: uRPF mode %d", p.Name, p.URPF)
		}
		b = binary.BigEndian.AppendUint16(b, p.MTU)
		var pflags uint8
		if p.Down {
			pflags |= portFlagDown
		}
		b = append(b, uint8(p.URPF), pflags)
		b = append(b, name...)
		b = append(b, addr6[:]...)
	}
	for _, a := range addrs4 {
		v := a.As4()
		b = append(b, v[:]...)
	}
	for _, a := range addrs6 {
		v := a.As16()
		b = append(b, v[:]...)
	}
	if m.Capacity != 0 {
		b = binary.BigEndian.AppendUint32(b, m.Capacity)
	}
	if m.OperatorVersion != 0 {
		b = binary.BigEndian.AppendUint64(b, m.OperatorVersion)
	}
	return b, nil
}

func (m *BackendConfig) decodeBody(b []byte) error {
	if len(b) < backendHdrLen {
		return errShort
	}
	np, na, na6, flags := int(b[16]), int(b[17]), int(b[18]), b[19]
	if flags&^backendFlagsKnown != 0 {
		return errReserved
	}
	var generation uint32
	var page, pages uint8
	maxPorts := MaxPorts
	if flags&backendFlagPaged != 0 {
		if len(b) < backendHdrLen+backendPageLen {
			return errShort
		}
		pg := b[backendHdrLen:][:backendPageLen]
		generation, page, pages = binary.BigEndian.Uint32(pg[0:4]), pg[4], pg[5]
		if pages == 0 || page >= pages || pg[6] != 0 || pg[7] != 0 {
			return fmt.Errorf("page %d of %d: %w", page, pages, errReserved)
		}
		// The paging header read, the rest is laid out as unpaged.
		b = append(slices.Clip(b[:backendHdrLen]), b[backendHdrLen+backendPageLen:]...)
		maxPorts = 255
	}
	var version uint64
	if flags&backendFlagOperatorVersion != 0 {
		var err error
		if version, b, err = cutTrailer64(b, backendHdrLen, "operator's version"); err != nil {
			return err
		}
	}
	trailer := 0
	if flags&backendFlagCapacity != 0 {
		trailer = 4
	}
	portLen := backendPortLen
	if na6 == 0 && flags == 0 && len(b) == backendHdrLen+np*backendPortLenV0+na*4 {
		portLen = backendPortLenV0
	}
	if np > maxPorts || na+na6 > MaxBackendAddrs || len(b) != backendHdrLen+np*portLen+na*4+na6*16+trailer {
		return fmt.Errorf("%d ports and %d+%d addresses in %d bytes", np, na, na6, len(b))
	}
	*m = BackendConfig{Target: binary.BigEndian.Uint64(b[0:8]), RIBASN: binary.BigEndian.Uint32(b[12:16]), Drained: flags&backendFlagDrained != 0, OperatorVersion: version,
		Generation: generation, Page: page, Pages: pages}
	if trailer > 0 {
		if m.Capacity = binary.BigEndian.Uint32(b[len(b)-4:]); m.Capacity == 0 {
			return fmt.Errorf("operator's capacity 0: %w", errReserved)
		}
	}
	if rib := netip.AddrFrom4([4]byte(b[8:12])); !rib.IsUnspecified() {
		m.RIBNeighbor = rib
	} else if m.RIBASN != 0 {
		return fmt.Errorf("RIB AS %d without a neighbour: %w", m.RIBASN, errReserved)
	}
	for i := range np {
		e := b[backendHdrLen+i*portLen:][:portLen]
		prefix, err := decodePrefix(e[4:8], e[2])
		if err != nil {
			return fmt.Errorf("port %d: %w", i, err)
		}
		var prefix6 netip.Prefix
		if portLen == backendPortLen {
			if prefix6, err = decodePrefix6(e[28:44], e[3]); err != nil {
				return fmt.Errorf("port %d: %w", i, err)
			}
		} else if e[3] != 0 {
			return fmt.Errorf("port %d: %w", i, errReserved)
		}
		if e[10] > uint8(URPFStrict) {
			return fmt.Errorf("port %d: uRPF mode %d", i, e[10])
		}
		if e[11]&^portFlagDown != 0 {
			return fmt.Errorf("port %d: %w", i, errReserved)
		}
		name, err := decodeName(e[12:28])
		if err != nil {
			return fmt.Errorf("port %d: %w", i, err)
		}
		p := BackendPort{Name: name, VLAN: binary.BigEndian.Uint16(e[0:2]), Prefix: prefix, Prefix6: prefix6, MTU: binary.BigEndian.Uint16(e[8:10]),
			URPF: URPFMode(e[10]), Down: e[11]&portFlagDown != 0}
		if p.VLAN == 0 || validVLAN(p.VLAN) != nil || !p.Prefix.IsValid() {
			return fmt.Errorf("port %d: VLAN %d, address %v", i, p.VLAN, p.Prefix)
		}
		m.Ports = append(m.Ports, p)
	}
	for i := range na {
		off := backendHdrLen + np*portLen + i*4
		a := netip.AddrFrom4([4]byte(b[off : off+4]))
		if a.IsUnspecified() {
			return fmt.Errorf("address %d: %w", i, errReserved)
		}
		m.Addrs = append(m.Addrs, a)
	}
	for i := range na6 {
		off := backendHdrLen + np*portLen + na*4 + i*16
		a := netip.AddrFrom16([16]byte(b[off : off+16]))
		if a.IsUnspecified() || a.Is4In6() || a.IsMulticast() {
			return fmt.Errorf("IPv6 address %d: %w", i, errReserved)
		}
		m.Addrs = append(m.Addrs, a)
	}
	return nil
}

// ACLRule is one rule of the router's ACL: the first rule a packet
// matches decides (Deny or permit); a zero Proto is any protocol, an
// invalid prefix any address, ports are inclusive ranges.
type ACLRule struct {
	Deny    bool         `json:"deny"`
	Proto   uint8        `json:"proto"`
	Src     netip.Prefix `json:"src"`
	Dst     netip.Prefix `json:"dst"`
	SportLo uint16       `json:"sport_lo"`
	SportHi uint16       `json:"sport_hi"`
	DportLo uint16       `json:"dport_lo"`
	DportHi uint16       `json:"dport_hi"`
}

// ACLConfig is sent by the active VCP to one back-end (Target): the
// router's ACL, the whole of it (an empty list: no ACL).
type ACLConfig struct {
	Target uint64    `json:"target"`
	Rules  []ACLRule `json:"rules"`
}

func (*ACLConfig) Type() MsgType { return TypeACLConfig }

func (m *ACLConfig) appendBody(b []byte) ([]byte, error) {
	if len(m.Rules) > MaxACLRules {
		return nil, fmt.Errorf("%d ACL rules, at most %d", len(m.Rules), MaxACLRules)
	}
	// The layout of 4-byte addresses unless a rule needs 16: a back-end
	// from before IPv6 takes an IPv4 ACL as it always did.
	wide := false
	for _, r := range m.Rules {
		wide = wide || r.Src.Addr().Is6() || r.Dst.Addr().Is6()
	}
	b = binary.BigEndian.AppendUint64(b, m.Target)
	b = append(b, uint8(len(m.Rules)), boolByte(wide), 0, 0, 0, 0, 0, 0)
	for i, r := range m.Rules {
		if r.SportLo > r.SportHi || r.DportLo > r.DportHi {
			return nil, fmt.Errorf("rule %d: empty port range", i)
		}
		if r.Src.IsValid() && r.Dst.IsValid() && r.Src.Addr().Is6() != r.Dst.Addr().Is6() {
			return nil, fmt.Errorf("rule %d: source and destination of two families", i)
		}
		action := uint8(aclActionPermit)
		if r.Deny {
			action = aclActionDeny
		}
		if wide {
			src, sbits, err := encodeRulePrefix(r.Src)
			if err != nil {
				return nil, fmt.Errorf("rule %d: %w", i, err)
			}
			dst, dbits, err := encodeRulePrefix(r.Dst)
			if err != nil {
				return nil, fmt.Errorf("rule %d: %w", i, err)
			}
			b = append(b, action, r.Proto, sbits, dbits)
			b = append(b, src[:]...)
			b = append(b, dst[:]...)
		} else {
			src, sbits, err := encodePrefix(r.Src)
			if err != nil {
				return nil, err
			}
			dst, dbits, err := encodePrefix(r.Dst)
			if err != nil {
				return nil, err
			}
			b = append(b, action, r.Proto, sbits, dbits)
			b = append(b, src[:]...)
			b = append(b, dst[:]...)
		}
		for _, v := range []uint16{r.SportLo, r.SportHi, r.DportLo, r.DportHi} {
			b = binary.BigEndian.AppendUint16(b, v)
		}
	}
	return b, nil
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// encodeRulePrefix is a rule's prefix in the wide layout: 16 bytes, an
// IPv4 prefix as its IPv4-mapped address with 96 added to its length
// (RFC 4291 §2.5.5.2), so that the family travels with it; none is all
// zero.
func encodeRulePrefix(p netip.Prefix) ([16]byte, uint8, error) {
	switch {
	case !p.IsValid():
		return [16]byte{}, 0, nil
	case p.Addr().Is4():
		return netip.AddrFrom4(p.Addr().As4()).As16(), uint8(96 + p.Bits()), nil
	case p.Addr().Is4In6():
		return [16]byte{}, 0, fmt.Errorf("prefix %s: IPv4-mapped", p)
	}
	return p.Addr().As16(), uint8(p.Bits()), nil
}

// decodeRulePrefix reads what encodeRulePrefix wrote.
func decodeRulePrefix(addr []byte, bits uint8) (netip.Prefix, error) {
	a := netip.AddrFrom16([16]byte(addr))
	switch {
	case bits > 128:
		return netip.Prefix{}, fmt.Errorf("prefix length %d", bits)
	case bits == 0 && a.IsUnspecified():
		return netip.Prefix{}, nil
	case a.Is4In6():
		if bits < 96 {
			return netip.Prefix{}, fmt.Errorf("IPv4 prefix of length %d", int(bits)-96)
		}
		return netip.PrefixFrom(a.Unmap(), int(bits)-96), nil
	}
	return netip.PrefixFrom(a, int(bits)), nil
}

func (m *ACLConfig) decodeBody(b []byte) error {
	if len(b) < aclHdrLen {
		return errShort
	}
	n, wide := int(b[8]), b[9] == 1
	ruleLen := aclRuleLen
	if wide {
		ruleLen = aclRule6Len
	}
	if n > MaxACLRules || len(b) != aclHdrLen+n*ruleLen {
		return fmt.Errorf("%d ACL rules in %d bytes", n, len(b))
	}
	if b[9] > 1 || !allZero(b[10:16]) {
		return errReserved
	}
	*m = ACLConfig{Target: binary.BigEndian.Uint64(b[0:8])}
	for i := range n {
		e := b[aclHdrLen+i*ruleLen:][:ruleLen]
		if e[0] != aclActionPermit && e[0] != aclActionDeny {
			return fmt.Errorf("rule %d: action %d: %w", i, e[0], errReserved)
		}
		var src, dst netip.Prefix
		var err error
		if wide {
			if src, err = decodeRulePrefix(e[4:20], e[2]); err == nil {
				dst, err = decodeRulePrefix(e[20:36], e[3])
			}
		} else if src, err = decodePrefix(e[4:8], e[2]); err == nil {
			dst, err = decodePrefix(e[8:12], e[3])
		}
		if err != nil {
			return fmt.Errorf("rule %d: %w", i, err)
		}
		if src.IsValid() && dst.IsValid() && src.Addr().Is6() != dst.Addr().Is6() {
			return fmt.Errorf("rule %d: source and destination of two families", i)
		}
		ports := e[len(e)-8:]
		r := ACLRule{Deny: e[0] == aclActionDeny, Proto: e[1], Src: src, Dst: dst,
			SportLo: binary.BigEndian.Uint16(ports[0:2]), SportHi: binary.BigEndian.Uint16(ports[2:4]),
			DportLo: binary.BigEndian.Uint16(ports[4:6]), DportHi: binary.BigEndian.Uint16(ports[6:8])}
		if r.SportLo > r.SportHi || r.DportLo > r.DportHi {
			return fmt.Errorf("rule %d: empty port range", i)
		}
		m.Rules = append(m.Rules, r)
	}
	return nil
}
