package sflow

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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

// pcap wraps an sFlow datagram in a UDP/IPv4/Ethernet frame to the
// collectors' port, in a one-frame capture file.
func pcap(t *testing.T, payload []byte) string {
	t.Helper()
	udp := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint16(udp[0:], 40000)
	binary.BigEndian.PutUint16(udp[2:], Port)
	binary.BigEndian.PutUint16(udp[4:], uint16(8+len(payload)))
	udp = append(udp, payload...)
	ip := []byte{0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 192, 0, 2, 1, 10, 0, 0, 9}
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(udp)))
	eth := append([]byte{2, 0, 0, 0, 0, 9, 2, 0, 0, 0, 0, 8, 0x08, 0x00}, append(ip, udp...)...)
	var b bytes.Buffer
	for _, v := range []uint32{0xa1b2c3d4, 0x00040002, 0, 0, 65535, 1} {
		binary.Write(&b, binary.LittleEndian, v)
	}
	for _, v := range []uint32{0, 0, uint32(len(eth)), uint32(len(eth))} {
		binary.Write(&b, binary.LittleEndian, v)
	}
	b.Write(eth)
	path := filepath.Join(t.TempDir(), "sflow.pcap")
	os.WriteFile(path, b.Bytes(), 0o644)
	return path
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
	out, err := exec.Command(tshark, "-r", pcap(t, b), "-V").CombinedOutput()
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
