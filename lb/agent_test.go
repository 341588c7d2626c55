package lb

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/dist/disttest"
	"github.com/msr-router/msr/internal/element"
	"github.com/msr-router/msr/internal/msrtest"
	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/lab/labtest"
	"github.com/msr-router/msr/traffic"
)

// The agent's lab: an external host (the generator) on the LB's external
// port e0; the LB's internal port i0 on a switch with three back-end
// stand-ins r1..r3, each counting what reaches it (the bench sink) and
// sending DIST hellos.
var agentLab = msrtest.Testdata("t-lbagent.yaml")

var testKeyHex = strings.Repeat("42", 32)

type agentLabT struct {
	t     *testing.T
	agent *Agent
	sinks map[string]*traffic.Sink
	// counted: what each sink counted of each flow before its last
	// Restart (send).
	counted map[string][]uint64
	hellos  map[string]context.CancelFunc
	cfg     *AgentConfig
	stop    func() // stops the first agent's Run
}

const labFlows = 1000

func lbConfig(t *testing.T, mode string) *AgentConfig {
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	disttest.Keys(t, dir, testKeyHex)
	file := &FileConfig{
		Config: element.Config{Name: "t-agent", KeyFile: key}, Mode: mode, PinDir: filepath.Join(netns.BPFFS, "msr-test-lb"),
		Ports: map[string]*PortConfig{
			"e0": {Role: "external", VLAN: 10},
			"i0": {Role: "auto", Default: true},
		},
		Backends: []BackendConfig{{MAC: "02:00:00:00:b0:01", Weight: 2}, {MAC: "02:00:00:00:b0:02", Weight: 2}, {MAC: "02:00:00:00:b0:03", Weight: 1}},
	}
	file.Ports["e0"].Address.UnmarshalText([]byte("192.0.2.1/24"))
	cfg, err := file.Parse()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// startAgentLab builds the lab, starts the back-end stand-ins and the
// agent, and waits until the table holds all three back-ends.
func startAgentLab(t *testing.T, mode string) *agentLabT {
	return startAgentLabWith(t, lbConfig(t, mode))
}

func startAgentLabWith(t *testing.T, cfg *AgentConfig) *agentLabT {
	return startAgentLabWithHook(t, cfg, nil)
}

// startAgentLabWithHook is startAgentLabWith, calling up (if set) once
// the lab is up, before the agent starts.
func startAgentLabWithHook(t *testing.T, cfg *AgentConfig, up func()) *agentLabT {
	spec, _ := labtest.Up(t, agentLab)
	if up != nil {
		up()
	}
	l := &agentLabT{t: t, sinks: map[string]*traffic.Sink{}, hellos: map[string]context.CancelFunc{}, cfg: cfg}
	for _, r := range []string{"r1", "r2", "r3"} {
		l.startBackend(r)
	}
	err := netns.Do(lab.Namespace(spec.Name, "lb"), func() (err error) {
		l.agent, err = NewAgent(l.cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.agent.Run(ctx); close(done) }()
	l.stop = func() { cancel(); <-done }
	t.Cleanup(func() {
		cancel()
		<-done
		l.agent.Remove()
		for _, s := range l.sinks {
			s.Close()
		}
		for _, stop := range l.hellos {
			stop()
		}
	})
	l.waitTable(3)
	return l
}

func (l *agentLabT) startBackend(r string) {
	err := netns.Do(lab.Namespace("t-lbagent", r), func() error {
		s, err := traffic.NewSink("eth0", labFlows)
		if err != nil {
			return err
		}
		l.sinks[r] = s
		return l.startHellos(r)
	})
	if err != nil {
		l.t.Fatal(err)
	}
}

// vcpKey is the VCP's key of the lab's deployment (its config's
// directory); ring accepts it and the element key.
func (l *agentLabT) vcpKey() dist.Key {
	keys, err := dist.ReadVCPKeys(filepath.Join(filepath.Dir(l.cfg.KeyFile), dist.VCPKeyFile), dist.DefaultVCPKeyID)
	if err != nil {
		l.t.Fatal(err)
	}
	return keys[0]
}

func (l *agentLabT) ring() dist.Keyring {
	secret, _ := hex.DecodeString(testKeyHex)
	return dist.Ring(dist.Key{ID: 1, Secret: secret}, l.vcpKey())
}

// startHellos makes r a back-end the LB hears from every 100 ms.
func (l *agentLabT) startHellos(r string) error {
	secret, _ := hex.DecodeString(testKeyHex)
	key := dist.Key{ID: 1, Secret: secret}
	c, err := dist.Listen("eth0", l.ring())
	if err != nil {
		return err
	}
	s, _ := dist.NewSender(uint64(r[1]), key)
	ctx, cancel := context.WithCancel(context.Background())
	l.hellos[r] = cancel
	go func() {
		defer c.Close()
		for ctx.Err() == nil {
			f, _ := s.Seal(dist.GroupMAC, c.MAC(), &dist.Hello{Role: dist.RoleRouter, HelloIntervalMs: 100, HoldMultiplier: 3, Capacity: 1000, Name: r})
			c.Send(f)
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return nil
}

func (l *agentLabT) waitTable(backends int) {
	l.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if len(l.agent.Status().Table.Shares) == backends {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	l.t.Fatalf("table never held %d back-ends: %+v", backends, l.agent.Status().Table)
}

// send generates frames from the external host to the LB at a rate. A
// new generator starts its flows' sequence numbers at 0 again, so the
// sinks first forget the flows, or they would take the new frames for
// duplicates of the last send's (counts adds up what they counted
// before).
func (l *agentLabT) send(d time.Duration, pps float64) uint64 {
	if l.counted == nil {
		l.counted = map[string][]uint64{}
	}
	for r, s := range l.sinks {
		c, err := s.FlowCounts()
		if err != nil {
			l.t.Fatal(err)
		}
		if l.counted[r] == nil {
			l.counted[r] = make([]uint64, len(c))
		}
		for f := range c {
			l.counted[r][f] += c[f]
		}
		if err := s.Restart(); err != nil {
			l.t.Fatal(err)
		}
	}
	var sent uint64
	err := netns.Do(lab.Namespace("t-lbagent", "ext"), func() error {
		g, err := traffic.NewGenerator(traffic.GenConfig{Ifname: "g0", DstMAC: net.HardwareAddr{2, 0, 0, 0, 0xe0, 0}, Size: 64, Flows: labFlows, Rate: pps})
		if err != nil {
			return err
		}
		defer g.Close()
		sent, err = g.Blast(d)
		return err
	})
	if err != nil {
		l.t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	return sent
}

// counts returns, per back-end, the frames of each flow it received.
func (l *agentLabT) counts() map[string][]uint64 {
	out := map[string][]uint64{}
	for r, s := range l.sinks {
		c, err := s.FlowCounts()
		if err != nil {
			l.t.Fatal(err)
		}
		for f := range c {
			if f < len(l.counted[r]) {
				c[f] += l.counted[r][f]
			}
		}
		out[r] = c
	}
	return out
}

func sum(c []uint64) uint64 {
	var n uint64
	for _, v := range c {
		n += v
	}
	return n
}

// owners maps each flow to the back-ends that received it between two
// readings.
func owners(before, after map[string][]uint64) map[int][]string {
	o := map[int][]string{}
	for r, c := range after {
		for f := range c {
			if c[f] > before[r][f] {
				o[f] = append(o[f], r)
			}
		}
	}
	return o
}

func TestLBAgentWRRShares(t *testing.T) {
	l := startAgentLab(t, "wrr")
	if got := l.agent.Status().Ports; got[1].Role != "internal" {
		t.Errorf("i0 (auto) not sensed internal from the hellos: %+v", got[1])
	}
	sent := l.send(1*time.Second, 100_000)
	c := l.counts()
	total := sum(c["r1"]) + sum(c["r2"]) + sum(c["r3"])
	if total < sent*99/100 {
		t.Fatalf("sent %d, back-ends got %d", sent, total)
	}
	for r, want := range map[string]float64{"r1": 0.4, "r2": 0.4, "r3": 0.2} {
		got := float64(sum(c[r])) / float64(total)
		if got < want-0.01 || got > want+0.01 {
			t.Errorf("%s got %.4f of %d frames, want %.2f ± 0.01", r, got, total, want)
		}
	}
}

// TestLBAgentMaglev: each flow keeps one back-end; when a back-end's
// hellos stop it leaves the table within three hello intervals, and only
// its flows move.
func TestLBAgentMaglev(t *testing.T) {
	l := startAgentLab(t, "maglev")
	c0 := l.counts()
	l.send(500*time.Millisecond, 50_000)
	c1 := l.counts()
	first := owners(c0, c1)
	for f := 0; f < labFlows; f++ {
		if len(first[f]) != 1 {
			t.Fatalf("flow %d went to %v: one flow, one back-end", f, first[f])
		}
	}

	l.hellos["r2"]()
	stopped := time.Now()
	for l.agent.Status().Table.Shares["02:00:00:00:b0:02"] > 0 {
		if time.Since(stopped) > 3*l.cfg.HelloInterval+l.cfg.HelloInterval/2+tableReuseDelay {
			t.Fatalf("r2 still in the table %v after its last hello", time.Since(stopped))
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("r2 left the table %v after its hellos stopped", time.Since(stopped))

	sent := l.send(500*time.Millisecond, 50_000)
	c2 := l.counts()
	second := owners(c1, c2)
	moved := 0
	for f := 0; f < labFlows; f++ {
		if len(second[f]) != 1 {
			got := map[string]uint64{}
			for r := range c2 {
				got[r] = sum(c2[r]) - sum(c1[r])
			}
			t.Fatalf("flow %d went to %v after r2 left (%d frames sent, the back-ends got %v; the LB: %+v)", f, second[f], sent, got, l.agent.Status().Ports)
		}
		if first[f][0] == "r2" {
			continue
		}
		if second[f][0] != first[f][0] {
			moved++
		}
	}
	if moved > 0 {
		t.Errorf("%d flows not on r2 moved when r2 left", moved)
	}
}

// TestLBAgentTableSwapUnderLoad swaps tables (weights change) while
// traffic flows: nothing is lost.
func TestLBAgentTableSwapUnderLoad(t *testing.T) {
	l := startAgentLab(t, "hash")
	var wg sync.WaitGroup
	wg.Add(1)
	swaps := 0
	go func() {
		defer wg.Done()
		deadline := time.Now().Add(900 * time.Millisecond)
		for w := uint16(1); time.Now().Before(deadline); w++ {
			bs := []Backend{}
			for i, r := range []string{"02:00:00:00:b0:01", "02:00:00:00:b0:02", "02:00:00:00:b0:03"} {
				mac, _ := net.ParseMAC(r)
				bs = append(bs, Backend{MAC: mac, Ifindex: l.agent.ports[1].ifindex, PortIndex: l.agent.ports[1].index, Weight: 1 + (w+uint16(i))%3})
			}
			tb, _ := BuildTable(ModeHash, bs)
			if err := l.agent.dp.InstallTable(tb); err != nil {
				t.Error(err)
				return
			}
			swaps++
		}
	}()
	sent := l.send(1*time.Second, 50_000)
	wg.Wait()
	c := l.counts()
	total := sum(c["r1"]) + sum(c["r2"]) + sum(c["r3"])
	st, _ := l.agent.dp.Stats(0)
	if total != sent || st.Drops["no_backend"] != 0 {
		t.Errorf("%d table swaps under load: sent %d, back-ends got %d, no_backend drops %d", swaps, sent, total, st.Drops["no_backend"])
	}
	if swaps < 5 {
		t.Errorf("only %d swaps", swaps)
	}
}

// TestLBAgentIgnoresForgedDIST sends DIST frames from the external host:
// one sealed with the right key (as if the key leaked), one forged. The
// data path drops both at the external port; the table does not change.
func TestLBAgentIgnoresForgedDIST(t *testing.T) {
	l := startAgentLab(t, "wrr")
	before := l.agent.Status()
	secret, _ := hex.DecodeString(testKeyHex)
	err := netns.Do(lab.Namespace("t-lbagent", "ext"), func() error {
		c, err := dist.Listen("g0", l.ring())
		if err != nil {
			return err
		}
		defer c.Close()
		// The element key, the VCP's (as if it leaked), a wrong one.
		for i, key := range []dist.Key{{ID: 1, Secret: secret}, l.vcpKey(), {ID: 1, Secret: make([]byte, 32)}} {
			s, _ := dist.NewSender(99, key)
			evil := &dist.TableUpdate{Target: l.cfg.ID, Generation: 1000, Flags: dist.TableFlush | dist.TableLast, Mode: dist.ModeWRR,
				Entries: []dist.TableEntry{{MAC: net.HardwareAddr{2, 0, 0, 0, 0xee, byte(i)}, Port: 1, Weight: 100}}}
			for _, m := range []dist.Message{evil, &dist.VCPAnnounce{State: dist.VCPActive, APIAddr: ipMgmt}} {
				f, _ := s.Seal(net.HardwareAddr{2, 0, 0, 0, 0xe0, 0}, c.MAC(), m)
				if err := c.Send(f); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * l.cfg.HelloInterval)
	after := l.agent.Status()
	if fmt.Sprint(after.Table.Shares) != fmt.Sprint(before.Table.Shares) || after.VCPMAC != before.VCPMAC {
		t.Errorf("forged DIST changed the LB: table %v -> %v, vcp %q -> %q", before.Table.Shares, after.Table.Shares, before.VCPMAC, after.VCPMAC)
	}
	if d := after.Ports[0].Stats.Drops["dist_external"]; d != 6 {
		t.Errorf("dist_external drops = %d, want 6", d)
	}
}

// TestLBAgentRestartKeepsForwarding stops the agent and starts a new one
// while traffic flows: the pinned links and maps keep forwarding, the new
// agent adopts them, and no frame is lost.
func TestLBAgentRestartKeepsForwarding(t *testing.T) {
	l := startAgentLab(t, "maglev")
	var sent uint64
	done := make(chan struct{})
	go func() { sent = l.send(1500*time.Millisecond, 50_000); close(done) }()
	time.Sleep(300 * time.Millisecond)

	old := l.agent
	l.stop() // the process exits: sockets and handles go, pins stay
	old.Close()
	time.Sleep(200 * time.Millisecond)
	err := netns.Do(lab.Namespace("t-lbagent", "lb"), func() (err error) {
		l.agent, err = NewAgent(l.cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go l.agent.Run(ctx)
	<-done
	c := l.counts()
	total := sum(c["r1"]) + sum(c["r2"]) + sum(c["r3"])
	if total != sent {
		st := l.agent.Status()
		t.Errorf("restart under load: sent %d, back-ends got %d; LB ports %+v %+v", sent, total, st.Ports[0].Stats, st.Ports[1].Stats)
	}
	// The new agent installs its own table once it has heard every live
	// back-end (one hold time after it started listening).
	for deadline := time.Now().Add(3 * time.Second); len(l.agent.Status().Table.Shares) != 3; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("new agent's table: %+v", l.agent.Status().Table)
		}
	}
}

// TestLBAgentRestartKeepsFoundTable: an agent whose back-ends come from
// the VCP, started again while no VCP table reaches it (the VCP in a
// takeover: the soak lost frames so), keeps the table it
// found in the pinned maps past its first hold time, losing no frame,
// and still drops a back-end of it whose hellos stop.
func TestLBAgentRestartKeepsFoundTable(t *testing.T) {
	l := startAgentLab(t, "maglev")
	before := l.agent.Status().Table.Shares
	old := l.agent
	l.stop()
	old.Close()
	cfg := *l.cfg
	cfg.Backends = nil // the VCP's to give, and it says nothing
	err := netns.Do(lab.Namespace("t-lbagent", "lb"), func() (err error) {
		l.agent, err = NewAgent(&cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go l.agent.Run(ctx)
	// 1.5 s: five hold times of the new agent's.
	sent := l.send(1500*time.Millisecond, 50_000)
	c := l.counts()
	if total := sum(c["r1"]) + sum(c["r2"]) + sum(c["r3"]); total != sent {
		st := l.agent.Status()
		t.Errorf("restarted with no VCP table: sent %d, back-ends got %d; table %+v, drops %v", sent, total, st.Table, st.Ports[0].Stats.Drops)
	}
	if after := l.agent.Status().Table.Shares; fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("the found table changed with every back-end alive: %v -> %v", before, after)
	}
	l.hellos["r3"]()
	l.waitTable(2)
	if sh := l.agent.Status().Table.Shares; sh["02:00:00:00:b0:03"] != 0 {
		t.Errorf("r3's hellos stopped, still in the table: %v", sh)
	}
}

// TestLBAgentHashKeepsFlows: in hash mode every flow stays on one back-end.
func TestLBAgentHashKeepsFlows(t *testing.T) {
	l := startAgentLab(t, "hash")
	c0 := l.counts()
	l.send(500*time.Millisecond, 50_000)
	o := owners(c0, l.counts())
	used := map[string]bool{}
	for f := 0; f < labFlows; f++ {
		if len(o[f]) != 1 {
			t.Fatalf("flow %d went to %v", f, o[f])
		}
		used[o[f][0]] = true
	}
	if len(used) != 3 {
		t.Errorf("1000 flows hashed onto %v only", used)
	}
}

// TestLBAgentFollowsVCP: a VCP on the internal network announces itself,
// pushes a table with its own weights and mode, and reconfigures a port;
// the LB follows each message.
func TestLBAgentFollowsVCP(t *testing.T) {
	l := startAgentLab(t, "wrr")
	vcpMAC := net.HardwareAddr{}
	err := netns.Do(lab.Namespace("t-lbagent", "r1"), func() error {
		c, err := dist.Listen("eth0", l.ring())
		if err != nil {
			return err
		}
		defer c.Close()
		vcpMAC = c.MAC()
		s, _ := dist.NewSender(0x7c9, l.vcpKey())
		lbMAC := net.HardwareAddr{2, 0, 0, 0, 0x10, 0}
		entry := func(last byte, w uint16) dist.TableEntry {
			return dist.TableEntry{MAC: net.HardwareAddr{2, 0, 0, 0, 0xb0, last}, Port: 1, Weight: w}
		}
		msgs := []dist.Message{
			&dist.VCPAnnounce{State: dist.VCPActive, Priority: 200, HelloIntervalMs: 100, APIAddr: ipMgmt, APIPort: 7700},
			// A table in two frames: FLUSH, then LAST.
			&dist.TableUpdate{Target: l.cfg.ID, Generation: 5, Flags: dist.TableFlush, Mode: dist.ModeWRR, Entries: []dist.TableEntry{entry(1, 1)}},
			&dist.TableUpdate{Target: l.cfg.ID, Generation: 5, Flags: dist.TableLast, Mode: dist.ModeWRR, Entries: []dist.TableEntry{entry(3, 3)}},
			// For another LB: ignored.
			&dist.TableUpdate{Target: l.cfg.ID + 1, Generation: 6, Flags: dist.TableFlush | dist.TableLast, Mode: dist.ModeHash, Entries: []dist.TableEntry{entry(2, 9)}},
			&dist.PortConfig{Target: l.cfg.ID, Ports: []dist.PortSetting{{Index: 0, Role: dist.PortExternal, VLAN: 42,
				MAC: net.HardwareAddr{2, 0, 0, 0, 0xe0, 0}, Prefix: netip.MustParsePrefix("203.0.113.1/24"), MTU: 1500}}},
		}
		for _, m := range msgs {
			f, err := s.Seal(lbMAC, c.MAC(), m)
			if err != nil {
				return err
			}
			if err := c.Send(f); err != nil {
				return err
			}
		}
		// The LB's own hello reaches the back-ends: its ports, addresses,
		// roles and counters.
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			f, err := c.Recv(500 * time.Millisecond)
			if err != nil {
				continue
			}
			h, ok := f.Msg.(*dist.Hello)
			if !ok || h.Role != dist.RoleLB {
				continue
			}
			if h.Name != "t-agent" || len(h.Ports) != 2 || h.Ports[0].Role != dist.PortExternal ||
				h.Ports[1].Flags&dist.PortFlagDefaultInternal == 0 || h.Ports[0].RxPackets == 0 && h.Ports[1].RxPackets == 0 {
				return fmt.Errorf("LB hello: %+v", h)
			}
			return nil
		}
		return fmt.Errorf("no hello from the LB")
	})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		st := l.agent.Status()
		sh := st.Table.Shares
		if st.VCPMAC == vcpMAC.String() && sh["02:00:00:00:b0:01"]*3 == sh["02:00:00:00:b0:03"] && sh["02:00:00:00:b0:02"] == 0 &&
			st.Ports[0].VLAN == 42 && st.Ports[0].Address == "203.0.113.1/24" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("LB did not follow the VCP: vcp %q (want %s), shares %v, port %+v", st.VCPMAC, vcpMAC, sh, st.Ports[0])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLBAgentAnswersNeighborSolicitation holds Ext NDP (and Ext ARP, its
// IPv4 counterpart) to a real stack: the outside host's kernel resolves
// the port's IPv4, global IPv6 and link-local addresses to the port's MAC
// from the LB's answers (it checks their checksum, hop limit and target
// itself), and the LB counts them.
func TestLBAgentAnswersNeighborSolicitation(t *testing.T) {
	cfg := lbConfig(t, "wrr")
	cfg.Ports = append(cfg.Ports, PortSpec{Name: "e1", Role: RoleExternal, VLAN: 11,
		Address: netip.MustParsePrefix("198.51.100.1/24"), Address6: netip.MustParsePrefix("2001:db8:11::1/64")})
	l := startAgentLabWith(t, cfg)
	run := func(argv ...string) (string, int) {
		var b bytes.Buffer
		code, err := lab.Exec("t-lbagent", "nb", argv, nil, &b, &b)
		if err != nil {
			t.Fatal(err)
		}
		return b.String(), code
	}
	if out, code := run("ip", "-6", "addr", "add", "2001:db8:11::10/64", "dev", "eth0", "nodad"); code != 0 {
		t.Fatalf("ip addr add: %s", out)
	}
	for _, addr := range []string{"198.51.100.1", "2001:db8:11::1", "fe80::ff:fe00:e100"} {
		// The echo itself goes to the VCP, which this lab has not: only
		// the neighbour entry is asked for.
		run("ping", "-c", "1", "-W", "1", "-I", "eth0", addr)
		out, _ := run("ip", "neigh", "show", addr, "dev", "eth0")
		if !strings.Contains(out, "lladdr 02:00:00:00:e1:00") || strings.Contains(out, "FAILED") {
			t.Errorf("%s: neighbour entry %q, want the port's MAC", addr, out)
		}
	}
	st := l.agent.Status()
	for _, p := range st.Ports {
		if p.Interface == "e1" {
			if p.Stats.Modules["ext_ndp"] < 2 || p.Stats.Modules["ext_arp"] < 1 || p.Address6 != "2001:db8:11::1/64" || p.LinkLocal != "fe80::ff:fe00:e100" {
				t.Errorf("e1: ext_ndp %d, ext_arp %d, address6 %q, link-local %q", p.Stats.Modules["ext_ndp"], p.Stats.Modules["ext_arp"], p.Address6, p.LinkLocal)
			}
		}
	}
}

// TestLBAgentHellosWhileInstalling: a table install that takes longer
// than the hold time (a Maglev table on a busy machine) does not hold the
// LB's hellos back: they keep their interval, and no VCP takes the LB for
// dead (msr soak, finding 11: hellos sent from the install's loop came
// 300-500 ms late, the VCPs took lb2's ports down, and BIRD dropped its
// BGP sessions on them).
func TestLBAgentHellosWhileInstalling(t *testing.T) {
	installHook = func() { time.Sleep(time.Second) }
	defer func() { installHook = nil }()
	l := startAgentLab(t, "maglev")
	err := netns.Do(lab.Namespace("t-lbagent", "r1"), func() error {
		c, err := dist.Listen("eth0", l.ring())
		if err != nil {
			return err
		}
		defer c.Close()
		if err := l.startHellos("r2"); err != nil { // tables to install, each a second long
			return err
		}
		var last time.Time
		var worst time.Duration
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
			f, err := c.Recv(500 * time.Millisecond)
			if err != nil {
				continue
			}
			if h, ok := f.Msg.(*dist.Hello); !ok || h.Role != dist.RoleLB {
				continue
			}
			if now := time.Now(); !last.IsZero() {
				worst = max(worst, now.Sub(last))
			}
			last = time.Now()
		}
		if hold := 3 * l.cfg.HelloInterval; last.IsZero() || worst >= hold {
			return fmt.Errorf("the LB's hellos while tables install: longest gap %v, want under the hold time %v", worst, hold)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
