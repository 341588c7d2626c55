package router

import (
	"encoding/binary"
	"iter"
	"net/netip"
)

// ribStore is the feed's paths, kept compactly. A full table is a million
// prefixes and more, with one path each mostly, and the paths of most
// prefixes alike: the same next hop and attributes, but for the AS_PATH's
// length. So each distinct set of paths is kept once (interned, its
// prefixes counted), and a prefix holds only its set's number beside a
// key of 8 bytes (IPv4) or 17 (IPv6): about 30 bytes a prefix, where a
// map of slices took 56 and a 48-byte path of its own (docs/benchmarks.md,
// "Memory").
//
// A set is shared: what get returns is the caller's own copy; what all
// yields is the shared set, to be read only.
type ribStore struct {
	ids   *routeSet   // each prefix's set's number
	sets  [][]ribPath // by number; nil: free
	refs  []uint32
	index map[string]uint32 // a set's encoding to its number
	free  []uint32
	buf   []byte
}

func newRIBStore() *ribStore {
	return &ribStore{ids: newRouteSet(nil), index: map[string]uint32{}}
}

// len is the prefixes held; len6 the IPv6 ones.
func (s *ribStore) len() int  { return s.ids.Len() }
func (s *ribStore) len6() int { return len(s.ids.v6) }

// sharedSets is how many distinct sets the prefixes share.
func (s *ribStore) sharedSets() int { return len(s.index) }

// has says whether p has paths.
func (s *ribStore) has(p netip.Prefix) bool {
	_, ok := s.ids.Get(p)
	return ok
}

// get returns a copy of p's paths (nil: none).
func (s *ribStore) get(p netip.Prefix) []ribPath {
	id, ok := s.ids.Get(p)
	if !ok {
		return nil
	}
	return append([]ribPath(nil), s.sets[id]...)
}

// shared returns p's paths, to be read only.
func (s *ribStore) shared(p netip.Prefix) []ribPath {
	if id, ok := s.ids.Get(p); ok {
		return s.sets[id]
	}
	return nil
}

// put makes ps p's paths; none removes p.
func (s *ribStore) put(p netip.Prefix, ps []ribPath) {
	old, had := s.ids.Get(p)
	if len(ps) == 0 {
		if had {
			s.ids.del(p)
			s.release(old)
		}
		return
	}
	s.ids.set(p, s.intern(ps))
	if had {
		s.release(old)
	}
}

// all yields every prefix with its shared paths (to be read only). The
// prefixes may be given new paths meanwhile (put), none added.
func (s *ribStore) all() iter.Seq2[netip.Prefix, []ribPath] {
	return func(yield func(netip.Prefix, []ribPath) bool) {
		for p, id := range s.ids.All() {
			if !yield(p, s.sets[id]) {
				return
			}
		}
	}
}

// intern returns the number of the set equal to ps, made if new, and
// counts one more prefix on it.
func (s *ribStore) intern(ps []ribPath) uint32 {
	s.buf = encodePaths(s.buf[:0], ps)
	if id, ok := s.index[string(s.buf)]; ok {
		s.refs[id]++
		return id
	}
	var id uint32
	if n := len(s.free); n > 0 {
		id, s.free = s.free[n-1], s.free[:n-1]
	} else {
		id = uint32(len(s.sets))
		s.sets, s.refs = append(s.sets, nil), append(s.refs, 0)
	}
	s.sets[id], s.refs[id] = append([]ribPath(nil), ps...), 1
	s.index[string(s.buf)] = id
	return id
}

// release counts one prefix fewer on set id, freed with the last.
func (s *ribStore) release(id uint32) {
	if s.refs[id]--; s.refs[id] > 0 {
		return
	}
	s.buf = encodePaths(s.buf[:0], s.sets[id])
	delete(s.index, string(s.buf))
	s.sets[id] = nil
	s.free = append(s.free, id)
}

// encodePaths appends every field of the paths, the next hop's zone
// included: equal encodings are equal sets.
func encodePaths(b []byte, ps []ribPath) []byte {
	for _, r := range ps {
		a := r.nh.As16()
		b = append(b, a[:]...)
		z := r.nh.Zone()
		b = append(b, byte(len(z)))
		b = append(b, z...)
		b = binary.LittleEndian.AppendUint32(b, r.id)
		b = binary.LittleEndian.AppendUint32(b, r.localPref)
		b = binary.LittleEndian.AppendUint32(b, r.med)
		b = binary.LittleEndian.AppendUint16(b, r.asLen)
		b = binary.LittleEndian.AppendUint16(b, r.linkVLAN)
		b = binary.LittleEndian.AppendUint16(b, r.from.rank)
		flags := byte(0)
		for i, f := range []bool{r.stale, r.link, r.from.distance, r.nh.Is4()} {
			if f {
				flags |= 1 << i
			}
		}
		b = append(b, r.from.code, r.origin, flags)
	}
	return b
}
