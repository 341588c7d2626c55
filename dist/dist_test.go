package dist

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/vectors.json from the cases in this file")

// testKey is the key of the golden vectors: the bytes 0x00..0x1f.
var testKey = func() Key {
	k := Key{ID: 1, Secret: make([]byte, 32)}
	for i := range k.Secret {
		k.Secret[i] = byte(i)
	}
	return k
}()

// testVCPKey is the VCP's key of the golden vectors: the Ed25519 key of
// the seed 0x20..0x3f. testRing accepts both.
var (
	testVCPKey = func() Key {
		seed := make([]byte, ed25519.SeedSize)
		for i := range seed {
			seed[i] = byte(0x20 + i)
		}
		return Key{ID: 2, Private: ed25519.NewKeyFromSeed(seed)}
	}()
	testRing = Ring(testKey, testVCPKey)
)

// keyFor is the key that seals m: the element key for a hello or a
// probe, the VCP's for what configures.
func keyFor(m Message) Key {
	if m.Type().elementMay() {
		return testKey
	}
	return testVCPKey
}

var (
	macLB  = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x01, 0x01}
	macR1  = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x02, 0x01}
	macVCP = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x03, 0x01}
)

// goldenCases are the messages of testdata/vectors.json.
func goldenCases() (cases []struct {
	name string
	f    Frame
}) {
	hdr := func(seq uint64) Header {
		return Header{Sender: 0x0102030405060708, Epoch: 0x1867c0a1b2c3d4e5, Seq: seq}
	}
	defer func() {
		for i := range cases {
			cases[i].f.Header.KeyID = keyFor(cases[i].f.Msg).ID
		}
	}()
	return []struct {
		name string
		f    Frame
	}{
		{"hello-lb", Frame{Dst: GroupMAC, Src: macLB, Header: hdr(1), Msg: &Hello{
			Role: RoleLB, HelloIntervalMs: 100, HoldMultiplier: 3, Capacity: 10000, Installed: 7, Name: "lb1",
			Ports: []PortStatus{
				{Index: 0, Role: PortExternal, VLAN: 10, MAC: macLB, Prefix: netip.MustParsePrefix("192.0.2.1/24"),
					Flags: PortFlagUp, SpeedMbps: 10000, MTU: 1500, RxPackets: 1000, RxBytes: 64000, TxPackets: 900, TxBytes: 57600, RxDropped: 3, Name: "e0"},
				{Index: 1, Role: PortInternal, MAC: macR1, Flags: PortFlagUp | PortFlagDefaultInternal, SpeedMbps: 10000, MTU: 1500, Name: "i0"},
			}}}},
		{"hello-router-draining", Frame{Dst: GroupMAC, Src: macR1, Header: hdr(2), Msg: &Hello{
			Role: RoleRouter, Flags: HelloFlagDraining, HelloIntervalMs: 100, HoldMultiplier: 3, Capacity: 5000, Busy: 4321, Name: "r3"}}},
		{"port-config", Frame{Dst: macLB, Src: macVCP, Header: hdr(3), Msg: &PortConfig{Target: 0x1111, Ports: []PortSetting{
			{Index: 0, Role: PortExternal, VLAN: 10, MAC: macLB, Prefix: netip.MustParsePrefix("192.0.2.1/24"), Prefix6: netip.MustParsePrefix("2001:db8:10::1/64"), MTU: 1500},
			{Index: 1, Role: PortInternal, MAC: macR1, Flags: PortFlagDefaultInternal, MTU: 1500},
		}}}},
		{"table-update", Frame{Dst: macLB, Src: macVCP, Header: hdr(4), Msg: &TableUpdate{
			Target: 0x1111, Generation: 8, Flags: TableFlush | TableLast, Mode: ModeMaglev, Entries: []TableEntry{
				{MAC: macR1, Port: 1, Weight: 2}, {MAC: net.HardwareAddr{2, 0, 0, 0, 2, 2}, Port: 1, Weight: 2},
				{MAC: net.HardwareAddr{2, 0, 0, 0, 2, 3}, Port: 2, Weight: 1},
			}}}},
		{"vcp-announce", Frame{Dst: GroupMAC, Src: macVCP, Header: hdr(5), Msg: &VCPAnnounce{
			State: VCPActive, Priority: 200, HelloIntervalMs: 100, APIAddr: netip.MustParseAddr("10.255.0.1"), APIPort: 7700, TableGeneration: 8}}},
		// A PROBE as it comes back to the LB that sent it: from the
		// back-end (r1) to the LB's internal port.
		{"probe-reflected", Frame{Dst: macLB, Src: macR1, Header: hdr(6), Msg: &Probe{SentNs: 0x1867c0a1b2c3d4e5 + 1_000_000}}},
		{"backend-config", Frame{Dst: macR1, Src: macVCP, Header: hdr(7), Msg: &BackendConfig{
			Target: 0x2222, RIBNeighbor: netip.MustParseAddr("10.0.0.1"), RIBASN: 65000, Ports: []BackendPort{
				{Name: "lb1/e0", VLAN: 10, Prefix: netip.MustParsePrefix("192.0.2.1/24"), Prefix6: netip.MustParsePrefix("2001:db8:10::1/64"), MTU: 1500},
				{Name: "lb2/e0", VLAN: 12, Prefix: netip.MustParsePrefix("203.0.113.1/24"), MTU: 9000},
			}, Addrs: []netip.Addr{netip.MustParseAddr("10.255.0.1"), netip.MustParseAddr("2001:db8:ff::1")}}}},
		{"acl-config", Frame{Dst: macR1, Src: macVCP, Header: hdr(8), Msg: &ACLConfig{Target: 0x2222, Rules: []ACLRule{
			{Deny: true, Proto: 6, Dst: netip.MustParsePrefix("192.0.2.0/24"), SportHi: 65535, DportLo: 23, DportHi: 23},
			{Proto: 17, Src: netip.MustParsePrefix("198.51.100.0/24"), SportHi: 65535, DportLo: 1000, DportHi: 2000},
			{SportHi: 65535, DportHi: 65535},
		}}}},
		// With an IPv6 rule, every rule takes 16-byte addresses.
		{"acl-config-ipv6", Frame{Dst: macR1, Src: macVCP, Header: hdr(9), Msg: &ACLConfig{Target: 0x2222, Rules: []ACLRule{
			{Deny: true, Proto: 6, Dst: netip.MustParsePrefix("192.0.2.0/24"), SportHi: 65535, DportLo: 23, DportHi: 23},
			{Deny: true, Proto: 58, Src: netip.MustParsePrefix("2001:db8::/32"), Dst: netip.MustParsePrefix("2001:db8:10::/64"), SportHi: 65535, DportHi: 65535},
			{SportHi: 65535, DportHi: 65535},
		}}}},
		// The operator's drain and weight, which the back-end keeps and
		// reports in its hellos.
		{"backend-config-drained", Frame{Dst: macR1, Src: macVCP, Header: hdr(10), Msg: &BackendConfig{
			Target: 0x2222, RIBNeighbor: netip.MustParseAddr("10.0.0.1"), RIBASN: 65000, Ports: []BackendPort{
				{Name: "lb1/e0", VLAN: 10, Prefix: netip.MustParsePrefix("192.0.2.1/24"), MTU: 1500},
			}, Drained: true, Capacity: 20000}}},
		{"hello-router-drained", Frame{Dst: GroupMAC, Src: macR1, Header: hdr(11), Msg: &Hello{
			Role: RoleRouter, Flags: HelloFlagDraining | HelloFlagDrained | HelloFlagCapacitySet, HelloIntervalMs: 100, HoldMultiplier: 3, Capacity: 20000, Name: "r2"}}},
		// The same with the operator's version, which orders the changes
		// two VCPs active at once might send.
		{"backend-config-operator-version", Frame{Dst: macR1, Src: macVCP, Header: hdr(12), Msg: &BackendConfig{
			Target: 0x2222, Ports: []BackendPort{
				{Name: "lb1/e0", VLAN: 10, Prefix: netip.MustParsePrefix("192.0.2.1/24"), MTU: 1500},
			}, Drained: true, Capacity: 20000, OperatorVersion: 0x19ab_cdef_0123}}},
		{"hello-router-operator-version", Frame{Dst: GroupMAC, Src: macR1, Header: hdr(13), Msg: &Hello{
			Role: RoleRouter, Flags: HelloFlagDraining | HelloFlagDrained, HelloIntervalMs: 100, HoldMultiplier: 3, Capacity: 10000, Name: "r2",
			OperatorVersion: 0x19ab_cdef_0123, Ports: []PortStatus{{Index: 0, Role: PortInternal, MAC: macR1, Flags: PortFlagUp, Name: "eth0"}}}}},
		// The suite's routes via link-local next hops (OSPFv3, RIPng).
		{"link-routes", Frame{Dst: macR1, Src: macVCP, Header: hdr(14), Msg: &LinkRoutes{Target: 0x2222, Generation: 7, Page: 0, Pages: 1, Routes: []LinkRoute{
			{Prefix: netip.MustParsePrefix("2001:db8:f0::/48"), Via: netip.MustParseAddr("fe80::ff:fe00:2"), VLAN: 11, Origin: 3, Distance: 110},
			{Prefix: netip.MustParsePrefix("2001:db8:f1::/48"), Via: netip.MustParseAddr("fe80::ff:fe00:2"), VLAN: 11, Origin: 8, Distance: 120},
		}}}},
		{"link-routes-none", Frame{Dst: macR1, Src: macVCP, Header: hdr(15), Msg: &LinkRoutes{Target: 0x2222, Generation: 8, Page: 0, Pages: 1, Routes: []LinkRoute{}}}},
		// The operator's static neighbours, IPv4 and IPv6.
		{"static-neighbors", Frame{Dst: macR1, Src: macVCP, Header: hdr(16), Msg: &StaticNeighbors{Target: 0x2222, Neighbors: []StaticNeighbor{
			{Addr: netip.MustParseAddr("203.0.113.20"), VLAN: 12, MAC: net.HardwareAddr{2, 0, 0, 0, 0x20, 0x20}},
			{Addr: netip.MustParseAddr("2001:db8:12::20"), VLAN: 12, MAC: net.HardwareAddr{2, 0, 0, 0, 0x20, 0x20}},
		}}}},
		{"static-neighbors-none", Frame{Dst: macR1, Src: macVCP, Header: hdr(17), Msg: &StaticNeighbors{Target: 0x2222, Neighbors: []StaticNeighbor{}}}},
		// The router's peers on one LB's ports, IPv4 with GTSM and IPv6.
		{"peers", Frame{Dst: macLB, Src: macVCP, Header: hdr(18), Msg: &Peers{Target: 0x1111, Peers: []Peer{
			{Addr: netip.MustParseAddr("203.0.113.20"), VLAN: 12, Flags: PeerGTSM},
			{Addr: netip.MustParseAddr("2001:db8:12::20"), VLAN: 12},
		}}}},
		{"peers-none", Frame{Dst: macLB, Src: macVCP, Header: hdr(19), Msg: &Peers{Target: 0x1111, Peers: []Peer{}}}},
		// Unicast RPF: the LB tags the port's frames, the back-end checks
		// their sources (strict on one port, loose on the other).
		{"port-config-urpf", Frame{Dst: macLB, Src: macVCP, Header: hdr(20), Msg: &PortConfig{Target: 0x1111, Ports: []PortSetting{
			{Index: 0, Role: PortExternal, VLAN: 10, MAC: macLB, Prefix: netip.MustParsePrefix("192.0.2.1/24"), MTU: 1500, Flags: PortFlagURPF},
		}}}},
		{"backend-config-urpf", Frame{Dst: macR1, Src: macVCP, Header: hdr(21), Msg: &BackendConfig{
			Target: 0x2222, Ports: []BackendPort{
				{Name: "lb1/e0", VLAN: 10, Prefix: netip.MustParsePrefix("192.0.2.1/24"), MTU: 1500, URPF: URPFStrict},
				{Name: "lb2/e0", VLAN: 12, Prefix: netip.MustParsePrefix("203.0.113.1/24"), MTU: 1500, URPF: URPFLoose},
			}}}},
		// A router of more than MaxPorts: its ports paged (page 2 of 35: 1,024 ports, 30 a page),
		// and a back-end's hello with the digest of the ports it serves.
		{"backend-config-paged", Frame{Dst: macR1, Src: macVCP, Header: hdr(22), Msg: &BackendConfig{
			Target: 0x2222, Generation: 9, Page: 2, Pages: 35, Ports: []BackendPort{
				{Name: "lb5/e0", VLAN: 164, Prefix: netip.MustParsePrefix("10.0.164.1/24"), Prefix6: netip.MustParsePrefix("2001:db8:164::1/64"), MTU: 1500},
				{Name: "lb5/e1", VLAN: 165, Prefix: netip.MustParsePrefix("10.0.165.1/24"), MTU: 9000, URPF: URPFStrict},
			}}}},
		{"hello-router-ports-digest", Frame{Dst: GroupMAC, Src: macR1, Header: hdr(23), Msg: &Hello{
			Role: RoleRouter, HelloIntervalMs: 100, HoldMultiplier: 3, Capacity: 10000, Name: "r2", PortsDigest: 0x0123_4567_89ab_cdef,
			OperatorVersion: 0x19ab_cdef_0123, Ports: []PortStatus{{Index: 0, Role: PortInternal, MAC: macR1, Flags: PortFlagUp, Name: "eth0"}}}}},
	}
}

type vectorFile struct {
	Comment string `json:"comment"`
	// The element key (HMAC-SHA256) and the VCP's public key (Ed25519).
	KeyID     uint8           `json:"key_id"`
	Key       string          `json:"key"`
	VCPKeyID  uint8           `json:"vcp_key_id"`
	VCPPublic string          `json:"vcp_public"`
	Valid     []validVector   `json:"valid"`
	Invalid   []invalidVector `json:"invalid"`
}

type validVector struct {
	Name    string          `json:"name"`
	Header  Header          `json:"header"`
	Message json.RawMessage `json:"message"`
	Frame   string          `json:"frame"`
}

type invalidVector struct {
	Name   string `json:"name"`
	Frame  string `json:"frame"`
	Reason string `json:"reason"`
}

// invalidCases derives refused frames from the first golden frame.
func invalidCases(t *testing.T, good []byte) []invalidVector {
	mut := func(name, reason string, f func(b []byte) []byte) invalidVector {
		return invalidVector{Name: name, Reason: reason, Frame: hex.EncodeToString(f(bytes.Clone(good)))}
	}
	reseal := func(b []byte) []byte {
		n := len(b) - MACLen
		return append(b[:n], seal(testKey.Secret, b[:n])...)
	}
	wrongKey := Key{ID: 1, Secret: bytes.Repeat([]byte{0xaa}, 32)}
	badType, err := Marshal(&Frame{Dst: GroupMAC, Src: macLB, Msg: &VCPAnnounce{State: VCPActive, APIAddr: netip.MustParseAddr("10.0.0.1")}}, testKey)
	if err != nil {
		t.Fatal(err)
	}
	wrong, err := Marshal(&Frame{Dst: GroupMAC, Src: macLB, Msg: &VCPAnnounce{State: VCPActive, APIAddr: netip.MustParseAddr("10.0.0.1")}}, wrongKey)
	if err != nil {
		t.Fatal(err)
	}
	// A PROBE on its way to the back-end: sealed for its return, so no
	// one but its sender, once it is reflected, accepts it.
	probe, err := (&Sender{ID: 1, Epoch: 1, Key: testKey}).SealProbe(macLB, macR1, time.Unix(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	signed, err := Marshal(&Frame{Dst: macLB, Src: macVCP, Header: Header{Sender: 3, Epoch: 1, Seq: 1}, Msg: &VCPAnnounce{State: VCPActive, APIAddr: netip.MustParseAddr("10.0.0.1")}}, testVCPKey)
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(signed)
	flipped[EthHeaderLen+HeaderLen] ^= 1
	return []invalidVector{
		// What configures, sealed with the element key every element
		// holds: a back-end posing as the VCP.
		{Name: "announce-element-key", Reason: "role_refused", Frame: hex.EncodeToString(badType)},
		{Name: "announce-signature-bit-flip", Reason: "auth", Frame: hex.EncodeToString(flipped)},
		{Name: "announce-signature-cut", Reason: "length", Frame: hex.EncodeToString(signed[:len(signed)-MACLen])},
		mut("truncated", "truncated", func(b []byte) []byte { return b[:MinFrameLen-1] }),
		mut("cut-trailer", "length", func(b []byte) []byte { return b[:len(b)-1] }),
		mut("trailing-byte", "length", func(b []byte) []byte { return append(b, 0) }),
		mut("oversized", "oversized", func(b []byte) []byte { return append(b, make([]byte, MaxFrameLen)...) }),
		mut("ethertype", "ethertype", func(b []byte) []byte { b[13] ^= 1; return b }),
		mut("version-2", "version", func(b []byte) []byte { b[EthHeaderLen] = 2; return reseal(b) }),
		mut("bit-flip-body", "auth", func(b []byte) []byte { b[EthHeaderLen+HeaderLen+3] ^= 0x10; return b }),
		mut("bit-flip-src-mac", "auth", func(b []byte) []byte { b[7] ^= 1; return b }),
		mut("bit-flip-seq", "auth", func(b []byte) []byte { b[EthHeaderLen+31] ^= 1; return b }),
		mut("unknown-key-id", "unknown_key", func(b []byte) []byte { b[EthHeaderLen+2] = 9; return b }),
		{Name: "wrong-key", Reason: "auth", Frame: hex.EncodeToString(wrong)},
		mut("unknown-type", "type", func(b []byte) []byte { b[EthHeaderLen+1] = 99; return reseal(b) }),
		mut("reserved-header", "malformed", func(b []byte) []byte { b[EthHeaderLen+3] = 1; return reseal(b) }),
		mut("hello-bad-role", "malformed", func(b []byte) []byte { b[EthHeaderLen+HeaderLen] = 9; return reseal(b) }),
		mut("hello-port-count", "malformed", func(b []byte) []byte { b[EthHeaderLen+HeaderLen+5]++; return reseal(b) }),
		{Name: "probe-as-sent", Reason: "auth", Frame: hex.EncodeToString(probe)},
		{Name: "announce-as-hello", Reason: "malformed", Frame: hex.EncodeToString(func() []byte {
			b := bytes.Clone(badType)
			b[EthHeaderLen+1] = uint8(TypeHello)
			return reseal(b)
		}())},
	}
}

func TestGoldenVectors(t *testing.T) {
	var want vectorFile
	if *update {
		want = vectorFile{
			Comment: "DIST golden vectors: see docs/dist.md. Each valid frame decodes to header+message and encodes back to the same bytes; each invalid frame is refused for reason.",
			KeyID:   testKey.ID, Key: hex.EncodeToString(testKey.Secret),
			VCPKeyID: testVCPKey.ID, VCPPublic: hex.EncodeToString(testVCPKey.Verifier().Public),
		}
		for _, c := range goldenCases() {
			b, err := Marshal(&c.f, keyFor(c.f.Msg))
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			msg, _ := json.Marshal(c.f.Msg)
			h := c.f.Header
			h.Type = c.f.Msg.Type()
			want.Valid = append(want.Valid, validVector{Name: c.name, Header: h, Message: msg, Frame: hex.EncodeToString(b)})
		}
		good, _ := hex.DecodeString(want.Valid[0].Frame)
		want.Invalid = invalidCases(t, good)
		out, _ := json.MarshalIndent(want, "", "  ")
		if err := os.WriteFile("testdata/vectors.json", append(out, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	keys := testRing
	cases := goldenCases()
	if len(cases) != len(want.Valid) {
		t.Fatalf("%d golden cases, %d vectors: run go test ./dist -update", len(cases), len(want.Valid))
	}
	for i, v := range want.Valid {
		c := cases[i]
		frame, _ := hex.DecodeString(v.Frame)
		got, err := Marshal(&c.f, keyFor(c.f.Msg))
		if err != nil || !bytes.Equal(got, frame) {
			t.Errorf("%s: encode = %x, %v\nwant %x", v.Name, got, err, frame)
		}
		f, err := Unmarshal(frame, keys)
		if err != nil {
			t.Errorf("%s: decode: %v", v.Name, err)
			continue
		}
		if !reflect.DeepEqual(f.Msg, c.f.Msg) || f.Header != v.Header {
			t.Errorf("%s: decoded %+v %+v\nwant %+v %+v", v.Name, f.Header, f.Msg, v.Header, c.f.Msg)
		}
	}
	for _, v := range want.Invalid {
		frame, _ := hex.DecodeString(v.Frame)
		_, err := Unmarshal(frame, keys)
		if got := Reason(err); err == nil || got != v.Reason {
			t.Errorf("%s: Unmarshal(%x) = %v (reason %q), want reason %q", v.Name, frame, err, got, v.Reason)
		}
	}
}

func TestReplayGuard(t *testing.T) {
	var g ReplayGuard
	h := func(epoch, seq uint64) Header { return Header{Sender: 7, Epoch: epoch, Seq: seq} }
	steps := []struct {
		h      Header
		replay bool
	}{
		{h(10, 5), false},
		{h(10, 5), true},  // same frame again
		{h(10, 6), false}, // next
		{h(10, 4), false}, // late but inside the window, first time
		{h(10, 4), true},  // late and seen
		{h(10, 200), false},
		{h(10, 100), true}, // behind the window
		{h(9, 1000), true}, // older epoch: a previous run of the sender
		{h(11, 1), false},  // sender restarted
		{h(10, 201), true}, // the old run is over
		{Header{Sender: 8, Epoch: 1, Seq: 1}, false},
	}
	for i, s := range steps {
		err := g.Check(s.h)
		if (err != nil) != s.replay || (err != nil && !errors.Is(err, ErrReplay)) {
			t.Errorf("step %d %+v: err = %v, want replay=%v", i, s.h, err, s.replay)
		}
	}
}

// TestReplayGuardPersisted: a receiver that restarts loads what it had
// accepted, so a captured stream of the sender's older run, or of the
// current one up to the last save, replays as nothing; what comes after is
// taken. A corrupt state file is an error, not an empty state.
func TestReplayGuardPersisted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replay.json")
	h := func(epoch, seq uint64) Header { return Header{Sender: 7, Epoch: epoch, Seq: seq} }
	var before ReplayGuard
	if err := before.Persist(path); err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 50; seq++ {
		if err := before.Check(h(10, seq)); err != nil {
			t.Fatal(err)
		}
	}
	before.Check(h(11, 1)) // the sender restarted: saved at once
	before.mu.Lock()
	before.save(true)
	before.mu.Unlock()
	var after ReplayGuard
	if err := after.Persist(path); err != nil {
		t.Fatal(err)
	}
	for _, replayed := range []Header{h(10, 1), h(10, 50), h(10, 51), h(11, 1)} {
		if err := after.Check(replayed); !errors.Is(err, ErrReplay) {
			t.Errorf("after a restart, %+v: %v, want refused as a replay", replayed, err)
		}
	}
	if err := after.Check(h(11, 2)); err != nil {
		t.Errorf("after a restart, the sender's next frame: %v", err)
	}
	if before.SaveErrors != 0 {
		t.Errorf("%d failed saves", before.SaveErrors)
	}
	os.WriteFile(path, []byte("{not json"), 0o600)
	if err := new(ReplayGuard).Persist(path); err == nil {
		t.Error("a corrupt state file was taken")
	}
}

func TestMarshalRefusesBadMessages(t *testing.T) {
	bad := []Message{
		&Hello{Role: 0},
		&Hello{Role: RoleLB, Name: "a name with spaces"},
		&Hello{Role: RoleLB, Name: "much-too-long-element-name"},
		&Hello{Role: RoleLB, Name: `lb1";`},
		&Hello{Role: RoleLB, Name: "lb1", Ports: []PortStatus{{Role: PortExternal, MAC: macLB, Flags: PortFlagUp, Name: `e0";}#`, VLAN: 10}}},
		&BackendConfig{Ports: []BackendPort{{Name: "lb1/e0{", VLAN: 10, Prefix: netip.MustParsePrefix("192.0.2.1/24")}}},
		&Hello{Role: RoleLB, Ports: make([]PortStatus, MaxPorts+1)},
		&TableUpdate{Mode: 0},
		&TableUpdate{Mode: ModeWRR, Entries: make([]TableEntry, MaxTableEntries+1)},
		&PortConfig{Ports: []PortSetting{{MAC: macLB, VLAN: 4095}}},
		&VCPAnnounce{State: 3, APIAddr: netip.MustParseAddr("10.0.0.1")},
		&BackendConfig{Ports: []BackendPort{{Name: "p", VLAN: 0, Prefix: netip.MustParsePrefix("192.0.2.1/24")}}},
		&BackendConfig{Ports: make([]BackendPort, MaxPorts+1)},
		&BackendConfig{RIBNeighbor: netip.MustParseAddr("::1")},
		&ACLConfig{Rules: make([]ACLRule, MaxACLRules+1)},
		&ACLConfig{Rules: []ACLRule{{SportLo: 10, SportHi: 9}}},
		&LinkRoutes{Pages: 0},
		&LinkRoutes{Page: 1, Pages: 1},
		&LinkRoutes{Pages: 1, Routes: make([]LinkRoute, LinkRoutesPerPage+1)},
		&StaticNeighbors{Neighbors: make([]StaticNeighbor, MaxStaticNeighbors+1)},
		&StaticNeighbors{Neighbors: []StaticNeighbor{{Addr: netip.MustParseAddr("203.0.113.20"), VLAN: 12, MAC: net.HardwareAddr{1, 0, 0, 0, 0, 1}}}},
		&StaticNeighbors{Neighbors: []StaticNeighbor{{Addr: netip.MustParseAddr("203.0.113.20"), VLAN: 0, MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}}}},
		&StaticNeighbors{Neighbors: []StaticNeighbor{{Addr: netip.MustParseAddr("224.0.0.5"), VLAN: 12, MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}}}},
		&BackendConfig{Ports: []BackendPort{{Name: "p", VLAN: 10, Prefix: netip.MustParsePrefix("192.0.2.1/24"), URPF: 3}}},
		&Peers{Peers: make([]Peer, MaxPeers+1)},
		&Peers{Peers: []Peer{{Addr: netip.MustParseAddr("203.0.113.20"), VLAN: 4095}}},
		&Peers{Peers: []Peer{{Addr: netip.MustParseAddr("ff02::5"), VLAN: 12}}},
		&Peers{Peers: []Peer{{Addr: netip.MustParseAddr("203.0.113.20"), VLAN: 12, Flags: 2}}},
		&LinkRoutes{Pages: 1, Routes: []LinkRoute{{Prefix: netip.MustParsePrefix("2001:db8::/32"), Via: netip.MustParseAddr("2001:db8::1"), VLAN: 10}}},
		&LinkRoutes{Pages: 1, Routes: []LinkRoute{{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Via: netip.MustParseAddr("fe80::1"), VLAN: 10}}},
		&LinkRoutes{Pages: 1, Routes: []LinkRoute{{Prefix: netip.MustParsePrefix("2001:db8::1/32"), Via: netip.MustParseAddr("fe80::1"), VLAN: 10}}},
		&LinkRoutes{Pages: 1, Routes: []LinkRoute{{Prefix: netip.MustParsePrefix("2001:db8::/32"), Via: netip.MustParseAddr("fe80::1"), VLAN: 0}}},
	}
	for _, m := range bad {
		if _, err := Marshal(&Frame{Dst: GroupMAC, Src: macLB, Msg: m}, testKey); err == nil {
			t.Errorf("Marshal(%+v) succeeded", m)
		}
	}
	if _, err := NewSender(1, Key{ID: 1, Secret: []byte("short")}); err == nil {
		t.Error("NewSender accepted a 5-byte key")
	}
}

// FuzzUnmarshal checks that the decoder never panics, and that whatever it
// accepts is authentic and canonical: it encodes back to the same bytes.
// Frames made by mutating a valid one but not resealed must be refused.
func FuzzUnmarshal(f *testing.F) {
	raw, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		f.Fatal(err)
	}
	var vf vectorFile
	if err := json.Unmarshal(raw, &vf); err != nil {
		f.Fatal(err)
	}
	for _, v := range append(vf.Valid, validVector{Frame: vf.Invalid[0].Frame}) {
		b, _ := hex.DecodeString(v.Frame)
		f.Add(b, false)
		f.Add(b, true)
	}
	keys := testRing
	f.Fuzz(func(t *testing.T, b []byte, reseal bool) {
		if reseal && len(b) >= MinFrameLen && len(b) <= MaxFrameLen {
			// Reseal so the fuzzer reaches the body decoders.
			n := len(b) - MACLen
			b = append(b[:n:n], seal(testKey.Secret, b[:n])...)
		}
		fr, err := Unmarshal(b, keys)
		if err != nil {
			if Reason(err) == "other" {
				t.Fatalf("error without a reason: %v", err)
			}
			return
		}
		if !reseal && len(b) >= MinFrameLen && fr.Header.KeyID == testKey.ID {
			// Accepted without resealing: only possible for a seed.
			n := len(b) - MACLen
			if !bytes.Equal(seal(testKey.Secret, b[:n]), b[n:]) {
				t.Fatal("accepted a frame whose HMAC is wrong")
			}
		}
		key := Key{ID: fr.Header.KeyID, Secret: testKey.Secret}
		if fr.Header.KeyID == testVCPKey.ID {
			key = testVCPKey
		}
		again, err := Marshal(fr, key)
		if err != nil {
			t.Fatalf("accepted frame does not re-encode: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("accepted non-canonical frame\n got %x\nwant %x", b, again)
		}
	})
}

// TestHostilePortName: a hello whose port is named to break out of the
// routing suite's configuration (a quote, a semicolon), sealed with the
// right key, is refused as malformed: the name never reaches the VCP.
func TestHostilePortName(t *testing.T) {
	good, err := Marshal(&Frame{Dst: GroupMAC, Src: macLB, Msg: &Hello{Role: RoleLB, Name: "lb1", Ports: []PortStatus{{Role: PortExternal, MAC: macLB, Flags: PortFlagUp, Name: "e0xxxxx", VLAN: 10}}}}, testKey)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(good, []byte("e0xxxxx"))
	for _, name := range []string{`e0";}# `, "e0\nproto", "e0{x}"} {
		b := bytes.Clone(good)
		copy(b[i:i+7], name)
		n := len(b) - MACLen
		b = append(b[:n:n], seal(testKey.Secret, b[:n])...)
		if f, err := Unmarshal(b, testRing); err == nil || Reason(err) != "malformed" {
			t.Errorf("a hello with port %q: %+v, %v (%s); want it refused as malformed", name, f, err, Reason(err))
		}
	}
}

// A HELLO from before ports were named (64-byte ports, docs/dist.md) is
// still read, its ports unnamed: elements are upgraded one at a time. This
// is hello-lb as version 1 of the layout sealed it.
func TestHelloUnnamedPorts(t *testing.T) {
	b, _ := hex.DecodeString("036d7372000102000000010188b50101010000a0000001020304050607081867c0a1b2c3d4e50000000000000001010000640302000000002710000000076c6231000000000000000000000000000001000a0200000001011801c00002010000271005dc000000000000000003e8000000000000fa000000000000000384000000000000e1000000000000000003010200000200000002010003000000000000271005dc000000000000000000000000000000000000000000000000000000000000000000000000000000000000f7b2788eacc02a451589054f32927f87a88a2e5e7678c641dd2b4a3f5bb8b125")
	key, _ := hex.DecodeString("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
	f, err := Unmarshal(b, Keyring{1: {Secret: key}})
	if err != nil {
		t.Fatal(err)
	}
	h, ok := f.Msg.(*Hello)
	if !ok || h.Name != "lb1" || len(h.Ports) != 2 || h.Ports[0].VLAN != 10 || h.Ports[0].RxDropped != 3 || h.Ports[0].Name != "" || h.Ports[1].Name != "" {
		t.Errorf("%+v", f.Msg)
	}
}

// TestProbeReflected: a PROBE is refused as sent and accepted once its
// MACs are swapped, as the back-end's data path reflects it; the body
// carries the time it was sent.
func TestProbeReflected(t *testing.T) {
	s := &Sender{ID: 7, Epoch: 1, Key: testKey}
	sent := time.Unix(1700000000, 123456789)
	b, err := s.SealProbe(macLB, macR1, sent)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b[0:6], macR1) || !bytes.Equal(b[6:12], macLB) {
		t.Fatalf("probe goes from %x to %x, want from the LB to the back-end", b[6:12], b[0:6])
	}
	keys := testRing
	if _, err := Unmarshal(b, keys); !errors.Is(err, ErrAuth) {
		t.Errorf("probe as sent: %v, want %v", err, ErrAuth)
	}
	back := bytes.Clone(b)
	copy(back[0:6], b[6:12])
	copy(back[6:12], b[0:6])
	f, err := Unmarshal(back, keys)
	if err != nil {
		t.Fatalf("reflected probe refused: %v", err)
	}
	p, ok := f.Msg.(*Probe)
	if !ok || p.SentNs != uint64(sent.UnixNano()) || f.Header.Sender != 7 {
		t.Errorf("reflected probe decoded as %+v from sender %d", f.Msg, f.Header.Sender)
	}
}

// TestConfigsBeforeIPv6 decodes PORT_CONFIG and BACKEND_CONFIG bodies as
// VCPs wrote them before IPv6 (24- and 28-byte ports, no IPv6 addresses):
// an element upgraded first still takes them; and refuses a reserved byte
// set in them.
func TestConfigsBeforeIPv6(t *testing.T) {
	pc := make([]byte, portConfigHdrLen+portConfigLenV0)
	pc[7], pc[8] = 0x11, 1
	e := pc[portConfigHdrLen:]
	e[1], e[3] = uint8(PortExternal), 10
	copy(e[4:10], macLB)
	e[10] = 24
	copy(e[12:16], []byte{192, 0, 2, 1})
	e[16], e[17] = 0x05, 0xdc
	var m PortConfig
	if err := m.decodeBody(pc); err != nil || len(m.Ports) != 1 || m.Ports[0].Prefix.String() != "192.0.2.1/24" || m.Ports[0].Prefix6.IsValid() || m.Ports[0].MTU != 1500 {
		t.Errorf("old PORT_CONFIG: %v %+v", err, m)
	}
	e[18] = 64
	if err := m.decodeBody(pc); err == nil {
		t.Errorf("old PORT_CONFIG with an IPv6 length in its reserved bytes taken")
	}

	bc := make([]byte, backendHdrLen+backendPortLenV0+4)
	bc[7], bc[16], bc[17] = 0x22, 1, 1
	p := bc[backendHdrLen:]
	p[1], p[2] = 10, 24
	copy(p[4:8], []byte{192, 0, 2, 1})
	p[8], p[9] = 0x05, 0xdc
	copy(p[12:], "lb1/e0")
	copy(bc[backendHdrLen+backendPortLenV0:], []byte{10, 255, 0, 1})
	var b BackendConfig
	if err := b.decodeBody(bc); err != nil || len(b.Ports) != 1 || b.Ports[0].Name != "lb1/e0" || b.Ports[0].Prefix6.IsValid() || len(b.Addrs) != 1 {
		t.Errorf("old BACKEND_CONFIG: %v %+v", err, b)
	}
	p[3] = 64
	if err := b.decodeBody(bc); err == nil {
		t.Errorf("old BACKEND_CONFIG with an IPv6 length in its reserved byte taken")
	}
}

// TestBackendConfigOperatorFlags: BACKEND_CONFIG's flags byte takes the
// operator's drain and weight, the weight's 4 bytes after the addresses
// exactly when its flag says so, and refuses any other bit.
func TestBackendConfigOperatorFlags(t *testing.T) {
	m := &BackendConfig{Target: 7, Ports: []BackendPort{{Name: "lb1/e0", VLAN: 10, Prefix: netip.MustParsePrefix("192.0.2.1/24"), MTU: 1500}}}
	for _, c := range []struct {
		drained  bool
		capacity uint32
	}{{false, 0}, {true, 0}, {false, 7000}, {true, 1}} {
		m.Drained, m.Capacity = c.drained, c.capacity
		b, err := m.appendBody(nil)
		if err != nil {
			t.Fatal(err)
		}
		var got BackendConfig
		if err := got.decodeBody(b); err != nil || got.Drained != c.drained || got.Capacity != c.capacity {
			t.Errorf("drained %v capacity %d: decoded %v %+v", c.drained, c.capacity, err, got)
		}
		if c.capacity != 0 {
			if err := got.decodeBody(b[:len(b)-4]); err == nil {
				t.Errorf("capacity flag without its 4 bytes taken")
			}
			b[len(b)-4], b[len(b)-3], b[len(b)-2], b[len(b)-1] = 0, 0, 0, 0
			if err := got.decodeBody(b); err == nil {
				t.Errorf("capacity flag with capacity 0 taken")
			}
		}
	}
	m.Drained, m.Capacity = false, 0
	b, _ := m.appendBody(nil)
	for bit := 2; bit < 8; bit++ {
		b[19] = 1 << bit
		var got BackendConfig
		if err := got.decodeBody(b); err == nil {
			t.Errorf("flag bit %d taken", bit)
		}
	}
	h, _ := (&Hello{Role: RoleRouter, Name: "r1"}).appendBody(nil)
	h[1] = 1 << 3
	if err := new(Hello).decodeBody(h); err == nil {
		t.Error("hello flag bit 3 taken")
	}
	// The ports' digest: its flag without its 8 bytes, or a digest 0.
	h[1] = helloFlagPortsDigest
	if err := new(Hello).decodeBody(h); err == nil {
		t.Error("hello digest flag without a digest taken")
	}
	if err := new(Hello).decodeBody(append(h, make([]byte, 8)...)); err == nil {
		t.Error("hello digest 0 taken")
	}
	var got Hello
	if err := got.decodeBody(binary.BigEndian.AppendUint64(h, 77)); err != nil || got.PortsDigest != 77 || got.Flags != 0 {
		t.Errorf("hello with digest 77: %v %+v", err, got)
	}
}

// TestBackendConfigPages: the ports of a router of 1,024 go out in
// pages that each fit a frame, come back whole only with the last page
// (out of order, twice, through Marshal and Unmarshal), a page of
// another generation or sender starts over, and a router of at most
// MaxPorts keeps the one unpaged message every back-end takes.
// Forged paging headers are refused.
func TestBackendConfigPages(t *testing.T) {
	m := &BackendConfig{Target: 7, RIBNeighbor: netip.MustParseAddr("10.0.0.1"), RIBASN: 65000, Drained: true, Capacity: 5000, OperatorVersion: 9,
		Addrs: []netip.Addr{netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("2001:db8::1")}}
	for i := range 1024 {
		m.Ports = append(m.Ports, BackendPort{Name: fmt.Sprintf("lb%d/e%d", i/16+1, i%16), VLAN: uint16(100 + i),
			Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 1}), 24), MTU: 1500, URPF: URPFStrict,
			Prefix6: netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, byte(i >> 8), byte(i), 15: 1}), 64), Down: i%5 == 3})
	}
	pages, err := BackendConfigPages(m, 3)
	if err != nil || len(pages) < 2 {
		t.Fatalf("BackendConfigPages: %d pages, %v", len(pages), err)
	}
	wire := func(p *BackendConfig) *BackendConfig {
		b, err := Marshal(&Frame{Dst: macR1, Src: macVCP, Msg: p}, testVCPKey)
		if err != nil {
			t.Fatal(err)
		}
		f, err := Unmarshal(b, testRing)
		if err != nil {
			t.Fatal(err)
		}
		return f.Msg.(*BackendConfig)
	}
	var set BackendConfigSet
	last := len(pages) - 1
	for _, i := range []int{last, 0, last} {
		if got := set.Add(1, wire(pages[i])); got != nil {
			t.Fatalf("a config of %d ports after page %d of %d", len(got.Ports), i, len(pages))
		}
	}
	other, _ := BackendConfigPages(m, 4)
	for i := 1; i < len(other); i++ {
		if got := set.Add(1, wire(other[i])); got != nil {
			t.Fatal("a config completed from two generations")
		}
	}
	if got := set.Add(2, wire(other[0])); got != nil {
		t.Fatal("a config completed from two senders")
	}
	for i := range other {
		if got := set.Add(1, wire(other[i])); got != nil {
			if i != len(other)-1 {
				t.Fatalf("whole after page %d of %d", i, len(other))
			}
			if !reflect.DeepEqual(got, m) {
				t.Fatalf("the config came back as %+v", got)
			}
		}
	}
	few, _ := BackendConfigPages(&BackendConfig{Target: 7, Ports: m.Ports[:MaxPorts]}, 5)
	if b, _ := few[0].appendBody(nil); len(few) != 1 || few[0].Pages != 0 || b[19]&backendFlagPaged != 0 {
		t.Errorf("%d ports paged: %d pages", MaxPorts, len(few))
	}
	if _, err := BackendConfigPages(&BackendConfig{Ports: make([]BackendPort, MaxRouterPorts+1)}, 1); err == nil {
		t.Error("BackendConfigPages took more than MaxRouterPorts")
	}
	b, _ := pages[1].appendBody(nil)
	for name, forge := range map[string]func(b []byte){
		"page past the pages":  func(b []byte) { b[backendHdrLen+4] = b[backendHdrLen+5] },
		"no pages":             func(b []byte) { b[backendHdrLen+4], b[backendHdrLen+5] = 0, 0 },
		"reserved set":         func(b []byte) { b[backendHdrLen+7] = 1 },
		"port flag reserved":   func(b []byte) { b[backendHdrLen+8+11] |= 0x02 },
		"more ports than sent": func(b []byte) { b[16]++ },
	} {
		bad := slices.Clone(b)
		forge(bad)
		if err := new(BackendConfig).decodeBody(bad); err == nil {
			t.Errorf("%s: taken", name)
		}
	}
}

// TestLinkRouteSet splits a set bigger than a frame into pages, sends them
// through Marshal and Unmarshal out of order and twice, and gets the set
// back whole only with its last page; a page of another generation
// starts over.
func TestLinkRouteSet(t *testing.T) {
	var routes []LinkRoute
	for i := range 2*LinkRoutesPerPage + 5 {
		routes = append(routes, LinkRoute{Prefix: netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, byte(i >> 8), byte(i)}), 48),
			Via: netip.MustParseAddr("fe80::1"), VLAN: 10, Origin: 3, Distance: 110})
	}
	pages, err := LinkRoutePages(0x2222, 3, routes)
	if err != nil || len(pages) != 3 {
		t.Fatalf("LinkRoutePages: %d pages, %v", len(pages), err)
	}
	wire := func(m *LinkRoutes) *LinkRoutes {
		b, err := Marshal(&Frame{Dst: macR1, Src: macVCP, Msg: m}, testVCPKey)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > MaxFrameLen {
			t.Fatalf("a page of %d routes takes %d bytes", len(m.Routes), len(b))
		}
		f, err := Unmarshal(b, testRing)
		if err != nil {
			t.Fatal(err)
		}
		return f.Msg.(*LinkRoutes)
	}
	var set LinkRouteSet
	for _, i := range []int{2, 0, 2} {
		if got := set.Add(7, wire(pages[i])); got != nil {
			t.Fatalf("a set of %d routes after page %d of 3", len(got), i)
		}
	}
	// Another generation's page starts over: page 1 alone completes nothing.
	other, _ := LinkRoutePages(0x2222, 4, routes)
	if got := set.Add(7, wire(other[1])); got != nil {
		t.Fatal("a set completed from two generations")
	}
	set.Add(7, wire(other[0]))
	got := set.Add(7, wire(other[2]))
	if !slices.Equal(got, routes) {
		t.Fatalf("the set came back as %d routes, want %d", len(got), len(routes))
	}
	none, _ := LinkRoutePages(0x2222, 5, nil)
	if got := set.Add(7, wire(none[0])); got == nil || len(got) != 0 {
		t.Fatalf("an empty set: %v", got)
	}
	if _, err := LinkRoutePages(1, 1, make([]LinkRoute, MaxLinkRoutes+1)); err == nil {
		t.Error("LinkRoutePages took more than MaxLinkRoutes")
	}
}

// docs/dist.md says how many peers a frame holds.
func TestPeersLimit(t *testing.T) {
	if MaxPeers != 57 {
		t.Errorf("PEERS holds %d, docs/dist.md says 57", MaxPeers)
	}
}

// docs/dist.md says how many static neighbours a frame holds.
func TestStaticNeighborsLimit(t *testing.T) {
	if MaxStaticNeighbors != 57 {
		t.Errorf("STATIC_NEIGHBORS holds %d, docs/dist.md says 57", MaxStaticNeighbors)
	}
}
