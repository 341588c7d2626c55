package router

import (
	"os"
	"reflect"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/msr-router/msr/router/routerapi"
)

// measureRelease is the process's memory just after a release of its
// free heap (rib.go's tableHeld): its resident memory, from the kernel
// (/proc/self/statm), and from the runtime its live heap (what its
// objects held at the last collection's end, which the release ran), its
// heap's fragmentation and all it holds.
func measureRelease() routerapi.MemoryRelease {
	m := routerapi.MemoryRelease{PID: os.Getpid(), At: time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00"), ResidentKB: int64(residentBytes() / 1024)}
	ms := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(ms)
	kB := func(i int) int64 {
		if ms[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return int64(ms[i].Value.Uint64() / 1024)
	}
	m.HeapLiveKB, m.HeapUnusedKB, m.GoKB = kB(0), kB(1), kB(2)-kB(3)
	return m
}

// residentBytes is the process's resident memory (/proc/self/statm).
func residentBytes() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}

// memory is the back-end's memory by part (routerapi.Memory). Call it
// without a.mu: the RIB feed's lock comes first.
func (a *Agent) memory() routerapi.Memory {
	a.mu.Lock()
	rib := a.rib
	a.mu.Unlock()
	m := routerapi.Memory{MapsBytes: a.dp.mapsBytes(), HeapBytes: heapBytes(), RSSBytes: residentBytes()}
	if rib != nil {
		m.RIBBytes = rib.bytes()
	}
	return m
}

// bytes reckons what the feed's paths hold from their counts: each
// prefix's slot in its family's map (its key and its set's number, over
// the map's fill, and a control byte a slot), and each shared set's
// paths, slice header and encoding (ribStore). Go's maps are at most 7/8
// full and double when they are, so a map is 7/16 to 7/8 full: taken at
// two thirds. An estimate: with both full tables a heap profile put 40
// MB in the store, and this reckons 28.
func (f *ribFeed) bytes() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.paths.bytes()
}

func (s *ribStore) bytes() uint64 {
	slot4 := (unsafe.Sizeof(uint64(0))+unsafe.Sizeof(uint32(0)))*3/2 + 1
	slot6 := unsafe.Sizeof(struct {
		k [17]byte
		v uint32
	}{})*3/2 + 1
	n := uint64(len(s.ids.v4))*uint64(slot4) + uint64(len(s.ids.v6))*uint64(slot6)
	for _, set := range s.sets {
		if set != nil {
			n += uint64(len(set))*uint64(unsafe.Sizeof(ribPath{})+60) + uint64(unsafe.Sizeof(set)) + 24
		}
	}
	return n
}

// mapsBytes is what the kernel charges for the data path's maps
// (memlock, from each map's info).
func (d *Dataplane) mapsBytes() uint64 {
	var n uint64
	v := reflect.ValueOf(d.objs.rtxdpMaps)
	for i := range v.NumField() {
		m, ok := v.Field(i).Interface().(*ebpf.Map)
		if !ok || m == nil {
			continue
		}
		if info, err := m.Info(); err == nil {
			if b, ok := info.Memlock(); ok {
				n += b
			}
		}
	}
	return n
}

// heapBytes is what the Go heap's objects hold.
func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
