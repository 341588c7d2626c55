package router

import (
	"errors"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/msr-router/msr/internal/routetable"
	"github.com/msr-router/msr/router/routerapi"
)

// lpm6 is the reference: the longest of routes that contains a.
func lpm6(routes map[netip.Prefix]uint32, a netip.Addr) uint32 {
	for l := 128; l >= 0; l-- {
		p, _ := a.Prefix(l)
		if v, ok := routes[p]; ok {
			return v
		}
	}
	return 0
}

// randomIn is an address inside p (or, half the time, just outside it).
func randomIn(r *rand.Rand, p netip.Prefix) netip.Addr {
	b := p.Addr().As16()
	for i := p.Bits(); i < 128; i++ {
		if r.IntN(2) == 1 {
			b[i/8] |= 0x80 >> (i % 8)
		}
	}
	if r.IntN(2) == 0 && p.Bits() > 0 {
		i := p.Bits() - 1 - r.IntN(min(p.Bits(), 8))
		b[i/8] ^= 0x80 >> (i % 8)
	}
	return netip.AddrFrom16(b)
}

// TestFIB6 holds the trie to the reference on the real IPv6 snapshot and
// nested prefixes of every length: after loading, after changing next
// hops, and after deleting half (groups given back), for both first
// strides.
func TestFIB6(t *testing.T) {
	if routerapi.DefaultFIB6Lines != DefaultFIB6Lines || fib6Levels != int(rtxdpRtLimitRT6LEVELS) || fib6Header != int(rtxdpRtLimitRT6HEADER_WORDS) ||
		fib6LineWords != int(rtxdpRtLimitRT6LINE_WORDS) {
		t.Errorf("routerapi.DefaultFIB6Lines %d, the data path's RT6_LINES %d; the layout differs from bpf/router.h's", routerapi.DefaultFIB6Lines, DefaultFIB6Lines)
	}
	table, err := routetable.Named6("pyasn6")
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(6, 6))
	routes := map[netip.Prefix]uint32{}
	for i, p := range table {
		if i%4 == 0 {
			routes[p] = uint32(1 + r.IntN(1000))
		}
	}
	// Nested prefixes of every length, /0 to /128, on one path, and a
	// few hosts.
	deep := netip.MustParseAddr("2001:db8:1234:5678:9abc:def0:1357:2468")
	for l := 0; l <= 128; l += 1 + r.IntN(6) {
		p, _ := deep.Prefix(l)
		routes[p] = uint32(2000 + l)
	}
	for _, first := range []int{16, 24} {
		tbl0, pool := make([]uint32, 1<<first), make([]uint32, 65536*fib6LineWords)
		f, err := NewFIB6(first, tbl0, pool)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.SetAll(routes); err != nil {
			t.Fatal(err)
		}
		var ps []netip.Prefix
		for p := range routes {
			ps = append(ps, p)
		}
		if most := routerapi.FIB6LinesFor(ps, first); f.LinesUsed() > most || f.LinesUsed() < f.Groups() {
			t.Errorf("first stride %d: %d lines used by %d groups, FIB6LinesFor says at most %d", first, f.LinesUsed(), f.Groups(), most)
		}
		check := func(when string) {
			t.Helper()
			var ps []netip.Prefix
			for p := range routes {
				ps = append(ps, p)
			}
			for i := 0; i < 50_000; i++ {
				a := randomIn(r, ps[r.IntN(len(ps))])
				if got, want := f.Lookup(a), lpm6(routes, a); got != want {
					t.Fatalf("first %d, %s: %s -> %d, want %d", first, when, a, got, want)
				}
			}
			// The arrays hold exactly the routes: another FIB adopts them.
			if g, _ := NewFIB6(first, tbl0, pool); g.Adopt(routes) != nil || g.LinesUsed() != f.LinesUsed() || g.Groups() != f.Groups() {
				t.Fatalf("first %d, %s: the arrays are not the routes' (%v; %d lines, want %d)", first, when, g.Adopt(routes), g.LinesUsed(), f.LinesUsed())
			}
		}
		check("loaded")
		used := f.LinesUsed()
		for p := range routes {
			if r.IntN(3) == 0 {
				routes[p] = uint32(3000 + r.IntN(1000))
				if err := f.Set(p, routes[p]); err != nil {
					t.Fatal(err)
				}
			}
		}
		check("next hops changed")
		for p := range routes {
			if r.IntN(2) == 0 {
				delete(routes, p)
				if err := f.Delete(p); err != nil {
					t.Fatal(err)
				}
			}
		}
		check("half deleted")
		if f.LinesUsed() >= used {
			t.Errorf("first %d: %d lines after deleting half, %d before", first, f.LinesUsed(), used)
		}
		for p := range routes {
			f.Delete(p)
		}
		if f.LinesUsed() != 0 || f.Groups() != 0 || f.Lookup(deep) != 0 {
			t.Errorf("first %d: empty FIB holds %d lines, %s -> %d", first, f.LinesUsed(), deep, f.Lookup(deep))
		}
		// Restore for the next stride.
		for i, p := range table {
			if i%4 == 0 {
				routes[p] = uint32(1 + r.IntN(1000))
			}
		}
		for l := 0; l <= 128; l += 1 + r.IntN(6) {
			p, _ := deep.Prefix(l)
			routes[p] = uint32(2000 + l)
		}
	}
}

func TestFIB6Rejects(t *testing.T) {
	f, _ := NewFIB6(16, make([]uint32, 1<<16), make([]uint32, 3*fib6LineWords))
	for _, c := range []struct {
		p   string
		nhg uint32
	}{{"192.0.2.0/24", 1}, {"::ffff:192.0.2.0/120", 1}, {"2001:db8::/32", 0}, {"2001:db8::/32", fib6GroupFlag}} {
		if err := f.Set(netip.MustParsePrefix(c.p), c.nhg); err == nil {
			t.Errorf("%s -> %d accepted", c.p, c.nhg)
		}
	}
	// Two lines, both taken by a /32 (a group below 2001::/16, then one
	// below 2001:d00::/24): a /32 under another /24 finds none left, and
	// leaves the table as it was.
	if err := f.Set(netip.MustParsePrefix("2001:db8::/32"), 1); err != nil {
		t.Fatal(err)
	}
	if err := f.Set(netip.MustParsePrefix("2001:eb8::/32"), 1); err != ErrFIB6Full {
		t.Errorf("second group: %v, want ErrFIB6Full", err)
	}
	if f.Len() != 1 || f.Groups() != 2 || f.LinesUsed() != 2 || f.Lookup(netip.MustParseAddr("2001:db8::1")) != 1 || f.Lookup(netip.MustParseAddr("2001:eb8::1")) != 0 {
		t.Errorf("after the refusal: %d routes, %d groups, %d lines", f.Len(), f.Groups(), f.LinesUsed())
	}
	if _, err := NewFIB6(12, make([]uint32, 1<<12), make([]uint32, 256)); err == nil {
		t.Error("a first stride of 12 accepted")
	}
}

// TestFIB6Adopt: a new agent takes over the arrays a previous one filled
// (after changes and deletes, so its groups are not in load order) with
// the routes it saved: every lookup the same, later changes as correct as
// on the original; other routes are refused with ErrAdopt.
func TestFIB6Adopt(t *testing.T) {
	table, err := routetable.Named6("pyasn6")
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(9, 9))
	tbl0, groups := make([]uint32, 1<<16), make([]uint32, 65536*fib6LineWords)
	f, err := NewFIB6(16, tbl0, groups)
	if err != nil {
		t.Fatal(err)
	}
	routes := map[netip.Prefix]uint32{}
	for i, p := range table {
		if i%3 == 0 {
			routes[p] = uint32(1 + r.IntN(100))
		}
	}
	if err := f.SetAll(routes); err != nil {
		t.Fatal(err)
	}
	for i, p := range table {
		if i%6 == 0 {
			if err := f.Delete(p); err != nil {
				t.Fatal(err)
			}
			delete(routes, p)
		} else if i%3 == 1 {
			routes[p] = 7
			if err := f.Set(p, 7); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The restarted agent: the same arrays, fresh bookkeeping.
	g, _ := NewFIB6(16, tbl0, groups)
	if err := g.Adopt(routes); err != nil {
		t.Fatal(err)
	}
	if g.LinesUsed() != f.LinesUsed() || g.Len() != len(routes) {
		t.Fatalf("adopted %d lines and %d routes, the original %d and %d", g.LinesUsed(), g.Len(), f.LinesUsed(), len(routes))
	}
	for i, p := range table {
		if i%5 == 0 {
			if err := g.Delete(p); err == nil {
				delete(routes, p)
			}
		} else if i%5 == 1 {
			routes[p] = 9
			if err := g.Set(p, 9); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, p := range table {
		a := randomIn(r, p)
		if got, want := g.Lookup(a), lpm6(routes, a); got != want {
			t.Fatalf("after adopting and changing: %s -> %d, want %d", a, got, want)
		}
	}
	other := maps.Clone(routes)
	other[netip.MustParsePrefix("2001:db8:77::/48")] = 3
	h, _ := NewFIB6(16, tbl0, groups)
	if err := h.Adopt(other); !errors.Is(err, ErrAdopt) {
		t.Errorf("adopting routes the arrays do not hold: %v, want ErrAdopt", err)
	}
}

// randPrefix6 is a prefix near a few places, of any length, so that
// prefixes nest, groups fill densely and sparsely, and runs of equal
// entries meet.
func randPrefix6(r *rand.Rand) netip.Prefix {
	a := [][16]byte{
		{0x20, 0x01, 0x0d, 0xb8}, {0x2a, 0x00}, {0x24, 0x00, 0xcb, 0x00, 0x12}, {0x20, 0x01, 0x0d, 0xb8, 0xff, 0xff, 0xff, 0xff},
	}[r.IntN(4)]
	for i := 0; i < 16; i++ {
		if r.IntN(3) == 0 {
			a[i] ^= byte(r.IntN(256))
		}
	}
	bits := []int{0, 8, 15, 16, 17, 20, 24, 28, 29, 32, 33, 36, 40, 44, 47, 48, 56, 63, 64, 96, 127, 128}[r.IntN(22)]
	p, _ := netip.AddrFrom16(a).Prefix(bits)
	return p
}

// TestFIB6Differential interleaves random adds, changes and deletes with
// lookups, comparing the trie with the reference after every step, and
// its arrays with what another FIB adopts as the same routes.
func TestFIB6Differential(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 8))
	tbl0, pool := make([]uint32, 1<<16), make([]uint32, 32768*fib6LineWords)
	f, _ := NewFIB6(16, tbl0, pool)
	ref := map[netip.Prefix]uint32{}
	var live []netip.Prefix
	for step := 0; step < 20_000; step++ {
		if len(live) > 0 && r.IntN(3) == 0 {
			i := r.IntN(len(live))
			if err := f.Delete(live[i]); err != nil {
				t.Fatal(err)
			}
			delete(ref, live[i])
			live = append(live[:i], live[i+1:]...)
		} else {
			p, nhg := randPrefix6(r), uint32(1+r.IntN(4))
			if err := f.Set(p, nhg); err != nil {
				t.Fatal(err)
			}
			if _, ok := ref[p]; !ok {
				live = append(live, p)
			}
			ref[p] = nhg
		}
		for k := 0; k < 20 && len(live) > 0; k++ {
			a := randomIn(r, live[r.IntN(len(live))])
			if got, want := f.Lookup(a), lpm6(ref, a); got != want {
				t.Fatalf("step %d: lookup %s = %d, want %d (%d routes)", step, a, got, want, len(ref))
			}
		}
		if step%2000 == 1999 {
			if g, _ := NewFIB6(16, tbl0, pool); g.Adopt(ref) != nil || g.LinesUsed() != f.LinesUsed() || g.Groups() != f.Groups() {
				t.Fatalf("step %d: the arrays are not the routes' (%v)", step, g.Adopt(ref))
			}
		}
	}
	for _, p := range live {
		if err := f.Delete(p); err != nil {
			t.Fatal(err)
		}
	}
	if f.LinesUsed() != 0 || f.Groups() != 0 || f.Len() != 0 {
		t.Errorf("after deleting all: %d lines, %d groups, %d routes", f.LinesUsed(), f.Groups(), f.Len())
	}
	for i, v := range tbl0 {
		if v != 0 {
			t.Fatalf("tbl0[%d] = %#x after deleting all", i, v)
		}
	}
}

// TestFIB6Concurrent: lookups of routes that do not change, run while
// others around them are added, changed and deleted, never see anything
// but their route: a group is written to fresh lines before one store
// makes it live, and the lines it leaves are not reused while a lookup
// may still read them. The pool is small, so that lines are reused.
func TestFIB6Concurrent(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	f, _ := NewFIB6(16, make([]uint32, 1<<16), make([]uint32, 2048*fib6LineWords))
	steady := map[netip.Prefix]uint32{}
	for len(steady) < 200 {
		steady[randPrefix6(r)] = 7
	}
	if err := f.SetAll(steady); err != nil {
		t.Fatal(err)
	}
	var probes []netip.Addr
	var want []uint32
	var changing []netip.Prefix
	for len(changing) < 300 {
		if p := randPrefix6(r); steady[p] == 0 {
			changing = append(changing, p)
		}
	}
	all := maps.Clone(steady)
	for _, p := range changing {
		all[p] = 1
	}
	for len(probes) < 2000 {
		// An address whose answer is its steady route's whatever the
		// changing ones do.
		ps := slices.Collect(maps.Keys(steady))
		a := randomIn(r, ps[r.IntN(len(ps))])
		if w := lpm6(steady, a); w == lpm6(all, a) {
			probes, want = append(probes, a), append(want, w)
		}
	}
	var stop atomic.Bool
	var wrong, looked atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			for i, a := range probes {
				if f.Lookup(a) != want[i] {
					wrong.Add(1)
				}
			}
			looked.Add(int64(len(probes)))
		}
	}()
	deadline := time.Now().Add(2 * time.Second)
	for n := 0; time.Now().Before(deadline) || n < 2000; n++ {
		p := changing[r.IntN(len(changing))]
		if _, ok := f.Routes().Get(p); ok && r.IntN(2) == 0 {
			if err := f.Delete(p); err != nil {
				t.Fatal(err)
			}
		} else if err := f.Set(p, uint32(1+r.IntN(5))); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	<-done
	if wrong.Load() > 0 || looked.Load() == 0 {
		t.Errorf("%d of %d lookups of unchanged routes saw something else", wrong.Load(), looked.Load())
	}
}

// TestFIB6Hostile: arrays a previous agent left damaged (words of the
// pool and tbl0 overwritten at random) are refused by Adopt with
// ErrAdopt, never a panic; lookups over them stay within the arrays; and
// Repair makes them hold exactly the routes again.
func TestFIB6Hostile(t *testing.T) {
	table, err := routetable.Named6("pyasn6")
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(6, 1))
	routes := map[netip.Prefix]uint32{}
	for i, p := range table {
		if i%2 == 0 {
			routes[p] = uint32(1 + r.IntN(50))
		}
	}
	tbl0, pool := make([]uint32, 1<<16), make([]uint32, 32768*fib6LineWords)
	f, _ := NewFIB6(16, tbl0, pool)
	if err := f.SetAll(routes); err != nil {
		t.Fatal(err)
	}
	repaired := 0
	for round := 0; round < 20; round++ {
		for k := 0; k < 1+round; k++ {
			if r.IntN(4) == 0 {
				tbl0[r.IntN(len(tbl0))] = r.Uint32()
			} else {
				line := 1 + r.IntN(f.pool.used)
				pool[line*fib6LineWords+r.IntN(fib6LineWords)] = []uint32{r.Uint32(), 0, fib6GroupFlag | r.Uint32(), 0xffffffff}[r.IntN(4)]
			}
		}
		for _, p := range table[:2000] {
			f.Lookup(randomIn(r, p)) // must not panic
		}
		g, _ := NewFIB6(16, tbl0, pool)
		if err := g.Adopt(routes); err == nil {
			continue // the damage was to lines no group uses
		} else if !errors.Is(err, ErrAdopt) {
			t.Fatalf("round %d: %v, want ErrAdopt", round, err)
		}
		if _, err := g.Repair(routes); err != nil {
			t.Fatalf("round %d: repair: %v", round, err)
		}
		repaired++
		if h, _ := NewFIB6(16, tbl0, pool); h.Adopt(routes) != nil {
			t.Fatalf("round %d: after the repair the arrays are not the routes': %v", round, h.Adopt(routes))
		}
		for _, p := range table {
			if a := randomIn(r, p); g.Lookup(a) != lpm6(routes, a) {
				t.Fatalf("round %d: after the repair %s -> %d, want %d", round, a, g.Lookup(a), lpm6(routes, a))
			}
		}
		f = g
	}
	if repaired < 10 {
		t.Errorf("only %d of 20 rounds damaged what Adopt reads", repaired)
	}
}
