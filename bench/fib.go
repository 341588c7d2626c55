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
		a := p.Addr().As4()
		v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
		if size := uint64(1) << (32 - p.Bits()); size > 2 {
			v += 1 + uint32(uint64(mixHash(h))%(size-2))
		}
		out[i] = netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	return out
}

func mixHash(x uint32) uint32 {
	x ^= x >> 16
	x *= 0x7feb352d
	x ^= x >> 15
	x *= 0x846ca68b
	return x ^ x>>16
}
