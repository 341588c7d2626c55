package xdp

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"unsafe"

	"github.com/cilium/ebpf"
)

// Migration: a new build whose map layouts changed keeps the running
// state. A pinned map whose layout differs from the new spec's is set
// aside (its pin renamed), the new program loads with a fresh map of the
// new layout in its place, and the old map's entries are copied into it:
// each value's bytes as far as both layouts have them, the rest zero
// (fields are added at the end of a value), every entry of a table grown.
// The old program, still attached, uses the old map until its link is
// updated to the new program (AdoptOrAttach): a frame sees one or the
// other, never an empty table. What cannot be copied so (a key of another
// size, a value or a table that shrank, a map of maps) fails the load and
// puts the old pins back, unless forced: then those maps start empty.

// oldSuffix marks a pin set aside while its map is migrated.
const oldSuffix = "_migrating"

// setAside renames the pins in pinDir of spec's maps whose layout differs
// from spec's, opening each first, and returns them by name.
func setAside(spec *ebpf.CollectionSpec, pinDir string) (map[string]*ebpf.Map, error) {
	aside := map[string]*ebpf.Map{}
	for name, ms := range spec.Maps {
		if ms.Pinning != ebpf.PinByName {
			continue
		}
		path := filepath.Join(pinDir, name)
		m, err := ebpf.LoadPinnedMap(path, nil)
		if err != nil {
			continue
		}
		info, err := m.Info()
		if err != nil || sameLayout(info, ms) {
			m.Close()
			continue
		}
		if err := os.Rename(path, path+oldSuffix); err != nil {
			m.Close()
			putBack(aside, pinDir)
			return nil, fmt.Errorf("set map %s aside: %w", name, err)
		}
		aside[name] = m
	}
	return aside, nil
}

func sameLayout(info *ebpf.MapInfo, ms *ebpf.MapSpec) bool {
	return info.Type == ms.Type && info.KeySize == ms.KeySize && info.ValueSize == ms.ValueSize && info.MaxEntries == ms.MaxEntries
}

// putBack restores the pins set aside, replacing any new ones.
func putBack(aside map[string]*ebpf.Map, pinDir string) {
	for name, m := range aside {
		path := filepath.Join(pinDir, name)
		os.Remove(path)
		os.Rename(path+oldSuffix, path)
		m.Close()
	}
}

// Migrated is what a load did with a map whose layout changed: copied
// (Entries of them), or started empty (forced).
type Migrated struct {
	Map     string
	Entries int
	Empty   bool
	Why     string // why it started empty
}

// migrateAside copies each map set aside into the new one pinned in its
// place, then drops the old pins. A map that cannot be copied fails the
// whole migration unless force.
func migrateAside(aside map[string]*ebpf.Map, pinDir string, o LoadOptions) ([]Migrated, error) {
	var out []Migrated
	for name, old := range aside {
		nm, err := ebpf.LoadPinnedMap(filepath.Join(pinDir, name), nil)
		if err != nil {
			return out, fmt.Errorf("migrate map %s: the new map: %w", name, err)
		}
		n, err := Migrate(old, nm)
		nm.Close()
		switch {
		case err != nil && !o.Force && !slices.Contains(o.Resizable, name):
			return out, fmt.Errorf("migrate map %s: %w (a forced load starts it empty)", name, err)
		case err != nil:
			out = append(out, Migrated{Map: name, Empty: true, Why: err.Error()})
		default:
			out = append(out, Migrated{Map: name, Entries: n})
		}
	}
	for name, old := range aside {
		os.Remove(filepath.Join(pinDir, name+oldSuffix))
		old.Close()
	}
	return out, nil
}

// errNotMigratable says a map's layout changed in a way Migrate does not
// copy.
var errNotMigratable = errors.New("layout changed beyond a value or table grown")

// Migrate copies every entry of old into new: each value's bytes as far
// as both have them, the rest zero; per-CPU values CPU by CPU. new must
// be of old's type and key size, and hold at least old's entries and
// value bytes. It returns how many entries it copied.
func Migrate(old, new *ebpf.Map) (int, error) {
	oi, err := old.Info()
	if err != nil {
		return 0, err
	}
	ni, err := new.Info()
	if err != nil {
		return 0, err
	}
	switch {
	case oi.Type != ni.Type || oi.KeySize != ni.KeySize:
		return 0, fmt.Errorf("%w: %v key %d B, now %v key %d B", errNotMigratable, oi.Type, oi.KeySize, ni.Type, ni.KeySize)
	case ni.ValueSize < oi.ValueSize || ni.MaxEntries < oi.MaxEntries:
		return 0, fmt.Errorf("%w: %d entries of %d B, now %d of %d B", errNotMigratable, oi.MaxEntries, oi.ValueSize, ni.MaxEntries, ni.ValueSize)
	case oi.Type == ebpf.ArrayOfMaps || oi.Type == ebpf.HashOfMaps || oi.Type == ebpf.ProgramArray || oi.Type == ebpf.PerfEventArray:
		return 0, fmt.Errorf("%w: a %v holds references, not values", errNotMigratable, oi.Type)
	}
	if oi.Type == ebpf.Array {
		return copyArray(old, new, int(oi.MaxEntries), int(oi.ValueSize), int(ni.ValueSize))
	}
	keyT := reflect.ArrayOf(int(oi.KeySize), reflect.TypeFor[byte]())
	oldT := reflect.ArrayOf(int(oi.ValueSize), reflect.TypeFor[byte]())
	newT := reflect.ArrayOf(int(ni.ValueSize), reflect.TypeFor[byte]())
	if perCPU(oi.Type) {
		// A value per CPU, in a slice.
		oldT, newT = reflect.SliceOf(oldT), reflect.SliceOf(newT)
	}
	n := 0
	it := old.Iterate()
	key, ov := reflect.New(keyT), reflect.New(oldT)
	for it.Next(key.Interface(), ov.Interface()) {
		nv := reflect.New(newT).Elem()
		if perCPU(oi.Type) {
			nv.Set(reflect.MakeSlice(newT, ov.Elem().Len(), ov.Elem().Len()))
			for c := 0; c < ov.Elem().Len(); c++ {
				reflect.Copy(nv.Index(c).Slice(0, int(oi.ValueSize)), ov.Elem().Index(c).Slice(0, int(oi.ValueSize)))
			}
		} else {
			reflect.Copy(nv.Slice(0, int(oi.ValueSize)), ov.Elem().Slice(0, int(oi.ValueSize)))
		}
		value := nv.Addr().Interface()
		if perCPU(oi.Type) {
			value = nv.Interface() // a slice, not a pointer to one
		}
		if err := new.Put(key.Interface(), value); err != nil {
			return n, fmt.Errorf("copy an entry: %w", err)
		}
		n++
	}
	if err := it.Err(); err != nil {
		return n, fmt.Errorf("read the old map: %w", err)
	}
	return n, nil
}

// arrayChunk is how many entries copyArray moves a syscall.
const arrayChunk = 1 << 16

// copyArray copies an array's entries in batches: a FIB's 16 million
// in a few hundred calls, not 32 million.
func copyArray(old, new *ebpf.Map, entries, oldSize, newSize int) (int, error) {
	chunk := min(arrayChunk, entries)
	keys := make([]uint32, chunk)
	ov, ob := byteArrays(chunk, oldSize)
	nv, nb := byteArrays(chunk, newSize)
	var cursor ebpf.MapBatchCursor
	copied := 0
	for copied < entries {
		n, err := old.BatchLookup(&cursor, keys, ov.Interface(), nil)
		if n == 0 && err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				break
			}
			return copied, fmt.Errorf("read the old map: %w", err)
		}
		clear(nb[:n*newSize])
		for i := range n {
			copy(nb[i*newSize:], ob[i*oldSize:(i+1)*oldSize])
		}
		if _, uerr := new.BatchUpdate(keys[:n], nv.Slice(0, n).Interface(), nil); uerr != nil {
			return copied, fmt.Errorf("copy entries: %w", uerr)
		}
		copied += n
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			break
		}
	}
	return copied, nil
}

// byteArrays is a slice of n values of size bytes each (for the batch
// calls, which take a slice of values), and the same memory as bytes.
func byteArrays(n, size int) (reflect.Value, []byte) {
	v := reflect.MakeSlice(reflect.SliceOf(reflect.ArrayOf(size, reflect.TypeFor[byte]())), n, n)
	return v, unsafe.Slice((*byte)(v.UnsafePointer()), n*size)
}

func perCPU(t ebpf.MapType) bool {
	return t == ebpf.PerCPUArray || t == ebpf.PerCPUHash || t == ebpf.LRUCPUHash
}

// LoadOptions are a pinned load's. Layout is the build's layout version
// of its maps, bumped whenever one of them changes (0: none kept). A
// load over maps pinned by a later layout is a downgrade, refused unless
// Force, since what a later build added would be lost; Force also starts
// empty the maps a migration cannot copy.
type LoadOptions struct {
	Layout uint32
	Force  bool
	// Resizable are maps sized by the agent's config: one made smaller
	// than the pinned one starts empty, as the operator asked, and the
	// agent fills it again.
	Resizable []string
}

// layoutPin is where the layout version of the maps pinned in a
// directory is kept: an array of one u32 pinned beside them (bpffs holds
// no files).
const layoutPin = "msr_layout"

// pinnedLayout is the layout version pinned in pinDir, 0 if none.
func pinnedLayout(pinDir string) uint32 {
	m, err := ebpf.LoadPinnedMap(filepath.Join(pinDir, layoutPin), nil)
	if err != nil {
		return 0
	}
	defer m.Close()
	var v uint32
	if err := m.Lookup(uint32(0), &v); err != nil {
		return 0
	}
	return v
}

// pinLayout records v as the layout of the maps pinned in pinDir.
func pinLayout(pinDir string, v uint32) error {
	path := filepath.Join(pinDir, layoutPin)
	m, err := ebpf.LoadPinnedMap(path, nil)
	if err != nil {
		m, err = ebpf.NewMap(&ebpf.MapSpec{Name: layoutPin, Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1})
		if err != nil {
			return fmt.Errorf("layout version: %w", err)
		}
		if err := m.Pin(path); err != nil {
			m.Close()
			return fmt.Errorf("layout version: %w", err)
		}
	}
	defer m.Close()
	return m.Put(uint32(0), v)
}

// ErrDowngrade refuses a load over maps a later build pinned.
var ErrDowngrade = errors.New("downgrade refused")

// Layout describes the layout of spec's pinned maps, a line each, sorted:
// what a layout version stands for. The entries of the maps sized by the
// config (resizable) are left out.
func Layout(spec *ebpf.CollectionSpec, resizable ...string) string {
	var lines []string
	for name, ms := range spec.Maps {
		if ms.Pinning != ebpf.PinByName {
			continue
		}
		entries := fmt.Sprint(ms.MaxEntries)
		if slices.Contains(resizable, name) {
			entries = "config"
		}
		lines = append(lines, fmt.Sprintf("%s %v key %d value %d entries %s", name, ms.Type, ms.KeySize, ms.ValueSize, entries))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n"
}
