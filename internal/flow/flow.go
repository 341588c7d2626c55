// Package flow is the data paths' flow hash (bpf/common.h's flow_hash) in
// Go, for the reference models of the LB and the back-end. Each stage
// hashes with its own seed (enum flow_seed in bpf/common.h), so that the
// LB's choice of back-end and the back-end's choice of ECMP next hop are
// independent.
package flow

import "encoding/binary"

// Hash is flow_hash: addresses are the 32-bit words as they lie in the
// packet, read in host (little-endian) order; ports are source << 16 |
// destination (0 without ports).
func Hash(saddr, daddr, ports, proto, seed uint32) uint32 {
	h := (saddr ^ seed) * 0x9e3779b1
	h ^= daddr
	h ^= h >> 15
	h *= 0x85ebca6b
	h ^= ports
	h ^= proto << 24
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

// Ports is what the data paths hash of an IPv4 packet's transport header
// (ip is the packet from its IP header, ihl its header length in bytes):
// source << 16 | destination for TCP and UDP, 0 for fragments (only the
// first carries ports: all of a datagram's fragments must take one path),
// other protocols and a header too short to hold them.
func Ports(ip []byte, ihl int) uint32 {
	proto := ip[9]
	if binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 || (proto != 6 && proto != 17) || len(ip) < ihl+4 {
		return 0
	}
	return binary.BigEndian.Uint32(ip[ihl:])
}

// OfIPv4 hashes an IPv4 packet (from its IP header; ihl its header length
// in bytes) as a data path with seed does.
func OfIPv4(ip []byte, ihl int, seed uint32) uint32 {
	return Hash(binary.LittleEndian.Uint32(ip[12:]), binary.LittleEndian.Uint32(ip[16:]), Ports(ip, ihl), uint32(ip[9]), seed)
}

// Fold6 is bpf/ipv6.h's ip6_fold: an IPv6 address's four 32-bit words
// XORed, read in host (little-endian) order as the data paths read them.
func Fold6(a []byte) uint32 {
	return binary.LittleEndian.Uint32(a[0:]) ^ binary.LittleEndian.Uint32(a[4:]) ^
		binary.LittleEndian.Uint32(a[8:]) ^ binary.LittleEndian.Uint32(a[12:])
}

// OfIPv6 hashes an IPv6 packet (from its IP header) as the back-end's ECMP
// does: the folded addresses, the Next Header, and the ports of TCP or UDP
// right after the fixed header (extension headers are not walked).
func OfIPv6(ip []byte, seed uint32) uint32 {
	var ports uint32
	if (ip[6] == 6 || ip[6] == 17) && len(ip) >= 44 {
		ports = binary.BigEndian.Uint32(ip[40:])
	}
	return Hash(Fold6(ip[8:24]), Fold6(ip[24:40]), ports, uint32(ip[6]), seed)
}
