package traffic

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/msr-router/msr/internal/inet"
)

const (
	xdpAborted  = 0
	xdpDrop     = 1
	xdpPass     = 2
	xdpTx       = 3
	xdpRedirect = 4
)

var (
	macGen  = net.HardwareAddr{2, 0, 0, 0, 0, 1}
	macSink = net.HardwareAddr{2, 0, 0, 0, 0, 2}
)

// monotonic is bpf_ktime_get_ns's clock.
func monotonic(t *testing.T) uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return uint64(ts.Nano())
}

// referenceFrame is what trafficgen must write for flow i, sequence seq:
// built here field by field from the packet format, independently of the
// program.
func referenceFrame(i int, seq uint32, size int) []byte {
	b := make([]byte, size-FCSLen)
	copy(b[0:6], macSink)
	copy(b[6:12], macGen)
	binary.BigEndian.PutUint16(b[12:], unix.ETH_P_IP)
	ip := b[14:34]
	ip[0], ip[8], ip[9] = 0x45, 64, unix.IPPROTO_UDP
	binary.BigEndian.PutUint16(ip[2:], uint16(len(b)-14))
	copy(ip[12:16], []byte{198, 18, byte((i%65534 + 1) >> 8), byte(i%65534 + 1)})
	copy(ip[16:20], []byte{198, 19, byte((i%65534 + 1) >> 8), byte(i%65534 + 1)})
	binary.BigEndian.PutUint16(ip[10:], inet.Checksum(ip))
	udp := b[34:42]
	h := mix32(uint32(i) + 1)
	binary.BigEndian.PutUint16(udp[0:], uint16(1024+h%64512))
	binary.BigEndian.PutUint16(udp[2:], uint16(1024+(h>>16)%64512))
	binary.BigEndian.PutUint16(udp[4:], uint16(len(b)-34))
	pl := b[42:58]
	binary.BigEndian.PutUint16(pl[0:], 0x4d53)
	binary.NativeEndian.PutUint16(pl[2:], uint16(i))
	binary.NativeEndian.PutUint32(pl[4:], seq)
	return b
}

// referenceFrame6 is the IPv6 test frame trafficgen must write for flow
// i, sequence seq, sent at tx (RFC 5180 addresses; the UDP checksum over
// the pseudo-header and the zero padding), built here independently.
func referenceFrame6(i int, seq uint32, tx uint64, size int) []byte {
	b := make([]byte, size-FCSLen)
	copy(b[0:6], macSink)
	copy(b[6:12], macGen)
	binary.BigEndian.PutUint16(b[12:], unix.ETH_P_IPV6)
	ip := b[14:54]
	ip[0], ip[6], ip[7] = 0x60, unix.IPPROTO_UDP, 64
	binary.BigEndian.PutUint16(ip[4:], uint16(len(b)-54))
	host := uint16(i%65534 + 1)
	src := netip.AddrFrom16([16]byte{0x20, 0x01, 0, 2, 14: byte(host >> 8), 15: byte(host)})
	dst := netip.AddrFrom16([16]byte{0x20, 0x01, 0, 2, 0, 0, 0x80, 0, 14: byte(host >> 8), 15: byte(host)})
	copy(ip[8:], src.AsSlice())
	copy(ip[24:], dst.AsSlice())
	udp := b[54:]
	h := mix32(uint32(i) + 1)
	binary.BigEndian.PutUint16(udp[0:], uint16(1024+h%64512))
	binary.BigEndian.PutUint16(udp[2:], uint16(1024+(h>>16)%64512))
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	binary.BigEndian.PutUint16(udp[8:], 0x4d53)
	binary.NativeEndian.PutUint16(udp[10:], uint16(i))
	binary.NativeEndian.PutUint32(udp[12:], seq)
	binary.NativeEndian.PutUint64(udp[16:], tx)
	c := inet.PseudoChecksum6(src, dst, unix.IPPROTO_UDP, udp)
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(udp[6:], c)
	return b
}

// IPv6 test frames (RFC 5180): every byte as referenceFrame6 builds it,
// the UDP checksum verifying, at the smallest and the largest size.
func TestTrafficgenFrames6(t *testing.T) {
	for _, size := range []int{MinFrameSize6, 1518} {
		g, err := loadGenerator(GenConfig{DstMAC: macSink, Size: size, Flows: 3, IPv6: true}, macGen, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		for run := 0; run < 7; run++ {
			out := make([]byte, size-FCSLen)
			// The generator's pages start as its zeroed buffer (a run's
			// page pool is filled from it), so the padding is zero.
			ret, err := g.objs.Trafficgen.Run(&ebpf.RunOptions{Data: make([]byte, size-FCSLen), DataOut: out})
			if err != nil || ret != xdpTx {
				t.Fatalf("size %d run %d: verdict %d, %v", size, run, ret, err)
			}
			want := referenceFrame6(run%3, uint32(run/3), binary.NativeEndian.Uint64(out[70:78]), size)
			if !bytes.Equal(out, want) {
				t.Fatalf("size %d run %d:\n got %x\nwant %x", size, run, out[:80], want[:80])
			}
			src, dst := netip.AddrFrom16([16]byte(out[22:38])), netip.AddrFrom16([16]byte(out[38:54]))
			if inet.PseudoChecksum6(src, dst, unix.IPPROTO_UDP, out[54:]) != 0 {
				t.Errorf("size %d run %d: UDP checksum does not verify", size, run)
			}
		}
	}
	// A tagged flow and an untagged one (the LB's columns): the tag, then
	// the same IPv6 frame; the untagged one 4 bytes shorter; both
	// checksums verify.
	ports := []port{{ifindex: 7, src: macGen, dst: macSink, vlan: 10}, {ifindex: 9, src: macGen, dst: macSink}}
	tg, err := loadGenerator(GenConfig{DstMAC: macSink, Size: 128, Flows: 2, IPv6: true}, macGen, ports)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	for run, tagged := range []bool{true, false} {
		out := make([]byte, 128)
		if _, err := tg.objs.Trafficgen.Run(&ebpf.RunOptions{Data: make([]byte, 128), DataOut: out}); err != nil {
			t.Fatal(err)
		}
		ip, etherType := out[14:], binary.BigEndian.Uint16(out[12:])
		if tagged {
			if etherType != 0x8100 || binary.BigEndian.Uint16(out[14:])&0xfff != 10 {
				t.Fatalf("run %d: no VLAN 10 tag: %x", run, out[:20])
			}
			ip, etherType = out[18:], binary.BigEndian.Uint16(out[16:])
		}
		if etherType != unix.ETH_P_IPV6 {
			t.Errorf("run %d (tagged %v): EtherType %#x", run, tagged, etherType)
		}
		src, dst := netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40]))
		if ip[0]>>4 != 6 || inet.PseudoChecksum6(src, dst, unix.IPPROTO_UDP, ip[40:40+int(binary.BigEndian.Uint16(ip[4:]))]) != 0 {
			t.Errorf("run %d (tagged %v): not an IPv6 frame whose UDP checksum verifies: %x", run, tagged, out[:80])
		}
	}
	// Flows aimed at a table's IPv6 destinations.
	dst := netip.MustParseAddr("2001:db8:77::1")
	g, err := loadGenerator(GenConfig{DstMAC: macSink, Size: 128, Flows: 1, IPv6: true, Dsts: []netip.Addr{dst}}, macGen, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	out := make([]byte, 124)
	if _, err := g.objs.Trafficgen.Run(&ebpf.RunOptions{Data: make([]byte, 124), DataOut: out}); err != nil {
		t.Fatal(err)
	}
	src := netip.AddrFrom16([16]byte(out[22:38]))
	if got := netip.AddrFrom16([16]byte(out[38:54])); got != dst || inet.PseudoChecksum6(src, dst, unix.IPPROTO_UDP, out[54:]) != 0 {
		t.Errorf("aimed at %v: destination %v, checksum %#x", dst, got, inet.PseudoChecksum6(src, dst, unix.IPPROTO_UDP, out[54:]))
	}
}

func TestTrafficgenFrames(t *testing.T) {
	for _, size := range []int{64, 128, 1518} {
		g, err := loadGenerator(GenConfig{DstMAC: macSink, Size: size, Flows: 3}, macGen, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		// Seven runs over three flows: flows 0,1,2,0,1,2,0 with their own
		// sequence numbers. The input is garbage, as a reused page is.
		for run := 0; run < 7; run++ {
			in := bytes.Repeat([]byte{0xa5}, size-FCSLen)
			out := make([]byte, len(in))
			before := monotonic(t)
			ret, err := g.objs.Trafficgen.Run(&ebpf.RunOptions{Data: in, DataOut: out})
			after := monotonic(t)
			if err != nil || ret != xdpTx {
				t.Fatalf("size %d run %d: verdict %d, %v", size, run, ret, err)
			}
			want := referenceFrame(run%3, uint32(run/3), size)
			ts := binary.NativeEndian.Uint64(out[50:58])
			if ts < before || ts > after {
				t.Errorf("size %d run %d: tx timestamp %d outside [%d, %d]", size, run, ts, before, after)
			}
			copy(out[50:58], want[50:58])
			if !bytes.Equal(out[:58], want[:58]) {
				t.Fatalf("size %d run %d:\n got %x\nwant %x", size, run, out[:58], want[:58])
			}
			if inet.Checksum(out[14:34]) != 0 {
				t.Errorf("size %d run %d: IPv4 header checksum does not verify", size, run)
			}
		}
		if g.Sent() != 7 {
			t.Errorf("sent = %d, want 7", g.Sent())
		}
	}
}

// TestTrafficgenFirstFlow: a generator from flow 5 sends flows 5, 6, 7,
// frame for frame those a generator of every flow sends.
func TestTrafficgenFirstFlow(t *testing.T) {
	g, err := loadGenerator(GenConfig{DstMAC: macSink, Size: 64, Flows: 3, FirstFlow: 5}, macGen, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for run := 0; run < 4; run++ {
		in := make([]byte, 64-FCSLen)
		out := make([]byte, len(in))
		if ret, err := g.objs.Trafficgen.Run(&ebpf.RunOptions{Data: in, DataOut: out}); err != nil || ret != xdpTx {
			t.Fatalf("run %d: verdict %d, %v", run, ret, err)
		}
		want := referenceFrame(5+run%3, uint32(run/3), 64)
		copy(out[50:58], want[50:58])
		if !bytes.Equal(out[:58], want[:58]) {
			t.Fatalf("run %d:\n got %x\nwant %x", run, out[:58], want[:58])
		}
	}
}

// TestTrafficgenWalk: with more destinations than flows, frame k goes to
// the k-th destination whatever its flow, each flow keeps its sequence,
// and the IPv4 header's and the IPv6 UDP checksums verify.
func TestTrafficgenWalk(t *testing.T) {
	for _, ipv6 := range []bool{false, true} {
		var dsts []netip.Addr
		for i := range 7 {
			if ipv6 {
				dsts = append(dsts, netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, byte(i), 0xff, 15: byte(3 * i)}))
			} else {
				dsts = append(dsts, netip.AddrFrom4([4]byte{203, byte(i), 113, byte(250 - i)}))
			}
		}
		size := 128
		g, err := loadGenerator(GenConfig{DstMAC: macSink, Size: size, Flows: 2, IPv6: ipv6, Dsts: dsts}, macGen, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		for k := range 9 {
			out := make([]byte, size-FCSLen)
			if ret, err := g.objs.Trafficgen.Run(&ebpf.RunOptions{Data: make([]byte, size-FCSLen), DataOut: out}); err != nil || ret != xdpTx {
				t.Fatalf("ipv6 %v frame %d: verdict %d, %v", ipv6, k, ret, err)
			}
			want := dsts[k%len(dsts)]
			var got netip.Addr
			var pl []byte
			if ipv6 {
				src := netip.AddrFrom16([16]byte(out[22:38]))
				got, pl = netip.AddrFrom16([16]byte(out[38:54])), out[62:]
				if inet.PseudoChecksum6(src, got, unix.IPPROTO_UDP, out[54:]) != 0 {
					t.Errorf("frame %d to %v: UDP checksum does not verify", k, got)
				}
			} else {
				got, pl = netip.AddrFrom4([4]byte(out[30:34])), out[42:]
				if inet.Checksum(out[14:34]) != 0 {
					t.Errorf("frame %d to %v: IPv4 header checksum does not verify", k, got)
				}
			}
			flow, seq := binary.NativeEndian.Uint16(pl[2:]), binary.NativeEndian.Uint32(pl[4:])
			if got != want || int(flow) != k%2 || int(seq) != k/2 {
				t.Errorf("ipv6 %v frame %d: to %v flow %d seq %d, want %v flow %d seq %d", ipv6, k, got, flow, seq, want, k%2, k/2)
			}
		}
	}
}

// Flows with ports leave by a redirect to their port, with its MACs:
// flow 0 by the first port, flow 1 by the second, flow 2 by the first.
func TestTrafficgenPorts(t *testing.T) {
	a, b := net.HardwareAddr{2, 0, 0, 0, 0, 0xa}, net.HardwareAddr{2, 0, 0, 0, 0, 0xb}
	ports := []port{{ifindex: 7, src: macGen, dst: a}, {ifindex: 9, src: macSink, dst: b}}
	g, err := loadGenerator(GenConfig{DstMAC: macSink, Size: 64, Flows: 3}, macGen, ports)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for run, want := range []port{ports[0], ports[1], ports[0]} {
		out := make([]byte, 60)
		ret, err := g.objs.Trafficgen.Run(&ebpf.RunOptions{Data: make([]byte, 60), DataOut: out})
		if err != nil || ret != xdpRedirect {
			t.Fatalf("run %d: verdict %d, %v", run, ret, err)
		}
		if !bytes.Equal(out[0:6], want.dst) || !bytes.Equal(out[6:12], want.src) {
			t.Errorf("run %d: MACs %x, want %v from %v", run, out[:12], want.dst, want.src)
		}
	}
}

// A flood's frames: a TCP SYN to port 179 and an ICMP echo request from
// the configured source, every checksum verifying (the TCP one over its
// pseudo-header), the IPv4 length the headers' alone.
func TestTrafficgenFlood(t *testing.T) {
	src, dst := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.1")
	for _, c := range []struct {
		proto  Proto
		ipLen  int
		verify func(ip, l4 []byte) bool
	}{
		{ProtoTCP, 40, func(ip, l4 []byte) bool {
			pseudo := append(append([]byte{}, ip[12:20]...), 0, unix.IPPROTO_TCP, 0, 20)
			return binary.BigEndian.Uint16(l4[2:]) == 179 && l4[13] == 0x02 && l4[12]>>4 == 5 &&
				inet.Checksum(append(pseudo, l4[:20]...)) == 0
		}},
		{ProtoICMP, 28, func(ip, l4 []byte) bool { return l4[0] == 8 && l4[1] == 0 && inet.Checksum(l4[:8]) == 0 }},
	} {
		g, err := loadGenerator(GenConfig{DstMAC: macSink, Size: 64, Flows: 4, Protos: []Proto{c.proto}, Src: src, DstPort: 179, Dsts: []netip.Addr{dst}}, macGen, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		for run := range 4 {
			out := make([]byte, 60)
			ret, err := g.objs.Trafficgen.Run(&ebpf.RunOptions{Data: bytes.Repeat([]byte{0xa5}, 60), DataOut: out})
			if err != nil || ret != xdpTx {
				t.Fatalf("proto %d run %d: verdict %d, %v", c.proto, run, ret, err)
			}
			ip := out[14:34]
			if ip[9] != uint8(c.proto) || int(binary.BigEndian.Uint16(ip[2:])) != c.ipLen || inet.Checksum(ip) != 0 ||
				netip.AddrFrom4([4]byte(ip[12:16])) != src || netip.AddrFrom4([4]byte(ip[16:20])) != dst {
				t.Fatalf("proto %d run %d: IPv4 header %x", c.proto, run, ip)
			}
			if !c.verify(ip, out[34:]) {
				t.Errorf("proto %d run %d: header %x does not verify", c.proto, run, out[34:60])
			}
		}
	}
}

func TestTrafficgenRefusesShortFrame(t *testing.T) {
	g, err := loadGenerator(GenConfig{DstMAC: macSink, Size: 64, Flows: 1}, macGen, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ret, err := g.objs.Trafficgen.Run(&ebpf.RunOptions{Data: make([]byte, 50)})
	if err != nil || ret != xdpAborted {
		t.Errorf("50-byte frame: verdict %d, %v; want XDP_ABORTED", ret, err)
	}
	if g.Sent() != 0 {
		t.Errorf("sent = %d after an aborted run", g.Sent())
	}
}

func TestGenConfigChecks(t *testing.T) {
	for _, c := range []GenConfig{
		{DstMAC: macSink, Size: 63, Flows: 1},
		{DstMAC: macSink, Size: 1519, Flows: 1},
		{DstMAC: macSink, Size: 64, Flows: 0},
		{DstMAC: macSink, Size: 64, Flows: MaxFlows + 1},
		{DstMAC: macSink, Size: 64, Flows: 2, FirstFlow: MaxFlows - 1}, // past the last flow id
		{DstMAC: macSink, Size: 64, Flows: 1, FirstFlow: -1},
		{Size: 64, Flows: 1},
		{DstMAC: macSink, Size: 78, Flows: 1, IPv6: true}, // RFC 5180's smallest: no room for the payload
		{DstMAC: macSink, Size: 128, Flows: 1, IPv6: true, Dsts: []netip.Addr{netip.MustParseAddr("198.19.0.1")}}, // an IPv4 destination
		{DstMAC: macSink, Size: 128, Flows: 1, Dsts: []netip.Addr{netip.MustParseAddr("2001:2::1")}},              // and the other way
		{DstMAC: macSink, Size: 128, Flows: 1, IPv6: true, Protos: []Proto{ProtoTCP}},
		{DstMAC: macSink, Size: 64, Flows: 1, Dsts: make([]netip.Addr, MaxDsts+1)},                                                             // more destinations than it walks
		{DstMAC: macSink, Size: 64, Flows: 1, Protos: []Proto{ProtoTCP}, Dsts: []netip.Addr{netip.IPv4Unspecified(), netip.IPv4Unspecified()}}, // a flood does not walk
	} {
		if err := c.Check(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

func testSink(t *testing.T, flows int) *Sink {
	t.Helper()
	s, err := loadSink(flows)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.objs.Close() })
	return s
}

func runSink(t *testing.T, s *Sink, frame []byte) uint32 {
	t.Helper()
	ret, err := s.objs.Trafficsink.Run(&ebpf.RunOptions{Data: frame})
	if err != nil {
		t.Fatal(err)
	}
	return ret
}

// TestTrafficsinkFixtures runs the sink over a table of frames and checks
// each verdict, then the counters they add up to.
func TestTrafficsinkFixtures(t *testing.T) {
	s := testSink(t, 4)
	base := monotonic(t)
	// Frame seq of a flow left base + seq µs ago: the loss window's
	// arithmetic has round numbers.
	stamped := func(flow int, seq uint32) []byte {
		f := referenceFrame(flow, seq, 64)
		binary.NativeEndian.PutUint64(f[50:58], base+uint64(seq)*1000)
		return f
	}
	arp := make([]byte, 60)
	binary.BigEndian.PutUint16(arp[12:], unix.ETH_P_ARP)
	badMagic := stamped(0, 0)
	badMagic[42] ^= 0xff
	options := stamped(0, 0)
	options[14] = 0x46
	badFlow := stamped(0, 0)
	binary.NativeEndian.PutUint16(badFlow[44:], 9)
	cases := []struct {
		name  string
		frame []byte
		want  uint32
	}{
		{"flow 0 seq 0", stamped(0, 0), xdpDrop},
		{"flow 0 seq 1", stamped(0, 1), xdpDrop},
		{"flow 1 seq 5 (first of its flow)", stamped(1, 5), xdpDrop},
		{"flow 0 seq 3 (2 missing)", stamped(0, 3), xdpDrop},
		{"flow 0 seq 2 (late: reordered)", stamped(0, 2), xdpDrop},
		{"flow 0 seq 4", stamped(0, 4), xdpDrop},
		{"flow 0 seq 2 again (a duplicate of a late one)", stamped(0, 2), xdpDrop},
		{"flow 0 seq 4 again (a duplicate of the newest)", stamped(0, 4), xdpDrop},
		{"ARP", arp, xdpPass},
		{"bad magic", badMagic, xdpPass},
		{"IP options", options, xdpPass},
		{"truncated", stamped(0, 9)[:45], xdpPass},
		{"flow id out of range", badFlow, xdpDrop},
		{"tagged (a back-end's output), TTL 62", func() []byte {
			f := stamped(1, 6)
			f[22] = 62
			return append(append(append([]byte{}, f[:12]...), 0x81, 0, 0, 10), f[12:]...)
		}(), xdpDrop},
		{"flow 1 seq 10 (7, 8 and 9 missing)", stamped(1, 10), xdpDrop},
		{"IPv6, flow 2 seq 0, hop limit 63", func() []byte {
			f := referenceFrame6(2, 0, base, MinFrameSize6)
			f[21] = 63
			return f
		}(), xdpDrop},
		{"IPv6, not UDP", func() []byte {
			f := referenceFrame6(2, 1, base, MinFrameSize6)
			f[20] = unix.IPPROTO_TCP
			return f
		}(), xdpPass},
		{"IPv6, truncated", referenceFrame6(2, 1, base, MinFrameSize6)[:70], xdpPass},
	}
	for _, c := range cases {
		if got := runSink(t, s, c.frame); got != c.want {
			t.Errorf("%s: verdict %d, want %d\nframe %x", c.name, got, c.want, c.frame)
		}
	}
	r, err := s.Read()
	if err != nil {
		t.Fatal(err)
	}
	// Flow 0 missed seq 2, sent at base+2µs; flow 1 seqs 7 to 9, the
	// longest run of frames missing (2µs).
	want := SinkReport{RxPackets: 11, RxBytes: 9*60 + 64 + 78, Reordered: 1, Duplicated: 2, BadFlow: 1, Passed: 6, FlowsSeen: 3, Skipped: 4,
		LossFirst: time.Duration(base + 2000), LossLast: time.Duration(base + 9000), LossSpan: 2 * time.Microsecond, TTLMin: 62, TTLMax: 64}
	r.Latency = nil
	if !reflect.DeepEqual(*r, want) {
		t.Errorf("sink report %+v\nwant %+v", *r, want)
	}
	// A restart (a new generator's sequences start again) forgets the
	// flows and the loss window, and keeps the counters.
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	runSink(t, s, stamped(0, 0))
	if r, err = s.Read(); err != nil || r.FlowsSeen != 1 || r.Reordered != 1 || r.Duplicated != 2 || r.RxPackets != 12 || r.LossFirst != 0 || r.LossSpan != 0 {
		t.Errorf("after a restart: %+v, %v", r, err)
	}
}

// TestSinkWindow holds the sink's window of recent sequence numbers to a
// model that remembers every number: frames of one flow jump ahead by
// every distance around the window's words (1, 63, 64, 65, 255, 256, ...),
// and older numbers come again, some for the first time (late), some a
// second time (duplicates), some further behind than the window (beyond
// it: late, whether or not they came before). Sequence numbers start near
// the top of 32 bits, so they wrap.
func TestSinkWindow(t *testing.T) {
	s := testSink(t, 1)
	rng := rand.New(rand.NewPCG(1, 2))
	jumps := []uint32{1, 1, 2, 63, 64, 65, 127, 128, 129, 191, 192, 193, 255, 256, 257, 300, 1000}
	var (
		seen                  = map[uint32]bool{}
		newest                = uint32(1<<32 - 3000)
		first                 = true
		want                  SinkReport
		wantReceived          uint64
		inOrder, late, beyond int
	)
	send := func(seq uint32) {
		runSink(t, s, referenceFrame(0, seq, 64))
		want.RxPackets++
		switch k := newest - seq; {
		case first || int32(seq-newest) > 0:
			first, newest = false, seq
			seen[seq] = true
			wantReceived++
			inOrder++
		case k >= 256:
			want.Reordered++
			want.BeyondWindow++
			wantReceived++
			beyond++
		case seen[seq]:
			want.Duplicated++
		default:
			seen[seq] = true
			want.Reordered++
			wantReceived++
			late++
		}
	}
	var sent []uint32
	for i := 0; i < 4000; i++ {
		seq := newest
		switch rng.IntN(8) {
		case 0:
			seq = newest + jumps[rng.IntN(len(jumps))]
		case 1, 2, 3:
			seq = newest + 1 // in order
		case 4, 5:
			seq = newest - uint32(rng.IntN(320)) // again, late, or beyond the window
		default:
			if len(sent) > 0 { // one of the last 100 sent, again
				seq = sent[len(sent)-1-rng.IntN(min(len(sent), 100))]
			}
		}
		send(seq)
		sent = append(sent, seq)
	}
	r, err := s.Read()
	if err != nil {
		t.Fatal(err)
	}
	if r.RxPackets != want.RxPackets || r.Duplicated != want.Duplicated || r.Reordered != want.Reordered || r.BeyondWindow != want.BeyondWindow {
		t.Errorf("sink: %d frames, %d duplicated, %d reordered, %d beyond the window; the model: %d, %d, %d, %d",
			r.RxPackets, r.Duplicated, r.Reordered, r.BeyondWindow, want.RxPackets, want.Duplicated, want.Reordered, want.BeyondWindow)
	}
	var f trafficsinkSinkFlow
	if err := s.objs.SinkFlows.Lookup(uint32(0), &f); err != nil {
		t.Fatal(err)
	}
	if f.Received != wantReceived {
		t.Errorf("flow's received %d, want %d (each number once)", f.Received, wantReceived)
	}
	// Every kind came up, or the test proves less than it says.
	if inOrder < 100 || late < 100 || beyond < 10 || want.Duplicated < 100 {
		t.Errorf("too few of a kind: %d in order, %d late, %d beyond, %d duplicated", inOrder, late, beyond, want.Duplicated)
	}
}

// TestSinkLatencyBuckets stamps frames as sent d ago and checks that the
// bucket the BPF program picks is the one Go's BucketLow says holds d:
// the two sides of the histogram agree.
func TestSinkLatencyBuckets(t *testing.T) {
	for _, d := range []time.Duration{3 * time.Microsecond, 100 * time.Microsecond, time.Millisecond, 7 * time.Millisecond, 300 * time.Millisecond} {
		s := testSink(t, 1)
		f := referenceFrame(0, 0, 64)
		start := monotonic(t)
		binary.NativeEndian.PutUint64(f[50:58], start-uint64(d))
		runSink(t, s, f)
		slack := monotonic(t) - start
		r, err := s.Read()
		if err != nil {
			t.Fatal(err)
		}
		got := -1
		for b, c := range r.Latency {
			if c > 0 {
				got = b
			}
		}
		if got < 0 {
			t.Fatalf("%v: no sample in the histogram", d)
		}
		low, high := BucketLow(got), BucketLow(got+1)
		if uint64(d) >= high || uint64(d)+slack < low {
			t.Errorf("%v (+%dns): bucket %d holds [%d, %d)", d, slack, got, low, high)
		}
	}
}

func TestHistogram(t *testing.T) {
	for b := 1; b < 256; b++ {
		if BucketLow(b) <= BucketLow(b-1) {
			t.Fatalf("bucket %d starts at %d, not after bucket %d at %d", b, BucketLow(b), b-1, BucketLow(b-1))
		}
	}
	h := make(Histogram, 256)
	h[20] = 98 // 20: [40, 48) ns
	h[100] = 1
	h[200] = 1
	if q := h.Quantile(0.5); q != time.Duration(BucketLow(21)) {
		t.Errorf("p50 = %v, want %v", q, BucketLow(21))
	}
	if q := h.Quantile(0.99); q != time.Duration(BucketLow(101)) {
		t.Errorf("p99 = %v, want %v", q, BucketLow(101))
	}
	if q := h.Quantile(1); q != time.Duration(BucketLow(201)) {
		t.Errorf("max = %v, want %v", q, BucketLow(201))
	}
	if q := make(Histogram, 256).Quantile(0.5); q != 0 {
		t.Errorf("empty histogram p50 = %v", q)
	}
}

// On a host's interface (AttachHost) a test frame addressed to another
// MAC is not counted: a switch flooding it is not delivering it. The
// sink's own instance counts every test frame, into the same counters.
func TestSinkHostCountsOnlyItsFrames(t *testing.T) {
	s := testSink(t, 4)
	var mac [6]byte
	copy(mac[:], macSink)
	host, err := s.hostProgram(mac)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close() })
	run := func(p *ebpf.Program, frame []byte) uint32 {
		ret, err := p.Run(&ebpf.RunOptions{Data: frame})
		if err != nil {
			t.Fatal(err)
		}
		return ret
	}
	other := referenceFrame(0, 2, 64)
	other[5] ^= 1
	for _, c := range []struct {
		name  string
		prog  *ebpf.Program
		frame []byte
		want  uint32
	}{
		{"the host's instance, a frame to its MAC", host, referenceFrame(0, 0, 64), xdpDrop},
		{"the host's instance, a frame to another MAC", host, other, xdpPass},
		{"the sink's own instance, a frame to another MAC", s.objs.Trafficsink, other, xdpDrop},
	} {
		if got := run(c.prog, c.frame); got != c.want {
			t.Errorf("%s: verdict %d, want %d", c.name, got, c.want)
		}
	}
	if r, err := s.Read(); err != nil || r.RxPackets != 2 || r.Passed != 1 {
		t.Errorf("counted %+v, %v; want 2 test frames, 1 passed", r, err)
	}
}
