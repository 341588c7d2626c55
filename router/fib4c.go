package router

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
)

// FIB4C is the compressed IPv4 FIB weighed against DIR-24-8 at many
// destinations (docs/router.md, "How big a FIB stays flat at a million
// destinations"; bpf/fib.h, fib4c_lookup): a first level of one entry per
// /18, then for each /18 that holds longer routes a group over /19-/24,
// its runs of equal entries in 64-byte lines as the IPv6 groups are, and
// for each /24 that holds longer routes its 256 entries. Built whole from
// a table for the bench, never changed after: the agent keeps DIR-24-8.
type FIB4C struct {
	L1    []uint32      // 1 << 18 entries
	Lines []uint32      // rt4c_pool, fib6LineWords words a line
	Tbl8  [][256]uint32 // rt4c_tbl8
}

// fib4cL1 is the first level's entries.
const fib4cL1 = 1 << rtxdpRtLimitRT4C_L1BITS

// BuildFIB4C lays out routes (prefix to next-hop group, 1 to 2^31-1). A
// group's runs end where the route changes, not only its next hop: the
// layout is as big as a table's whose every route has a next hop of its
// own, whatever groups the bench gives (no aggregation).
func BuildFIB4C(routes map[netip.Prefix]uint32) (*FIB4C, error) {
	ps := make([]netip.Prefix, 0, len(routes))
	for p, g := range routes {
		if !p.Addr().Is4() || p != p.Masked() || g == 0 || g&tbl8Flag != 0 {
			return nil, fmt.Errorf("fib4c: route %v to group %d", p, g)
		}
		ps = append(ps, p)
	}
	// Shorter first: each route is written over the ones it lies in.
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		return cmp.Or(a.Bits()-b.Bits(), a.Addr().Compare(b.Addr()))
	})
	// Entries hold a route's number (its index + 1; 0 none) while the
	// layout is built, -(k+1) where a /24's entries are tbl8 group k.
	l1 := make([]int32, fib4cL1)
	groups := map[uint32][]int32{}
	tbl8 := map[uint32][]int32{}
	var tbl8Order []uint32
	group := func(g uint32) []int32 {
		if groups[g] == nil {
			groups[g] = slices.Repeat([]int32{l1[g]}, 64)
		}
		return groups[g]
	}
	for i, p := range ps {
		id := int32(i + 1)
		a := p.Addr().As4()
		v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
		switch b := p.Bits(); {
		case b <= 18:
			lo := v >> 14
			for j := lo; j < lo+1<<(18-b); j++ {
				l1[j] = id
			}
		case b <= 24:
			e, lo := group(v>>14), (v>>8)&63
			for j := lo; j < lo+1<<(24-b); j++ {
				e[j] = id
			}
		default:
			s24 := v >> 8
			if tbl8[s24] == nil {
				e := group(s24 >> 6)
				tbl8[s24] = slices.Repeat([]int32{e[s24&63]}, 256)
				e[s24&63] = -int32(len(tbl8Order)) - 1
				tbl8Order = append(tbl8Order, s24)
			}
			t, lo := tbl8[s24], v&0xff
			for j := lo; j < lo+1<<(32-b); j++ {
				t[j] = id
			}
		}
	}
	value := func(e int32) uint32 {
		switch {
		case e > 0:
			return routes[ps[e-1]]
		case e < 0:
			return tbl8Flag | uint32(-e-1)
		}
		return 0
	}
	f := &FIB4C{L1: make([]uint32, fib4cL1), Tbl8: make([][256]uint32, len(tbl8Order))}
	for k, s24 := range tbl8Order {
		for j, e := range tbl8[s24] {
			f.Tbl8[k][j] = value(e)
		}
	}
	for i, e := range l1 {
		g := groups[uint32(i)]
		if g == nil {
			f.L1[i] = value(e)
			continue
		}
		// The bitmap (a set bit where a run begins), then the runs'
		// values, to the end of a line.
		line := uint32(len(f.Lines) / fib6LineWords)
		var bm uint64
		var vals []uint32
		for j, e := range g {
			if j == 0 || e != g[j-1] {
				bm |= 1 << j
				vals = append(vals, value(e))
			}
		}
		f.Lines = append(f.Lines, uint32(bm), uint32(bm>>32))
		f.Lines = append(f.Lines, vals...)
		for len(f.Lines)%fib6LineWords != 0 {
			f.Lines = append(f.Lines, 0)
		}
		f.L1[i] = tbl8Flag | line
	}
	return f, nil
}

// Lookup is fib4c_lookup in Go, for the tests: the next-hop group of a,
// 0 for no route.
func (f *FIB4C) Lookup(a netip.Addr) uint32 {
	b := a.As4()
	d := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v := f.L1[d>>14]
	if v&tbl8Flag == 0 {
		return v
	}
	w := f.Lines[(v&^tbl8Flag)*fib6LineWords:]
	bm := uint64(w[0]) | uint64(w[1])<<32
	r := 0
	for j := uint32(0); j <= (d>>8)&63; j++ {
		r += int(bm >> j & 1)
	}
	v = w[int(rtxdpRtLimitRT4C_HEADER_WORDS)-1+r]
	if v&tbl8Flag != 0 {
		v = f.Tbl8[v&^tbl8Flag][d&0xff]
	}
	return v
}

// Bytes is what the layout's arrays take: the first level, the lines and
// the /24s' entries.
func (f *FIB4C) Bytes() int { return 4 * (len(f.L1) + len(f.Lines) + 256*len(f.Tbl8)) }
