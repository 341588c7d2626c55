package routerapi

import (
	"net/netip"
	"slices"
)

// FIB6LinesFor is how many 64-byte lines the back-end's IPv6 FIB
// (router.FIB6: a trie whose first stride takes first bits, then 8 a
// group, each group compressed into runs of equal entries) takes to hold
// the prefixes, at most: a group's runs are counted as if every prefix
// had a next hop of its own, and a group of r runs takes (9 + r) words
// rounded up to lines of 16. A back-end's fib6_lines is sized from its
// table with it (docs/router.md); IPv4 prefixes, shorter than any first
// stride here, need none.
func FIB6LinesFor(prefixes []netip.Prefix, first int) int {
	// Each group's run starts: where a prefix or a child group begins,
	// and the entry after it ends.
	starts := map[netip.Prefix][]uint16{}
	mark := func(p netip.Prefix, bits int) {
		g, _ := p.Addr().Prefix(bits)
		b := p.Addr().As16()[bits/8]
		span := 1 << (bits + 8 - min(p.Bits(), bits+8))
		starts[g] = append(starts[g], 0, uint16(b), uint16(int(b)+span))
	}
	for _, p := range prefixes {
		for d := first; d < p.Bits(); d += 8 {
			mark(p, d)
		}
	}
	lines := 0
	for _, s := range starts {
		slices.Sort(s)
		s = slices.Compact(s)
		if s[len(s)-1] == 256 {
			s = s[:len(s)-1]
		}
		lines += (9 + len(s) + 15) / 16
	}
	return lines
}

// DefaultFIB6Lines is a back-end's IPv6 pool when its config sets no
// fib6_lines: bpf/router.h's RT6_LINES, 16 MiB (router.DefaultFIB6Lines;
// TestFIB6 holds them equal).
const DefaultFIB6Lines = 262144
