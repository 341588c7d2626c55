package lb

import (
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/dist/disttest"
	"github.com/msr-router/msr/internal/element"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/lab/labtest"
)

// The table the LB wants: the VCP's entries less the back-ends whose
// hellos stopped; but when every one's stopped at once (the LB's own
// stall, or the interconnect's), all of them but the draining, not an
// empty table that drops every frame (finding 16).
func TestWantedKeepsAllWhenAllSilent(t *testing.T) {
	a := &Agent{cfg: &AgentConfig{Config: element.Config{HelloInterval: 100 * time.Millisecond, HoldMultiplier: 3}}, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		ports: []*agentPort{{name: "i0", index: 1, ifindex: 7, role: RoleInternal}}, backends: map[string]*backendState{}}
	now := time.Now()
	var entries []dist.TableEntry
	for i := range 4 {
		mac := net.HardwareAddr{2, 0, 0, 0, 0xb0, byte(i + 1)}
		entries = append(entries, dist.TableEntry{MAC: mac, Port: 1, Weight: 1})
		a.backends[mac.String()] = &backendState{mac: mac, last: now}
	}
	a.vcpTable = &vcpTable{mode: ModeHash, entries: entries}
	macs := func(bs []Backend) (out []string) {
		for _, b := range bs {
			out = append(out, b.MAC.String())
		}
		return out
	}
	if _, bs := a.wanted(now); len(bs) != 4 {
		t.Fatalf("all heard: %v", macs(bs))
	}
	// One silent past its hold: dropped at once.
	a.backends[entries[1].MAC.String()].last = now.Add(-time.Second)
	if _, bs := a.wanted(now); len(bs) != 3 || a.panicking {
		t.Errorf("one silent: %v (panicking %v), want the other 3", macs(bs), a.panicking)
	}
	// Every one silent, one of them draining: the three others kept.
	for _, e := range entries {
		a.backends[e.MAC.String()].last = now.Add(-time.Second)
	}
	a.backends[entries[3].MAC.String()].draining = true
	if _, bs := a.wanted(now); len(bs) != 3 || !a.panicking || a.allSilent != 1 {
		t.Errorf("every one silent: %v (panicking %v, %d times), want the 3 not draining kept", macs(bs), a.panicking, a.allSilent)
	}
	// Heard again: back to the live ones.
	a.backends[entries[0].MAC.String()].last = now
	if _, bs := a.wanted(now); len(bs) != 1 || a.panicking {
		t.Errorf("one heard again: %v (panicking %v), want it alone", macs(bs), a.panicking)
	}
}

// A back-end whose hellos wait in the LB's socket while the LB's process
// stands still is alive; one the LB hears nothing from while it waits on
// an empty queue dies after its hold. Judged against the LB's own clock,
// the 600 ms stall here dropped it (the soak: back-ends dropped and
// taken back within a second, some fifty times a run, moving flows twice).
func TestAliveWhileHellosQueued(t *testing.T) {
	labtest.Up(t, agentLab)
	secret, _ := hex.DecodeString(testKeyHex)
	keys := dist.Keyring{1: {Secret: secret}}
	i0 := disttest.Listen(t, lab.Namespace("t-lbagent", "lb"), "i0", keys)
	r1 := disttest.Listen(t, lab.Namespace("t-lbagent", "r1"), "eth0", keys)
	a := &Agent{cfg: &AgentConfig{Config: element.Config{HelloInterval: 100 * time.Millisecond, HoldMultiplier: 3}},
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), conns: map[string]*dist.Conn{"i0": i0}, backends: map[string]*backendState{}}
	hello := disttest.RouterHellos(t, r1, 0xb1, dist.Key{ID: 1, Secret: secret}, "r1")
	read := func() { disttest.Drain(t, i0, func(f *dist.Frame) { a.handle("i0", f) }) } // as the LB's receive loop
	hello()
	read()
	if !a.alive(r1.MAC(), time.Now()) {
		t.Fatal("r1 not alive after its hello")
	}
	// The LB's receive loop stands still for 600 ms (two hold times)
	// while r1 says hello every 100 ms.
	for i := 0; i < 6; i++ {
		time.Sleep(100 * time.Millisecond)
		hello()
	}
	time.Sleep(20 * time.Millisecond)
	if !a.alive(r1.MAC(), time.Now()) {
		t.Errorf("r1 dead after a 600 ms stall of the LB with its hellos queued: last heard %v ago, the LB caught up %v ago",
			time.Since(a.backends[r1.MAC().String()].last), time.Since(i0.CaughtUp()))
	}
	read()
	if !a.alive(r1.MAC(), time.Now()) {
		t.Error("r1 dead after the LB read its queued hellos")
	}
	// r1 falls silent while the LB waits on an empty queue: dead after
	// its hold (300 ms), not later.
	done := make(chan struct{})
	go func() { i0.Recv(600 * time.Millisecond); close(done) }()
	time.Sleep(150 * time.Millisecond)
	if !a.alive(r1.MAC(), time.Now()) {
		t.Error("r1 dead 150 ms into its silence")
	}
	time.Sleep(250 * time.Millisecond)
	if a.alive(r1.MAC(), time.Now()) {
		t.Errorf("r1 alive %v into its silence, hold 300 ms", time.Since(a.backends[r1.MAC().String()].last))
	}
	<-done
}

// A back-end left out of an installed table is marked with when, and how
// long after its last hello; one taken back in is unmarked.
func TestMarkLeft(t *testing.T) {
	a := &Agent{backends: map[string]*backendState{}}
	now := time.Now()
	var bs []Backend
	for i := range 3 {
		mac := net.HardwareAddr{2, 0, 0, 0, 0xb0, byte(i + 1)}
		bs = append(bs, Backend{MAC: mac})
		a.backends[mac.String()] = &backendState{mac: mac, last: now.Add(-50 * time.Millisecond)}
	}
	a.markLeft(bs, now, now, now)
	gone := a.backends[bs[1].MAC.String()]
	gone.last = now.Add(50 * time.Millisecond)
	at := now.Add(400 * time.Millisecond)
	a.markLeft([]Backend{bs[0], bs[2]}, at.Add(-20*time.Millisecond), at.Add(-30*time.Millisecond), at)
	if !gone.left.Equal(at) || gone.leftAfterHello != 350*time.Millisecond || gone.leftDecidedAfter != 330*time.Millisecond || gone.leftHeardLag != 10*time.Millisecond {
		t.Errorf("left at %v, %v after its hello (decided %v after, %v behind); want %v, 350ms (330ms, 10ms)", gone.left, gone.leftAfterHello, gone.leftDecidedAfter, gone.leftHeardLag, at)
	}
	for _, b := range []Backend{bs[0], bs[2]} {
		if s := a.backends[b.MAC.String()]; !s.left.IsZero() || !s.inTable {
			t.Errorf("%v, in the table, marked left", b.MAC)
		}
	}
	a.markLeft([]Backend{bs[0], bs[2]}, at.Add(time.Second), at.Add(time.Second), at.Add(time.Second)) // still out: left when it first was
	if !gone.left.Equal(at) {
		t.Errorf("left moved to %v on a second table without it", gone.left)
	}
	a.markLeft(bs, at.Add(2*time.Second), at.Add(2*time.Second), at.Add(2*time.Second))
	if !gone.left.IsZero() || !gone.inTable {
		t.Error("taken back, still marked left")
	}
}
