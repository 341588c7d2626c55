package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/lb/lbapi"
	"github.com/msr-router/msr/router/routerapi"
)

// TestHostileNeighbours: customers on the default lab's external
// segments attack the router as a neighbour would, with real tools
// (scapy, hping3), and each probe is blocked, counted, and costs the
// others' traffic nothing (docs/operations.md, "Hardening"):
//   - h3 forges ARP replies and an overriding Neighbor Advertisement
//     claiming bgp1's addresses: every back-end keeps bgp1's MAC (it
//     probes the old MAC, which answers), and h1's pings to bgp1 go on;
//   - h1 advertises 5,000 addresses of its /64: no back-end makes an
//     entry for any (none was asked for);
//   - h1 sends SYNs to every element's address on the inside and its API
//     ports, and packets claiming an inside source: lb1 drops every one
//     before balancing (infra_dropped);
//   - h1 floods TTL-1 UDP through the router as fast as hping3 sends,
//     while the back-ends have forgotten their neighbours: h3's pings to
//     h2 are answered (h2 resolved again through the flood), and the
//     back-ends drop the flood's excess in the data path (slow_dropped);
//   - h3 floods BGP's port from random sources, forges bgp1's source at
//     TTL 64 and floods single-hop BFD (peerFloods);
//   - h2 floods BFD at TTL 255 from random sources while ospf1, a BGP peer
//     with BFD for the while, keeps both sessions up (bfdFlood);
//   - h1 sends with other ports' and unrouted sources (spoofedSources).
func TestHostileNeighbours(t *testing.T) {
	upDefaultLab(t, 100)
	macOf := func(host string) string {
		mac, err := demo.MAC(host, "eth0")
		if err != nil {
			t.Fatal(err)
		}
		return mac
	}
	bgp1MAC := macOf("bgp1")
	const bgp1, bgp1v6 = "203.0.113.20", "2001:db8:12::20"
	// Every back-end learns bgp1 (one asks; the others see the question).
	for _, dst := range []string{bgp1, bgp1v6} {
		if out, err := demo.Exec("h1", "ping", "-c", "3", "-i", "0.2", "-W", "2", dst); err != nil {
			t.Fatalf("ping %s before the attack: %v\n%s", dst, err, out)
		}
	}
	want := map[string]string{bgp1 + " vlan 12": bgp1MAC, bgp1v6 + " vlan 12": bgp1MAC}
	entries := func() map[string]map[string]string { return neighbourEntries(t) }
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		missing := ""
		for b, n := range entries() {
			for k, mac := range want {
				if n[k] != mac {
					missing += fmt.Sprintf(" %s: %s is %q;", b, k, n[k])
				}
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("before the attack, not every back-end knows bgp1:%s", missing)
		}
	}
	before := slowPathCounters(t)

	// The hijack: from h3, three broadcast ARP replies and an overriding
	// advertisement, each claiming bgp1's address with h3's MAC.
	h3MAC := macOf("h3")
	scapy(t, "h3", fmt.Sprintf(`
p = Ether(dst="ff:ff:ff:ff:ff:ff", src="%[1]s")/ARP(op=2, hwsrc="%[1]s", psrc="%[2]s", hwdst="ff:ff:ff:ff:ff:ff", pdst="203.0.113.1")
sendp(p, iface="eth0", count=3, inter=0.1, verbose=False)
na = Ether(dst="33:33:00:00:00:01", src="%[1]s")/IPv6(src="%[3]s", dst="ff02::1", hlim=255)/ICMPv6ND_NA(tgt="%[3]s", R=0, S=0, O=1)/ICMPv6NDOptDstLLAddr(lladdr="%[1]s")
sendp(na, iface="eth0", count=3, inter=0.1, verbose=False)
`, h3MAC, bgp1, bgp1v6))
	pings := make(chan string, 2)
	for _, dst := range []string{bgp1, bgp1v6} {
		go func() {
			out, _ := demo.Exec("h1", "ping", "-c", "30", "-i", "0.1", "-W", "1", dst)
			pings <- dst + ": " + out
		}()
	}
	for range 2 {
		if out := <-pings; pingLost(out) != 0 {
			t.Errorf("h1's pings to bgp1 during and after h3's claims lost some:\n%s", out)
		}
	}
	for b, n := range entries() {
		for k, mac := range want {
			if n[k] != mac {
				t.Errorf("%s: %s is at %q after h3's claims, want bgp1's %s", b, k, n[k], mac)
			}
		}
	}
	after := slowPathCounters(t)
	refused := after["neigh_change_refused"] - before["neigh_change_refused"]
	t.Logf("forged ARP replies and NA for bgp1 from h3: every back-end kept %s; probes %d, changes refused %d, changed %d",
		bgp1MAC, after["neigh_probes"]-before["neigh_probes"], refused, after["neigh_changed"]-before["neigh_changed"])
	if refused < uint64(len(demo.Backends)) || after["neigh_changed"] != before["neigh_changed"] {
		t.Errorf("want every back-end to refuse the changes (at least %d refusals, none taken): %d refused, %d changed",
			len(demo.Backends), refused, after["neigh_changed"]-before["neigh_changed"])
	}

	checkAdvertisementFlood(t)
	checkInsideFromOutside(t)
	checkTTLFlood(t)
	peerFloods(t)
	bfdFlood(t)
	spoofedSources(t)
}

// checkAdvertisementFlood: an advertisement flood over h1's /64:
// nothing was asked, nothing is made.
func checkAdvertisementFlood(t *testing.T) {
	entries := func() map[string]map[string]string { return neighbourEntries(t) }
	neighbours := func() (n int) {
		for _, e := range entries() {
			n += len(e)
		}
		return n
	}
	n0, before := neighbours(), slowPathCounters(t)
	ndpDropped := backendSlowDrops(t)["ndp"]
	scapy(t, "h1", `
import random
src = get_if_hwaddr("eth0")
ps = [Ether(dst="33:33:00:00:00:01", src=src)/IPv6(src="2001:db8:10::%x" % i, dst="ff02::1", hlim=255)/
      ICMPv6ND_NA(tgt="2001:db8:10::%x:%x" % (random.randrange(1, 65535), i), R=0, S=1, O=1)/ICMPv6NDOptDstLLAddr(lladdr=src)
      for i in range(1, 5001)]
sendp(ps, iface="eth0", verbose=False)
`)
	time.Sleep(500 * time.Millisecond)
	after := slowPathCounters(t)
	unsolicited := after["neigh_unsolicited"] - before["neigh_unsolicited"]
	ndpDropped = backendSlowDrops(t)["ndp"] - ndpDropped
	t.Logf("5,000 advertisements over h1's /64: neighbours %d → %d on the back-ends; of the %d the back-ends saw, %d refused as unsolicited, %d over the ndp rate",
		n0, neighbours(), 5000*len(demo.Backends), unsolicited, ndpDropped)
	if n := neighbours(); n > n0 {
		t.Errorf("the advertisement flood made %d neighbour entries", n-n0)
	}
	// Each back-end sees them all, but for what a full veth ring of the
	// lab drops on the way (a tenth at most).
	if seen := unsolicited + ndpDropped; seen < uint64(9*5000*len(demo.Backends)/10) || unsolicited == 0 {
		t.Errorf("%d refused and %d over the rate, want (nearly) every one of the %d", unsolicited, ndpDropped, 5000*len(demo.Backends))
	}

}

// checkInsideFromOutside: SYNs from h1 to every element's address and
// API port, and packets claiming an inside source: lb1 drops them all.
func checkInsideFromOutside(t *testing.T) {
	lbBefore, err := demo.LBStatus("lb1")
	if err != nil {
		t.Fatal(err)
	}
	inside := []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.11", "10.0.0.12", "10.0.0.13", "10.0.0.31", "10.0.0.32", "10.0.0.40"}
	var runs [][]string
	sent := 0
	for _, addr := range inside {
		for _, port := range []string{"8179", "8180", "8181", "179", "22"} {
			runs = append(runs, []string{"-S", "-p", port, "-c", "2", "-i", "u2000", addr})
			sent += 2
		}
	}
	runs = append(runs, []string{"-S", "-a", "10.0.0.2", "-p", "80", "-c", "5", "-i", "u2000", demo.H3})
	sent += 5
	hping(t, "h1", runs...)
	lbAfter, err := demo.LBStatus("lb1")
	if err != nil {
		t.Fatal(err)
	}
	dropped := lbAfter.InfraDropped - lbBefore.InfraDropped
	t.Logf("%d SYNs from h1 to the inside's %d addresses and API ports, and with an inside source: lb1 infra_dropped %d (its inside: %s)",
		sent, len(inside), dropped, strings.Join(lbAfter.Infrastructure, ", "))
	if dropped != uint64(sent) {
		t.Errorf("lb1 dropped %d as infra, want every one of the %d", dropped, sent)
	}

}

// checkTTLFlood: a TTL-1 flood while the back-ends have forgotten every
// neighbour: h2 must be resolved through it.
func checkTTLFlood(t *testing.T) {
	before := slowPathCounters(t)
	dropsBefore := backendSlowDrops(t)
	flood := make(chan string, 1)
	go func() {
		out, _ := demo.Exec("h1", "timeout", "-s", "INT", "8", "hping3", "--flood", "-2", "-t", "1", "-p", "9", demo.H3)
		flood <- out
	}()
	time.Sleep(time.Second)
	for _, b := range demo.Backends {
		if _, err := routerapi.Local(b, "").FlushNeighbors(); err != nil {
			t.Fatal(err)
		}
	}
	out, _ := demo.Exec("h3", "ping", "-c", "20", "-i", "0.2", "-W", "1", demo.H2)
	floodOut := <-flood
	after := slowPathCounters(t)
	drops := backendSlowDrops(t)
	floodSent := hpingSent(floodOut)
	t.Logf("TTL-1 flood from h1: %d packets in 7 s (%.0f pps); the back-ends dropped %d in the data path (slow_dropped ttl), sent %d Time Exceeded and held back %d; h3's pings to h2 lost %d of 20",
		floodSent, float64(floodSent)/7, drops["ttl"]-dropsBefore["ttl"], after["icmp_errors"]-before["icmp_errors"],
		after["icmp_rate_limited_time_exceeded"]-before["icmp_rate_limited_time_exceeded"], pingLost(out))
	if lost := pingLost(out); lost < 0 || lost > 1 {
		t.Errorf("h3's pings to h2 through the TTL-1 flood lost %d of 20:\n%s", lost, out)
	}
	if floodSent < 10000 {
		t.Errorf("precondition: hping3 --flood sent %d packets in 7 s; the flood is no flood:\n%s", floodSent, floodOut)
	}
	if drops["ttl"] == dropsBefore["ttl"] {
		t.Errorf("no TTL-1 frame dropped in the data path over its rate")
	}
}

// bfdFlood: ospf1 becomes a BGP peer with BFD (300 ms x 3) of the router
// (the VCPs' files, reloaded; ospf1's BIRD reconfigured), and h2, on its
// segment, floods single-hop BFD at TTL 255 from random sources to the
// router's address: the flood spends lb1's bfd class, ospf1's BFD and
// BGP sessions stay up through it in ospf1's own bucket. (bgp1 runs
// bgpd without zebra, so it has no BFD to show.)
func bfdFlood(t *testing.T) {
	const ospf1, router = "198.51.100.20", "198.51.100.1"
	ctl := filepath.Join(demo.RunDir, "ospf1-bird.ctl")
	ospf1c := func(args ...string) string {
		out, _ := exec.Command("birdc", append([]string{"-s", ctl}, args...)...).CombinedOutput()
		return string(out)
	}
	conf := filepath.Join(demo.RunDir, "ospf1-bird.conf")
	b, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	withBGP := filepath.Join(demo.RunDir, "ospf1-bird-bfd.conf")
	if err := os.WriteFile(withBGP, append(b, []byte(`
protocol bfd { interface "eth0" { interval 300 ms; multiplier 3; }; }
protocol bgp vcp {
	local as 65021;
	neighbor `+router+` as 65000;
	ttl security on;
	bfd on;
	ipv4 { import none; export none; };
}
`)...), 0o644); err != nil {
		t.Fatal(err)
	}
	const peer = `    - {neighbor: "2001:db8:12::20", asn: 65020, hold_time: 9}`
	reloadVCPs(t, func(s string) string {
		return strings.Replace(s, peer, peer+"\n    - {neighbor: "+ospf1+", asn: 65021, bfd: true}", 1)
	})
	defer reloadVCPs(t, func(s string) string {
		return strings.Replace(s, "\n    - {neighbor: "+ospf1+", asn: 65021, bfd: true}", "", 1)
	})
	if out := ospf1c("configure", `"`+withBGP+`"`); !strings.Contains(out, "Reconfigured") {
		t.Fatalf("ospf1's BIRD with BGP and BFD: %s", out)
	}
	defer ospf1c("configure", `"`+conf+`"`)
	// "vcp        BGP        ---        up     08:41:07.123  Established" and
	// "198.51.100.1    eth0    Up    08:41:07.123    0.300    0.900".
	since := func() (bgp, bfd string) {
		for _, l := range strings.Split(ospf1c("show", "protocols", "vcp"), "\n") {
			if f := strings.Fields(l); len(f) >= 6 && f[0] == "vcp" && f[5] == "Established" {
				bgp = f[4]
			}
		}
		for _, l := range strings.Split(ospf1c("show", "bfd", "sessions"), "\n") {
			if f := strings.Fields(l); len(f) >= 4 && f[0] == router && f[2] == "Up" {
				bfd = f[3]
			}
		}
		return bgp, bfd
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		if bgp, bfd := since(); bgp != "" && bfd != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ospf1's BGP session with BFD never came up:\n%s\n%s", ospf1c("show", "protocols", "all", "vcp"), ospf1c("show", "bfd", "sessions"))
		}
	}
	bgp0, bfd0 := since()
	status := func() (lbapi.PoliceClass, lbapi.PeerStatus) {
		s, err := demo.LBStatus("lb1")
		if err != nil {
			t.Fatal(err)
		}
		var c lbapi.PoliceClass
		var p lbapi.PeerStatus
		for _, x := range s.Police {
			if x.Class == "bfd" {
				c = x
			}
		}
		for _, x := range s.Peers {
			if x.Addr == ospf1 {
				p = x
			}
		}
		return c, p
	}
	c0, p0 := status()
	out, _ := demo.Exec("h2", "timeout", "-s", "INT", "5", "hping3", "--flood", "--rand-source", "-2", "--ttl", "255", "-p", "3784", router)
	time.Sleep(time.Second) // a detection time and then some: a session the flood starved is down by now
	c1, p1 := status()
	bgp1, bfd1 := since()
	sent := hpingSent(out)
	t.Logf("random-source BFD flood at TTL 255 from h2: %d packets in 4 s; lb1's bfd class passed %d, dropped %d (source) %d (class); ospf1's bucket passed %d, dropped %d; ospf1's BFD Up since %s (was %s), BGP since %s (was %s)",
		sent, c1.Passed-c0.Passed, c1.DroppedSource-c0.DroppedSource, c1.DroppedClass-c0.DroppedClass, p1.Passed-p0.Passed, p1.Dropped-p0.Dropped, bfd1, bfd0, bgp1, bgp0)
	if sent < 5000 {
		t.Errorf("precondition: hping3 --flood sent %d BFD packets in 4 s; no flood", sent)
	}
	if c1.DroppedClass == c0.DroppedClass {
		t.Errorf("the BFD flood never spent lb1's bfd class (%+v), so it tests nothing", c1)
	}
	if !sameTime(bfd1, bfd0) || !sameTime(bgp1, bgp0) {
		t.Errorf("ospf1's sessions did not stay up through the BFD flood: BFD Up since %q (was %q), BGP since %q (was %q)", bfd1, bfd0, bgp1, bgp0)
	}
	if p1.Passed == p0.Passed || p1.Dropped != p0.Dropped {
		t.Errorf("ospf1's bucket during the flood: passed %d, dropped %d; want its BFD and BGP, none dropped", p1.Passed-p0.Passed, p1.Dropped-p0.Dropped)
	}
}

// spoofedSources: h1's port is given strict unicast RPF (the VCPs'
// files, reloaded). h1 sends with a source of another port's subnet and
// with one no route of h1's port covers, IPv4 and IPv6: the back-ends
// drop every one (urpf_dropped), while h1's own pings to h3 all pass.
func spoofedSources(t *testing.T) {
	setURPF(t, "strict")
	defer setURPF(t, "")
	urpf := func() map[string]uint64 {
		return backendSum(t, func(s *routerapi.Status) map[string]uint64 { return map[string]uint64{"urpf": s.URPFDropped} })
	}
	before := urpf()["urpf"]
	hping(t, "h1", []string{"-S", "-a", "198.51.100.99", "-p", "80", "-c", "20", "-i", "u5000", demo.H3},
		[]string{"-S", "-a", "100.99.0.1", "-p", "80", "-c", "20", "-i", "u5000", demo.H3})
	scapy(t, "h1", fmt.Sprintf(`
sendp([Ether(dst="02:00:00:00:e0:00")/IPv6(src=s, dst="%s")/UDP(sport=4000, dport=5000) for s in ["2001:db8:11::99", "2001:db8:99::1"] for i in range(10)], iface="eth0", verbose=False)
`, demo.H3v6))
	pings := map[string]string{}
	for _, dst := range []string{demo.H3, demo.H3v6} {
		out, _ := demo.Exec("h1", "ping", "-c", "10", "-i", "0.1", "-W", "1", dst)
		pings[dst] = out
	}
	dropped := urpf()["urpf"] - before
	t.Logf("60 packets from h1 with spoofed sources (h2's subnet, 100.99.0.1, 2001:db8:11::99, 2001:db8:99::1; h1's port strict): the back-ends' urpf_dropped +%d; h1's pings to h3 lost %d and %d of 10",
		dropped, pingLost(pings[demo.H3]), pingLost(pings[demo.H3v6]))
	if dropped != 60 {
		t.Errorf("the back-ends dropped %d of the 60 spoofed packets as urpf", dropped)
	}
	for dst, out := range pings {
		if pingLost(out) != 0 {
			t.Errorf("h1's own pings to %s through its strict port lost some:\n%s", dst, out)
		}
	}
}

// peerFloods: from h3, on bgp1's segment, a random-source SYN flood to
// BGP's port at the router's address spends lb2's bgp class while bgp1's
// session stays Established in its own bucket, none of it dropped; SYNs
// forged with bgp1's source at TTL 64 and a single-hop BFD flood at TTL 64
// are dropped as GTSM.
func peerFloods(t *testing.T) {
	for deadline := time.Now().Add(30 * time.Second); bgpSince() == ""; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("bgp1's session not up before the floods:\n%s", birdc("show", "protocols"))
		}
	}
	since := bgpSince()
	const bgp1, router = "203.0.113.20", "203.0.113.1"
	status := func() *lbapi.Status {
		s, err := demo.LBStatus("lb2")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	peer := func(s *lbapi.Status) lbapi.PeerStatus {
		for _, p := range s.Peers {
			if p.Addr == bgp1 {
				return p
			}
		}
		t.Fatalf("lb2 holds no peer %s: %+v", bgp1, s.Peers)
		return lbapi.PeerStatus{}
	}
	class := func(s *lbapi.Status) lbapi.PoliceClass {
		for _, c := range s.Police {
			if c.Class == "bgp" {
				return c
			}
		}
		return lbapi.PoliceClass{}
	}
	s0 := status()
	if p := peer(s0); !p.GTSM {
		t.Errorf("bgp1 on lb2 without GTSM: %+v", p)
	}
	// ospf1's OSPF and OSPFv3 neighbours, learned by the VCP, are lb1's
	// peers (no GTSM: OSPF is sent at TTL 1).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		s, err := demo.LBStatus("lb1")
		if err != nil {
			t.Fatal(err)
		}
		var v4, ll bool
		for _, p := range s.Peers {
			v4 = v4 || p.Addr == "198.51.100.20" && !p.GTSM
			ll = ll || strings.HasPrefix(p.Addr, "fe80::") && strings.HasSuffix(p.Port, "e1")
		}
		if v4 && ll {
			t.Logf("lb1's peers: %+v", s.Peers)
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("lb1 does not hold ospf1's OSPF and OSPFv3 neighbours as peers: %+v", s.Peers)
			break
		}
	}
	synOut, _ := demo.Exec("h3", "timeout", "-s", "INT", "6", "hping3", "--flood", "--rand-source", "-S", "-p", "179", router)
	hping(t, "h3", []string{"-S", "-a", bgp1, "-p", "179", "-c", "20", "-i", "u10000", router})
	s1 := status()
	bfdOut, _ := demo.Exec("h3", "timeout", "-s", "INT", "3", "hping3", "--flood", "--rand-source", "-2", "-p", "3784", router)
	s2 := status()
	p0, p1 := peer(s0), peer(s1)
	c0, c1 := class(s0), class(s1)
	syns, bfd := hpingSent(synOut), hpingSent(bfdOut)
	t.Logf("random-source SYN flood to %s:179 from h3: %d packets in 5 s; lb2's bgp class passed %d, dropped %d (source) %d (class); bgp1's own bucket passed %d, dropped %d",
		router, syns, c1.Passed-c0.Passed, c1.DroppedSource-c0.DroppedSource, c1.DroppedClass-c0.DroppedClass, p1.Passed-p0.Passed, p1.Dropped-p0.Dropped)
	t.Logf("20 SYNs forged with bgp1's source at TTL 64: bgp1's gtsm_dropped +%d; single-hop BFD flood at TTL 64: %d packets, lb2 gtsm_dropped +%d",
		p1.GTSMDropped-p0.GTSMDropped, bfd, s2.GTSMDropped-s1.GTSMDropped)
	if got := bgpSince(); !sameTime(got, since) {
		t.Errorf("bgp1's session did not stay up through the floods: Established since %q, was %q\n%s", got, since, birdc("show", "protocols", "peer0"))
	}
	if syns < 10000 || bfd < 5000 {
		t.Errorf("precondition: hping3 --flood sent %d SYNs in 5 s and %d BFD packets in 2 s; no flood", syns, bfd)
	}
	if c1.DroppedClass == c0.DroppedClass {
		t.Errorf("the SYN flood never spent lb2's bgp class (%+v), so it tests nothing", c1)
	}
	if p1.Passed == p0.Passed || p1.Dropped != p0.Dropped {
		t.Errorf("bgp1's bucket during the flood: passed %d, dropped %d; want its session's packets, none dropped", p1.Passed-p0.Passed, p1.Dropped-p0.Dropped)
	}
	// At least the 20 forged. More can be bgp1's own kernel: a reset or a
	// TIME_WAIT's ACK of an earlier session leaves at its default TTL
	// (CI once saw +21); the session's own packets at 255 pass (above).
	if got := p1.GTSMDropped - p0.GTSMDropped; got < 20 {
		t.Errorf("bgp1's gtsm_dropped +%d, want the 20 forged at TTL 64", got)
	}
	if got := s2.GTSMDropped - s1.GTSMDropped; got < uint64(bfd)*9/10 {
		t.Errorf("lb2 dropped %d of %d single-hop BFD packets at TTL 64 as GTSM", got, bfd)
	}
}

// reloadVCPs edits the default lab's VCPs' files and reloads each.
func reloadVCPs(t *testing.T, edit func(string) string) {
	t.Helper()
	for _, v := range demo.VCPs {
		file := filepath.Join(demo.RunDir, v+".yaml")
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(edit(string(b))), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, errOut, code := msr(t, "ctl", "--name", v, "reload"); code != 0 {
			t.Fatalf("reload %s: %s %s", v, out, errOut)
		}
	}
}

// scapy runs a Python script with Scapy's names in a lab host.
func scapy(t *testing.T, host, script string) {
	t.Helper()
	if out, err := demo.Exec(host, "/usr/bin/python3", "-c", "from scapy.all import *\n"+script); err != nil {
		t.Fatalf("scapy in %s: %v\n%s", host, err, out)
	}
}

// hping runs hping3 in a lab host with each of runs' arguments, all at
// once: each waits a second for answers after its last packet. It exits
// 1 when nothing answers, which is what the probes expect.
func hping(t *testing.T, host string, runs ...[]string) {
	t.Helper()
	failed := make([]string, len(runs))
	var wg sync.WaitGroup
	for i, args := range runs {
		wg.Go(func() {
			if out, err := demo.Exec(host, append([]string{"hping3", "-q"}, args...)...); err != nil && !strings.Contains(out, "packets transmitted") {
				failed[i] = fmt.Sprintf("hping3 %s in %s: %v\n%s", strings.Join(args, " "), host, err, out)
			}
		})
	}
	wg.Wait()
	for _, f := range failed {
		if f != "" {
			t.Fatal(f)
		}
	}
}

var hpingStats = regexp.MustCompile(`(\d+) packets transmitted`)

// hpingSent is how many packets hping3 said it sent.
func hpingSent(out string) int {
	m := hpingStats.FindStringSubmatch(out)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// slowPathCounters sums the back-ends' slow-path counters.
func slowPathCounters(t *testing.T) map[string]uint64 {
	return backendSum(t, func(s *routerapi.Status) map[string]uint64 { return s.SlowPath })
}

// backendSlowDrops sums what the back-ends' data paths dropped over the
// slow path's rates, by reason.
func backendSlowDrops(t *testing.T) map[string]uint64 {
	return backendSum(t, func(s *routerapi.Status) map[string]uint64 { return s.Stats.SlowDropped })
}

// setURPF gives h1's port (VLAN 10) unicast RPF mode ("": the default)
// in both VCPs' files, reloads them, and waits until every back-end
// serves it.
func setURPF(t *testing.T, mode string) {
	t.Helper()
	const port = `vlan: 10, description: "to h1"`
	reloadVCPs(t, func(s string) string {
		s = regexp.MustCompile(`, urpf: [a-z]+`).ReplaceAllString(s, "")
		if mode != "" {
			s = strings.Replace(s, port, port+", urpf: "+mode, 1)
		}
		return s
	})
	want := "mtu 1500"
	if mode != "" {
		want += " urpf " + mode
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		served := 0
		for _, b := range demo.Backends {
			st, err := routerapi.Local(b, "").Status()
			if err == nil && slices.ContainsFunc(st.Ports, func(p string) bool { return strings.Contains(p, "vlan 10 ") && strings.HasSuffix(p, want) }) {
				served++
			}
		}
		lb1, err := demo.LBStatus("lb1")
		tagging := err == nil && slices.ContainsFunc(lb1.Ports, func(p lbapi.PortStatus) bool { return p.VLAN == 10 && p.URPF == (mode != "") })
		if served == len(demo.Backends) && tagging {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("h1's port not %q on every back-end (%d of %d), or lb1 not tagging it (%v), 10 s after the reload", want, served, len(demo.Backends), tagging)
		}
	}
}

// neighbourEntries are every back-end's neighbours, by back-end.
func neighbourEntries(t *testing.T) map[string]map[string]string {
	got := map[string]map[string]string{}
	for _, b := range demo.Backends {
		st, err := routerapi.Local(b, "").Status()
		if err != nil {
			t.Fatal(err)
		}
		got[b] = st.Neighbors
	}
	return got
}
