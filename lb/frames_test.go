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

// randomFrame draws a frame from the shapes the data path must tell
// apart, then mutates it the ways the wire does: truncation, bad IHL, IP
// options, fragments, stacked tags, junk.
func randomFrame(r *rand.Rand) []byte {
	macs := []net.HardwareAddr{macExt0, macExt1, macInt0, macHost, macVCP, bcastMAC, ospfMAC, macR[0], macR[1]}
	addrs := []netip.Addr{ipExt0, ipExt1, ipMgmt, ipHostA, ipHostB, netip.MustParseAddr("224.0.0.5"),
		netip.MustParseAddr("224.0.0.9"), netip.MustParseAddr("255.255.255.255"), netip.MustParseAddr("239.1.2.3"),
		netip.AddrFrom4([4]byte{byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))})}
	ports := []uint16{179, 520, 161, 162, 3784, 4784, 80, 53, uint16(r.IntN(65536))}
	pick := func(n int) int { return r.IntN(n) }
	mac := func() net.HardwareAddr { return macs[pick(len(macs))] }
	addr := func() netip.Addr { return addrs[pick(len(addrs))] }
	port := func() uint16 { return ports[pick(len(ports))] }

	var payload []byte
	var et uint16
	switch pick(6) {
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
