package inet

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
)

func TestChecksum(t *testing.T) {
	// RFC 1071 §3's example words 0001 f203 f4f5 f6f7: sum ddf2, checksum 220d.
	if c := Checksum([]byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}); c != 0x220d {
		t.Errorf("checksum = %#x, want 0x220d", c)
	}
	h := []byte{0x45, 0, 0, 0x54, 0, 0, 0x40, 0, 0x40, 1, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2}
	c := Checksum(h)
	h[10], h[11] = byte(c>>8), byte(c)
	if Checksum(h) != 0 {
		t.Error("a header with its checksum filled in does not sum to 0")
	}
	if Checksum([]byte{0xff}) != 0x00ff {
		t.Errorf("odd length: %#x", Checksum([]byte{0xff}))
	}
}

// A Neighbor Solicitation built by ICMPv6 (fe80::1 asking for fe80::2)
// carries a checksum that verifies over its pseudo-header, and the
// addresses derived from MACs and targets are RFC 4291's.
func TestICMPv6Checksum(t *testing.T) {
	src, dst := netip.MustParseAddr("fe80::1"), netip.MustParseAddr("ff02::1:ff00:2")
	ns := []byte{135, 0, 0, 0, 0, 0, 0, 0, 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 1, 1, 2, 0, 0, 0, 0, 1}
	p := ICMPv6(src, dst, 255, ns)
	if p[7] != 255 || p[6] != 58 || binary.BigEndian.Uint16(p[4:]) != 32 {
		t.Fatalf("header %x", p[:40])
	}
	if PseudoChecksum6(src, dst, 58, p[40:]) != 0 {
		t.Errorf("checksum %04x does not verify", binary.BigEndian.Uint16(p[42:]))
	}
	if LinkLocal(net.HardwareAddr{0x02, 0, 0, 0, 0, 1}) != netip.MustParseAddr("fe80::ff:fe00:1") {
		t.Errorf("link-local %s", LinkLocal(net.HardwareAddr{0x02, 0, 0, 0, 0, 1}))
	}
	g, mac := SolicitedNode(netip.MustParseAddr("2001:db8::1234:5678"))
	if g != netip.MustParseAddr("ff02::1:ff34:5678") || mac.String() != "33:33:ff:34:56:78" {
		t.Errorf("solicited-node %s %s", g, mac)
	}
}
