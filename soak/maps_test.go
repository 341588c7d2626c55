package soak

import (
	"strings"
	"testing"

	"github.com/cilium/ebpf"
)

// TestSoakMapsBounds: a hash map or a pool that fills breaks the
// invariant, an LRU map that fills does not (it evicts by design); a map
// that grows by more than a tenth from its mark does.
func TestSoakMapsBounds(t *testing.T) {
	s := newSoakMaps()
	s.observe(map[string]mapFill{"r1/rt_neighbors": {4, 65536, false}, "lb1/lb_flowlets": {1000, 1000, true}, "r1/rt_local": {10, 1024, false}}, false)
	s.observe(map[string]mapFill{"r1/rt_neighbors": {5, 65536, false}, "lb1/lb_flowlets": {1000, 1000, true}, "r1/rt_local": {10, 1024, false}}, true)
	if b := s.broken(); len(b) != 0 {
		t.Errorf("nothing full nor grown: %v", b)
	}
	s.observe(map[string]mapFill{"r1/rt_neighbors": {40, 65536, false}, "lb1/lb_flowlets": {1000, 1000, true}, "r1/rt_local": {1024, 1024, false}}, true)
	s.observe(map[string]mapFill{"lb2/lb_flowlets": {200, 65536, true}}, true)
	s.observe(map[string]mapFill{"lb2/lb_flowlets": {900, 65536, true}}, true) // new flows: an LRU map's growth is not a leak
	b := s.broken()
	if len(b) != 3 || b[0] != "r1/rt_local full (1024 of 1024)" || b[1] != "r1/rt_local grew 10 → 1024 entries" || b[2] != "r1/rt_neighbors grew 5 → 40 entries" {
		t.Errorf("rt_local full and rt_neighbors grown: %v", b)
	}
	if d := s.detail(); !strings.HasPrefix(d, "4 maps") || !strings.Contains(d, "lb1/lb_flowlets 1000/1000") {
		t.Errorf("detail: %s", d)
	}
}

// TestMapEntries counts a kernel hash map's keys.
func TestMapEntries(t *testing.T) {
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: 4, ValueSize: 4, MaxEntries: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for i := range uint32(5) {
		if err := m.Put(i, i); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := mapEntries(m); n != 5 || err != nil {
		t.Errorf("mapEntries: %d, %v; want 5", n, err)
	}
}
