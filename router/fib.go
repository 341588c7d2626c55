package router

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"sync/atomic"
	"time"
)

// DIR-24-8 constants, generated from router.h's enum rt_limit.
const (
	Tbl24Entries = int(rtxdpRtLimitRT_TBL24ENTRIES)
	Tbl8Groups   = int(rtxdpRtLimitRT_TBL8GROUPS)
	tbl8Flag     = uint32(1) << rtxdpRtLimitRT_TBL8FLAG_BIT
)

// FIB is the DIR-24-8 longest-prefix-match table of bpf/router.h, kept in
// two []uint32 that are the data path's own arrays (mmapped) or, in unit
// tests, plain slices. Every change is a sequence of single aligned 32-bit
// stores, ordered so that any one lookup sees either the old or the new
// route, never a mixture: a tbl8 group is filled before the tbl24 entry
// points at it, and unhooked before it is reused.
//
// Besides the arrays it keeps, per entry, the length of the prefix that
// set it (depth), which is what makes adds and deletes incremental
// (Gupta, Lin, McKeown, INFOCOM 1998).
type FIB struct {
	tbl24, tbl8     []uint32
	depth24, depth8 []uint8
	free            []uint32 // unused tbl8 groups
	routes          *routeSet
	cov             *coverIndex // what Delete falls back to (fib_cover.go)
	changes         uint64      // routes added, changed or deleted
	changedAt       int64       // when the last of them was (Unix nanoseconds; 0: none yet)
}

// Changes counts the writes that changed what a lookup can return: an
// unchanged route set again is not one (so a resync of the same routes
// leaves it alone).
func (f *FIB) Changes() uint64 { return f.changes }

// ChangedAt is when the last change Changes counts was made (zero: none
// yet).
func (f *FIB) ChangedAt() time.Time { return unixNano(f.changedAt) }

// unixNano is a time kept as Unix nanoseconds, 0 the zero time.
func unixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// ErrTbl8Full is returned when more /24s hold longer prefixes than there
// are tbl8 groups.
var ErrTbl8Full = errors.New("no free tbl8 group: too many /24s with longer prefixes")

// NewFIB wraps the two arrays, which must be empty (all zero).
func NewFIB(tbl24, tbl8 []uint32) (*FIB, error) {
	if len(tbl24) != Tbl24Entries || len(tbl8) != Tbl8Groups*256 {
		return nil, fmt.Errorf("FIB arrays of %d and %d entries, want %d and %d", len(tbl24), len(tbl8), Tbl24Entries, Tbl8Groups*256)
	}
	f := &FIB{tbl24: tbl24, tbl8: tbl8, depth24: make([]uint8, Tbl24Entries), depth8: make([]uint8, Tbl8Groups*256),
		routes: newRouteSet(nil), cov: newCoverIndex()}
	for g := Tbl8Groups - 1; g >= 0; g-- {
		f.free = append(f.free, uint32(g))
	}
	return f, nil
}

// Len is the number of routes.
func (f *FIB) Len() int { return f.routes.Len() }

// Tbl8Used is the number of tbl8 groups in use.
func (f *FIB) Tbl8Used() int { return Tbl8Groups - len(f.free) }

// Routes returns every prefix and its next-hop group, sorted.
func (f *FIB) Routes() *routeSet { return f.routes }

func store(p *uint32, v uint32) { atomic.StoreUint32(p, v) }

// Set adds a route, or changes its next-hop group (nhg > 0).
func (f *FIB) Set(p netip.Prefix, nhg uint32) error {
	if !p.Addr().Is4() || nhg == 0 || nhg&tbl8Flag != 0 {
		return fmt.Errorf("route %s -> %d: IPv4 prefix and a next-hop group 1..%d", p, nhg, tbl8Flag-1)
	}
	p = p.Masked()
	old, had := f.routes.Get(p)
	if had && old == nhg {
		return nil
	}
	if p.Bits() > 24 {
		if err := f.ensureGroup(index24(p)); err != nil {
			return err
		}
	}
	f.changes++
	f.changedAt = time.Now().UnixNano()
	f.routes.set(p, nhg)
	f.cov.set(p, nhg, !had)
	f.fill(p, nhg, uint8(p.Bits()), func(d uint8) bool { return d <= uint8(p.Bits()) })
	return nil
}

// Delete removes a route; the addresses it covered fall back to the
// longest shorter prefix that covers them.
func (f *FIB) Delete(p netip.Prefix) error {
	p = p.Masked()
	if _, ok := f.routes.Get(p); !ok {
		return fmt.Errorf("no route %s", p)
	}
	f.routes.del(p)
	f.cov.remove(p)
	f.changes++
	f.changedAt = time.Now().UnixNano()
	cover, coverLen := f.cover(p)
	f.fill(p, cover, coverLen, func(d uint8) bool { return d == uint8(p.Bits()) })
	if p.Bits() > 24 {
		f.collapse(index24(p))
	}
	return nil
}

// fill writes value (set by a prefix of length depth) into every entry
// p covers whose current depth satisfies take.
func (f *FIB) fill(p netip.Prefix, value uint32, depth uint8, take func(uint8) bool) {
	a := u32(p.Addr())
	if p.Bits() <= 24 {
		first := a >> 8
		n := uint32(1) << (24 - p.Bits())
		for i := first; i < first+n; i++ {
			if e := f.tbl24[i]; e&tbl8Flag != 0 {
				g := e &^ tbl8Flag
				for j := g * 256; j < g*256+256; j++ {
					if take(f.depth8[j]) {
						store(&f.tbl8[j], value)
						f.depth8[j] = depth
					}
				}
				if take(f.depth24[i]) {
					f.depth24[i] = depth
				}
				continue
			}
			if take(f.depth24[i]) {
				store(&f.tbl24[i], value)
				f.depth24[i] = depth
			}
		}
		return
	}
	g := f.tbl24[a>>8] &^ tbl8Flag
	first := g*256 + a&0xff
	n := uint32(1) << (32 - p.Bits())
	for j := first; j < first+n; j++ {
		if take(f.depth8[j]) {
			store(&f.tbl8[j], value)
			f.depth8[j] = depth
		}
	}
}

// ensureGroup gives /24 number i a tbl8 group, filled with what the tbl24
// entry says, before the entry points at it.
func (f *FIB) ensureGroup(i uint32) error {
	if f.tbl24[i]&tbl8Flag != 0 {
		return nil
	}
	if len(f.free) == 0 {
		return ErrTbl8Full
	}
	g := f.free[len(f.free)-1]
	f.free = f.free[:len(f.free)-1]
	v, d := f.tbl24[i], f.depth24[i]
	for j := g * 256; j < g*256+256; j++ {
		store(&f.tbl8[j], v)
		f.depth8[j] = d
	}
	store(&f.tbl24[i], tbl8Flag|g)
	return nil
}

// collapse returns /24 number i to a plain tbl24 entry once no prefix
// longer than /24 is left in it, and frees its group.
func (f *FIB) collapse(i uint32) {
	e := f.tbl24[i]
	if e&tbl8Flag == 0 {
		return
	}
	g := e &^ tbl8Flag
	for j := g * 256; j < g*256+256; j++ {
		if f.depth8[j] > 24 {
			return
		}
	}
	// Every entry holds the /24-or-shorter route, which depth24 tracks.
	store(&f.tbl24[i], f.tbl8[g*256])
	f.free = append(f.free, g)
}

// Lookup reads the arrays exactly as the data path does.
func (f *FIB) Lookup(a netip.Addr) uint32 {
	d := u32(a)
	v := atomic.LoadUint32(&f.tbl24[d>>8])
	if v&tbl8Flag != 0 {
		v = atomic.LoadUint32(&f.tbl8[(v&^tbl8Flag)<<8|d&0xff])
	}
	return v
}

// SetAll loads many routes, shortest prefixes first so that each entry is
// written as few times as possible.
func (f *FIB) SetAll(routes map[netip.Prefix]uint32) error { return setShortestFirst(routes, f.Set) }

// setShortestFirst calls set for every route, shortest prefixes first:
// SetAll of both FIBs.
func setShortestFirst(routes map[netip.Prefix]uint32, set func(netip.Prefix, uint32) error) error {
	ps := make([]netip.Prefix, 0, len(routes))
	for p := range routes {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].Bits() < ps[j].Bits() })
	for _, p := range ps {
		if err := set(p, routes[p]); err != nil {
			return err
		}
	}
	return nil
}

func index24(p netip.Prefix) uint32 { return u32(p.Addr()) >> 8 }

func u32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// ErrAdopt is returned when the arrays do not hold the routes given.
var ErrAdopt = errors.New("the data path's FIB does not hold the saved routes")

// Adopt takes over arrays that already hold routes (a restarted agent's
// pinned maps) without writing to them: it rebuilds the depths and the
// free tbl8 groups, after checking that the arrays hold exactly routes.
// The data path forwards on throughout.
func (f *FIB) Adopt(routes map[netip.Prefix]uint32) error {
	scratch, err := NewFIB(make([]uint32, Tbl24Entries), make([]uint32, Tbl8Groups*256))
	if err != nil {
		return err
	}
	if err := scratch.SetAll(routes); err != nil {
		return err
	}
	used := make([]bool, Tbl8Groups)
	for i, v := range f.tbl24 {
		s := scratch.tbl24[i]
		switch {
		case v&tbl8Flag == 0 && s&tbl8Flag == 0:
			if v != s {
				return fmt.Errorf("%w: /24 number %d holds %d, want %d", ErrAdopt, i, v, s)
			}
			f.depth24[i] = scratch.depth24[i]
		case v&tbl8Flag != 0 && s&tbl8Flag != 0:
			g, sg := v&^tbl8Flag, s&^tbl8Flag
			if int(g) >= Tbl8Groups || used[g] {
				return fmt.Errorf("%w: tbl8 group %d is bad or shared", ErrAdopt, g)
			}
			used[g] = true
			for j := uint32(0); j < 256; j++ {
				if f.tbl8[g*256+j] != scratch.tbl8[sg*256+j] {
					return fmt.Errorf("%w: in /24 number %d", ErrAdopt, i)
				}
				f.depth8[g*256+j] = scratch.depth8[sg*256+j]
			}
			f.depth24[i] = scratch.depth24[i]
		default:
			return fmt.Errorf("%w: /24 number %d has a tbl8 group on one side only", ErrAdopt, i)
		}
	}
	f.free, f.routes = adopted(used, routes)
	f.cov.rebuild(f.routes)
	return nil
}

// adopted is what an adopting FIB keeps (FIB.Adopt, FIB.Repair): the
// groups no entry uses, free, the lowest last as a new FIB has them, and
// the routes.
func adopted(used []bool, routes map[netip.Prefix]uint32) ([]uint32, *routeSet) {
	var free []uint32
	for g := len(used) - 1; g >= 0; g-- {
		if !used[g] {
			free = append(free, uint32(g))
		}
	}
	rs := newRouteSet(nil)
	for p, v := range routes {
		rs.set(p.Masked(), v)
	}
	return free, rs
}

// Reset empties the FIB: every entry written zero, every group free.
func (f *FIB) Reset() {
	for i := range f.tbl24 {
		store(&f.tbl24[i], 0)
	}
	clear(f.depth24)
	clear(f.depth8)
	f.free = f.free[:0]
	for g := Tbl8Groups - 1; g >= 0; g-- {
		f.free = append(f.free, uint32(g))
	}
	f.routes = newRouteSet(nil)
	f.cov.rebuild(f.routes)
}
