package router

import (
	"bytes"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/inet"
)

// fakeNeighbors is the data path's neighbour table in the unit tests.
type fakeNeighbors map[NeighborKey]net.HardwareAddr

func (f fakeNeighbors) SetNeighbor(ip netip.Addr, vlan uint16, mac net.HardwareAddr) error {
	if mac == nil {
		delete(f, NeighborKey{ip, vlan})
	} else {
		f[NeighborKey{ip, vlan}] = mac
	}
	return nil
}

var (
	macBGP1  = net.HardwareAddr{2, 0, 0, 0, 0x20, 0x20}
	macH3    = net.HardwareAddr{2, 0, 0, 0, 0x10, 0x10}
	macSelfB = net.HardwareAddr{2, 0, 0, 0, 0xb0, 1}
	macOther = net.HardwareAddr{2, 0, 0, 0, 0xb0, 2} // another back-end
	ipBGP1   = netip.MustParseAddr("203.0.113.20")
	ip6BGP1  = netip.MustParseAddr("2001:db8:12::20")
)

// neighborAgent is an agent with one port (VLAN 12, IPv4 and IPv6) and
// a fake data path; sent collects what it sends.
func neighborAgent(t *testing.T) (a *Agent, dp fakeNeighbors, sent *[][]byte) {
	dp = fakeNeighbors{}
	var frames [][]byte
	old := sendFrame
	t.Cleanup(func() { sendFrame = old })
	sendFrame = func(_ int, f []byte) error { frames = append(frames, bytes.Clone(f)); return nil }
	a = &Agent{raw: -1, log: slog.New(slog.NewTextHandler(io.Discard, nil)), mac: macSelfB, neighbors: dp,
		neigh: map[NeighborKey]*neighbor{}, pending: map[NeighborKey]*pendingARP{}, asked: map[NeighborKey]time.Time{},
		probes: map[NeighborKey]*neighProbe{}, neighCount: map[portFamily]int{}, counters: map[string]uint64{}, neighCounters: map[string]uint64{},
		ports:      []Port{{Index: 0, VLAN: 12, Addr: netip.MustParsePrefix("203.0.113.1/24"), Addr6: netip.MustParsePrefix("2001:db8:12::1/64")}},
		neighPorts: []Port{{Index: 0, VLAN: 12, Addr: netip.MustParsePrefix("203.0.113.1/24"), Addr6: netip.MustParsePrefix("2001:db8:12::1/64")}}}
	return a, dp, &frames
}

// arpFrame is an ARP message of op as an LB relays it to the back-ends
// (tagged with its port's VLAN, 12) or a back-end sends it.
func arpFrame(op uint16, srcMAC net.HardwareAddr, sha net.HardwareAddr, spa, tpa netip.Addr) []byte {
	f := append(append(net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, srcMAC...), 0x81, 0x00, 0, 12, 0x08, 0x06)
	arp := arpRequest(sha, spa, tpa)
	binary.BigEndian.PutUint16(arp[6:], op)
	return append(f, arp...)
}

// naFrame is a Neighbor Advertisement for target, from mac, with flags
// (0x40 Solicited, 0x20 Override) and the target link-layer address
// option unless bare, as an LB relays it.
func naFrame(mac net.HardwareAddr, target netip.Addr, flags byte, bare bool) []byte {
	msg := make([]byte, 24, 32)
	msg[0], msg[4] = icmp6NeighborAdv, flags
	copy(msg[8:], target.AsSlice())
	if !bare {
		msg = append(msg, 2, 1)
		msg = append(msg, mac...)
	}
	pkt := inet.ICMPv6(target, netip.MustParseAddr("2001:db8:12::1"), 255, msg)
	f := append(append(net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, mac...), 0x81, 0x00, 0, 12, 0x86, 0xdd)
	return append(f, pkt...)
}

// An unsolicited ARP reply makes no entry; a reply to the back-end's own
// request, or to another back-end's it saw, does; a reply after the
// question's window makes none.
func TestNeighborsOnlyAnswers(t *testing.T) {
	a, dp, _ := neighborAgent(t)
	key := NeighborKey{ipBGP1, 12}
	a.learnARP(arpFrame(2, macH3, macH3, ipBGP1, netip.MustParseAddr("203.0.113.1")))
	if _, ok := dp[key]; ok || a.neighCounters["neigh_unsolicited"] != 1 {
		t.Fatalf("an unsolicited reply made an entry (%v) or was not counted (%d)", dp[key], a.neighCounters["neigh_unsolicited"])
	}
	// Another back-end asks; bgp1 answers.
	a.learnARP(arpFrame(1, macOther, macOther, netip.MustParseAddr("203.0.113.1"), ipBGP1))
	a.learnARP(arpFrame(2, macBGP1, macBGP1, ipBGP1, netip.MustParseAddr("203.0.113.1")))
	if !bytes.Equal(dp[key], macBGP1) {
		t.Fatalf("the answer to another back-end's request: entry %v, want %v", dp[key], macBGP1)
	}
	// This back-end's own question, answered too late.
	h := NeighborKey{netip.MustParseAddr("203.0.113.30"), 12}
	a.neighMu.Lock()
	a.askedFor(h, time.Now().Add(-askWindow-time.Second))
	a.neighMu.Unlock()
	a.learnARP(arpFrame(2, macH3, macH3, h.IP, netip.MustParseAddr("203.0.113.1")))
	if _, ok := dp[h]; ok {
		t.Errorf("an answer %v after the question made an entry", askWindow)
	}
	// A question from outside the port's subnet is none of the router's.
	h4 := NeighborKey{netip.MustParseAddr("203.0.113.40"), 12}
	a.learnARP(arpFrame(1, macH3, macH3, netip.MustParseAddr("198.51.100.7"), h4.IP))
	a.learnARP(arpFrame(1, macH3, macH3, netip.MustParseAddr("203.0.113.10"), h4.IP))
	if _, ok := a.asked[h4]; ok {
		t.Errorf("a request not from the router's address was taken as asked")
	}
}

// A reply that names another MAC for a neighbour (h3 claiming bgp1)
// changes nothing while the old MAC answers the probe; a real change,
// the old MAC silent through every probe, takes the entry.
func TestNeighborsChangeOnlyWhenTheOldIsSilent(t *testing.T) {
	a, dp, sent := neighborAgent(t)
	key := NeighborKey{ipBGP1, 12}
	a.learnARP(arpFrame(1, macOther, macOther, netip.MustParseAddr("203.0.113.1"), ipBGP1))
	a.learnARP(arpFrame(2, macBGP1, macBGP1, ipBGP1, netip.MustParseAddr("203.0.113.1")))
	*sent = nil

	// The hijack: three broadcast replies from h3.
	for range 3 {
		a.learnARP(arpFrame(2, macH3, macH3, ipBGP1, netip.MustParseAddr("203.0.113.1")))
	}
	if !bytes.Equal(dp[key], macBGP1) {
		t.Fatalf("bgp1's entry is %v after h3's claims, want %v", dp[key], macBGP1)
	}
	if len(*sent) != 1 || !bytes.Equal((*sent)[0][0:6], macBGP1) || binary.BigEndian.Uint16((*sent)[0][16:]) != 0x0806 {
		t.Fatalf("want one ARP request to the old MAC %v, sent %x", macBGP1, *sent)
	}
	// bgp1 answers the probe.
	a.learnARP(arpFrame(2, macBGP1, macBGP1, ipBGP1, netip.MustParseAddr("203.0.113.1")))
	a.tickNeighbors(time.Now().Add(3 * probeWait))
	if !bytes.Equal(dp[key], macBGP1) || a.neighCounters["neigh_change_refused"] != 1 || a.neighCounters["neigh_changed"] != 0 {
		t.Fatalf("entry %v, refused %d, changed %d; want bgp1's MAC kept, one refusal", dp[key], a.neighCounters["neigh_change_refused"], a.neighCounters["neigh_changed"])
	}

	// bgp1's NIC replaced: the old MAC never answers.
	newMAC := net.HardwareAddr{2, 0, 0, 0, 0x20, 0x21}
	a.learnARP(arpFrame(2, newMAC, newMAC, ipBGP1, netip.MustParseAddr("203.0.113.1")))
	now := time.Now()
	for i := 1; i <= probeTries; i++ {
		if !bytes.Equal(dp[key], macBGP1) {
			t.Fatalf("the entry changed before the old MAC had %d tries", probeTries)
		}
		a.tickNeighbors(now.Add(time.Duration(i) * (probeWait + time.Millisecond)))
	}
	if !bytes.Equal(dp[key], newMAC) || a.neighCounters["neigh_changed"] != 1 || a.neighCounters["neigh_probes"] != 1+probeTries {
		t.Errorf("entry %v, changed %d, probes %d; want %v after %d probes", dp[key], a.neighCounters["neigh_changed"], a.neighCounters["neigh_probes"], newMAC, probeTries)
	}
}

// IPv6: an advertisement makes an entry only when asked; one without the
// Override flag changes no MAC (RFC 4861 §7.2.5); one with it probes the
// old MAC by a unicast solicitation; a bare advertisement (no target
// link-layer option) answers with its frame's source.
func TestNeighborsAdvertisements(t *testing.T) {
	a, dp, sent := neighborAgent(t)
	key := NeighborKey{ip6BGP1, 12}
	a.learnNDP(naFrame(macH3, ip6BGP1, 0x20, false))
	if _, ok := dp[key]; ok {
		t.Fatal("an unsolicited advertisement made an entry")
	}
	a.neighMu.Lock()
	a.solicit(key, a.neighPorts[0])
	a.neighMu.Unlock()
	a.learnNDP(naFrame(macBGP1, ip6BGP1, 0x60, false))
	if !bytes.Equal(dp[key], macBGP1) {
		t.Fatalf("the answer to a solicitation: entry %v", dp[key])
	}
	*sent = nil
	a.learnNDP(naFrame(macH3, ip6BGP1, 0x40, false)) // S, not O
	if !bytes.Equal(dp[key], macBGP1) || len(*sent) != 0 || a.neighCounters["neigh_not_override"] != 1 {
		t.Fatalf("an advertisement without Override: entry %v, %d sent, counted %d", dp[key], len(*sent), a.neighCounters["neigh_not_override"])
	}
	a.learnNDP(naFrame(macH3, ip6BGP1, 0x20, false)) // O: probe
	if len(*sent) != 1 {
		t.Fatalf("want one unicast solicitation, sent %d", len(*sent))
	}
	ns := (*sent)[0]
	if !bytes.Equal(ns[0:6], macBGP1) || netip.AddrFrom16([16]byte(ns[18+24:18+40])) != ip6BGP1 {
		t.Errorf("the probe went to %v for %v, want bgp1's old MAC and address", net.HardwareAddr(ns[0:6]), netip.AddrFrom16([16]byte(ns[18+24:18+40])))
	}
	a.learnNDP(naFrame(macBGP1, ip6BGP1, 0x60, true)) // bgp1 answers, bare
	a.tickNeighbors(time.Now().Add(3 * probeWait))
	if !bytes.Equal(dp[key], macBGP1) || a.neighCounters["neigh_change_refused"] != 1 {
		t.Errorf("entry %v, refused %d: want bgp1 kept", dp[key], a.neighCounters["neigh_change_refused"])
	}
}

// A port holds at most its share of a family's table: a scan answered
// by an accomplice fills it and no more (neigh_port_full); a next hop of
// the FIB then takes the place of the entry longest unheard.
func TestNeighborsPortLimit(t *testing.T) {
	a, dp, _ := neighborAgent(t)
	a.neighPorts = append(a.neighPorts, Port{Index: 1, VLAN: 10, Addr: netip.MustParsePrefix("192.0.2.1/24")})
	a.nh = newNextHops(newFakeTables())
	limit := a.neighborLimit()
	if limit != MaxNeighbors/2 {
		t.Fatalf("two ports: a share of %d, want %d", limit, MaxNeighbors/2)
	}
	now := time.Now()
	answer := func(ip netip.Addr, at time.Time) {
		key := NeighborKey{ip, 12}
		a.neighMu.Lock()
		a.askedFor(key, at)
		a.hear(claim{key: key, mac: macH3, override: true}, 0x0800, at)()
		a.neighMu.Unlock()
	}
	// The scan: the port's whole share, from 10.12.0.0 up (an accomplice
	// answering for a /16 routed to the port would do the same).
	a.neighPorts[0].Addr = netip.MustParsePrefix("10.12.0.1/16")
	for i := range limit {
		answer(netip.AddrFrom4([4]byte{10, 12, byte(i >> 8), byte(i)}), now.Add(time.Duration(i)))
	}
	if len(dp) != limit {
		t.Fatalf("%d entries after the scan, want the share %d", len(dp), limit)
	}
	answer(netip.MustParseAddr("10.12.255.250"), now.Add(time.Second))
	if len(dp) != limit || a.neighCounters["neigh_port_full"] != 1 {
		t.Errorf("one more: %d entries, %d refused; want it refused", len(dp), a.neighCounters["neigh_port_full"])
	}
	// The other port is not full.
	other := NeighborKey{netip.MustParseAddr("192.0.2.10"), 10}
	a.neighMu.Lock()
	a.askedFor(other, now)
	a.hear(claim{key: other, mac: macBGP1, override: true}, 0x0800, now)()
	a.neighMu.Unlock()
	if _, ok := dp[other]; !ok {
		t.Error("a full port refused another port's neighbour")
	}
	// A next hop of the FIB on the full port: the oldest entry goes.
	gw := netip.MustParseAddr("10.12.255.251")
	if _, err := a.nh.acquire([]nhKey{{gw: gw, port: 0}}); err != nil {
		t.Fatal(err)
	}
	answer(gw, now.Add(2*time.Second))
	if _, ok := dp[NeighborKey{gw, 12}]; !ok || a.neighCounters["neigh_evicted"] != 1 {
		t.Errorf("the FIB's next hop on a full port: in the table %v, evicted %d", ok, a.neighCounters["neigh_evicted"])
	}
	if _, ok := dp[NeighborKey{netip.MustParseAddr("10.12.0.0"), 12}]; ok {
		t.Error("the entry longest unheard was kept")
	}
}

// The operator's static neighbours: no claim changes them (counted), a
// flush keeps them, and one that leaves the set is forgotten.
func TestNeighborsStatic(t *testing.T) {
	a, dp, sent := neighborAgent(t)
	key := NeighborKey{ipBGP1, 12}
	a.setStatic([]dist.StaticNeighbor{{Addr: ipBGP1, VLAN: 12, MAC: macBGP1}, {Addr: netip.MustParseAddr("192.0.2.7"), VLAN: 99, MAC: macBGP1}})
	if !bytes.Equal(dp[key], macBGP1) || len(dp) != 1 {
		t.Fatalf("static neighbours in the data path: %v (want bgp1's, and none on a VLAN this back-end has no port of)", dp)
	}
	*sent = nil
	a.learnARP(arpFrame(2, macH3, macH3, ipBGP1, netip.MustParseAddr("203.0.113.1")))
	a.tickNeighbors(time.Now().Add(10 * time.Minute)) // past expiry and refresh
	if !bytes.Equal(dp[key], macBGP1) || len(*sent) != 0 || a.neighCounters["neigh_static_kept"] != 1 {
		t.Errorf("a claim against a static neighbour: entry %v, %d frames sent (no probe, no refresh), kept %d", dp[key], len(*sent), a.neighCounters["neigh_static_kept"])
	}
	if n, _ := a.FlushNeighbors(); n != 0 || !bytes.Equal(dp[key], macBGP1) {
		t.Errorf("a flush forgot %d, the static entry %v", n, dp[key])
	}
	a.setStatic(nil)
	if _, ok := dp[key]; ok {
		t.Error("a static neighbour out of the set is still held")
	}
}

// slowSample is a slow-path event as the data path writes it: the
// reason's meta, then the frame.
func slowSample(t *testing.T, reason uint32, f []byte) []byte {
	b, err := binary.Append(nil, binary.NativeEndian, rtxdpRtSlowMeta{Reason: reason, Len: uint32(len(f))})
	if err != nil {
		t.Fatal(err)
	}
	return append(b, f...)
}

// TestNeighborsLearnedWhileRoutesWork: with the agent's lock held (the
// RIB feed installing a table, the state saver walking it), an ARP reply
// read after a packet that needs that lock is learned at once, and
// packets beyond the queue are dropped and counted, not waited for.
func TestNeighborsLearnedWhileRoutesWork(t *testing.T) {
	a, dp, _ := neighborAgent(t)
	queue := make(chan []byte, slowQueueLen)
	ttl := slowSample(t, uint32(rtxdpRtSlowRT_SLOW_TTL), ethFrame(macSelfB, macOther, 0x0800,
		ipPacket(netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("203.0.113.9"), 17, 1, 0, udpPayload(1, 2, 4))))
	router := netip.MustParseAddr("203.0.113.1")
	a.mu.Lock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.dispatchSlow(ttl, queue)
		a.dispatchSlow(slowSample(t, uint32(rtxdpRtSlowRT_SLOW_ARP), arpFrame(1, macOther, macOther, router, ipBGP1)), queue)
		a.dispatchSlow(slowSample(t, uint32(rtxdpRtSlowRT_SLOW_ARP), arpFrame(2, macBGP1, macBGP1, ipBGP1, router)), queue)
		for range slowQueueLen + 4 {
			a.dispatchSlow(ttl, queue)
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the slow path's reader waited for the agent's lock")
	}
	a.mu.Unlock()
	if !bytes.Equal(dp[NeighborKey{ipBGP1, 12}], macBGP1) {
		t.Errorf("bgp1 not learned while the agent's lock was held: %v", dp[NeighborKey{ipBGP1, 12}])
	}
	if len(queue) != slowQueueLen || a.neighCounters["slow_queue_full"] != 5 {
		t.Errorf("%d queued, %d dropped as slow_queue_full; want %d and 5", len(queue), a.neighCounters["slow_queue_full"], slowQueueLen)
	}
}
