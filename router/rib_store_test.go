package router

import (
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

// TestRIBStore holds the store to a map of slices through random puts
// and removals of both families: every prefix's paths as put, all
// yielding each prefix once, alike sets shared and freed with their last
// prefix, and what get returns the caller's own.
func TestRIBStore(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	s, ref := newRIBStore(), map[netip.Prefix][]ribPath{}
	hops := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("::ffff:192.0.2.1"), netip.MustParseAddr("2001:db8::1"),
		netip.MustParseAddr("fe80::1%10"), netip.MustParseAddr("fe80::1%11")}
	prefix := func() netip.Prefix {
		if r.IntN(2) == 0 {
			p, _ := netip.AddrFrom4([4]byte{10, byte(r.IntN(4)), byte(r.IntN(256)), 0}).Prefix(16 + r.IntN(17))
			return p
		}
		p, _ := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, byte(r.IntN(4)), byte(r.IntN(256))}).Prefix(32 + r.IntN(97))
		return p
	}
	for step := 0; step < 20_000; step++ {
		p := prefix()
		var ps []ribPath
		for range r.IntN(3) {
			ps = append(ps, ribPath{nh: hops[r.IntN(len(hops))], id: uint32(r.IntN(2)), asLen: uint16(r.IntN(3)), stale: r.IntN(4) == 0,
				from: routeOrigin{rank: uint16(r.IntN(2))}})
		}
		s.put(p, ps)
		if len(ps) == 0 {
			delete(ref, p)
		} else {
			ref[p] = ps
		}
		if step%1000 == 0 {
			got := map[netip.Prefix][]ribPath{}
			for q, qs := range s.all() {
				if _, twice := got[q]; twice {
					t.Fatalf("step %d: %v yielded twice", step, q)
				}
				got[q] = qs
			}
			if !maps.EqualFunc(got, ref, slices.Equal) || s.len() != len(ref) {
				t.Fatalf("step %d: the store holds %d prefixes, want %d, or other paths", step, s.len(), len(ref))
			}
		}
	}
	for p, ps := range ref {
		got := s.get(p)
		if !slices.Equal(got, ps) {
			t.Fatalf("%v: %+v, want %+v", p, got, ps)
		}
		got[0].med = 99 // the caller's copy
		if s.shared(p)[0].med == 99 {
			t.Fatalf("%v: get gave the shared set", p)
		}
	}
	for p := range ref {
		s.put(p, nil)
	}
	if s.len() != 0 || s.sharedSets() != 0 {
		t.Errorf("emptied: %d prefixes, %d sets", s.len(), s.sharedSets())
	}
	// A thousand prefixes with the same path share one set.
	for i := range 1000 {
		s.put(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24), []ribPath{{nh: hops[0], localPref: 100}})
	}
	if s.sharedSets() != 1 {
		t.Errorf("1,000 prefixes with one path in %d sets", s.sharedSets())
	}
}
