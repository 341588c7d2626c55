package router

import (
	"fmt"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/dist/disttest"
	"github.com/msr-router/msr/internal/element"
	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/lab/labtest"
	"github.com/msr-router/msr/router/routerapi"
)

// TestRouterSettingsFromVCP: a back-end whose file holds only its identity
// serves no ports and is not ready; BACKEND_CONFIG and ACL_CONFIG over
// DIST (as the VCP sends them) give it ports, connected routes and the
// ACL, and it is ready; a changed address takes the routes through the
// port with it; a restarted agent serves the VCP's settings it kept.
func TestRouterSettingsFromVCP(t *testing.T) {
	cfg, key, conn := identityBackend(t, "t-settings", "msr-test-rtsettings")
	a, stop := startRouter(t, cfg)
	if a.ready() || len(a.Status().Ports) != 0 {
		t.Fatalf("an unconfigured back-end: ready %v, ports %v", a.ready(), a.Status().Ports)
	}
	vcp, _ := dist.NewSender(dist.ElementID("vcp", "t-vcp"), key)
	send := func(m dist.Message) {
		t.Helper()
		f, err := vcp.Seal(a.mac, []byte{2, 0, 0x0a, 0x0a, 1, 2}, m)
		if err == nil {
			err = conn.Send(f)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	rules := []dist.ACLRule{{Deny: true, Proto: 17, Dst: netip.MustParsePrefix("10.10.1.0/24"), SportHi: 65535, DportLo: 9, DportHi: 9}}
	send(&dist.BackendConfig{Target: cfg.ID + 1, Ports: []dist.BackendPort{{Name: "other", VLAN: 99, Prefix: netip.MustParsePrefix("10.99.0.1/24")}}})
	send(&dist.ACLConfig{Target: cfg.ID, Rules: rules})
	send(&dist.BackendConfig{Target: cfg.ID, Ports: []dist.BackendPort{{Name: "lb1/e0", VLAN: 10, Prefix: netip.MustParsePrefix("10.10.1.1/24"), MTU: 1500}}})
	waitFor := func(what string, ok func(*routerapi.Status) bool) *routerapi.Status {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			st := a.Status()
			if ok(st) {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: status %+v", what, st)
			}
		}
	}
	want := []string{"lb1/e0 vlan 10 10.10.1.1/24 mtu 1500"}
	st := waitFor("the VCP's ports", func(s *routerapi.Status) bool { return slices.Equal(s.Ports, want) && len(s.ACL) == 1 })
	if !st.Ready || st.ACL[0] != "deny udp any -> 10.10.1.0/24 dport 9" || st.Routes != 1 {
		t.Errorf("configured: ready %v, ACL %v, %d routes (want the connected one)", st.Ready, st.ACL, st.Routes)
	}
	if err := a.AddRoute(netip.MustParsePrefix("198.19.0.0/16"), []netip.Addr{netip.MustParseAddr("10.10.1.2")}); err != nil {
		t.Fatal(err)
	}
	// The port's address changes: the route through it goes, the new
	// subnet is connected, the old one is not.
	send(&dist.BackendConfig{Target: cfg.ID, Ports: []dist.BackendPort{{Name: "lb1/e0", VLAN: 10, Prefix: netip.MustParsePrefix("10.10.2.1/24"), MTU: 1500}}})
	waitFor("the new address", func(s *routerapi.Status) bool {
		return len(s.Ports) == 1 && strings.Contains(s.Ports[0], "10.10.2.1/24")
	})
	if prefixes := routePrefixes(a); !slices.Equal(prefixes, []string{"10.10.2.0/24"}) {
		t.Errorf("routes after the port's address changed: %v, want only 10.10.2.0/24", prefixes)
	}
	// Its metrics say so, and pass Prometheus's lint.
	if problems, err := testutil.CollectAndLint(a.Metrics()); err != nil || len(problems) > 0 {
		t.Errorf("metrics: %v %+v", err, problems)
	}
	w := httptest.NewRecorder()
	a.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{"msr_router_ready 1", "msr_router_fib_routes 1", `msr_router_acl_matches_total{action="deny",rule="0"} 0`, "msr_build_info{"} {
		if !strings.Contains(w.Body.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, w.Body)
		}
	}
	checkPortAppendedAndDown(t, a, cfg.ID, send, waitFor)
	// The operator drains it and sets its weight through the VCP: it
	// keeps both and says so in its hellos, for any VCP to take.
	send(&dist.BackendConfig{Target: cfg.ID, Ports: []dist.BackendPort{{Name: "lb1/e0", VLAN: 10, Prefix: netip.MustParsePrefix("10.10.2.1/24"), MTU: 1500}},
		Drained: true, Capacity: 7000, OperatorVersion: 2000})
	waitFor("drained", func(s *routerapi.Status) bool { return s.Drained && s.CapacityMbps == 7000 })
	flags := uint8(dist.HelloFlagDraining | dist.HelloFlagDrained | dist.HelloFlagCapacitySet)
	if hello := heardHello(t, conn, cfg.ID, flags); hello.Flags != flags || hello.Capacity != 7000 || hello.OperatorVersion != 2000 {
		t.Errorf("drained back-end's hello: flags %#x capacity %d version %d, want %#x 7000 2000", hello.Flags, hello.Capacity, hello.OperatorVersion, flags)
	}
	// A second VCP active at once, behind the operator (version 1000),
	// sends its undrained view with a new MTU: the MTU is taken, the
	// operator's newer drain and weight stay.
	send(&dist.BackendConfig{Target: cfg.ID, Ports: []dist.BackendPort{{Name: "lb1/e0", VLAN: 10, Prefix: netip.MustParsePrefix("10.10.2.1/24"), MTU: 1400}},
		OperatorVersion: 1000})
	if st := waitFor("the MTU of a VCP behind", func(s *routerapi.Status) bool { return strings.Contains(s.Ports[0], "mtu 1400") }); !st.Drained || st.CapacityMbps != 7000 {
		t.Errorf("a VCP behind undid the operator's drain: drained %v, capacity %d", st.Drained, st.CapacityMbps)
	}
	send(&dist.BackendConfig{Target: cfg.ID, Ports: []dist.BackendPort{{Name: "lb1/e0", VLAN: 10, Prefix: netip.MustParsePrefix("10.10.2.1/24"), MTU: 1500}},
		Drained: true, Capacity: 7000, OperatorVersion: 2000})
	waitFor("the MTU back", func(s *routerapi.Status) bool { return strings.Contains(s.Ports[0], "mtu 1500") })
	// A restarted agent with the same identity-only file serves the
	// settings it kept, the operator's too.
	stop()
	a.Close()
	a, stop = startRouter(t, cfg)
	defer func() { stop(); a.Remove() }()
	if st := a.Status(); len(st.Ports) != 1 || !strings.Contains(st.Ports[0], "10.10.2.1/24") || len(st.ACL) != 1 || !st.Ready || !st.Drained || st.CapacityMbps != 7000 {
		t.Errorf("restarted: ports %v, ACL %v, ready %v, drained %v, capacity %d", st.Ports, st.ACL, st.Ready, st.Drained, st.CapacityMbps)
	}
}

// identityBackend brings the restart lab up and returns the config of a
// back-end named name whose file holds only its identity, pinning under
// pin (its pins and saved state removed when the test ends), the VCP's
// key, and a DIST socket on gen's g0, the VCP's side of the link.
func identityBackend(t *testing.T, name, pin string) (*AgentConfig, dist.Key, *dist.Conn) {
	t.Helper()
	labtest.Up(t, restartLab)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	_, vcpKey, ring := disttest.Keys(t, dir, strings.Repeat("5d", 32))
	file := &FileConfig{Config: element.Config{Name: name, KeyFile: keyFile}, Interface: "eth0",
		PinDir: filepath.Join(netns.BPFFS, pin)}
	cfg, err := file.Parse()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.RemoveAll(cfg.PinDir)
		os.Remove(routerapi.StatePath(name))
		os.Remove(routerapi.StatePath(name) + ".settings")
	})
	var conn *dist.Conn
	if err := netns.Do(lab.Namespace("t-rtrestart", "gen"), func() (err error) {
		conn, err = dist.Listen("g0", ring)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return cfg, vcpKey, conn
}

// heardHello waits for a hello of the element id on conn with flags (the
// ones queued before may not have them), and returns the last heard.
func heardHello(t *testing.T, conn *dist.Conn, id uint64, flags uint8) *dist.Hello {
	t.Helper()
	var last *dist.Hello
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		f, err := conn.Recv(200 * time.Millisecond)
		if err != nil {
			continue
		}
		if h, ok := f.Msg.(*dist.Hello); ok && f.Header.Sender == id {
			if last = h; h.Flags == flags {
				break
			}
		}
	}
	if last == nil {
		t.Fatal("no hello heard")
	}
	return last
}

// The operator's drain and weight of a newer version stand against a VCP
// behind; the rest of its settings is taken.
func TestNewerOperator(t *testing.T) {
	kept := settings{Drained: true, CapacityMbps: 7000, OperatorVersion: 20}
	for _, c := range []struct {
		name           string
		in             settings
		want           settings
		wantSuperseded bool
	}{
		{"older, other state", settings{Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}, OperatorVersion: 10},
			settings{Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}, Drained: true, CapacityMbps: 7000, OperatorVersion: 20}, true},
		{"older, same state", settings{Drained: true, CapacityMbps: 7000, OperatorVersion: 10}, kept, false},
		{"none (0)", settings{}, kept, true},
		{"the same version", kept, kept, false},
		{"newer", settings{OperatorVersion: 30}, settings{OperatorVersion: 30}, false},
	} {
		got, superseded := newerOperator(kept, c.in)
		if !slices.Equal(got.Addrs, c.want.Addrs) || got.Drained != c.want.Drained || got.CapacityMbps != c.want.CapacityMbps ||
			got.OperatorVersion != c.want.OperatorVersion || superseded != c.wantSuperseded {
			t.Errorf("%s: %+v superseded %v, want %+v %v", c.name, got, superseded, c.want, c.wantSuperseded)
		}
	}
}

// TestRouterManyPorts: a router of 1,024 external ports reaches a
// back-end in pages, sent last page first: it serves them all (each
// port's VLAN in the data path, each subnet connected), and its hello
// lists as many as fit and the digest of all of them. A config of more
// ports than its maps hold (max_ports) is refused and counted, and the
// ports it serves stay.
func TestRouterManyPorts(t *testing.T) {
	cfg, key, conn := identityBackend(t, "t-manyports", "msr-test-rtmanyports")
	a, stop := startRouter(t, cfg)
	defer func() { stop(); a.Remove() }()
	vcp, _ := dist.NewSender(dist.ElementID("vcp", "t-vcp"), key)
	send := func(m *dist.BackendConfig, generation uint32) {
		t.Helper()
		pages, err := dist.BackendConfigPages(m, generation)
		if err != nil {
			t.Fatal(err)
		}
		for i := len(pages) - 1; i >= 0; i-- {
			f, err := vcp.Seal(a.mac, []byte{2, 0, 0x0a, 0x0a, 1, 2}, pages[i])
			if err == nil {
				err = conn.Send(f)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	ports := func(n int) []dist.BackendPort {
		var ps []dist.BackendPort
		for i := range n {
			ps = append(ps, dist.BackendPort{Name: fmt.Sprintf("lb%d/e%d", i/16+1, i%16), VLAN: uint16(10 + i), MTU: 1500,
				Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 1}), 24)})
		}
		return ps
	}
	want := ports(cfg.MaxPorts)
	send(&dist.BackendConfig{Target: cfg.ID, Ports: want}, 1)
	for deadline := time.Now().Add(5 * time.Second); len(a.Status().Ports) != len(want); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d ports served of %d sent", len(a.Status().Ports), len(want))
		}
	}
	st := a.Status()
	if st.Routes != len(want) || st.MaxPorts != 1024 || !strings.HasPrefix(st.Ports[len(want)-1], "lb64/e15 vlan 1033 10.3.255.1/24") {
		t.Errorf("%d connected routes, max_ports %d, last port %q", st.Routes, st.MaxPorts, st.Ports[len(want)-1])
	}
	var last rtxdpRtPort
	if err := a.dp.objs.RtPorts.Lookup(uint32(len(want)-1), &last); err != nil || last.Vlan != 1033 {
		t.Errorf("the data path's last port: %+v %v", last, err)
	}
	digest := dist.PortsDigest(want)
	var h *dist.Hello
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline) && (h == nil || h.PortsDigest != digest); {
		if f, err := conn.Recv(200 * time.Millisecond); err == nil && f.Header.Sender == cfg.ID {
			h, _ = f.Msg.(*dist.Hello)
		}
	}
	if h == nil || h.PortsDigest != digest || len(h.Ports) != dist.MaxPorts {
		t.Fatalf("the back-end's hello: %+v, want the digest %#x and %d ports", h, digest, dist.MaxPorts)
	}
	// One port more than max_ports: refused, counted, the ports kept.
	send(&dist.BackendConfig{Target: cfg.ID, Ports: ports(cfg.MaxPorts + 1)}, 2)
	for deadline := time.Now().Add(2 * time.Second); a.Status().DIST["config_too_many_ports"] == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a config of more ports than max_ports not counted")
		}
	}
	if st := a.Status(); len(st.Ports) != len(want) {
		t.Errorf("after a config too large: %d ports served, want %d", len(st.Ports), len(want))
	}
}

// checkPortAppendedAndDown: a port added after the one a back-end serves
// (an LB joining) keeps every route and connects the new port's subnet;
// the new port going down (its LB dead) takes its subnet away and nothing
// else, and up again it is back.
func checkPortAppendedAndDown(t *testing.T, a *Agent, id uint64, send func(dist.Message), waitFor func(string, func(*routerapi.Status) bool) *routerapi.Status) {
	t.Helper()
	if err := a.AddRoute(netip.MustParsePrefix("198.19.0.0/16"), []netip.Addr{netip.MustParseAddr("10.10.2.2")}); err != nil {
		t.Fatal(err)
	}
	ports := func(down bool) []dist.BackendPort {
		return []dist.BackendPort{{Name: "lb1/e0", VLAN: 10, Prefix: netip.MustParsePrefix("10.10.2.1/24"), MTU: 1500},
			{Name: "lb2/e0", VLAN: 11, Prefix: netip.MustParsePrefix("10.11.1.1/24"), MTU: 1500, Down: down}}
	}
	all := []string{"10.10.2.0/24", "10.11.1.0/24", "198.19.0.0/16"}
	send(&dist.BackendConfig{Target: id, Ports: ports(false)})
	waitFor("a port added", func(s *routerapi.Status) bool { return len(s.Ports) == 2 })
	if got := routePrefixes(a); !slices.Equal(got, all) {
		t.Errorf("routes after a port was added: %v, want the route through the first port kept and both connected", got)
	}
	for _, down := range []bool{true, false} {
		send(&dist.BackendConfig{Target: id, Ports: ports(down)})
		waitFor("lb2/e0's state", func(s *routerapi.Status) bool {
			return len(s.Ports) == 2 && strings.HasSuffix(s.Ports[1], " down") == down
		})
		want := all
		if down {
			want = []string{"10.10.2.0/24", "198.19.0.0/16"}
		}
		if got := routePrefixes(a); !slices.Equal(got, want) {
			t.Errorf("routes with lb2/e0 down %v: %v, want %v", down, got, want)
		}
	}
}

// routePrefixes are the back-end's routes' prefixes, sorted.
func routePrefixes(a *Agent) []string {
	var out []string
	for _, r := range a.Routes() {
		out = append(out, r.Prefix)
	}
	slices.Sort(out)
	return out
}

// TestMemoryStatus: a back-end's status gives its memory by part: the
// data path's maps at least its IPv4 FIB's 64 MiB of tbl24, a heap and a
// resident set, no RIB without a feed; and a feed's paths reckoned from
// their counts, the prefixes' alike paths kept once.
func TestMemoryStatus(t *testing.T) {
	cfg, _, _ := identityBackend(t, "t-memory", "msr-test-rtmemory")
	a, stop := startRouter(t, cfg)
	defer stop()
	m := a.Status().Memory
	if m.MapsBytes < 64<<20 || m.HeapBytes == 0 || m.RSSBytes == 0 || m.RIBBytes != 0 {
		t.Errorf("memory %+v: want maps of 64 MiB or more, a heap, a resident set, no RIB", m)
	}
	// A thousand prefixes with one path each, of four kinds: four sets
	// shared, each prefix a slot of 8 bytes of key and 4 of set.
	f := &ribFeed{paths: newRIBStore()}
	for i := range 1000 {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24)
		f.paths.put(p, []ribPath{{nh: netip.MustParseAddr("192.0.2.1"), asLen: uint16(i % 4)}})
	}
	if n, b := f.paths.sharedSets(), f.bytes(); n != 4 || b < 1000*12 || b > 1000*24 {
		t.Errorf("a feed of 1,000 prefixes, 4 kinds of path: %d sets, %d bytes, want 4 and 12-24 kB", n, b)
	}
}
