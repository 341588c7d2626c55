package sflow

import (
	"encoding/binary"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/msr-router/msr/internal/msrtest"
)

// frame is a 64-byte Ethernet/IPv4/UDP frame, 192.0.2.10 to 203.0.113.10.
func frame() []byte {
	f := make([]byte, 60)
	copy(f, []byte{2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00})
	ip := f[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], 46)
	copy(ip[12:], []byte{192, 0, 2, 10})
	copy(ip[16:], []byte{203, 0, 113, 10})
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	binary.BigEndian.PutUint16(ip[20:], 5001)
	binary.BigEndian.PutUint16(ip[22:], 5201)
	binary.BigEndian.PutUint16(ip[24:], 26)
	return f
}

// TestDatagramDecodes: a datagram of one flow sample (with switch and
// router data) and one counter sample, as Wireshark's sFlow dissector
// (tshark) reads it: every field where it was put, the sampled frame
// decoded down to its UDP ports.
func TestDatagramDecodes(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Fatalf("tshark (make deps installs it): %v", err)
	}
	d := &Datagram{Agent: netip.MustParseAddr("192.0.2.1"), SubAgent: 2, Sequence: 77, UptimeMs: 123456,
		Flows: []FlowSample{{Sequence: 5, SourceIndex: 3, Rate: 1000, Pool: 5000, Drops: 1, Input: 3, Output: 7, FrameLength: 64, Stripped: 4, Header: frame(),
			Router: &RouterData{NextHop: netip.MustParseAddr("192.0.2.20"), SrcMask: 24, DstMask: 24}, Switch: &SwitchData{SrcVLAN: 10, DstVLAN: 20}}},
		Counters: []CounterSample{{Sequence: 9, IfIndex: 3, IfType: 6, Speed: 10_000_000_000, Direction: 1, Status: 3, InOctets: 1 << 33, InUcast: 1234, OutOctets: 99, OutUcast: 5}}}
	b, err := d.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if len(b)%4 != 0 {
		t.Errorf("datagram of %d bytes: not whole words", len(b))
	}
	out, err := exec.Command(tshark, "-r", msrtest.UDPCapture(t, Port, b), "-V").CombinedOutput()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{
		"Datagram version: 5", "Agent address: 192.0.2.1", "Sub-agent ID: 2", "Sequence number: 77", "NumSamples: 2",
		"Sampling rate: 1 out of 1000 packets", "Sample pool: 5000 total packets", "Dropped packets: 1",
		"Input interface (ifIndex): 3", "Output interface value: 7",
		"Header protocol: Ethernet (1)", "Frame Length: 64", "Payload stripped: 4", "Sampled header length: 60",
		"Src: 192.0.2.10, Dst: 203.0.113.10", "Src Port: 5001, Dst Port: 5201",
		"Incoming 802.1Q VLAN: 10", "Outgoing 802.1Q VLAN: 20",
		"Next hop: 192.0.2.20", "Next hop source mask: 24", "Next hop destination mask: 24",
		"Interface index: 3", "Interface Type: 6", "Interface Speed: 10000000000", "Interface Direction: Full-Duplex (1)", "IfAdminStatus: Up", "IfOperStatus: Up",
		"Input Octets: 8589934592", "Input Packets: 1234", "Output Octets: 99", "Output Packets: 5",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("tshark does not say %q", want)
		}
	}
	if strings.Contains(text, "Malformed") || strings.Contains(text, "Expert Info (Error") {
		t.Errorf("tshark finds the datagram malformed:\n%s", text)
	}
	if t.Failed() {
		t.Logf("tshark -V:\n%s", text)
	}
}

func TestMarshalRefusesNoAgent(t *testing.T) {
	if _, err := (&Datagram{}).Marshal(); err != ErrAgent {
		t.Errorf("no agent: %v", err)
	}
}
