package router

import (
	"maps"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// TestRouteSet holds a FIB's compact route set to a map: both families,
// every length from /0 to the address's, IPv4 apart from IPv4-mapped
// IPv6, through random sets and deletes.
func TestRouteSet(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 9))
	s, ref := newRouteSet(nil), map[netip.Prefix]uint32{}
	for step := 0; step < 20_000; step++ {
		var p netip.Prefix
		switch r.IntN(3) {
		case 0:
			p, _ = netip.AddrFrom4([4]byte{byte(r.IntN(4)), byte(r.IntN(256)), 0, byte(r.IntN(4))}).Prefix(r.IntN(33))
		case 1:
			p, _ = netip.AddrFrom16([16]byte{0x20, 0x01, byte(r.IntN(4)), 15: byte(r.IntN(4))}).Prefix(r.IntN(129))
		default:
			p, _ = netip.AddrFrom16([16]byte{10: 0xff, 11: 0xff, 12: byte(r.IntN(4))}).Prefix(96 + r.IntN(33))
		}
		if _, ok := ref[p]; ok && r.IntN(3) == 0 {
			s.del(p)
			delete(ref, p)
			continue
		}
		g := uint32(1 + r.IntN(100))
		s.set(p, g)
		ref[p] = g
	}
	if got := s.Map(); !maps.Equal(got, ref) || s.Len() != len(ref) {
		t.Fatalf("%d routes, want %d, or others", s.Len(), len(ref))
	}
	for p, g := range ref {
		if v, ok := s.Get(p); !ok || v != g {
			t.Fatalf("%v: %d %v, want %d", p, v, ok, g)
		}
	}
	if _, ok := s.Get(netip.MustParsePrefix("192.0.2.0/24")); ok {
		t.Error("a prefix never set is found")
	}
}
