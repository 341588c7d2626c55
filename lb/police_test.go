package lb

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/msr-router/msr/internal/inet"
)

// TestLBPolicing holds the kernel's control-plane policing to the model's
// on the same frames: with one packet a second per source and no burst,
// the first ICMP echo from a host to the router passes and its next is
// dropped, while another host's first still passes (its own bucket); a
// class's whole rate bounds its sources together; transit of the same
// protocols is never policed; each class counts what it passed and
// dropped.
func TestLBPolicing(t *testing.T) {
	withFixture(t, ModeWRR, func(f *fixture) {
		rates := DefaultPolice
		for c := range rates {
			rates[c] = PoliceRate{}
		}
		rates[PoliceICMP] = PoliceRate{PerSourcePPS: 1}
		rates[PoliceBGP] = PoliceRate{PPS: 1, Burst: 2} // three packets, any source
		f.model.Police.Rates = rates
		for c, r := range rates {
			if err := f.dp.SetPolice(PoliceClass(c), r); err != nil {
				t.Fatal(err)
			}
		}
		e0, e1 := f.ports["e0"].Ifindex, f.ports["e1"].Ifindex
		icmp := func(src, dst netip.Addr) []byte {
			return eth(macExt0, macHost, etherTypeIPv4, inet.IPv4(src, dst, 1, []byte{8, 0, 0xf7, 0xff, 0, 0, 0, 0}))
		}
		hostC := netip.MustParseAddr("192.0.2.11")
		// A key under which A and C, and A on e0 and e1, have buckets of
		// their own (one in 1,024 keys would share one).
		bucket := func(src netip.Addr, port uint8) uint32 {
			return policeHash(src.AsSlice(), port, PoliceICMP, f.model.Config.PoliceSeed) & (policeSources - 1)
		}
		for bucket(ipHostA, f.ports["e0"].Index) == bucket(hostC, f.ports["e0"].Index) ||
			bucket(ipHostA, f.ports["e0"].Index) == bucket(ipHostA, f.ports["e1"].Index) {
			f.model.Config.PoliceSeed++
		}
		if err := f.dp.SetConfig(f.model.Config); err != nil {
			t.Fatal(err)
		}
		steps := []frameStep{
			{"A's first ping to the router", e0, icmp(ipHostA, ipExt0), XDPRedirect},
			{"A's second ping to the router", e0, icmp(ipHostA, ipExt0), XDPDrop},
			{"A's ping to the router's other address", e0, icmp(ipHostA, ipExt1), XDPDrop},
			{"C's first ping to the router", e0, icmp(hostC, ipExt0), XDPRedirect},
			{"A's ping across the router (transit)", e0, icmp(ipHostA, ipHostB), XDPRedirect},
			{"A's ping across the router again", e0, icmp(ipHostA, ipHostB), XDPRedirect},
			{"BGP 1 from A", e0, eth(macExt0, macHost, etherTypeIPv4, tcp(ipHostA, ipExt0, 40000, 179)), XDPRedirect},
			{"BGP 2 from C", e0, eth(macExt0, macHost, etherTypeIPv4, tcp(hostC, ipExt0, 40001, 179)), XDPRedirect},
			{"BGP 3 from A, the peer's reply", e0, eth(macExt0, macHost, etherTypeIPv4, tcp(ipHostA, ipExt0, 179, 40002)), XDPRedirect},
			{"BGP 4 from C: over the class's rate", e0, eth(macExt0, macHost, etherTypeIPv4, tcp(hostC, ipExt0, 40003, 179)), XDPDrop},
			{"BGP between two hosts (transit)", e0, eth(macExt0, macHost, etherTypeIPv4, tcp(ipHostA, ipHostB, 40004, 179)), XDPRedirect},
			{"OSPF (igp: no limit here)", e0, eth(ospfMAC, macHost, etherTypeIPv4, inet.IPv4(ipHostA, netip.MustParseAddr("224.0.0.5"), 89, make([]byte, 24))), XDPRedirect},
			{"A's ping arriving on e1 (another bucket)", e1, eth(macExt1, macHost, etherTypeIPv4, inet.IPv4(ipHostA, ipExt1, 1, []byte{8, 0, 0xf7, 0xff, 0, 0, 0, 0})), XDPRedirect},
		}
		f.steps(t, steps)
		got, err := f.dp.PoliceStats()
		if err != nil {
			t.Fatal(err)
		}
		if got != f.model.Police.Counts {
			t.Errorf("police counters\n got %+v\nwant %+v", got, f.model.Police.Counts)
		}
		want := map[PoliceClass]PoliceCounts{PoliceICMP: {Passed: 3, DroppedSource: 2}, PoliceBGP: {Passed: 3, DroppedClass: 1}, PoliceIGP: {Passed: 1}}
		for c, w := range want {
			if got[c] != w {
				t.Errorf("class %s: %+v, want %+v", c, got[c], w)
			}
		}
	})
}

// TestLBPeers holds the kernel's peer buckets and GTSM to the model's: a
// configured peer's BGP passes in its own bucket when other sources have
// spent the class's, and is dropped at its own rate; with GTSM, its BGP
// below TTL 255 is dropped and counted; its address on another port is
// not the peer; an IPv6 peer without GTSM is held to its bucket only;
// the peers' counters read back as the model's.
func TestLBPeers(t *testing.T) {
	withFixture(t, ModeWRR, func(f *fixture) {
		rates := DefaultPolice
		for c := range rates {
			rates[c] = PoliceRate{}
		}
		rates[PoliceBGP] = PoliceRate{PPS: 1, PerSourcePPS: 1, Burst: 1} // two packets a source, two in all
		f.model.Police.Rates = rates
		for c, r := range rates {
			if err := f.dp.SetPolice(PoliceClass(c), r); err != nil {
				t.Fatal(err)
			}
		}
		e0, e1 := f.ports["e0"].Ifindex, f.ports["e1"].Ifindex
		i0 := f.ports["e0"].Index
		peerA := PeerKey{Addr: ipHostA, Port: i0}
		peerB6 := PeerKey{Addr: ip6HostA, Port: i0}
		peers := []Peer{{PeerKey: peerA, GTSM: true}, {PeerKey: peerB6}}
		if err := f.dp.SetPeers(peers); err != nil {
			t.Fatal(err)
		}
		f.model.Police.Peers = map[PeerKey]*ModelPeer{peerA: {GTSM: true}, peerB6: {}}
		hostC, hostD := netip.MustParseAddr("192.0.2.11"), netip.MustParseAddr("192.0.2.12")
		bgp := func(src netip.Addr, ttl uint8) []byte {
			return eth(macExt0, macHost, etherTypeIPv4, withTTL(tcp(src, ipExt0, 40000, 179), ttl))
		}
		steps := []frameStep{
			{"C's BGP", e0, bgp(hostC, 255), XDPRedirect},
			{"C's BGP again", e0, bgp(hostC, 255), XDPRedirect},
			{"D's BGP: the class spent", e0, bgp(hostD, 255), XDPDrop},
			{"peer A's BGP, in its own bucket", e0, bgp(ipHostA, 255), XDPRedirect},
			{"peer A's BGP at TTL 64 (GTSM)", e0, bgp(ipHostA, 64), XDPDrop},
			{"peer A's BGP again", e0, bgp(ipHostA, 255), XDPRedirect},
			{"peer A's BGP over its own rate", e0, bgp(ipHostA, 255), XDPDrop},
			{"A's address on e1: not the peer, the class spent", e1, eth(macExt1, macHost, etherTypeIPv4, withTTL(tcp(ipHostA, ipExt1, 40000, 179), 255)), XDPDrop},
			{"IPv6 peer's BGP at hop limit 64 (no GTSM)", e0, eth(macExt0, macHost, etherTypeIPv6, tcp6(ip6HostA, ip6Ext0, 179, 40000)), XDPRedirect},
		}
		f.steps(t, steps)
		counts, gtsm, err := f.dp.PeerStats()
		if err != nil {
			t.Fatal(err)
		}
		for k, m := range f.model.Police.Peers {
			if counts[k] != m.Counts || gtsm[k] != m.GTSM {
				t.Errorf("peer %v: %+v gtsm %v, model %+v gtsm %v", k, counts[k], gtsm[k], m.Counts, m.GTSM)
			}
		}
		if w := (PeerCounts{Passed: 2, Dropped: 1, GTSMDropped: 1}); counts[peerA] != w {
			t.Errorf("peer A: %+v, want %+v", counts[peerA], w)
		}
		// A new set keeps a peer's counters, changes its flags and
		// forgets the one gone.
		if err := f.dp.SetPeers([]Peer{{PeerKey: peerA}}); err != nil {
			t.Fatal(err)
		}
		counts, gtsm, _ = f.dp.PeerStats()
		if len(counts) != 1 || counts[peerA].Passed != 2 || gtsm[peerA] {
			t.Errorf("after the new set: %+v gtsm %v", counts, gtsm)
		}
	})
}

// frameStep is a frame into a fixture's port and the verdict it must get.
type frameStep struct {
	what    string
	in      int
	frame   []byte
	verdict int
}

// steps runs each frame through the kernel and the model, which must
// agree, and checks its verdict.
func (f *fixture) steps(t *testing.T, steps []frameStep) {
	t.Helper()
	for _, s := range steps {
		r, err := f.compare(s.in, s.frame, true)
		if err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
		if r.Verdict != s.verdict {
			t.Errorf("%s: verdict %d, want %d", s.what, r.Verdict, s.verdict)
		}
	}
}

// TestLoadConfigPolice: the file's classes override the defaults one by
// one; an unknown class or a per-source rate above its class's is refused
// at its line.
func TestLoadConfigPolice(t *testing.T) {
	const head = "name: lb1\nkey_file: k\nports:\n  i0: {role: internal}\npolice:\n"
	path := filepath.Join(t.TempDir(), "lb.yaml")
	os.WriteFile(path, []byte(head+"  icmp: {pps: 100, per_source_pps: 10}\n"), 0o644)
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Police[PoliceICMP]; r.PPS != 100 || r.PerSourcePPS != 10 || r.Burst != DefaultPolice[PoliceICMP].Burst {
		t.Errorf("icmp: %+v", r)
	}
	if c.Police[PoliceBGP] != DefaultPolice[PoliceBGP] {
		t.Errorf("bgp changed: %+v", c.Police[PoliceBGP])
	}
	for body, want := range map[string]string{
		"  ssh: {pps: 5}\n":                      `:6:8: police: unknown class "ssh"`,
		"  bgp: {pps: 10, per_source_pps: 20}\n": ":6:8: police bgp: per_source_pps 20 above the class's pps 10",
		"  bfd: {pps: 2000000000}\n":             ":6:8: police bfd: at most 1000000000",
	} {
		os.WriteFile(path, []byte(head+body), 0o644)
		if _, err := LoadConfig(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
}

// TestLBURPFTag: what a port with unicast RPF on brings in is balanced
// tagged with the port's VLAN (the back-end checks its source by it), as
// the model says; another port's is balanced untagged.
func TestLBURPFTag(t *testing.T) {
	withFixture(t, ModeHash, func(f *fixture) {
		e0 := f.ports["e0"]
		e0.URPF = true
		if err := f.dp.SetPort(e0); err != nil {
			t.Fatal(err)
		}
		f.model.Ports[e0.Ifindex] = e0
		for _, c := range []struct {
			in     int
			frame  []byte
			tagged bool
		}{
			{e0.Ifindex, eth(macExt0, macHost, etherTypeIPv4, udp(ipHostA, ipHostB, 4000, 5000)), true},
			{e0.Ifindex, eth(macExt0, macHost, etherTypeIPv6, udp6(ip6HostA, netip.MustParseAddr("2001:db8:99::1"), 4000, 5000)), true},
			{f.ports["e1"].Ifindex, eth(macExt1, macHost, etherTypeIPv4, udp(ipHostB, ipHostA, 5000, 4000)), false},
		} {
			r, err := f.compare(c.in, c.frame, true)
			if err != nil {
				t.Fatal(err)
			}
			if r.Verdict != XDPRedirect && r.Verdict != XDPTx {
				t.Fatalf("verdict %d", r.Verdict)
			}
			isTagged := r.Out[12] == 0x81 && r.Out[13] == 0
			if isTagged != c.tagged || isTagged && (r.Out[14]&0xf != 0 || r.Out[15] != 10) {
				t.Errorf("from ifindex %d: out %x, tagged %v want %v (VLAN 10)", c.in, r.Out[:18], isTagged, c.tagged)
			}
		}
	})
}
