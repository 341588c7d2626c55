package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/msr-router/msr/demo"
)

// TestFRRSuite runs the RIB lab, dual stack, with FRR as the VCP's
// routing suite (`routing: {suite: frr}`): both external peers' sessions
// come up on the mirror (h1's over IPv4 carrying IPv6 too, h2's one of
// each family), and a BIRD OSPF neighbour forms an adjacency; their
// prefixes (one announced by both: ECMP, one by OSPF, two IPv6 ones) and
// the static routes of both families reach the back-end, traffic to them
// is forwarded (ping and ping -6), the console reads FRR, h1 learns the
// router's IPv6 static route with the router's IPv6 address as next hop,
// SNMP's BGP4-MIB comes from FRR's bgpd, and a withdrawal follows.
func TestFRRSuite(t *testing.T) {
	dir := upFRRSuiteLab(t)
	logs := func() string { return frrSuiteLogs(dir) }
	routes := func() map[string]string { return routeVia(t, dir) }
	out, _, _ := msr(t, "lab", "exec", "--lab", "t-frr", "h2", "--", "ip", "-6", "-o", "addr", "show", "dev", "eth0", "scope", "link")
	h2LinkLocal, _, _ := strings.Cut(strings.Fields(out + " - - - -")[3], "/")
	if !strings.HasPrefix(h2LinkLocal, "fe80::") {
		t.Fatalf("h2's link-local address: %q", out)
	}
	want := map[string]string{
		"2001:db8:f0::/48": h2LinkLocal, "2001:db8:f1::/48": h2LinkLocal, // by OSPFv3 and RIPng
		"203.0.113.0/24": "192.0.2.10", "100.64.0.0/10": "192.0.2.10,192.0.2.11", "198.51.100.0/24": "192.0.2.20",
		"10.99.0.0/16":     "192.0.2.11", // by OSPF
		"2001:db8:a1::/48": "2001:db8:10::10", "2001:db8:a2::/48": "2001:db8:10::11", "2001:db8:99::/48": "2001:db8:10::20"}
	for deadline := time.Now().Add(40 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		got, ok := routes(), true
		for p, via := range want {
			ok = ok && got[p] == via
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the back-end's routes %v, want %v\n%s", got, want, logs())
		}
	}
	// h2's OSPF, OSPFv3 and RIPng neighbours, as FRR tells them, are the
	// LB's peers on e0: its IPv4 address (a BGP peer too) and its
	// link-local address, which only OSPFv3 and RIPng name.
	lbPeers := func() map[string]string { return lbPeers(t, "t-frr-lb") }
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		peers := lbPeers()
		if peers[h2LinkLocal] != "" && peers["192.0.2.11"] != "" {
			t.Logf("the LB's peers with FRR: %v", peers)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the LB's peers %v, want h2's OSPF and OSPFv3/RIPng neighbours 192.0.2.11 and %s", peers, h2LinkLocal)
		}
	}
	checkFRRForwards(t, dir, h2LinkLocal)
	checkFRRAnnounces(t, dir)
	checkBGPDRestart(t, dir)
	checkPrefixLimit(t, "t-frr", dir, logs)
	checkSessionKeys(t, "t-frr", dir, func() string {
		out, _ := exec.Command("ip", "netns", "exec", "msr.t-frr.vcp", "vtysh", "--vty_socket", filepath.Join(dir, "vcp", "frr"), "-d", "bgpd",
			"-c", "show bgp neighbors 192.0.2.10").CombinedOutput()
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, "BGP state =") { // "BGP state = Established, up for 00:00:12"
				return l
			}
		}
		return string(out)
	})
}

// upFRRSuiteLab brings TestFRRSuite's lab up: the RIB lab, dual stack,
// h1 with FRR's zebra and bgpd, h2 with BIRD, the VCP with FRR.
func upFRRSuiteLab(t *testing.T) string {
	dir, write := testDir(t, "6e")
	// h1 sends its IPv6 routes over its IPv4 session, its own IPv6 address
	// their next hop (bgpd without zebra does not know it).
	write("bgpd.conf", withPassword(peerBGPConf("65010", "192.0.2.10", "203.0.113.0/24", "100.64.0.0/10"), "h1-frr-md5")+
		" address-family ipv6 unicast\n  neighbor 192.0.2.1 activate\n  neighbor 192.0.2.1 route-map H1-NEXT-HOP6 out\n  network 2001:db8:a1::/48\n exit-address-family\n"+
		"route-map H1-NEXT-HOP6 permit 10\n set ipv6 next-hop global 2001:db8:10::10\n")
	// h2 has a session of each family.
	write("h2-bgpd.conf", peerBGPConf("65020", "192.0.2.11", "100.64.0.0/10")+
		" neighbor 2001:db8:10::1 remote-as 65000\n neighbor 2001:db8:10::1 ttl-security hops 1\n address-family ipv4 unicast\n  no neighbor 2001:db8:10::1 activate\n exit-address-family\n"+
		" address-family ipv6 unicast\n  neighbor 2001:db8:10::1 activate\n  network 2001:db8:a2::/48\n exit-address-family\n")
	os.MkdirAll(filepath.Join(dir, "h2"), 0o755)
	frrOwned(t, filepath.Join(dir, "h1z")) // h1's zebra runs as FRR's user
	writeDataPathConfigs(dir, "t-frr", false, false)
	dualStack(t, dir)
	write("vcp.yaml", `name: t-frr-vcp
key_file: `+dir+`/key
interface: eth0
external_ports:
  - {lb: t-frr-lb, mac: "02:00:00:00:e0:00", address: 192.0.2.1/24, address6: "2001:db8:10::1/64", vlan: 10, router_advertisements: true}
routing:
  suite: frr
  asn: 65000
  run_dir: `+dir+`/vcp
  bgp:
    - {neighbor: 192.0.2.10, asn: 65010, password: h1-frr-md5, ipv6: true, import_prefixes: [203.0.113.0/24+, 100.64.0.0/10+, "2001:db8::/32+"]}
    - {neighbor: 192.0.2.11, asn: 65020, max_prefixes: 1, import_prefixes: [203.0.113.0/24+, 100.64.0.0/10+, "2001:db8::/32+"]}
    - {neighbor: "2001:db8:10::11", asn: 65020, import_prefixes: [203.0.113.0/24+, 100.64.0.0/10+, "2001:db8::/32+"]}
  static:
    - {to: 198.51.100.0/24, via: 192.0.2.20}
    - {to: "2001:db8:99::/48", via: "2001:db8:10::20"}
  ospf:
    - {vlan: 10}
  ospfv3:
    - {vlan: 10}
  ripng:
    - {vlan: 10}
  backends: {listen: 10.0.0.1, range: 10.0.0.0/24}
snmp: {community: public, sources: [192.0.2.0/24]}
`)
	// h2 is also an OSPF neighbour (BIRD), originating 10.99.0.0/16, and
	// an OSPFv3 and RIPng one, originating 2001:db8:f0::/48 and
	// 2001:db8:f1::/48: their next hop is h2's link-local address, which
	// reaches the back-end in LINK_ROUTES (bgpd would put its own in its
	// place).
	write("h2-bird.conf", `router id 192.0.2.11;
protocol device {}
protocol static { ipv4; route 10.99.0.0/16 blackhole; }
protocol static static6 { ipv6; route 2001:db8:f0::/48 blackhole; route 2001:db8:f1::/48 blackhole; }
protocol ospf v2 {
	ipv4 { import all; export where source = RTS_STATIC; };
	area 0 { interface "eth0" { hello 1; dead 4; }; };
}
protocol ospf v3 ospf6 {
	ipv6 { import none; export where net = 2001:db8:f0::/48; };
	area 0 { interface "eth0" { hello 1; dead 4; }; };
}
protocol rip ng ripng {
	ipv6 { import none; export where net = 2001:db8:f1::/48; };
	interface "eth0" {};
}
`)
	// h1's bgpd takes IPv6 routes with a link-local next hop beside the
	// global one (bgpd sends both to an eBGP peer on a shared subnet)
	// only knowing its interfaces: it runs with zebra here, not -Z. It
	// starts once zebra's socket is there: a bgpd that finds no zebra
	// tries again only 10 s later, its session with the router up by then
	// without the interface, and it answers the first IPv6 update with
	// "no peer interface information" and a reset (CI, twice).
	lab := strings.NewReplacer("t-rib", "t-frr",
		"      - {name: bgpd, command: [/usr/lib/frr/bgpd, -f, DIR/bgpd.conf, -Z, -S, -i, DIR/bgpd.pid,",
		"      - {name: zebra, command: [/usr/lib/frr/zebra, -f, /dev/null, -z, DIR/h1z/zserv.api, -i, DIR/h1z/zebra.pid, --vty_socket, DIR/h1z, -P, \"0\", --log, stdout]}\n"+
			"      - {name: bgpd, command: [/bin/sh, -c, 'for i in $(seq 100); do [ -S DIR/h1z/zserv.api ] && break; sleep 0.1; done; exec \"$0\" \"$@\"', /usr/lib/frr/bgpd, -f, DIR/bgpd.conf, -S, -z, DIR/h1z/zserv.api, -i, DIR/bgpd.pid,",
		"eth0: {addresses: [192.0.2.10/24]", `eth0: {addresses: [192.0.2.10/24, "2001:db8:10::10/64"]`,
		"eth0: {addresses: [192.0.2.11/24]", `eth0: {addresses: [192.0.2.11/24, "2001:db8:10::11/64"]`,
		"      - {to: 203.0.113.0/24, via: 192.0.2.1}\n", "      - {to: 203.0.113.0/24, via: 192.0.2.1}\n      - {to: \"2001:db8:a1::/48\", via: \"2001:db8:10::1\"}\n",
	).Replace(ribLab)
	if !strings.Contains(lab, "2001:db8:10::11/64") || !strings.Contains(lab, "2001:db8:a1::/48") || !strings.Contains(lab, "h1z/zserv.api") {
		t.Fatalf("the dual-stack lab is not the RIB lab with IPv6 addresses:\n%s", lab)
	}
	upControlLab(t, dir, "t-frr", lab)
	startHostBIRD(t, dir, "t-frr", "h2")
	return dir
}

// checkFRRForwards: h2 takes the router's advertisements, and traffic
// to what FRR learned by BGP, OSPFv3 and RIPng is forwarded; h2's OSPFv3
// stopping takes its prefix away; the console reads FRR's routes.
func checkFRRForwards(t *testing.T, dir, h2LinkLocal string) {
	logs := func() string { return frrSuiteLogs(dir) }
	routes := func() map[string]string { return routeVia(t, dir) }
	origins := func() map[string]string { return routeOrigins(t, dir) }
	lbPeers := func() map[string]string { return lbPeers(t, "t-frr-lb") }
	// Router advertisements on the port (zebra's): h2 solicits, and takes
	// the router as its default router.
	checkRouterAdvertised(t, "t-frr", "h2")
	// Forwarded to a learned prefix.
	msr(t, "lab", "exec", "--lab", "t-frr", "h1", "--", "ip", "addr", "add", "203.0.113.1/32", "dev", "lo")
	if out, errOut, code := msr(t, "lab", "exec", "--lab", "t-frr", "h2", "--", "ping", "-c", "2", "-i", "0.2", "-W", "2", "203.0.113.1"); code != 0 {
		t.Fatalf("ping to the learned prefix: %s %s", out, errOut)
	}
	// Forwarded to OSPFv3's and RIPng's prefixes, via h2's link-local
	// address: h1 sends them to the router.
	for _, dst := range []string{"2001:db8:f0::1", "2001:db8:f1::1"} {
		site, _, _ := strings.Cut(dst, "::")
		msr(t, "lab", "exec", "--lab", "t-frr", "h2", "--", "ip", "addr", "add", dst+"/128", "dev", "lo")
		msr(t, "lab", "exec", "--lab", "t-frr", "h1", "--", "ip", "-6", "route", "add", site+"::/48", "via", "2001:db8:10::1")
		if out, errOut, code := msr(t, "lab", "exec", "--lab", "t-frr", "h1", "--", "ping", "-6", "-c", "2", "-i", "0.2", "-W", "2", dst); code != 0 {
			t.Fatalf("ping -6 to %s, learned by OSPFv3 or RIPng: %s %s\nthe back-end's routes: %s\n%s", dst, out, errOut, routeList(t, dir), logs())
		}
	}
	if got := origins()["2001:db8:f0::/48"]; got != "ospf 110" {
		t.Errorf("the back-end's 2001:db8:f0::/48 came from %q, want \"ospf 110\"", got)
	}
	// h2's OSPFv3 stops: its prefix leaves the back-end (zebra's table,
	// the next LINK_ROUTES), RIPng's stays.
	if out, errOut, code := msr(t, "lab", "exec", "--lab", "t-frr", "h2", "--", "birdc", "-s", filepath.Join(dir, "h2-bird.ctl"), "disable", "ospf6"); code != 0 {
		t.Fatalf("birdc disable ospf6: %s %s", out, errOut)
	}
	for start := time.Now(); routes()["2001:db8:f0::/48"] != ""; time.Sleep(200 * time.Millisecond) {
		if time.Since(start) > 20*time.Second {
			t.Fatalf("OSPFv3's route still on the back-end 20 s after h2 stopped OSPFv3: %v", routes())
		}
	}
	if got := routes()["2001:db8:f1::/48"]; got != h2LinkLocal {
		t.Errorf("RIPng's route after OSPFv3 stopped: %q", got)
	}
	if peers := lbPeers(); peers[h2LinkLocal] == "" {
		t.Errorf("h2, a RIPng neighbour still, left the LB's peers with OSPFv3: %v", peers)
	}
	msr(t, "lab", "exec", "--lab", "t-frr", "h1", "--", "ip", "addr", "add", "2001:db8:a1::1/128", "dev", "lo")
	if out, errOut, code := msr(t, "lab", "exec", "--lab", "t-frr", "h2", "--", "ping", "-6", "-c", "2", "-i", "0.2", "-W", "2", "2001:db8:a1::1"); code != 0 {
		t.Fatalf("ping -6 to the IPv6 prefix learned over h1's IPv4 session: %s %s\nthe back-end's routes: %s\n%s", out, errOut, routeList(t, dir), logs())
	}
	out, _, _ := msr(t, "lab", "exec", "--lab", "t-frr", "vcp", "--", msrBin, "ctl", "--name", "t-frr-vcp", "route", "2001:db8:a2::9", "-o", "json")
	if !strings.Contains(out, `"prefix": "2001:db8:a2::/48"`) || !strings.Contains(out, `"2001:db8:10::11"`) {
		t.Errorf("msr ctl route of an IPv6 address with FRR: %s", out)
	}
	// The console reads FRR: the suite's route for an address and the
	// back-end's session.
	out, _, _ = msr(t, "lab", "exec", "--lab", "t-frr", "vcp", "--", msrBin, "ctl", "--name", "t-frr-vcp", "route", "203.0.113.9", "-o", "json")
	if !strings.Contains(out, `"prefix": "203.0.113.0/24"`) || !strings.Contains(out, `"192.0.2.10"`) {
		t.Errorf("msr ctl route with FRR: %s", out)
	}
}

// checkFRRAnnounces: the back-end's routes' origins and distances, its
// session, BGP4-MIB through FRR's AgentX module, the router's own routes
// announced to h1, and a withdrawal at h1 reaching the back-end.
func checkFRRAnnounces(t *testing.T, dir string) {
	logs := func() string { return frrSuiteLogs(dir) }
	routes := func() map[string]string { return routeVia(t, dir) }
	origins := func() map[string]string { return routeOrigins(t, dir) }
	// Where each of the back-end's routes came from, with FRR's distance:
	// eBGP 20, OSPF 110 (h2's 10.99.0.0/16), static 1; the port's own
	// subnet connected.
	from := origins()
	for p, want := range map[string]string{"203.0.113.0/24": "bgp 20", "100.64.0.0/10": "bgp 20", "10.99.0.0/16": "ospf 110",
		"2001:db8:f1::/48": "rip 120",
		"198.51.100.0/24":  "static 1", "192.0.2.0/24": "connected 0"} {
		if from[p] != want {
			t.Errorf("the back-end's %s came from %q, want %q (all: %v)", p, from[p], want, from)
		}
	}
	out, _, _ := msr(t, "ctl", "--name", "t-frr-vcp", "routes", "-o", "json")
	var rv struct {
		Backends []struct{ Session string }
	}
	json.Unmarshal([]byte(out), &rv)
	if len(rv.Backends) != 1 || rv.Backends[0].Session != "Established" {
		t.Errorf("msr ctl routes with FRR: %s", out)
	}
	// BGP4-MIB through FRR's AgentX module and the VCP's snmpd: h1 reads
	// its own session's state, established (6), at the router's address.
	peerState := ".1.3.6.1.2.1.15.3.1.2.192.0.2.10 = INTEGER: 6"
	var walk string
	for start := time.Now(); !strings.Contains(walk, peerState); time.Sleep(500 * time.Millisecond) {
		walk, _, _ = msr(t, "lab", "exec", "--lab", "t-frr", "h1", "--", "snmpwalk", "-v2c", "-c", "public", "-On", "-m", "", "-t", "1",
			"192.0.2.1", ".1.3.6.1.2.1.15.3.1.2")
		if time.Since(start) > 15*time.Second {
			t.Fatalf("BGP4-MIB's bgpPeerState from h1: %q, want %q", walk, peerState)
		}
	}
	// The router announces what it originates to each peer (connected and
	// static by default), with its own address as next hop: h1's bgpd
	// learns the static route 198.51.100.0/24 from it, and the IPv6 one
	// over the same (IPv4) session, with the router's IPv6 address on the
	// port as next hop.
	for _, c := range []struct{ show, nextHop string }{
		{"show ip bgp 198.51.100.0/24", "192.0.2.1 from 192.0.2.1 "},
		{"show bgp ipv6 unicast 2001:db8:99::/48", "2001:db8:10::1 from 192.0.2.1 "},
	} {
		for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
			out, _, _ := msr(t, "lab", "exec", "--lab", "t-frr", "h1", "--", "vtysh", "--vty_socket", dir, "-d", "bgpd", "-c", c.show)
			if strings.Contains(out, "65000") && strings.Contains(out, c.nextHop) {
				break
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("h1 never learned the router's static route (%s: via %s):\n%s\n%s", c.show, c.nextHop, out, logs())
			}
		}
	}
	// A withdrawal at the peer.
	if out, errOut, code := msr(t, "lab", "exec", "--lab", "t-frr", "h1", "--", "vtysh", "--vty_socket", dir, "-d", "bgpd",
		"-c", "configure terminal", "-c", "router bgp 65010", "-c", "address-family ipv4 unicast", "-c", "no network 203.0.113.0/24"); code != 0 {
		t.Fatalf("vtysh: %s %s", out, errOut)
	}
	start := time.Now()
	for routes()["203.0.113.0/24"] != "" {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("the withdrawal never reached the back-end: %v", routes())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("FRR: the withdrawal reached the back-end's FIB %v after the peer's", time.Since(start))
}

// checkBGPDRestart: FRR's bgpd killed, the VCP starts it again within a
// second and says how it died, h1's session and the back-end's feed come
// back.
func checkBGPDRestart(t *testing.T, dir string) {
	bgpdPID := func() int {
		out, _ := exec.Command("pgrep", "-f", "^/usr/lib/frr/bgpd -f "+filepath.Join(dir, "vcp", "frr", "bgpd.conf")).Output()
		pid, _ := strconv.Atoi(strings.TrimSpace(string(out)))
		return pid
	}
	h1State := func() string {
		out, _ := exec.Command("ip", "netns", "exec", "msr.t-frr.vcp", "vtysh", "--vty_socket", filepath.Join(dir, "vcp", "frr"), "-d", "bgpd",
			"-c", "show bgp neighbors 192.0.2.10").CombinedOutput()
		return string(out)
	}
	// The back-end's feed: its session was lost with bgpd (its routes
	// kept, stale); the new bgpd opens it once converged, and resends.
	feed := func() (string, int, uint64) {
		out, _, _ := msr(t, "router", "status", "--socket", filepath.Join(dir, "r1.sock"), "-o", "json")
		var st struct {
			RIB struct {
				State    string
				Stale    int
				Sessions uint64
			}
		}
		json.Unmarshal([]byte(out), &st)
		return st.RIB.State, st.RIB.Stale, st.RIB.Sessions
	}
	_, _, sessions := feed()
	old := bgpdPID()
	if old == 0 {
		t.Fatal("the VCP's bgpd is not running")
	}
	syscall.Kill(old, syscall.SIGKILL)
	killed := time.Now()
	for pid := bgpdPID(); pid == 0 || pid == old; pid = bgpdPID() {
		if time.Since(killed) > time.Second {
			t.Fatalf("FRR's bgpd not running again 1 s after SIGKILL")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("FRR: bgpd running again %v after SIGKILL", time.Since(killed).Round(time.Millisecond))
	for !strings.Contains(h1State(), "BGP state = Established") {
		if time.Since(killed) > 20*time.Second {
			t.Fatalf("h1's session not back 20 s after bgpd was killed:\n%s", h1State())
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("FRR: h1's session Established again %v after bgpd was killed", time.Since(killed).Round(time.Millisecond))
	for {
		state, stale, n := feed()
		if state == "established" && stale == 0 && n > sessions {
			break
		}
		if time.Since(killed) > 40*time.Second {
			t.Fatalf("the back-end's feed not back 40 s after bgpd was killed: %s, %d stale", state, stale)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("FRR: the back-end's feed resynced %v after bgpd was killed", time.Since(killed).Round(time.Millisecond))
	if l, _ := os.ReadFile("/run/msr/labs/t-frr/logs/vcp.vcp.log"); !strings.Contains(string(l), `msg="routing suite died: restarting it" component=vcp vcp=t-frr-vcp daemon=bgpd`) {
		t.Errorf("the VCP's log does not say bgpd died:\n%s", l)
	}
}

// frrOwned makes a directory FRR's user owns (zebra gives up root).
func frrOwned(t *testing.T, dir string) {
	t.Helper()
	u, err := user.Lookup("frr")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
}

// frrSuiteLogs are TestFRRSuite's logs: the elements', h1's bgpd's,
// FRR's routes and RIPng, and each FRR daemon's.
func frrSuiteLogs(dir string) string {
	var b strings.Builder
	b.WriteString(labLogs("t-frr", "vcp.vcp", "r1.router", "h1.bgpd"))
	for _, show := range []string{"show ipv6 route", "show ipv6 ripng", "show ipv6 ripng status"} {
		out, _ := exec.Command("ip", "netns", "exec", "msr.t-frr.vcp", "vtysh", "--vty_socket", filepath.Join(dir, "vcp", "frr"), "-c", show).CombinedOutput()
		b.WriteString("--- FRR " + show + "\n" + string(out))
	}
	for _, f := range []string{"zebra", "bgpd", "staticd", "ospfd", "ospf6d", "ripngd"} {
		l, _ := os.ReadFile(filepath.Join(dir, "vcp", "frr", f+".log"))
		b.WriteString("--- FRR " + f + "\n" + string(l))
	}
	return b.String()
}

// routeOrigins are where each of the back-end's routes came from, and
// its distance.
func routeOrigins(t *testing.T, dir string) map[string]string {
	var rs []struct {
		Prefix, Protocol string
		Distance         int
	}
	json.Unmarshal([]byte(routeList(t, dir)), &rs)
	from := map[string]string{}
	for _, r := range rs {
		from[r.Prefix] = fmt.Sprintf("%s %d", r.Protocol, r.Distance)
	}
	return from
}

// lbPeers are the LB's peers, as its status says them: port by address.
func lbPeers(t *testing.T, lb string) map[string]string {
	st, err := demo.LBStatus(lb)
	if err != nil {
		t.Fatal(err)
	}
	peers := map[string]string{}
	for _, p := range st.Peers {
		peers[p.Addr] = p.Port
	}
	return peers
}
