package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBGPImportPolicy: two eBGP peers with no import_prefixes of their
// own, each suite in turn. h1 announces a public prefix beside a private
// one (10.66.0.0/16), a benchmarking one (198.18.0.0/15), one longer than
// /24, the router's own network (192.0.2.0/24) and the default route:
// only the public prefix reaches the back-end. h2, whose peer has
// allow_default, announces the default route, a public prefix and a
// private one: the default route and the public prefix arrive.
func TestBGPImportPolicy(t *testing.T) {
	for _, suite := range []string{"bird", "frr"} {
		t.Run(suite, func(t *testing.T) { testBGPImportPolicy(t, suite) })
	}
}

func testBGPImportPolicy(t *testing.T, suite string) {
	dir, write := testDir(t, "7b")
	write("bgpd.conf", peerBGPConf("65010", "192.0.2.10", "100.128.0.0/16", "10.66.0.0/16", "198.18.0.0/15", "100.129.1.0/25", "192.0.2.0/24", "0.0.0.0/0"))
	write("h2-bgpd.conf", peerBGPConf("65020", "192.0.2.11", "0.0.0.0/0", "100.130.0.0/16", "10.77.0.0/16"))
	os.MkdirAll(filepath.Join(dir, "h2"), 0o755)
	writeDataPathConfigs(dir, "t-imp", false, false)
	write("vcp.yaml", `name: t-imp-vcp
key_file: `+dir+`/key
interface: eth0
external_ports:
  - {lb: t-imp-lb, mac: "02:00:00:00:e0:00", address: 192.0.2.1/24, vlan: 10}
routing:
  suite: `+suite+`
  asn: 65000
  run_dir: `+dir+`/vcp
  bgp:
    - {neighbor: 192.0.2.10, asn: 65010}
    - {neighbor: 192.0.2.11, asn: 65020, allow_default: true}
  backends: {listen: 10.0.0.1, range: 10.0.0.0/24}
`)
	upControlLab(t, dir, "t-imp", strings.ReplaceAll(ribLab, "t-rib", "t-imp"))
	want := map[string]string{"100.128.0.0/16": "192.0.2.10", "100.130.0.0/16": "192.0.2.11", "0.0.0.0/0": "192.0.2.11"}
	var routes map[string]string
	for deadline := time.Now().Add(40 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		routes = routeVia(t, dir)
		arrived := 0
		for p, via := range want {
			if routes[p] == via {
				arrived++
			}
		}
		if arrived == len(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the peers' accepted routes never all reached the back-end: %v, want %v", suite, routes, want)
		}
	}
	time.Sleep(2 * time.Second) // the refused ones had as long
	routes = routeVia(t, dir)
	for _, p := range []string{"10.66.0.0/16", "198.18.0.0/15", "100.129.1.0/25", "10.77.0.0/16"} {
		if via, ok := routes[p]; ok {
			t.Errorf("%s: the martian %s reached the back-end via %s", suite, p, via)
		}
	}
	if via := routes["192.0.2.0/24"]; strings.Contains(via, "192.0.2.10") {
		t.Errorf("%s: h1's announcement of the router's own network was taken: via %s", suite, via)
	}
	if via := routes["0.0.0.0/0"]; via != "192.0.2.11" {
		t.Errorf("%s: the default route is via %q, want h2's only (h1 has no allow_default)", suite, via)
	}
	t.Logf("%s: the back-end's routes from the peers: %v", suite, routes)
}
