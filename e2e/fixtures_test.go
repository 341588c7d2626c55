package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/dist/disttest"
	"github.com/msr-router/msr/lb/lbapi"
	"github.com/msr-router/msr/router/routerapi"
)

// The fixtures the whole-router tests share: the default lab, the
// control-plane labs' element configs, an external BGP peer's config, and
// readers of a back-end's routes and counters.

// testDir is a test's directory, which the routing suites' users can
// read, holding the router's DIST key (32 bytes of keyByte, hex), and a
// function that writes a file into it.
func testDir(t *testing.T, keyByte string) (string, func(name, text string)) {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(dir), 0o755) // FRR's daemons run as user frr: they must reach their directory
	disttest.Keys(t, dir, strings.Repeat(keyByte, 32))
	return dir, func(name, text string) { os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644) }
}

// upDefaultLab brings the default lab up with bgp1 announcing prefixes,
// waits for it to converge, and takes it down when the test ends.
func upDefaultLab(t *testing.T, prefixes int) *demo.Plan {
	t.Helper()
	return upDefaultLabWith(t, demo.Options{Prefixes: prefixes})
}

// upDefaultLabWith is upDefaultLab with the demo's options.
func upDefaultLabWith(t *testing.T, o demo.Options) *demo.Plan {
	t.Helper()
	demo.Down()
	plan, err := demo.UpWith(msrBin, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { demo.Down() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := demo.Wait(ctx, plan, io.Discard); err != nil {
		logs, _ := os.ReadFile("/run/msr/labs/default/logs/vcp1.vcp.log")
		t.Fatalf("%v\n%s", err, logs)
	}
	return plan
}

// iperf3Server starts a one-off iperf3 server on h3.
func iperf3Server(t *testing.T) {
	t.Helper()
	demo.Exec("h3", "pkill", "-x", "iperf3")
	if _, err := demo.Exec("h3", "iperf3", "-s", "-D", "-1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
}

// iperf3 runs iperf3 from a host to h3 for d with n streams (the server must
// be started), with the client's extra arguments, returning the bits per
// second of each interval.
func iperf3(t *testing.T, from string, d time.Duration, n int, extra ...string) (intervals []float64, retransmits int, err error) {
	t.Helper()
	argv := append([]string{"iperf3", "-c", demo.H3, "-t", fmt.Sprint(int(d.Seconds())), "-P", fmt.Sprint(n), "-J"}, extra...)
	out, err := demo.Exec(from, argv...)
	var r struct {
		Error     string
		Intervals []struct {
			Sum struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum"`
		} `json:"intervals"`
		End struct {
			SumSent struct {
				Retransmits int `json:"retransmits"`
			} `json:"sum_sent"`
		} `json:"end"`
	}
	if jerr := json.Unmarshal([]byte(out), &r); jerr != nil && err == nil {
		err = jerr
	}
	if r.Error != "" {
		err = fmt.Errorf("iperf3: %s", r.Error)
	}
	for _, i := range r.Intervals {
		intervals = append(intervals, i.Sum.BitsPerSecond)
	}
	return intervals, r.End.SumSent.Retransmits, err
}

// labPID is the pid of the (first) process of a host of a lab.
func labPID(t *testing.T, lab, host string) int {
	t.Helper()
	st, _, _ := msr(t, "lab", "status", lab, "-o", "json")
	var s struct {
		Processes []struct {
			Host string
			PID  int
		}
	}
	json.Unmarshal([]byte(st), &s)
	for _, p := range s.Processes {
		if p.Host == host {
			return p.PID
		}
	}
	t.Fatalf("no process on %s in lab %s:\n%s", host, lab, st)
	return 0
}

// upControlLab brings up a control-plane lab named name ("t-X": its LB and
// back-end pin their maps under msr-test-X-lb and -r1) from text with DIR
// and MSR filled in, and takes it and their pins away when the test ends.
// peerBGPConf is the bgpd.conf of an external FRR peer on 192.0.2.0/24:
// AS asn, router ID id, a session to the router (192.0.2.1, AS 65000),
// announcing prefixes.
func peerBGPConf(asn, id string, prefixes ...string) string {
	n, _ := strconv.ParseUint(asn, 10, 32)
	p := demo.PeerBGP{ASN: uint32(n), RouterID: id, Router: "192.0.2.1", RouterASN: 65000}
	for _, s := range prefixes {
		p.Prefixes = append(p.Prefixes, netip.MustParsePrefix(s))
	}
	return p.Config()
}

// withPassword is a peer's bgpd.conf (peerBGPConf) with a TCP-MD5
// password on its session with the router.
func withPassword(conf, password string) string {
	return strings.Replace(conf, " neighbor 192.0.2.1 remote-as 65000\n", " neighbor 192.0.2.1 remote-as 65000\n neighbor 192.0.2.1 password "+password+"\n", 1)
}

// writeDataPathConfigs writes the LB's and the back-end's configs of the
// control-plane lab named lab: the peers' network 192.0.2.0/24 on the
// LB's e0 (VLAN 10), with ospf also 198.51.100.0/24 on e1 (VLAN 11); api
// puts the LB's API (on its management port m0, 10.0.0.5) and r1's on the
// management network.
func writeDataPathConfigs(dir, lab string, ospf, api bool) {
	lb := `name: ` + lab + `-lb
key_file: ` + dir + `/key
pin_dir: /sys/fs/bpf/msr-test-` + strings.TrimPrefix(lab, "t-") + `-lb
ports:
  e0: {role: external, address: 192.0.2.1/24, vlan: 10}
`
	r1 := `name: ` + lab + `-r1
key_file: ` + dir + `/key
interface: eth0
pin_dir: /sys/fs/bpf/msr-test-` + strings.TrimPrefix(lab, "t-") + `-r1
socket: ` + dir + `/r1.sock
rib: {neighbor: 10.0.0.1, asn: 65000}
ports:
  net1: {vlan: 10, address: 192.0.2.1/24}
`
	if ospf {
		lb += "  e1: {role: external, address: 198.51.100.1/24, vlan: 11}\n"
		r1 += "  net2: {vlan: 11, address: 198.51.100.1/24}\n"
	}
	lb += "  i0: {role: internal, default: true}\n"
	if api {
		// On the management network in plain http: the lab's clients are
		// the console's tests, which refuse to send a token in clear.
		lb += "api_listen: 10.0.0.5:8180\napi_insecure: true\n" // on its management port m0
		r1 += "api_listen: 10.0.0.11:8180\napi_insecure: true\n"
	}
	os.WriteFile(filepath.Join(dir, "lb.yaml"), []byte(lb), 0o644)
	os.WriteFile(filepath.Join(dir, "r1.yaml"), []byte(r1), 0o644)
}

// dualStack gives the port of the LB's and the back-end's configs that
// writeDataPathConfigs wrote (e0, VLAN 10) the IPv6 subnet
// 2001:db8:10::/64, the router ::1 on it.
func dualStack(t *testing.T, dir string) {
	t.Helper()
	for file, from := range map[string]string{"lb.yaml": "e0: {role: external, address: 192.0.2.1/24", "r1.yaml": "net1: {vlan: 10, address: 192.0.2.1/24"} {
		b, _ := os.ReadFile(filepath.Join(dir, file))
		if !strings.Contains(string(b), from) {
			t.Fatalf("%s has no %q:\n%s", file, from, b)
		}
		text := strings.Replace(string(b), from, from+`, address6: "2001:db8:10::1/64"`, 1)
		os.WriteFile(filepath.Join(dir, file), []byte(text), 0o644)
	}
}

// upControlLab brings up a control-plane lab named name ("t-X": its LB and
// back-end pin their maps under msr-test-X-lb and -r1) from text with DIR
// and MSR filled in, and takes it and their pins away when the test ends.
func upControlLab(t *testing.T, dir, name, text string) {
	t.Helper()
	os.WriteFile(filepath.Join(dir, "lab.yaml"), []byte(strings.ReplaceAll(strings.ReplaceAll(text, "DIR", dir), "MSR", msrBin)), 0o644)
	if _, errOut, code := msr(t, "lab", "up", filepath.Join(dir, "lab.yaml")); code != 0 {
		t.Fatalf("lab up: %s", errOut)
	}
	short := strings.TrimPrefix(name, "t-")
	t.Cleanup(func() {
		msr(t, "lab", "down", name)
		os.RemoveAll("/sys/fs/bpf/msr-test-" + short + "-lb")
		os.RemoveAll("/sys/fs/bpf/msr-test-" + short + "-r1")
		os.Remove(routerapi.StatePath(name + "-r1"))
	})
}

// routeList is the back-end r1's routes, as `msr router route list -o
// json` prints them (its socket is DIR/r1.sock).
func routeList(t *testing.T, dir string) string {
	t.Helper()
	out, _, _ := msr(t, "router", "route", "list", "--socket", filepath.Join(dir, "r1.sock"), "-o", "json")
	return out
}

// routeVia is r1's routes: prefix -> its gateways, sorted (a set) and
// comma-joined.
func routeVia(t *testing.T, dir string) map[string]string {
	t.Helper()
	var rs []struct {
		Prefix string
		Via    []string
	}
	json.Unmarshal([]byte(routeList(t, dir)), &rs)
	m := map[string]string{}
	for _, r := range rs {
		sort.Strings(r.Via)
		m[r.Prefix] = strings.Join(r.Via, ",")
	}
	return m
}

// forwarded is the back-end's count of forwarded packets.
func forwarded(t *testing.T, dir string) uint64 {
	t.Helper()
	out, _, _ := msr(t, "router", "status", "--socket", filepath.Join(dir, "r1.sock"), "-o", "json")
	var s struct {
		Stats struct {
			Forwarded uint64 `json:"forwarded"`
		} `json:"stats"`
	}
	json.Unmarshal([]byte(out), &s)
	return s.Stats.Forwarded
}

func portDelta(before, after *lbapi.Status, port string) (rx, drops uint64) {
	sum := func(s *lbapi.Status) (uint64, uint64) {
		for _, p := range s.Ports {
			if p.Name == port && p.Stats != nil {
				var d uint64
				for _, v := range p.Stats.Drops {
					d += v
				}
				return p.Stats.RxPackets, d
			}
		}
		return 0, 0
	}
	r0, d0 := sum(before)
	r1, d1 := sum(after)
	return r1 - r0, d1 - d0
}

func lastLine(out, has string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, has) {
			return l
		}
	}
	return strings.TrimSpace(out[max(0, len(out)-200):])
}

// checkPrefixLimit: h2 (AS 65020, max_prefixes 1 in the VCP's config,
// announcing 100.64.0.0/10) announces two more prefixes. The suite shuts
// its session (BIRD at the second prefix; FRR 8.4 checks the count before
// it adds a prefix, so at the third): the VCP logs it and counts it for
// 192.0.2.11, the extra prefixes are not on the back-end, and
// 100.64.0.0/10 is left via h1 alone.
func checkPrefixLimit(t *testing.T, lab, dir string, logs func() string) {
	t.Helper()
	if out, errOut, code := msr(t, "lab", "exec", "--lab", lab, "h2", "--", "vtysh", "--vty_socket", filepath.Join(dir, "h2"), "-d", "bgpd",
		"-c", "configure terminal", "-c", "router bgp 65020", "-c", "address-family ipv4 unicast", "-c", "network 100.66.0.0/16", "-c", "network 100.67.0.0/16"); code != 0 {
		t.Fatalf("vtysh on h2: %s %s", out, errOut)
	}
	start := time.Now()
	for {
		out, _, _ := msr(t, "vcp", "status", "--name", lab+"-vcp", "-o", "json")
		var st struct {
			Hits map[string]uint64 `json:"prefix_limit_hits"`
		}
		json.Unmarshal([]byte(out), &st)
		if st.Hits["192.0.2.11"] == 1 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("h2 sent 2 prefixes with max_prefixes 1: the VCP counted %v\n%s", st.Hits, logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("h2's session shut for its prefix limit, seen by the VCP %v after the extra prefixes were announced", time.Since(start))
	for start := time.Now(); routeVia(t, dir)["100.64.0.0/10"] != "192.0.2.10"; time.Sleep(100 * time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("100.64.0.0/10 still via %q on the back-end after h2's session was shut", routeVia(t, dir)["100.64.0.0/10"])
		}
	}
	for _, p := range []string{"100.66.0.0/16", "100.67.0.0/16"} {
		if via, ok := routeVia(t, dir)[p]; ok {
			t.Errorf("%s, over the limit, is on the back-end via %s", p, via)
		}
	}
	if l, _ := os.ReadFile("/run/msr/labs/" + lab + "/logs/vcp.vcp.log"); !strings.Contains(string(l), "BGP peer sent more prefixes than max_prefixes: session shut") ||
		!strings.Contains(string(l), "peer=192.0.2.11") {
		t.Errorf("the VCP's log does not say h2's session was shut for its limit:\n%s", l)
	}
}

// checkSessionKeys: the sessions a stranger must not open. h1's session
// (TCP-MD5, its password from the VCP's config) is up (the routes above
// came through it); with another password at h1 it goes down and stays
// down. And the RIB feed's listener takes no connection without the
// deployment key's TCP-MD5 key: a plain connect from the back-end's own
// host, inside the feed's range, gets no answer. peer0 prints the suite's
// view of h1's session.
func checkSessionKeys(t *testing.T, lab, dir string, peer0 func() string) {
	t.Helper()
	if out, _, code := msr(t, "lab", "exec", "--lab", lab, "r1", "--", "timeout", "2", "bash", "-c", "exec 3<>/dev/tcp/10.0.0.1/179"); code == 0 {
		t.Errorf("a connection without the RIB feed's key reached the suite's BGP port: %s", out)
	}
	if !strings.Contains(peer0(), "Established") {
		t.Fatalf("h1's session (TCP-MD5) is not up:\n%s", peer0())
	}
	if out, errOut, code := msr(t, "lab", "exec", "--lab", lab, "h1", "--", "vtysh", "--vty_socket", dir, "-d", "bgpd",
		"-c", "configure terminal", "-c", "router bgp 65010", "-c", "neighbor 192.0.2.1 password not-the-routers"); code != 0 {
		t.Fatalf("vtysh on h1: %s %s", out, errOut)
	}
	start := time.Now()
	for strings.Contains(peer0(), "Established") {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("h1's session stayed up with a wrong password:\n%s", peer0())
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // h1 retries every second or so
	if out := peer0(); strings.Contains(out, "Established") {
		t.Errorf("h1 opened a session with a wrong password:\n%s", out)
	}
}

// solicitRouter sends router solicitations from host's eth0 in lab
// (rdisc6: up to three, a second apart) and returns the first router
// advertisement that answers, as rdisc6 prints it; ok is false when none
// came.
func solicitRouter(t *testing.T, lab, host string) (ra string, ok bool) {
	t.Helper()
	out, _, code := msr(t, "lab", "exec", "--lab", lab, host, "--", "rdisc6", "-1", "-r", "3", "-w", "1000", "eth0")
	return out, code == 0 && strings.Contains(out, "from fe80::")
}

// checkRouterAdvertised checks that a router solicitation from host gets
// the router's advertisement: from the port's link-local address (the
// EUI-64 of 02:00:00:00:e0:00), with the port's prefix for SLAAC, and its
// link-layer address, where it gives one (FRR does, BIRD does not), the
// port's MAC; and that the host's kernel took the router as its default
// router.
func checkRouterAdvertised(t *testing.T, lab, host string) {
	t.Helper()
	var ra string
	var ok bool
	for start := time.Now(); !ok; {
		if ra, ok = solicitRouter(t, lab, host); !ok && time.Since(start) > 20*time.Second {
			t.Fatalf("no router advertisement answered %s's solicitations: %s", host, ra)
		}
	}
	wants := []string{"from fe80::ff:fe00:e000", "2001:db8:10::/64"}
	if strings.Contains(ra, "link-layer address") {
		wants = append(wants, "link-layer address: 02:00:00:00:E0:00")
	}
	for _, want := range wants {
		if !strings.Contains(strings.ToUpper(ra), strings.ToUpper(want)) {
			t.Errorf("the router advertisement %s got lacks %q:\n%s", host, want, ra)
		}
	}
	for start := time.Now(); ; time.Sleep(200 * time.Millisecond) {
		out, _, _ := msr(t, "lab", "exec", "--lab", lab, host, "--", "ip", "-6", "route", "show", "default")
		if strings.Contains(out, "via fe80::ff:fe00:e000") && strings.Contains(out, "proto ra") {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("%s's default route after the router's advertisement: %q", host, out)
		}
	}
}

// startHostBIRD starts BIRD in a control lab's host with DIR/HOST-bird.conf
// (its socket DIR/HOST-bird.ctl), and stops it when the test ends.
func startHostBIRD(t *testing.T, dir, lab, host string) {
	t.Helper()
	pid := filepath.Join(dir, host+"-bird.pid")
	if out, errOut, code := msr(t, "lab", "exec", "--lab", lab, host, "--", "bird", "-c", filepath.Join(dir, host+"-bird.conf"),
		"-s", filepath.Join(dir, host+"-bird.ctl"), "-P", pid); code != 0 {
		t.Fatalf("%s's BIRD: %s %s", host, out, errOut)
	}
	t.Cleanup(func() {
		if b, err := os.ReadFile(pid); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(pid, syscall.SIGTERM)
			}
		}
	})
}

// labLogs are the logs of a lab's processes (host.kind, as "r1.router"),
// each under a "--- host.kind" line, for a failure's message.
func labLogs(lab string, procs ...string) string {
	var b strings.Builder
	for _, f := range procs {
		l, _ := os.ReadFile("/run/msr/labs/" + lab + "/logs/" + f + ".log")
		b.WriteString("--- " + f + "\n" + string(l))
	}
	return b.String()
}

// startTrapReceiver runs snmptrapd on a lab's host (run: a command in
// it), logging what it receives to a file it returns; it is stopped when
// the test ends.
func startTrapReceiver(t *testing.T, run func(argv ...string) (string, error)) string {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	log, pid := filepath.Join(dir, "traps.log"), filepath.Join(dir, "snmptrapd.pid")
	os.WriteFile(filepath.Join(dir, "snmptrapd.conf"), []byte("[snmp] mibs :\ndisableAuthorization yes\n"), 0o644)
	if _, err := run("snmptrapd", "-C", "-c", filepath.Join(dir, "snmptrapd.conf"), "-On", "-Lf", log, "-p", pid, "udp:162"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if b, err := os.ReadFile(pid); err == nil {
			if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(n, syscall.SIGTERM)
			}
		}
	})
	return log
}
