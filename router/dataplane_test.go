package router

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/element"
	"github.com/msr-router/msr/internal/inet"
	"github.com/msr-router/msr/internal/routetable"
	"github.com/msr-router/msr/router/routerapi"
)

var (
	macSelf  = net.HardwareAddr{2, 0, 0, 0, 0xb0, 1}
	macLB    = net.HardwareAddr{2, 0, 0, 0, 0x10, 0}
	macNbr   = []net.HardwareAddr{{2, 0, 0, 0, 0xaa, 1}, {2, 0, 0, 0, 0xaa, 2}, {2, 0, 0, 0, 0xaa, 3}}
	bcastMAC = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
)

// routerState is one configuration, written both into the data path and
// into a model.
type routerState struct {
	dp *Dataplane
	m  *Model
}

// The IPv6 side of the test router: each port's subnet, next hops 9-11
// via gateway ::2 of each port (resolved but on port 2) and 12-14
// connected, groups 9-13 of gateways (12 and 13 ECMP), 14-16 connected.
var ports6 = []netip.Prefix{netip.MustParsePrefix("2001:db8:a::1/64"), netip.MustParsePrefix("2001:db8:b::1/64"), netip.MustParsePrefix("2001:db8:c::1/64")}

func newRouterState(t *testing.T, prefixes []netip.Prefix, r *rand.Rand) *routerState {
	t.Helper()
	return newRouterStateSized(t, prefixes, r, Sizes{})
}

func newRouterStateSized(t *testing.T, prefixes []netip.Prefix, r *rand.Rand, sizes Sizes) *routerState {
	t.Helper()
	dp, err := LoadDataplane("", sizes, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	m := &Model{MAC: macSelf, Routes: map[netip.Prefix]uint32{}, Groups: map[uint32][]uint32{}, NextHops: map[uint32]ModelNextHop{},
		Ports: map[uint16]Port{}, Neighbors: map[NeighborKey]net.HardwareAddr{}, Local: map[netip.Addr]uint32{}}
	s := &routerState{dp: dp, m: m}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	ports := []Port{
		{Index: 0, VLAN: 10, MTU: 1500, Addr: netip.MustParsePrefix("192.0.2.1/24"), Addr6: ports6[0]},
		{Index: 1, VLAN: 11, MTU: 1500, Addr: netip.MustParsePrefix("198.51.100.1/24"), Addr6: ports6[1]},
		{Index: 2, VLAN: 12, MTU: 1400, Addr: netip.MustParsePrefix("203.0.113.1/24"), Addr6: ports6[2]},
	}
	for _, p := range ports {
		must(dp.SetPort(p))
		m.Ports[p.Index] = p
	}
	// Next hops 1-3: a gateway on each port; 4-6: connected on each port.
	for i := uint32(0); i < 3; i++ {
		gw := ports[i].Addr.Addr().Next().Next()
		must(dp.SetNextHop(1+i, gw, uint16(i)))
		m.NextHops[1+i] = ModelNextHop{GW: gw, Port: uint16(i)}
		must(dp.SetNextHop(4+i, netip.Addr{}, uint16(i)))
		m.NextHops[4+i] = ModelNextHop{Port: uint16(i)}
		// The gateways are resolved except on port 2.
		if i < 2 {
			must(dp.SetNeighbor(gw, ports[i].VLAN, macNbr[i]))
			m.Neighbors[NeighborKey{gw, ports[i].VLAN}] = macNbr[i]
		}
	}
	// Connected hosts .10 of each subnet are resolved.
	for i, p := range ports {
		h := netip.AddrFrom4([4]byte(p.Addr.Addr().AsSlice())).Next().Next().Next().Next().Next().Next().Next().Next().Next()
		must(dp.SetNeighbor(h, p.VLAN, macNbr[i]))
		m.Neighbors[NeighborKey{h, p.VLAN}] = macNbr[i]
	}
	for i := uint32(0); i < 3; i++ {
		gw := ports6[i].Masked().Addr().Next().Next()
		must(dp.SetNextHop(9+i, gw, uint16(i)))
		m.NextHops[9+i] = ModelNextHop{GW: gw, Port: uint16(i)}
		must(dp.SetNextHop(12+i, netip.Addr{}, uint16(i)))
		m.NextHops[12+i] = ModelNextHop{Port: uint16(i)}
		h := ports6[i].Masked().Addr().As16()
		h[15] = 0x10
		for _, a := range []netip.Addr{gw, netip.AddrFrom16(h)} {
			if a == gw && i == 2 {
				continue
			}
			must(dp.SetNeighbor(a, ports[i].VLAN, macNbr[i]))
			m.Neighbors[NeighborKey{a, ports[i].VLAN}] = macNbr[i]
		}
	}
	groups := map[uint32][]uint32{1: {1}, 2: {2}, 3: {3}, 4: {1, 2}, 5: {1, 2, 3}, 6: {4}, 7: {5}, 8: {6},
		9: {9}, 10: {10}, 11: {11}, 12: {9, 10}, 13: {9, 10, 11}, 14: {12}, 15: {13}, 16: {14}}
	for g, nhs := range groups {
		must(dp.SetGroup(g, nhs))
		m.Groups[g] = nhs
	}
	routes, routes6 := map[netip.Prefix]uint32{}, map[netip.Prefix]uint32{}
	for _, p := range prefixes {
		if p.Addr().Is6() {
			routes6[p] = uint32(9 + r.IntN(5))
		} else {
			routes[p] = uint32(1 + r.IntN(5))
		}
	}
	for i, p := range ports {
		routes[p.Addr.Masked()] = uint32(6 + i)
		routes6[p.Addr6.Masked()] = uint32(14 + i)
	}
	must(dp.FIB.SetAll(routes))
	must(dp.FIB6.SetAll(routes6))
	maps.Copy(routes, routes6)
	m.Routes = routes
	for _, a := range []string{"192.0.2.1", "198.51.100.1", "203.0.113.1", "10.255.0.1", "2001:db8:a::1", "2001:db8:b::1", "2001:db8:c::1", "2001:db8:ffff::1"} {
		must(dp.SetLocal(netip.MustParseAddr(a), LocalRouter))
		m.Local[netip.MustParseAddr(a)] = LocalRouter
	}
	for _, a := range []string{"10.0.0.11", "fd00::11"} {
		must(dp.SetLocal(netip.MustParseAddr(a), LocalHost))
		m.Local[netip.MustParseAddr(a)] = LocalHost
	}
	m.Infra = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24"), netip.MustParsePrefix("fd00::/64")}
	must(dp.SetInfra(m.Infra))
	m.ACL = []ACLRule{
		{Dst: netip.MustParsePrefix("203.0.113.0/24"), Proto: 17, DportLo: 53, DportHi: 53, SportHi: 65535, Deny: true},
		{Src: netip.MustParsePrefix("198.18.0.0/15"), Proto: 6, SportHi: 65535, DportLo: 0, DportHi: 1023},
		{Dst: netip.MustParsePrefix("100.64.0.0/10"), Deny: true, SportHi: 65535, DportHi: 65535},
		{Dst: netip.MustParsePrefix("2001:db8:c::/64"), Proto: 17, DportLo: 53, DportHi: 53, SportHi: 65535, Deny: true},
		{Proto: 6, DportLo: 23, DportHi: 23, SportHi: 65535, Deny: true}, // both families
	}
	must(dp.SetACL(macSelf, m.ACL))
	m.URPF = map[uint16]dist.URPFMode{10: dist.URPFStrict, 11: dist.URPFLoose, 12: dist.URPFOff}
	must(dp.SetURPFs(m.URPF))
	return s
}

func (s *routerState) run(frame []byte) (int, []byte, error) {
	out := make([]byte, len(frame)+64)
	ret, err := s.dp.Program().Run(&ebpf.RunOptions{Data: frame, DataOut: out})
	return int(ret), out, err
}

func (s *routerState) stats() (ModelStats, error) {
	var per []rtxdpRtStats
	var st ModelStats
	if err := s.dp.objs.RtCounters.Lookup(uint32(0), &per); err != nil {
		return st, err
	}
	for _, c := range per {
		st.RxPackets += c.RxPackets
		st.RxBytes += c.RxBytes
		st.Forwarded += c.Forwarded
		st.ForwardedBytes += c.ForwardedBytes
		st.Passed += c.Passed
		st.Probes += c.Probes
		for i := range st.Slow {
			st.Slow[i] += c.Slow[i]
		}
		for i := range st.Drop {
			st.Drop[i] += c.Drop[i]
		}
		for i := range st.ACLPermit {
			st.ACLPermit[i] += c.AclPermit[i]
			st.ACLDeny[i] += c.AclDeny[i]
		}
	}
	return st, nil
}

func (s *routerState) compare(frame []byte, counters bool) (ModelResult, error) {
	want := s.m.Process(frame)
	ret, out, err := s.run(frame)
	if err != nil {
		return want, err
	}
	if ret != want.Verdict {
		return want, fmt.Errorf("verdict %d, model %d (slow %d)", ret, want.Verdict, want.Slow)
	}
	if want.Verdict != XDPDrop && !bytes.Equal(out[:len(want.Out)], want.Out) {
		return want, fmt.Errorf("output\n got %x\nwant %x", out[:len(want.Out)], want.Out)
	}
	if counters {
		got, err := s.stats()
		if err != nil {
			return want, err
		}
		if got != s.m.Stats {
			return want, fmt.Errorf("counters\n got %+v\nwant %+v", got, s.m.Stats)
		}
	}
	return want, nil
}

// frame builders

func ethFrame(dst, src net.HardwareAddr, proto uint16, payload []byte) []byte {
	b := append(append(append([]byte{}, dst...), src...), byte(proto>>8), byte(proto))
	return append(b, payload...)
}

func ipPacket(src, dst netip.Addr, proto, ttl uint8, flags uint16, payload []byte) []byte {
	h := make([]byte, 20)
	h[0], h[8], h[9] = 0x45, ttl, proto
	binary.BigEndian.PutUint16(h[2:], uint16(20+len(payload)))
	binary.BigEndian.PutUint16(h[6:], flags)
	copy(h[12:], src.AsSlice())
	copy(h[16:], dst.AsSlice())
	binary.BigEndian.PutUint16(h[10:], inet.Checksum(h))
	return append(h, payload...)
}

func udpPayload(sport, dport uint16, n int) []byte {
	b := make([]byte, 8+n)
	binary.BigEndian.PutUint16(b, sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	binary.BigEndian.PutUint16(b[4:], uint16(8+n))
	return b
}

func data(dst netip.Addr, ttl uint8) []byte {
	return ethFrame(macSelf, macLB, 0x0800, ipPacket(netip.MustParseAddr("198.18.0.7"), dst, 17, ttl, 0, udpPayload(4000, 5000, 18)))
}

// ip6Packet is an IPv6 header (hop limit hl) and its payload.
func ip6Packet(src, dst netip.Addr, nh, hl uint8, payload []byte) []byte {
	h := make([]byte, 40)
	h[0], h[6], h[7] = 0x60, nh, hl
	binary.BigEndian.PutUint16(h[4:], uint16(len(payload)))
	copy(h[8:], src.AsSlice())
	copy(h[24:], dst.AsSlice())
	return append(h, payload...)
}

func data6(dst netip.Addr, hl uint8) []byte {
	return ethFrame(macSelf, macLB, 0x86dd, ip6Packet(netip.MustParseAddr("2001:2::7"), dst, 17, hl, udpPayload(4000, 5000, 18)))
}

type routerCase struct {
	name    string
	frame   []byte
	verdict int
	slow    string
	drop    string
	out     []byte
}

func routerCases() []routerCase {
	fwd := func(dst string, nbr net.HardwareAddr, vlan uint16) []byte {
		in := data(netip.MustParseAddr(dst), 64)
		ip := bytes.Clone(in[14:])
		ip[8]--
		binary.BigEndian.PutUint16(ip[10:], 0)
		binary.BigEndian.PutUint16(ip[10:], inet.Checksum(ip[:20]))
		out := append(append(append([]byte{}, nbr...), macSelf...), 0x81, 0, byte(vlan>>8), byte(vlan), 8, 0)
		return append(out, ip...)
	}
	badSum := data(netip.MustParseAddr("192.0.2.10"), 64)
	badSum[24] ^= 0xff
	options := ethFrame(macSelf, macLB, 0x0800, func() []byte {
		p := ipPacket(netip.MustParseAddr("198.18.0.7"), netip.MustParseAddr("192.0.2.10"), 17, 64, 0, udpPayload(1, 2, 4))
		p = append(p[:20:20], append([]byte{1, 1, 1, 0}, p[20:]...)...)
		p[0] = 0x46
		binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
		binary.BigEndian.PutUint16(p[10:], 0)
		binary.BigEndian.PutUint16(p[10:], inet.Checksum(p[:24]))
		return p
	}())
	big := func(df uint16) []byte {
		return ethFrame(macSelf, macLB, 0x0800, ipPacket(netip.MustParseAddr("198.18.0.7"), netip.MustParseAddr("203.0.113.10"), 17, 64, df, udpPayload(1, 2, 1450)))
	}
	fwd6 := func(dst string, nbr net.HardwareAddr, vlan uint16) []byte {
		ip := bytes.Clone(data6(netip.MustParseAddr(dst), 64)[14:])
		ip[7]--
		out := append(append(append([]byte{}, nbr...), macSelf...), 0x81, 0, byte(vlan>>8), byte(vlan), 0x86, 0xdd)
		return append(out, ip...)
	}
	from6 := func(src, dst string) []byte {
		return ethFrame(macSelf, macLB, 0x86dd, ip6Packet(netip.MustParseAddr(src), netip.MustParseAddr(dst), 17, 64, udpPayload(1, 2, 4)))
	}
	big6 := ethFrame(macSelf, macLB, 0x86dd, ip6Packet(netip.MustParseAddr("2001:2::7"), netip.MustParseAddr("2001:db8:c::10"), 17, 64, udpPayload(1, 2, 1400)))
	hbh := ethFrame(macSelf, macLB, 0x86dd, ip6Packet(netip.MustParseAddr("2001:2::7"), netip.MustParseAddr("2001:db8:a::10"), 0, 64, append([]byte{17, 0, 1, 4, 0, 0, 0, 0}, udpPayload(1, 2, 4)...)))
	na := append([]byte{0, 10, 0x86, 0xdd}, ip6Packet(netip.MustParseAddr("2001:db8:a::2"), netip.MustParseAddr("2001:db8:a::1"), 58, 255, append([]byte{136}, make([]byte, 31)...))...)
	// tagged is a packet as an LB balances it from a port with unicast
	// RPF: tagged with the port's VLAN.
	tagged := func(vlan uint16, src, dst string) []byte {
		s, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
		if s.Is6() {
			return ethFrame(macSelf, macLB, 0x8100, append([]byte{byte(vlan >> 8), byte(vlan), 0x86, 0xdd}, ip6Packet(s, d, 17, 64, udpPayload(1, 2, 4))...))
		}
		return ethFrame(macSelf, macLB, 0x8100, append([]byte{byte(vlan >> 8), byte(vlan), 8, 0}, ipPacket(s, d, 17, 64, 0, udpPayload(1, 2, 4))...))
	}
	probeBody := append([]byte{1, byte(dist.TypeProbe)}, make([]byte, 78)...)
	return []routerCase{
		{name: "connected host, resolved", frame: data(netip.MustParseAddr("192.0.2.10"), 64), verdict: XDPTx, out: fwd("192.0.2.10", macNbr[0], 10)},
		{name: "via a resolved gateway", frame: data(netip.MustParseAddr("198.51.100.10"), 64), verdict: XDPTx, out: fwd("198.51.100.10", macNbr[1], 11)},
		{name: "TTL 1: Time Exceeded", frame: data(netip.MustParseAddr("192.0.2.10"), 1), verdict: XDPDrop, slow: "ttl"},
		{name: "TTL 0", frame: data(netip.MustParseAddr("192.0.2.10"), 0), verdict: XDPDrop, slow: "ttl"},
		{name: "no route", frame: data(netip.MustParseAddr("100.0.0.1"), 64), verdict: XDPDrop, slow: "no_route"},
		{name: "unresolved neighbour", frame: data(netip.MustParseAddr("203.0.113.77"), 64), verdict: XDPDrop, slow: "unresolved"},
		{name: "DF and over the MTU", frame: big(0x4000), verdict: XDPDrop, slow: "frag_needed"},
		{name: "over the MTU, may fragment", frame: big(0), verdict: XDPDrop, slow: "fragment"},
		{name: "for the router", frame: data(netip.MustParseAddr("192.0.2.1"), 64), verdict: XDPDrop, slow: "local"},
		{name: "for this host, from inside", frame: ethFrame(macSelf, macLB, 0x0800, ipPacket(netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.11"), 6, 64, 0, udpPayload(179, 40000, 18))), verdict: XDPPass},
		{name: "for this host, from outside (the balance path)", frame: data(netip.MustParseAddr("10.0.0.11"), 64), verdict: XDPDrop, drop: "infra"},
		{name: "IP options", frame: options, verdict: XDPDrop, slow: "options"},
		{name: "ARP broadcast by an LB, tagged", frame: ethFrame(bcastMAC, macLB, 0x8100, append([]byte{0, 10, 8, 6}, make([]byte, 28)...)), verdict: XDPDrop, slow: "arp"},
		{name: "DIST", frame: ethFrame(bcastMAC, macLB, 0x88B5, make([]byte, 80)), verdict: XDPPass},
		{name: "DIST PROBE of an LB, reflected", frame: ethFrame(macSelf, macLB, 0x88B5, probeBody), verdict: XDPTx, out: ethFrame(macLB, macSelf, 0x88B5, probeBody)},
		{name: "DIST PROBE for another back-end", frame: ethFrame(macLB, macNbr[0], 0x88B5, probeBody), verdict: XDPPass},
		{name: "DIST PROBE from a group address", frame: ethFrame(macSelf, bcastMAC, 0x88B5, probeBody), verdict: XDPPass},
		{name: "DIST cut before its type", frame: ethFrame(macSelf, macLB, 0x88B5, []byte{1}), verdict: XDPPass},
		{name: "untagged ARP (the interconnect's own)", frame: ethFrame(bcastMAC, macLB, 0x0806, make([]byte, 28)), verdict: XDPPass},
		{name: "bad checksum", frame: badSum, verdict: XDPDrop, drop: "bad_checksum"},
		{name: "version 6 in an IPv4 frame", frame: func() []byte { f := data(netip.MustParseAddr("192.0.2.10"), 64); f[14] = 0x65; return f }(), verdict: XDPDrop, drop: "bad_version"},
		{name: "IHL 4", frame: func() []byte { f := data(netip.MustParseAddr("192.0.2.10"), 64); f[14] = 0x44; return f }(), verdict: XDPDrop, drop: "bad_ihl"},
		{name: "total length past the frame", frame: data(netip.MustParseAddr("192.0.2.10"), 64)[:40], verdict: XDPDrop, drop: "bad_length"},
		{name: "source 127.0.0.1", frame: ethFrame(macSelf, macLB, 0x0800, ipPacket(netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("192.0.2.10"), 17, 64, 0, udpPayload(1, 2, 4))), verdict: XDPDrop, drop: "martian_src"},
		{name: "destination 0.1.2.3", frame: data(netip.MustParseAddr("0.1.2.3"), 64), verdict: XDPDrop, drop: "martian_dst"},
		{name: "multicast destination", frame: data(netip.MustParseAddr("239.1.1.1"), 64), verdict: XDPDrop, drop: "martian_dst"},
		{name: "ACL: DNS to 203.0.113.0/24 denied", frame: ethFrame(macSelf, macLB, 0x0800, ipPacket(netip.MustParseAddr("198.18.0.7"), netip.MustParseAddr("203.0.113.10"), 17, 64, 0, udpPayload(999, 53, 20))), verdict: XDPDrop, drop: "acl", slow: "acl"},
		{name: "ACL: 100.64/10 denied", frame: data(netip.MustParseAddr("100.64.1.1"), 64), verdict: XDPDrop, drop: "acl", slow: "acl"},
		{name: "tagged IPv4 of no external port", frame: ethFrame(macSelf, macLB, 0x8100, append([]byte{0, 99, 8, 0}, make([]byte, 40)...)), verdict: XDPDrop, drop: "tagged"},
		{name: "tagged neither IP nor ARP", frame: ethFrame(macSelf, macLB, 0x8100, append([]byte{0, 10, 0x88, 0x47}, make([]byte, 40)...)), verdict: XDPDrop, drop: "tagged"},
		// Unicast RPF: VLAN 10 strict, 11 loose, 12 off.
		{name: "uRPF strict: source through its own port", frame: tagged(10, "192.0.2.77", "198.51.100.10"), verdict: XDPTx},
		{name: "uRPF strict: source through another port", frame: tagged(10, "198.51.100.77", "192.0.2.10"), verdict: XDPDrop, drop: "urpf"},
		{name: "uRPF strict: source without a route", frame: tagged(10, "100.99.0.1", "192.0.2.10"), verdict: XDPDrop, drop: "urpf"},
		{name: "uRPF loose: source through another port", frame: tagged(11, "192.0.2.77", "192.0.2.10"), verdict: XDPTx},
		{name: "uRPF loose: source without a route", frame: tagged(11, "100.99.0.1", "192.0.2.10"), verdict: XDPDrop, drop: "urpf"},
		{name: "uRPF off: any source", frame: tagged(12, "100.99.0.1", "192.0.2.10"), verdict: XDPTx},
		{name: "uRPF strict: to the router, spoofed", frame: tagged(10, "198.51.100.77", "192.0.2.1"), verdict: XDPDrop, drop: "urpf"},
		{name: "IPv6 uRPF strict: source through its own port", frame: tagged(10, "2001:db8:a::77", "2001:db8:b::10"), verdict: XDPTx},
		{name: "IPv6 uRPF strict: source through another port", frame: tagged(10, "2001:db8:b::77", "2001:db8:a::10"), verdict: XDPDrop, drop: "urpf"},
		{name: "IPv6 uRPF loose: source without a route", frame: tagged(11, "2001:2::7", "2001:db8:a::10"), verdict: XDPDrop, drop: "urpf"},
		{name: "for another back-end (flooded)", frame: ethFrame(macNbr[0], macLB, 0x0800, make([]byte, 40)), verdict: XDPDrop, drop: "not_ours"},
		{name: "IPv6 zeros (version 0)", frame: ethFrame(macSelf, macLB, 0x86dd, make([]byte, 60)), verdict: XDPDrop, drop: "bad_version"},
		{name: "IPX", frame: ethFrame(macSelf, macLB, 0x8137, make([]byte, 60)), verdict: XDPDrop, drop: "not_ip"},
		{name: "IPv6 connected host, resolved", frame: data6(netip.MustParseAddr("2001:db8:a::10"), 64), verdict: XDPTx, out: fwd6("2001:db8:a::10", macNbr[0], 10)},
		{name: "IPv6 hop limit 1: Time Exceeded", frame: data6(netip.MustParseAddr("2001:db8:a::10"), 1), verdict: XDPDrop, slow: "ttl"},
		{name: "IPv6 no route", frame: data6(netip.MustParseAddr("3fff::1"), 64), verdict: XDPDrop, slow: "no_route"},
		{name: "IPv6 unresolved neighbour", frame: data6(netip.MustParseAddr("2001:db8:c::77"), 64), verdict: XDPDrop, slow: "unresolved"},
		{name: "IPv6 over the MTU: Packet Too Big", frame: big6, verdict: XDPDrop, slow: "frag_needed"},
		{name: "IPv6 for the router", frame: data6(netip.MustParseAddr("2001:db8:b::1"), 64), verdict: XDPDrop, slow: "local"},
		{name: "IPv6 for this host, from inside", frame: from6("fd00::1", "fd00::11"), verdict: XDPPass},
		{name: "IPv6 for this host, from outside", frame: data6(netip.MustParseAddr("fd00::11"), 64), verdict: XDPDrop, drop: "infra"},
		{name: "IPv6 Hop-by-Hop Options", frame: hbh, verdict: XDPDrop, slow: "options"},
		{name: "NDP relayed by an LB, tagged", frame: ethFrame(macSelf, macLB, 0x8100, na), verdict: XDPDrop, slow: "ndp"},
		{name: "tagged IPv6 of no external port", frame: ethFrame(macSelf, macLB, 0x8100, append([]byte{0, 99, 0x86, 0xdd}, data6(netip.MustParseAddr("2001:db8:a::10"), 64)[14:]...)), verdict: XDPDrop, drop: "tagged"},
		{name: "IPv6 payload length past the frame", frame: data6(netip.MustParseAddr("2001:db8:a::10"), 64)[:70], verdict: XDPDrop, drop: "bad_length"},
		{name: "IPv6 runt", frame: data6(netip.MustParseAddr("2001:db8:a::10"), 64)[:50], verdict: XDPDrop, drop: "runt"},
		{name: "IPv6 source ::1", frame: from6("::1", "2001:db8:a::10"), verdict: XDPDrop, drop: "martian_src"},
		{name: "IPv6 multicast source", frame: from6("ff02::1", "2001:db8:a::10"), verdict: XDPDrop, drop: "martian_src"},
		{name: "IPv6 link-local source, not for us", frame: from6("fe80::1", "2001:db8:a::10"), verdict: XDPDrop, drop: "martian_src"},
		{name: "IPv6 link-local destination", frame: from6("2001:2::7", "fe80::1"), verdict: XDPDrop, drop: "martian_dst"},
		{name: "IPv6 IPv4-mapped destination", frame: from6("2001:2::7", "::ffff:192.0.2.10"), verdict: XDPDrop, drop: "martian_dst"},
		{name: "IPv6 multicast destination", frame: from6("2001:2::7", "ff0e::1"), verdict: XDPDrop, drop: "martian_dst"},
		{name: "IPv6 ACL: DNS to 2001:db8:c::/64 denied", frame: ethFrame(macSelf, macLB, 0x86dd, ip6Packet(netip.MustParseAddr("2001:2::7"), netip.MustParseAddr("2001:db8:c::10"), 17, 64, udpPayload(999, 53, 20))), verdict: XDPDrop, drop: "acl", slow: "acl"},
		{name: "IPv6 ACL: DNS behind a Destination Options header denied", frame: ethFrame(macSelf, macLB, 0x86dd, ip6Packet(netip.MustParseAddr("2001:2::7"), netip.MustParseAddr("2001:db8:c::10"), 60, 64, append([]byte{17, 0, 1, 4, 0, 0, 0, 0}, udpPayload(999, 53, 20)...))), verdict: XDPDrop, drop: "acl", slow: "acl"},
		{name: "IPv6 ACL: telnet denied (a rule of both families)", frame: ethFrame(macSelf, macLB, 0x86dd, ip6Packet(netip.MustParseAddr("2001:2::7"), netip.MustParseAddr("2001:db8:a::10"), 6, 64, udpPayload(999, 23, 20))), verdict: XDPDrop, drop: "acl", slow: "acl"},
		{name: "IPv4 ACL: telnet denied (a rule of both families)", frame: ethFrame(macSelf, macLB, 0x0800, ipPacket(netip.MustParseAddr("192.0.2.77"), netip.MustParseAddr("198.51.100.10"), 6, 64, 0, udpPayload(999, 23, 20))), verdict: XDPDrop, drop: "acl", slow: "acl"},
		{name: "IPv6 with an ACL: a chain past the packet", frame: ethFrame(macSelf, macLB, 0x86dd, ip6Packet(netip.MustParseAddr("2001:2::7"), netip.MustParseAddr("2001:db8:a::10"), 60, 64, []byte{60, 0, 0, 0, 0, 0, 0, 0})), verdict: XDPDrop, drop: "bad_length"},
		{name: "runt", frame: data(netip.MustParseAddr("192.0.2.10"), 64)[:20], verdict: XDPDrop, drop: "runt"},
	}
}

func index(names []string, n string) int {
	for i, x := range names {
		if x == n {
			return i
		}
	}
	return -1
}

// TestRouterFixtures runs the fixture table: every slow-path reason and
// drop reason, with expected output frames, in the kernel and the model.
func TestRouterFixtures(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s := newRouterState(t, nil, rand.New(rand.NewPCG(1, 1)))
	seenSlow, seenDrop := map[string]bool{}, map[string]bool{}
	for _, c := range routerCases() {
		before, _ := s.stats()
		want, err := s.compare(c.frame, true)
		if err != nil {
			t.Errorf("%s: kernel and model differ: %v\nframe %x", c.name, err, c.frame)
			continue
		}
		after, _ := s.stats()
		if want.Verdict != c.verdict {
			t.Errorf("%s: verdict %d, want %d", c.name, want.Verdict, c.verdict)
		}
		if c.out != nil && !bytes.Equal(want.Out, c.out) {
			t.Errorf("%s: output\n got %x\nwant %x", c.name, want.Out, c.out)
		}
		if c.slow != "" {
			seenSlow[c.slow] = true
			if i := index(SlowNames[:], c.slow); after.Slow[i]-before.Slow[i] != 1 {
				t.Errorf("%s: slow %s not counted", c.name, c.slow)
			}
		}
		if c.drop != "" {
			seenDrop[c.drop] = true
			if i := index(DropNames[:], c.drop); after.Drop[i]-before.Drop[i] != 1 {
				t.Errorf("%s: drop %s not counted", c.name, c.drop)
			}
		}
	}
	for _, n := range SlowNames {
		if !seenSlow[n] {
			t.Errorf("no fixture for slow path %s", n)
		}
	}
	for _, n := range DropNames {
		if !seenDrop[n] && n != "bad_nexthop" && n != "cap" {
			t.Errorf("no fixture for drop %s", n)
		}
	}
	st, _ := s.stats()
	if st.ACLDeny[0] != 1 || st.ACLDeny[2] != 1 || st.ACLDeny[3] != 2 || st.ACLDeny[4] != 2 {
		t.Errorf("ACL counters %v, want 1 0 1 2 2", st.ACLDeny[:5])
	}
}

// TestRouterCap gives the back-end a capacity: a burst of frames to route
// faster than any rate gets the bucket's worth through (element.CapBurst
// + 1) and the rest is dropped as cap; DIST is not capped (the element's
// hellos go on); with the cap off everything is routed again.
func TestRouterCap(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s := newRouterState(t, nil, rand.New(rand.NewPCG(1, 1)))
	frame := data(netip.MustParseAddr("192.0.2.10"), 64)
	burst := func(n int) (routed int) {
		for range n {
			v, _, err := s.run(frame)
			if err != nil {
				t.Fatal(err)
			}
			if v == XDPTx {
				routed++
			}
		}
		return routed
	}
	if err := s.dp.SetCap(1000); err != nil { // a frame a millisecond
		t.Fatal(err)
	}
	const n = 400
	before, _ := s.stats()
	routed := burst(n)
	after, _ := s.stats()
	// 400 runs take well under 3 ms: at most 3 more frames' worth of time.
	if routed < element.CapBurst+1 || routed > element.CapBurst+4 {
		t.Errorf("a capacity of 1,000 pps routed %d of a burst of %d, want %d to %d", routed, n, element.CapBurst+1, element.CapBurst+4)
	}
	if i := index(DropNames[:], "cap"); after.Drop[i]-before.Drop[i] != uint64(n-routed) {
		t.Errorf("%d frames dropped as cap, want %d", after.Drop[i]-before.Drop[i], n-routed)
	}
	if v, _, _ := s.run(ethFrame(bcastMAC, macLB, 0x88B5, make([]byte, 80))); v != XDPPass {
		t.Errorf("DIST over the capacity got verdict %d, want XDP_PASS", v)
	}
	if err := s.dp.SetCap(0); err != nil {
		t.Fatal(err)
	}
	if routed := burst(n); routed != n {
		t.Errorf("cap off: %d of %d routed", routed, n)
	}
}

// Each slow-path reason passes its rate and burst, no more: a burst of
// TTL-1 frames beyond the TTL bucket is dropped in the data path,
// counted slow_dropped, while another reason's frames (no route, its
// bucket unlimited here) all still reach the agent.
func TestSlowPathRates(t *testing.T) {
	s := newRouterState(t, nil, rand.New(rand.NewPCG(1, 1)))
	var rates [len(SlowNames)]SlowRate
	rates[index(SlowNames[:], "ttl")] = SlowRate{PPS: 1000, Burst: 10}
	if err := s.dp.writeSlowRates(rates); err != nil {
		t.Fatal(err)
	}
	const n = 200
	for _, f := range [][]byte{data(netip.MustParseAddr("192.0.2.10"), 1), data(netip.MustParseAddr("100.0.0.1"), 64)} {
		for range n {
			if v, _, err := s.run(f); err != nil || v != XDPDrop {
				t.Fatalf("verdict %d, %v", v, err)
			}
		}
	}
	st, err := s.dp.Stats(0)
	if err != nil {
		t.Fatal(err)
	}
	// 200 runs take a few milliseconds: a few more frames' worth of time.
	if ttl := st.Slow["ttl"]; ttl < 11 || ttl > 16 || ttl+st.SlowDropped["ttl"] != n {
		t.Errorf("TTL 1 at 1,000 pps, burst 10: %d to the agent, %d dropped of %d; want 11 to 16", ttl, st.SlowDropped["ttl"], n)
	}
	if st.Slow["no_route"] != n || st.SlowDropped["no_route"] != 0 {
		t.Errorf("no route, no rate: %d to the agent, %d dropped of %d", st.Slow["no_route"], st.SlowDropped["no_route"], n)
	}
}

// TestTaggedSlowFrames: a frame balanced from a port with unicast RPF
// keeps its LB's tag through the data path (forwarding rewrites it), but
// reaches the agent untagged, as the agent reads every routed frame.
func TestTaggedSlowFrames(t *testing.T) {
	runtime.LockOSThread() // the program writes to this CPU's buffer
	defer runtime.UnlockOSThread()
	s := newRouterState(t, nil, rand.New(rand.NewPCG(1, 1)))
	rd, err := s.dp.SlowReader()
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	untagged := ipPacket(netip.MustParseAddr("192.0.2.77"), netip.MustParseAddr("198.51.100.10"), 17, 1, 0, udpPayload(1, 2, 4))
	six := ip6Packet(netip.MustParseAddr("2001:db8:a::77"), netip.MustParseAddr("2001:db8:b::10"), 17, 1, udpPayload(1, 2, 4))
	for _, c := range []struct {
		proto uint16
		ip    []byte
	}{{0x0800, untagged}, {0x86dd, six}} {
		tagged := ethFrame(macSelf, macLB, 0x8100, append([]byte{0, 10, byte(c.proto >> 8), byte(c.proto)}, c.ip...))
		if v, _, err := s.run(tagged); err != nil || v != XDPDrop {
			t.Fatalf("TTL 1, tagged: verdict %d, %v", v, err)
		}
		rd.SetDeadline(time.Now().Add(time.Second))
		rec, err := rd.Read()
		if err != nil {
			t.Fatalf("no slow-path frame: %v", err)
		}
		var meta rtxdpRtSlowMeta
		n, err := binary.Decode(rec.RawSample, binary.NativeEndian, &meta)
		if err != nil {
			t.Fatal(err)
		}
		want := ethFrame(macSelf, macLB, c.proto, c.ip)
		got := rec.RawSample[n:]
		if meta.Reason != uint32(rtxdpRtSlowRT_SLOW_TTL) || int(meta.Len) != len(want) || !bytes.Equal(got[:min(len(got), len(want))], want) {
			t.Errorf("to the agent: reason %d, len %d\n%x\nwant untagged\n%x", meta.Reason, meta.Len, got, want)
		}
	}
}

// randomRouterFrame6 is randomRouterFrame's IPv6: destinations in and
// around the table's prefixes, the ports' hosts and the router, special
// addresses, hop limits, sizes, next headers (TCP, UDP, ICMPv6,
// Hop-by-Hop, Fragment), and mutations.
func randomRouterFrame6(r *rand.Rand, ps []netip.Prefix) []byte {
	var dst netip.Addr
	switch r.IntN(6) {
	case 0:
		var a [16]byte
		for i := range a {
			a[i] = byte(r.IntN(256))
		}
		a[0] = []byte{0x20, 0x2a, 0x3f, 0xfe, 0xff, 0x00}[r.IntN(6)]
		dst = netip.AddrFrom16(a)
	case 1:
		dst = netip.MustParseAddr([]string{"2001:db8:a::10", "2001:db8:b::10", "2001:db8:c::10", "2001:db8:c::99", "2001:db8:a::1",
			"fd00::11", "2001:db8:ffff::1", "fe80::1", "ff02::1", "::1", "::", "::ffff:1.2.3.4"}[r.IntN(12)])
	default:
		p := ps[r.IntN(len(ps))]
		a := p.Addr().As16()
		for i := p.Bits(); i < 128; i++ {
			if r.IntN(2) == 0 {
				a[i/8] |= 0x80 >> (i % 8)
			}
		}
		dst = netip.AddrFrom16(a)
	}
	src := netip.AddrFrom16([16]byte{0x20, 0x01, 0, 2, 0, 0, byte(r.IntN(256)), byte(r.IntN(256)), 15: byte(r.IntN(256))})
	if r.IntN(20) == 0 {
		src = netip.MustParseAddr([]string{"::1", "::", "fe80::9", "ff02::2", "::ffff:10.0.0.1", "fd00::1"}[r.IntN(6)])
	}
	nh := []uint8{17, 6, 58, 0, 44}[r.IntN(5)]
	hl := []uint8{0, 1, 2, 64, 255}[r.IntN(5)]
	size := []int{18, 100, 1300, 1352, 1353, 1452, 1453}[r.IntN(7)]
	ip := ip6Packet(src, dst, nh, hl, udpPayload(uint16(r.IntN(65536)), uint16(r.IntN(65536)), size))
	dstMAC := macSelf
	switch r.IntN(20) {
	case 0:
		dstMAC = net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}
	case 1:
		dstMAC = macNbr[0]
	}
	f := ethFrame(dstMAC, macLB, 0x86dd, ip)
	switch r.IntN(10) {
	case 0:
		f = f[:14+r.IntN(len(f)-13)]
	case 1:
		f[14+r.IntN(40)] ^= byte(1 << r.IntN(8))
	case 2:
		f[14] = byte(r.IntN(256))
	case 3:
		f = ethFrame(dstMAC, macLB, 0x8100, append([]byte{0, byte(10 + r.IntN(3)), 0x86, 0xdd}, ip...))
	case 4:
		binary.BigEndian.PutUint16(f[18:], uint16(r.IntN(65536)))
	}
	return f
}

// randomRouterFrame draws destinations from the table's prefixes and
// around them, TTLs, sizes, flags, and mutations.
func randomRouterFrame(r *rand.Rand, ps []netip.Prefix) []byte {
	var dst netip.Addr
	switch r.IntN(6) {
	case 0:
		dst = netip.AddrFrom4([4]byte{byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))})
	case 1:
		dst = []netip.Addr{netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("198.51.100.10"), netip.MustParseAddr("203.0.113.10"),
			netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("10.0.0.11"), netip.MustParseAddr("100.64.3.3")}[r.IntN(6)]
	default:
		p := ps[r.IntN(len(ps))]
		a := u32(p.Addr()) + uint32(r.IntN(1<<(32-p.Bits())))
		dst = netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)})
	}
	src := netip.AddrFrom4([4]byte{198, 18, byte(r.IntN(256)), byte(r.IntN(256))})
	switch r.IntN(20) {
	case 0:
		src = netip.AddrFrom4([4]byte{byte(r.IntN(256)), 1, 2, 3})
	case 1:
		src = netip.AddrFrom4([4]byte{10, 0, 0, byte(r.IntN(256))}) // inside
	}
	proto := []uint8{17, 6, 1, 47}[r.IntN(4)]
	ttl := []uint8{0, 1, 2, 64, 255}[r.IntN(5)]
	flags := []uint16{0, 0x4000, 0x2000, 0x0010}[r.IntN(4)]
	size := []int{18, 100, 1372, 1380, 1472, 1480}[r.IntN(6)]
	sport, dport := uint16(r.IntN(65536)), []uint16{53, 80, 443, uint16(r.IntN(65536))}[r.IntN(4)]
	ip := ipPacket(src, dst, proto, ttl, flags, udpPayload(sport, dport, size))
	dstMAC := macSelf
	switch r.IntN(20) {
	case 0:
		dstMAC = bcastMAC
	case 1:
		dstMAC = macNbr[0]
	}
	f := ethFrame(dstMAC, macLB, 0x0800, ip)
	switch r.IntN(12) {
	case 0:
		f = f[:14+r.IntN(len(f)-13)]
	case 1:
		f[14+r.IntN(20)] ^= byte(1 << r.IntN(8))
	case 2:
		f[14] = byte(r.IntN(256))
	case 3:
		f = ethFrame(dstMAC, macLB, []uint16{0x8100, 0x0806, 0x86dd, 0x88B5}[r.IntN(4)], append([]byte{0, 10, 8, 6}, ip...))
	case 4:
		f = ethFrame(dstMAC, macLB, 0x8100, append([]byte{0, 10, 0x86, 0xdd}, ip...))
	case 5: // balanced from a port with unicast RPF
		f = ethFrame(dstMAC, macLB, 0x8100, append([]byte{0, byte(10 + r.IntN(3)), 8, 0}, ip...))
	case 6: // options
		opt := 4 * (1 + r.IntN(10))
		p := append(ip[:20:20], append(make([]byte, opt), ip[20:]...)...)
		p[0] = 0x45 + byte(opt/4)
		binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
		binary.BigEndian.PutUint16(p[10:], 0)
		binary.BigEndian.PutUint16(p[10:], inet.Checksum(p[:20+opt]))
		f = ethFrame(dstMAC, macLB, 0x0800, p)
	}
	return f
}

// TestRouterDifferential: 100,000 random and mutated frames over a FIB of
// the whole RouteViews table (plus /0, /32 and overlaps), with route adds
// and deletes interleaved, kernel against model.
func TestRouterDifferential(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	all, err := routetable.Load(routetable.PyASN)
	if err != nil {
		t.Fatal(err)
	}
	all6, err := routetable.Load6(routetable.PyASN6)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 7))
	ps := append(all[:len(all):len(all)], netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("1.2.3.4/32"),
		netip.MustParsePrefix("1.2.3.0/24"), netip.MustParsePrefix("1.2.0.0/16"))
	ps6 := append(all6[:len(all6):len(all6)], netip.MustParsePrefix("::/0"), netip.MustParsePrefix("2001:db8:1::/48"),
		netip.MustParsePrefix("2001:db8:1:2::/64"), netip.MustParsePrefix("2001:db8:1:2::3/128"), netip.MustParsePrefix("2001:db8:1:2:3::/80"))
	s := newRouterState(t, append(ps[:len(ps):len(ps)], ps6...), r)
	fails, forwarded6 := 0, 0
	for i := 0; i < 100_000 && fails < 5; i++ {
		f := randomRouterFrame(r, ps)
		if i%4 == 3 {
			f = randomRouterFrame6(r, ps6)
		}
		res, err := s.compare(f, i%1000 == 999)
		if err != nil {
			t.Errorf("frame %d: %v\nframe %x", i, err, f)
			fails++
		}
		if res.Verdict == XDPTx && len(res.Out) > 17 && res.Out[16] == 0x86 {
			forwarded6++
		}
		// Route changes interleaved with the traffic.
		if i%500 == 0 {
			p, g, set, del := ps[r.IntN(len(ps))], uint32(1+r.IntN(5)), s.dp.FIB.Set, s.dp.FIB.Delete
			if i%1000 == 500 {
				p, g, set, del = ps6[r.IntN(len(ps6))], uint32(9+r.IntN(5)), s.dp.FIB6.Set, s.dp.FIB6.Delete
			}
			if _, ok := s.m.Routes[p]; ok && r.IntN(2) == 0 {
				if err := del(p); err != nil {
					t.Fatal(err)
				}
				delete(s.m.Routes, p)
			} else {
				if err := set(p, g); err != nil {
					t.Fatal(err)
				}
				s.m.Routes[p] = g
			}
		}
	}
	got, _ := s.stats()
	if got != s.m.Stats {
		t.Errorf("final counters\n got %+v\nwant %+v", got, s.m.Stats)
	}
	if got.Forwarded < 5000 || got.ForwardedBytes == 0 {
		t.Errorf("only %d of 100,000 frames forwarded: the generator misses the fast path", got.Forwarded)
	}
	if forwarded6 < 1000 {
		t.Errorf("only %d IPv6 frames forwarded: the IPv6 generator misses the fast path", forwarded6)
	}
	t.Logf("forwarded %d (IPv6 %d), slow %v, drops %v", got.Forwarded, forwarded6, got.Slow, got.Drop)
}

// TestRouterDifferential6: the IPv6 FIB in the kernel against the model
// with a full table of today's shape (250,000 prefixes, clustered) and
// random prefixes of every length nested in it: 30,000 IPv6 frames, with
// an IPv6 route added, changed or deleted every 20.
func TestRouterDifferential6(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ps6, err := routetable.Named6("250000v6")
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(8, 8))
	ps6 = ps6[:len(ps6):len(ps6)]
	for range 2000 {
		ps6 = append(ps6, randPrefix6(r))
	}
	s := newRouterStateSized(t, ps6, r, Sizes{FIB6Lines: routerapi.FIB6LinesFor(ps6, 16) * 5 / 4})
	fails, forwarded := 0, 0
	for i := 0; i < 30_000 && fails < 5; i++ {
		f := randomRouterFrame6(r, ps6)
		res, err := s.compare(f, i%1000 == 999)
		if err != nil {
			t.Errorf("frame %d: %v\nframe %x", i, err, f)
			fails++
		}
		if res.Verdict == XDPTx {
			forwarded++
		}
		if i%20 == 0 {
			p, g := ps6[r.IntN(len(ps6))], uint32(9+r.IntN(5))
			if _, ok := s.m.Routes[p]; ok && r.IntN(2) == 0 {
				if err := s.dp.FIB6.Delete(p); err != nil {
					t.Fatal(err)
				}
				delete(s.m.Routes, p)
			} else {
				if err := s.dp.FIB6.Set(p, g); err != nil {
					t.Fatal(err)
				}
				s.m.Routes[p] = g
			}
		}
	}
	if forwarded < 3000 {
		t.Errorf("only %d of 30,000 IPv6 frames forwarded: the generator misses the fast path", forwarded)
	}
	t.Logf("forwarded %d; %d groups in %d lines", forwarded, s.dp.FIB6.Groups(), s.dp.FIB6.LinesUsed())
}
