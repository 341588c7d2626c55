package router

import (
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"
)

// FIB6 is the back-end's IPv6 longest-prefix-match table: a multibit trie
// with a wide first stride, as DPDK's rte_lpm6 and DIR-24-8 are, so that a
// lookup costs one array read per stride the matching prefix spans,
// whatever the table's size (docs/router.md: the strides chosen from the
// measured table). tbl0 has one entry per /First; below it, groups of 256
// entries each take 8 more bits, as far as the longest prefix needs. An
// entry is a next-hop group (0: no route) or, with fib6GroupFlag, the index
// of the group that holds the longer prefixes beneath it.
//
// As FIB, it keeps each entry's depth (the length of the prefix that set
// it), which makes adds and deletes incremental, and orders its writes so
// that any lookup sees the old route or the new one: a group is filled
// before an entry points at it and unhooked before it is reused.
type FIB6 struct {
	first          int // the first stride's bits: a multiple of 8
	tbl0, groups   []uint32
	depth0, depthG []uint8
	free           []uint32
	routes         map[netip.Prefix]uint32
	changes        uint64
	changedAt      int64 // FIB.changedAt's
}

const fib6GroupFlag = uint32(1) << 31

// ErrFIB6Full is returned when a route needs a group and none is free.
var ErrFIB6Full = errors.New("no free IPv6 FIB group: too many prefixes longer than the first stride")

// NewFIB6 wraps the arrays, which must be empty: tbl0 of 2^first entries,
// groups of a multiple of 256.
func NewFIB6(first int, tbl0, groups []uint32) (*FIB6, error) {
	if first%8 != 0 || first < 8 || first > 32 || len(tbl0) != 1<<first || len(groups)%256 != 0 || len(groups) == 0 {
		return nil, fmt.Errorf("IPv6 FIB: first stride %d (8, 16, 24 or 32) with %d entries, groups of %d", first, len(tbl0), len(groups))
	}
	f := &FIB6{first: first, tbl0: tbl0, groups: groups, depth0: make([]uint8, len(tbl0)), depthG: make([]uint8, len(groups)),
		routes: map[netip.Prefix]uint32{}}
	for g := len(groups)/256 - 1; g >= 0; g-- {
		f.free = append(f.free, uint32(g))
	}
	return f, nil
}

// Len is the number of routes; GroupsUsed the groups in use.
func (f *FIB6) Len() int        { return len(f.routes) }
func (f *FIB6) GroupsUsed() int { return len(f.groups)/256 - len(f.free) }

// Groups is the size of the group pool.
func (f *FIB6) Groups() int { return len(f.groups) / 256 }

// Changes counts the writes that changed what a lookup can return.
func (f *FIB6) Changes() uint64 { return f.changes }

// ChangedAt is as FIB.ChangedAt.
func (f *FIB6) ChangedAt() time.Time { return unixNano(f.changedAt) }

// Routes returns every prefix and its next-hop group.
func (f *FIB6) Routes() map[netip.Prefix]uint32 { return f.routes }

// level is the trie level whose entries a prefix of bits sets: 0 for
// tbl0, k for the groups k strides below it.
func (f *FIB6) level(bits int) int {
	if bits <= f.first {
		return 0
	}
	return (bits - f.first + 7) / 8
}

// base is how many bits lie above level k's entries.
func (f *FIB6) base(k int) int {
	if k == 0 {
		return 0
	}
	return f.first + 8*(k-1)
}

// slot is where address a's walk reads at level k: its tbl0 index or its
// byte within the group.
func (f *FIB6) slot(a [16]byte, k int) uint32 {
	if k == 0 {
		var v uint32
		for i := 0; i < f.first/8; i++ {
			v = v<<8 | uint32(a[i])
		}
		return v
	}
	return uint32(a[f.first/8+k-1])
}

// entry is one place of the trie: in tbl0 (g < 0) or in group g.
type entry6 struct {
	f *FIB6
	g int
	i uint32
}

func (e entry6) ptr() (*uint32, *uint8) {
	if e.g < 0 {
		return &e.f.tbl0[e.i], &e.f.depth0[e.i]
	}
	j := uint32(e.g)*256 + e.i
	return &e.f.groups[j], &e.f.depthG[j]
}

// Set adds a route, or changes its next-hop group (nhg > 0).
func (f *FIB6) Set(p netip.Prefix, nhg uint32) error {
	if !p.Addr().Is6() || p.Addr().Is4In6() || nhg == 0 || nhg&fib6GroupFlag != 0 {
		return fmt.Errorf("route %s -> %d: IPv6 prefix and a next-hop group 1..%d", p, nhg, fib6GroupFlag-1)
	}
	p = p.Masked()
	if old, ok := f.routes[p]; ok && old == nhg {
		return nil
	}
	a, bits := p.Addr().As16(), p.Bits()
	g, err := f.descend(a, f.level(bits), true)
	if err != nil {
		return err
	}
	f.changes++
	f.changedAt = time.Now().UnixNano()
	f.routes[p] = nhg
	f.fillRange(g, a, bits, nhg, uint8(bits), func(d uint8) bool { return d <= uint8(bits) })
	return nil
}

// Delete removes a route; what it covered falls back to the longest
// shorter route that covers it.
func (f *FIB6) Delete(p netip.Prefix) error {
	p = p.Masked()
	if _, ok := f.routes[p]; !ok {
		return fmt.Errorf("no route %s", p)
	}
	delete(f.routes, p)
	f.changes++
	f.changedAt = time.Now().UnixNano()
	a, bits := p.Addr().As16(), p.Bits()
	cover, coverLen := 0, 0
	for l := bits - 1; l >= 0; l-- {
		q, _ := p.Addr().Prefix(l)
		if v, ok := f.routes[q]; ok {
			cover, coverLen = int(v), l
			break
		}
	}
	g, _ := f.descend(a, f.level(bits), false)
	f.fillRange(g, a, bits, uint32(cover), uint8(coverLen), func(d uint8) bool { return d == uint8(bits) })
	f.collapse(a, f.level(bits))
	return nil
}

// descend walks from tbl0 to the table at level k on a's path and returns
// its group (-1: tbl0), making the groups on the way when make is set.
func (f *FIB6) descend(a [16]byte, k int, make bool) (int, error) {
	g := -1
	for lvl := 0; lvl < k; lvl++ {
		e := entry6{f, g, f.slot(a, lvl)}
		v, d := e.ptr()
		if *v&fib6GroupFlag == 0 {
			if !make {
				return 0, fmt.Errorf("no group at level %d", lvl+1)
			}
			if len(f.free) == 0 {
				return 0, ErrFIB6Full
			}
			ng := f.free[len(f.free)-1]
			f.free = f.free[:len(f.free)-1]
			for j := ng * 256; j < ng*256+256; j++ {
				atomic.StoreUint32(&f.groups[j], *v)
				f.depthG[j] = *d
			}
			atomic.StoreUint32(v, fib6GroupFlag|ng)
		}
		g = int(*v &^ fib6GroupFlag)
	}
	return g, nil
}

// fillRange writes value (set by a prefix of length depth) into every
// entry of the table g (at p's level) that the prefix a/bits covers and
// whose depth take accepts, and into the groups beneath those entries.
func (f *FIB6) fillRange(g int, a [16]byte, bits int, value uint32, depth uint8, take func(uint8) bool) {
	k := f.level(bits)
	width := f.first
	if k > 0 {
		width = 8
	}
	n := uint32(1) << (f.base(k) + width - bits)
	first := f.slot(a, k) &^ (n - 1)
	for i := first; i < first+n; i++ {
		f.fill(entry6{f, g, i}, value, depth, take)
	}
}

func (f *FIB6) fill(e entry6, value uint32, depth uint8, take func(uint8) bool) {
	v, d := e.ptr()
	if *v&fib6GroupFlag != 0 {
		sub := int(*v &^ fib6GroupFlag)
		for j := uint32(0); j < 256; j++ {
			f.fill(entry6{f, sub, j}, value, depth, take)
		}
		if take(*d) {
			*d = depth // the route covering the whole group, for collapse
		}
		return
	}
	if take(*d) {
		atomic.StoreUint32(v, value)
		*d = depth
	}
}

// collapse frees, from level k up, each group on a's path that no longer
// holds a prefix longer than the entry above it: that entry takes the
// group's one value again.
func (f *FIB6) collapse(a [16]byte, k int) {
	for ; k > 0; k-- {
		g, err := f.descend(a, k, false)
		if err != nil {
			continue // the path ends above level k
		}
		for j := g * 256; j < g*256+256; j++ {
			if f.groups[j]&fib6GroupFlag != 0 || int(f.depthG[j]) > f.base(k) {
				return
			}
		}
		pg, _ := f.descend(a, k-1, false)
		v, _ := entry6{f, pg, f.slot(a, k-1)}.ptr()
		atomic.StoreUint32(v, f.groups[g*256])
		f.free = append(f.free, uint32(g))
	}
}

// Lookup reads the arrays as the data path does.
func (f *FIB6) Lookup(addr netip.Addr) uint32 {
	a := addr.As16()
	v := atomic.LoadUint32(&f.tbl0[f.slot(a, 0)])
	for k := 1; v&fib6GroupFlag != 0; k++ {
		v = atomic.LoadUint32(&f.groups[(v&^fib6GroupFlag)*256+f.slot(a, k)])
	}
	return v
}

// SetAll loads many routes, shortest first, so that each entry is written
// as few times as possible.
func (f *FIB6) SetAll(routes map[netip.Prefix]uint32) error { return setShortestFirst(routes, f.Set) }

// Reset empties the table: tbl0 zeroed first, so no lookup reaches a
// group while the groups are given back.
func (f *FIB6) Reset() {
	for i := range f.tbl0 {
		atomic.StoreUint32(&f.tbl0[i], 0)
	}
	clear(f.depth0)
	clear(f.depthG)
	f.free = f.free[:0]
	for g := len(f.groups)/256 - 1; g >= 0; g-- {
		f.free = append(f.free, uint32(g))
	}
	f.routes = map[netip.Prefix]uint32{}
}

// Adopt takes over arrays that a previous agent filled with routes, as
// FIB.Adopt does: the same routes are built into scratch arrays and the
// two tries walked together (their group numbers may differ), every
// entry compared, the depths copied and the free groups found. Nothing in
// the arrays is written: the data path forwards on through it. It
// refuses, with ErrAdopt, arrays that do not hold exactly routes.
func (f *FIB6) Adopt(routes map[netip.Prefix]uint32) error {
	// Untouched pages of a fresh slice cost no memory: the scratch pool
	// is as large as ours, its use as small as the table.
	scratch, err := NewFIB6(f.first, make([]uint32, len(f.tbl0)), make([]uint32, len(f.groups)))
	if err != nil {
		return err
	}
	if err := scratch.SetAll(routes); err != nil {
		return err
	}
	used := make([]bool, len(f.groups)/256)
	for i := range f.tbl0 {
		if err := f.adoptEntry(scratch, used, entry6{f, -1, uint32(i)}, entry6{scratch, -1, uint32(i)}); err != nil {
			return err
		}
	}
	f.free, f.routes = adopted(used, routes)
	return nil
}

// adoptEntry compares entry e of the adopted trie with se of the scratch
// one, and what lies beneath them.
func (f *FIB6) adoptEntry(s *FIB6, used []bool, e, se entry6) error {
	v, d := e.ptr()
	sv, sd := se.ptr()
	switch {
	case *v&fib6GroupFlag == 0 && *sv&fib6GroupFlag == 0:
		if *v != *sv {
			return fmt.Errorf("%w: IPv6 entry %d of group %d holds %d, want %d", ErrAdopt, e.i, e.g, *v, *sv)
		}
		*d = *sd
		return nil
	case *v&fib6GroupFlag != 0 && *sv&fib6GroupFlag != 0:
		g, sg := *v&^fib6GroupFlag, *sv&^fib6GroupFlag
		if int(g) >= len(used) || used[g] {
			return fmt.Errorf("%w: IPv6 group %d is bad or shared", ErrAdopt, g)
		}
		used[g] = true
		*d = *sd
		for j := uint32(0); j < 256; j++ {
			if err := f.adoptEntry(s, used, entry6{f, int(g), j}, entry6{s, int(sg), j}); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%w: IPv6 entry %d of group %d has a group on one side only", ErrAdopt, e.i, e.g)
}
