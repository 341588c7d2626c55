package xdp

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cilium/ebpf"
)

func newMap(t *testing.T, typ ebpf.MapType, key, value, entries uint32) *ebpf.Map {
	t.Helper()
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: typ, KeySize: key, ValueSize: value, MaxEntries: entries})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestMigrate: each kind of map the data paths pin, grown by a field at
// the end of its value and by entries, keeps every entry's bytes, the
// new field zero; an array of more than a batch keeps all; what cannot
// be copied so (a key resized, a value shrunk, fewer entries) is refused.
func TestMigrate(t *testing.T) {
	val := func(i uint32, size int) []byte {
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(i*7 + uint32(j) + 1)
		}
		return b
	}
	for _, typ := range []ebpf.MapType{ebpf.Array, ebpf.Hash, ebpf.LRUHash, ebpf.PerCPUArray, ebpf.PerCPUHash} {
		t.Run(typ.String(), func(t *testing.T) {
			entries := uint32(1000)
			if typ == ebpf.Array {
				entries = 3*arrayChunk + 5 // several batches and a part
			}
			old := newMap(t, typ, 4, 12, entries)
			nm := newMap(t, typ, 4, 20, entries+100)
			cpus, _ := ebpf.PossibleCPU()
			for i := uint32(0); i < entries; i += 3 {
				if typ == ebpf.PerCPUArray || typ == ebpf.PerCPUHash {
					per := make([][12]byte, cpus)
					for c := range per {
						copy(per[c][:], val(i+uint32(c), 12))
					}
					if err := old.Put(i, per); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if err := old.Put(i, val(i, 12)); err != nil {
					t.Fatal(err)
				}
			}
			n, err := Migrate(old, nm)
			if err != nil {
				t.Fatal(err)
			}
			want := int(entries+2) / 3
			if typ == ebpf.Array || typ == ebpf.PerCPUArray {
				want = int(entries) // every index of an array
			}
			if n != want {
				t.Errorf("copied %d entries, want %d", n, want)
			}
			for i := uint32(0); i < entries; i += 3 {
				if typ == ebpf.PerCPUArray || typ == ebpf.PerCPUHash {
					var per [][20]byte
					if err := nm.Lookup(i, &per); err != nil {
						t.Fatalf("entry %d: %v", i, err)
					}
					for c := range per {
						if !bytes.Equal(per[c][:12], val(i+uint32(c), 12)) || !bytes.Equal(per[c][12:], make([]byte, 8)) {
							t.Fatalf("entry %d CPU %d: %x", i, c, per[c])
						}
					}
					continue
				}
				got := make([]byte, 20)
				if err := nm.Lookup(i, got); err != nil {
					t.Fatalf("entry %d: %v", i, err)
				}
				if !bytes.Equal(got[:12], val(i, 12)) || !bytes.Equal(got[12:], make([]byte, 8)) {
					t.Fatalf("entry %d: %x, want %x and zeros", i, got, val(i, 12))
				}
			}
		})
	}
	old := newMap(t, ebpf.Hash, 4, 12, 10)
	old.Put(uint32(1), make([]byte, 12))
	for name, nm := range map[string]*ebpf.Map{
		"key resized":   newMap(t, ebpf.Hash, 8, 12, 10),
		"value shrunk":  newMap(t, ebpf.Hash, 4, 8, 10),
		"fewer entries": newMap(t, ebpf.Hash, 4, 12, 5),
		"another type":  newMap(t, ebpf.LRUHash, 4, 12, 10),
	} {
		if _, err := Migrate(old, nm); !errors.Is(err, errNotMigratable) {
			t.Errorf("%s: %v, want errNotMigratable", name, err)
		}
	}
}
