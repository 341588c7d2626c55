package bench

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
)

// memlatPool is the group pool BenchmarkMemLat reads: the 221,257 groups
// (216 MiB) of the IPv6 FIB with the clustered 250,000-prefix table
// (docs/router.md), as one array and as arrays of 31 groups.
const memlatPool = 221_257

// BenchmarkMemLat: what the reads of a table lookup cost in an XDP
// program, by how many a lookup makes, whether each waits for the one
// before (a trie walk) or all may be outstanding at once (tables indexed
// by the address), how many distinct places the lookups cycle over (the
// flows), and where the pool is (one vmalloc'd array in 4 KiB pages, or
// kmalloc'd inner arrays in the kernel's huge-page direct map). Reported:
// ns per lookup and per read, medians over the runs (-benchtime Nx).
//
//	go test ./bench -run - -bench MemLat -benchtime 5x
func BenchmarkMemLat(b *testing.B) {
	spec, err := loadMemlat()
	if err != nil {
		b.Fatal(err)
	}
	spec.Maps["memlat_groups"].MaxEntries = memlatPool
	inner := (memlatPool + 30) / 31
	spec.Maps["memlat_outer"].MaxEntries = uint32(inner)
	var objs memlatObjects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		b.Fatal(err)
	}
	defer objs.Close()
	for i := 0; i < inner; i++ {
		m, err := ebpf.NewMap(spec.Maps["memlat_outer"].InnerMap)
		if err != nil {
			b.Fatalf("inner array %d: %v", i, err)
		}
		err = objs.MemlatOuter.Put(uint32(i), m)
		m.Close()
		if err != nil {
			b.Fatal(err)
		}
	}
	progs := map[string]*ebpf.Program{"chase": objs.Chase, "probe": objs.Probe, "chase_nested": objs.ChaseNested}
	for _, layout := range []string{"chase", "probe", "chase_nested"} {
		for _, reads := range []uint32{1, 3, 5} {
			for _, keys := range []uint32{1, 1000, 4000, 64000} {
				b.Run(fmt.Sprintf("%s/reads=%d/keys=%d", layout, reads, keys), func(b *testing.B) {
					cfg := memlatMemlatCfg{Keys: keys, Reads: reads, Groups: memlatPool, Inner: uint32(inner)}
					runMemlat(b, objs.MemlatConfig, progs[layout], cfg)
				})
			}
		}
	}
}

// BenchmarkMemLatPool: what one dependent read costs by the size of the
// table it falls in, a million places spread over it (a million
// destinations over a FIB of that size): the curve a FIB's design for
// many destinations is chosen on (docs/router.md, "How big a FIB stays
// flat").
//
//	go test ./bench -run - -bench MemLatPool -benchtime 7x
func BenchmarkMemLatPool(b *testing.B) {
	spec, err := loadMemlat()
	if err != nil {
		b.Fatal(err)
	}
	spec.Maps["memlat_groups"].MaxEntries = 65536 // 64 MiB, DIR-24-8's tbl24
	delete(spec.Maps, "memlat_outer")
	delete(spec.Programs, "chase_nested")
	delete(spec.Programs, "probe")
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		b.Fatal(err)
	}
	defer coll.Close()
	for _, kib := range []uint32{16, 256, 1024, 4096, 8192, 16384, 32768, 65536} {
		for _, reads := range []uint32{1, 2} {
			b.Run(fmt.Sprintf("pool=%dKiB/reads=%d", kib, reads), func(b *testing.B) {
				cfg := memlatMemlatCfg{Keys: 1 << 20, Reads: reads, Groups: kib}
				runMemlat(b, coll.Maps["memlat_config"], coll.Programs["chase"], cfg)
			})
		}
	}
}

// runMemlat sets cfg and runs prog b.N times, reporting the median run's
// ns per lookup and per read.
func runMemlat(b *testing.B, config *ebpf.Map, prog *ebpf.Program, cfg memlatMemlatCfg) {
	if err := config.Put(uint32(0), cfg); err != nil {
		b.Fatal(err)
	}
	frame := make([]byte, 64)
	var runs []time.Duration
	for i := 0; i < b.N; i++ {
		ret, d, err := prog.Benchmark(frame, 20_000, nil)
		if err != nil || ret != 2 { // XDP_PASS
			b.Fatalf("run: verdict %d, %v", ret, err)
		}
		runs = append(runs, d)
	}
	slices.Sort(runs)
	perLookup := float64(runs[len(runs)/2].Nanoseconds()) / 64 // MEMLAT_STEPS
	b.ReportMetric(perLookup, "ns/lookup")
	b.ReportMetric(perLookup/float64(cfg.Reads), "ns/read")
}
