package soak

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cilium/ebpf"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/router/routerapi"
)

// The soak's BPF map bounds (no growth of BPF maps beyond their
// bounds). After every step it counts the entries of every hash map
// the default lab's elements pinned (arrays are their size for good), and
// reads the back-ends' FIB group pools (arrays managed by their agents:
// rt_tbl8's IPv4 groups, rt6_pool's IPv6 lines). A map that fills loses
// what it cannot insert: a neighbour, a local address, a route. The
// invariant breaks when a map or a pool is full, or when one grew by more
// than a tenth (and 8 entries) from its first look after the soak's
// second minute to the end: a leak the bound would only catch later. An
// LRU map (the LB's flowlets) holds a flow's state until it needs the
// room, evicting the oldest by design: it grows with the flows seen
// (every HTTP download is a new one) up to its size, and its peak is
// reported, not held against it.

// soakMaps follows the lab's maps across the soak.
type soakMaps struct {
	peak  map[string]mapFill // by element/map
	mark  map[string]int     // entries at the first look after mark
	last  map[string]int
	marks bool // the mark is taken
}

// mapFill is a map's entries against its bound.
type mapFill struct {
	entries, max int
	lru          bool
}

func newSoakMaps() *soakMaps {
	return &soakMaps{peak: map[string]mapFill{}, mark: map[string]int{}, last: map[string]int{}}
}

// look counts every map's entries now; mark says the soak is past its
// second minute (the first look after it is the growth's base).
func (s *soakMaps) look(mark bool) error {
	fills, err := labMapFills()
	s.observe(fills, mark)
	return err
}

// observe takes a look's fills.
func (s *soakMaps) observe(fills map[string]mapFill, mark bool) {
	for name, f := range fills {
		if p := s.peak[name]; f.entries >= p.entries {
			s.peak[name] = f
		}
		s.last[name] = f.entries
		if mark && !s.marks {
			s.mark[name] = f.entries
		}
	}
	if mark && len(fills) > 0 {
		s.marks = true
	}
}

// broken says which maps filled or grew.
func (s *soakMaps) broken() []string {
	var out []string
	for name, p := range s.peak {
		if p.entries >= p.max && !p.lru {
			out = append(out, fmt.Sprintf("%s full (%d of %d)", name, p.entries, p.max))
		}
	}
	if s.marks {
		for name, base := range s.mark {
			if s.peak[name].lru {
				continue // grows with the flows, up to its size, and evicts
			}
			if last := s.last[name]; float64(last) > 1.1*float64(base)+8 {
				out = append(out, fmt.Sprintf("%s grew %d → %d entries", name, base, last))
			}
		}
	}
	sort.Strings(out)
	return out
}

// detail is the fullest maps, for the report.
func (s *soakMaps) detail() string {
	type fill struct {
		name string
		mapFill
	}
	var fs []fill
	for name, p := range s.peak {
		fs = append(fs, fill{name, p})
	}
	sort.Slice(fs, func(i, j int) bool {
		fi, fj := float64(fs[i].entries)/float64(fs[i].max), float64(fs[j].entries)/float64(fs[j].max)
		if fi != fj {
			return fi > fj
		}
		return fs[i].name < fs[j].name
	})
	var top []string
	for _, f := range fs[:min(len(fs), 6)] {
		top = append(top, fmt.Sprintf("%s %d/%d", f.name, f.entries, f.max))
	}
	return fmt.Sprintf("%d maps and pools followed, none full nor grown by a tenth from minute 2; fullest at their peak: %s", len(fs), strings.Join(top, ", "))
}

// labMapFills counts the entries of every hash map pinned by the default
// lab's elements, and the back-ends' FIB group pools.
func labMapFills() (map[string]mapFill, error) {
	fills, tbl8 := map[string]mapFill{}, map[string]int{}
	var errs []error
	for _, el := range append(append([]string{}, demo.LBs...), demo.Backends...) {
		dir := filepath.Join(netns.BPFFS, "msr-default-"+el)
		ents, err := os.ReadDir(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "link_") {
				continue // the XDP links
			}
			m, err := ebpf.LoadPinnedMap(filepath.Join(dir, e.Name()), &ebpf.LoadPinOptions{ReadOnly: true})
			if err != nil {
				errs = append(errs, fmt.Errorf("%s/%s: %w", el, e.Name(), err))
				continue
			}
			if e.Name() == "rt_tbl8" { // an array of IPv4 groups, the agent's pool
				tbl8[el] = int(m.MaxEntries())
			}
			if t := m.Type(); t == ebpf.Hash || t == ebpf.LRUHash {
				n, err := mapEntries(m)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s/%s: %w", el, e.Name(), err))
				}
				fills[el+"/"+e.Name()] = mapFill{n, int(m.MaxEntries()), t == ebpf.LRUHash}
			}
			m.Close()
		}
	}
	for _, b := range demo.Backends {
		st, err := routerapi.Local(b, "").Status()
		if err != nil {
			continue // a back-end between lives: its maps were counted
		}
		if tbl8[b] > 0 {
			fills[b+"/rt_tbl8 (IPv4 groups)"] = mapFill{st.Tbl8Used, tbl8[b], false}
		}
		if st.FIB6Lines > 0 {
			fills[b+"/rt6_pool (IPv6 lines)"] = mapFill{st.FIB6LinesUsed, st.FIB6Lines, false}
		}
	}
	return fills, errors.Join(errs...)
}

// mapEntries counts a hash map's keys. A key deleted while the count
// walks makes the kernel start again from the first: the count stops at
// twice the map's size.
func mapEntries(m *ebpf.Map) (int, error) {
	n := 0
	var cur any
	for n <= 2*int(m.MaxEntries()) {
		next := make([]byte, m.KeySize())
		if err := m.NextKey(cur, next); errors.Is(err, ebpf.ErrKeyNotExist) {
			return n, nil
		} else if err != nil {
			return n, err
		}
		n++
		cur = next
	}
	return n, errors.New("keys changing faster than they could be counted")
}
