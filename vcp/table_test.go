package vcp

import (
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
	return &Agent{cfg: cfg, log: quiet(), elements: map[uint64]*element{}, drained: map[string]bool{},
		capacities: map[string]uint32{}, loads: map[string]*loadState{}, pushed: map[uint64]*lbPush{}}
}

func (a *Agent) hear(id uint64, mac string, h *dist.Hello) {
	m, _ := net.ParseMAC(mac)
	a.heard(id, m, h)
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
	// console replaces the configured one.
	a.Drain("r2", true)
	a.elements[13].last = time.Now().Add(-time.Second)
	a.tick(time.Now()) // notices r4's death; pushes nothing (no socket: not active)
	a.SetCapacity("r3", 10000)
	if _, w := weights(); len(w) != 2 || w["r1"][0] != 100 || w["r3"][0] != 100 {
		t.Fatalf("after drain, death and a capacity: %v", w)
	}
	// Back again.
	a.Drain("r2", false)
	a.hear(13, "02:00:00:00:b0:04", &dist.Hello{Role: dist.RoleRouter, Name: "r4", Capacity: 2500, HelloIntervalMs: 100, HoldMultiplier: 3})
	if _, w := weights(); len(w) != 4 {
		t.Fatalf("after undrain and return: %v", w)
	}
	if err := a.Drain("r9", true); err == nil {
		t.Error("drained a back-end that does not exist")
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
