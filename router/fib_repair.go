package router

import "net/netip"

// Repair: a restarted agent whose saved state is behind its data path
// (routes changed after the last save, as under BGP churn: saving waits
// for a quiet second, at most saveEvery) cannot adopt the arrays as they
// are (Adopt refuses them), and rebuilding them from empty left the
// back-end without routes for the rebuild's time: the soak lost 271
// frames to two back-end agents killed under churn. Repair instead makes
// the running arrays hold exactly the saved routes by rewriting only the
// entries that differ, in the order every change here keeps (a group is
// filled before an entry points at it, and unhooked before it is reused),
// so that the data path forwards on throughout and only the routes that
// changed since the save are, for a moment, what they were then. The
// RIB feed's resync (graceful restart) then brings them up to date.

// Repair makes the arrays hold exactly routes, rewriting only what
// differs, and takes them over as Adopt does. It returns how many
// entries it rewrote.
func (f *FIB) Repair(routes map[netip.Prefix]uint32) (int, error) {
	scratch, err := NewFIB(make([]uint32, Tbl24Entries), make([]uint32, Tbl8Groups*256))
	if err != nil {
		return 0, err
	}
	if err := scratch.SetAll(routes); err != nil {
		return 0, err
	}
	// The groups the arrays point at now may not be handed out anew
	// until nothing points at them: fresh ones come from the others.
	referenced := make([]bool, Tbl8Groups)
	for _, v := range f.tbl24 {
		if g := v &^ tbl8Flag; v&tbl8Flag != 0 && int(g) < Tbl8Groups {
			referenced[g] = true
		}
	}
	var fresh []uint32
	for g := Tbl8Groups - 1; g >= 0; g-- {
		if !referenced[g] {
			fresh = append(fresh, uint32(g))
		}
	}
	used := make([]bool, Tbl8Groups)
	written := 0
	for i, v := range f.tbl24 {
		s := scratch.tbl24[i]
		f.depth24[i] = scratch.depth24[i]
		if s&tbl8Flag == 0 {
			if v != s { // a plain entry, or a group unhooked
				store(&f.tbl24[i], s)
				written++
			}
			continue
		}
		sg := s &^ tbl8Flag
		g := v &^ tbl8Flag
		if v&tbl8Flag == 0 || int(g) >= Tbl8Groups || used[g] {
			// A group is wanted where there is none (or a bad or shared
			// one): a fresh one, filled, then pointed at.
			if len(fresh) == 0 {
				return written, ErrTbl8Full
			}
			g, fresh = fresh[len(fresh)-1], fresh[:len(fresh)-1]
			for j := uint32(0); j < 256; j++ {
				store(&f.tbl8[g*256+j], scratch.tbl8[sg*256+j])
			}
			store(&f.tbl24[i], tbl8Flag|g)
			written++
		} else {
			for j := uint32(0); j < 256; j++ {
				if f.tbl8[g*256+j] != scratch.tbl8[sg*256+j] {
					store(&f.tbl8[g*256+j], scratch.tbl8[sg*256+j])
					written++
				}
			}
		}
		used[g] = true
		copy(f.depth8[g*256:g*256+256], scratch.depth8[sg*256:sg*256+256])
	}
	f.free, f.routes = adopted(used, routes)
	f.cov.rebuild(f.routes)
	return written, nil
}

// Repair is FIB.Repair for the IPv6 trie: the two tries walked together
// from tbl0 as Adopt walks them, an entry that differs rewritten, a
// subtree wanted where there is none built in fresh groups before its
// entry points at it.
func (f *FIB6) Repair(routes map[netip.Prefix]uint32) (int, error) {
	scratch, err := NewFIB6(f.first, make([]uint32, len(f.tbl0)), make([]uint32, len(f.groups)))
	if err != nil {
		return 0, err
	}
	if err := scratch.SetAll(routes); err != nil {
		return 0, err
	}
	r := &repair6{f: f, s: scratch, used: make([]bool, len(f.groups)/256)}
	referenced := make([]bool, len(f.groups)/256)
	for i := range f.tbl0 {
		f.reach(entry6{f, -1, uint32(i)}, referenced)
	}
	for g := len(referenced) - 1; g >= 0; g-- {
		if !referenced[g] {
			r.fresh = append(r.fresh, uint32(g))
		}
	}
	for i := range f.tbl0 {
		if err := r.entry(entry6{f, -1, uint32(i)}, entry6{scratch, -1, uint32(i)}); err != nil {
			return r.written, err
		}
	}
	f.free, f.routes = adopted(r.used, routes)
	return r.written, nil
}

// reach marks the groups entry e leads to (a bad index, or one seen
// already, ends the walk: the arrays are not trusted).
func (f *FIB6) reach(e entry6, seen []bool) {
	v, _ := e.ptr()
	g := *v &^ fib6GroupFlag
	if *v&fib6GroupFlag == 0 || int(g) >= len(seen) || seen[g] {
		return
	}
	seen[g] = true
	for j := uint32(0); j < 256; j++ {
		f.reach(entry6{f, int(g), j}, seen)
	}
}

// repair6 is one FIB6.Repair: the scratch trie, the groups kept or
// given, the fresh ones left, the entries written.
type repair6 struct {
	f, s    *FIB6
	used    []bool
	fresh   []uint32
	written int
}

// entry makes e (and what lies beneath it) hold what se does.
func (r *repair6) entry(e, se entry6) error {
	v, d := e.ptr()
	sv, sd := se.ptr()
	*d = *sd
	if *sv&fib6GroupFlag == 0 {
		if *v != *sv {
			store(v, *sv)
			r.written++
		}
		return nil
	}
	g := *v &^ fib6GroupFlag
	if *v&fib6GroupFlag != 0 && int(g) < len(r.used) && !r.used[g] {
		r.used[g] = true
		for j := uint32(0); j < 256; j++ {
			if err := r.entry(entry6{r.f, int(g), j}, entry6{r.s, int(*sv &^ fib6GroupFlag), j}); err != nil {
				return err
			}
		}
		return nil
	}
	ng, err := r.build(int(*sv &^ fib6GroupFlag))
	if err != nil {
		return err
	}
	store(v, fib6GroupFlag|ng)
	r.written++
	return nil
}

// build copies the scratch trie's group sg (and its subtree) into fresh
// groups, none of them reachable yet, and returns the top one.
func (r *repair6) build(sg int) (uint32, error) {
	if len(r.fresh) == 0 {
		return 0, ErrFIB6Full
	}
	g := r.fresh[len(r.fresh)-1]
	r.fresh = r.fresh[:len(r.fresh)-1]
	r.used[g] = true
	for j := uint32(0); j < 256; j++ {
		v, d := entry6{r.f, int(g), j}.ptr()
		sv, sd := entry6{r.s, sg, j}.ptr()
		*d = *sd
		val := *sv
		if val&fib6GroupFlag != 0 {
			child, err := r.build(int(val &^ fib6GroupFlag))
			if err != nil {
				return 0, err
			}
			val = fib6GroupFlag | child
		}
		store(v, val)
		r.written++
	}
	return g, nil
}
