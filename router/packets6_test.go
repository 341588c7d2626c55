package router

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/msr-router/msr/internal/inet"
)

func udp6(src, dst string, n int) []byte {
	return ip6Packet(netip.MustParseAddr(src), netip.MustParseAddr(dst), 17, 64, udpPayload(1000, 2000, n))
}

// checksum6OK says whether an IPv6 packet's ICMPv6 message checksums.
func checksum6OK(p []byte) bool {
	return inet.PseudoChecksum6(netip.AddrFrom16([16]byte(p[8:24])), netip.AddrFrom16([16]byte(p[24:40])), 58, p[40:]) == 0
}

// TestSlowPathPackets6: the ICMPv6 errors, echo reply and solicitation
// the slow path makes, decoded by gopacket and checksummed.
func TestSlowPathPackets6(t *testing.T) {
	from := netip.MustParseAddr("2001:db8:10::1")
	about := udp6("2001:db8:10::10", "2001:db8:11::20", 1400)
	ptb := icmp6ErrorPacket(about, from, icmp6PacketTooBig, 0, 1280)
	if len(ptb) != 1280 || !checksum6OK(ptb) {
		t.Fatalf("Packet Too Big: %d bytes (want the minimum MTU, 1280), checksum ok %v", len(ptb), checksum6OK(ptb))
	}
	pk := gopacket.NewPacket(ptb, layers.LayerTypeIPv6, gopacket.Default)
	ip, _ := pk.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	ic, _ := pk.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6)
	if ip == nil || ic == nil || ip.SrcIP.String() != "2001:db8:10::1" || ip.DstIP.String() != "2001:db8:10::10" ||
		ic.TypeCode.Type() != icmp6PacketTooBig || binary.BigEndian.Uint32(ic.Payload[0:4]) != 1280 || !bytes.Equal(ic.Payload[4:], about[:1232]) {
		t.Errorf("Packet Too Big decoded as %v", pk)
	}
	te := icmp6ErrorPacket(udp6("2001:db8:10::10", "2001:db8:11::20", 10), from, icmp6TimeExceeded, 0, 0)
	if len(te) != 40+8+40+18 || te[40] != 3 || !checksum6OK(te) {
		t.Errorf("Time Exceeded: %x", te)
	}

	echo := inet.ICMPv6(netip.MustParseAddr("2001:db8:10::10"), from, 64, []byte{128, 0, 0, 0, 0, 7, 0, 1, 'h', 'i'})
	reply := echoReply6(echo, echo[40:])
	if !checksum6OK(reply) || reply[40] != 129 || !bytes.Equal(reply[44:], echo[44:]) || !bytes.Equal(reply[8:24], echo[24:40]) {
		t.Errorf("echo reply %x to %x", reply, echo)
	}

	mac := net.HardwareAddr{2, 0, 0, 0, 0xb0, 1}
	ns := neighborSolicitation(mac, from, netip.MustParseAddr("2001:db8:10::10"))
	pk = gopacket.NewPacket(ns, layers.LayerTypeIPv6, gopacket.Default)
	sol, _ := pk.Layer(layers.LayerTypeICMPv6NeighborSolicitation).(*layers.ICMPv6NeighborSolicitation)
	if sol == nil || !checksum6OK(ns) || ns[7] != 255 || sol.TargetAddress.String() != "2001:db8:10::10" ||
		netip.AddrFrom16([16]byte(ns[24:40])).String() != "ff02::1:ff00:10" || len(sol.Options) != 1 || !bytes.Equal(sol.Options[0].Data, mac) {
		t.Errorf("solicitation decoded as %v", pk)
	}
	if msg, ok := ndpMessage(ns); !ok || msg[0] != icmp6NeighborSol {
		t.Errorf("ndpMessage refuses a good solicitation")
	}
	if got, ok := ndpOption(ns[40+24:], 1); !ok || !bytes.Equal(got, mac) {
		t.Errorf("source link-layer option: %v %v", got, ok)
	}
	bad := bytes.Clone(ns)
	bad[7] = 64 // not from the link: RFC 4861 §7.1.1
	if _, ok := ndpMessage(bad); ok {
		t.Errorf("ndpMessage takes hop limit 64")
	}
	bad = bytes.Clone(ns)
	bad[60] ^= 1
	if _, ok := ndpMessage(bad); ok {
		t.Errorf("ndpMessage takes a bad checksum")
	}
	if _, ok := ndpOption([]byte{1, 0, 1, 2, 3, 4, 5, 6}, 1); ok {
		t.Errorf("ndpOption takes an option of length 0")
	}
}

// TestICMP6ErrorAllowed: RFC 4443 §2.4 (e), and the chain walk under it.
func TestICMP6ErrorAllowed(t *testing.T) {
	src, dst := netip.MustParseAddr("2001:db8:10::10"), netip.MustParseAddr("2001:db8:11::20")
	icmp := func(typ uint8) []byte { return inet.ICMPv6(src, dst, 64, []byte{typ, 0, 0, 0, 0, 0, 0, 0}) }
	withHop := ip6Packet(src, dst, 0, 64, append([]byte{58, 0, 1, 4, 0, 0, 0, 0}, 1, 0, 0, 0, 0, 0, 0, 0))
	cases := []struct {
		name string
		pkt  []byte
		want bool
	}{
		{"UDP", udp6("2001:db8:10::10", "2001:db8:11::20", 4), true},
		{"echo request", icmp(128), true},
		{"an error (Destination Unreachable)", icmp(1), false},
		{"an error behind Hop-by-Hop", withHop, false},
		{"a redirect", icmp(137), false},
		{"to a multicast group", udp6("2001:db8:10::10", "ff0e::1", 4), false},
		{"from the unspecified address", udp6("::", "2001:db8:11::20", 4), false},
		{"from a multicast address", udp6("ff02::1", "2001:db8:11::20", 4), false},
		{"a chain past the packet", ip6Packet(src, dst, 60, 64, []byte{17, 9, 0, 0}), true},
	}
	for _, c := range cases {
		if got := icmp6ErrorAllowed(c.pkt); got != c.want {
			t.Errorf("%s: allowed %v, want %v", c.name, got, c.want)
		}
	}
}
