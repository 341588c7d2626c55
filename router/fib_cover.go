package router

import (
	"net/netip"
)

// A withdrawn route's addresses fall back to its cover, the longest
// shorter route that contains it (FIB.Delete). Asking the route map for
// each shorter length in turn took up to 24 lookups of a map of 600,000
// prefixes, most of them missing the cache, for each withdrawal: a third
// of a back-end agent's time while a full table left it (docs/reliability.md,
// finding 23's timeline), which the soak's link-down goals wait on.
//
// coverIndex answers from two arrays instead, kept with the routes:
// for lengths up to /16, the route itself, one array per length indexed
// by the prefix (2^17 entries, 512 KiB); for /17 to /32, how many routes
// of each length lie within each /16 (4 MiB), so that the map is asked
// only for lengths that have a route there.
type coverIndex struct {
	short [coverShortMax + 1][]uint32 // [l][a>>(32-l)]: the next-hop group of the /l there, 0 none
	long  []uint32                    // [(a>>16)*coverLongLens + l-coverShortMax-1]: routes of length l in the /16
}

const (
	coverShortMax  = 16
	coverLongLens  = 32 - coverShortMax // lengths 17..32
	coverLongSlots = (1 << 16) * coverLongLens
)

func newCoverIndex() *coverIndex {
	c := &coverIndex{long: make([]uint32, coverLongSlots)}
	for l := range c.short {
		c.short[l] = make([]uint32, 1<<l)
	}
	return c
}

// shortSlot is where a /l (l ≤ 16) with address a stands in short[l].
func shortSlot(a uint32, l int) uint32 {
	if l == 0 {
		return 0
	}
	return a >> (32 - l)
}

// longSlot is the count of routes of length l (17..32) in a's /16.
func longSlot(a uint32, l int) uint32 {
	return (a>>16)*coverLongLens + uint32(l-coverShortMax-1)
}

// set records route p with next-hop group nhg; added says it is new, not
// a change of group.
func (c *coverIndex) set(p netip.Prefix, nhg uint32, added bool) {
	a, l := u32(p.Addr()), p.Bits()
	if l <= coverShortMax {
		c.short[l][shortSlot(a, l)] = nhg
	} else if added {
		c.long[longSlot(a, l)]++
	}
}

// remove forgets route p.
func (c *coverIndex) remove(p netip.Prefix) {
	a, l := u32(p.Addr()), p.Bits()
	if l <= coverShortMax {
		c.short[l][shortSlot(a, l)] = 0
	} else {
		c.long[longSlot(a, l)]--
	}
}

// rebuild makes the index hold routes alone.
func (c *coverIndex) rebuild(routes *routeSet) {
	for l := range c.short {
		clear(c.short[l])
	}
	clear(c.long)
	for p, nhg := range routes.All() {
		c.set(p, nhg, true)
	}
}

// cover finds the longest route shorter than p that contains it, and its
// length.
func (f *FIB) cover(p netip.Prefix) (uint32, uint8) {
	a := u32(p.Addr())
	for l := p.Bits() - 1; l > coverShortMax; l-- {
		if f.cov.long[longSlot(a, l)] == 0 {
			continue
		}
		q, _ := p.Addr().Prefix(l)
		if nhg, ok := f.routes.Get(q); ok {
			return nhg, uint8(l)
		}
	}
	for l := min(p.Bits()-1, coverShortMax); l >= 0; l-- {
		if nhg := f.cov.short[l][shortSlot(a, l)]; nhg != 0 {
			return nhg, uint8(l)
		}
	}
	return 0, 0
}
