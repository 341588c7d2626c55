package router

import (
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"
)

// plan is the trie routes make, its shape and tbl0's entries, with no
// group written: what Adopt and Repair hold the arrays to.
func (f *FIB6) plan(routes map[netip.Prefix]uint32) *FIB6 {
	s := &FIB6{first: f.first, tbl0: make([]uint32, len(f.tbl0)), depth0: make([]uint8, len(f.tbl0)),
		top: map[uint32]*node6{}, routes: newRouteSet(routes)}
	_ = setShortestFirst(routes, func(p netip.Prefix, nhg uint32) error {
		a, n := p.Addr().As16(), p.Bits()
		k := s.level(n)
		if k == 0 {
			// Every prefix of the first stride comes before any longer
			// one makes a group: tbl0 holds each group's cover.
			c := uint32(1) << (s.first - n)
			for i := s.slot(a, 0) &^ (c - 1); i < s.slot(a, 0)&^(c-1)+c; i++ {
				s.tbl0[i], s.depth0[i] = nhg, uint8(n)
			}
			return nil
		}
		path, _ := s.descend(a, k)
		nd := path[k-1]
		key, bits := s.stride(a, n, k)
		r := route6{key: key, bits: bits, nhg: nhg}
		i, _ := nd.find(r.key, r.bits)
		nd.routes = slices.Insert(nd.routes, i, r)
		return nil
	})
	for _, nd := range s.top {
		nd.cover = s.tbl0[nd.slot]
		nd.covers()
	}
	return s
}

// covers sets the covers of the groups beneath nd from its entries.
func (nd *node6) covers() {
	if len(nd.kids) == 0 {
		return
	}
	var e [256]uint32
	nd.paint(&e)
	for _, k := range nd.kids {
		k.cover = e[k.slot]
		k.covers()
	}
}

// Adopt takes over arrays that a previous agent filled with routes, as
// FIB.Adopt does: the trie routes make is walked beside the arrays from
// tbl0, every group decoded and compared entry by entry (their lines may
// lie anywhere), and the lines no group uses are the free ones. Nothing
// in the arrays is written: the data path forwards on through it. It
// refuses, with ErrAdopt, arrays that do not hold exactly routes.
func (f *FIB6) Adopt(routes map[netip.Prefix]uint32) error {
	s := f.plan(routes)
	used := make([]bool, len(f.pool.w)/fib6LineWords)
	for i := range f.tbl0 {
		if err := f.adoptEntry(s, uint32(i), used, nil); err != nil {
			return err
		}
	}
	f.install(s)
	f.pool.fromUsed(used)
	return nil
}

// install takes the planned trie's bookkeeping as f's own.
func (f *FIB6) install(s *FIB6) {
	copy(f.depth0, s.depth0)
	f.top, f.nodes, f.routes = s.top, s.nodes, s.routes
}

// adoptEntry holds tbl0's entry i to the plan s, marking the lines of the
// groups beneath it in used (and noting them in marked).
func (f *FIB6) adoptEntry(s *FIB6, i uint32, used []bool, marked *[]uint32) error {
	v := atomic.LoadUint32(&f.tbl0[i])
	nd := s.top[i]
	if nd == nil {
		if v != s.tbl0[i] {
			return fmt.Errorf("%w: IPv6 tbl0 entry %d holds %#x, want %d", ErrAdopt, i, v, s.tbl0[i])
		}
		return nil
	}
	if v&fib6GroupFlag == 0 {
		return fmt.Errorf("%w: IPv6 tbl0 entry %d holds %d, want a group", ErrAdopt, i, v)
	}
	return f.adoptGroup(nd, v&^fib6GroupFlag, used, marked)
}

// adoptGroup holds the group at line to nd, and its children to nd's.
func (f *FIB6) adoptGroup(nd *node6, line uint32, used []bool, marked *[]uint32) error {
	var got [256]uint32
	n, err := f.pool.decode(line, &got)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrAdopt, err)
	}
	for l := line; l < line+uint32(n); l++ {
		if used[l] {
			return fmt.Errorf("%w: IPv6 line %d is in two groups", ErrAdopt, l)
		}
		used[l] = true
		if marked != nil {
			*marked = append(*marked, l)
		}
	}
	var want [256]uint32
	nd.paint(&want)
	ki := 0
	for j := range got {
		if ki < len(nd.kids) && nd.kids[ki].slot == uint32(j) {
			k := nd.kids[ki]
			ki++
			if got[j]&fib6GroupFlag == 0 {
				return fmt.Errorf("%w: IPv6 group at line %d: entry %d holds %d, want a group", ErrAdopt, line, j, got[j])
			}
			if err := f.adoptGroup(k, got[j]&^fib6GroupFlag, used, marked); err != nil {
				return err
			}
			continue
		}
		if got[j] != want[j] {
			return fmt.Errorf("%w: IPv6 group at line %d: entry %d holds %#x, want %d", ErrAdopt, line, j, got[j], want[j])
		}
	}
	nd.line, nd.lines = line, uint8(n)
	return nil
}

// decode reads the group at line into e and says how many lines it
// takes; a group that does not lie within the pool, or whose counts
// disagree with its bitmap, is an error.
func (p *pool6) decode(line uint32, e *[256]uint32) (int, error) {
	at := int(line) * fib6LineWords
	if line == 0 || at+fib6Header > len(p.w) {
		return 0, fmt.Errorf("IPv6 group at line %d: outside the pool", line)
	}
	w := p.w[at:]
	runs := 0
	for wi := 0; wi < 4; wi++ {
		if int(w[8]>>(8*wi)&0xff) != runs {
			return 0, fmt.Errorf("IPv6 group at line %d: %d runs before word %d, counted %d", line, w[8]>>(8*wi)&0xff, wi, runs)
		}
		runs += bits.OnesCount64(uint64(w[2*wi]) | uint64(w[2*wi+1])<<32)
	}
	n := (fib6Header + runs + fib6LineWords - 1) / fib6LineWords
	if w[0]&1 == 0 || at+n*fib6LineWords > len(p.w) {
		return 0, fmt.Errorf("IPv6 group at line %d: no run at entry 0, or %d lines past the pool", line, n)
	}
	r := -1
	for j := range e {
		if w[j/32]>>(j%32)&1 != 0 {
			r++
		}
		e[j] = atomic.LoadUint32(&w[fib6Header+r])
	}
	return n, nil
}

// fromUsed makes the pool's free lists from the lines in use: each gap
// between them given back in blocks of at most fib6MaxLines.
func (p *pool6) fromUsed(used []bool) {
	p.reset(p.w)
	last := 0
	for l := 1; l < len(used); l++ {
		if used[l] {
			p.used++
			last = l
		}
	}
	p.next = uint32(last + 1)
	eachRun(last, func(l int) bool { return !used[l] }, p.give)
}

// Repair is FIB.Repair for the IPv6 trie: each tbl0 entry's subtree held
// to the plan as Adopt holds it; one that differs is written anew, in
// lines nothing in the arrays points at, and made live by one store into
// tbl0, after which the lines it replaced are retired. It returns how
// many entries and groups it wrote.
func (f *FIB6) Repair(routes map[netip.Prefix]uint32) (int, error) {
	s := f.plan(routes)
	lines := len(f.pool.w) / fib6LineWords
	referenced := make([]bool, lines)
	for i := range f.tbl0 {
		if v := atomic.LoadUint32(&f.tbl0[i]); v&fib6GroupFlag != 0 {
			f.pool.reach(v&^fib6GroupFlag, referenced, fib6Levels)
		}
	}
	used := make([]bool, lines)
	var bad []uint32
	for i := range f.tbl0 {
		var marked []uint32
		if f.adoptEntry(s, uint32(i), used, &marked) != nil {
			for _, l := range marked {
				used[l] = false
			}
			bad = append(bad, uint32(i))
		}
	}
	live := make([]bool, lines)
	for l := range live {
		live[l] = referenced[l] || used[l]
	}
	f.install(s)
	f.pool.fromUsed(live)
	written := 0
	t := f.begin()
	for _, i := range bad {
		nd := s.top[i]
		if nd == nil {
			atomic.StoreUint32(&f.tbl0[i], s.tbl0[i])
			written++
			continue
		}
		nd.unwritten()
		if err := t.build(nd); err != nil {
			return written, err
		}
		t.publish(nd)
		written += 1 + nd.count()
	}
	t.commit()
	now := time.Now().UnixNano()
	eachRun(lines, func(l int) bool { return referenced[l] && !used[l] }, func(line uint32, n int) { f.pool.retire(line, n, now) })
	return written, nil
}

// reach marks the lines the group at line leads to, as far as depth
// levels (a bad line, or one seen already, ends the walk: the arrays are
// not trusted).
func (p *pool6) reach(line uint32, seen []bool, depth int) {
	var e [256]uint32
	n, err := p.decode(line, &e)
	if err != nil || depth == 0 || seen[line] {
		return
	}
	for l := line; l < line+uint32(n); l++ {
		seen[l] = true
	}
	for j := range e {
		if e[j]&fib6GroupFlag != 0 && (j == 0 || e[j] != e[j-1]) {
			p.reach(e[j]&^fib6GroupFlag, seen, depth-1)
		}
	}
}

// unwritten clears the lines of nd and the groups beneath it, so that a
// build writes them all.
func (nd *node6) unwritten() {
	nd.line, nd.lines = 0, 0
	for _, k := range nd.kids {
		k.unwritten()
	}
}

// count is how many groups lie beneath nd.
func (nd *node6) count() int {
	n := len(nd.kids)
	for _, k := range nd.kids {
		n += k.count()
	}
	return n
}
