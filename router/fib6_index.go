package router

import (
	"fmt"
	"math/bits"
	"sync/atomic"
)

// The IPv6 FIB's jump index (bpf/router.h says what and why): for each
// group that holds a /32's or a /40's next 8 bits, a word naming it, keyed
// by the prefix, in an open-addressing table the data path probes with
// the destination's own bits. A lookup then reads two entries in a row
// for a /48 where the walk from rt6_tbl16 reads five, and each read of a
// many-flow workload misses the cache (BenchmarkMemLat: five dependent
// reads over 1,000 flows' groups cost 100 ns, against 37 ns for three
// independent ones).
//
// The index only hastens lookups: a group missing from it is found by
// the walk. So it never holds a group that is not where its key says:
// a group is indexed once filled and hooked (descend), leaves the index
// before it is unhooked (collapse), and the index is emptied before
// Reset, Adopt or Repair change what the arrays hold, and built again
// from the trie after.

// fib6IndexBits are the prefix lengths whose groups are indexed: the
// levels a /40 and a /48 end in, today's most common lengths with /32.
var fib6IndexBits = [...]int{32, 40}

const (
	fib6IndexProbes    = int(rtxdpRtLimitRT6INDEX_PROBES)
	fib6IndexGroupBits = int(rtxdpRtLimitRT6INDEX_GROUP_BITS)
	fib6IndexGroupMask = uint64(1)<<fib6IndexGroupBits - 1
	fib6IndexMul       = uint32(rtxdpRtLimitRT6INDEX_MUL)
)

// fib6Index is the index's words (the mmapped rt6_index) and what it
// could not hold.
type fib6Index struct {
	words []uint64
	mask  uint32
	// full counts groups left out because their run of probes was full.
	full uint64
}

// Fib6IndexBuckets is the index's size for a pool of groups: twice as
// many buckets, a power of two, so that runs stay short.
func Fib6IndexBuckets(groups int) int {
	return 1 << bits.Len(uint(2*groups-1))
}

// SetIndex gives the FIB its jump index (a power of two of words, empty
// or as the data path last saw it), which it empties and builds from the
// trie; the data path must use the mask, len(words)-1. A FIB's groups must
// be numbered below 2^22 for the index to name them.
func (f *FIB6) SetIndex(words []uint64) error {
	n := len(words)
	if n == 0 || n&(n-1) != 0 || n > 1<<31 || len(f.groups)/256 > 1<<fib6IndexGroupBits {
		return fmt.Errorf("IPv6 FIB index: %d words (a power of two) for %d groups (at most %d)", n, len(f.groups)/256, 1<<fib6IndexGroupBits)
	}
	f.ix = &fib6Index{words: words, mask: uint32(n - 1)}
	f.rebuildIndex()
	return nil
}

// IndexFull is how many groups the index could not hold.
func (f *FIB6) IndexFull() uint64 {
	if f.ix == nil {
		return 0
	}
	return f.ix.full
}

// indexTag is the key of the group that holds the bits after a's first
// plen (32 or 40): the prefix's bits << 2, | 1 for a /32, | 2 for a /40.
func indexTag(a [16]byte, plen int) uint64 {
	top := uint64(a[0])<<32 | uint64(a[1])<<24 | uint64(a[2])<<16 | uint64(a[3])<<8 | uint64(a[4])
	if plen == 32 {
		return (top&^0xff)<<2 | 1
	}
	return top<<2 | 2
}

// home is the first bucket a tag probes (bpf/router.bpf.c's
// fib6_index_find).
func (x *fib6Index) home(tag uint64) uint32 {
	h := (uint32(tag>>32) ^ uint32(tag)) * fib6IndexMul
	return (h ^ h>>15) & x.mask
}

func (x *fib6Index) load(slot uint32) uint64 { return atomic.LoadUint64(&x.words[slot]) }

// find is the group indexed under tag, as the data path finds it.
func (x *fib6Index) find(tag uint64) (uint32, bool) {
	h := x.home(tag)
	for i := 0; i < fib6IndexProbes; i++ {
		w := x.load((h + uint32(i)) & x.mask)
		if w == 0 {
			return 0, false
		}
		if w>>fib6IndexGroupBits == tag {
			return uint32(w & fib6IndexGroupMask), true
		}
	}
	return 0, false
}

// insert indexes group g under tag, in the first empty bucket of its run:
// one aligned 64-bit store, so a lookup sees the whole word or none.
func (x *fib6Index) insert(tag uint64, g uint32) {
	h := x.home(tag)
	for i := 0; i < fib6IndexProbes; i++ {
		slot := (h + uint32(i)) & x.mask
		if x.load(slot) == 0 {
			atomic.StoreUint64(&x.words[slot], tag<<fib6IndexGroupBits|uint64(g))
			return
		}
	}
	x.full++
}

// remove takes tag out of the index, moving back the words after it in
// its cluster that may take its place (deletion by backward shift, which
// needs no tombstones): a word is written to its new bucket before it
// leaves its old one, so a lookup finds it, or misses and walks.
func (x *fib6Index) remove(tag uint64) {
	h := x.home(tag)
	hole := uint32(0)
	found := false
	for i := 0; i < fib6IndexProbes; i++ {
		slot := (h + uint32(i)) & x.mask
		w := x.load(slot)
		if w == 0 {
			break
		}
		if w>>fib6IndexGroupBits == tag {
			hole, found = slot, true
			break
		}
	}
	if !found {
		return // never indexed: its run was full
	}
	atomic.StoreUint64(&x.words[hole], 0)
	// Each move brings a word nearer its home, so the scan meets an empty
	// bucket within a turn of the table (the hole, at worst).
	j := (hole + 1) & x.mask
	for n := 0; n < len(x.words); n, j = n+1, (j+1)&x.mask {
		w := x.load(j)
		if w == 0 {
			return
		}
		// w may move to the hole if the hole lies in its run, between
		// its home and j (cyclically), within its probes.
		home := x.home(w >> fib6IndexGroupBits)
		if (hole-home)&x.mask < (j-home)&x.mask {
			atomic.StoreUint64(&x.words[hole], w)
			atomic.StoreUint64(&x.words[j], 0)
			hole = j
		}
	}
}

// clear empties the index: every lookup walks.
func (x *fib6Index) clear() {
	for i := range x.words {
		atomic.StoreUint64(&x.words[i], 0)
	}
}

// indexGroup indexes the group g just hooked under a's path at level k,
// when its prefix length is an indexed one.
func (f *FIB6) indexGroup(a [16]byte, k int, g uint32) {
	if f.ix == nil {
		return
	}
	for _, plen := range fib6IndexBits {
		if f.base(k) == plen {
			f.ix.insert(indexTag(a, plen), g)
		}
	}
}

// unindexGroup takes the group at level k on a's path out of the index,
// before it is unhooked.
func (f *FIB6) unindexGroup(a [16]byte, k int) {
	if f.ix == nil {
		return
	}
	for _, plen := range fib6IndexBits {
		if f.base(k) == plen {
			f.ix.remove(indexTag(a, plen))
		}
	}
}

// rebuildIndex empties the index and indexes every group of the trie at an
// indexed level.
func (f *FIB6) rebuildIndex() {
	if f.ix == nil {
		return
	}
	f.ix.clear()
	f.ix.full = 0
	var a [16]byte
	for i := range f.tbl0 {
		for b := 0; b < f.first/8; b++ {
			a[b] = byte(i >> (f.first - 8*(b+1)))
		}
		f.indexBelow(entry6{f, -1, uint32(i)}, a, 1)
	}
}

// indexBelow indexes the group entry e names (at level k, on a's path) and
// those beneath it.
func (f *FIB6) indexBelow(e entry6, a [16]byte, k int) {
	v, _ := e.ptr()
	if *v&fib6GroupFlag == 0 || f.base(k) > fib6IndexBits[len(fib6IndexBits)-1] {
		return
	}
	g := *v &^ fib6GroupFlag
	if int(g) >= len(f.groups)/256 {
		return // arrays not trusted yet (an agent's start): Adopt or Repair judges them
	}
	f.indexGroup(a, k, g)
	at := f.first/8 + k - 1 // the byte the group's entries stand for
	for j := uint32(0); j < 256; j++ {
		a[at] = byte(j)
		f.indexBelow(entry6{f, int(g), j}, a, k+1)
	}
	a[at] = 0
}

// lookupIndexed is the data path's start: the deepest indexed group on
// a's path and the level below it, or tbl0's entry and level 1.
func (f *FIB6) lookupStart(a [16]byte) (uint32, int) {
	if f.ix != nil {
		for i := len(fib6IndexBits) - 1; i >= 0; i-- {
			plen := fib6IndexBits[i]
			if plen < f.first {
				continue
			}
			if g, ok := f.ix.find(indexTag(a, plen)); ok {
				k := f.level(plen + 1) // the level of the group plen's prefix names
				return atomic.LoadUint32(&f.groups[g*256+f.slot(a, k)]), k + 1
			}
		}
	}
	return atomic.LoadUint32(&f.tbl0[f.slot(a, 0)]), 1
}
