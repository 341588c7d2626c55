package router

import (
	"encoding/binary"
	"iter"
	"net/netip"
)

// routeSet maps prefixes to a number (a FIB's routes to their next-hop
// groups, the RIB feed's prefixes to their sets of paths), keyed
// compactly: 8 bytes of key for IPv4, 17 for IPv6, where a netip.Prefix
// takes 32. With a million IPv4 routes that is 16 bytes a slot for 40.
type routeSet struct {
	v4 map[uint64]uint32
	v6 map[[17]byte]uint32
}

func key4(p netip.Prefix) uint64 {
	a := p.Addr().As4()
	return uint64(binary.BigEndian.Uint32(a[:]))<<8 | uint64(p.Bits())
}

func key6(p netip.Prefix) [17]byte {
	var k [17]byte
	a := p.Addr().As16()
	copy(k[:], a[:])
	k[16] = byte(p.Bits())
	return k
}

func newRouteSet(routes map[netip.Prefix]uint32) *routeSet {
	s := &routeSet{v4: map[uint64]uint32{}, v6: map[[17]byte]uint32{}}
	for p, g := range routes {
		s.set(p, g)
	}
	return s
}

// Get is p's next-hop group, if p is routed.
func (s *routeSet) Get(p netip.Prefix) (uint32, bool) {
	if p.Addr().Is4() {
		g, ok := s.v4[key4(p)]
		return g, ok
	}
	g, ok := s.v6[key6(p)]
	return g, ok
}

// Len is the number of routes.
func (s *routeSet) Len() int { return len(s.v4) + len(s.v6) }

// All yields every route.
func (s *routeSet) All() iter.Seq2[netip.Prefix, uint32] {
	return func(yield func(netip.Prefix, uint32) bool) {
		for k, g := range s.v4 {
			a := netip.AddrFrom4([4]byte{byte(k >> 32), byte(k >> 24), byte(k >> 16), byte(k >> 8)})
			if !yield(netip.PrefixFrom(a, int(k&0xff)), g) {
				return
			}
		}
		for k, g := range s.v6 {
			if !yield(netip.PrefixFrom(netip.AddrFrom16([16]byte(k[:16])), int(k[16])), g) {
				return
			}
		}
	}
}

// Map returns the routes as a map of their own.
func (s *routeSet) Map() map[netip.Prefix]uint32 {
	m := make(map[netip.Prefix]uint32, s.Len())
	for p, g := range s.All() {
		m[p] = g
	}
	return m
}

func (s *routeSet) set(p netip.Prefix, g uint32) {
	if p.Addr().Is4() {
		s.v4[key4(p)] = g
	} else {
		s.v6[key6(p)] = g
	}
}

func (s *routeSet) del(p netip.Prefix) {
	if p.Addr().Is4() {
		delete(s.v4, key4(p))
	} else {
		delete(s.v6, key6(p))
	}
}
