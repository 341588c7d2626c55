package routerapi

import "net/netip"

// FIB6GroupsFor is how many groups the back-end's IPv6 FIB (router.FIB6:
// a trie whose first stride takes first bits, then 8 a group) needs to
// hold the prefixes: one for every distinct node, at each depth first,
// first+8, ..., that a longer prefix passes through. A back-end's
// fib6_groups is sized from its table with it (docs/router.md); IPv4
// prefixes, shorter than any first stride here, need none.
func FIB6GroupsFor(prefixes []netip.Prefix, first int) int {
	nodes := map[netip.Prefix]bool{}
	for _, p := range prefixes {
		for d := first; d < p.Bits(); d += 8 {
			n, _ := p.Addr().Prefix(d)
			nodes[n] = true
		}
	}
	return len(nodes)
}

// DefaultFIB6Groups is a back-end's IPv6 group pool when its config sets
// no fib6_groups: bpf/router.h's RT6_GROUPS (router.DefaultFIB6Groups;
// TestFIB6 holds them equal).
const DefaultFIB6Groups = 16384
