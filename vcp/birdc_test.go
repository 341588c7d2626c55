package vcp

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/vcp/vcpapi"
)

func birdcOutput(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/birdc/" + name + ".txt")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The parsers read what BIRD 2.0.12 answered (vcp/testdata/birdc).
func TestParseProtocols(t *testing.T) {
	ps := parseProtocols(birdcOutput(t, "protocols-all"))
	var names []string
	for _, p := range ps {
		names = append(names, p.Name)
	}
	if want := []string{"device1", "direct1", "static1", "s2", "peer0", "backends"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("protocols %v, want %v", names, want)
	}
	if p := ps[2]; p.Proto != "Static" || p.State != "up" || p.Imported != 3 || p.Exported != 0 {
		t.Errorf("static1: %+v", p)
	}
	if p := ps[4]; p.Proto != "BGP" || p.State != "start" || p.Info != "Active" || p.Neighbor.String() != "192.0.2.10" {
		t.Errorf("peer0: %+v", p)
	}
}

// A session BIRD shut for its import limit (max_prefixes), as BIRD 2.0.12
// shows it; one under its limit, one without.
func TestParseProtocolsLimit(t *testing.T) {
	ps := parseProtocols(birdcOutput(t, "protocols-limit"))
	if len(ps) != 3 {
		t.Fatalf("protocols %+v", ps)
	}
	for i, want := range []bool{false, true, false} {
		if ps[i].LimitHit != want {
			t.Errorf("%s (%s): limit hit %v, want %v", ps[i].Name, ps[i].Info, ps[i].LimitHit, want)
		}
	}
	if p := ps[1]; p.State != "down" || p.Neighbor.String() != "192.0.2.11" || p.Info != "Automatic shutdown: Route limit exceeded" {
		t.Errorf("peer1: %+v", p)
	}
	if p := ps[2]; p.Imported != 3 || p.State != "up" {
		t.Errorf("peer2: %+v", p)
	}
}

func TestParseRoutes(t *testing.T) {
	for _, c := range []struct {
		file string
		want []vcpapi.SuiteRoute
	}{
		{"route-two", []vcpapi.SuiteRoute{
			{Prefix: "10.1.0.0/16", Protocol: "static1", Best: true, Via: []string{"192.0.2.10"}},
			{Prefix: "10.1.0.0/16", Protocol: "s2", Via: []string{"192.0.2.12"}}}},
		{"route-ecmp", []vcpapi.SuiteRoute{{Prefix: "10.2.0.0/16", Protocol: "static1", Best: true, Via: []string{"192.0.2.10", "192.0.2.11"}}}},
		{"route-direct", []vcpapi.SuiteRoute{{Prefix: "192.0.2.0/24", Protocol: "direct1", Best: true, Dev: "d0"}}},
		{"route-none", nil},
	} {
		if got := parseRoutes(birdcOutput(t, c.file)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.file, got, c.want)
		}
	}
	routes, networks, err := parseRouteCount(birdcOutput(t, "route-count"))
	if err != nil || routes != 5 || networks != 4 {
		t.Errorf("route count %d %d %v, want 5 4", routes, networks, err)
	}
	// Dual stack, as BIRD 2.0.12 writes it with both tables.
	routes, networks, err = parseRouteCount("BIRD 2.0.12 ready.\n3002 of 3002 routes for 3001 networks in table master4\n" +
		"203 of 203 routes for 203 networks in table master6\nTotal: 3205 of 3205 routes for 3204 networks in 2 tables\n")
	if err != nil || routes != 3205 || networks != 3204 {
		t.Errorf("dual-stack route count %d %d %v, want the total, 3205 3204", routes, networks, err)
	}
	if _, _, err := parseRouteCount("BIRD 2.0.12 ready.\nUnable to connect"); err == nil {
		t.Error("a count out of nothing")
	}
}

// The parsers read another program's output: whatever it says, they do
// not panic, and what they return is well formed.
func FuzzBirdcParsers(f *testing.F) {
	for _, name := range []string{"protocols-all", "route-two", "route-ecmp", "route-direct", "route-none", "route-count"} {
		b, err := os.ReadFile("testdata/birdc/" + name + ".txt")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, out string) {
		for _, p := range parseProtocols(out) {
			if p.Name == "" || p.Imported < 0 || p.Exported < 0 {
				t.Fatalf("protocol %+v", p)
			}
		}
		for _, r := range parseRoutes(out) {
			if r.Prefix == "" {
				t.Fatalf("route without a prefix: %+v", r)
			}
		}
		parseRouteCount(out)
	})
}

// A VCP that took over (BIRD started with -R) with bgp1 just started
// itself: both peers' capabilities carry the Restart State bit, and so do
// BIRD's own ("Local capabilities"), which must not count.
func TestRestartingPeers(t *testing.T) {
	got := restartingPeers(birdcOutput(t, "protocols-restarting"))
	if want := map[string]bool{"peer0": true, "peer1": true}; !reflect.DeepEqual(got, want) {
		t.Errorf("restarting peers %v, want %v", got, want)
	}
	if got := restartingPeers(birdcOutput(t, "protocols-all")); len(got) != 0 {
		t.Errorf("restarting peers %v in a BIRD whose peers did not restart", got)
	}
}

// A BIRD that accepts birdc's connection and never answers (busy taking
// over with a full table) holds the status no longer than its bound: the
// API, and whoever looks for the active VCP through it, get an answer
// saying the suite did not. Before the bound, birdc waited for good.
func TestBIRDStatusBounded(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "bird.ctl")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	held := make(chan net.Conn, 8)
	defer func() {
		for len(held) > 0 {
			(<-held).Close()
		}
	}()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held <- c // accepted, never a greeting
		}
	}()
	s := &BIRD{socket: sock}
	start := time.Now()
	st := s.Status()
	if took := time.Since(start); took > suiteStatusTimeout+time.Second {
		t.Errorf("status took %v, bound %v", took, suiteStatusTimeout)
	}
	for _, out := range []string{st.Protocols, st.Routes} {
		if !strings.Contains(out, "no answer within") {
			t.Errorf("status of a BIRD that does not answer: %q, want it to say so", out)
		}
	}
}

// BIRD's and FRR's OSPF and RIP neighbours, on the mirrors only; and
// the LBs are sent those on their ports beside the BGP peers.
func TestIGPNeighbors(t *testing.T) {
	ospf := "BIRD 2.0.12 ready.\nospf1:\nRouter ID   \tPri\t     State     \tDTime\tInterface  Router IP\n198.51.100.20\t  1\tFull/DR     \t3.456\tx11        198.51.100.20\n10.0.0.9\t  1\tFull/DR     \t3.456\teth0       10.0.0.9\n"
	ospf6 := "ospf6:\nRouter ID   \tPri\t     State     \tDTime\tInterface  Router IP\n198.51.100.20\t  1\tFull/BDR    \t3.1\tx11        fe80::ff:fe00:20\n"
	rip := "rip1:\nIP address                Interface  Metric Routes    Seen\n198.51.100.30             x11             1      2  12.345\n"
	got := append(append(parseIGPNeighbors(ospf, false), parseIGPNeighbors(ospf6, false)...), parseIGPNeighbors(rip, true)...)
	want := []IGPNeighbor{{netip.MustParseAddr("198.51.100.20"), 11}, {netip.MustParseAddr("fe80::ff:fe00:20"), 11}, {netip.MustParseAddr("198.51.100.30"), 11}}
	if !slices.Equal(got, want) {
		t.Errorf("BIRD: %v, want %v", got, want)
	}
	frr := `{"neighbors":{"198.51.100.20":[{"nbrState":"Full/DR","ifaceAddress":"198.51.100.20","ifaceName":"x11:198.51.100.1"}],"10.0.0.9":[{"ifaceAddress":"10.0.0.9","ifaceName":"eth0:10.0.0.1"}]}}`
	if got := parseFRROSPFNeighbors(frr); !slices.Equal(got, want[:1]) {
		t.Errorf("FRR: %v, want %v", got, want[:1])
	}
	// FRR 8.4's own words, as its daemons said them in a lab.
	ospf6FRR := `{"198.51.100.20%x11":{"area":"0.0.0.0","interface":"x11","interfaceIndex":2,"linkLocalAddress":"fe80::ff:fe00:20","neighborState":"Full"},
"10.0.0.9%eth0":{"interface":"eth0","linkLocalAddress":"fe80::9"}}`
	if got := parseFRROSPF6Neighbors(ospf6FRR); !slices.Equal(got, want[1:2]) {
		t.Errorf("FRR's OSPFv3: %v, want %v", got, want[1:2])
	}
	ripFRR := "Routing Protocol is \"rip\"\n  Routing for Networks:\n    x11\n  Routing Information Sources:\n" +
		"    Gateway          BadPackets BadRoutes  Distance Last Update\n    198.51.100.30            0         0       120   00:00:08\n  Distance: (default is 120)\n"
	if got := parseFRRRIPSources(ripFRR); !slices.Equal(got, []netip.Addr{want[2].Addr}) {
		t.Errorf("FRR's RIP sources: %v, want %v", got, want[2].Addr)
	}
	ripngFRR := "   Network      Next Hop                      Via     Metric Tag Time\nC(i) 2001:db8:11::/64 \n                  ::                          self       1    0  \n" +
		"R(n) 2001:db8:98::/48 \n                  fe80::ff:fe00:20   x11        2    0  02:59\nR(n) 2001:db8:99::/48 \n                  fe80::ff:fe00:20   x11        2    0  02:59\n" +
		"R(n) 2001:db8:97::/48 \n                  fe80::9   eth0        2    0  02:59\n"
	if got := parseFRRRIPngNextHops(ripngFRR); !slices.Equal(got, want[1:2]) {
		t.Errorf("FRR's RIPng neighbours: %v, want %v", got, want[1:2])
	}
	c, err := load(t, goodVCP+"routing:\n  asn: 65000\n  bgp:\n    - {neighbor: 198.51.100.20, asn: 65011}\n")
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{cfg: c, igpNeighbors: append(want, IGPNeighbor{netip.MustParseAddr("192.0.2.30"), 10})}
	peers := a.peersOf("lb2")
	if len(peers) != 3 || peers[0].Addr != want[0].Addr || peers[0].Flags != dist.PeerGTSM || peers[1] != (dist.Peer{Addr: want[1].Addr, VLAN: 11}) {
		t.Errorf("lb2's peers %+v: bgp 198.51.100.20 (GTSM, once), then the IGP's on VLAN 11", peers)
	}
}
