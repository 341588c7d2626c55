package vcp

import (
	"math"
	"testing"
	"time"

	"github.com/msr-router/msr/dist"
)

// TestLoadFactor: a back-end that drops for want of capacity gets its
// weight cut to the share it carried (with a margin), within one window;
// one that drops nothing keeps it; after loadRecoverEvery of calm it
// earns some back; counters that begin again (a restarted data path)
// judge nothing. The LB's table follows the factor.
func TestLoadFactor(t *testing.T) {
	a := tableAgent(t, "")
	a.hear(1, "02:00:00:00:0a:01", &dist.Hello{Role: dist.RoleLB, Name: "lb1", HelloIntervalMs: 100, HoldMultiplier: 3,
		Ports: []dist.PortStatus{{Index: 0, Role: dist.PortInternal, MAC: []byte{2, 0, 0, 0, 0x10, 0}}}})
	start := time.Now()
	hello := func(name string, rx, dropped uint64) *dist.Hello {
		return &dist.Hello{Role: dist.RoleRouter, Name: name, Capacity: 10000, HelloIntervalMs: 100, HoldMultiplier: 3,
			Ports: []dist.PortStatus{{Index: 0, Role: dist.PortInternal, MAC: []byte{2, 0, 0, 0, 0xb0, 1}, RxPackets: rx, RxDropped: dropped}}}
	}
	at := func(d time.Duration, name string, rx, dropped uint64) {
		a.mu.Lock()
		a.observeLoad(name, hello(name, rx, dropped), start.Add(d))
		a.mu.Unlock()
	}
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }

	at(0, "r1", 0, 0)
	at(0, "r2", 0, 0)
	at(500*time.Millisecond, "r2", 5000, 2500) // less than a window: not judged yet
	if f := a.loadFactor("r2"); f != 1 {
		t.Fatalf("judged within half a window: %v", f)
	}
	at(time.Second, "r1", 10000, 0)
	at(time.Second, "r2", 10000, 5000) // dropped half
	if f := a.loadFactor("r2"); !near(f, 0.5*loadMargin) || a.loadFactor("r1") != 1 {
		t.Fatalf("after dropping half: r2 %v (want %v), r1 %v", a.loadFactor("r2"), 0.5*loadMargin, a.loadFactor("r1"))
	}
	// The table follows: r2's weight is about half of r1's.
	a.hear(10, "02:00:00:00:b0:01", hello("r1", 10000, 0))
	a.hear(11, "02:00:00:00:b0:02", hello("r2", 10000, 5000))
	_, entries := a.table(a.elements[1])
	if len(entries) != 2 || entries[0].Weight != 100 || entries[1].Weight != 48 {
		t.Fatalf("table after r2 dropped half: %+v", entries)
	}
	// Tiny drops (under loadDropRatio) are not overload; but they are not calm either.
	at(2*time.Second, "r2", 20000, 5010)
	if f := a.loadFactor("r2"); !near(f, 0.5*loadMargin) {
		t.Fatalf("after 10 drops in 10,000: %v", f)
	}
	// Calm for loadRecoverEvery: the factor rises a step.
	at(2*time.Second+loadRecoverEvery, "r2", 900000, 5010)
	if f := a.loadFactor("r2"); !near(f, 0.5*loadMargin*loadRecoverStep) {
		t.Fatalf("after %v of calm: %v, want %v", loadRecoverEvery, f, 0.5*loadMargin*loadRecoverStep)
	}
	// A restarted data path (counters from 0) judges nothing.
	before := a.loadFactor("r2")
	at(3*time.Second+loadRecoverEvery, "r2", 100, 90)
	if f := a.loadFactor("r2"); f != before {
		t.Fatalf("counters that began again changed the factor: %v, was %v", f, before)
	}
	// Never below loadMinFactor.
	for i := range 20 {
		at(time.Duration(i+4)*time.Second+loadRecoverEvery, "r2", 100+uint64(i+1)*1000, 90+uint64(i+1)*999)
	}
	if f := a.loadFactor("r2"); !near(f, loadMinFactor) {
		t.Fatalf("after dropping nearly everything 20 times: %v, want %v", f, loadMinFactor)
	}
}
