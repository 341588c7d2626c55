package router

import (
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"
)

// FIB6 is the back-end's IPv6 longest-prefix-match table: a multibit trie
// whose first stride (tbl0, 2^first entries) is a flat array and whose
// 8-bit groups beneath are stored compressed, as Poptrie (Asai and Ohara,
// SIGCOMM 2015) stores its leaves: a 256-bit bitmap marks where each run
// of equal entries begins and only the runs' values follow it, so a
// group with a few prefixes, as most of a real table's are, takes one
// 64-byte line where an array of 256 entries took 16 (docs/router.md,
// "The IPv6 FIB"). A lookup reads one line per 8 bits past the first
// stride, as before, and counts the bitmap's bits up to its byte.
//
// tbl0's entries and the groups' values are a next-hop group (0: no
// route) or, with fib6GroupFlag, the first line of the group beneath.
// Groups are copied on write: a changed group is written to fresh lines
// and made live by one atomic store into its parent, so that a lookup
// sees the old table or the new; lines a group leaves are reused only
// after fib6Quiet, longer than any data path run that may still read
// them. The trie's shape, each group's prefixes and children, is kept
// beside the lines, from which a group is written again.
type FIB6 struct {
	first  int // the first stride's bits: a multiple of 8
	tbl0   []uint32
	depth0 []uint8 // the length of the prefix that set each tbl0 entry
	top    map[uint32]*node6
	pool   pool6
	routes *routeSet
	nodes  int

	changes   uint64
	changedAt int64 // FIB.changedAt's
}

// node6 is one compressed group: the prefixes that end within its 8 bits
// and the groups beneath it.
type node6 struct {
	parent *node6 // nil: its entry is in tbl0
	slot   uint32 // its entry's index in the parent's group, or in tbl0
	cover  uint32 // what its entries hold where none of its prefixes is
	routes []route6
	kids   []*node6 // by slot
	line   uint32   // its first line (0: not written)
	lines  uint8
}

// route6 is a prefix within a group: its first entry and its length past
// the group's base (1 to 8 bits).
type route6 struct {
	key, bits uint8
	nhg       uint32
}

const (
	fib6GroupFlag = uint32(1) << 31
	fib6LineWords = 16 // a line is 64 bytes
	// fib6Header is a group's bitmap (8 words) and the run counts before
	// each of its 64-bit words (bytes of one word).
	fib6Header   = 9
	fib6MaxLines = (fib6Header + 256 + fib6LineWords - 1) / fib6LineWords
	fib6Levels   = 14 // groups below a 16-bit tbl0: bpf/router.h's RT6_LEVELS
)

// FIB6LineWords is the u32 words of a line of the IPv6 pool (rt6_pool).
const FIB6LineWords = fib6LineWords

// fib6Quiet is how long lines a group left wait before they are reused:
// far longer than a data path run, even one the hypervisor stalls.
const fib6Quiet = 50 * time.Millisecond

// ErrFIB6Full is returned when a route needs lines and none is free.
var ErrFIB6Full = errors.New("no free line in the IPv6 FIB's pool (fib6_lines)")

// NewFIB6 wraps the arrays, which must be empty: tbl0 of 2^first entries,
// pool of a whole number of lines (line 0 is never used).
func NewFIB6(first int, tbl0, pool []uint32) (*FIB6, error) {
	if first%8 != 0 || first < 8 || first > 32 || len(tbl0) != 1<<first || len(pool)%fib6LineWords != 0 || len(pool) < 2*fib6LineWords {
		return nil, fmt.Errorf("IPv6 FIB: first stride %d (8, 16, 24 or 32) with %d entries, a pool of %d words", first, len(tbl0), len(pool))
	}
	f := &FIB6{first: first, tbl0: tbl0, depth0: make([]uint8, len(tbl0)), top: map[uint32]*node6{},
		routes: newRouteSet(nil)}
	f.pool.reset(pool)
	return f, nil
}

// Len is the number of routes.
func (f *FIB6) Len() int { return f.routes.Len() }

// LinesUsed is the lines that live groups take; Lines the pool's.
func (f *FIB6) LinesUsed() int { return f.pool.used }
func (f *FIB6) Lines() int     { return len(f.pool.w)/fib6LineWords - 1 }

// Groups is how many groups the trie has.
func (f *FIB6) Groups() int { return f.nodes }

// Changes counts the writes that changed what a lookup can return.
func (f *FIB6) Changes() uint64 { return f.changes }

// ChangedAt is as FIB.ChangedAt.
func (f *FIB6) ChangedAt() time.Time { return unixNano(f.changedAt) }

// Routes returns every prefix and its next-hop group.
func (f *FIB6) Routes() *routeSet { return f.routes }

// level is the trie level a prefix of bits ends in: 0 for tbl0, k for
// the groups k strides below it.
func (f *FIB6) level(bits int) int {
	if bits <= f.first {
		return 0
	}
	return (bits - f.first + 7) / 8
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

// Lookup reads the arrays as the data path does.
func (f *FIB6) Lookup(addr netip.Addr) uint32 {
	a := addr.As16()
	v := atomic.LoadUint32(&f.tbl0[f.slot(a, 0)])
	for k := 1; v&fib6GroupFlag != 0; k++ {
		if f.first/8+k-1 >= 16 {
			return 0
		}
		var ok bool
		if v, ok = f.pool.value(v&^fib6GroupFlag, a[f.first/8+k-1]); !ok {
			return 0
		}
	}
	return v
}

// Set adds a route, or changes its next-hop group (nhg > 0).
func (f *FIB6) Set(p netip.Prefix, nhg uint32) error {
	if !p.Addr().Is6() || p.Addr().Is4In6() || nhg == 0 || nhg&fib6GroupFlag != 0 {
		return fmt.Errorf("route %s -> %d: IPv6 prefix and a next-hop group 1..%d", p, nhg, fib6GroupFlag-1)
	}
	p = p.Masked()
	old, had := f.routes.Get(p)
	if had && old == nhg {
		return nil
	}
	a, n := p.Addr().As16(), p.Bits()
	var err error
	if k := f.level(n); k == 0 {
		err = f.fillTop(a, n, nhg, uint8(n), func(d uint8) bool { return d <= uint8(n) })
	} else {
		err = f.setDeep(a, n, k, nhg)
	}
	if err != nil {
		return err
	}
	f.changes++
	f.changedAt = time.Now().UnixNano()
	f.routes.set(p, nhg)
	return nil
}

// Delete removes a route; what it covered falls back to the longest
// shorter route that covers it.
func (f *FIB6) Delete(p netip.Prefix) error {
	p = p.Masked()
	if _, ok := f.routes.Get(p); !ok {
		return fmt.Errorf("no route %s", p)
	}
	a, n := p.Addr().As16(), p.Bits()
	var err error
	if k := f.level(n); k == 0 {
		cover, coverLen := 0, 0
		for l := n - 1; l >= 0; l-- {
			q, _ := p.Addr().Prefix(l)
			if v, ok := f.routes.Get(q); ok {
				cover, coverLen = int(v), l
				break
			}
		}
		err = f.fillTop(a, n, uint32(cover), uint8(coverLen), func(d uint8) bool { return d == uint8(n) })
	} else {
		err = f.deleteDeep(a, n, k)
	}
	if err != nil {
		return err
	}
	f.routes.del(p)
	f.changes++
	f.changedAt = time.Now().UnixNano()
	return nil
}

// fillTop writes value (set by a prefix of length depth) into every tbl0
// entry that a/bits covers and whose depth take accepts; an entry that
// names a group gives the group the value to cover with, and the group is
// written again.
func (f *FIB6) fillTop(a [16]byte, bits int, value uint32, depth uint8, take func(uint8) bool) error {
	n := uint32(1) << (f.first - bits)
	first := f.slot(a, 0) &^ (n - 1)
	t := f.begin()
	var plain []uint32
	for i := first; i < first+n; i++ {
		if !take(f.depth0[i]) {
			continue
		}
		if nd := f.top[i]; nd != nil {
			t.keep(nd)
			nd.cover = value
			if err := t.build(nd); err != nil {
				t.rollback()
				return err
			}
			t.publish(nd)
		} else {
			plain = append(plain, i)
		}
	}
	for i := first; i < first+n; i++ {
		if take(f.depth0[i]) {
			f.depth0[i] = depth
		}
	}
	for _, i := range plain {
		atomic.StoreUint32(&f.tbl0[i], value)
	}
	t.commit()
	return nil
}

// setDeep adds or changes a route longer than the first stride: the
// groups on its path made as needed, its group and those whose cover it
// changes written again, and the highest one made live.
func (f *FIB6) setDeep(a [16]byte, bits, k int, nhg uint32) error {
	path, made := f.descend(a, k)
	nd := path[k-1]
	key, n := f.stride(a, bits, k)
	r := route6{key: key, bits: n, nhg: nhg}
	i, found := nd.find(r.key, r.bits)
	var old route6
	if found {
		old = nd.routes[i]
		nd.routes[i] = r
	} else {
		nd.routes = slices.Insert(nd.routes, i, r)
	}
	t := f.begin()
	top := nd
	if made > 0 {
		top = path[k-made] // the highest new group
		if top.parent != nil {
			top = top.parent // written again with its new child
		}
	}
	t.keep(top)
	if err := t.build(top); err != nil {
		t.rollback()
		if found {
			nd.routes[i] = old
		} else {
			nd.routes = slices.Delete(nd.routes, i, i+1)
		}
		f.unmake(path, made)
		return err
	}
	t.publish(top)
	t.commit()
	return nil
}

// deleteDeep removes a route longer than the first stride; a group left
// with neither prefixes nor children goes, and its parent is written
// again without it.
func (f *FIB6) deleteDeep(a [16]byte, bits, k int) error {
	path, _ := f.walk(a, k)
	if len(path) < k {
		return fmt.Errorf("no group at level %d", len(path)+1)
	}
	nd := path[k-1]
	key, n := f.stride(a, bits, k)
	i, found := nd.find(key, n)
	if !found {
		return fmt.Errorf("no route of %d bits at %d in its group", n, key)
	}
	old := nd.routes[i]
	nd.routes = slices.Delete(nd.routes, i, i+1)
	t := f.begin()
	top := nd
	var gone []*node6
	for top.parent != nil && len(top.routes) == 0 && len(top.kids) == 0 {
		gone = append(gone, top)
		top.parent.dropKid(top)
		top = top.parent
	}
	if len(top.routes) == 0 && len(top.kids) == 0 {
		// The group below tbl0 goes too: its entry takes its cover.
		gone = append(gone, top)
		delete(f.top, top.slot)
		atomic.StoreUint32(&f.tbl0[top.slot], top.cover)
		for _, g := range gone {
			t.retire(g)
		}
		f.nodes -= len(gone)
		t.commit()
		return nil
	}
	t.keep(top)
	if err := t.build(top); err != nil {
		t.rollback()
		for j := len(gone) - 1; j >= 0; j-- {
			gone[j].parent.addKid(gone[j])
		}
		nd.routes = slices.Insert(nd.routes, i, old)
		return err
	}
	for _, g := range gone {
		t.retire(g)
	}
	f.nodes -= len(gone)
	t.publish(top)
	t.commit()
	return nil
}

// stride is where a prefix of bits ending at level k lies in its group:
// its first entry, and its length past the group's base (1 to 8).
func (f *FIB6) stride(a [16]byte, bits, k int) (key, n uint8) {
	n = uint8(bits - f.base(k))
	return uint8(f.slot(a, k)) &^ (0xff >> n), n
}

// base is how many bits lie above level k's entries.
func (f *FIB6) base(k int) int {
	if k == 0 {
		return 0
	}
	return f.first + 8*(k-1)
}

// walk returns the groups on a's path down to level k, as far as they go.
func (f *FIB6) walk(a [16]byte, k int) ([]*node6, bool) {
	var path []*node6
	nd := f.top[f.slot(a, 0)]
	for lvl := 1; nd != nil && lvl <= k; lvl++ {
		path = append(path, nd)
		if lvl < k {
			nd = nd.kid(f.slot(a, lvl))
		}
	}
	return path, len(path) == k
}

// descend returns the groups on a's path down to level k, making those
// missing (not yet written) and saying how many it made.
func (f *FIB6) descend(a [16]byte, k int) ([]*node6, int) {
	path, _ := f.walk(a, k)
	made := 0
	for lvl := len(path) + 1; lvl <= k; lvl++ {
		nd := &node6{slot: f.slot(a, lvl-1)}
		if lvl == 1 {
			nd.cover = atomic.LoadUint32(&f.tbl0[nd.slot])
			f.top[nd.slot] = nd
		} else {
			nd.parent = path[lvl-2]
			nd.parent.addKid(nd)
		}
		path = append(path, nd)
		made++
	}
	f.nodes += made
	return path, made
}

// unmake takes back the groups descend made.
func (f *FIB6) unmake(path []*node6, made int) {
	for j := len(path) - 1; j >= len(path)-made; j-- {
		if nd := path[j]; nd.parent == nil {
			delete(f.top, nd.slot)
		} else {
			nd.parent.dropKid(nd)
		}
	}
	f.nodes -= made
}

func (nd *node6) find(key, bits uint8) (int, bool) {
	return slices.BinarySearchFunc(nd.routes, route6{key: key, bits: bits}, func(a, b route6) int {
		if a.bits != b.bits {
			return int(a.bits) - int(b.bits)
		}
		return int(a.key) - int(b.key)
	})
}

func (nd *node6) kid(slot uint32) *node6 {
	i, ok := slices.BinarySearchFunc(nd.kids, slot, func(k *node6, s uint32) int { return int(k.slot) - int(s) })
	if !ok {
		return nil
	}
	return nd.kids[i]
}

func (nd *node6) addKid(k *node6) {
	i, _ := slices.BinarySearchFunc(nd.kids, k.slot, func(k *node6, s uint32) int { return int(k.slot) - int(s) })
	nd.kids = slices.Insert(nd.kids, i, k)
}

func (nd *node6) dropKid(k *node6) {
	i, ok := slices.BinarySearchFunc(nd.kids, k.slot, func(k *node6, s uint32) int { return int(k.slot) - int(s) })
	if ok {
		nd.kids = slices.Delete(nd.kids, i, i+1)
	}
}

// paint is the group's 256 entries without its children: the cover, and
// each prefix over the entries it spans, shortest first.
func (nd *node6) paint(e *[256]uint32) {
	for i := range e {
		e[i] = nd.cover
	}
	for _, r := range nd.routes {
		for i := int(r.key); i < int(r.key)+1<<(8-r.bits); i++ {
			e[i] = r.nhg
		}
	}
}

// SetAll loads many routes, shortest first, so that each group is written
// as few times as possible.
func (f *FIB6) SetAll(routes map[netip.Prefix]uint32) error { return setShortestFirst(routes, f.Set) }

// Reset empties the table: tbl0 zeroed first, so no lookup reaches a
// group while the lines are given back.
func (f *FIB6) Reset() {
	for i := range f.tbl0 {
		atomic.StoreUint32(&f.tbl0[i], 0)
	}
	clear(f.depth0)
	f.top = map[uint32]*node6{}
	f.nodes = 0
	f.pool.reset(f.pool.w)
	f.routes = newRouteSet(nil)
}

// encode writes entries e, compressed, into w: the bitmap of where runs
// begin, the runs before each 64-bit word, and the runs' values. It
// returns how many lines that takes (w has room for fib6MaxLines).
func encode(e *[256]uint32, w []uint32) int {
	clear(w[:fib6Header])
	n := 0
	for i := range e {
		if i == 0 || e[i] != e[i-1] {
			w[i/32] |= 1 << (i % 32)
			w[fib6Header+n] = e[i]
			n++
		}
		if i%64 == 63 && i < 255 {
			w[8] |= uint32(n) << (8 * (i/64 + 1))
		}
	}
	return (fib6Header + n + fib6LineWords - 1) / fib6LineWords
}

// pool6 is the lines groups are written to: free lists by a group's size
// in lines, lines never used yet from next on, and the lines groups left
// waiting out fib6Quiet. Free blocks of other sizes than the one wanted
// are split, and when none is large enough, neighbours are merged
// (coalesce).
type pool6 struct {
	w       []uint32
	next    uint32
	free    [fib6MaxLines + 1][]uint32
	retired []retired6
	used    int
	freed   bool // a block was given back since the last coalesce
}

type retired6 struct {
	line  uint32
	lines uint8
	at    int64
}

func (p *pool6) reset(w []uint32) {
	*p = pool6{w: w, next: 1}
}

// value is what the group at line holds for byte b: the value of the run
// b falls in, its rank among the bitmap's run starts. ok is false when
// the group does not lie within the pool (arrays not to be trusted).
func (p *pool6) value(line uint32, b byte) (uint32, bool) {
	at := int(line) * fib6LineWords
	if line == 0 || at+fib6Header > len(p.w) {
		return 0, false
	}
	wi := int(b >> 6)
	bm := uint64(atomic.LoadUint32(&p.w[at+2*wi])) | uint64(atomic.LoadUint32(&p.w[at+2*wi+1]))<<32
	rank := int(atomic.LoadUint32(&p.w[at+8])>>(8*wi)&0xff) + bits.OnesCount64(bm&(uint64(2)<<(b&63)-1))
	if rank == 0 || at+fib6Header+rank-1 >= len(p.w) {
		return 0, false
	}
	return atomic.LoadUint32(&p.w[at+fib6Header+rank-1]), true
}

// alloc takes n lines: a free block of that size, fresh lines, or part of
// a larger free block; when none is left it waits for retired lines.
func (p *pool6) alloc(n int) (uint32, error) {
	for {
		p.mature(time.Now().UnixNano())
		if l := len(p.free[n]); l > 0 {
			line := p.free[n][l-1]
			p.free[n] = p.free[n][:l-1]
			p.used += n
			return line, nil
		}
		if int(p.next)+n <= len(p.w)/fib6LineWords {
			line := p.next
			p.next += uint32(n)
			p.used += n
			return line, nil
		}
		for m := n + 1; m <= fib6MaxLines; m++ {
			if l := len(p.free[m]); l > 0 {
				line := p.free[m][l-1]
				p.free[m] = p.free[m][:l-1]
				p.give(line+uint32(n), m-n)
				p.used += n
				return line, nil
			}
		}
		if p.freed {
			p.coalesce()
			continue
		}
		if len(p.retired) == 0 {
			return 0, ErrFIB6Full
		}
		time.Sleep(time.Duration(p.retired[0].at + int64(fib6Quiet) - time.Now().UnixNano()))
	}
}

// give returns lines never made live, or matured, to the free lists.
func (p *pool6) give(line uint32, n int) {
	if n > 0 {
		p.free[n] = append(p.free[n], line)
		p.freed = true
	}
}

// coalesce merges free blocks that lie side by side, the lines never
// used included, and gives the runs back in blocks of the largest size.
func (p *pool6) coalesce() {
	free := make([]bool, len(p.w)/fib6LineWords)
	for n := range p.free {
		for _, line := range p.free[n] {
			for l := line; l < line+uint32(n); l++ {
				free[l] = true
			}
		}
		p.free[n] = p.free[n][:0]
	}
	for l := p.next; int(l) < len(free); l++ {
		free[l] = true
	}
	// The run that reaches the end is fresh lines again.
	p.next = uint32(len(free))
	for p.next > 1 && free[p.next-1] {
		p.next--
	}
	eachRun(int(p.next), func(l int) bool { return free[l] }, p.give)
	p.freed = false
}

// eachRun calls f for each run of lines from 1 up to end that in takes,
// in blocks of at most fib6MaxLines.
func eachRun(end int, in func(int) bool, f func(line uint32, n int)) {
	for l := 1; l < end; {
		if !in(l) {
			l++
			continue
		}
		n := 1
		for l+n < end && in(l+n) && n < fib6MaxLines {
			n++
		}
		f(uint32(l), n)
		l += n
	}
}

// retire takes lines out of use: they are free after fib6Quiet.
func (p *pool6) retire(line uint32, n int, now int64) {
	p.used -= n
	p.retired = append(p.retired, retired6{line, uint8(n), now})
}

func (p *pool6) mature(now int64) {
	i := 0
	for ; i < len(p.retired) && now-p.retired[i].at >= int64(fib6Quiet); i++ {
		p.give(p.retired[i].line, int(p.retired[i].lines))
	}
	p.retired = p.retired[:copy(p.retired, p.retired[i:])]
}

// tx6 is one change to the trie: groups written to fresh lines, not yet
// live; what they held before, to roll back; the lines they leave.
type tx6 struct {
	f     *FIB6
	undo  []undo6
	fresh []retired6
	old   []retired6
	pub   []*node6
}

type undo6 struct {
	nd          *node6
	cover, line uint32
	lines       uint8
}

func (f *FIB6) begin() *tx6 { return &tx6{f: f} }

// keep notes what nd holds before the change.
func (t *tx6) keep(nd *node6) {
	t.undo = append(t.undo, undo6{nd: nd, cover: nd.cover, line: nd.line, lines: nd.lines})
}

// build writes nd to fresh lines, after its children whose cover changed
// or that were never written.
func (t *tx6) build(nd *node6) error {
	var e [256]uint32
	nd.paint(&e)
	for _, k := range nd.kids {
		if k.line == 0 || k.cover != e[k.slot] {
			t.keep(k)
			k.cover = e[k.slot]
			if err := t.build(k); err != nil {
				return err
			}
		}
		e[k.slot] = fib6GroupFlag | k.line
	}
	var w [fib6MaxLines * fib6LineWords]uint32
	n := encode(&e, w[:])
	line, err := t.f.pool.alloc(n)
	if err != nil {
		return err
	}
	copy(t.f.pool.w[int(line)*fib6LineWords:], w[:n*fib6LineWords])
	t.fresh = append(t.fresh, retired6{line: line, lines: uint8(n)})
	if nd.line != 0 {
		t.old = append(t.old, retired6{line: nd.line, lines: nd.lines})
	}
	nd.line, nd.lines = line, uint8(n)
	return nil
}

// publish makes nd's lines live at commit: one store into its parent's
// value for its slot (a child's entry is a run of its own), or into tbl0.
func (t *tx6) publish(nd *node6) { t.pub = append(t.pub, nd) }

func (t *tx6) store(nd *node6) {
	v := fib6GroupFlag | nd.line
	if nd.parent == nil {
		atomic.StoreUint32(&t.f.tbl0[nd.slot], v)
		return
	}
	at := int(nd.parent.line) * fib6LineWords
	w := t.f.pool.w[at:]
	wi := int(nd.slot >> 6)
	bm := uint64(w[2*wi]) | uint64(w[2*wi+1])<<32
	rank := int(w[8]>>(8*wi)&0xff) + bits.OnesCount64(bm&(uint64(2)<<(nd.slot&63)-1))
	atomic.StoreUint32(&w[fib6Header+rank-1], v)
}

// retire gives back the lines of a group that left the trie.
func (t *tx6) retire(nd *node6) {
	if nd.line != 0 {
		t.old = append(t.old, retired6{line: nd.line, lines: nd.lines})
	}
}

// commit makes the written groups live and retires the lines they left;
// rollback frees the fresh ones and puts back what the groups held.
func (t *tx6) commit() {
	for _, nd := range t.pub {
		t.store(nd)
	}
	now := time.Now().UnixNano()
	for _, o := range t.old {
		t.f.pool.retire(o.line, int(o.lines), now)
	}
}

func (t *tx6) rollback() {
	for _, fr := range t.fresh {
		t.f.pool.used -= int(fr.lines)
		t.f.pool.give(fr.line, int(fr.lines))
	}
	for j := len(t.undo) - 1; j >= 0; j-- {
		u := t.undo[j]
		u.nd.cover, u.nd.line, u.nd.lines = u.cover, u.line, u.lines
	}
}
