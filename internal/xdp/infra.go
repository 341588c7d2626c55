package xdp

import (
	"encoding/binary"
	"net/netip"
)

// InfraPrefixes is infra.h's MSR_INFRA_PREFIXES: each family's room.
const InfraPrefixes = 16

// InfraSize is the size of infra.h's struct msr_infra: two counts, then
// each family's prefixes (address and mask, in network order).
const InfraSize = 8 + InfraPrefixes*8 + InfraPrefixes*32

// Infra is ps as the value of an LB's lb_infra or a back-end's rt_infra
// (struct msr_infra), prefixes past a family's room left out.
func Infra(ps []netip.Prefix) []byte {
	b := make([]byte, InfraSize)
	var n4, n6 int
	for _, p := range ps {
		p = p.Masked()
		addr := p.Addr().AsSlice()
		mask := make([]byte, len(addr))
		for i := 0; i < p.Bits(); i++ {
			mask[i/8] |= 0x80 >> (i % 8)
		}
		var at int
		switch {
		case p.Addr().Is4() && n4 < InfraPrefixes:
			at = 8 + n4*8
			n4++
		case p.Addr().Is6() && n6 < InfraPrefixes:
			at = 8 + InfraPrefixes*8 + n6*32
			n6++
		default:
			continue
		}
		copy(b[at:], addr)
		copy(b[at+len(addr):], mask)
	}
	binary.NativeEndian.PutUint32(b[0:], uint32(n4))
	binary.NativeEndian.PutUint32(b[4:], uint32(n6))
	return b
}
