package vcp

import (
	"context"
	"encoding/hex"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	elementcfg "github.com/msr-router/msr/internal/element"
	"github.com/msr-router/msr/internal/msrtest"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/dist/disttest"
	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/lab/labtest"
	"github.com/msr-router/msr/lb"
	"github.com/msr-router/msr/lb/lbapi"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// An LB whose ports are all "auto", three back-ends (r3 at half capacity)
// and the VCP, on one switch. Everything the LB knows of its ports and its
// back-ends comes from the VCP.
var vcpLab = msrtest.Testdata("t-vcp.yaml")

var keyHex = strings.Repeat("7e", 32)

type vcpLabT struct {
	t      *testing.T
	dir    string
	vcp    *Agent
	lb     *lb.Agent
	lbStop func()
	hellos map[string]context.CancelFunc
	ring   dist.Keyring // the deployment's keys: element and VCP
}

// run starts an agent's Run in the background; the returned func stops it.
func run(f func(context.Context) error) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f(ctx); close(done) }()
	return func() { cancel(); <-done }
}

func quiet() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func startVCPLab(t *testing.T) *vcpLabT {
	labtest.Up(t, vcpLab)
	l := &vcpLabT{t: t, dir: t.TempDir(), hellos: map[string]context.CancelFunc{}}
	_, _, l.ring = disttest.Keys(l.t, l.dir, keyHex)
	for name, capacity := range map[string]uint32{"r1": 1000, "r2": 1000, "r3": 500} {
		l.backend(name, capacity, keyHex)
	}
	// r4 has the wrong key: the VCP and the LB must ignore it.
	l.backend("r4", 1000, strings.Repeat("5a", 32))
	file := &FileConfig{Config: elementcfg.Config{Name: "t-vcp", KeyFile: filepath.Join(l.dir, "key")}, Interface: "eth0", Mode: "maglev",
		ExternalPorts: []ExternalPortConfig{{LB: "lb1", MAC: "02:00:00:00:e0:00", Address: netip.MustParsePrefix("192.0.2.1/24"), VLAN: 10}}}
	cfg, err := file.Parse()
	if err != nil {
		t.Fatal(err)
	}
	if err := netns.Do(lab.Namespace("t-vcp", "vcp"), func() (err error) {
		l.vcp, err = NewAgent(cfg, quiet())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	stop := run(l.vcp.Run)
	t.Cleanup(func() {
		stop()
		l.vcp.Close()
		for _, h := range l.hellos {
			h()
		}
	})
	l.startLB()
	t.Cleanup(func() { l.lbStop(); l.lb.Remove() })
	return l
}

func (l *vcpLabT) startLB() {
	path := filepath.Join(l.dir, "lb.yaml")
	os.WriteFile(path, []byte("name: lb1\nkey_file: "+filepath.Join(l.dir, "key")+"\npin_dir: "+filepath.Join(netns.BPFFS, "msr-test-vcp-lb1")+
		"\nsocket: "+filepath.Join(l.dir, "lb.sock")+"\nports:\n  e0: {role: auto}\n  i0: {role: auto, default: true}\n"), 0o644)
	loaded, err := lb.LoadConfig(path)
	if err != nil {
		l.t.Fatal(err)
	}
	if err := netns.Do(lab.Namespace("t-vcp", "lb1"), func() (err error) {
		l.lb, err = lb.NewAgent(loaded, quiet())
		return err
	}); err != nil {
		l.t.Fatal(err)
	}
	l.lbStop = run(l.lb.Run)
}

// backend makes a back-end stand-in: hellos of a router of capacity,
// sealed with key (hex).
func (l *vcpLabT) backend(name string, capacity uint32, key string) {
	secret, _ := hex.DecodeString(key)
	err := netns.Do(lab.Namespace("t-vcp", name), func() error {
		ring := maps.Clone(l.ring)
		ring[1] = dist.Verifier{Secret: secret}
		c, err := dist.Listen("eth0", ring)
		if err != nil {
			return err
		}
		s, _ := dist.NewSender(uint64(name[1]), dist.Key{ID: 1, Secret: secret})
		ctx, cancel := context.WithCancel(context.Background())
		l.hellos[name] = cancel
		// What the VCP asks of it (BACKEND_CONFIG): kept and shown in its
		// hellos, as a back-end does.
		var mu sync.Mutex
		var drained bool
		var opCapacity uint32
		var opVersion uint64
		go func() {
			for ctx.Err() == nil {
				f, err := c.Recv(100 * time.Millisecond)
				if err != nil {
					continue
				}
				if m, ok := f.Msg.(*dist.BackendConfig); ok && m.Target == uint64(name[1]) {
					mu.Lock()
					if m.OperatorVersion >= opVersion { // the newest, as a back-end keeps it
						drained, opCapacity, opVersion = m.Drained, m.Capacity, m.OperatorVersion
					}
					mu.Unlock()
				}
			}
		}()
		go func() {
			defer c.Close()
			for ctx.Err() == nil {
				h := &dist.Hello{Role: dist.RoleRouter, HelloIntervalMs: 100, HoldMultiplier: 3, Capacity: capacity, Name: name}
				mu.Lock()
				if drained {
					h.Flags |= dist.HelloFlagDraining | dist.HelloFlagDrained
				}
				if opCapacity != 0 {
					h.Flags, h.Capacity = h.Flags|dist.HelloFlagCapacitySet, opCapacity
				}
				h.OperatorVersion = opVersion
				mu.Unlock()
				f, _ := s.Seal(dist.GroupMAC, c.MAC(), h)
				c.Send(f)
				time.Sleep(100 * time.Millisecond)
			}
		}()
		return nil
	})
	if err != nil {
		l.t.Fatal(err)
	}
}

// An operator's drain given while the VCP hears a back-end no longer (its
// hellos stopped, or this VCP itself stalled and found every element
// silent a moment before their queued hellos came) is answered done only
// once the back-end, heard again, shows it: so it outlives this VCP
// (docs/reliability.md, finding 31). One not heard within keptWait keeps it in this
// VCP alone, and the console is answered then.
func TestDrainWaitsForSilentBackend(t *testing.T) {
	l := startVCPLab(t)
	l.waitShares("start", map[string]int{macR1: 2, macR2: 2, macR3: 1})
	alive := func(name string) (alive, showsDrained bool) {
		l.vcp.mu.Lock()
		defer l.vcp.mu.Unlock()
		for _, e := range l.vcp.elements {
			if e.hello.Name == name {
				return e.alive, e.hello.Flags&dist.HelloFlagDrained != 0
			}
		}
		return false, false
	}
	silence := func(name string) {
		l.hellos[name]()
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if a, _ := alive(name); !a {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still alive 2 s after its hellos stopped", name)
			}
		}
	}

	silence("r2")
	drained := make(chan error, 1)
	start := time.Now()
	go func() { drained <- l.vcp.Drain("r2", true) }()
	time.Sleep(400 * time.Millisecond)
	l.backend("r2", 1000, keyHex) // heard again, knowing nothing of the drain
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
	if a, shows := alive("r2"); !a || !shows {
		t.Errorf("drain answered after %v, r2 alive %v, its hello shows the drain %v: want both", time.Since(start), a, shows)
	}

	silence("r3")
	start = time.Now()
	if err := l.vcp.Drain("r3", true); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < keptWait || took > keptWait+time.Second {
		t.Errorf("a drain of a dead back-end answered after %v, want after keptWait (%v)", took, keptWait)
	}
	if st := l.vcp.Status(); !slices.ContainsFunc(st.Elements, func(e vcpapi.ElementStatus) bool { return e.Name == "r3" && e.Drained }) {
		t.Errorf("r3, dead, not drained in this VCP: %+v", st.Elements)
	}
}

// waitShares waits until the LB's table has exactly these slot shares per
// back-end MAC (relative), and its ports are as the VCP set them.
func (l *vcpLabT) waitShares(what string, want map[string]int) *lbapi.Status {
	l.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := l.lb.Status()
		if sharesMatch(st.Table.Shares, want) && st.Ports[0].Role == "external" && st.Ports[0].VLAN == 10 &&
			st.Ports[0].Address == "192.0.2.1/24" && st.Ports[1].Role == "internal" && st.VCPMAC == "02:00:00:00:cc:01" {
			return st
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("%s: LB table %v (want proportions %v), ports %+v %+v, VCP %q\nVCP status %+v", what, st.Table.Shares, want,
				st.Ports[0], st.Ports[1], st.VCPMAC, l.vcp.Status())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sharesMatch compares slot counts with proportions within 3% (Maglev
// tables are not exact).
func sharesMatch(got map[string]int, want map[string]int) bool {
	if len(got) != len(want) {
		return false
	}
	total, wtotal := 0, 0
	for k, v := range want {
		total += got[k]
		wtotal += v
	}
	for k, v := range want {
		g := float64(got[k]) / float64(total)
		w := float64(v) / float64(wtotal)
		if g < w-0.03 || g > w+0.03 {
			return false
		}
	}
	return true
}

const (
	macR1 = "02:00:00:00:b0:01"
	macR2 = "02:00:00:00:b0:02"
	macR3 = "02:00:00:00:b0:03"
)

// TestVCPDrivesLB: the VCP discovers the LB and the back-ends, configures
// the LB's ports, pushes a table weighted by capacity, follows a drain, a
// back-end's death, and an LB restart.
func TestVCPDrivesLB(t *testing.T) {
	l := startVCPLab(t)
	l.waitShares("start", map[string]int{macR1: 2, macR2: 2, macR3: 1})
	st := l.vcp.Status()
	if len(st.Elements) != 4 || len(st.Tables) != 1 || st.Tables[0].Weights["r3"]*2 != st.Tables[0].Weights["r1"] {
		t.Errorf("VCP status: %+v", st)
	}
	// r4's hellos (wrong key) reach the VCP every 100 ms and are refused:
	// it is no element, has no weight, and the refusals are counted.
	for _, e := range st.Elements {
		if e.Name == "r4" {
			t.Errorf("the VCP took in r4, whose key is wrong: %+v", e)
		}
	}
	if _, ok := st.Tables[0].Weights["r4"]; ok {
		t.Errorf("r4 (wrong key) has a weight: %v", st.Tables[0].Weights)
	}
	if st.DIST["auth"] == 0 || st.DIST["accepted"] == 0 {
		t.Errorf("VCP DIST counters: %v (want accepted and refused for auth)", st.DIST)
	}

	if err := l.vcp.Drain("r2", true); err != nil {
		t.Fatal(err)
	}
	l.waitShares("r2 drained", map[string]int{macR1: 2, macR3: 1})
	if err := l.vcp.Drain("r9", true); err == nil {
		t.Error("draining a back-end that does not exist succeeded")
	}
	l.vcp.Drain("r2", false)
	l.waitShares("r2 back", map[string]int{macR1: 2, macR2: 2, macR3: 1})

	l.hellos["r3"]()
	l.waitShares("r3 dead", map[string]int{macR1: 1, macR2: 1})
	// The LB expires r3 on its own (it checks four times an interval);
	// the VCP notices at its next tick.
	r3Alive := func() bool {
		for _, e := range l.vcp.Status().Elements {
			if e.Name == "r3" && e.Alive {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(time.Second); r3Alive(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the VCP still thinks r3 is alive a second after the LB dropped it")
		}
	}

	// A new LB agent starts with nothing from the VCP: the VCP sees its
	// hello report no table, and pushes ports and table again.
	l.lbStop()
	l.lb.Close()
	l.startLB()
	l.waitShares("LB restarted", map[string]int{macR1: 1, macR2: 1})
	if applied := l.vcp.Status().Tables[0].Applied; !applied {
		time.Sleep(300 * time.Millisecond)
		if !l.vcp.Status().Tables[0].Applied {
			t.Error("the VCP does not see its table applied after the LB restart")
		}
	}
}
