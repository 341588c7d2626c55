package router

import (
	"errors"
	"maps"
	"math/rand/v2"
	"net/netip"
	"testing"

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
	if routerapi.DefaultFIB6Groups != DefaultFIB6Groups {
		t.Errorf("routerapi.DefaultFIB6Groups %d, the data path's RT6_GROUPS %d", routerapi.DefaultFIB6Groups, DefaultFIB6Groups)
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
		f, err := NewFIB6(first, make([]uint32, 1<<first), make([]uint32, 16384*256))
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
		if want := routerapi.FIB6GroupsFor(ps, first); f.GroupsUsed() != want {
			t.Errorf("first stride %d: %d groups used, FIB6GroupsFor says %d", first, f.GroupsUsed(), want)
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
		}
		check("loaded")
		used := f.GroupsUsed()
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
		if f.GroupsUsed() >= used {
			t.Errorf("first %d: %d groups after deleting half, %d before", first, f.GroupsUsed(), used)
		}
		for p := range routes {
			f.Delete(p)
		}
		if f.GroupsUsed() != 0 || f.Lookup(deep) != 0 {
			t.Errorf("first %d: empty FIB holds %d groups, %s -> %d", first, f.GroupsUsed(), deep, f.Lookup(deep))
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
	f, _ := NewFIB6(16, make([]uint32, 1<<16), make([]uint32, 2*256))
	for _, c := range []struct {
		p   string
		nhg uint32
	}{{"192.0.2.0/24", 1}, {"::ffff:192.0.2.0/120", 1}, {"2001:db8::/32", 0}, {"2001:db8::/32", fib6GroupFlag}} {
		if err := f.Set(netip.MustParsePrefix(c.p), c.nhg); err == nil {
			t.Errorf("%s -> %d accepted", c.p, c.nhg)
		}
	}
	// Two groups, both taken by a /32 (below 2001::/16, then below
	// 2001:d00::/24): a /32 under another /24 finds none left.
	if err := f.Set(netip.MustParsePrefix("2001:db8::/32"), 1); err != nil {
		t.Fatal(err)
	}
	if err := f.Set(netip.MustParsePrefix("2001:eb8::/32"), 1); err != ErrFIB6Full {
		t.Errorf("second group: %v, want ErrFIB6Full", err)
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
	tbl0, groups := make([]uint32, 1<<16), make([]uint32, 16384*256)
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
	if g.GroupsUsed() != f.GroupsUsed() || g.Len() != len(routes) {
		t.Fatalf("adopted %d groups and %d routes, the original %d and %d", g.GroupsUsed(), g.Len(), f.GroupsUsed(), len(routes))
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
