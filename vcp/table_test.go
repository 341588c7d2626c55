package vcp

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"testing"
	"time"

	"github.com/msr-router/msr/dist"
)

// tableAgent is an agent with no sockets: elements as hellos made them.
func tableAgent(t *testing.T, extra string) *Agent {
	t.Helper()
	cfg, err := load(t, goodVCP+extra)
	if err != nil {
		t.Fatal(err)
	}
	return &Agent{cfg: cfg, log: quiet(), elements: topology{}, op: newOperatorState(),
		links: newMirrorLinks(), loads: map[string]*loadState{}, pushed: map[uint64]*lbPush{}}
}

func (a *Agent) hear(id uint64, mac string, h *dist.Hello) {
	m, _ := net.ParseMAC(mac)
	a.heard(id, m, h, time.Now())
}

// The table of an LB: every live, undrained back-end through every
// internal port, weighted by capacity (configured, set, or announced),
// the largest 100; the LB's own mode.
func TestTableComputation(t *testing.T) {
	a := tableAgent(t, "")
	internal := func(i uint8) dist.PortStatus {
		mac, _ := net.ParseMAC("02:00:00:00:10:0" + string('0'+rune(i)))
		return dist.PortStatus{Index: i, Role: dist.PortInternal, MAC: mac}
	}
	a.hear(1, "02:00:00:00:0a:01", &dist.Hello{Role: dist.RoleLB, Name: "lb2", HelloIntervalMs: 100, HoldMultiplier: 3,
		Ports: []dist.PortStatus{internal(0), internal(1), {Index: 2, Role: dist.PortExternal, MAC: net.HardwareAddr{2, 0, 0, 0, 0xe2, 0}}}})
	for i, r := range []struct {
		name string
		cap  uint32
	}{{"r1", 10000}, {"r2", 10000}, {"r3", 10000}, {"r4", 2500}} {
		a.hear(uint64(10+i), "02:00:00:00:b0:0"+string('1'+rune(i)), &dist.Hello{Role: dist.RoleRouter, Name: r.name, Capacity: r.cap,
			HelloIntervalMs: 100, HoldMultiplier: 3})
	}
	weights := func() (dist.BalanceMode, map[string][]uint16) {
		lb := a.elements[1]
		mode, entries := a.table(lb)
		names := map[string]string{}
		for _, e := range a.elements {
			names[e.mac.String()] = e.hello.Name
		}
		w := map[string][]uint16{}
		for _, e := range entries {
			w[names[e.MAC.String()]] = append(w[names[e.MAC.String()]], e.Weight)
		}
		return mode, w
	}
	// goodVCP: lb2 is maglev; r3 is configured at 500 Mbit/s.
	mode, w := weights()
	if mode != 3 || len(w) != 4 || len(w["r1"]) != 2 || w["r1"][0] != 100 || w["r3"][0] != 5 || w["r4"][0] != 25 {
		t.Fatalf("mode %d, weights %v", mode, w)
	}
	// A drained back-end and a dead one leave; a capacity set from the
	// console replaces the configured one. (The console's changes are the
	// active VCP's; this agent is a standby for tick, which pushes
	// nothing then: it has no socket.)
	asActive(a, func() { a.Drain("r2", true) })
	a.elements[13].last = time.Now().Add(-time.Second)
	a.tick(time.Now()) // notices r4's death
	asActive(a, func() { a.SetCapacity("r3", 10000) })
	if _, w := weights(); len(w) != 2 || w["r1"][0] != 100 || w["r3"][0] != 100 {
		t.Fatalf("after drain, death and a capacity: %v", w)
	}
	// Back again.
	asActive(a, func() { a.Drain("r2", false) })
	a.hear(13, "02:00:00:00:b0:04", &dist.Hello{Role: dist.RoleRouter, Name: "r4", Capacity: 2500, HelloIntervalMs: 100, HoldMultiplier: 3})
	if _, w := weights(); len(w) != 4 {
		t.Fatalf("after undrain and return: %v", w)
	}
	asActive(a, func() {
		if err := a.Drain("r9", true); err == nil {
			t.Error("drained a back-end that does not exist")
		}
	})
}

// asActive runs f with a as the active VCP.
func asActive(a *Agent, f func()) {
	a.active = true
	defer func() { a.active = false }()
	f()
}

// The operator's drain and weight outlive the VCP that was told: the
// back-end keeps them and says so in its hellos, a standby follows the
// hellos (and refuses the console's changes), and takes them over with
// the router; an active VCP takes them only from a back-end it hears for
// the first time, its own word standing otherwise.
func TestOperatorStateFromHellos(t *testing.T) {
	a := tableAgent(t, "")
	router := func(name string, flags uint8, capacity uint32) *dist.Hello {
		return &dist.Hello{Role: dist.RoleRouter, Name: name, Flags: flags, Capacity: capacity, HelloIntervalMs: 100, HoldMultiplier: 3}
	}
	drained := uint8(dist.HelloFlagDraining | dist.HelloFlagDrained)
	a.hear(11, "02:00:00:00:b0:01", router("r1", drained|dist.HelloFlagCapacitySet, 7000))
	a.hear(12, "02:00:00:00:b0:02", router("r2", 0, 10000))
	if !a.op.drained["r1"] || a.op.capacities["r1"] != 7000 || a.op.drained["r2"] || a.op.capacities["r2"] != 0 {
		t.Fatalf("a standby's view of the hellos: drained %v, capacities %v", a.op.drained, a.op.capacities)
	}
	if err := a.Drain("r2", true); !errors.Is(err, errStandby) {
		t.Errorf("drain on a standby: %v", err)
	}
	if err := a.SetCapacity("r2", 100); !errors.Is(err, errStandby) {
		t.Errorf("weight on a standby: %v", err)
	}
	// The operator undrains r1 on the active VCP: its hellos follow.
	a.hear(11, "02:00:00:00:b0:01", router("r1", 0, 10000))
	if a.op.drained["r1"] || a.op.capacities["r1"] != 0 {
		t.Fatalf("r1 undrained and unweighted: drained %v, capacities %v", a.op.drained, a.op.capacities)
	}
	// Taken over: the standby's view is the router's; its own word stands
	// against a hello that does not carry it yet.
	a.hear(11, "02:00:00:00:b0:01", router("r1", drained, 10000))
	a.active = true
	if err := a.SetCapacity("r2", 2500); err != nil {
		t.Fatal(err)
	}
	a.hear(12, "02:00:00:00:b0:02", router("r2", 0, 10000))
	if !a.op.drained["r1"] || a.op.capacities["r2"] != 2500 {
		t.Errorf("after the takeover: drained %v, capacities %v", a.op.drained, a.op.capacities)
	}
	// A back-end first heard while active brings its own.
	a.hear(13, "02:00:00:00:b0:03", router("r3", drained, 10000))
	if !a.op.drained["r3"] {
		t.Errorf("r3, drained before this VCP knew it: %v", a.op.drained)
	}
}

// Two VCPs active at once (keepalived's split brain, finding 17): the
// operator undrains r1 through one, the other still holds it drained and
// pushes that. The back-end keeps the newer version (router's
// newerOperator), and the VCP behind takes it from the hellos, active or
// not, rather than undo the operator's last word; one behind in its hello
// is not taken. A change's version is above every one seen, even with a
// clock behind.
func TestOperatorVersionSplitBrain(t *testing.T) {
	a := tableAgent(t, "")
	router := func(flags uint8, version uint64) *dist.Hello {
		return &dist.Hello{Role: dist.RoleRouter, Name: "r1", Flags: flags, Capacity: 10000, HelloIntervalMs: 100, HoldMultiplier: 3, OperatorVersion: version}
	}
	drained := uint8(dist.HelloFlagDraining | dist.HelloFlagDrained)
	a.hear(11, "02:00:00:00:b0:01", router(drained, 0))
	a.active = true
	if err := a.Drain("r1", true); err != nil {
		t.Fatal(err)
	}
	ours := a.op.versions["r1"]
	if now := uint64(time.Now().UnixMilli()); ours == 0 || ours > now || now-ours > 10_000 {
		t.Fatalf("the drain's version %d, want about now (%d)", ours, now)
	}
	m := &dist.BackendConfig{Drained: true, OperatorVersion: ours}
	if operatorApplied(router(drained, 0), m) {
		t.Error("a hello without the drain's version shows it applied")
	}
	// The other VCP undrained it later: r1 says so with its version.
	a.hear(11, "02:00:00:00:b0:01", router(0, ours+5))
	if a.op.drained["r1"] || a.op.versions["r1"] != ours+5 {
		t.Fatalf("an active VCP behind the back-end: drained %v, version %d, want false, %d", a.op.drained["r1"], a.op.versions["r1"], ours+5)
	}
	// A hello behind this VCP's (an old one, late) changes nothing.
	a.hear(11, "02:00:00:00:b0:01", router(drained, ours+1))
	if a.op.drained["r1"] || a.op.versions["r1"] != ours+5 {
		t.Errorf("a hello behind taken: drained %v, version %d", a.op.drained["r1"], a.op.versions["r1"])
	}
	// A version far ahead (a VCP whose clock is ahead): the next change
	// goes above it.
	a.hear(11, "02:00:00:00:b0:01", router(0, 1<<50))
	if err := a.SetCapacity("r1", 5000); err != nil {
		t.Fatal(err)
	}
	if v := a.op.versions["r1"]; v != 1<<50+1 {
		t.Errorf("a weight after a version from a clock ahead: %d, want %d", v, uint64(1<<50+1))
	}
}

// Failover state: taking over resets what was pushed, so that every LB
// gets its ports and table again; giving up stops configuring.
func TestBecomeActiveAndStandby(t *testing.T) {
	a := tableAgent(t, "")
	a.mirrors = &Mirrors{}
	a.pushed[1] = &lbPush{generation: 7, table: "x", ports: "y", sent: time.Now()}
	a.become(true)
	if !a.active || a.pushed[1].table != "" || a.pushed[1].ports != "" || !a.pushed[1].sent.IsZero() || a.pushed[1].generation != 7 {
		t.Fatalf("after taking over: active %v, %+v", a.active, a.pushed[1])
	}
	if !a.mirrors.active.Load() {
		t.Error("the active VCP's mirrors do not send")
	}
	a.become(false)
	if a.active || a.mirrors.active.Load() {
		t.Error("a standby still active or sending")
	}
}

// A back-end whose hello does not show the drain and weight it was sent
// (killed before it kept them) is sent them again.
func TestOperatorApplied(t *testing.T) {
	m := &dist.BackendConfig{Drained: true, Capacity: 7000}
	for _, c := range []struct {
		flags    uint8
		capacity uint32
		want     bool
	}{
		{dist.HelloFlagDraining | dist.HelloFlagDrained | dist.HelloFlagCapacitySet, 7000, true},
		{dist.HelloFlagDraining, 10000, false},
		{dist.HelloFlagDraining | dist.HelloFlagDrained, 10000, false},
		{dist.HelloFlagDraining | dist.HelloFlagDrained | dist.HelloFlagCapacitySet, 5000, false},
	} {
		if got := operatorApplied(&dist.Hello{Flags: c.flags, Capacity: c.capacity}, m); got != c.want {
			t.Errorf("hello flags %#x capacity %d: applied %v, want %v", c.flags, c.capacity, got, c.want)
		}
	}
	if !operatorApplied(&dist.Hello{Capacity: 10000}, &dist.BackendConfig{}) {
		t.Error("nothing asked, nothing shown: not applied")
	}
	h := &dist.Hello{Flags: dist.HelloFlagDraining | dist.HelloFlagDrained | dist.HelloFlagCapacitySet, Capacity: 7000, OperatorVersion: 41}
	if operatorApplied(h, &dist.BackendConfig{Drained: true, Capacity: 7000, OperatorVersion: 42}) {
		t.Error("the same drain and weight of another version: applied")
	}
}

// An LB silent for less than lbGoneGrace (its agent restarting, its
// hellos late) keeps its ports up; silent longer, they are down, as a
// line card pulled out.
func TestSilentLBKeepsItsPorts(t *testing.T) {
	a := tableAgent(t, "")
	a.started = time.Now().Add(-time.Minute)
	e0, _ := net.ParseMAC("02:00:00:00:e0:00")
	lbHello := &dist.Hello{Role: dist.RoleLB, Name: "lb1", HelloIntervalMs: 100, HoldMultiplier: 3, Ports: []dist.PortStatus{
		{Index: 0, Role: dist.PortExternal, VLAN: 10, MAC: e0, Flags: dist.PortFlagUp | dist.PortFlagAdminUp, Name: "e0"}}}
	a.hear(1, "02:00:00:00:0a:01", lbHello)
	now := time.Now()
	a.tick(now)
	if p := a.ports[10]; p == nil || !p.Up {
		t.Fatalf("lb1/e0 heard up: %+v", p)
	}
	a.elements[1].last = now.Add(-500 * time.Millisecond) // dead after its hold, 300 ms
	a.tick(now)
	if p := a.ports[10]; !p.Up {
		t.Errorf("lb1 silent 500 ms: its port %+v, want still up", p)
	}
	a.elements[1].last = now.Add(-3100 * time.Millisecond) // an agent's restart under the soak's load
	a.tick(now)
	if p := a.ports[10]; !p.Up {
		t.Errorf("lb1 silent 3.1 s: its port %+v, want still up", p)
	}
	a.elements[1].last = now.Add(-lbGoneGrace - time.Millisecond)
	a.tick(now)
	if p := a.ports[10]; p.Up {
		t.Errorf("lb1 silent %v: its port %+v, want down", lbGoneGrace, p)
	}
}

// VRRP's "master" is taken only once it has held for two adverts: a
// blip (the machine stood still past VRRP's master-down time, both were
// master for 40 ms) is not a takeover; an active VCP told again is.
func TestTakeoverConfirmed(t *testing.T) {
	a := tableAgent(t, "")
	a.cfg.Standby = &StandbyConfig{AdvertInterval: 20 * time.Millisecond}
	var up takeOver
	if up.elected(a, time.Now()) {
		t.Fatal("a standby took over at once")
	}
	if !up.cancel() || up.confirmed != nil {
		t.Fatal("backup before the confirmation: the takeover still pending")
	}
	if up.cancel() {
		t.Error("nothing pending, yet cancelled")
	}
	start := time.Now()
	up.elected(a, start)
	first := up.confirmed
	up.elected(a, start.Add(10*time.Millisecond)) // told again: the same confirmation
	if up.confirmed != first {
		t.Error("a second master restarted the confirmation")
	}
	<-up.confirmed
	if took := time.Since(start); took < 40*time.Millisecond {
		t.Errorf("confirmed after %v, want two adverts (40 ms)", took)
	}
	a.active = true
	var again takeOver
	if !again.elected(a, time.Now()) || again.confirmed != nil {
		t.Error("an active VCP told master again waits")
	}
}

// The mirrors' link states are set outside the VCP's lock: followPorts
// only records the last one of each mirror and wakes the setter once.
func TestMirrorLinksWanted(t *testing.T) {
	l := newMirrorLinks()
	l.want(12, false, "lb2/e0")
	l.want(12, true, "lb2/e0")
	l.want(11, false, "lb1/e1")
	if len(l.wake) != 1 {
		t.Errorf("%d wake-ups pending, want 1", len(l.wake))
	}
	if got := l.links; got[12] != (mirrorLink{true, "lb2/e0"}) || got[11] != (mirrorLink{false, "lb1/e1"}) || len(got) != 2 {
		t.Errorf("wanted %v, want lb2/e0 up and lb1/e1 down", got)
	}
}

// When every back-end that may carry traffic falls silent at once, the
// tables keep them all rather than none: the VCP deaf (a stall of its
// hello reader), or every back-end's hellos held up together, is likelier
// than every back-end dead, and their data paths forward meanwhile
// (docs/reliability.md, finding 20).
// A drained back-end stays out; one heard again ends it.
func TestEveryBackendSilentKeepsThem(t *testing.T) {
	a := tableAgent(t, "")
	mac, _ := net.ParseMAC("02:00:00:00:10:00")
	a.hear(1, "02:00:00:00:0a:01", &dist.Hello{Role: dist.RoleLB, Name: "lb2", HelloIntervalMs: 100, HoldMultiplier: 3,
		Ports: []dist.PortStatus{{Index: 0, Role: dist.PortInternal, MAC: mac}}})
	for i, name := range []string{"r1", "r2", "r3"} {
		a.hear(uint64(10+i), "02:00:00:00:b0:0"+string('1'+rune(i)), &dist.Hello{Role: dist.RoleRouter, Name: name, Capacity: 1000,
			HelloIntervalMs: 100, HoldMultiplier: 3})
	}
	asActive(a, func() { a.Drain("r2", true) })
	inTable := func() []string {
		_, entries := a.table(a.elements[1])
		var names []string
		for _, e := range entries {
			for _, r := range a.elements {
				if r.mac.String() == e.MAC.String() {
					names = append(names, r.hello.Name)
				}
			}
		}
		return names
	}
	silent := func(ids ...uint64) {
		for _, id := range ids {
			a.elements[id].last = time.Now().Add(-time.Second)
		}
		a.elements[1].last = time.Now() // the LB is heard all along
		a.tick(time.Now())
	}
	silent(10) // r1 dies alone: it leaves
	if got := inTable(); len(got) != 1 || got[0] != "r3" || a.allSilent {
		t.Fatalf("r1 dead, r2 drained: table %v (all silent %v), want r3", got, a.allSilent)
	}
	silent(12) // r3 too: every undrained back-end silent
	if got := inTable(); len(got) != 2 || got[0] != "r1" || got[1] != "r3" || !a.allSilent || a.allSilentCount != 1 {
		t.Fatalf("every undrained back-end silent: table %v (all silent %v, %d times), want r1 and r3 kept", got, a.allSilent, a.allSilentCount)
	}
	a.hear(12, "02:00:00:00:b0:03", &dist.Hello{Role: dist.RoleRouter, Name: "r3", Capacity: 1000, HelloIntervalMs: 100, HoldMultiplier: 3})
	a.tick(time.Now())
	if got := inTable(); len(got) != 1 || got[0] != "r3" || a.allSilent {
		t.Fatalf("r3 heard again: table %v (all silent %v), want r3 alone", got, a.allSilent)
	}
	// Every back-end drained or draining: nothing to keep.
	asActive(a, func() { a.Drain("r3", true); a.Drain("r1", true) })
	silent(12)
	if got := inTable(); len(got) != 0 || a.allSilent {
		t.Errorf("every back-end drained: table %v (all silent %v), want none", got, a.allSilent)
	}
}

// An LB's table as a function of the back-ends alone: the live ones that
// may carry, through each internal port, weighted by capacity to the
// largest's 100 (never 0); every one that may carry when all are silent.
func TestBalanceTable(t *testing.T) {
	mac := func(i byte) net.HardwareAddr { return net.HardwareAddr{2, 0, 0, 0, 0xb0, i} }
	backends := []tableBackend{
		{mac: mac(1), alive: true, mayCarry: true, capacity: 10_000_000},
		{mac: mac(2), alive: true, mayCarry: true, capacity: 5_000_000},
		{mac: mac(3), alive: true, mayCarry: false, capacity: 10_000_000}, // drained
		{mac: mac(4), alive: false, mayCarry: true, capacity: 10_000_000}, // dead
		{mac: mac(5), alive: true, mayCarry: true, capacity: 1},
	}
	weights := func(es []dist.TableEntry) map[string]uint16 {
		w := map[string]uint16{}
		for _, e := range es {
			w[fmt.Sprintf("%d/%s", e.Port, e.MAC)] = e.Weight
		}
		return w
	}
	got := weights(balanceTable([]uint8{1, 2}, backends, false))
	want := map[string]uint16{}
	for _, port := range []int{1, 2} {
		want[fmt.Sprintf("%d/%s", port, mac(1))] = 100
		want[fmt.Sprintf("%d/%s", port, mac(2))] = 50
		want[fmt.Sprintf("%d/%s", port, mac(5))] = 1
	}
	if !maps.Equal(got, want) {
		t.Errorf("table %v, want %v", got, want)
	}
	silent := []tableBackend{{mac: mac(1), mayCarry: true, capacity: 4}, {mac: mac(2), mayCarry: true, capacity: 2}, {mac: mac(3), capacity: 4}}
	if got := weights(balanceTable([]uint8{1}, silent, true)); len(got) != 2 || got["1/"+mac(1).String()] != 100 || got["1/"+mac(2).String()] != 50 {
		t.Errorf("every back-end silent: %v, want the two that may carry, 100 and 50", got)
	}
	if got := balanceTable([]uint8{1}, silent, false); len(got) != 0 {
		t.Errorf("every back-end dead: %v, want none", got)
	}
	if got := balanceTable(nil, backends, false); len(got) != 0 {
		t.Errorf("an LB with no internal port: %v", got)
	}
}
