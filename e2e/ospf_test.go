package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOSPFNeighbourThroughMirror: the router with two external ports, an
// FRR BGP peer (h1) on the first and a BIRD neighbour (h3) speaking OSPF
// and BGP on the second, with each suite in turn. The OSPF neighbour forms
// a full adjacency with the VCP's suite on the second port's mirror
// (hellos to 224.0.0.5 go to the VCP by the LB's Virtual-CP rule, the
// VCP's go out of that port), the databases are exchanged, and the
// external route it originates reaches the back-end beside the BGP
// peers'. The router is a transit between its two BGP peers (export: bgp)
// with itself as next hop, and OSPF carries h1's prefix to h3 (ospf_export:
// bgp); hosts behind h1 and h3 reach each other across it.
func TestOSPFNeighbourThroughMirror(t *testing.T) {
	for _, suite := range []string{"bird", "frr"} {
		t.Run(suite, func(t *testing.T) { testOSPFAndTransit(t, suite) })
	}
}

func testOSPFAndTransit(t *testing.T, suite string) {
	dir, write, h3Conf := upOSPFLab(t, suite)
	routes := func() string { return routeList(t, dir) }
	h3 := func(args ...string) string { return birdcAt(filepath.Join(dir, "h3-bird.ctl"), args...) }
	deadline := time.Now().Add(40 * time.Second)
	for !strings.Contains(routes(), `"10.99.0.0/16"`) || !strings.Contains(routes(), `"203.0.113.0/24"`) || routeVia(t, dir)["100.70.0.0/16"] != "198.51.100.10" ||
		!strings.Contains(routes(), `"10.98.0.0/16"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the OSPF and BGP routes never all reached the back-end:\n%s\nh3 neighbours:\n%s\nh3 protocols:\n%s", routes(),
				h3("show", "ospf", "neighbors"), h3("show", "protocols"))
		}
		time.Sleep(300 * time.Millisecond)
	}
	if via := routeVia(t, dir); via["10.99.0.0/16"] != "198.51.100.10" || via["203.0.113.0/24"] != "192.0.2.10" || via["100.70.0.0/16"] != "198.51.100.10" ||
		via["10.98.0.0/16"] != "198.51.100.10" {
		t.Errorf("routes not via the OSPF and RIP neighbour and the BGP peers: %v", via)
	}
	// Each as the suite learned it: OSPF (BIRD tells an external type 2
	// route apart, FRR's route-map sees OSPF), BGP, RIP.
	ospfKind := map[string]string{"bird": "ospf-e2", "frr": "ospf"}[suite]
	var rs []struct{ Prefix, Protocol string }
	json.Unmarshal([]byte(routes()), &rs)
	from := map[string]string{}
	for _, r := range rs {
		from[r.Prefix] = r.Protocol
	}
	if from["10.99.0.0/16"] != ospfKind || from["100.70.0.0/16"] != "bgp" || from["10.98.0.0/16"] != "rip" {
		t.Errorf("the back-end's routes came from %v, want 10.99.0.0/16 %s, 100.70.0.0/16 bgp, 10.98.0.0/16 rip", from, ospfKind)
	}
	// RIPv2 both ways: h3 learns the router's networks by RIP. BIRD's RIP
	// sends them again when the VCP restarts it once the LB relays its
	// mirrors; a restart birdc refused is in the VCP's log.
	if l := labLogs("t-ospf", "vcp.vcp"); strings.Contains(l, "asking the RIP neighbours again") {
		t.Errorf("the VCP could not have its RIP ask again:\n%s", l)
	}
	for start := time.Now(); !strings.Contains(h3("show", "route", "192.0.2.0/24", "protocol", "rip1"), "192.0.2.0/24"); time.Sleep(200 * time.Millisecond) {
		if time.Since(start) > 15*time.Second {
			t.Fatalf("h3 never learned 192.0.2.0/24 from the router by RIP:\n%s\n%s", h3("show", "route", "protocol", "rip1"), h3("show", "rip", "neighbors"))
		}
	}
	// The neighbour's side: a full adjacency with the router (its id is the
	// first port's address), and the router's LSA in its database.
	if n := h3("show", "ospf", "neighbors"); !strings.Contains(n, "192.0.2.1") || !strings.Contains(n, "Full") {
		t.Errorf("h3's OSPF neighbours:\n%s", n)
	}
	if db := h3("show", "ospf", "state"); !strings.Contains(db, "router 192.0.2.1") {
		t.Errorf("the router is not in h3's OSPF state:\n%s", db)
	}
	checkTransit(t, dir)
	checkBFDFailover(t, dir, suite)
	// BFD's authentication: h3 back with a wrong key is no BFD peer of
	// the router's however long it talks; with the key again it is.
	if suite != "bird" {
		return
	}
	write("h3-bird.conf", strings.Replace(h3Conf, `password "bfd-s3cret"`, `password "not-the-key"`, 1))
	h3("configure")
	if out, errOut, code := msr(t, "lab", "exec", "--lab", "t-ospf", "h3", "--", "ip", "link", "set", "eth0", "up"); code != 0 {
		t.Fatalf("h3's link: %s %s", out, errOut)
	}
	time.Sleep(5 * time.Second) // 16 BFD intervals
	if b := h3("show", "bfd", "sessions"); strings.Contains(b, "Up") {
		t.Errorf("a BFD session with the wrong key came up:\n%s", b)
	}
	write("h3-bird.conf", h3Conf)
	h3("configure")
	for start := time.Now(); !strings.Contains(h3("show", "bfd", "sessions"), "Up"); time.Sleep(200 * time.Millisecond) {
		if time.Since(start) > 15*time.Second {
			t.Fatalf("h3's BFD session never came up with the key:\n%s", h3("show", "bfd", "sessions"))
		}
	}
}

// upOSPFLab brings t-ospf up with suite: h1 and h2 BGP peers, h3 an
// OSPF, RIP, BFD and BGP neighbour (BIRD) on a second port. It returns
// the lab's directory, its writer, and h3's BIRD config.
func upOSPFLab(t *testing.T, suite string) (string, func(name, text string), string) {
	dir, write := testDir(t, "6c")
	write("bgpd.conf", peerBGPConf("65010", "192.0.2.10", "203.0.113.0/24"))
	// h2 announces h3's 100.70.0.0/16 too, with a longer AS path: the
	// back-up when h3 goes.
	write("h2-bgpd.conf", strings.Replace(peerBGPConf("65020", "192.0.2.11", "100.70.0.0/16"), " exit-address-family\n",
		"  neighbor 192.0.2.1 route-map PREPEND out\n exit-address-family\nroute-map PREPEND permit 10\n set as-path prepend 65020 65020\n", 1))
	os.MkdirAll(filepath.Join(dir, "h2"), 0o755)
	// GTSM as the router has it with h3: on with BIRD, off with FRR for
	// a BFD peer (docs/vcp.md).
	gtsm := map[string]string{"bird": "on", "frr": "off"}[suite]
	// BFD signed with BIRD (bfd_auth); FRR's bfdd has no authentication.
	bfdAuth, bfdKey := "", ""
	if suite == "bird" {
		bfdAuth, bfdKey = "  bfd_auth: {key_id: 5, secret: bfd-s3cret}\n", ` authentication meticulous keyed sha1; password "bfd-s3cret" { id 5; };`
	}
	h3Conf := `router id 198.51.100.10;
protocol device {}
protocol static { ipv4; route 10.99.0.0/16 blackhole; route 100.70.0.0/16 blackhole; route 10.98.0.0/16 blackhole; }
protocol rip {
	ipv4 { import all; export where net = 10.98.0.0/16; };
	interface "eth0" { version 2; };
}
protocol ospf v2 {
	ipv4 { import all; export where net = 10.99.0.0/16; };
	area 0 { interface "eth0" { hello 1; dead 4; }; };
}
protocol bfd { interface "eth0" { interval 300 ms; multiplier 3;` + bfdKey + ` }; }
protocol bgp {
	local as 65030;
	neighbor 198.51.100.1 as 65000;
	ttl security ` + gtsm + `;   # GTSM, as the router has it
	bfd on;
	error wait time 1, 2;   # BIRD's 60 s after a BFD flap at FRR's start (docs/vcp.md)
	ipv4 { import all; export where net = 100.70.0.0/16; };
}
`
	write("h3-bird.conf", h3Conf)
	writeDataPathConfigs(dir, "t-ospf", true, false)
	write("vcp.yaml", `name: t-ospf-vcp
key_file: `+dir+`/key
interface: eth0
external_ports:
  - {lb: t-ospf-lb, mac: "02:00:00:00:e0:00", address: 192.0.2.1/24, vlan: 10}
  - {lb: t-ospf-lb, mac: "02:00:00:00:e1:00", address: 198.51.100.1/24, vlan: 11}
routing:
  suite: `+suite+`
  asn: 65000
  run_dir: `+dir+`/vcp
  bgp:
    - {neighbor: 192.0.2.10, asn: 65010, export: [connected, static, bgp], import_prefixes: [203.0.113.0/24+, 100.64.0.0/10+, "2001:db8::/32+"]}
    - {neighbor: 198.51.100.10, asn: 65030, export: [bgp], bfd: true, import_prefixes: [203.0.113.0/24+, 100.64.0.0/10+, "2001:db8::/32+"]}
    - {neighbor: 192.0.2.11, asn: 65020, export: [], import_prefixes: [203.0.113.0/24+, 100.64.0.0/10+, "2001:db8::/32+"]}
  ospf:
    - {vlan: 11}
  ospf_export: [bgp]
`+bfdAuth+`  rip:
    - {vlan: 11}
  backends: {listen: 10.0.0.1, range: 10.0.0.0/24}
`)
	lab := strings.NewReplacer("t-rib", "t-ospf",
		`      e0: {mac: "02:00:00:00:e0:00"}`, `      e0: {mac: "02:00:00:00:e0:00"}
      e1: {mac: "02:00:00:00:e1:00"}`,
		"hosts:\n", `hosts:
  h3:
    interfaces:
      eth0: {addresses: [198.51.100.10/24], xdp_pass: on, tx_checksum: off}
    routes:
      - {to: 203.0.113.0/24, via: 198.51.100.1}
    processes:
      - {name: bird, command: [bird, -f, -c, DIR/h3-bird.conf, -s, DIR/h3-bird.ctl]}
`,
		"links:\n", "links:\n  - ends: [h3:eth0, lb:e1]\n").Replace(ribLab)
	upControlLab(t, dir, "t-ospf", lab)
	return dir, write, h3Conf
}

// checkTransit: each peer learns the other's prefix from the router,
// with the router's AS before the other's and its own address as next
// hop (and h3 also by OSPF, as an external route), and hosts behind them
// reach each other across it.
func checkTransit(t *testing.T, dir string) {
	h3 := func(args ...string) string { return birdcAt(filepath.Join(dir, "h3-bird.ctl"), args...) }
	for start := time.Now(); ; time.Sleep(200 * time.Millisecond) {
		out, _, _ := msr(t, "lab", "exec", "--lab", "t-ospf", "h1", "--", "vtysh", "--vty_socket", dir, "-d", "bgpd", "-c", "show ip bgp 100.70.0.0/16")
		b3 := h3("show", "route", "203.0.113.0/24", "all")
		if strings.Contains(out, "65000 65030") && strings.Contains(out, "192.0.2.1 from 192.0.2.1 ") &&
			strings.Contains(b3, "BGP.as_path: 65000 65010") && strings.Contains(b3, "via 198.51.100.1 ") && strings.Contains(b3, "OSPF-E2") {
			break
		}
		if time.Since(start) > 15*time.Second {
			t.Fatalf("transit: h1 has\n%s\nh3 has\n%s", out, b3)
		}
	}
	// Hosts behind the peers (h1's 203.0.113.1, h3's 100.70.0.1) reach
	// each other across the router.
	for host, addr := range map[string]string{"h1": "203.0.113.1/32", "h3": "100.70.0.1/32"} {
		if out, errOut, code := msr(t, "lab", "exec", "--lab", "t-ospf", host, "--", "ip", "addr", "add", addr, "dev", "lo"); code != 0 {
			t.Fatalf("%s: %s %s", host, out, errOut)
		}
	}
	msr(t, "lab", "exec", "--lab", "t-ospf", "h1", "--", "ip", "route", "add", "100.70.0.0/16", "via", "192.0.2.1")
	if out, errOut, code := msr(t, "lab", "exec", "--lab", "t-ospf", "h1", "--", "ping", "-c", "3", "-i", "0.2", "-W", "2", "-I", "203.0.113.1", "100.70.0.1"); code != 0 || !strings.Contains(out, "ttl=63") {
		t.Errorf("ping from behind h1 to behind h3 across the router: %s %s", out, errOut)
	}

}

// checkBFDFailover: h3's link cut, BFD takes its route from the
// back-end's FIB within a second, and h2's takes over.
func checkBFDFailover(t *testing.T, dir, suite string) {
	h3 := func(args ...string) string { return birdcAt(filepath.Join(dir, "h3-bird.ctl"), args...) }
	// BFD (300 ms x 3) with h3: its link cut, its route is gone from the
	// back-end's FIB within a second, and 100.70.0.0/16 goes via h2; the
	// ping from behind h1 now gets its answer from h2.
	if out, errOut, code := msr(t, "lab", "exec", "--lab", "t-ospf", "h2", "--", "ip", "addr", "add", "100.70.0.1/32", "dev", "lo"); code != 0 {
		t.Fatalf("h2: %s %s", out, errOut)
	}
	if b := h3("show", "bfd", "sessions"); !strings.Contains(b, "198.51.100.1") || !strings.Contains(b, "Up") {
		t.Fatalf("h3's BFD session with the router is not up:\n%s", b)
	}
	if out, errOut, code := msr(t, "lab", "exec", "--lab", "t-ospf", "h3", "--", "ip", "link", "set", "eth0", "down"); code != 0 {
		t.Fatalf("h3's link: %s %s", out, errOut)
	}
	cut := time.Now()
	for routeVia(t, dir)["100.70.0.0/16"] != "192.0.2.11" {
		if time.Since(cut) > 5*time.Second {
			t.Fatalf("100.70.0.0/16 still via %q 5 s after h3's link went down", routeVia(t, dir)["100.70.0.0/16"])
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(cut)
	t.Logf("%s: h3's link cut, its route left the back-end's FIB (now via h2) %v later", suite, took.Round(time.Millisecond))
	if took > time.Second {
		t.Errorf("h3's route took %v to leave the back-end's FIB after its link went down, want at most 1 s (BFD 300 ms x 3)", took)
	}
	if out, errOut, code := msr(t, "lab", "exec", "--lab", "t-ospf", "h1", "--", "ping", "-c", "3", "-i", "0.2", "-W", "2", "-I", "203.0.113.1", "100.70.0.1"); code != 0 || !strings.Contains(out, "ttl=63") {
		t.Errorf("ping from behind h1 to 100.70.0.1, now via h2: %s %s", out, errOut)
	}

}

// birdcAt runs birdc on BIRD's socket sock: its output, errors included.
func birdcAt(sock string, args ...string) string {
	out, _ := exec.Command("birdc", append([]string{"-s", sock}, args...)...).CombinedOutput()
	return string(out)
}
