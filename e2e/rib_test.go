package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/msr-router/msr/internal/msrtest"
)

// ribLab is the control-plane lab: a peer outside (h1) on the LB's
// external port, the LB, the VCP and one back-end on a switch. DIR and MSR
// stand for the test's directory and the msr binary.
var ribLab = msrtest.Testdata("t-rib.yaml")

// TestRIBFromPeerToBackend runs the control plane end to end, every
// element an msr process: FRR BGP peers outside announce prefixes to the
// router's address; the LB hands the sessions to the VCP; the VCP's BIRD,
// on its mirror of the port, learns the prefixes and reflects them by iBGP
// to the back-end, whose agent puts them in its FIB, with the VCP's own
// static route; a prefix both peers announce arrives with both next hops
// (ECMP). A withdrawal follows the same way. The port is dual stack and
// asks for router advertisements, which a host's solicitation gets.
func TestRIBFromPeerToBackend(t *testing.T) {
	dir := upRIBLab(t)
	logs := func() string { return ribLabLogs(dir) }
	routes := func() string { return routeList(t, dir) }
	deadline := time.Now().Add(40 * time.Second)
	for !strings.Contains(routes(), `"203.0.113.0/24"`) || !strings.Contains(routes(), `"100.64.0.0/10"`) || !strings.Contains(routes(), `"198.51.100.0/24"`) {
		if time.Now().After(deadline) {
			vcp, _, _ := msr(t, "vcp", "status", "--name", "t-rib-vcp", "-o", "json")
			t.Fatalf("the peer's routes never reached the back-end's FIB:\n%s\nVCP: %s\n%s", routes(), vcp, logs())
		}
		time.Sleep(300 * time.Millisecond)
	}
	if r := routes(); !strings.Contains(r, `"192.0.2.10"`) || !strings.Contains(r, `"192.0.2.20"`) {
		t.Errorf("routes not via the peer and the static gateway: %s", r)
	}
	// The port asks for router advertisements (BIRD's radv): h2 solicits,
	// and takes the router as its default router.
	checkRouterAdvertised(t, "t-rib", "h2")
	// ECMP survives the trip: both peers announce 100.64.0.0/10.
	ecmp := func() string { return routeVia(t, dir)["100.64.0.0/10"] }
	for deadline := time.Now().Add(20 * time.Second); ecmp() != "192.0.2.10,192.0.2.11"; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("100.64.0.0/10 via %v on the back-end, want both peers:\n%s", ecmp(), logs())
		}
	}
	// The VCP knows what the back-end installed: its hellos carry its FIB's
	// route count (the port's subnets, IPv4 and IPv6, and the three
	// learned).
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, _, _ := msr(t, "vcp", "status", "--name", "t-rib-vcp", "-o", "json")
		var st struct {
			Elements []struct {
				Name      string `json:"name"`
				Installed uint32 `json:"installed"`
			} `json:"elements"`
		}
		json.Unmarshal([]byte(out), &st)
		installed := uint32(0)
		for _, e := range st.Elements {
			if e.Name == "t-rib-r1" {
				installed = e.Installed
			}
		}
		if installed == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the VCP sees %d routes installed on the back-end, want 5:\n%s", installed, out)
		}
	}

	// Traffic to a learned prefix is forwarded: h2 sends to 203.0.113.1 (an
	// address of h1, the peer that announced it) by the router; the LB
	// balances it to the back-end, whose FIB sends it via 192.0.2.10 out
	// of the port again.
	if out, errOut, code := msr(t, "lab", "exec", "--lab", "t-rib", "h1", "--", "ip", "addr", "add", "203.0.113.1/32", "dev", "lo"); code != 0 {
		t.Fatalf("%s %s", out, errOut)
	}
	// The first ping may find 192.0.2.10 unresolved: the agent holds it
	// and sends it itself once ARP answers (not the data path's count),
	// so the three counted follow a first one.
	msr(t, "lab", "exec", "--lab", "t-rib", "h2", "--", "ping", "-c", "1", "-W", "2", "203.0.113.1")
	before := forwarded(t, dir)
	out, errOut, code := msr(t, "lab", "exec", "--lab", "t-rib", "h2", "--", "ping", "-c", "3", "-i", "0.2", "-W", "2", "203.0.113.1")
	if code != 0 {
		t.Fatalf("ping to the learned prefix: %s %s\n%s", out, errOut, logs())
	}
	if n := forwarded(t, dir) - before; n < 3 {
		t.Errorf("the back-end forwarded %d packets for the 3 pings, want at least 3:\n%s", n, out)
	}

	checkConsole(t, dir, routes)
	// The peer withdraws one prefix: within a second it is gone from the
	// back-end's FIB. (A peer that just goes away is different: BIRD keeps
	// its routes as stale for the graceful-restart time, RFC 4724.)
	out, errOut, code = msr(t, "lab", "exec", "--lab", "t-rib", "h1", "--", "vtysh", "--vty_socket", dir, "-d", "bgpd",
		"-c", "configure terminal", "-c", "router bgp 65010", "-c", "address-family ipv4 unicast", "-c", "no network 203.0.113.0/24")
	if code != 0 {
		t.Fatalf("vtysh: %s %s", out, errOut)
	}
	start := time.Now()
	for strings.Contains(routes(), `"203.0.113.0/24"`) {
		if time.Since(start) > 5*time.Second {
			bird, _ := exec.Command("birdc", "-s", filepath.Join(dir, "vcp", "bird.ctl"), "show", "protocols").CombinedOutput()
			birdRoutes, _ := exec.Command("birdc", "-s", filepath.Join(dir, "vcp", "bird.ctl"), "show", "route").CombinedOutput()
			t.Fatalf("withdrawn routes still on the back-end after %v:\n%s\nBIRD:\n%s\n%s\n%s", time.Since(start), routes(), bird, birdRoutes, logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(start)
	t.Logf("the withdrawal reached the back-end's FIB %v after the peer's withdrawal", took)
	if took > time.Second {
		t.Errorf("withdrawal took %v, want under 1 s", took)
	}
	if !strings.Contains(routes(), `"100.64.0.0/10"`) {
		t.Errorf("the other prefix went too: %s", routes())
	}
	checkPrefixLimit(t, "t-rib", dir, logs)
	checkSessionKeys(t, "t-rib", dir, func() string {
		out, _ := exec.Command("birdc", "-s", filepath.Join(dir, "vcp", "bird.ctl"), "show", "protocols", "peer0").CombinedOutput()
		return string(out)
	})
}

// upRIBLab brings the t-rib lab up: h1 and h2 BGP peers (FRR), one LB,
// one back-end, the VCP with BIRD and its API on the network.
func upRIBLab(t *testing.T) string {
	dir, write := testDir(t, "6b")
	write("bgpd.conf", withPassword(peerBGPConf("65010", "192.0.2.10", "203.0.113.0/24", "100.64.0.0/10"), "h1-md5-secret"))
	write("h2-bgpd.conf", peerBGPConf("65020", "192.0.2.11", "100.64.0.0/10"))
	write("h1.pw", "h1-md5-secret\n")
	os.MkdirAll(filepath.Join(dir, "h2"), 0o755)
	writeDataPathConfigs(dir, "t-rib", false, true)
	dualStack(t, dir)
	write("vcp.yaml", `name: t-rib-vcp
key_file: `+dir+`/key
interface: eth0
api_listen: 10.0.0.1:8179
api_insecure: true   # plain http: the console's tests
lbs:
  t-rib-lb: {api: 10.0.0.5:8180}
backends:
  t-rib-r1: {api: 10.0.0.11:8180}
external_ports:
  - {lb: t-rib-lb, mac: "02:00:00:00:e0:00", address: 192.0.2.1/24, address6: "2001:db8:10::1/64", vlan: 10, router_advertisements: true}
routing:
  asn: 65000
  run_dir: `+dir+`/vcp
  bgp:
    - {neighbor: 192.0.2.10, asn: 65010, password_file: `+dir+`/h1.pw, import_prefixes: [203.0.113.0/24+, 100.64.0.0/10+, "2001:db8::/32+"]}
    - {neighbor: 192.0.2.11, asn: 65020, max_prefixes: 1, import_prefixes: [203.0.113.0/24+, 100.64.0.0/10+, "2001:db8::/32+"]}
  static:
    - {to: 198.51.100.0/24, via: 192.0.2.20}
  backends: {listen: 10.0.0.1, range: 10.0.0.0/24}
`)
	upControlLab(t, dir, "t-rib", ribLab)
	return dir
}

// ribLabLogs are t-rib's elements' and peers' logs, and BIRD's.
func ribLabLogs(dir string) string {
	bird, _ := os.ReadFile(filepath.Join(dir, "vcp", "bird.log"))
	return labLogs("t-rib", "lb.lb", "vcp.vcp", "r1.router", "h1.bgpd", "h2.bgpd") + "--- bird\n" + string(bird)
}
