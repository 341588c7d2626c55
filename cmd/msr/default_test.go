package main

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/msr-router/msr/demo"
)

// TestDefaultLab brings up the default lab (labs/default.yaml, every
// element an msr process, real BGP and OSPF neighbours) and checks it with
// real clients in the external hosts: ping across the router with the TTL
// one less, traceroute showing one hop (the router's address), bgp1's and
// ospf1's routes reachable, a withdrawal answered with ICMP net
// unreachable within a second, and the console answering from the
// management network.
func TestDefaultLab(t *testing.T) {
	plan := upDefaultLab(t, 300)
	exec := func(host string, argv ...string) string {
		t.Helper()
		out, err := demo.Exec(host, argv...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// ping across the router (h1 on lb1, h3 on lb2): the reply comes back
	// with TTL 64 - 1: the whole cluster is one hop.
	if out := exec("h1", "ping", "-c", "3", "-i", "0.2", demo.H3); !strings.Contains(out, "3 received") || !strings.Contains(out, "ttl=63") {
		t.Errorf("ping h1 -> h3:\n%s", out)
	}
	// traceroute: exactly one hop before the destination, an address of
	// the router.
	out := exec("h1", "traceroute", "-n", "-q", "1", "-w", "1", demo.H3)
	hops := strings.Split(strings.TrimSpace(out), "\n")[1:]
	if len(hops) != 2 || strings.Fields(hops[0])[1] != demo.RouterAddr1 || strings.Fields(hops[1])[1] != demo.H3 {
		t.Errorf("traceroute h1 -> h3:\n%s", out)
	}
	// bgp1's and ospf1's routes are reachable.
	for _, dst := range []string{plan.Hosts[0].String(), demo.OSPFHost, demo.H2} {
		if out := exec("h1", "ping", "-c", "2", "-i", "0.2", "-W", "2", dst); !strings.Contains(out, "2 received") {
			t.Errorf("ping h1 -> %s:\n%s", dst, out)
		}
	}
	// The console, from a host on the management network.
	cout, _, code := msr(t, "lab", "exec", "--lab", "default", "r1", "--", msrBin, "ctl", "--api", demo.VCPAPI, "elements", "-o", "json")
	var elements []struct {
		Name  string
		Alive bool
	}
	json.Unmarshal([]byte(cout), &elements)
	alive := 0
	for _, e := range elements {
		if e.Alive {
			alive++
		}
	}
	if code != 0 || alive != 5 {
		t.Errorf("msr ctl elements: %d alive of %s", alive, cout)
	}
	// curl downloads 200 MB from nginx on h3's network, across both LBs
	// and the back-ends, intact.
	www := t.TempDir()
	os.Chmod(www, 0o755)
	os.Chmod(filepath.Dir(www), 0o755) // nginx's workers run as www-data
	blob := make([]byte, 200<<20)
	crand.Read(blob)
	os.WriteFile(filepath.Join(www, "blob"), blob, 0o644)
	os.WriteFile(filepath.Join(www, "nginx.conf"), []byte(`daemon on;
pid `+www+`/nginx.pid;
error_log `+www+`/error.log;
events {}
http {
	access_log off;
	server { listen `+demo.H3+`:80; root `+www+`; }
}
`), 0o644)
	exec("h3", "nginx", "-c", filepath.Join(www, "nginx.conf"))
	defer demo.Exec("h3", "nginx", "-c", filepath.Join(www, "nginx.conf"), "-s", "stop")
	got := filepath.Join(www, "got")
	start := time.Now()
	exec("h1", "curl", "-sS", "--fail", "-o", got, "http://"+demo.H3+"/blob")
	took := time.Since(start)
	gotData, _ := os.ReadFile(got)
	if sha256.Sum256(gotData) != sha256.Sum256(blob) {
		t.Errorf("curl: %d bytes, sha256 differs from the %d served", len(gotData), len(blob))
	}
	t.Logf("curl h1 <- nginx on h3: 200 MB in %v (%.0f Mbit/s), sha256 equal", took.Round(time.Millisecond), 200*8*1.048576/took.Seconds())
	os.Remove(got)

	// Spread in proportion to capacity: iperf3 with 16 streams, the LBs in
	// WRR (per packet; by reload), back-end shares from their counters
	// within 10% of 2:2:1.
	vcpFile := filepath.Join(demo.RunDir, "vcp1.yaml")
	cfg, _ := os.ReadFile(vcpFile)
	os.WriteFile(vcpFile, []byte(strings.Replace(string(cfg), "mode: hash", "mode: wrr", 1)), 0o644)
	if out, errOut, code := msr(t, "ctl", "--name", "vcp1", "reload"); code != 0 || !strings.Contains(out, "mode hash -> wrr") {
		t.Fatalf("reload to wrr: %s %s", out, errOut)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		s1, e1 := demo.LBStatus("lb1")
		s2, e2 := demo.LBStatus("lb2")
		if e1 == nil && e2 == nil && s1.Table.Mode == "wrr" && s2.Table.Mode == "wrr" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the LBs never took the wrr table")
		}
	}
	iperf3Server(t)
	first := demo.Look()
	if _, _, err := iperf3(t, 5*time.Second, 16); err != nil {
		t.Fatal(err)
	}
	last := demo.Look()
	var total float64
	for _, r := range demo.Backends {
		total += float64(last.RxPkts[r] - first.RxPkts[r])
	}
	for r, want := range map[string]float64{"r1": 0.4, "r2": 0.4, "r3": 0.2} {
		got := float64(last.RxPkts[r]-first.RxPkts[r]) / total
		t.Logf("%s: %.1f%% of %0.f packets (capacity share %.0f%%)", r, got*100, total, want*100)
		if got < want*0.9 || got > want*1.1 {
			t.Errorf("%s carried %.1f%%, want %.0f%% ±10%%", r, got*100, want*100)
		}
	}

	// bgp1 withdraws the prefix its first host is in: within a second h1's
	// pings to it are answered by the router with ICMP net unreachable.
	withdrawn := plan.Prefixes[0]
	exec("bgp1", "vtysh", "--vty_socket", filepath.Join(demo.RunDir, "bgp1"), "-d", "bgpd", "-c", "configure terminal",
		"-c", "router bgp 65020", "-c", "address-family ipv4 unicast", "-c", "no network "+withdrawn.String())
	start = time.Now()
	unreachable := regexp.MustCompile(`From ` + regexp.QuoteMeta(demo.RouterAddr1) + `.*Destination Net Unreachable`)
	for {
		out, _ := demo.Exec("h1", "ping", "-c", "1", "-W", "1", plan.Hosts[0].String())
		if unreachable.MatchString(out) {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("no net unreachable for withdrawn %s after 5 s:\n%s", withdrawn, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	took = time.Since(start)
	t.Logf("withdrawn %s: ICMP net unreachable from the router %v later", withdrawn, took)
	if took > time.Second+200*time.Millisecond { // a second, and the ping that saw it
		t.Errorf("net unreachable took %v, want about 1 s at most", took)
	}
}

// upDefaultLab brings the default lab up with bgp1 announcing prefixes,
// waits for it to converge, and takes it down when the test ends.
func upDefaultLab(t *testing.T, prefixes int) *demo.Plan {
	t.Helper()
	demo.Down()
	plan, err := demo.Up(msrBin, prefixes)
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

// iperf3 runs iperf3 from h1 to h3 for d with n streams (the server must
// be started), returning the bits per second of each interval.
func iperf3(t *testing.T, d time.Duration, n int) (intervals []float64, retransmits int, err error) {
	t.Helper()
	out, err := demo.Exec("h1", "iperf3", "-c", demo.H3, "-t", fmt.Sprint(int(d.Seconds())), "-P", fmt.Sprint(n), "-J")
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

// labPID is the pid of a process of the default lab.
func labPID(t *testing.T, host string) int {
	t.Helper()
	st, _, _ := msr(t, "lab", "status", "default", "-o", "json")
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
	t.Fatalf("no process on %s", host)
	return 0
}

// TestDefaultLabFailures: the default lab under real failures while TCP
// runs through it. The active VCP is killed: the transfer completes,
// forwarding never stops, vcp2 takes over. A back-end dies (its link goes):
// the transfer completes and the LBs drop it within three hello intervals.
// An LB agent restarts under traffic: nothing is lost.
func TestDefaultLabFailures(t *testing.T) {
	upDefaultLab(t, 300)

	// The active VCP dies mid-transfer.
	iperf3Server(t)
	done := make(chan error, 1)
	var intervals []float64
	go func() {
		var err error
		intervals, _, err = iperf3(t, 6*time.Second, 4)
		done <- err
	}()
	time.Sleep(2 * time.Second)
	syscall.Kill(labPID(t, "vcp1"), syscall.SIGKILL)
	if err := <-done; err != nil {
		t.Fatalf("the transfer across a VCP failure: %v", err)
	}
	for i, bps := range intervals {
		if bps < 1e6 {
			t.Errorf("second %d of the transfer: %.0f bit/s: forwarding stopped (%v)", i, bps, intervals)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); demo.Look().VCP != "vcp2"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("vcp2 did not take over")
		}
	}

	// A back-end dies mid-transfer: its link goes down.
	iperf3Server(t)
	go func() {
		var err error
		intervals, _, err = iperf3(t, 6*time.Second, 8)
		done <- err
	}()
	time.Sleep(2 * time.Second)
	if _, err := demo.Exec("r2", "ip", "link", "set", "eth0", "down"); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	gone := time.Duration(0)
	for gone == 0 && time.Since(killed) < 3*time.Second {
		st, err := demo.LBStatus("lb1")
		if err == nil && st.Table.Shares["02:00:00:00:b0:02"] == 0 { // r2's MAC
			gone = time.Since(killed)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatalf("the transfer across a back-end failure: %v", err)
	}
	t.Logf("r2 left lb1's table %v after its link went down; transfer completed: %v", gone, intervals)
	// Three hello intervals after r2's last hello (at most one interval
	// before its link went), the LB's 25 ms expiry check, and this loop's
	// 20 ms polling of the LB's API.
	if gone == 0 || gone > 450*time.Millisecond {
		t.Errorf("r2 left lb1's table after %v, want within 3 hello intervals of its last hello", gone)
	}

	// An LB agent restarts under traffic (h1 pings h3 every 10 ms): no loss.
	ping := make(chan string, 1)
	go func() {
		out, _ := demo.Exec("h1", "ping", "-c", "300", "-i", "0.01", demo.H3)
		ping <- out
	}()
	time.Sleep(500 * time.Millisecond)
	syscall.Kill(labPID(t, "lb1"), syscall.SIGTERM)
	time.Sleep(200 * time.Millisecond)
	restarted := exec.Command(msrBin, "lab", "exec", "--lab", "default", "lb1", "--", msrBin, "lb", "--config", filepath.Join(demo.RunDir, "lb1.yaml"))
	if err := restarted.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { restarted.Process.Signal(syscall.SIGTERM); restarted.Wait() }()
	if out := <-ping; !strings.Contains(out, "300 received") {
		t.Errorf("pings across an LB agent restart:\n%s", out[max(0, len(out)-300):])
	}
}
