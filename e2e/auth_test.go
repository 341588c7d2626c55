package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRoutingAuth: the router speaks OSPF, OSPFv3 and RIPv2 on its port
// with authentication (the VCP's `auth:` per port), with each suite in
// turn. An attacker on the port's segment (BIRD on h2) speaks all three
// without the key, announcing a prefix by each: none reaches the
// back-end. Given the key, the same BIRD is a neighbour like any other
// and all three prefixes arrive. FRR 8 signs OSPFv2 and RIPv2 with keyed
// MD5 only, BIRD with HMAC-SHA-256; OSPFv3's trailer is HMAC-SHA-256 with
// BIRD, and with FRR OSPFv3 does not run here (FRR 8.4's trailer does not
// verify against BIRD's, so the file refuses it). RIPng has no
// authentication in either suite (docs/vcp.md).
func TestRoutingAuth(t *testing.T) {
	for _, suite := range []string{"bird", "frr"} {
		t.Run(suite, func(t *testing.T) { testRoutingAuth(t, suite) })
	}
}

func testRoutingAuth(t *testing.T, suite string) {
	dir, write := testDir(t, "7a")
	v2alg := map[string]string{"bird": "hmac-sha256", "frr": "md5"}[suite]
	birdAlg := map[string]string{"bird": "hmac sha256", "frr": "keyed md5"}[suite]
	const ospfKey, ripKey, v3Key = "ospf-s3cret", "rip-s3cret", "ospf6-s3cret"
	ospfv3 := "  ospfv3:\n    - {vlan: 10, auth: {key_id: 3, secret: " + v3Key + "}}\n"
	injected := []string{"10.66.0.0/16", "2001:db8:66::/48", "10.67.0.0/16"}
	if suite == "frr" {
		ospfv3, injected = "", []string{"10.66.0.0/16", "10.67.0.0/16"}
	}
	write("bgpd.conf", peerBGPConf("65010", "192.0.2.10"))
	write("h2-bgpd.conf", peerBGPConf("65020", "192.0.2.11"))
	os.MkdirAll(filepath.Join(dir, "h2"), 0o755)
	writeDataPathConfigs(dir, "t-auth", false, false)
	dualStack(t, dir)
	write("vcp.yaml", `name: t-auth-vcp
key_file: `+dir+`/key
interface: eth0
external_ports:
  - {lb: t-auth-lb, mac: "02:00:00:00:e0:00", address: 192.0.2.1/24, address6: "2001:db8:10::1/64", vlan: 10}
routing:
  suite: `+suite+`
  asn: 65000
  run_dir: `+dir+`/vcp
  static:
    - {to: 198.51.100.0/24, via: 192.0.2.20}
  ospf:
    - {vlan: 10, auth: {algorithm: `+v2alg+`, key_id: 2, secret: `+ospfKey+`}}
`+ospfv3+`  rip:
    - {vlan: 10, auth: {algorithm: md5, key_id: 4, secret: `+ripKey+`}}
  backends: {listen: 10.0.0.1, range: 10.0.0.0/24}
`)
	// The attacker's BIRD, keyless or keyed: 10.66.0.0/16 by OSPF,
	// 2001:db8:66::/48 by OSPFv3, 10.67.0.0/16 by RIP.
	birdConf := func(keyed bool) string {
		auth := func(key string, id int, alg string) string {
			if !keyed {
				return ""
			}
			return fmt.Sprintf(` authentication cryptographic; password "%s" { id %d; algorithm %s; };`, key, id, alg)
		}
		return `router id 192.0.2.11;
protocol device {}
protocol static { ipv4; route 10.66.0.0/16 blackhole; route 10.67.0.0/16 blackhole; }
protocol static static6 { ipv6; route 2001:db8:66::/48 blackhole; }
protocol ospf v2 {
	ipv4 { import none; export where net = 10.66.0.0/16; };
	area 0 { interface "eth0" { hello 1; dead 4;` + auth(ospfKey, 2, birdAlg) + ` }; };
}
protocol ospf v3 ospf6 {
	ipv6 { import none; export where net = 2001:db8:66::/48; };
	area 0 { interface "eth0" { hello 1; dead 4;` + auth(v3Key, 3, "hmac sha256") + ` }; };
}
protocol rip {
	ipv4 { import none; export where net = 10.67.0.0/16; };
	interface "eth0" { version 2; update time 2;` + auth(ripKey, 4, "keyed md5") + ` };
}
`
	}
	write("h2-bird.conf", birdConf(false))
	lab := strings.NewReplacer("t-rib", "t-auth",
		"eth0: {addresses: [192.0.2.11/24]", `eth0: {addresses: [192.0.2.11/24, "2001:db8:10::11/64"]`).Replace(ribLab)
	upControlLab(t, dir, "t-auth", lab)
	startHostBIRD(t, dir, "t-auth", "h2")
	h2 := func(args ...string) string {
		out, _, _ := msr(t, append([]string{"lab", "exec", "--lab", "t-auth", "h2", "--", "birdc", "-s", filepath.Join(dir, "h2-bird.ctl")}, args...)...)
		return out
	}
	// Keyless: the router's static route reaches the back-end (the suite
	// and the feed work), the attacker's prefixes do not, however long it
	// talks (RIP updates every 2 s, OSPF hellos every second: 12 s is six
	// updates, a dead interval three times over).
	for deadline := time.Now().Add(30 * time.Second); routeVia(t, dir)["198.51.100.0/24"] != "192.0.2.20"; time.Sleep(300 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the router's static route never reached the back-end: %v", routeVia(t, dir))
		}
	}
	time.Sleep(12 * time.Second)
	routes := routeVia(t, dir)
	for _, p := range injected {
		if via, ok := routes[p]; ok {
			t.Errorf("%s: the keyless attacker's %s reached the back-end via %s", suite, p, via)
		}
	}
	t.Logf("%s, keyless attacker on h2 for 12 s: the back-end's routes %v; h2's OSPF neighbours:\n%s", suite, routes, h2("show", "ospf", "neighbors"))
	// Keyed: the same speaker, now a neighbour.
	write("h2-bird.conf", birdConf(true))
	if out := h2("configure"); !strings.Contains(out, "Reconfigured") {
		t.Fatalf("h2's BIRD with the keys: %s", out)
	}
	for deadline := time.Now().Add(40 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		routes := routeVia(t, dir)
		missing := []string{}
		for _, p := range injected {
			if _, ok := routes[p]; !ok {
				missing = append(missing, p)
			}
		}
		if len(missing) == 0 {
			t.Logf("%s, with the keys: the back-end's routes %v", suite, routes)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: with the keys, %v never reached the back-end: %v\nh2's protocols:\n%s\nOSPF neighbours:\n%s", suite, missing, routes,
				h2("show", "protocols"), h2("show", "ospf", "neighbors"))
		}
	}
}
