package router

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"

	"github.com/msr-router/msr/internal/inet"
)

// The IPv6 packets the slow path makes (packets.go's counterparts), pure
// functions of what it received. Each takes an IPv6 packet from its
// header on, checked by the caller to hold its 40 bytes.

// ICMPv6 types (RFC 4443, RFC 4861).
const (
	icmp6Unreachable   = 1
	icmp6PacketTooBig  = 2
	icmp6TimeExceeded  = 3
	icmp6ParamProblem  = 4
	icmp6EchoRequest   = 128
	icmp6EchoReply     = 129
	icmp6NeighborSol   = 135
	icmp6NeighborAdv   = 136
	icmp6MinMTU        = 1280 // RFC 8200 §5: an error fits in it
	icmp6ErrorMaxQuote = icmp6MinMTU - 40 - 8
)

// decHopLimit decrements the hop limit, in place (no checksum to mend).
func decHopLimit(pkt []byte) []byte {
	pkt[7]--
	return pkt
}

// transport6 follows pkt's extension headers (RFC 8200 §4) to its upper
// layer: its protocol and offset; false if the chain runs past the packet
// or is longer than the slow path reads.
func transport6(pkt []byte) (uint8, int, bool) {
	nh, off := pkt[6], 40
	for range 8 {
		switch nh {
		case 0, 43, 60, 135, 139, 140:
			if off+8 > len(pkt) {
				return 0, 0, false
			}
			nh, off = pkt[off], off+(int(pkt[off+1])+1)*8
		case 44:
			if off+8 > len(pkt) {
				return 0, 0, false
			}
			if binary.BigEndian.Uint16(pkt[off+2:])&0xfff8 != 0 {
				return 44, off, true // not the first fragment: no upper-layer header
			}
			nh, off = pkt[off], off+8
		case 51:
			if off+8 > len(pkt) {
				return 0, 0, false
			}
			nh, off = pkt[off], off+(int(pkt[off+1])+2)*4
		default:
			return nh, off, off <= len(pkt)
		}
	}
	return 0, 0, false
}

// icmp6ErrorAllowed says whether pkt may have an ICMPv6 error sent about
// it (RFC 4443 §2.4 (e)): not about an ICMPv6 error or a redirect, not to
// a multicast address (the data path routes none), not from a source that
// names no one host.
func icmp6ErrorAllowed(pkt []byte) bool {
	if len(pkt) < 40 {
		return false
	}
	src, dst := netip.AddrFrom16([16]byte(pkt[8:24])), netip.AddrFrom16([16]byte(pkt[24:40]))
	if src.IsUnspecified() || src.IsMulticast() || src.IsLoopback() || dst.IsMulticast() {
		return false
	}
	proto, off, ok := transport6(pkt)
	if !ok {
		return true // malformed past the header: the error is about that
	}
	return proto != 58 || off >= len(pkt) || pkt[off] >= 128 && pkt[off] != 137
}

// icmp6ErrorPacket is the ICMPv6 error of type and code about pkt, from
// the router's address from to pkt's source (RFC 4443 §3): param is the
// MTU of Packet Too Big or the pointer of Parameter Problem, and as much
// of pkt follows as keeps the error within the minimum MTU.
func icmp6ErrorPacket(pkt []byte, from netip.Addr, typ, code uint8, param uint32) []byte {
	quote := pkt[:min(len(pkt), icmp6ErrorMaxQuote)]
	msg := make([]byte, 8, 8+len(quote))
	msg[0], msg[1] = typ, code
	binary.BigEndian.PutUint32(msg[4:], param)
	msg = append(msg, quote...)
	return inet.ICMPv6(from, netip.AddrFrom16([16]byte(pkt[8:24])), 64, msg)
}

// echoReply6 answers an ICMPv6 echo request (RFC 4443 §4.2) addressed to
// the router; msg is the request from its type on.
func echoReply6(pkt, msg []byte) []byte {
	reply := bytes.Clone(msg)
	reply[0] = icmp6EchoReply
	return inet.ICMPv6(netip.AddrFrom16([16]byte(pkt[24:40])), netip.AddrFrom16([16]byte(pkt[8:24])), 64, reply)
}

// neighborSolicitation is a Neighbor Solicitation (RFC 4861 §4.3) from
// src, its link-layer address mac, for target, to target's solicited-node
// group; the LB that owns the port puts the port's MAC in it.
func neighborSolicitation(mac net.HardwareAddr, src, target netip.Addr) []byte {
	msg := make([]byte, 32)
	msg[0] = icmp6NeighborSol
	copy(msg[8:24], target.AsSlice())
	msg[24], msg[25] = 1, 1 // Source Link-Layer Address, 8 bytes
	copy(msg[26:32], mac)
	group, _ := inet.SolicitedNode(target)
	return inet.ICMPv6(src, group, 255, msg)
}

// unicastSolicitation is a Neighbor Solicitation sent to target itself
// (RFC 4861 §7.2.2's unicast probe, as neighbour unreachability
// detection sends): the question a claimed MAC change puts to the old
// MAC.
func unicastSolicitation(mac net.HardwareAddr, src, target netip.Addr) []byte {
	msg := make([]byte, 32)
	msg[0] = icmp6NeighborSol
	copy(msg[8:24], target.AsSlice())
	msg[24], msg[25] = 1, 1
	copy(msg[26:32], mac)
	return inet.ICMPv6(src, target, 255, msg)
}

// ndpMessage checks an NDP message as RFC 4861 §7.1.2 and §6.1.2 ask (hop
// limit 255, ICMPv6 right after the header, its checksum, code 0, a body
// long enough) and returns it: the message from its type on.
func ndpMessage(pkt []byte) ([]byte, bool) {
	if len(pkt) < 40 || pkt[6] != 58 || pkt[7] != 255 {
		return nil, false
	}
	end := 40 + int(binary.BigEndian.Uint16(pkt[4:]))
	if end > len(pkt) || end < 40+24 {
		return nil, false
	}
	msg := pkt[40:end]
	src, dst := netip.AddrFrom16([16]byte(pkt[8:24])), netip.AddrFrom16([16]byte(pkt[24:40]))
	if msg[1] != 0 || inet.PseudoChecksum6(src, dst, 58, msg) != 0 {
		return nil, false
	}
	return msg, true
}

// ndpOption finds the link-layer address option of kind (1: source, 2:
// target) in an NDP message's options; malformed options find nothing.
func ndpOption(opts []byte, kind uint8) (net.HardwareAddr, bool) {
	for len(opts) >= 8 {
		n := int(opts[1]) * 8
		if n == 0 || n > len(opts) {
			return nil, false
		}
		if opts[0] == kind && n == 8 {
			return net.HardwareAddr(bytes.Clone(opts[2:8])), true
		}
		opts = opts[n:]
	}
	return nil, false
}
