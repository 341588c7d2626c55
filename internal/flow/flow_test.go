package flow

import (
	"encoding/binary"
	"testing"
)

// ipv4 is an IPv4 header of 20 bytes and 4 of transport: proto, the
// fragment field, and ports sport and dport.
func ipv4(proto byte, frag uint16, sport, dport uint16) []byte {
	b := make([]byte, 24)
	b[0], b[9] = 0x45, proto
	binary.BigEndian.PutUint16(b[6:], frag)
	copy(b[12:], []byte{192, 0, 2, 10})
	copy(b[16:], []byte{203, 0, 113, 10})
	binary.BigEndian.PutUint16(b[20:], sport)
	binary.BigEndian.PutUint16(b[22:], dport)
	return b
}

// TestPorts: TCP's and UDP's ports are hashed; a fragment's, another
// protocol's and a header too short to hold them are not.
func TestPorts(t *testing.T) {
	for _, c := range []struct {
		name string
		ip   []byte
		want uint32
	}{
		{"tcp", ipv4(6, 0, 40000, 80), 40000<<16 | 80},
		{"udp", ipv4(17, 0x4000, 53, 5353), 53<<16 | 5353}, // DF is no fragment
		{"first fragment", ipv4(17, 0x2000, 53, 5353), 0},
		{"later fragment", ipv4(17, 0x0010, 53, 5353), 0},
		{"icmp", ipv4(1, 0, 8, 0), 0},
		{"short", ipv4(6, 0, 1, 2)[:22], 0},
	} {
		if got := Ports(c.ip, 20); got != c.want {
			t.Errorf("%s: %#x, want %#x", c.name, got, c.want)
		}
	}
}

// TestHashSeeds: the stages' seeds make their choices independent (one
// flow's hashes under two seeds differ), and a datagram's fragments hash
// as one flow whatever their ports.
func TestHashSeeds(t *testing.T) {
	tcp := ipv4(6, 0, 40000, 80)
	if OfIPv4(tcp, 20, 1) == OfIPv4(tcp, 20, 2) {
		t.Error("one flow hashes alike under two seeds")
	}
	if OfIPv4(tcp, 20, 1) == OfIPv4(ipv4(6, 0, 40001, 80), 20, 1) {
		t.Error("two flows differing in the source port hash alike")
	}
	if OfIPv4(ipv4(17, 0x2000, 1, 2), 20, 1) != OfIPv4(ipv4(17, 0x0010, 3, 4), 20, 1) {
		t.Error("a datagram's fragments hash apart")
	}
}

// TestOfIPv6: the addresses folded, the Next Header, and TCP's or UDP's
// ports right after the fixed header; another Next Header's bytes there
// are not ports.
func TestOfIPv6(t *testing.T) {
	ip := make([]byte, 44)
	ip[0], ip[6] = 0x60, 6
	copy(ip[8:], []byte{0x20, 0x01, 0x0d, 0xb8, 15: 1})
	copy(ip[24:], []byte{0x20, 0x01, 0x0d, 0xb8, 15: 2})
	binary.BigEndian.PutUint32(ip[40:], 40000<<16|80)
	want := Hash(Fold6(ip[8:24]), Fold6(ip[24:40]), 40000<<16|80, 6, 7)
	if got := OfIPv6(ip, 7); got != want {
		t.Errorf("TCP: %#x, want %#x", got, want)
	}
	ip[6] = 44 // a fragment header: no ports
	if got, want := OfIPv6(ip, 7), Hash(Fold6(ip[8:24]), Fold6(ip[24:40]), 0, 44, 7); got != want {
		t.Errorf("Next Header 44: %#x, want %#x", got, want)
	}
	if Fold6(ip[8:24]) != binary.LittleEndian.Uint32(ip[8:])^binary.LittleEndian.Uint32(ip[20:]) {
		t.Error("Fold6 is not the words XORed")
	}
}
