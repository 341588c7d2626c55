package router

import (
	"bytes"
	"encoding/hex"
	"flag"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/ip4defrag"
	"github.com/gopacket/gopacket/layers"

	"github.com/msr-router/msr/internal/inet"
)

// update rewrites the golden files from what the builders make now
// (go test ./router -run TestSlowPathPackets -update), to be read and
// committed only when a change of format is meant.
var update = flag.Bool("update", false, "rewrite testdata/golden from the builders")

// udpPacket is a UDP packet from src to dst with n bytes of data, the
// bytes counting up.
func udpPacket(src, dst string, ttl uint8, n int) []byte {
	data := make([]byte, 8+n)
	data[1], data[3], data[5] = 0x35, 0x35, byte(8+n)
	data[4] = byte((8 + n) >> 8)
	for i := 8; i < len(data); i++ {
		data[i] = byte(i)
	}
	p := inet.IPv4(netip.MustParseAddr(src), netip.MustParseAddr(dst), 17, data)
	p[8] = ttl
	p[10], p[11] = 0, 0
	sum := inet.Checksum(p[:20])
	p[10], p[11] = byte(sum>>8), byte(sum)
	return p
}

// golden compares got with testdata/golden/NAME.hex.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".hex")
	if *update {
		os.MkdirAll(filepath.Dir(path), 0o755)
		os.WriteFile(path, []byte(hex.EncodeToString(got)+"\n"), 0o644)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./router -run TestSlowPathPackets -update writes it)", err)
	}
	want, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s:\n got %x\nwant %x", name, got, want)
	}
}

// decode parses an IPv4 packet with gopacket, an implementation of its
// own, and checks the header checksum.
func decode(t *testing.T, pkt []byte) gopacket.Packet {
	t.Helper()
	p := gopacket.NewPacket(pkt, layers.LayerTypeIPv4, gopacket.Default)
	if err := p.ErrorLayer(); err != nil {
		t.Fatalf("gopacket: %v: %x", err.Error(), pkt)
	}
	ip := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if inet.Checksum(pkt[:ip.IHL*4]) != 0 {
		t.Errorf("bad header checksum: %x", pkt[:ip.IHL*4])
	}
	return p
}

// checkICMPError decodes an ICMP error and checks what every one must
// carry: the router's address to the packet's source, a valid checksum,
// the quote of the packet.
func checkICMPError(t *testing.T, got, about []byte, typ, code uint8) *layers.ICMPv4 {
	t.Helper()
	p := decode(t, got)
	ip := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	icmp, ok := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	if !ok {
		t.Fatalf("no ICMP in %x", got)
	}
	if !ip.SrcIP.Equal(net.IP{192, 0, 2, 1}) || !ip.DstIP.Equal(net.IP(about[12:16])) || ip.Protocol != layers.IPProtocolICMPv4 {
		t.Errorf("from %s to %s, protocol %s", ip.SrcIP, ip.DstIP, ip.Protocol)
	}
	if icmp.TypeCode != layers.CreateICMPv4TypeCode(typ, code) || inet.Checksum(got[20:]) != 0 {
		t.Errorf("ICMP %s, checksum over the message %#x", icmp.TypeCode, inet.Checksum(got[20:]))
	}
	if q := min(len(about), 548); !bytes.Equal(icmp.Payload, about[:q]) || len(got) > 576 {
		t.Errorf("quote of %d bytes (want %d), packet %d bytes", len(icmp.Payload), q, len(got))
	}
	return icmp
}

func TestSlowPathPackets(t *testing.T) {
	router := netip.MustParseAddr("192.0.2.1")
	udp := udpPacket("198.51.100.20", "203.0.113.9", 1, 20)

	t.Run("time exceeded", func(t *testing.T) {
		got := icmpErrorPacket(udp, router, 11, 0, 0)
		checkICMPError(t, got, udp, 11, 0)
		golden(t, "time-exceeded", got)
	})
	t.Run("fragmentation needed", func(t *testing.T) {
		got := icmpErrorPacket(udp, router, 3, 4, 1400)
		icmp := checkICMPError(t, got, udp, 3, 4)
		if icmp.Seq != 1400 || icmp.Id != 0 { // RFC 1191: unused, next-hop MTU
			t.Errorf("next-hop MTU field %d (unused %d)", icmp.Seq, icmp.Id)
		}
		golden(t, "frag-needed", got)
	})
	t.Run("quote within 576 bytes", func(t *testing.T) {
		big := udpPacket("198.51.100.20", "203.0.113.9", 1, 1400)
		got := icmpErrorPacket(big, router, 3, 0, 0)
		checkICMPError(t, got, big, 3, 0)
		if len(got) != 576 {
			t.Errorf("%d bytes", len(got))
		}
	})
	t.Run("echo reply", func(t *testing.T) {
		req := inet.IPv4(netip.MustParseAddr("198.51.100.20"), router, 1, []byte{8, 0, 0, 0, 0x12, 0x34, 0, 1, 'p', 'i', 'n', 'g'})
		sum := inet.Checksum(req[20:])
		req[22], req[23] = byte(sum>>8), byte(sum)
		got := echoReply(req)
		p := decode(t, got)
		icmp := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
		ip := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		if icmp.TypeCode.Type() != layers.ICMPv4TypeEchoReply || icmp.Id != 0x1234 || icmp.Seq != 1 || string(icmp.Payload) != "ping" ||
			!ip.SrcIP.Equal(router.AsSlice()) || inet.Checksum(got[20:]) != 0 {
			t.Errorf("echo reply %+v from %s", icmp, ip.SrcIP)
		}
		golden(t, "echo-reply", got)
	})
	t.Run("ARP request", func(t *testing.T) {
		got := arpRequest(net.HardwareAddr{2, 0, 0, 0, 0xb0, 1}, router, netip.MustParseAddr("192.0.2.10"))
		p := gopacket.NewPacket(got, layers.LayerTypeARP, gopacket.Default)
		arp, ok := p.Layer(layers.LayerTypeARP).(*layers.ARP)
		if !ok || arp.Operation != layers.ARPRequest || !bytes.Equal(arp.SourceProtAddress, router.AsSlice()) ||
			!bytes.Equal(arp.DstProtAddress, []byte{192, 0, 2, 10}) || !bytes.Equal(arp.SourceHwAddress, []byte{2, 0, 0, 0, 0xb0, 1}) {
			t.Errorf("ARP %+v", arp)
		}
		golden(t, "arp-request", got)
	})
}

// Fragments fit the MTU, carry 8-byte multiples, and gopacket's
// reassembly gives back the packet; a fragment cut again keeps its offset
// and its More Fragments flag.
func TestFragments(t *testing.T) {
	pkt := udpPacket("198.51.100.20", "203.0.113.9", 63, 1472)
	frags := fragments(pkt, 576)
	if len(frags) != 3 {
		t.Fatalf("%d fragments of a 1500-byte packet at MTU 576", len(frags))
	}
	defrag := ip4defrag.NewIPv4Defragmenter()
	var whole *layers.IPv4
	for i, f := range frags {
		ip := decode(t, f).Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		more := ip.Flags&layers.IPv4MoreFragments != 0
		if len(f) > 576 || (i < len(frags)-1 && ((len(f)-20)%8 != 0 || !more)) || (i == len(frags)-1 && more) {
			t.Errorf("fragment %d: %d bytes, offset %d, more %v", i, len(f), ip.FragOffset, more)
		}
		out, err := defrag.DefragIPv4(ip)
		if err != nil {
			t.Fatal(err)
		}
		if out != nil {
			whole = out
		}
	}
	if whole == nil || !bytes.Equal(whole.Payload, pkt[20:]) {
		t.Errorf("reassembled: %v", whole)
	}
	golden(t, "fragment-1", frags[1])

	// A first fragment of a larger datagram (MF set), cut again.
	first := bytes.Clone(frags[0])
	again := fragments(first, 300)
	off := 0
	for i, f := range again {
		ip := decode(t, f).Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		if ip.Flags&layers.IPv4MoreFragments == 0 || int(ip.FragOffset)*8 != off {
			t.Errorf("refragment %d: offset %d (want %d), flags %v", i, ip.FragOffset*8, off, ip.Flags)
		}
		off += len(f) - 20
	}
	if fragments(pkt, 20) != nil || fragments(pkt[:100], 576) != nil {
		t.Error("fragments of a packet with no room, or shorter than its length")
	}
}

// Which packets may have an ICMP error (RFC 1812 §4.3.2.7).
func TestICMPErrorAllowed(t *testing.T) {
	udp := udpPacket("198.51.100.20", "203.0.113.9", 1, 20)
	with := func(f func(p []byte)) []byte {
		p := bytes.Clone(udp)
		f(p)
		return p
	}
	icmp := func(typ byte) []byte {
		return inet.IPv4(netip.MustParseAddr("198.51.100.20"), netip.MustParseAddr("203.0.113.9"), 1, []byte{typ, 0, 0, 0, 0, 0, 0, 0})
	}
	for _, c := range []struct {
		name string
		pkt  []byte
		want bool
	}{
		{"udp", udp, true},
		{"echo request", icmp(8), true},
		{"an ICMP error", icmp(3), false},
		{"a non-first fragment", with(func(p []byte) { p[7] = 10 }), false},
		{"to a multicast group", with(func(p []byte) { copy(p[16:], []byte{224, 0, 0, 9}) }), false},
		{"to broadcast", with(func(p []byte) { copy(p[16:], []byte{255, 255, 255, 255}) }), false},
		{"from 0.0.0.0", with(func(p []byte) { copy(p[12:], []byte{0, 0, 0, 0}) }), false},
		{"from loopback", with(func(p []byte) { copy(p[12:], []byte{127, 0, 0, 1}) }), false},
		{"shorter than a header", udp[:19], false},
	} {
		if got := icmpErrorAllowed(c.pkt); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
