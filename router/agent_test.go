package router

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/msr-router/msr/dist/disttest"
	"github.com/msr-router/msr/internal/element"
	"github.com/msr-router/msr/internal/msrtest"
	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/lab/labtest"
	"github.com/msr-router/msr/router/routerapi"
	"github.com/msr-router/msr/traffic"
)

// The restart lab: the generator (and sink) on one side of the back-end,
// which routes 198.19.0.0/16 back to it tagged with VLAN 10 (as into the
// interconnect).
var restartLab = msrtest.Testdata("t-rtrestart.yaml")

func startRouter(t *testing.T, cfg *AgentConfig) (*Agent, context.CancelFunc) {
	t.Helper()
	var a *Agent
	err := netns.Do(lab.Namespace("t-rtrestart", "r"), func() (err error) {
		a, err = NewAgent(cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	return a, func() { cancel(); <-done }
}

// TestRouterRestartKeepsForwarding: the agent stops and a new one starts
// while 50 kpps cross the data path; the new agent adopts the pinned FIBs,
// IPv4's and IPv6's (and its saved state), and not a frame is lost.
func TestRouterRestartKeepsForwarding(t *testing.T) { testRouterRestart(t, false) }

// TestRouterRestartStateBehind: as TestRouterRestartKeepsForwarding, but
// the routes changed after the state was last saved (a kill under BGP
// churn): the new agent repairs the FIBs in place to the saved routes,
// and the traffic, to a route that did not change, loses nothing
// (finding 14: the FIB was rebuilt from empty, and frames were lost).
func TestRouterRestartStateBehind(t *testing.T) { testRouterRestart(t, true) }

func testRouterRestart(t *testing.T, behind bool) {
	labtest.Up(t, restartLab)
	dir := t.TempDir()
	disttest.Keys(t, dir, strings.Repeat("3c", 32))
	file := &FileConfig{Config: element.Config{Name: "t-restart", KeyFile: filepath.Join(dir, "key")}, Interface: "eth0",
		PinDir: filepath.Join(netns.BPFFS, "msr-test-rtrestart"),
		Ports:  map[string]*PortConfig{"net": {VLAN: 10, Address: netip.MustParsePrefix("10.10.1.1/24"), Address6: netip.MustParsePrefix("2001:db8:a::1/64")}},
		Routes: []RouteConfig{{To: netip.MustParsePrefix("198.19.0.0/16"), Via: []netip.Addr{netip.MustParseAddr("10.10.1.2")}},
			{To: netip.MustParsePrefix("2001:db8:99::/48"), Via: []netip.Addr{netip.MustParseAddr("2001:db8:a::2")}}}}
	cfg, err := file.Parse()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(cfg.PinDir); os.Remove(routerapi.StatePath("t-restart")) })
	a, stop := startRouter(t, cfg)
	// The next hop's MAC, as ARP through an LB would have taught it.
	gen := net.HardwareAddr{2, 0, 0x0a, 0x0a, 1, 2}
	a.mu.Lock()
	a.neigh[NeighborKey{netip.MustParseAddr("10.10.1.2"), 10}] = &neighbor{mac: gen, updated: time.Now()}
	a.dp.SetNeighbor(netip.MustParseAddr("10.10.1.2"), 10, gen)
	a.mu.Unlock()

	var sink *traffic.Sink
	if err := netns.Do(lab.Namespace("t-rtrestart", "gen"), func() (err error) {
		sink, err = traffic.NewSink("g0", 100)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	var sent uint64
	done := make(chan error)
	go func() {
		done <- netns.Do(lab.Namespace("t-rtrestart", "gen"), func() error {
			g, err := traffic.NewGenerator(traffic.GenConfig{Ifname: "g0", DstMAC: net.HardwareAddr{2, 0, 0x0a, 0x0a, 1, 1},
				Size: 64, Flows: 100, Rate: 50_000, HasXDP: true})
			if err != nil {
				return err
			}
			defer g.Close()
			sent, err = g.Blast(1500 * time.Millisecond)
			return err
		})
	}()
	var saved []byte
	changed := []netip.Prefix{netip.MustParsePrefix("198.18.7.0/24"), netip.MustParsePrefix("198.19.4.16/28"), netip.MustParsePrefix("2001:db8:77::/48")}
	if behind {
		// The state as saved, then routes changed (one that needs a
		// tbl8 group inside the route the traffic takes, one of each
		// family) and not saved before the kill.
		a.mu.Lock()
		err := a.save()
		a.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if saved, err = os.ReadFile(routerapi.StatePath("t-restart")); err != nil {
			t.Fatal(err)
		}
		for _, p := range changed {
			gw := netip.MustParseAddr("10.10.1.2")
			if p.Addr().Is6() {
				gw = netip.MustParseAddr("2001:db8:a::2")
			}
			if err := a.AddRoute(p, []netip.Addr{gw}); err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(300 * time.Millisecond)
	stop()
	a.Close()
	if behind {
		if err := os.WriteFile(routerapi.StatePath("t-restart"), saved, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	a, stop = startRouter(t, cfg)
	defer func() { stop(); a.Remove() }()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	rep, err := sink.Read()
	if err != nil {
		t.Fatal(err)
	}
	if rep.RxPackets != sent || sent == 0 {
		t.Errorf("restart under load: sent %d, got back %d (router %+v)", sent, rep.RxPackets, a.Status().Stats)
	}
	if len(a.Routes()) != 4 {
		t.Errorf("routes after restart (both families' connected and static): %+v", a.Routes())
	}
	d := checkRoutesListed(t, a)
	// Adopted from the saved state, not rebuilt: not one FIB write, in
	// either family's FIB.
	if c := a.Status().FIBChanges; c != 0 || d.FIBChanged != "" {
		t.Errorf("the restarted agent rebuilt its FIB (%d changes, the last at %q) instead of adopting it", c, d.FIBChanged)
	}
	// Behind, the routes changed since the save are gone from the data
	// path: it holds the saved routes alone.
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range changed {
		routes := a.fib(p.Addr()).Routes().Map()
		if _, ok := routes[p]; ok {
			t.Errorf("%s, added after the save, is in the restarted agent's FIB", p)
		}
		want := lpm6(routes, p.Addr().Next())
		if p.Addr().Is4() {
			want = refLPM(routes).lookup(p.Addr().Next())
		}
		if got := a.fib(p.Addr()).Lookup(p.Addr().Next()); got != want {
			t.Errorf("%s (in %s, added after the save): the data path answers %d, the agent's routes %d", p.Addr().Next(), p, got, want)
		}
	}
}

// checkRoutesListed checks that a's routes a page at a time (as the API
// answers them) are its routes whole, in order, and that its digest says
// what the list says; it returns the digest.
func checkRoutesListed(t *testing.T, a *Agent) routerapi.RoutesDigest {
	t.Helper()
	// A page at a time (as the API answers), the same routes in the same
	// order.
	var paged []routerapi.RouteInfo
	for after := (netip.Prefix{}); ; {
		page := a.RoutesPage(after, 1)
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		after = netip.MustParsePrefix(page[0].Prefix)
	}
	if !reflect.DeepEqual(paged, a.Routes()) {
		t.Errorf("routes a page at a time: %+v, want %+v", paged, a.Routes())
	}
	// Two static routes through a gateway, two connected subnets.
	d, n, sum, connected := a.RoutesDigest(), 0, uint64(0), []string{}
	for _, r := range a.Routes() {
		if r.Protocol == "connected" {
			connected = append(connected, r.Prefix)
			continue
		}
		n++
		sum += routerapi.PrefixHash(netip.MustParsePrefix(r.Prefix))
	}
	slices.Sort(connected)
	slices.Sort(d.Connected)
	if n != 2 || d.Routes != n || d.Sum != routerapi.DigestSum(sum) || !slices.Equal(d.Connected, connected) {
		t.Errorf("digest %+v, the routes' %d %s %v", d, n, routerapi.DigestSum(sum), connected)
	}
	return d
}

// TestHeldRoutes: a restarted agent's new RIB feed holds as stale the
// routes the FIB has from the last run's feed, not the
// configuration's static routes nor the operator's (msr router route
// add), which the saved state remembers as the operator's.
func TestHeldRoutes(t *testing.T) {
	labtest.Up(t, restartLab)
	dir := t.TempDir()
	disttest.Keys(t, dir, strings.Repeat("3c", 32))
	file := &FileConfig{Config: element.Config{Name: "t-held", KeyFile: filepath.Join(dir, "key")}, Interface: "eth0",
		PinDir: filepath.Join(netns.BPFFS, "msr-test-held"),
		Ports:  map[string]*PortConfig{"net": {VLAN: 10, Address: netip.MustParsePrefix("10.10.1.1/24"), Address6: netip.MustParsePrefix("2001:db8:a::1/64")}},
		Routes: []RouteConfig{{To: netip.MustParsePrefix("198.19.0.0/16"), Via: []netip.Addr{netip.MustParseAddr("10.10.1.2")}}}}
	cfg, err := file.Parse()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(cfg.PinDir); os.Remove(routerapi.StatePath("t-held")) })
	gw, gw6 := netip.MustParseAddr("10.10.1.2"), netip.MustParseAddr("2001:db8:a::2")
	operator, learned, learned6 := netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("2001:db8:77::/48")
	a, stop := startRouter(t, cfg)
	if err := a.AddOperatorRoute(operator, []netip.Addr{gw}); err != nil {
		t.Fatal(err)
	}
	if err := a.addLearned(learned, []netip.Addr{gw}); err != nil {
		t.Fatal(err)
	}
	if err := a.addLearned(learned6, []netip.Addr{gw6}); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	err = a.save()
	a.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	stop()
	a.Close()
	a, stop = startRouter(t, cfg)
	defer func() { stop(); a.Remove() }()
	a.mu.Lock()
	held, op := a.heldRoutes(), a.operator[operator]
	a.mu.Unlock()
	want := map[netip.Prefix][]netip.Addr{learned: {gw}, learned6: {gw6}}
	if !reflect.DeepEqual(held, want) || !op {
		t.Errorf("held %v (the operator's %v kept as the operator's: %v), want %v", held, operator, op, want)
	}
}
