package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The router lab: two external hosts on two ports of one LB, the LB's
// internal port on a switch with two back-ends. Every element runs as its
// own `msr` process; the clients are ping, traceroute and bash's /dev/udp.
//
//	h1 192.0.2.10 --- e0 (VLAN 10, 192.0.2.1)  lb  e1 (VLAN 11, 198.51.100.1) --- h2 198.51.100.20
//	   2001:db8:10::10       2001:db8:10::1     |      2001:db8:11::1               2001:db8:11::20
//	                                           i0 --- sw --- r1, r2
//
// It is dual stack: every check is made over IPv4 and over IPv6.
// The hosts compute their checksums themselves (tx_checksum: off): a veth
// leaves TCP/UDP checksums to "hardware", and a frame an XDP program
// forwards carries the unfinished one to the next host.
func routerLab(dir string) string {
	return `name: t-rt
hosts:
  h1:
    interfaces:
      eth0: {addresses: [192.0.2.10/24, "2001:db8:10::10/64"], xdp_pass: on, tx_checksum: off}
    routes: [{to: default, via: 192.0.2.1}, {to: default, via: "2001:db8:10::1"}]
  h2:
    interfaces:
      eth0: {addresses: [198.51.100.20/24, "2001:db8:11::20/64"], xdp_pass: on, tx_checksum: off}
    routes: [{to: default, via: 198.51.100.1}, {to: default, via: "2001:db8:11::1"}]
  lb:
    interfaces:
      e0: {mac: "02:00:00:00:e0:00"}
      e1: {mac: "02:00:00:00:e1:00"}
      i0: {mac: "02:00:00:00:10:00", vlan_offload: off}
    processes:
      - {name: lb, command: [` + msrBin + `, lb, --config, ` + dir + `/lb.yaml]}
  r1:
    interfaces:
      eth0: {mac: "02:00:00:00:b0:01", vlan_offload: off}
    processes:
      - {name: router, command: [` + msrBin + `, router, --config, ` + dir + `/r1.yaml]}
  r2:
    interfaces:
      eth0: {mac: "02:00:00:00:b0:02", vlan_offload: off}
    processes:
      - {name: router, command: [` + msrBin + `, router, --config, ` + dir + `/r2.yaml]}
switches:
  sw:
    interfaces:
      # XDP programs send into these ports (the LB by redirect, the
      # back-ends by XDP_TX): they need one too (docs/lb.md). Tags must
      # stay in the frames crossing the bridge (docs/lab.md).
      p0: {xdp_pass: on, vlan_offload: off}
      p1: {xdp_pass: on, vlan_offload: off}
      p2: {xdp_pass: on, vlan_offload: off}
links:
  - ends: [h1:eth0, lb:e0]
  - ends: [h2:eth0, lb:e1]
  - ends: [lb:i0, sw:p0]
  - ends: [r1:eth0, sw:p1]
  - ends: [r2:eth0, sw:p2]
`
}

func routerConfig(name, dir string) string {
	return `name: ` + name + `
key_file: ` + dir + `/key
interface: eth0
pin_dir: /sys/fs/bpf/msr-test-` + name + `
socket: /run/msr/t-rt-` + name + `.sock
capacity_mbps: 1000
ports:
  net1: {vlan: 10, address: 192.0.2.1/24, address6: "2001:db8:10::1/64"}
  net2: {vlan: 11, address: 198.51.100.1/24, address6: "2001:db8:11::1/64", mtu: 1280}
acl:
  - {action: deny, proto: udp, dst: 198.51.100.20/32, dport: "9999"}
  - {action: deny, proto: udp, dst: "2001:db8:11::20/128", dport: "9999"}
`
}

func TestRouterThroughLB(t *testing.T) {
	dir, _ := testDir(t, "5a")
	os.WriteFile(filepath.Join(dir, "lb.yaml"), []byte(`name: t-rt-lb
key_file: `+dir+`/key
pin_dir: /sys/fs/bpf/msr-test-rt-lb
mode: hash
ports:
  e0: {role: external, address: 192.0.2.1/24, address6: "2001:db8:10::1/64", vlan: 10}
  e1: {role: external, address: 198.51.100.1/24, address6: "2001:db8:11::1/64", vlan: 11}
  i0: {role: internal, default: true}
backends:
  - {mac: "02:00:00:00:b0:01"}
  - {mac: "02:00:00:00:b0:02"}
`), 0o644)
	for _, r := range []string{"r1", "r2"} {
		os.WriteFile(filepath.Join(dir, r+".yaml"), []byte(routerConfig(r, dir)), 0o644)
	}
	labFile := filepath.Join(dir, "lab.yaml")
	os.WriteFile(labFile, []byte(routerLab(dir)), 0o644)
	if _, errOut, code := msr(t, "lab", "up", labFile); code != 0 {
		t.Fatalf("lab up: %s", errOut)
	}
	t.Cleanup(func() {
		msr(t, "lab", "down", "t-rt")
		for _, p := range []string{"msr-test-rt-lb", "msr-test-r1", "msr-test-r2"} {
			os.RemoveAll("/sys/fs/bpf/" + p)
		}
	})
	exec := func(host string, args ...string) (string, int) { return rtExec(t, host, args...) }
	logs := func() string { return labLogs("t-rt", "lb.lb", "r1.router", "r2.router") }

	// Wait for the LB to balance to both back-ends.
	deadline := time.Now().Add(15 * time.Second)
	for {
		out, _, code := msr(t, "lb", "status", "--name", "t-rt-lb", "-o", "json")
		var st struct {
			Table struct{ Shares map[string]int }
		}
		if code == 0 && json.Unmarshal([]byte(out), &st) == nil && len(st.Table.Shares) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("LB never balanced to both back-ends:\n%s\n%s", out, logs())
		}
		time.Sleep(200 * time.Millisecond)
	}

	// ping across the router: the reply comes back with TTL 64-1.
	out, code := exec("h1", "ping", "-c", "3", "-i", "0.2", "-w", "10", "198.51.100.20")
	if code != 0 || !strings.Contains(out, "ttl=63") {
		t.Fatalf("ping h1 -> h2 (exit %d):\n%s\n%s", code, out, logs())
	}
	// The router answers for its own address.
	if out, code := exec("h1", "ping", "-c", "1", "-w", "5", "192.0.2.1"); code != 0 || !strings.Contains(out, "ttl=64") {
		t.Errorf("ping the router (exit %d):\n%s", code, out)
	}
	// traceroute: one hop, the router's address on h1's side, then h2.
	out, code = exec("h1", "traceroute", "-n", "-q", "1", "-w", "2", "-m", "5", "198.51.100.20")
	hops := regexp.MustCompile(`(?m)^\s*(\d+)\s+(\S+)`).FindAllStringSubmatch(out, -1)
	if code != 0 || len(hops) != 2 || hops[0][2] != "192.0.2.1" || hops[1][2] != "198.51.100.20" {
		t.Errorf("traceroute (exit %d): want hops 192.0.2.1 then 198.51.100.20:\n%s", code, out)
	}
	// No route: Destination Net Unreachable from the router.
	out, _ = exec("h1", "ping", "-c", "1", "-w", "3", "203.0.113.5")
	if !strings.Contains(out, "From 192.0.2.1") || !strings.Contains(out, "Unreachable") {
		t.Errorf("ping without a route:\n%s", out)
	}

	// Towards h2 the router's port has MTU 1280: a larger packet without DF
	// is fragmented by the slow path and h2 answers it; with DF the sender
	// hears Fragmentation Needed with the MTU.
	if out, code := exec("h1", "ping", "-c", "1", "-w", "5", "-M", "dont", "-s", "1400", "198.51.100.20"); code != 0 || !strings.Contains(out, "1408 bytes from 198.51.100.20") {
		t.Errorf("ping with 1400 bytes across a 1280-byte MTU (exit %d):\n%s", code, out)
	}
	if out, _ := exec("h1", "ping", "-c", "1", "-w", "3", "-M", "do", "-s", "1400", "198.51.100.20"); !strings.Contains(out, "mtu = 1280") {
		t.Errorf("DF set across a 1280-byte MTU: no Fragmentation Needed with mtu = 1280:\n%s", out)
	}

	checkRouterIPv6(t, logs)
	checkRouterACLAndRoutes(t)
}

// checkRouterIPv6: the LB answers h1's and h2's solicitations for the
// router's addresses; a back-end solicits h2 through the LB, holding the
// first packet; ping6 across with the hop limit less one, traceroute6
// across and to the router's far address, no route, Packet Too Big,
// Hop-by-Hop Options. (ICMPv6 to the router goes to the VCP, which this
// lab has not: TestDefaultLab pings the router's IPv6 addresses.)
func checkRouterIPv6(t *testing.T, logs func() string) {
	exec := func(host string, args ...string) (string, int) { return rtExec(t, host, args...) }
	out, code := exec("h1", "ping", "-6", "-c", "3", "-i", "0.2", "-w", "10", "2001:db8:11::20")
	if code != 0 || !strings.Contains(out, "ttl=63") {
		t.Fatalf("ping -6 h1 -> h2 (exit %d):\n%s\n%s", code, out, logs())
	}
	out, code = exec("h1", "traceroute", "-6", "-n", "-q", "1", "-w", "2", "-m", "5", "2001:db8:11::1")
	hops := regexp.MustCompile(`(?m)^\s*(\d+)\s+(\S+)`).FindAllStringSubmatch(out, -1)
	if code != 0 || len(hops) != 1 || hops[0][2] != "2001:db8:11::1" {
		t.Errorf("traceroute -6 to the router's far address (exit %d): want one hop, 2001:db8:11::1:\n%s", code, out)
	}
	out, code = exec("h1", "traceroute", "-6", "-n", "-q", "1", "-w", "2", "-m", "5", "2001:db8:11::20")
	hops = regexp.MustCompile(`(?m)^\s*(\d+)\s+(\S+)`).FindAllStringSubmatch(out, -1)
	if code != 0 || len(hops) != 2 || hops[0][2] != "2001:db8:10::1" || hops[1][2] != "2001:db8:11::20" {
		t.Errorf("traceroute -6 (exit %d): want hops 2001:db8:10::1 then 2001:db8:11::20:\n%s", code, out)
	}
	out, _ = exec("h1", "ping", "-6", "-c", "1", "-w", "3", "2001:db8:99::5")
	if !strings.Contains(out, "From 2001:db8:10::1") || !strings.Contains(out, "unreachable") {
		t.Errorf("ping -6 without a route:\n%s", out)
	}
	if out, _ := exec("h1", "ping", "-6", "-c", "1", "-w", "3", "-M", "do", "-s", "1400", "2001:db8:11::20"); !strings.Contains(out, "mtu=1280") {
		t.Errorf("ping -6 with 1400 bytes across a 1280-byte MTU: no Packet Too Big with mtu=1280:\n%s", out)
	}
	// Hop-by-Hop Options go to the slow path, which forwards them (h2
	// answers UDP to a closed port with Port Unreachable) or, with no
	// route, answers Destination Unreachable (no route) from the router.
	for _, c := range []struct{ dst, want string }{
		{"2001:db8:11::20", "type 1 code 4 from 2001:db8:11::20"},
		{"2001:db8:99::5", "type 1 code 0 from 2001:db8:10::1"},
	} {
		if out, _ := exec("h1", "python3", "-c", udpProbe, c.dst, "9", "hop-by-hop"); !strings.Contains(out, c.want) {
			t.Errorf("UDP with Hop-by-Hop Options to %s: want ICMPv6 %s, got:\n%s", c.dst, c.want, out)
		}
	}
	// Having heard it, h1 fragments itself, and h2 answers.
	if out, code := exec("h1", "ping", "-6", "-c", "1", "-w", "5", "-s", "1400", "2001:db8:11::20"); code != 0 || !strings.Contains(out, "1408 bytes from 2001:db8:11::20") {
		t.Errorf("ping -6 with 1400 bytes after Packet Too Big (exit %d):\n%s", code, out)
	}

}

// checkRouterACLAndRoutes: the ACL's denials answered and counted, and
// routes added and deleted through the local command.
func checkRouterACLAndRoutes(t *testing.T) {
	exec := func(host string, args ...string) (string, int) { return rtExec(t, host, args...) }
	// The ACL drops UDP to h2:9999 over either family, counted on whichever
	// back-end got it, and the sender hears Destination Unreachable,
	// administratively prohibited, from the router.
	for i := 0; i < 4; i++ {
		exec("h1", "bash", "-c", "echo probe > /dev/udp/198.51.100.20/9999")
	}
	for _, c := range []struct{ dst, want string }{
		{"198.51.100.20", "type 3 code 13 from 192.0.2.1"},
		{"2001:db8:11::20", "type 1 code 1 from 2001:db8:10::1"},
	} {
		if out, _ := exec("h1", "python3", "-c", udpProbe, c.dst, "9999"); !strings.Contains(out, c.want) {
			t.Errorf("UDP to %s port 9999, denied by the ACL: want ICMP %s, got:\n%s", c.dst, c.want, out)
		}
	}
	denied := uint64(0)
	for _, r := range []string{"r1", "r2"} {
		out, _, _ := msr(t, "router", "status", "--socket", "/run/msr/t-rt-"+r+".sock", "-o", "json")
		var st struct {
			Stats struct {
				ACLDeny []uint64 `json:"acl_deny"`
			}
		}
		json.Unmarshal([]byte(out), &st)
		for _, n := range st.Stats.ACLDeny {
			denied += n
		}
	}
	if denied != 6 {
		t.Errorf("ACL deny counted %d, want 6", denied)
	}

	// route add/del through the local command, on both back-ends.
	for _, r := range []string{"r1", "r2"} {
		sock := "/run/msr/t-rt-" + r + ".sock"
		if _, errOut, code := msr(t, "router", "route", "add", "203.0.113.0/24", "via", "198.51.100.20", "--socket", sock); code != 0 {
			t.Fatalf("route add on %s: %s", r, errOut)
		}
		out, _, _ := msr(t, "router", "route", "list", "--socket", sock, "-o", "json")
		if !strings.Contains(out, `"203.0.113.0/24"`) || !strings.Contains(out, `"198.51.100.20"`) {
			t.Errorf("route list on %s: %s", r, out)
		}
	}
	out, _ := exec("h1", "ping", "-c", "1", "-w", "2", "203.0.113.5")
	if strings.Contains(out, "Unreachable") {
		t.Errorf("route added, still unreachable:\n%s", out)
	}
	for _, r := range []string{"r1", "r2"} {
		if _, errOut, code := msr(t, "router", "route", "del", "203.0.113.0/24", "--socket", "/run/msr/t-rt-"+r+".sock"); code != 0 {
			t.Errorf("route del on %s: %s", r, errOut)
		}
	}
	if _, errOut, code := msr(t, "router", "route", "add", "10.0.0.0/8", "via", "172.16.0.1", "--socket", "/run/msr/t-rt-r1.sock"); code == 0 || !strings.Contains(errOut, "no port") {
		t.Errorf("route via an off-subnet gateway: exit %d, %q", code, errOut)
	}
}

// udpProbe sends one UDP datagram to argv[1] port argv[2] (IPv6 with a
// Hop-by-Hop Options header, a PadN option, if argv[3] is given) and
// prints the ICMP or ICMPv6 error that comes back: "type T code C from
// ADDR", or "no answer".
const udpProbe = `
import socket, struct, sys
dst, port, v6 = sys.argv[1], int(sys.argv[2]), ":" in sys.argv[1]
s = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IPV6 if v6 else socket.IPPROTO_IP, 25 if v6 else 11, 1)  # IPV6_RECVERR, IP_RECVERR
s.connect((dst, port))
hbh = [(socket.IPPROTO_IPV6, socket.IPV6_HOPOPTS, bytes([0, 0, 1, 4, 0, 0, 0, 0]))] if len(sys.argv) > 3 else []
s.sendmsg([b"probe"], hbh)
s.settimeout(3)
try:
    s.recv(100)
except socket.timeout:
    print("no answer"); sys.exit()
except OSError:
    pass
_, anc, _, _ = s.recvmsg(100, 512, socket.MSG_ERRQUEUE)
for level, typ, data in anc:
    errno, origin, t, c, _, info, _ = struct.unpack("=IBBBBII", data[:16])
    frm = socket.inet_ntop(socket.AF_INET6, data[24:40]) if v6 else socket.inet_ntop(socket.AF_INET, data[20:24])
    print("type %d code %d from %s (errno %d, info %d)" % (t, c, frm, errno, info))
`

// rtExec runs args on t-rt's host: its output and errors, and exit code.
func rtExec(t *testing.T, host string, args ...string) (string, int) {
	out, errOut, code := msr(t, append([]string{"lab", "exec", "--lab", "t-rt", host, "--"}, args...)...)
	return out + errOut, code
}
