package trace

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// udpFrame is an Ethernet frame of an IPv4 UDP datagram, tagged with
// vlan if it is not 0.
func udpFrame(vlan uint16, ttl byte, id uint16) []byte {
	f := []byte{2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2}
	if vlan != 0 {
		f = binary.BigEndian.AppendUint16(f, 0x8100)
		f = binary.BigEndian.AppendUint16(f, vlan)
	}
	f = binary.BigEndian.AppendUint16(f, 0x0800)
	ip := []byte{0x45, 0, 0, 36, byte(id >> 8), byte(id), 0, 0, ttl, 17, 0, 0, 192, 0, 2, 10, 203, 0, 113, 10}
	udp := []byte{0x9c, 0x40, 0x13, 0x88, 0, 16, 0xab, 0xcd, 1, 2, 3, 4, 5, 6, 7, 8}
	return append(append(f, ip...), udp...)
}

// TestParsePacket: a frame's addresses, ports, TTL and VLAN are read, and
// its key stays the same across the stages' rewrites (TTL, tag, MACs)
// but differs between two datagrams of one flow.
func TestParsePacket(t *testing.T) {
	in, err := ParsePacket(udpFrame(0, 64, 7))
	if err != nil {
		t.Fatal(err)
	}
	want := Packet{Src: netip.MustParseAddr("192.0.2.10"), Dst: netip.MustParseAddr("203.0.113.10"), Proto: 17, SPort: 40000, DPort: 5000, TTL: 64, Len: 36}
	if in.Src != want.Src || in.Dst != want.Dst || in.SPort != want.SPort || in.DPort != want.DPort || in.TTL != 64 || in.VLAN != 0 || in.Len != 36 {
		t.Errorf("parsed %+v, want %+v", in, want)
	}
	routed := udpFrame(12, 63, 7)
	copy(routed, []byte{2, 0, 0, 0, 0, 9})
	out, err := ParsePacket(routed)
	if err != nil || out.Key != in.Key || out.VLAN != 12 || out.TTL != 63 {
		t.Errorf("routed: %+v %v: want the same key, vlan 12, ttl 63", out, err)
	}
	if next, _ := ParsePacket(udpFrame(0, 64, 8)); next.Key == in.Key {
		t.Error("two datagrams of a flow (ids 7 and 8) have one key")
	}
	if got := in.String(); got != "192.0.2.10 -> 203.0.113.10 udp 40000 -> 5000, 36 bytes" {
		t.Errorf("String: %q", got)
	}
}

// TestParseHostile: a report or frame cut short, of another EtherType or
// of a verdict unknown is an error, never a panic.
func TestParseHostile(t *testing.T) {
	f := udpFrame(10, 64, 1)
	for n := range len(f) {
		if n >= 38 { // the IPv4 header whole
			break
		}
		if _, err := ParsePacket(f[:n]); err == nil {
			t.Errorf("a frame of %d bytes parsed", n)
		}
	}
	arp := append(make([]byte, 12), 0x08, 0x06)
	if _, err := ParsePacket(append(arp, make([]byte, 28)...)); err == nil {
		t.Error("ARP parsed as a packet")
	}
	v6 := append(make([]byte, 12), 0x86, 0xdd)
	if _, err := ParsePacket(append(v6, make([]byte, 30)...)); err == nil {
		t.Error("an IPv6 header of 30 bytes parsed")
	}
	raw := make([]byte, rawLen)
	if _, err := ParseRaw(raw[:rawLen-1]); err == nil {
		t.Error("a report shorter than its head parsed")
	}
	binary.NativeEndian.PutUint16(raw[12:], 9)
	if _, err := ParseRaw(raw); err == nil {
		t.Error("verdict 9 parsed")
	}
	binary.NativeEndian.PutUint16(raw[12:], 2)
	binary.NativeEndian.PutUint32(raw[36:], 1000)
	r, err := ParseRaw(append(raw, f...))
	if err != nil || len(r.Frame) != len(f) || r.VerdictName() != "dropped" {
		t.Errorf("a report saying its frame is 1,000 bytes, %d attached: %d, %v", len(f), len(r.Frame), err)
	}
}

// TestSpecCheck: a spec a data path cannot match is refused.
func TestSpecCheck(t *testing.T) {
	a, b, six := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("203.0.113.10"), netip.MustParseAddr("2001:db8::1")
	for _, c := range []struct {
		s    Spec
		want string
	}{
		{Spec{ID: 1, Src: a, Dst: b, Count: 1}, ""},
		{Spec{ID: 1, Src: a, Dst: b, Proto: 17, DPort: 53, Count: 100}, ""},
		{Spec{ID: 1, Src: a, Count: 1}, "a source and a destination"},
		{Spec{ID: 1, Src: a, Dst: six, Count: 1}, "different families"},
		{Spec{ID: 1, Src: a, Dst: b, Count: 0}, "count 0"},
		{Spec{ID: 1, Src: a, Dst: b, Count: 101}, "count 101"},
		{Spec{ID: 1, Src: a, Dst: b, Proto: 1, DPort: 53, Count: 1}, "needs --proto tcp or udp"},
		{Spec{Src: a, Dst: b, Count: 1}, "id 0"},
	} {
		err := c.s.Check()
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.s, err, c.want)
		}
	}
	src, dst := Spec{Src: a, Dst: b}.Addrs()
	if src[0] != 192 || dst[3] != 10 || src[4] != 0 || (Spec{Src: a, Dst: b}).Family() != 4 {
		t.Errorf("IPv4 addresses as matched: %v %v", src, dst)
	}
}

// TestJoin: events of two packets from three stages, out of order, make
// two walks in time order; a walk ends where a stage dropped the packet
// or an LB sent it out of the router, else it is not done; a packet not
// seen coming in (before the trace was armed there) makes none.
func TestJoin(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ev := func(key, element, verdict string, ms int, leaves bool) Event {
		return Event{Key: key, Element: element, Verdict: verdict, At: t0.Add(time.Duration(ms) * time.Millisecond), Leaves: leaves, Out: "e0", Reason: "acl"}
	}
	in := func(e Event) Event { e.Ingress = true; return e }
	events := []Event{ev("b", "r2", "dropped", 5, false), ev("a", "lb2", "sent", 3, true), in(ev("a", "lb1", "sent", 1, false)),
		in(ev("b", "lb2", "sent", 4, false)), ev("a", "r1", "sent", 2, false), ev("c", "r1", "sent", 0, false), ev("c", "lb2", "sent", 1, true)}
	walks := Join(events)
	if len(walks) != 2 || len(walks[0].Stages) != 3 || walks[0].Stages[0].Element != "lb1" || walks[0].Stages[2].Element != "lb2" {
		t.Fatalf("walks: %+v", walks)
	}
	if walks[0].Ends != "left by lb2 e0" || walks[1].Ends != "dropped by r2: acl" {
		t.Errorf("ends: %q, %q", walks[0].Ends, walks[1].Ends)
	}
	if !Done(walks, 2) || Done(walks, 3) {
		t.Error("Done: two walks ended are 2 of 2 and not 3 of 3")
	}
	if Done(Join(events[2:3]), 1) {
		t.Error("a walk seen only at its ingress LB is done")
	}
}
