package bench

import (
	"net/netip"
)

// flowDsts gives each flow a destination inside one of the routes, spread
// over the table so that lookups touch all of it.
func flowDsts(routes []netip.Prefix, flows int) []netip.Addr {
	if routes == nil {
		return nil
	}
	out := make([]netip.Addr, flows)
	for i := range out {
		h := mixHash(uint32(i))
		p := routes[int(h)%len(routes)]
		if p.Addr().Is6() {
			out[i] = inside6(p, h)
			continue
		}
		a := p.Addr().As4()
		v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
		if size := uint64(1) << (32 - p.Bits()); size > 2 {
			v += 1 + uint32(uint64(mixHash(h))%(size-2))
		}
		out[i] = netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	return out
}

// inside6 is an address of IPv6 prefix p, its host bits drawn from h.
func inside6(p netip.Prefix, h uint32) netip.Addr {
	a := p.Addr().As16()
	for j := p.Bits() / 8; j < 16; j++ {
		h = mixHash(h + uint32(j))
		keep := byte(0)
		if j == p.Bits()/8 {
			keep = ^byte(0xff >> (p.Bits() % 8)) // the prefix's bits of a byte it ends in
		}
		a[j] = a[j]&keep | byte(h)&^keep
	}
	return netip.AddrFrom16(a)
}

func mixHash(x uint32) uint32 {
	x ^= x >> 16
	x *= 0x7feb352d
	x ^= x >> 15
	x *= 0x846ca68b
	return x ^ x>>16
}
