package ipfix

import (
	"encoding/binary"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/msr-router/msr/internal/msrtest"
)

// TestMarshal: a message of an IPv4 and an IPv6 record reads back as
// RFC 7011 has it: the header's version, length and domain, a template
// set of both templates, and a data set of each whose records have the
// templates' lengths and the records' values where the templates say.
func TestMarshal(t *testing.T) {
	start := time.UnixMilli(1_700_000_000_123)
	m := Message{ExportTime: start.Add(time.Minute), Sequence: 41, Domain: 7, Records: []Record{
		{Start: start, End: start.Add(time.Second), Octets: 15000, Packets: 10, Ingress: 10, Egress: 12, Proto: 6, SPort: 40000, DPort: 5201,
			Src: netip.MustParseAddr("192.0.2.10"), Dst: netip.MustParseAddr("203.0.113.10"), NextHop: netip.MustParseAddr("203.0.113.10"), SrcMask: 24, DstMask: 16},
		{Start: start, End: start, Octets: 80, Packets: 1, Ingress: 11, Proto: 17, SPort: 1, DPort: 2,
			Src: netip.MustParseAddr("2001:db8::1"), Dst: netip.MustParseAddr("2001:db8:1::1")},
	}}
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	u16 := func(o int) int { return int(binary.BigEndian.Uint16(b[o:])) }
	if u16(0) != 10 || u16(2) != len(b) || binary.BigEndian.Uint32(b[8:]) != 41 || binary.BigEndian.Uint32(b[12:]) != 7 {
		t.Fatalf("header % x", b[:16])
	}
	lengths := map[int]int{} // template id: record length
	var data [][]byte
	for o := 16; o < len(b); {
		id, n := u16(o), u16(o+2)
		if n < 4 || o+n > len(b) {
			t.Fatalf("set at %d: length %d", o, n)
		}
		body := b[o+4 : o+n]
		switch {
		case id == 2:
			for p := 0; p < len(body); {
				tid, count := int(binary.BigEndian.Uint16(body[p:])), int(binary.BigEndian.Uint16(body[p+2:]))
				sum := 0
				for f := 0; f < count; f++ {
					sum += int(binary.BigEndian.Uint16(body[p+4+4*f+2:]))
				}
				lengths[tid] = sum
				p += 4 + 4*count
			}
		case id >= 256:
			if len(body)%lengths[id] != 0 {
				t.Fatalf("data set %d of %d bytes, records of %d", id, len(body), lengths[id])
			}
			data = append(data, body)
		default:
			t.Fatalf("set id %d", id)
		}
		o += n
	}
	if lengths[Template4] != 59 || lengths[Template6] != 95 || len(data) != 2 || len(data[0]) != 59 || len(data[1]) != 95 {
		t.Fatalf("templates %v, data sets %d", lengths, len(data))
	}
	r := data[0]
	if binary.BigEndian.Uint64(r[0:]) != uint64(start.UnixMilli()) || binary.BigEndian.Uint64(r[16:]) != 15000 ||
		binary.BigEndian.Uint32(r[36:]) != 12 || netip.AddrFrom4([4]byte(r[44:48])) != netip.MustParseAddr("203.0.113.10") || r[56] != 6 || r[57] != 24 || r[58] != 16 {
		t.Errorf("the IPv4 record % x", r)
	}
	if r := data[1]; netip.AddrFrom16([16]byte(r[40:56])) != netip.MustParseAddr("2001:db8::1") || r[92] != 17 {
		t.Errorf("the IPv6 record % x", r)
	}
	m.Records = append(m.Records, Record{Src: netip.MustParseAddr("192.0.2.1"), Dst: netip.MustParseAddr("2001:db8::1")})
	if _, err := m.Marshal(); err == nil {
		t.Error("a record of two families marshalled")
	}
}

// TestMessageDecodes: Wireshark's IPFIX dissector (tshark, the cflow
// dissector on the collectors' port) reads a message of an IPv4 and an
// IPv6 record with its templates: every field where it was put, nothing
// malformed.
func TestMessageDecodes(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Fatalf("tshark (make deps installs it): %v", err)
	}
	start := time.UnixMilli(1_700_000_000_123)
	m := Message{ExportTime: start.Add(time.Minute), Sequence: 41, Domain: 7, Records: []Record{
		{Start: start, End: start.Add(time.Second), Octets: 15000, Packets: 10, Ingress: 10, Egress: 12, Proto: 6, SPort: 40000, DPort: 5201,
			Src: netip.MustParseAddr("192.0.2.10"), Dst: netip.MustParseAddr("203.0.113.10"), NextHop: netip.MustParseAddr("203.0.113.20"), SrcMask: 24, DstMask: 16},
		{Start: start, End: start, Octets: 80, Packets: 1, Ingress: 11, Proto: 17, SPort: 1, DPort: 2,
			Src: netip.MustParseAddr("2001:db8::1"), Dst: netip.MustParseAddr("2001:db8:1::1"), NextHop: netip.MustParseAddr("2001:db8:12::20")},
	}}
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(tshark, "-r", msrtest.UDPCapture(t, Port, b), "-V", "-d", "udp.port==4739,cflow").CombinedOutput()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{
		"Version: 10", "Observation Domain Id: 7", "FlowSequence: 41",
		"Template Id: 256", "Template Id: 257", "Field Count: 14",
		"SrcAddr: 192.0.2.10", "DstAddr: 203.0.113.10", "NextHop: 203.0.113.20", "Octets: 15000", "Packets: 10",
		"InputInt: 10", "OutputInt: 12", "SrcPort: 40000", "DstPort: 5201", "Protocol: TCP (6)", "SrcMask: 24", "DstMask: 16",
		"SrcAddr: 2001:db8::1", "DstAddr: 2001:db8:1::1", "NextHop: 2001:db8:12::20", "InputInt: 11", "Protocol: UDP (17)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("tshark does not say %q", want)
		}
	}
	if strings.Contains(text, "Malformed") || strings.Contains(text, "Expert Info (Error") {
		t.Errorf("tshark finds the message malformed")
	}
	if t.Failed() {
		t.Logf("tshark -V:\n%s", text)
	}
}
