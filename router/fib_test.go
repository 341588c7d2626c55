package router

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/msr-router/msr/internal/routetable"
)

// refLPM is the reference: one map per prefix length, searched from /32
// down. Slow, and obviously right.
type refLPM map[netip.Prefix]uint32

func (r refLPM) lookup(a netip.Addr) uint32 {
	for l := 32; l >= 0; l-- {
		p, _ := a.Prefix(l)
		if v, ok := r[p]; ok {
			return v
		}
	}
	return 0
}

func newTestFIB(t testing.TB) *FIB {
	f, err := NewFIB(make([]uint32, Tbl24Entries), make([]uint32, Tbl8Groups*256))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func randPrefix(r *rand.Rand) netip.Prefix {
	// Lengths as in a real table: mostly /16-/24, some long; /0 and /8
	// (16M and 64k entries to write) now and then.
	lens := []int{12, 16, 19, 20, 22, 23, 24, 24, 24, 25, 26, 28, 30, 31, 32}
	l := lens[r.IntN(len(lens))]
	if r.IntN(300) == 0 {
		l = []int{0, 8}[r.IntN(2)]
	}
	a := netip.AddrFrom4([4]byte{byte(r.IntN(4) + 10), byte(r.IntN(4)), byte(r.IntN(256)), byte(r.IntN(256))})
	p, _ := a.Prefix(l)
	return p
}

// probe picks addresses near the prefixes in play, where the edges are.
func probe(r *rand.Rand, ps []netip.Prefix) netip.Addr {
	if len(ps) == 0 || r.IntN(4) == 0 {
		return netip.AddrFrom4([4]byte{byte(r.IntN(4) + 10), byte(r.IntN(4)), byte(r.IntN(256)), byte(r.IntN(256))})
	}
	p := ps[r.IntN(len(ps))]
	a := u32(p.Addr()) + uint32(r.IntN(3)) - 1
	if r.IntN(2) == 0 {
		a = u32(p.Addr()) | (1<<(32-p.Bits()) - 1) + uint32(r.IntN(3)) - 1
	}
	return netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)})
}

// TestFIBDifferential interleaves random adds, changes and deletes with
// lookups, comparing DIR-24-8 with the reference after every step.
func TestFIBDifferential(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	f := newTestFIB(t)
	ref := refLPM{}
	var live []netip.Prefix
	for step := 0; step < 10000; step++ {
		if len(live) > 0 && r.IntN(3) == 0 {
			i := r.IntN(len(live))
			p := live[i]
			if err := f.Delete(p); err != nil {
				t.Fatal(err)
			}
			delete(ref, p)
			live = append(live[:i], live[i+1:]...)
		} else {
			p := randPrefix(r)
			nhg := uint32(1 + r.IntN(100))
			if err := f.Set(p, nhg); err != nil {
				t.Fatal(err)
			}
			if _, ok := ref[p]; !ok {
				live = append(live, p)
			}
			ref[p] = nhg
		}
		for k := 0; k < 20; k++ {
			a := probe(r, live)
			if got, want := f.Lookup(a), ref.lookup(a); got != want {
				t.Fatalf("step %d: lookup %s = %d, want %d (%d routes)", step, a, got, want, len(ref))
			}
		}
	}
	// Deleting everything leaves an empty table and every tbl8 group free.
	for _, p := range live {
		if err := f.Delete(p); err != nil {
			t.Fatal(err)
		}
	}
	if f.Tbl8Used() != 0 || f.Len() != 0 {
		t.Errorf("after deleting all: %d tbl8 groups used, %d routes", f.Tbl8Used(), f.Len())
	}
	for i, v := range f.tbl24 {
		if v != 0 {
			t.Fatalf("tbl24[%d] = %#x after deleting all", i, v)
		}
	}
}

func TestFIBEdges(t *testing.T) {
	f := newTestFIB(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(f.Set(netip.MustParsePrefix("0.0.0.0/0"), 1))
	must(f.Set(netip.MustParsePrefix("10.0.0.0/8"), 2))
	must(f.Set(netip.MustParsePrefix("10.1.2.3/32"), 3))
	must(f.Set(netip.MustParsePrefix("10.1.2.0/25"), 4))
	for a, want := range map[string]uint32{"1.2.3.4": 1, "10.9.9.9": 2, "10.1.2.3": 3, "10.1.2.4": 4, "10.1.2.200": 2, "255.255.255.255": 1} {
		if got := f.Lookup(netip.MustParseAddr(a)); got != want {
			t.Errorf("%s -> %d, want %d", a, got, want)
		}
	}
	must(f.Delete(netip.MustParsePrefix("10.1.2.0/25")))
	if got := f.Lookup(netip.MustParseAddr("10.1.2.4")); got != 2 {
		t.Errorf("after delete: 10.1.2.4 -> %d, want 2", got)
	}
	must(f.Delete(netip.MustParsePrefix("10.1.2.3/32")))
	if f.Tbl8Used() != 0 {
		t.Errorf("tbl8 group not freed")
	}
	if f.Delete(netip.MustParsePrefix("10.1.2.3/32")) == nil {
		t.Error("deleting a missing route succeeded")
	}
	if f.Set(netip.MustParsePrefix("10.0.0.0/8"), 0) == nil || f.Set(netip.MustParsePrefix("::/0"), 1) == nil {
		t.Error("bad routes accepted")
	}
	// Exhaust tbl8: a /25 in Tbl8Groups+1 different /24s.
	for i := 0; i <= Tbl8Groups; i++ {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{20, byte(i >> 8), byte(i), 0}), 25)
		err := f.Set(p, 5)
		if i < Tbl8Groups && err != nil {
			t.Fatal(err)
		}
		if i == Tbl8Groups && err != ErrTbl8Full {
			t.Errorf("group %d: %v, want ErrTbl8Full", i, err)
		}
	}
}

// TestFIBInternetTable loads the full RouteViews table and checks
// DIR-24-8 against the reference at every prefix's edges and at random
// addresses, then deletes half the table and checks again.
func TestFIBInternetTable(t *testing.T) {
	ps, err := routetable.Load(routetable.PyASN)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) < 500_000 {
		t.Fatalf("%d prefixes in %s", len(ps), routetable.PyASN)
	}
	f := newTestFIB(t)
	ref := refLPM{}
	routes := map[netip.Prefix]uint32{}
	for i, p := range ps {
		routes[p] = uint32(1 + i%1000)
		ref[p] = routes[p]
	}
	if err := f.SetAll(routes); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	check := func(what string) {
		for k := 0; k < 200_000; k++ {
			a := probe(r, ps)
			if got, want := f.Lookup(a), ref.lookup(a); got != want {
				t.Fatalf("%s: %s -> %d, want %d", what, a, got, want)
			}
		}
	}
	check("full table")
	for i, p := range ps {
		if i%2 == 0 {
			if err := f.Delete(p); err != nil {
				t.Fatal(err)
			}
			delete(ref, p)
		}
	}
	check("half deleted")
	t.Logf("%d prefixes, %d tbl8 groups", len(ps), f.Tbl8Used())
}

// TestFIBAdopt: a FIB built by one "agent" is adopted by another over the
// same arrays, whatever order of operations built it; wrong routes are
// refused.
func TestFIBAdopt(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	a := newTestFIB(t)
	routes := map[netip.Prefix]uint32{}
	for i := 0; i < 3000; i++ {
		p := randPrefix(r)
		routes[p] = uint32(1 + r.IntN(9))
		if err := a.Set(p, routes[p]); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			for q := range routes {
				a.Delete(q)
				delete(routes, q)
				break
			}
		}
	}
	b, _ := NewFIB(a.tbl24, a.tbl8)
	if err := b.Adopt(routes); err != nil {
		t.Fatal(err)
	}
	if b.Tbl8Used() != a.Tbl8Used() {
		t.Errorf("adopted %d tbl8 groups, the builder used %d", b.Tbl8Used(), a.Tbl8Used())
	}
	// The adopter changes routes incrementally and correctly.
	ref := refLPM{}
	for p, v := range routes {
		ref[p] = v
	}
	var live []netip.Prefix
	for p := range routes {
		live = append(live, p)
	}
	for i := 0; i < 2000; i++ {
		if i%2 == 0 && len(live) > 0 {
			p := live[len(live)-1]
			live = live[:len(live)-1]
			if err := b.Delete(p); err != nil {
				t.Fatal(err)
			}
			delete(ref, p)
		} else {
			p := randPrefix(r)
			if err := b.Set(p, 42); err != nil {
				t.Fatal(err)
			}
			if _, ok := ref[p]; !ok {
				live = append(live, p)
			}
			ref[p] = 42
		}
		a := probe(r, live)
		if got, want := b.Lookup(a), ref.lookup(a); got != want {
			t.Fatalf("after adoption, step %d: %s -> %d, want %d", i, a, got, want)
		}
	}
	c, _ := NewFIB(b.tbl24, b.tbl8)
	wrong := map[netip.Prefix]uint32{netip.MustParsePrefix("10.0.0.0/8"): 1}
	if err := c.Adopt(wrong); !errors.Is(err, ErrAdopt) {
		t.Errorf("adopting the wrong routes: %v", err)
	}
}

// TestFIBChangedAt: each family's FIB says when it last changed what a
// lookup returns (the routes' digest's fib_changed): a route set to what
// it is already is no change.
func TestFIBChangedAt(t *testing.T) {
	f := newTestFIB(t)
	f6, err := NewFIB6(16, make([]uint32, 1<<16), make([]uint32, 64*fib6LineWords))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		set       func(netip.Prefix, uint32) error
		del       func(netip.Prefix) error
		changedAt func() time.Time
		p         netip.Prefix
	}{
		{"IPv4", f.Set, f.Delete, f.ChangedAt, netip.MustParsePrefix("10.1.2.0/25")},
		{"IPv6", f6.Set, f6.Delete, f6.ChangedAt, netip.MustParsePrefix("2001:db8:1::/48")},
	} {
		if !c.changedAt().IsZero() {
			t.Errorf("%s: a new FIB changed at %v", c.name, c.changedAt())
		}
		before := time.Now()
		if err := c.set(c.p, 3); err != nil {
			t.Fatal(err)
		}
		added := c.changedAt()
		if added.Before(before) || added.After(time.Now()) {
			t.Errorf("%s: added between %v and now, changed at %v", c.name, before, added)
		}
		time.Sleep(time.Millisecond)
		if err := c.set(c.p, 3); err != nil || !c.changedAt().Equal(added) {
			t.Errorf("%s: the same route set again moved the change to %v (%v)", c.name, c.changedAt(), err)
		}
		if err := c.set(c.p, 4); err != nil || !c.changedAt().After(added) {
			t.Errorf("%s: other next hops, changed at %v, not after %v (%v)", c.name, c.changedAt(), added, err)
		}
		moved := c.changedAt()
		time.Sleep(time.Millisecond)
		if err := c.del(c.p); err != nil || !c.changedAt().After(moved) {
			t.Errorf("%s: deleted, changed at %v, not after %v (%v)", c.name, c.changedAt(), moved, err)
		}
	}
}
