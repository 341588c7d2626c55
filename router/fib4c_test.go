package router

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// The compressed IPv4 FIB's layout answers as the model's longest-prefix
// match: random tables of every length, clustered so that routes nest in
// every level (/18s, /24s, longer), looked up at random addresses and at
// each route's first and last address and just outside; each route a
// group of its own, so a run that merged two routes would show.
func TestFIB4C(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 44))
		m := &Model{Routes: map[netip.Prefix]uint32{}}
		// Routes near a few bases, so that they share /18s and /24s.
		bases := make([]uint32, 1+r.IntN(20))
		for i := range bases {
			bases[i] = r.Uint32()
		}
		for n := 0; n < 2000; n++ {
			a := bases[r.IntN(len(bases))] ^ r.Uint32()>>r.IntN(33)
			if r.IntN(10) == 0 {
				a = r.Uint32()
			}
			p, _ := netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}).Prefix(r.IntN(33))
			m.Routes[p] = uint32(1 + len(m.Routes))
		}
		f, err := BuildFIB4C(m.Routes)
		if err != nil {
			t.Fatal(err)
		}
		check := func(a netip.Addr) {
			t.Helper()
			if got, want := f.Lookup(a), m.LPM(a); got != want {
				t.Fatalf("seed %d: %v -> %d, the model says %d", seed, a, got, want)
			}
		}
		for p := range m.Routes {
			first := p.Addr()
			last := lastAddr(p)
			check(first)
			check(last)
			if q := first.Prev(); q.IsValid() {
				check(q)
			}
			if q := last.Next(); q.IsValid() {
				check(q)
			}
		}
		for range 20_000 {
			a := bases[r.IntN(len(bases))] ^ r.Uint32()>>r.IntN(33)
			check(netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}))
		}
	}
}

// lastAddr is the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v |= uint32(uint64(1)<<(32-p.Bits()) - 1)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// Routes that are not IPv4 unicast groups are refused.
func TestFIB4CRefuses(t *testing.T) {
	for _, routes := range []map[netip.Prefix]uint32{
		{netip.MustParsePrefix("10.0.0.0/8"): 0},
		{netip.MustParsePrefix("10.0.0.0/8"): tbl8Flag | 1},
		{netip.MustParsePrefix("10.0.0.1/8"): 1},
		{netip.MustParsePrefix("2001:db8::/32"): 1},
	} {
		if _, err := BuildFIB4C(routes); err == nil {
			t.Errorf("%v taken", routes)
		}
	}
}
