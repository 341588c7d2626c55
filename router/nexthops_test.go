package router

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// fakeTables is the data path's rt_nexthops and rt_nhgroups, as written.
type fakeTables struct {
	nexthops map[uint32]nhKey
	groups   map[uint32][]uint32
}

func newFakeTables() *fakeTables {
	return &fakeTables{nexthops: map[uint32]nhKey{}, groups: map[uint32][]uint32{}}
}

func (f *fakeTables) SetNextHop(id uint32, gw netip.Addr, port uint16) error {
	f.nexthops[id] = nhKey{gw: gw, port: port}
	return nil
}

func (f *fakeTables) SetGroup(id uint32, nhs []uint32) error {
	f.groups[id] = slices.Clone(nhs)
	return nil
}

// gateway n is a distinct address of 10/8 for every n below 2^24.
func gateway(n int) nhKey {
	return nhKey{gw: netip.AddrFrom4([4]byte{10, byte(n >> 16), byte(n >> 8), byte(n)}), port: uint16(n % 3)}
}

// A million route changes, each giving one of 10,000 routes a next-hop set
// never seen before (two gateways, one shared with the previous change):
// over the run far more sets and gateways than the tables hold, never more
// than 10,000 sets at once. Ids are freed with the last route that used
// them, so the tables never fill; and what the data path holds for every
// route is its own next hops, whatever ids were reused.
func TestNextHopIDsAreFreed(t *testing.T) {
	const routes, changes = 10_000, 1_000_000
	f := newFakeTables()
	nh := newNextHops(f)
	groupOf := make([]uint32, routes)
	keysOf := make([][]nhKey, routes)
	for k := range changes {
		r := k % routes
		keys := []nhKey{gateway(k), gateway(k + 1)}
		g, err := nh.acquire(keys)
		if err != nil {
			t.Fatalf("change %d: %v", k, err)
		}
		nh.release(groupOf[r])
		groupOf[r], keysOf[r] = g, keys
	}
	if len(nh.groups) != routes || len(nh.keys) > 2*routes {
		t.Errorf("%d groups and %d next hops live for %d routes", len(nh.groups), len(nh.keys), routes)
	}
	for r, g := range groupOf {
		var got []nhKey
		for _, id := range f.groups[g] {
			got = append(got, f.nexthops[id])
		}
		if !sameKeys(got, keysOf[r]) {
			t.Fatalf("route %d: the data path's group %d holds %v, want %v", r, g, got, keysOf[r])
		}
	}
	for r := range groupOf {
		nh.release(groupOf[r])
	}
	if len(nh.groups) != 0 || len(nh.keys) != 0 || len(nh.ids) != 0 || len(nh.groupIDs) != 0 {
		t.Errorf("with no route left: %d groups, %d next hops", len(nh.groups), len(nh.keys))
	}
}

func sameKeys(a, b []nhKey) bool {
	key := func(k nhKey) string { return k.gw.String() + "/" + string(rune('0'+k.port)) }
	as, bs := make([]string, len(a)), make([]string, len(b))
	for i := range a {
		as[i] = key(a[i])
	}
	for i := range b {
		bs[i] = key(b[i])
	}
	slices.Sort(as)
	slices.Sort(bs)
	return slices.Equal(as, bs)
}

// A table that is truly full says which, how big, and what to change; and
// the failed route leaves nothing behind.
func TestNextHopTableFull(t *testing.T) {
	nh := newNextHops(newFakeTables())
	var err error
	n := 0
	for ; err == nil; n++ {
		_, err = nh.acquire([]nhKey{gateway(n)})
	}
	if n != MaxNextHops {
		t.Errorf("the table took %d next hops, its size is %d", n-1, MaxNextHops-1)
	}
	for _, want := range []string{"next-hop table", "rt_nexthops", "65535", "RT_MAX_NEXTHOPS", "make generate"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if len(nh.keys) != MaxNextHops-1 || len(nh.groups) != MaxNextHops-1 {
		t.Errorf("after the failure: %d next hops, %d groups", len(nh.keys), len(nh.groups))
	}
	// One route gone: its next hop's id serves the next.
	nh.release(1)
	if _, err := nh.acquire([]nhKey{gateway(n + 1)}); err != nil {
		t.Errorf("after a release: %v", err)
	}
}

// Restored from a saved state, the counts are the routes': releasing every
// route frees every id, and a group no route uses is free at once.
func TestNextHopsRestore(t *testing.T) {
	f := newFakeTables()
	nh := newNextHops(f)
	routes := map[netip.Prefix]uint32{}
	for i, p := range []string{"1.0.0.0/8", "2.0.0.0/8", "3.0.0.0/8"} {
		g, err := nh.acquire([]nhKey{gateway(i % 2)})
		if err != nil {
			t.Fatal(err)
		}
		routes[netip.MustParsePrefix(p)] = g
	}
	orphan, _ := nh.acquire([]nhKey{gateway(7)}) // saved, but no route uses it
	keys := map[uint32]nhKey{}
	for id, k := range nh.keys {
		keys[id] = k
	}
	restored := newNextHops(f)
	restored.restore(keys, nh.groups, routes)
	if _, ok := restored.groups[orphan]; ok || len(restored.groups) != 2 || len(restored.keys) != 2 {
		t.Errorf("restored %d groups, %d next hops; the unused group %d kept: %v", len(restored.groups), len(restored.keys), orphan, restored.groups)
	}
	for _, g := range routes {
		restored.release(g)
	}
	if len(restored.groups) != 0 || len(restored.keys) != 0 {
		t.Errorf("after every route's release: %v %v", restored.groups, restored.keys)
	}
	if g, err := restored.acquire([]nhKey{gateway(9)}); err != nil || g == 0 {
		t.Errorf("a new group after the restore: %d %v", g, err)
	}
}
