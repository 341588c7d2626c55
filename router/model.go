package router

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"slices"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/flow"
	"github.com/msr-router/msr/internal/inet"
)

// This file is the reference model of bpf/router.bpf.c: the same rules in
// plain Go over plain state, with a longest-prefix match that is slow and
// obviously right (one map per prefix length, searched from /32 down).
// The differential tests require the data path to agree with it on every
// verdict, output byte and counter. The agent does not use it.

// XDP verdicts.
const (
	XDPAborted = 0
	XDPDrop    = 1
	XDPPass    = 2
	XDPTx      = 3
)

// Model is the router's state in plain Go.
type Model struct {
	MAC       net.HardwareAddr
	Routes    map[netip.Prefix]uint32 // prefix -> next-hop group
	Groups    map[uint32][]uint32
	NextHops  map[uint32]ModelNextHop
	Ports     map[uint16]Port
	Neighbors map[NeighborKey]net.HardwareAddr
	Local     map[netip.Addr]uint32
	// Infra is the router's inside (rt_infra): the sources this host's
	// own addresses take.
	Infra []netip.Prefix
	ACL   []ACLRule
	// URPF is rt_vlans: the external ports' VLANs and their unicast RPF.
	URPF  map[uint16]dist.URPFMode
	Stats ModelStats
}

// ModelNextHop is a next hop in the model.
type ModelNextHop struct {
	GW   netip.Addr
	Port uint16
}

// NeighborKey names a neighbour: its address and the VLAN of its port.
type NeighborKey struct {
	IP   netip.Addr
	VLAN uint16
}

// ModelStats mirrors struct rt_stats.
type ModelStats struct {
	RxPackets, RxBytes, Forwarded, ForwardedBytes, Passed, Probes uint64
	Slow                                                          [len(SlowNames)]uint64
	Drop                                                          [len(DropNames)]uint64
	ACLPermit, ACLDeny                                            [MaxACL]uint64
}

// ModelResult is what the model does with a frame.
type ModelResult struct {
	Verdict int
	Out     []byte
	Slow    int // enum rt_slow, -1 if none
}

// LPM is the model's lookup, for either family.
func (m *Model) LPM(a netip.Addr) uint32 {
	for l := a.BitLen(); l >= 0; l-- {
		p, _ := a.Prefix(l)
		if v, ok := m.Routes[p]; ok {
			return v
		}
	}
	return 0
}

// Process runs one frame through the model.
func (m *Model) Process(frame []byte) ModelResult {
	st := &m.Stats
	st.RxPackets++
	st.RxBytes += uint64(len(frame))
	b := bytes.Clone(frame)
	drop := func(r rtxdpRtDrop) ModelResult { st.Drop[r]++; return ModelResult{Verdict: XDPDrop, Slow: -1} }
	slow := func(r rtxdpRtSlow) ModelResult { st.Slow[r]++; return ModelResult{Verdict: XDPDrop, Slow: int(r)} }
	if len(b) < 14 {
		return drop(rtxdpRtDropRT_DROP_RUNT)
	}
	proto := binary.BigEndian.Uint16(b[12:])
	if proto == dist.EtherType && len(b) > 15 && dist.MsgType(b[15]) == dist.TypeProbe && bytes.Equal(b[0:6], m.MAC) && b[6]&1 == 0 {
		copy(b[0:6], frame[6:12]) // an LB's PROBE, back to it
		copy(b[6:12], m.MAC)
		st.Probes++
		return ModelResult{Verdict: XDPTx, Out: b, Slow: -1}
	}
	if proto == dist.EtherType || proto == 0x0806 { // DIST; untagged ARP of the interconnect
		st.Passed++
		return ModelResult{Verdict: XDPPass, Out: b, Slow: -1}
	}
	var inVLAN uint16
	urpf := dist.URPFOff
	if proto == 0x8100 {
		if len(b) < 18 {
			return drop(rtxdpRtDropRT_DROP_RUNT)
		}
		switch binary.BigEndian.Uint16(b[16:]) {
		case 0x86dd:
			if len(b) < 18+41 {
				return drop(rtxdpRtDropRT_DROP_TAGGED)
			}
			if b[18+6] == 58 && b[18+40] >= 133 && b[18+40] <= 137 {
				return slow(rtxdpRtSlowRT_SLOW_NDP) // an external port's NDP, relayed by an LB
			}
		case 0x0806:
			return slow(rtxdpRtSlowRT_SLOW_ARP) // an external port's ARP, relayed by an LB
		case 0x0800:
		default:
			return drop(rtxdpRtDropRT_DROP_TAGGED)
		}
		// Data of a port with unicast RPF, tagged by its LB.
		inVLAN = binary.BigEndian.Uint16(b[14:]) & 0xfff
		mode, external := m.URPF[inVLAN]
		if !external {
			return drop(rtxdpRtDropRT_DROP_TAGGED)
		}
		urpf = mode
		b = append(b[:12:12], b[16:]...)
		proto = binary.BigEndian.Uint16(b[12:])
	}
	multicast := b[0]&1 != 0
	if !multicast && !bytes.Equal(b[0:6], m.MAC) {
		return drop(rtxdpRtDropRT_DROP_NOT_OURS)
	}
	if proto != 0x0800 && proto != 0x86dd {
		return drop(rtxdpRtDropRT_DROP_NOT_IP)
	}
	if multicast {
		return drop(rtxdpRtDropRT_DROP_MARTIAN_DST)
	}
	if proto == 0x86dd {
		return m.route6(b, inVLAN, urpf, drop, slow)
	}
	return m.route(b, inVLAN, urpf, drop, slow)
}

// urpfOK is router.bpf.c's urpf_ok: the source src may come in by the
// port of VLAN vlan.
func (m *Model) urpfOK(src netip.Addr, vlan uint16, mode dist.URPFMode) bool {
	g := m.LPM(src)
	if g == 0 {
		return false
	}
	if mode != dist.URPFStrict {
		return true
	}
	nhs := m.Groups[g]
	if len(nhs) == 0 || len(nhs) > ECMPMax {
		return false
	}
	for _, id := range nhs {
		nh, ok := m.NextHops[id]
		if p, okp := m.Ports[nh.Port]; ok && okp && p.VLAN != 0 && p.VLAN == vlan {
			return true
		}
	}
	return false
}

func (m *Model) route(b []byte, inVLAN uint16, urpf dist.URPFMode, drop func(rtxdpRtDrop) ModelResult, slow func(rtxdpRtSlow) ModelResult) ModelResult {
	if len(b) < 34 {
		return drop(rtxdpRtDropRT_DROP_RUNT)
	}
	ip := b[14:]
	if ip[0]>>4 != 4 {
		return drop(rtxdpRtDropRT_DROP_BAD_VERSION)
	}
	ihl := int(ip[0] & 0xf)
	if ihl < 5 {
		return drop(rtxdpRtDropRT_DROP_BAD_IHL)
	}
	tot := int(binary.BigEndian.Uint16(ip[2:]))
	if tot < ihl*4 || 14+tot > len(b) {
		return drop(rtxdpRtDropRT_DROP_BAD_LENGTH)
	}
	if ihl == 5 && inet.Checksum(ip[:20]) != 0 { // options: the slow path checks
		return drop(rtxdpRtDropRT_DROP_BAD_CHECKSUM)
	}
	s, d := binary.BigEndian.Uint32(ip[12:]), binary.BigEndian.Uint32(ip[16:])
	if martian(s) {
		return drop(rtxdpRtDropRT_DROP_MARTIAN_SRC)
	}
	if urpf != dist.URPFOff && !m.urpfOK(netip.AddrFrom4([4]byte(ip[12:16])), inVLAN, urpf) {
		return drop(rtxdpRtDropRT_DROP_URPF)
	}
	daddr := netip.AddrFrom4([4]byte(ip[16:20]))
	if k, ok := m.Local[daddr]; ok {
		return m.toLocal(k, netip.AddrFrom4([4]byte(ip[12:16])), b, slow, drop)
	}
	if martian(d) {
		return drop(rtxdpRtDropRT_DROP_MARTIAN_DST)
	}
	if ihl > 5 {
		return slow(rtxdpRtSlowRT_SLOW_OPTIONS)
	}
	if ip[8] <= 1 {
		return slow(rtxdpRtSlowRT_SLOW_TTL)
	}
	if m.denied(ip, ihl) {
		drop(rtxdpRtDropRT_DROP_ACL) // and the slow path answers
		return slow(rtxdpRtSlowRT_SLOW_ACL)
	}
	g := m.LPM(daddr)
	if g == 0 {
		return slow(rtxdpRtSlowRT_SLOW_NO_ROUTE)
	}
	nh, port, ok := m.nextHop(g, func() uint32 { return flow.OfIPv4(ip, ihl*4, FlowSeed) })
	if !ok {
		return drop(rtxdpRtDropRT_DROP_BAD_NEXTHOP)
	}
	if tot > int(port.MTU) {
		if binary.BigEndian.Uint16(ip[6:])&0x4000 != 0 {
			return slow(rtxdpRtSlowRT_SLOW_FRAG_NEEDED)
		}
		return slow(rtxdpRtSlowRT_SLOW_FRAGMENT)
	}
	target := nh.GW
	if !target.IsValid() {
		target = daddr
	}
	mac, ok := m.Neighbors[NeighborKey{target, port.VLAN}]
	if !ok {
		return slow(rtxdpRtSlowRT_SLOW_UNRESOLVED)
	}
	ip[8]--
	binary.BigEndian.PutUint16(ip[10:], 0)
	binary.BigEndian.PutUint16(ip[10:], inet.Checksum(ip[:ihl*4]))
	return m.egress(b, port, mac)
}

// toLocal is to_local: this host's addresses to the kernel from a source
// inside the router (else dropped: they came from outside by the balance
// path), the router's to the slow path.
func (m *Model) toLocal(kind uint32, src netip.Addr, b []byte, slow func(rtxdpRtSlow) ModelResult, drop func(rtxdpRtDrop) ModelResult) ModelResult {
	if kind&LocalHost != 0 {
		if !slices.ContainsFunc(m.Infra, func(p netip.Prefix) bool { return p.Contains(src) }) {
			return drop(rtxdpRtDropRT_DROP_INFRA)
		}
		m.Stats.Passed++
		return ModelResult{Verdict: XDPPass, Out: b, Slow: -1}
	}
	return slow(rtxdpRtSlowRT_SLOW_LOCAL)
}

// nextHop is nhgroup and next_hop: group g's next hop, chosen by hash
// (asked only when the group has several), and its port; false for a
// group, next hop or port that is not there.
func (m *Model) nextHop(g uint32, hash func() uint32) (ModelNextHop, Port, bool) {
	nhs := m.Groups[g]
	if len(nhs) == 0 || len(nhs) > ECMPMax {
		return ModelNextHop{}, Port{}, false
	}
	pick := 0
	if len(nhs) > 1 {
		pick = int(hash() % uint32(len(nhs)))
	}
	nh, ok := m.NextHops[nhs[pick]]
	if !ok {
		return ModelNextHop{}, Port{}, false
	}
	port, ok := m.Ports[nh.Port]
	if !ok || port.VLAN == 0 {
		return ModelNextHop{}, Port{}, false
	}
	return nh, port, true
}

// egress tags b for port's VLAN and addresses it to mac from us.
func (m *Model) egress(b []byte, port Port, mac net.HardwareAddr) ModelResult {
	out := make([]byte, 0, len(b)+4)
	out = append(out, mac...)
	out = append(out, m.MAC...)
	out = append(out, 0x81, 0x00, byte(port.VLAN>>8&0x0f), byte(port.VLAN), b[12], b[13])
	out = append(out, b[14:]...)
	m.Stats.Forwarded++
	m.Stats.ForwardedBytes += uint64(len(b))
	return ModelResult{Verdict: XDPTx, Out: out, Slow: -1}
}

// route6 is route6 of router.bpf.c.
func (m *Model) route6(b []byte, inVLAN uint16, urpf dist.URPFMode, drop func(rtxdpRtDrop) ModelResult, slow func(rtxdpRtSlow) ModelResult) ModelResult {
	if len(b) < 14+40 {
		return drop(rtxdpRtDropRT_DROP_RUNT)
	}
	ip := b[14:]
	if ip[0]>>4 != 6 {
		return drop(rtxdpRtDropRT_DROP_BAD_VERSION)
	}
	tot := 40 + int(binary.BigEndian.Uint16(ip[4:]))
	if tot > len(ip) {
		return drop(rtxdpRtDropRT_DROP_BAD_LENGTH)
	}
	src, dst := netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40]))
	if src.IsMulticast() || src.IsUnspecified() || src.IsLoopback() {
		return drop(rtxdpRtDropRT_DROP_MARTIAN_SRC)
	}
	if urpf != dist.URPFOff && !m.urpfOK(src, inVLAN, urpf) {
		return drop(rtxdpRtDropRT_DROP_URPF)
	}
	if k, ok := m.Local[dst]; ok {
		return m.toLocal(k, src, b, slow, drop)
	}
	if notRouted6(dst) {
		return drop(rtxdpRtDropRT_DROP_MARTIAN_DST)
	}
	if notRouted6(src) {
		return drop(rtxdpRtDropRT_DROP_MARTIAN_SRC)
	}
	if ip[6] == 0 {
		return slow(rtxdpRtSlowRT_SLOW_OPTIONS)
	}
	if ip[7] <= 1 {
		return slow(rtxdpRtSlowRT_SLOW_TTL)
	}
	if deny, ok := m.denied6(ip, tot); !ok {
		return drop(rtxdpRtDropRT_DROP_BAD_LENGTH)
	} else if deny {
		drop(rtxdpRtDropRT_DROP_ACL) // and the slow path answers
		return slow(rtxdpRtSlowRT_SLOW_ACL)
	}
	g := m.LPM(dst)
	if g == 0 {
		return slow(rtxdpRtSlowRT_SLOW_NO_ROUTE)
	}
	nh, port, ok := m.nextHop(g, func() uint32 { return flow.OfIPv6(ip, FlowSeed) })
	if !ok {
		return drop(rtxdpRtDropRT_DROP_BAD_NEXTHOP)
	}
	if tot > int(port.MTU) {
		return slow(rtxdpRtSlowRT_SLOW_FRAG_NEEDED)
	}
	target := nh.GW
	if !target.Is6() {
		target = dst
	}
	mac, ok := m.Neighbors[NeighborKey{target, port.VLAN}]
	if !ok {
		return slow(rtxdpRtSlowRT_SLOW_UNRESOLVED)
	}
	ip[7]--
	return m.egress(b, port, mac)
}

// notRouted6 is ip6_not_routed: ::, ::1, multicast, link-local and
// IPv4-mapped addresses are never forwarded.
func notRouted6(a netip.Addr) bool {
	return a.IsUnspecified() || a.IsLoopback() || a.IsMulticast() || a.IsLinkLocalUnicast() || a.Is4In6()
}

// martian is the address test of RFC 1812 §5.3.7 as the data path applies
// it: 0/8, 127/8, 224/4 (multicast), 240/4 (reserved and broadcast).
func martian(a uint32) bool {
	return a>>24 == 0 || a>>24 == 127 || a>>28 == 0xe || a>>28 == 0xf
}

func (m *Model) denied(ip []byte, ihl int) bool {
	var sport, dport uint16
	proto := ip[9]
	if binary.BigEndian.Uint16(ip[6:])&0x1fff == 0 && (proto == 6 || proto == 17) && len(ip) >= ihl*4+4 {
		sport = binary.BigEndian.Uint16(ip[ihl*4:])
		dport = binary.BigEndian.Uint16(ip[ihl*4+2:])
	}
	return m.aclVerdict(netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20])), proto, sport, dport)
}

// denied6 is acl6: the protocol and ports past the extension headers;
// false for the second result when the chain runs past the packet.
func (m *Model) denied6(ip []byte, tot int) (bool, bool) {
	if len(m.ACL) == 0 {
		return false, true
	}
	w, ok := inet.WalkIPv6(ip, tot)
	if !ok {
		return false, false
	}
	var sport, dport uint16
	if !w.Deep && !w.Frag && (w.Proto == 6 || w.Proto == 17) && w.Off+4 <= len(ip) && w.Off+4 <= tot {
		sport = binary.BigEndian.Uint16(ip[w.Off:])
		dport = binary.BigEndian.Uint16(ip[w.Off+2:])
	}
	return m.aclVerdict(netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40])), w.Proto, sport, dport), true
}

// aclVerdict runs the rules of src's family (and those of both) in order:
// the first that matches decides, counted.
func (m *Model) aclVerdict(src, dst netip.Addr, proto uint8, sport, dport uint16) bool {
	family := 4
	if src.Is6() {
		family = 6
	}
	for i, r := range m.ACL {
		if f := r.Family(); f != 0 && f != family {
			continue
		}
		if r.Src.IsValid() && r.Src.Bits() > 0 && !r.Src.Contains(src) || r.Dst.IsValid() && r.Dst.Bits() > 0 && !r.Dst.Contains(dst) {
			continue
		}
		if r.Proto != 0 && r.Proto != proto {
			continue
		}
		if sport < r.SportLo || sport > r.SportHi || dport < r.DportLo || dport > r.DportHi {
			continue
		}
		if r.Deny {
			m.Stats.ACLDeny[i]++
			return true
		}
		m.Stats.ACLPermit[i]++
		return false
	}
	return false
}

// FlowSeed is the back-end's flow-hash seed (bpf/common.h), for ECMP.
const FlowSeed = uint32(rtxdpFlowSeedFLOW_SEED_RT)
