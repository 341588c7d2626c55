package e2e

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/inet"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/lb/lbapi"
	"github.com/msr-router/msr/router/routerapi"
)

// TestDefaultLabHostileInput: an outside host (h1) sends forged DIST
// frames, replayed genuine ones, 10^6 random and malformed frames, an ARP
// storm, 300,000 IPv6 packets with random extension header chains (long,
// truncated, malformed), hop limits and lengths through the router, and an
// NDP storm at it, while h2 pings h3 through it over IPv4 and IPv6. The
// others' traffic keeps flowing, no process dies, and the LB and the
// back-ends count what they drop. Then 300,000 such packets at the
// router's own IPv6 address: policed and counted, and the router answers
// ping -6 afterwards. (Not while h2 pings: in this lab every host shares
// one kernel, whose ICMPv6 reply sockets are per CPU for all namespaces,
// and the VCP's echo replies to forged on-link sources wait seconds for
// neighbours that never answer, filling those sockets' buffers: h2's and
// h3's own echo replies then fail, Ip6OutDiscards, for about two seconds.
// Separate machines do not share that; docs/lb.md says what the VCP sees.)
func TestDefaultLabHostileInput(t *testing.T) {
	plan := upDefaultLab(t, 100)
	before, err := demo.LBStatus("lb1")
	if err != nil {
		t.Fatal(err)
	}
	dropsBefore := backendDrops(t)
	discardsBefore := hostsOutDiscards6(t, "h2", "h3")
	backlogBefore := backlogDrops(t)
	ping, ping6 := make(chan string, 1), make(chan string, 1)
	go func() {
		out, _ := demo.Exec("h2", "ping", "-c", "600", "-i", "0.01", demo.H3)
		ping <- out
	}()
	go func() {
		out, _ := demo.Exec("h2", "ping", "-6", "-c", "600", "-i", "0.01", demo.H3v6)
		ping6 <- out
	}()

	var sent, malformed int
	err = fromH1(hostileFrames(plan, &sent, &malformed))
	if err != nil {
		t.Fatal(err)
	}
	out, out6 := <-ping, <-ping6
	t.Logf("h1 sent %d hostile frames; h2 -> h3 meanwhile: %s; over IPv6: %s", sent, lastLine(out, "packets transmitted"), lastLine(out6, "packets transmitted"))
	// Over IPv6 a reply the pinging hosts' own kernel discarded
	// (Ip6OutDiscards: the shared per-CPU ICMPv6 sockets, above) is not
	// the router's loss; CI once lost one of 600 so. Any other is.
	// Over either family, a frame the kernel dropped for a full backlog
	// (softnet_stat: the CPUs the whole lab shares) is the lab's loss
	// too. And up to 1% of a family's 600 pings may go unexplained: the
	// flood holds both cores of the machine the attacker, the router and
	// the hosts share (ping's 6 s take 9.8), and six runs on 2026-11-25
	// lost 0-2 a family now and then, in either family, mid-flood
	// (icmp_seq 184 over IPv6 in one), with no drop counter of the
	// hosts' kernels showing them; where they go is not found yet. An
	// outage would lose hundreds; more than 1%, or any crash, fails.
	discards := hostsOutDiscards6(t, "h2", "h3") - discardsBefore
	backlog := backlogDrops(t) - backlogBefore
	lost, lost6 := pingLost(out), pingLost(out6)
	const unexplained = 6
	if lost < 0 || lost6 < 0 || lost > backlog+unexplained || lost6 > discards+backlog+unexplained {
		t.Errorf("h2's pings to h3 during the attack (h2's and h3's kernels discarded %d IPv6 packets of their own; the CPUs' backlogs dropped %d frames):\n%s (unanswered: %v)\n%s (unanswered: %v)",
			discards, backlog, lastLine(out, "packets transmitted"), unanswered(out, 600), lastLine(out6, "packets transmitted"), unanswered(out6, 600))
	} else if lost+lost6 > 0 {
		t.Logf("%d of h2's pings to h3 lost over IPv4, %d over IPv6; %d IPv6 packets discarded by h2's and h3's own kernels, %d frames by the CPUs' full backlogs", lost, lost6, discards, backlog)
	}
	// The LB dropped what it can judge (a chain past the packet, a
	// length past the frame: bad_ip); the back-ends dropped and counted
	// what is a router's to judge (sources that name no host).
	dropsAfter := backendDrops(t)
	t.Logf("the back-ends' drops by reason, during the attack: %v", diffCounts(dropsBefore, dropsAfter))
	if dropsAfter["martian_src"] <= dropsBefore["martian_src"] {
		t.Errorf("no back-end counted martian_src drops of the hostile IPv6")
	}
	// Every process is still there.
	st, _, _ := msr(t, "lab", "status", demo.LabName, "-o", "json")
	if strings.Count(st, `"running": true`) != 10 || strings.Contains(st, `"running": false`) { // bird, bgpd, 2 LBs, 3 back-ends, 2 VCPs, mon
		t.Errorf("processes after the attack: %s", st)
	}
	// The LB counted what it dropped on h1's port, and its table is still
	// the VCP's.
	after, err := demo.LBStatus("lb1")
	if err != nil {
		t.Fatal(err)
	}
	rx, drops := portDelta(before, after, "lb1/e0")
	t.Logf("lb1's e0: %d frames received, %d dropped and counted by reason", rx, drops)
	if rx < uint64(sent)*99/100 || drops < uint64(malformed)*9/10 {
		t.Errorf("lb1's e0 received %d and dropped %d of %d frames sent, %d of them malformed", rx, drops, sent, malformed)
	}
	if portDrop(after, "lb1/e0", "bad_ip") <= portDrop(before, "lb1/e0", "bad_ip") {
		t.Errorf("lb1's e0 counted no bad_ip drops of the hostile IPv6")
	}
	if after.Table.Generation == 99 {
		t.Error("a replayed TABLE_UPDATE from outside was applied")
	}
	if out, err := demo.Exec("h1", "ping", "-c", "2", "-i", "0.2", demo.H3); err != nil {
		t.Errorf("h1 itself cannot use the router afterwards: %v\n%s", err, out)
	}
	if out, err := demo.Exec("h1", "ping", "-6", "-c", "2", "-i", "0.2", demo.H3v6); err != nil {
		t.Errorf("h1 itself cannot use the router over IPv6 afterwards: %v\n%s", err, out)
	}

	checkRouterAddressFlood(t, after)
}

// checkRouterAddressFlood: the router's own IPv6 address flooded from
// h1: ICMPv6 policed on its way to the VCP, the rest answered by the
// back-ends, every process still there, ping -6 answered after.
func checkRouterAddressFlood(t *testing.T, after *lbapi.Status) {
	policed := portDrop(after, "lb1/e0", "policed")
	err := fromH1(func(ifi *net.Interface, send func([]byte) error) error {
		r := rand.New(rand.NewPCG(3, 4))
		router := netip.MustParseAddr(demo.RouterAddr1v6)
		for i := 0; i < 300_000; i++ {
			if err := send(hostileIPv6(r, net.HardwareAddr{2, 0, 0, 0, 0xe0, 0}, ifi.HardwareAddr, router)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	final, err := demo.LBStatus("lb1")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the router's IPv6 address flooded: lb1's e0 policed %d more", portDrop(final, "lb1/e0", "policed")-policed)
	if portDrop(final, "lb1/e0", "policed") <= policed {
		t.Errorf("a flood at the router's IPv6 address was not policed")
	}
	st, _, _ := msr(t, "lab", "status", demo.LabName, "-o", "json")
	if strings.Count(st, `"running": true`) != 10 || strings.Contains(st, `"running": false`) {
		t.Errorf("processes after the flood at the router's IPv6 address: %s", st)
	}
	time.Sleep(4 * time.Second) // the VCP's neighbour queues for the forged sources give up
	if out, err := demo.Exec("h2", "ping", "-6", "-c", "3", "-i", "0.2", "-W", "2", "2001:db8:11::1"); err != nil || !strings.Contains(out, "3 received") {
		t.Errorf("the router does not answer ping -6 after the flood: %v\n%s", err, out)
	}
}

// hostsOutDiscards6 adds up the hosts' Ip6OutDiscards: IPv6 packets
// their own kernels discarded on their way out.
func hostsOutDiscards6(t *testing.T, hosts ...string) int {
	t.Helper()
	n := 0
	for _, h := range hosts {
		out, err := demo.Exec(h, "cat", "/proc/net/snmp6")
		if err != nil {
			t.Fatalf("%s's /proc/net/snmp6: %v", h, err)
		}
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "Ip6OutDiscards" {
				v, err := strconv.Atoi(f[1])
				if err != nil {
					t.Fatalf("%s's Ip6OutDiscards: %q", h, line)
				}
				n += v
			}
		}
	}
	return n
}

// unanswered lists the icmp_seq numbers of ping's n requests it printed
// no reply for.
func unanswered(out string, n int) []int {
	seen := map[int]bool{}
	for _, line := range strings.Split(out, "\n") {
		if _, after, ok := strings.Cut(line, "icmp_seq="); ok {
			if seq, err := strconv.Atoi(strings.Fields(after)[0]); err == nil {
				seen[seq] = true
			}
		}
	}
	var missing []int
	for seq := 1; seq <= n; seq++ {
		if !seen[seq] {
			missing = append(missing, seq)
		}
	}
	return missing
}

// backlogDrops sums /proc/net/softnet_stat's second column (hex): the
// frames the CPUs dropped for a full backlog, in every namespace.
func backlogDrops(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/net/softnet_stat")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			v, err := strconv.ParseUint(f[1], 16, 32)
			if err != nil {
				t.Fatalf("softnet_stat: %q", line)
			}
			n += int(v)
		}
	}
	return n
}

// pingLost is how many of ping's requests went unanswered by its summary
// ("600 packets transmitted, 599 received"); -1: no summary.
func pingLost(out string) int {
	var sent, received int
	if _, err := fmt.Sscanf(lastLine(out, "packets transmitted"), "%d packets transmitted, %d received", &sent, &received); err != nil {
		return -1
	}
	return sent - received
}

// fromH1 runs f in h1 with its port to the router and a send that waits
// while the qdisc is full, losing nothing.
func fromH1(f func(ifi *net.Interface, send func([]byte) error) error) error {
	return lab.Raw(demo.LabName, "h1", "eth0", f)
}

// hostileIPv6 is an IPv6 frame to dst: random hop limit, source (now and
// then a martian), a chain of 0 to 9 extension headers of random kinds
// and lengths (some running past the packet), a random transport header,
// and a payload length that is now and then wrong.
func hostileIPv6(r *rand.Rand, dstMAC, srcMAC net.HardwareAddr, dst netip.Addr) []byte {
	exts := []uint8{0, 43, 44, 60, 51, 135}
	var chain []byte
	n := r.IntN(10)
	next := []uint8{6, 17, 58, 59, uint8(r.IntN(256))}[r.IntN(5)]
	for i := n - 1; i >= 0; i-- {
		kind := exts[r.IntN(len(exts))]
		size := 8 * (1 + r.IntN(4))
		h := make([]byte, size)
		for j := range h {
			h[j] = byte(r.Uint32())
		}
		h[0] = next
		switch kind {
		case 44:
			h = h[:8]
		case 51:
			h[1] = uint8(size/4 - 2)
		default:
			h[1] = uint8(size/8 - 1)
		}
		chain = append(h, chain...)
		next = kind
	}
	payload := make([]byte, r.IntN(64))
	for j := range payload {
		payload[j] = byte(r.Uint32())
	}
	body := append(chain, payload...)
	ip := make([]byte, 40, 40+len(body))
	ip[0], ip[6], ip[7] = 0x60, next, uint8(r.IntN(256))
	binary.BigEndian.PutUint16(ip[4:], uint16(len(body)))
	if r.IntN(8) == 0 {
		binary.BigEndian.PutUint16(ip[4:], uint16(r.IntN(2000)))
	}
	src := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0x10, 15: byte(r.Uint32())})
	if r.IntN(10) == 0 {
		src = []netip.Addr{netip.IPv6Unspecified(), netip.IPv6Loopback(), netip.MustParseAddr("ff02::1"), netip.MustParseAddr("fe80::1")}[r.IntN(4)]
	}
	copy(ip[8:], src.AsSlice())
	copy(ip[24:], dst.AsSlice())
	ip = append(ip, body...)
	if r.IntN(10) == 0 {
		ip = ip[:r.IntN(len(ip))] // cut short
	}
	return append(append(append(append([]byte{}, dstMAC...), srcMAC...), 0x86, 0xdd), ip...)
}

// portDrop is an LB port's drops for one reason.
func portDrop(s *lbapi.Status, port, why string) uint64 {
	for _, p := range s.Ports {
		if p.Name == port && p.Stats != nil {
			return p.Stats.Drops[why]
		}
	}
	return 0
}

// backendDrops sums the back-ends' data path drops by reason.
func backendDrops(t *testing.T) map[string]uint64 {
	return backendSum(t, func(s *routerapi.Status) map[string]uint64 { return s.Stats.Drops })
}

// backendSum sums one set of counters (of) over the back-ends'
// statuses.
func backendSum(t *testing.T, of func(*routerapi.Status) map[string]uint64) map[string]uint64 {
	t.Helper()
	sum := map[string]uint64{}
	for _, r := range demo.Backends {
		st, err := routerapi.Local(r, "").Status()
		if err != nil || st.Stats == nil {
			t.Fatalf("%s's status: %v", r, err)
		}
		for k, n := range of(st) {
			sum[k] += n
		}
	}
	return sum
}

// diffCounts is after - before, for the counts that grew.
func diffCounts(before, after map[string]uint64) map[string]uint64 {
	d := map[string]uint64{}
	for k, v := range after {
		if v > before[k] {
			d[k] = v - before[k]
		}
	}
	return d
}

// hostileFrames sends, from h1's port, forged and replayed DIST, 10^6
// random and malformed frames, an ARP storm, IPv6 with random extension
// chains, and an NDP storm; it counts the frames sent, and the malformed
// ones among them.
func hostileFrames(plan *demo.Plan, sent, malformed *int) func(*net.Interface, func([]byte) error) error {
	return func(ifi *net.Interface, sendFrame func([]byte) error) error {
		send := func(b []byte) error {
			err := sendFrame(b)
			if err == nil {
				*sent++
			}
			return err
		}
		lbMAC := net.HardwareAddr{2, 0, 0, 0, 0xe0, 0}
		// Forged DIST (another key) and genuine DIST replayed (signed
		// with the VCP's key), to the group and to the LB: control frames
		// from outside.
		forger, _ := dist.NewSender(0xbad, dist.Key{ID: 1, Secret: []byte(strings.Repeat("x", 32))})
		keys, err := dist.ReadVCPKeys(filepath.Join(demo.RunDir, dist.VCPKeyFile), dist.DefaultVCPKeyID)
		if err != nil {
			return err
		}
		genuine, _ := dist.NewSender(dist.ElementID("vcp", "vcp1"), keys[0])
		forged, err := forger.Seal(dist.GroupMAC, ifi.HardwareAddr, &dist.VCPAnnounce{State: dist.VCPActive, APIAddr: netip.IPv4Unspecified()})
		if err != nil {
			return err
		}
		replay, err := genuine.Seal(lbMAC, ifi.HardwareAddr, &dist.TableUpdate{Target: dist.ElementID("lb", "lb1"), Generation: 99, Mode: 2,
			Flags: dist.TableFlush | dist.TableLast})
		if err != nil {
			return err
		}
		for i := 0; i < 1000; i++ {
			if err := send(forged); err != nil {
				return err
			}
			if err := send(replay); err != nil {
				return err
			}
			*malformed += 2
		}
		// 10^6 random and malformed frames.
		r := rand.New(rand.NewPCG(1, 2))
		types := []uint16{0x0800, 0x0806, dist.EtherType, 0x8100, 0x86dd, uint16(r.Uint32())}
		b := make([]byte, 256)
		for i := 0; i < 1_000_000; i++ {
			n := 14 + r.IntN(200)
			for j := range b[:n] {
				b[j] = byte(r.Uint32())
			}
			switch i % 3 {
			case 0:
				copy(b, lbMAC)
			case 1:
				copy(b, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
			}
			binary.BigEndian.PutUint16(b[12:], types[r.IntN(len(types))])
			if err := send(b[:n]); err != nil {
				return err
			}
			*malformed++
		}
		// An ARP storm: who-has the router's address, from 100,000
		// made-up senders.
		for i := 0; i < 100_000; i++ {
			mac := net.HardwareAddr{2, 0xee, byte(i >> 16), byte(i >> 8), byte(i), 1}
			a := make([]byte, 42)
			copy(a, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
			copy(a[6:], mac)
			binary.BigEndian.PutUint16(a[12:], 0x0806)
			copy(a[14:], []byte{0, 1, 8, 0, 6, 4, 0, 1})
			copy(a[22:], mac)
			copy(a[28:], []byte{192, 0, 2, byte(20 + i%200)})
			copy(a[38:], []byte{192, 0, 2, 1})
			if err := send(a); err != nil {
				return err
			}
		}
		// IPv6 with random extension header chains, to h3, to bgp1's
		// prefixes, to nowhere and to the router: balanced, routed,
		// answered or dropped, never crashing anything.
		dsts := []netip.Addr{netip.MustParseAddr(demo.H3v6), plan.Hosts6[1], netip.MustParseAddr("3fff:1::1")}
		for i := 0; i < 300_000; i++ {
			if err := send(hostileIPv6(r, lbMAC, ifi.HardwareAddr, dsts[i%len(dsts)])); err != nil {
				return err
			}
		}
		// An NDP storm: solicitations for the router's address from
		// 100,000 made-up senders.
		router := netip.MustParseAddr(demo.RouterAddr1v6)
		group, groupMAC := inet.SolicitedNode(router)
		for i := 0; i < 100_000; i++ {
			mac := net.HardwareAddr{2, 0xee, byte(i >> 16), byte(i >> 8), byte(i), 6}
			src := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0x10, 13: byte(i >> 16), 14: byte(i >> 8), 15: byte(i)})
			msg := append([]byte{135, 0, 0, 0, 0, 0, 0, 0}, router.AsSlice()...)
			msg = append(msg, 1, 1)
			msg = append(msg, mac...)
			f := append(append(append([]byte{}, groupMAC...), mac...), 0x86, 0xdd)
			if err := send(append(f, inet.ICMPv6(src, group, 255, msg)...)); err != nil {
				return err
			}
		}
		return nil
	}
}
