package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/router/routerapi"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// TestBackendJoinsAndLeaves: the default lab's back-ends hold only their
// identity in their files, and r4, added to the running lab as a new
// machine with only its identity, is discovered by the VCP, given the
// router's ports, RIB feed and ACL, and joins every LB's table once its
// FIB holds the table: within 10 s, while UDP streams from h1 to an
// address behind bgp1's prefixes (a route only the RIB feed gives) lose
// nothing. New flows then reach it. Drained, then stopped (agent ended,
// link down), it leaves with nothing lost either. msr ctl acl shows the
// router's rule with its hits summed over the back-ends.
func TestBackendJoinsAndLeaves(t *testing.T) {
	plan := upDefaultLab(t, 300)
	far := plan.Hosts[0].String() // behind one of bgp1's prefixes: a route from the RIB feed
	const r4MAC = "02:00:00:00:b0:04"
	r1, err := routerapi.Local("r1", "").Status()
	if err != nil {
		t.Fatal(err)
	}
	if len(r1.Ports) != 3 || !r1.Ready || len(r1.ACL) != 1 {
		t.Fatalf("r1, configured by the VCP: ports %v, ACL %v, ready %v", r1.Ports, r1.ACL, r1.Ready)
	}
	inTables := func() bool {
		for _, lb := range demo.LBs {
			s, err := demo.LBStatus(lb)
			if err != nil || s.Table.Shares[r4MAC] == 0 {
				return false
			}
		}
		return true
	}

	// r4 joins under traffic.
	udp := udpStreams(t, far, 20*time.Second)
	time.Sleep(2 * time.Second)
	added := time.Now()
	if err := demo.AddBackend(msrBin, "r4", 10000); err != nil {
		t.Fatal(err)
	}
	var joined time.Duration
	for ; joined == 0; time.Sleep(50 * time.Millisecond) {
		if inTables() {
			joined = time.Since(added)
		}
		if time.Since(added) > 15*time.Second {
			st, _ := routerapi.Local("r4", "").Status()
			t.Fatalf("r4 not in both LBs' tables 15 s after it started: %+v", st)
		}
	}
	r4, err := routerapi.Local("r4", "").Status()
	if err != nil {
		t.Fatal(err)
	}
	r1, _ = routerapi.Local("r1", "").Status()
	t.Logf("r4 in every LB's table %v after it started: %d routes (r1 %d), ports %v, ACL %v", joined.Round(time.Millisecond), r4.Routes, r1.Routes, r4.Ports, r4.ACL)
	if joined > 10*time.Second {
		t.Errorf("r4 joined after %v, want within 10 s", joined)
	}
	if !slices.Equal(r4.Ports, r1.Ports) || !slices.Equal(r4.ACL, r1.ACL) || r4.Routes < r1.Routes || r4.RIB == nil || r4.RIB.State != "established" {
		t.Errorf("r4 serves ports %v, ACL %v, %d routes, RIB %+v; r1 ports %v, ACL %v, %d routes", r4.Ports, r4.ACL, r4.Routes, r4.RIB, r1.Ports, r1.ACL, r1.Routes)
	}
	lost, sent := udp()
	r4, _ = routerapi.Local("r4", "").Status()
	t.Logf("h1 -> h3 UDP across r4's joining: %d of %d datagrams lost; r4 forwarded %d packets", lost, sent, r4.Stats.Forwarded)
	if lost != 0 || sent == 0 || r4.Stats.Forwarded == 0 {
		t.Errorf("h1 -> h3 UDP across r4's joining: %d of %d datagrams lost, r4 forwarded %d", lost, sent, r4.Stats.Forwarded)
	}

	// New flows reach r4: its share of what the back-ends forward.
	before := forwardedBy(t)
	iperf3Server(t)
	if _, _, err := iperf3(t, "h1", 4*time.Second, 8); err != nil {
		t.Fatal(err)
	}
	after := forwardedBy(t)
	var total uint64
	for r, n := range after {
		total += n - before[r]
	}
	share := float64(after["r4"]-before["r4"]) / float64(max(total, 1))
	t.Logf("8 TCP streams h1 -> h3: r4 forwarded %.0f%% of %d packets (its weight: 10000 of 35000 Mbit/s, 29%%)", share*100, total)
	if share < 0.1 {
		t.Errorf("r4 forwarded %.1f%% of the new flows' packets, want its share", share*100)
	}

	checkACLHits(t)
	// r4 leaves: drained, out of the tables, then stopped.
	udp = udpStreams(t, far, 12*time.Second)
	time.Sleep(2 * time.Second)
	if out, errOut, code := msr(t, "lab", "exec", "--lab", "default", "r1", "--", msrBin, "ctl", "--api", demo.VCPAPI, "--ca", demo.APIFile("ca.crt"), "--token-file", demo.APIFile("admin.token"), "drain", "r4"); code != 0 {
		t.Fatalf("drain r4: %s %s", out, errOut)
	}
	drained := time.Now()
	for inAny := true; inAny; time.Sleep(50 * time.Millisecond) {
		inAny = false
		for _, lb := range demo.LBs {
			if s, err := demo.LBStatus(lb); err != nil || s.Table.Shares[r4MAC] != 0 {
				inAny = true
			}
		}
		if time.Since(drained) > 5*time.Second {
			t.Fatal("r4 still in a table 5 s after it was drained")
		}
	}
	t.Logf("r4 out of every LB's table %v after the drain", time.Since(drained).Round(time.Millisecond))
	time.Sleep(time.Second)
	syscall.Kill(labPID(t, "default", "r4"), syscall.SIGTERM)
	if _, err := demo.Exec("r4", "ip", "link", "set", "eth0", "down"); err != nil {
		t.Fatal(err)
	}
	lost, sent = udp()
	t.Logf("h1 -> h3 UDP across r4's leaving: %d of %d datagrams lost", lost, sent)
	if lost != 0 || sent == 0 {
		t.Errorf("h1 -> h3 UDP across r4's leaving: %d of %d datagrams lost", lost, sent)
	}
}

// checkACLHits: telnet to h1's network is denied on every back-end, r4
// among them, and the console sums the hits.
func checkACLHits(t *testing.T) {
	for range 5 {
		demo.Exec("h3", "timeout", "0.3", "bash", "-c", "echo > /dev/tcp/"+demo.H1+"/23")
	}
	out, errOut, code := msr(t, "lab", "exec", "--lab", "default", "r1", "--", msrBin, "ctl", "--api", demo.VCPAPI, "--ca", demo.APIFile("ca.crt"), "--token-file", demo.APIFile("read.token"), "acl", "-o", "json")
	var acl vcpapi.ACLView
	if code != 0 || json.Unmarshal([]byte(out), &acl) != nil {
		t.Fatalf("msr ctl acl: %s %s", out, errOut)
	}
	applied := 0
	for _, b := range acl.Backends {
		if b.Applied {
			applied++
		}
	}
	text, _, _ := msr(t, "lab", "exec", "--lab", "default", "r1", "--", msrBin, "ctl", "--api", demo.VCPAPI, "--ca", demo.APIFile("ca.crt"), "--token-file", demo.APIFile("read.token"), "acl")
	t.Logf("msr ctl acl:\n%s", text)
	if len(acl.Rules) != 1 || acl.Rules[0].Rule != "deny tcp any -> 192.0.2.0/24 dport 23" || acl.Rules[0].Hits < 5 || applied != 4 {
		t.Errorf("msr ctl acl: %+v", acl)
	}

}

// forwardedBy reads what each back-end forwarded, r4 included.
func forwardedBy(t *testing.T) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, r := range append(slices.Clone(demo.Backends), "r4") {
		st, err := routerapi.Local(r, "").Status()
		if err != nil || st.Stats == nil {
			t.Fatalf("%s: %v", r, err)
		}
		out[r] = st.Stats.Forwarded
	}
	return out
}

// udpStreams starts 8 UDP streams of iperf3 from h1 to dst, an address of
// bgp1, for d, 2 Mbit/s each in 1000-byte datagrams; the function it
// returns waits for them and says how many datagrams were lost of how
// many sent.
func udpStreams(t *testing.T, dst string, d time.Duration) func() (lost, sent int) {
	t.Helper()
	demo.Exec("bgp1", "pkill", "-x", "iperf3")
	if _, err := demo.Exec("bgp1", "iperf3", "-s", "-D", "-1", "-B", dst); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	done := make(chan [2]int, 1)
	go func() {
		out, err := demo.Exec("h1", "iperf3", "-c", dst, "-u", "-b", "2M", "-l", "1000", "-P", "8", "-t", fmt.Sprint(int(d.Seconds())), "-J")
		var r struct {
			Error string
			End   struct {
				Sum struct {
					LostPackets int `json:"lost_packets"`
					Packets     int `json:"packets"`
				} `json:"sum"`
			} `json:"end"`
		}
		if jerr := json.Unmarshal([]byte(out), &r); jerr != nil || r.Error != "" {
			t.Errorf("iperf3 UDP: %v %v %s", err, jerr, strings.TrimSpace(r.Error))
		}
		done <- [2]int{r.End.Sum.LostPackets, r.End.Sum.Packets}
	}()
	return func() (int, int) {
		r := <-done
		return r[0], r[1]
	}
}
