package e2e

import (
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
	dir, write := testDir(t, "6c")
	write("bgpd.conf", peerBGPConf("65010", "192.0.2.10", "203.0.113.0/24"))
	// ribLab's second BGP peer (h2) stays, idle: no neighbour.
	write("h2-bgpd.conf", "frr defaults traditional\nrouter bgp 65020\n bgp router-id 192.0.2.11\n")
	os.MkdirAll(filepath.Join(dir, "h2"), 0o755)
	write("h3-bird.conf", `router id 198.51.100.10;
protocol device {}
protocol static { ipv4; route 10.99.0.0/16 blackhole; route 100.70.0.0/16 blackhole; }
protocol ospf v2 {
	ipv4 { import all; export where net = 10.99.0.0/16; };
	area 0 { interface "eth0" { hello 1; dead 4; }; };
}
protocol bgp {
	local as 65030;
	neighbor 198.51.100.1 as 65000;
	ipv4 { import all; export where net = 100.70.0.0/16; };
}
`)
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
    - {neighbor: 192.0.2.10, asn: 65010, export: [connected, static, bgp]}
    - {neighbor: 198.51.100.10, asn: 65030, export: [bgp]}
  ospf:
    - {vlan: 11}
  ospf_export: [bgp]
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
	routes := func() string { return routeList(t, dir) }
	birdc := func(sock string, args ...string) string {
		out, _ := exec.Command("birdc", append([]string{"-s", sock}, args...)...).CombinedOutput()
		return string(out)
	}
	h3 := func(args ...string) string { return birdc(filepath.Join(dir, "h3-bird.ctl"), args...) }
	deadline := time.Now().Add(40 * time.Second)
	for !strings.Contains(routes(), `"10.99.0.0/16"`) || !strings.Contains(routes(), `"203.0.113.0/24"`) || !strings.Contains(routes(), `"100.70.0.0/16"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the OSPF and BGP routes never all reached the back-end:\n%s\nh3 neighbours:\n%s\nh3 protocols:\n%s", routes(),
				h3("show", "ospf", "neighbors"), h3("show", "protocols"))
		}
		time.Sleep(300 * time.Millisecond)
	}
	if via := routeVia(t, dir); via["10.99.0.0/16"] != "198.51.100.10" || via["203.0.113.0/24"] != "192.0.2.10" || via["100.70.0.0/16"] != "198.51.100.10" {
		t.Errorf("routes not via the OSPF neighbour and the BGP peers: %v", via)
	}
	// The neighbour's side: a full adjacency with the router (its id is the
	// first port's address), and the router's LSA in its database.
	if n := h3("show", "ospf", "neighbors"); !strings.Contains(n, "192.0.2.1") || !strings.Contains(n, "Full") {
		t.Errorf("h3's OSPF neighbours:\n%s", n)
	}
	if db := h3("show", "ospf", "state"); !strings.Contains(db, "router 192.0.2.1") {
		t.Errorf("the router is not in h3's OSPF state:\n%s", db)
	}
	// Transit: each peer learns the other's prefix from the router, with
	// the router's AS before the other's and its own address as next hop;
	// and h3 also by OSPF, as an external route.
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
