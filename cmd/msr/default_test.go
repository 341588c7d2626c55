package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
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
	demo.Down()
	plan, err := demo.Up(msrBin, 300)
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
	// bgp1 withdraws the prefix its first host is in: within a second h1's
	// pings to it are answered by the router with ICMP net unreachable.
	withdrawn := plan.Prefixes[0]
	exec("bgp1", "vtysh", "--vty_socket", filepath.Join(demo.RunDir, "bgp1"), "-d", "bgpd", "-c", "configure terminal",
		"-c", "router bgp 65020", "-c", "address-family ipv4 unicast", "-c", "no network "+withdrawn.String())
	start := time.Now()
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
	took := time.Since(start)
	t.Logf("withdrawn %s: ICMP net unreachable from the router %v later", withdrawn, took)
	if took > time.Second+200*time.Millisecond { // a second, and the ping that saw it
		t.Errorf("net unreachable took %v, want about 1 s at most", took)
	}
}
