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
// FRR BGP peer (h1) on the first and a BIRD OSPF neighbour (h3) on the
// second. The neighbour forms a full adjacency with the VCP's BIRD on the
// second port's mirror (hellos to 224.0.0.5 go to the VCP by the LB's
// Virtual-CP rule, the VCP's go out of that port), the databases are
// exchanged, and the external route it originates reaches the back-end
// beside the BGP peer's.
func TestOSPFNeighbourThroughMirror(t *testing.T) {
	dir, write := testDir(t, "6c")
	write("bgpd.conf", peerBGPConf("65010", "192.0.2.10", "203.0.113.0/24"))
	// ribLab's second BGP peer (h2) stays, idle: no neighbour.
	write("h2-bgpd.conf", "frr defaults traditional\nrouter bgp 65020\n bgp router-id 192.0.2.11\n")
	os.MkdirAll(filepath.Join(dir, "h2"), 0o755)
	write("h3-bird.conf", `router id 198.51.100.10;
protocol device {}
protocol static { ipv4; route 10.99.0.0/16 blackhole; }
protocol ospf v2 {
	ipv4 { import all; export where source = RTS_STATIC; };
	area 0 { interface "eth0" { hello 1; dead 4; }; };
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
  asn: 65000
  run_dir: `+dir+`/vcp
  bgp:
    - {neighbor: 192.0.2.10, asn: 65010}
  ospf:
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
	deadline := time.Now().Add(40 * time.Second)
	for !strings.Contains(routes(), `"10.99.0.0/16"`) || !strings.Contains(routes(), `"203.0.113.0/24"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the OSPF and BGP routes never both reached the back-end:\n%s\nVCP neighbours:\n%s\nh3 neighbours:\n%s\nVCP routes:\n%s", routes(),
				birdc(filepath.Join(dir, "vcp", "bird.ctl"), "show", "ospf", "neighbors"),
				birdc(filepath.Join(dir, "h3-bird.ctl"), "show", "ospf", "neighbors"), birdc(filepath.Join(dir, "vcp", "bird.ctl"), "show", "route"))
		}
		time.Sleep(300 * time.Millisecond)
	}
	if r := routes(); !strings.Contains(r, `"198.51.100.10"`) || !strings.Contains(r, `"192.0.2.10"`) {
		t.Errorf("routes not via the OSPF neighbour and the BGP peer: %s", r)
	}
	// The neighbour's side: a full adjacency with the router (its id is the
	// first port's address), and the router's LSA in its database.
	if n := birdc(filepath.Join(dir, "h3-bird.ctl"), "show", "ospf", "neighbors"); !strings.Contains(n, "192.0.2.1") || !strings.Contains(n, "Full") {
		t.Errorf("h3's OSPF neighbours:\n%s", n)
	}
	if db := birdc(filepath.Join(dir, "h3-bird.ctl"), "show", "ospf", "state"); !strings.Contains(db, "router 192.0.2.1") {
		t.Errorf("the router is not in h3's OSPF state:\n%s", db)
	}
}
