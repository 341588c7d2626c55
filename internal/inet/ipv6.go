package inet

import (
	"encoding/binary"
	"net"
	"net/netip"
)

// IPv6 builds an IPv6 packet: a 40-byte header with hop limit 64, then
// payload; proto is the Next Header. The payload's own checksum (ICMPv6,
// TCP, UDP) is the caller's: PseudoChecksum6 helps.
func IPv6(src, dst netip.Addr, proto uint8, payload []byte) []byte {
	h := make([]byte, 40, 40+len(payload))
	h[0], h[6], h[7] = 0x60, proto, 64
	binary.BigEndian.PutUint16(h[4:], uint16(len(payload)))
	copy(h[8:], src.AsSlice())
	copy(h[24:], dst.AsSlice())
	return append(h, payload...)
}

// PseudoChecksum6 is the checksum of an upper-layer message over IPv6
// (RFC 8200 §8.1): msg with its checksum field zero, behind the
// pseudo-header of src, dst, its length and proto.
func PseudoChecksum6(src, dst netip.Addr, proto uint8, msg []byte) uint16 {
	b := make([]byte, 0, 40+len(msg))
	b = append(b, src.AsSlice()...)
	b = append(b, dst.AsSlice()...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(msg)))
	b = append(b, 0, 0, 0, proto)
	return Checksum(append(b, msg...))
}

// ICMPv6 builds an IPv6 packet carrying the ICMPv6 message msg (type,
// code, a checksum field, body) with its checksum filled in and the hop
// limit given (255 for Neighbor Discovery).
func ICMPv6(src, dst netip.Addr, hopLimit uint8, msg []byte) []byte {
	m := append([]byte(nil), msg...)
	m[2], m[3] = 0, 0
	binary.BigEndian.PutUint16(m[2:], PseudoChecksum6(src, dst, 58, m))
	p := IPv6(src, dst, 58, m)
	p[7] = hopLimit
	return p
}

// LinkLocal is the link-local address a MAC's interface takes by modified
// EUI-64 (RFC 4291 App. A): fe80::, the MAC with ff:fe in its middle and
// its universal/local bit flipped.
func LinkLocal(mac net.HardwareAddr) netip.Addr {
	var a [16]byte
	a[0], a[1] = 0xfe, 0x80
	if len(mac) == 6 {
		a[8], a[9], a[10] = mac[0]^0x02, mac[1], mac[2]
		a[11], a[12] = 0xff, 0xfe
		a[13], a[14], a[15] = mac[3], mac[4], mac[5]
	}
	return netip.AddrFrom16(a)
}

// SolicitedNode is the solicited-node group of a (RFC 4291 §2.7.1),
// ff02::1:ffXX:XXXX, to which a Neighbor Solicitation for a goes, and its
// Ethernet group address 33:33:ff:XX:XX:XX (RFC 2464 §7).
func SolicitedNode(a netip.Addr) (netip.Addr, net.HardwareAddr) {
	b := a.As16()
	g := [16]byte{0xff, 0x02, 11: 0x01, 12: 0xff, 13: b[13], 14: b[14], 15: b[15]}
	return netip.AddrFrom16(g), net.HardwareAddr{0x33, 0x33, 0xff, b[13], b[14], b[15]}
}
