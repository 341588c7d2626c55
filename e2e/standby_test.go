package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/internal/msrtest"
)

// standbyLab is the control-plane lab with two VCPs: vcp1 and vcp2 (the
// standby) on the switch, with their own addresses and the VCP's virtual
// address 10.0.0.1 between them (VRRP).
var standbyLab = msrtest.Testdata("t-sb.yaml")

// TestStandbyTakeover kills the active VCP: the standby, elected by VRRP,
// takes over within a second (the LB sends control traffic to it), the
// back-end's FIB is not touched throughout, the BGP session with the peer
// outside comes back on the new VCP, the RIB flows from it, and the old
// active, restarted, stays standby.
func TestStandbyTakeover(t *testing.T) {
	dir := upStandbyLab(t)
	var restarted *exec.Cmd
	t.Cleanup(func() {
		if restarted != nil && restarted.Process != nil {
			restarted.Process.Signal(syscall.SIGTERM)
			restarted.Wait()
		}
	})
	logs := func() string { return standbyLogs(dir) }
	type r1Status struct {
		Routes     int    `json:"routes"`
		FIBChanges uint64 `json:"fib_changes"`
	}
	r1 := func() (r1Status, string) {
		out, _, _ := msr(t, "router", "status", "--socket", filepath.Join(dir, "r1.sock"), "-o", "json")
		var s r1Status
		json.Unmarshal([]byte(out), &s)
		list := routeList(t, dir)
		return s, list
	}
	lbVCP := func() string { return lbVCPMAC(t, "t-sb-lb") }
	vcpStatus := func(name string) (string, string) { return vcpRoleProtocols(t, name) }

	// Converged: vcp1 active (the higher priority), vcp2 standby, the LB
	// sending control traffic to vcp1, the peer's routes on the back-end.
	deadline := time.Now().Add(40 * time.Second)
	for {
		_, list := r1()
		role1, _ := vcpStatus("t-sb-vcp1")
		role2, _ := vcpStatus("t-sb-vcp2")
		if role1 == "active" && role2 == "standby" && lbVCP() == "02:00:00:00:cc:01" && strings.Contains(list, `"203.0.113.0/24"`) &&
			strings.Contains(list, `"100.64.0.0/10"`) && strings.Contains(list, `"198.51.100.0/24"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never converged: vcp1 %s, vcp2 %s, LB's VCP %s, back-end routes %s\n%s", role1, role2, lbVCP(), list, logs())
		}
		time.Sleep(300 * time.Millisecond)
	}
	before, routesBefore := r1()

	killed := crashVCPHost(t, dir)
	// The standby takes over: the LB follows its announcement.
	for lbVCP() != "02:00:00:00:cc:02" {
		if time.Since(killed) > 5*time.Second {
			t.Fatalf("the LB still sends control traffic to %s\n%s", lbVCP(), logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	takeover := time.Since(killed)
	t.Logf("takeover: the LB sends control traffic to vcp2 %v after vcp1 was killed", takeover)
	if takeover > time.Second {
		t.Errorf("takeover took %v, want at most 1 s", takeover)
	}

	// Until the new VCP has the peer's session back and has fed the
	// back-end again, the back-end's FIB must not change at all.
	var peerBack, feedBack time.Duration
	for peerBack == 0 || feedBack == 0 {
		now, list := r1()
		if now.FIBChanges != before.FIBChanges || list != routesBefore {
			t.Fatalf("the back-end's FIB changed during the takeover (%d -> %d changes):\n%s\nwas\n%s\n%s",
				before.FIBChanges, now.FIBChanges, list, routesBefore, logs())
		}
		_, protocols := vcpStatus("t-sb-vcp2")
		if peerBack == 0 && established(protocols, "peer0") {
			peerBack = time.Since(killed)
		}
		if feedBack == 0 && established(protocols, "dynbgp") {
			feedBack = time.Since(killed)
		}
		if time.Since(killed) > 60*time.Second {
			t.Fatalf("after 60 s: the peer's session back %v, the back-end's %v:\n%s\n%s", peerBack, feedBack, protocols, logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("BGP with the peer re-established %v after the kill, the back-end's RIB feed %v", peerBack, feedBack)
	// A few seconds more: the new VCP resends the same routes; nothing
	// changes.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if now, list := r1(); now.FIBChanges != before.FIBChanges || list != routesBefore {
			t.Fatalf("the back-end's FIB changed after the resync:\n%s\nwas\n%s\n%s", list, routesBefore, logs())
		}
	}

	// The routes now come from vcp2: a withdrawal at the peer reaches the
	// back-end.
	out, errOut, code := msr(t, "lab", "exec", "--lab", "t-sb", "h1", "--", "vtysh", "--vty_socket", dir, "-d", "bgpd",
		"-c", "configure terminal", "-c", "router bgp 65010", "-c", "address-family ipv4 unicast", "-c", "no network 203.0.113.0/24")
	if code != 0 {
		t.Fatalf("vtysh: %s %s", out, errOut)
	}
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		if _, list := r1(); !strings.Contains(list, `"203.0.113.0/24"`) {
			break
		}
		if time.Since(start) > 3*time.Second {
			t.Fatalf("the withdrawal through vcp2 never reached the back-end\n%s", logs())
		}
	}

	// The old active comes back: it stays standby, vcp2 stays active.
	restarted = exec.Command(msrBin, "lab", "exec", "--lab", "t-sb", "vcp1", "--", msrBin, "vcp", "--config", filepath.Join(dir, "vcp1.yaml"))
	if err := restarted.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		role1, _ := vcpStatus("t-sb-vcp1")
		role2, _ := vcpStatus("t-sb-vcp2")
		if role2 != "active" || (role1 != "" && role1 != "standby") || lbVCP() != "02:00:00:00:cc:02" {
			t.Fatalf("with vcp1 back: vcp1 %q, vcp2 %q, the LB's VCP %s\n%s", role1, role2, lbVCP(), logs())
		}
	}
	if role1, _ := vcpStatus("t-sb-vcp1"); role1 != "standby" {
		t.Errorf("the returning vcp1 is %q, want standby", role1)
	}
}

// upStandbyLab brings t-sb up: two VCPs with keepalived, vcp1 preferred,
// one LB, one back-end, a BGP peer.
func upStandbyLab(t *testing.T) string {
	dir, write := testDir(t, "6d")
	write("bgpd.conf", demo.PeerBGP{Hostname: "bgp1", ASN: 65010, RouterID: "192.0.2.10", Router: "192.0.2.1", RouterASN: 65000, GracefulRestart: true,
		Prefixes: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("100.64.0.0/10")}}.Config())
	writeDataPathConfigs(dir, "t-sb", false, false)
	for _, name := range []string{"vcp1", "vcp2"} {
		write(name+".yaml", `name: t-sb-`+name+`
key_file: `+dir+`/key
interface: eth0
standby: {address: 10.0.0.1/24, vrid: 61, peers: [10.0.0.2, 10.0.0.3]}
external_ports:
  - {lb: t-sb-lb, mac: "02:00:00:00:e0:00", address: 192.0.2.1/24, vlan: 10}
routing:
  asn: 65000
  run_dir: `+dir+`/`+name+`
  bgp:
    - {neighbor: 192.0.2.10, asn: 65010, hold_time: 6, import_prefixes: [203.0.113.0/24+, 100.64.0.0/10+, "2001:db8::/32+"]}
  static:
    - {to: 198.51.100.0/24, via: 192.0.2.20}
  backends: {listen: 10.0.0.1, range: 10.0.0.0/24}
`)
	}
	upControlLab(t, dir, "t-sb", standbyLab)
	return dir
}

// crashVCPHost kills t-sb's vcp1 as a crash of its host would: msr vcp
// and both keepalived processes at once, so that no VRRP "priority 0"
// resignation goes out; the standby must notice the silence (~3
// adverts). It returns when.
func crashVCPHost(t *testing.T, dir string) time.Time {
	pids := []int{labPID(t, "t-sb", "vcp1")}
	for _, f := range []string{"keepalived.pid", "vrrp.pid"} {
		b, _ := os.ReadFile(filepath.Join(dir, "vcp1", f))
		var p int
		if _, err := fmt.Sscan(string(b), &p); err != nil {
			t.Fatalf("%s: %q", f, b)
		}
		pids = append(pids, p)
	}
	killed := time.Now()
	for _, p := range pids {
		syscall.Kill(p, syscall.SIGSTOP) // all silent at the same instant
	}
	for _, p := range pids {
		syscall.Kill(p, syscall.SIGKILL)
	}

	return killed
}

// standbyLogs are t-sb's elements' logs, both VCPs' BIRD's and
// keepalived's, and the suite's processes.
func standbyLogs(dir string) string {
	var b strings.Builder
	b.WriteString(labLogs("t-sb", "lb.lb", "vcp1.vcp", "vcp2.vcp", "r1.router", "h1.bgpd"))
	for _, f := range []string{"vcp1/bird.log", "vcp2/bird.log", "vcp1/keepalived.log", "vcp2/keepalived.log"} {
		l, _ := os.ReadFile(filepath.Join(dir, f))
		b.WriteString("--- " + f + "\n" + string(l))
	}
	ps, _ := exec.Command("sh", "-c", "ps -eo pid,ppid,stat,args | grep -E 'bird|keepalived|msr vcp' | grep -v grep").CombinedOutput()
	return b.String() + "--- processes\n" + string(ps)
}

// lbVCPMAC is the MAC the LB sends control traffic to: its VCP's.
func lbVCPMAC(t *testing.T, lb string) string {
	out, _, _ := msr(t, "lb", "status", "--name", lb, "-o", "json")
	var s struct {
		VCPMAC string `json:"vcp_mac"`
	}
	json.Unmarshal([]byte(out), &s)
	return s.VCPMAC
}

// vcpRoleProtocols is the VCP's role and its suite's protocols, as its
// status says them.
func vcpRoleProtocols(t *testing.T, name string) (role, protocols string) {
	out, _, _ := msr(t, "vcp", "status", "--name", name, "-o", "json")
	var s struct {
		Role  string
		Suite *struct{ Protocols string }
	}
	json.Unmarshal([]byte(out), &s)
	if s.Suite != nil {
		protocols = s.Suite.Protocols
	}
	return s.Role, protocols
}

// established says whether the suite's protocol name is an established
// BGP session in its protocols' table.
func established(protocols, name string) bool {
	for _, l := range strings.Split(protocols, "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], name) && strings.Contains(l, "Established") {
			return true
		}
	}
	return false
}
