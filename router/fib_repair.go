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
