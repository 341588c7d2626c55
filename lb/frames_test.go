package lb

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"net/netip"

	"github.com/msr-router/msr/internal/inet"
)

// A small packet builder for the tests: each function returns a whole
// Ethernet frame.

var (
	macExt0  = net.HardwareAddr{0x02, 0, 0, 0, 0xe0, 0x00}
	macExt1  = net.HardwareAddr{0x02, 0, 0, 0, 0xe1, 0x00}
	macInt0  = net.HardwareAddr{0x02, 0, 0, 0, 0x10, 0x00}
	macUnk   = net.HardwareAddr{0x02, 0, 0, 0, 0x99, 0x00}
	macHost  = net.HardwareAddr{0x02, 0, 0, 0, 0xaa, 0x01}
	macVCP   = net.HardwareAddr{0x02, 0, 0, 0, 0xcc, 0x01}
	macR     = []net.HardwareAddr{{0x02, 0, 0, 0, 0xb0, 1}, {0x02, 0, 0, 0, 0xb0, 2}, {0x02, 0, 0, 0, 0xb0, 3}}
	bcastMAC = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	ospfMAC  = net.HardwareAddr{0x01, 0x00, 0x5e, 0x00, 0x00, 0x05}

	ipExt0  = netip.MustParseAddr("192.0.2.1")
	ipExt1  = netip.MustParseAddr("198.51.100.1")
	ipMgmt  = netip.MustParseAddr("10.255.0.1")
	ipHostA = netip.MustParseAddr("192.0.2.10")
	ipHostB = netip.MustParseAddr("198.51.100.20")
	// The router's inside (lb_infra): the management network, its
	// address the router's own.
	infraNet  = netip.MustParsePrefix("10.255.0.0/24")
	ipInfra   = netip.MustParseAddr("10.255.0.7")
	infraNet6 = netip.MustParsePrefix("fd00:ff::/64")
	ip6Infra  = netip.MustParseAddr("fd00:ff::7")

	ip6Ext0  = netip.MustParseAddr("2001:db8:10::1")
	ip6Ext1  = netip.MustParseAddr("2001:db8:11::1")
	ip6HostA = netip.MustParseAddr("2001:db8:10::10")
	ip6HostB = netip.MustParseAddr("2001:db8:11::20")
	ll6Ext0  = inet.LinkLocal(macExt0)
	ll6Host  = inet.LinkLocal(macHost)
)

func eth(dst, src net.HardwareAddr, etherType uint16, payload []byte) []byte {
	b := append(append(append([]byte{}, dst...), src...), byte(etherType>>8), byte(etherType))
	return append(b, payload...)
}

func tagged(dst, src net.HardwareAddr, vid uint16, etherType uint16, payload []byte) []byte {
	b := append(append(append([]byte{}, dst...), src...), 0x81, 0x00, byte(vid>>8), byte(vid))
	b = append(b, byte(etherType>>8), byte(etherType))
	return append(b, payload...)
}

func arp(op uint16, sha net.HardwareAddr, sip netip.Addr, tha net.HardwareAddr, tip netip.Addr) []byte {
	b := []byte{0, 1, 0x08, 0x00, 6, 4, byte(op >> 8), byte(op)}
	b = append(b, sha...)
	b = append(b, sip.AsSlice()...)
	b = append(b, tha...)
	return append(b, tip.AsSlice()...)
}

func l4(sport, dport uint16, n int) []byte {
	b := make([]byte, 8+n)
	binary.BigEndian.PutUint16(b, sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	return b
}

func udp(src, dst netip.Addr, sport, dport uint16) []byte {
	return inet.IPv4(src, dst, 17, l4(sport, dport, 18))
}

func tcp(src, dst netip.Addr, sport, dport uint16) []byte {
	return inet.IPv4(src, dst, 6, append(l4(sport, dport, 12), make([]byte, 8)...))
}

// withTTL sets an IPv4 packet's TTL (its header checksum with it) or an
// IPv6 packet's hop limit.
func withTTL(ip []byte, ttl uint8) []byte {
	if ip[0]>>4 == 6 {
		ip[7] = ttl
		return ip
	}
	ip[8], ip[10], ip[11] = ttl, 0, 0
	binary.BigEndian.PutUint16(ip[10:], inet.Checksum(ip[:20]))
	return ip
}

func udp6(src, dst netip.Addr, sport, dport uint16) []byte {
	return inet.IPv6(src, dst, 17, l4(sport, dport, 18))
}

func tcp6(src, dst netip.Addr, sport, dport uint16) []byte {
	return inet.IPv6(src, dst, 6, append(l4(sport, dport, 12), make([]byte, 8)...))
}

// icmp6 is an ICMPv6 message of type typ with body, checksum filled in,
// at hop limit hl.
func icmp6(src, dst netip.Addr, hl uint8, typ uint8, body []byte) []byte {
	return inet.ICMPv6(src, dst, hl, append([]byte{typ, 0, 0, 0}, body...))
}

// ns is a Neighbor Solicitation from src (MAC sll; nil: no option) for
// target, to target's solicited-node group or to dst when valid.
func ns(src netip.Addr, sll net.HardwareAddr, target, dst netip.Addr) []byte {
	if !dst.IsValid() {
		dst, _ = inet.SolicitedNode(target)
	}
	body := append(make([]byte, 4), target.AsSlice()...)
	if sll != nil {
		body = append(append(body, 1, 1), sll...)
	}
	return icmp6(src, dst, 255, 135, body)
}

// na is a solicited Neighbor Advertisement for target with its MAC.
func na(src, dst netip.Addr, target netip.Addr, tll net.HardwareAddr) []byte {
	body := append([]byte{0x60, 0, 0, 0}, target.AsSlice()...)
	return icmp6(src, dst, 255, 136, append(append(body, 2, 1), tll...))
}

// withExtensions puts hdrs (Next Header values of extension headers)
// between p's IPv6 header and its payload, each 8 bytes (a Fragment
// header with offset 0 and no more fragments: not a fragment).
func withExtensions(p []byte, hdrs ...uint8) []byte {
	out := append([]byte(nil), p[:40]...)
	next := p[6]
	out[6] = hdrs[0]
	for i, h := range hdrs {
		nh := next
		if i+1 < len(hdrs) {
			nh = hdrs[i+1]
		}
		ext := make([]byte, 8)
		ext[0] = nh
		if h == 51 { // AH: length in 4-byte units less 2
			ext[1] = 0
		}
		out = append(out, ext...)
	}
	out = append(out, p[40:]...)
	binary.BigEndian.PutUint16(out[4:], uint16(len(out)-40))
	return out
}

// randomIPv6 draws an IPv6 packet: TCP, UDP, ICMPv6 (NDP among it),
// OSPFv3 or another protocol, behind up to 8 extension headers of any
// kind and length, fragments among them.
func randomIPv6(r *rand.Rand) []byte {
	pick := func(n int) int { return r.IntN(n) }
	var rnd [16]byte
	for i := range rnd {
		rnd[i] = byte(r.IntN(256))
	}
	addrs := []netip.Addr{ip6Ext0, ip6Ext1, ip6HostA, ip6HostB, ll6Ext0, ll6Host, ip6Infra, netip.IPv6Unspecified(),
		netip.MustParseAddr("ff02::5"), netip.MustParseAddr("ff02::9"), netip.MustParseAddr("ff02::1:ff00:1"),
		netip.MustParseAddr("ff0e::1"), netip.AddrFrom16(rnd)}
	addr := func() netip.Addr { return addrs[pick(len(addrs))] }
	ports := []uint16{179, 521, 161, 3784, 4784, 80, uint16(r.IntN(65536))}
	port := func() uint16 { return ports[pick(len(ports))] }
	var p []byte
	switch pick(7) {
	case 0:
		p = udp6(addr(), addr(), port(), port())
	case 1:
		p = tcp6(addr(), addr(), port(), port())
	case 2:
		p = ns(addr(), []net.HardwareAddr{nil, macHost, macR[0]}[pick(3)], addr(), []netip.Addr{{}, addr()}[pick(2)])
	case 3:
		p = na(addr(), addr(), addr(), macHost)
	case 4:
		p = icmp6(addr(), addr(), []uint8{255, 64, 1}[pick(3)], []uint8{128, 129, 133, 134, 137, 1, uint8(r.IntN(256))}[pick(7)],
			make([]byte, pick(48)))
	case 5:
		p = inet.IPv6(addr(), addr(), 89, make([]byte, 16+pick(40)))
	default:
		p = inet.IPv6(addr(), addr(), []uint8{47, 50, 59, uint8(r.IntN(256))}[pick(4)], make([]byte, pick(64)))
	}
	if pick(3) == 0 {
		kinds := []uint8{0, 43, 44, 51, 60, 135}
		hdrs := make([]uint8, 1+pick(8))
		for i := range hdrs {
			hdrs[i] = kinds[pick(len(kinds))]
		}
		p = withExtensions(p, hdrs...)
		off := 40
		for range hdrs { // mutate: lengths, fragment fields
			switch pick(4) {
			case 0:
				p[off+1] = byte(pick(256))
			case 1:
				p[off+2], p[off+3] = byte(pick(256)), byte(pick(256))
			}
			off += 8
		}
	}
	switch pick(8) {
	case 0: // payload length off
		binary.BigEndian.PutUint16(p[4:], uint16(r.IntN(len(p)+40)))
	case 1: // version off
		p[0] = byte(pick(16)) << 4
	case 2: // a flow label
		p[1], p[2], p[3] = byte(pick(16)), byte(pick(256)), byte(pick(256))
	}
	return p
}

// randomFrame draws a frame from the shapes the data path must tell
// apart, then mutates it the ways the wire does: truncation, bad IHL, IP
// options, fragments, stacked tags, junk.
func randomFrame(r *rand.Rand) []byte {
	macs := []net.HardwareAddr{macExt0, macExt1, macInt0, macHost, macVCP, bcastMAC, ospfMAC, macR[0], macR[1],
		{0x33, 0x33, 0xff, 0, 0, 1}, {0x33, 0x33, 0, 0, 0, 5}}
	addrs := []netip.Addr{ipExt0, ipExt1, ipMgmt, ipHostA, ipHostB, ipInfra, netip.MustParseAddr("224.0.0.5"),
		netip.MustParseAddr("224.0.0.9"), netip.MustParseAddr("255.255.255.255"), netip.MustParseAddr("239.1.2.3"),
		netip.AddrFrom4([4]byte{byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))})}
	ports := []uint16{179, 520, 161, 162, 3784, 4784, 80, 53, uint16(r.IntN(65536))}
	pick := func(n int) int { return r.IntN(n) }
	mac := func() net.HardwareAddr { return macs[pick(len(macs))] }
	addr := func() netip.Addr { return addrs[pick(len(addrs))] }
	port := func() uint16 { return ports[pick(len(ports))] }

	var payload []byte
	var et uint16
	switch pick(8) {
	case 6, 7:
		et, payload = etherTypeIPv6, randomIPv6(r)
	case 0:
		et, payload = etherTypeARP, arp(uint16(pick(3)+1), mac(), addr(), mac(), addr())
	case 1:
		et, payload = etherTypeIPv4, udp(addr(), addr(), port(), port())
	case 2:
		et, payload = etherTypeIPv4, tcp(addr(), addr(), port(), port())
	case 3:
		et, payload = etherTypeIPv4, inet.IPv4(addr(), addr(), []uint8{1, 89, 47, 6, 17}[pick(5)], make([]byte, pick(64)))
	case 4:
		et, payload = etherTypeDIST, make([]byte, 64+pick(64))
	default:
		et, payload = uint16(r.Uint32()), make([]byte, pick(100))
	}
	if et == etherTypeIPv4 && len(payload) >= 20 {
		switch pick(8) {
		case 0: // fragment: MF or an offset
			binary.BigEndian.PutUint16(payload[6:], uint16(r.IntN(0x4000)))
		case 1: // IHL anything
			payload[0] = 0x40 | byte(pick(16))
		case 2: // IP options: a longer header
			opt := 4 * (1 + pick(10))
			payload = append(payload[:20:20], append(make([]byte, opt), payload[20:]...)...)
			payload[0] = 0x45 + byte(opt/4)
			binary.BigEndian.PutUint16(payload[2:], uint16(len(payload)))
		case 3: // total length off
			binary.BigEndian.PutUint16(payload[2:], uint16(r.IntN(200)))
		case 4: // version off
			payload[0] = byte(pick(16))<<4 | 5
		}
	}
	var f []byte
	if pick(3) == 0 {
		vids := []uint16{10, 11, 12, 0, 4095, uint16(r.IntN(4096))}
		if pick(6) == 0 { // VLAN in VLAN
			payload = append([]byte{byte(vids[pick(6)] >> 8), byte(vids[pick(6)]), byte(et >> 8), byte(et)}, payload...)
			et = []uint16{etherTypeQ, etherTypeQinQ}[pick(2)]
		}
		f = tagged(mac(), mac(), vids[pick(len(vids))], et, payload)
	} else {
		f = eth(mac(), mac(), et, payload)
	}
	switch pick(6) {
	case 0: // truncated (the test run needs 14 bytes)
		f = f[:14+pick(len(f)-13)]
	case 1: // padded to the Ethernet minimum, or jumbo
		f = append(f, make([]byte, []int{60, 1600, 3000}[pick(3)]-min(len(f), 60))...)
	case 2: // flipped bits
		for i := 0; i < 1+pick(4); i++ {
			f[pick(len(f))] ^= byte(1 << pick(8))
		}
	}
	return f
}
