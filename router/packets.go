package router

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"

	"github.com/msr-router/msr/internal/inet"
)

// The packets the slow path makes, as pure functions of what it received:
// no state, no sending (slowpath.go decides and sends). Each takes an IPv4
// packet from its header on, checked by the caller to hold its header.

// decTTL decrements the TTL and recomputes the header checksum, in place.
func decTTL(pkt []byte) []byte {
	ihl := int(pkt[0]&0xf) * 4
	pkt[8]--
	binary.BigEndian.PutUint16(pkt[10:], 0)
	binary.BigEndian.PutUint16(pkt[10:], inet.Checksum(pkt[:ihl]))
	return pkt
}

// icmpErrorAllowed says whether pkt may have an ICMP error sent about it
// (RFC 1812 §4.3.2.7): not about an ICMP error, a non-first fragment, a
// packet to a broadcast or multicast address, or from a source that names
// no one host (a martian).
func icmpErrorAllowed(pkt []byte) bool {
	if len(pkt) < 20 {
		return false
	}
	ihl := int(pkt[0]&0xf) * 4
	src := netip.AddrFrom4([4]byte(pkt[12:16]))
	dst := binary.BigEndian.Uint32(pkt[16:])
	if binary.BigEndian.Uint16(pkt[6:])&0x1fff != 0 || dst>>28 == 0xe || dst == 0xffffffff || martian(u32(src)) {
		return false
	}
	// ICMP types that are not errors: echo reply and request,
	// timestamp, information request.
	return pkt[9] != 1 || len(pkt) <= ihl || pkt[ihl] == 0 || pkt[ihl] == 8 || pkt[ihl] == 13 || pkt[ihl] == 15
}

// icmpErrorPacket is the ICMP error of type and code about pkt, from the
// router's address from to pkt's source: RFC 792's header (with the next
// hop's MTU for "fragmentation needed", RFC 1191), then as much of pkt as
// keeps the whole within 576 bytes (RFC 1812 §4.3.2.3).
func icmpErrorPacket(pkt []byte, from netip.Addr, typ, code uint8, mtu uint16) []byte {
	quote := pkt[:min(len(pkt), 576-28)]
	body := make([]byte, 8, 8+len(quote))
	body[0], body[1] = typ, code
	binary.BigEndian.PutUint16(body[6:], mtu)
	body = append(body, quote...)
	binary.BigEndian.PutUint16(body[2:], inet.Checksum(body))
	return inet.IPv4(from, netip.AddrFrom4([4]byte(pkt[12:16])), 1, body)
}

// echoReply answers an ICMP echo request (RFC 792) addressed to the
// router: its data returned, the addresses swapped.
func echoReply(pkt []byte) []byte {
	ihl := int(pkt[0]&0xf) * 4
	reply := inet.IPv4(netip.AddrFrom4([4]byte(pkt[16:20])), netip.AddrFrom4([4]byte(pkt[12:16])), 1, bytes.Clone(pkt[ihl:]))
	icmp := reply[20:]
	icmp[0] = 0
	binary.BigEndian.PutUint16(icmp[2:], 0)
	binary.BigEndian.PutUint16(icmp[2:], inet.Checksum(icmp))
	return reply
}

// fragments cuts pkt into fragments that fit mtu (RFC 791): every one
// with pkt's header (options included), data in multiples of 8 bytes, the
// offset counted from pkt's own (it may be a fragment already), More
// Fragments on all but the last unless pkt had it. None if pkt's lengths
// are wrong or its header leaves no room.
func fragments(pkt []byte, mtu uint16) [][]byte {
	ihl := int(pkt[0]&0xf) * 4
	tot := int(binary.BigEndian.Uint16(pkt[2:]))
	if tot > len(pkt) || tot < ihl {
		return nil
	}
	data := pkt[ihl:tot]
	step := (int(mtu) - ihl) &^ 7
	if step <= 0 {
		return nil
	}
	flags := binary.BigEndian.Uint16(pkt[6:])
	baseOff := int(flags&0x1fff) * 8
	var out [][]byte
	for off := 0; off < len(data); off += step {
		end := min(off+step, len(data))
		f := make([]byte, ihl, ihl+end-off)
		copy(f, pkt[:ihl])
		f = append(f, data[off:end]...)
		binary.BigEndian.PutUint16(f[2:], uint16(len(f)))
		fl := uint16((baseOff+off)/8) | flags&0x2000
		if end < len(data) {
			fl |= 0x2000
		}
		binary.BigEndian.PutUint16(f[6:], fl)
		binary.BigEndian.PutUint16(f[10:], 0)
		binary.BigEndian.PutUint16(f[10:], inet.Checksum(f[:ihl]))
		out = append(out, f)
	}
	return out
}

// arpRequest is an ARP request (RFC 826) from mac and ip for target.
func arpRequest(mac net.HardwareAddr, ip, target netip.Addr) []byte {
	b := make([]byte, 28)
	binary.BigEndian.PutUint16(b[0:], 1)      // Ethernet
	binary.BigEndian.PutUint16(b[2:], 0x0800) // IPv4
	b[4], b[5] = 6, 4
	binary.BigEndian.PutUint16(b[6:], 1) // request
	copy(b[8:], mac)
	copy(b[14:], ip.AsSlice())
	copy(b[24:], target.AsSlice())
	return b
}
