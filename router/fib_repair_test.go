package router

import (
	"errors"
	"maps"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/msr-router/msr/internal/routetable"
)

// A restarted agent's saved routes are behind its data path (routes
// changed after the save): Adopt refuses the arrays, Repair makes them
// hold the saved routes by rewriting only what differs, and while it
// does, a lookup of an address whose route did not change never sees
// anything else (the data path forwards on).
func TestFIBRepair(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	a := newTestFIB(t)
	saved := map[netip.Prefix]uint32{}
	for range 3000 {
		p := randPrefix(r)
		saved[p] = uint32(1 + r.IntN(9))
		if err := a.Set(p, saved[p]); err != nil {
			t.Fatal(err)
		}
	}
	// The churn after the save: the data path moves on.
	now := maps.Clone(saved)
	var touched []netip.Prefix
	for i := range 600 {
		p := randPrefix(r)
		if _, ok := now[p]; ok && i%2 == 0 {
			if err := a.Delete(p); err != nil {
				t.Fatal(err)
			}
			delete(now, p)
		} else {
			now[p] = uint32(10 + r.IntN(9))
			if err := a.Set(p, now[p]); err != nil {
				t.Fatal(err)
			}
		}
		touched = append(touched, p)
	}
	if b, _ := NewFIB(a.tbl24, a.tbl8); !errors.Is(b.Adopt(saved), ErrAdopt) {
		t.Fatal("Adopt took arrays that are ahead of the saved routes")
	}
	// Addresses whose route is the same before and after: watched
	// while the repair runs.
	var steady []netip.Addr
	var live []netip.Prefix
	for p := range saved {
		live = append(live, p)
	}
	live = append(live, touched...)
	oldRef, newRef := refLPM(now), refLPM(saved)
	for len(steady) < 2000 {
		if x := probe(r, live); oldRef.lookup(x) == newRef.lookup(x) {
			steady = append(steady, x)
		}
	}
	c, _ := NewFIB(a.tbl24, a.tbl8)
	repairWatched(t, func() (int, error) { return c.Repair(saved) }, steady, c.Lookup, newRef.lookup)
	for range 20000 {
		if x := probe(r, live); c.Lookup(x) != newRef.lookup(x) {
			t.Fatalf("after the repair: %s -> %d, want %d", x, c.Lookup(x), newRef.lookup(x))
		}
	}
	// The arrays hold exactly the saved routes now, and the repairer's
	// bookkeeping is right: a further adopter takes them, and changes
	// made after the repair are correct.
	if d, _ := NewFIB(a.tbl24, a.tbl8); d.Adopt(saved) != nil || d.Tbl8Used() != c.Tbl8Used() {
		t.Errorf("after the repair the arrays do not hold the saved routes alone (%d tbl8 groups in use, repairer says %d)", d.Tbl8Used(), c.Tbl8Used())
	}
	ref := refLPM(maps.Clone(saved))
	for i := range 2000 {
		p := randPrefix(r)
		if _, ok := ref[p]; ok && i%2 == 0 {
			if err := c.Delete(p); err != nil {
				t.Fatal(err)
			}
			delete(ref, p)
		} else {
			ref[p] = 42
			if err := c.Set(p, 42); err != nil {
				t.Fatal(err)
			}
		}
		live = append(live, p)
		if x := probe(r, live); c.Lookup(x) != ref.lookup(x) {
			t.Fatalf("changing after the repair, step %d: %s -> %d, want %d", i, x, c.Lookup(x), ref.lookup(x))
		}
	}
}

// FIB6.Repair, as FIB.Repair: the IPv6 trie over the 2015 table.
func TestFIB6Repair(t *testing.T) {
	table, err := routetable.Named6("pyasn6")
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	tbl0, groups := make([]uint32, 1<<16), make([]uint32, 65536*fib6LineWords)
	f, err := NewFIB6(16, tbl0, groups)
	if err != nil {
		t.Fatal(err)
	}
	saved := map[netip.Prefix]uint32{}
	for i, p := range table {
		if i%3 == 0 {
			saved[p] = uint32(1 + r.IntN(100))
		}
	}
	if err := f.SetAll(saved); err != nil {
		t.Fatal(err)
	}
	now := maps.Clone(saved)
	for i, p := range table {
		switch i % 7 {
		case 0: // withdrawn after the save
			if _, ok := now[p]; ok {
				if err := f.Delete(p); err != nil {
					t.Fatal(err)
				}
				delete(now, p)
			}
		case 1, 2: // new, or moved to another group
			now[p] = 200
			if err := f.Set(p, 200); err != nil {
				t.Fatal(err)
			}
		}
	}
	if g, _ := NewFIB6(16, tbl0, groups); !errors.Is(g.Adopt(saved), ErrAdopt) {
		t.Fatal("Adopt took arrays that are ahead of the saved routes")
	}
	var steady []netip.Addr
	for len(steady) < 2000 {
		if x := randomIn(r, table[r.IntN(len(table))]); lpm6(now, x) == lpm6(saved, x) {
			steady = append(steady, x)
		}
	}
	g, _ := NewFIB6(16, tbl0, groups)
	repairWatched(t, func() (int, error) { return g.Repair(saved) }, steady, g.Lookup, func(x netip.Addr) uint32 { return lpm6(saved, x) })
	for _, p := range table {
		if x := randomIn(r, p); g.Lookup(x) != lpm6(saved, x) {
			t.Fatalf("after the repair: %s -> %d, want %d", x, g.Lookup(x), lpm6(saved, x))
		}
	}
	if h, _ := NewFIB6(16, tbl0, groups); h.Adopt(saved) != nil || h.LinesUsed() != g.LinesUsed() {
		t.Errorf("after the repair the arrays do not hold the saved routes alone (%d lines in use, repairer says %d)", h.LinesUsed(), g.LinesUsed())
	}
	for i, p := range table {
		if i%5 == 2 {
			saved[p] = 9
			if err := g.Set(p, 9); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, p := range table {
		if x := randomIn(r, p); g.Lookup(x) != lpm6(saved, x) {
			t.Fatalf("changing after the repair: %s -> %d, want %d", x, g.Lookup(x), lpm6(saved, x))
		}
	}
}

// repairWatched runs repair while a reader looks the steady addresses
// (whose route is the same before and after) up again and again, as the
// data path does: none may ever answer other than want. The repair must
// write something.
func repairWatched(t *testing.T, repair func() (int, error), steady []netip.Addr, lookup, want func(netip.Addr) uint32) {
	t.Helper()
	var stop atomic.Bool
	var wrong atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			for _, x := range steady {
				if lookup(x) != want(x) {
					wrong.Add(1)
				}
			}
		}
	}()
	n, err := repair()
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Error("repair wrote nothing")
	}
	if wrong.Load() > 0 {
		t.Errorf("%d lookups of unchanged routes saw something else during the repair", wrong.Load())
	}
}
