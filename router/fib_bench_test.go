package router

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/msr-router/msr/internal/routetable"
)

// BenchmarkFIBLoad1M loads 1,000,000 prefixes (the RouteViews table grown
// with its own length distribution) into an empty FIB.
func BenchmarkFIBLoad1M(b *testing.B) {
	base, err := routetable.Load(routetable.PyASN)
	if err != nil {
		b.Fatal(err)
	}
	ps := routetable.Synthesize(base, 1_000_000, 1)
	routes := make(map[netip.Prefix]uint32, len(ps))
	for i, p := range ps {
		routes[p] = uint32(1 + i%64)
	}
	for b.Loop() {
		f := newTestFIB(b)
		start := time.Now()
		if err := f.SetAll(routes); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "s/load")
		b.ReportMetric(float64(f.Tbl8Used()), "tbl8-groups")
	}
}

// BenchmarkRouteChange changes one /24 route of a full table back and
// forth: the time until the data path's arrays hold the new route.
func BenchmarkRouteChange(b *testing.B) {
	base, err := routetable.Load(routetable.PyASN)
	if err != nil {
		b.Fatal(err)
	}
	f := newTestFIB(b)
	routes := map[netip.Prefix]uint32{}
	for i, p := range base {
		routes[p] = uint32(1 + i%64)
	}
	if err := f.SetAll(routes); err != nil {
		b.Fatal(err)
	}
	var p netip.Prefix
	for _, q := range base {
		if q.Bits() == 24 {
			p = q
			break
		}
	}
	n := uint32(0)
	for b.Loop() {
		n = n%100 + 1
		if err := f.Set(p, n); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWithdrawTable withdraws every route of the RouteViews table
// from a full FIB, as a peer's table leaves when its session is lost:
// the time one withdrawal takes, which the soak's link-down steps wait on
// (docs/reliability.md, finding 28).
func BenchmarkWithdrawTable(b *testing.B) {
	base, err := routetable.Load(routetable.PyASN)
	if err != nil {
		b.Fatal(err)
	}
	routes := make(map[netip.Prefix]uint32, len(base))
	for i, p := range base {
		routes[p] = uint32(1 + i%64)
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		f := newTestFIB(b)
		if err := f.SetAll(routes); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		for _, p := range base {
			if err := f.Delete(p); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(len(base)), "ns/withdrawal")
	}
}

// BenchmarkLayoutSize sizes the IPv4 FIB layouts weighed against
// DIR-24-8 for a million destinations (docs/router.md, "How big a FIB
// stays flat"): a first level indexed by the address's first bits, then
// for each of its entries that holds longer routes a group over the bits
// to /24, compressed into runs as the IPv6 FIB's groups are (a bitmap of
// where runs start, then one entry a run), in 64-byte lines. Each route
// is its own next hop: no aggregation. Reported per first level and
// entry width: MiB of groups, runs a group, the share of groups that fit
// in one line (half line), and the first level's KiB.
//
//	go test ./router -run - -bench LayoutSize -benchtime 1x
func BenchmarkLayoutSize(b *testing.B) {
	base, err := routetable.Load(routetable.PyASN)
	if err != nil {
		b.Fatal(err)
	}
	ps := routetable.Synthesize(base, 1_000_000, 1)
	slices.SortStableFunc(ps, func(p, q netip.Prefix) int { return p.Bits() - q.Bits() })
	for _, first := range []int{16, 18, 20} {
		stride := 24 - first
		// Each group's entries: the id of the longest route over /first
		// covering it (0: none), -1 where a /24 holds longer routes.
		groups := map[uint32][]int32{}
		group := func(g uint32) []int32 {
			if groups[g] == nil {
				groups[g] = make([]int32, 1<<stride)
			}
			return groups[g]
		}
		for id, p := range ps {
			a := p.Addr().As4()
			v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8
			if p.Bits() <= first {
				continue
			}
			e, lo := group(v>>(32-first)), (v>>8)&(1<<stride-1)
			if p.Bits() > 24 {
				e[lo] = -1
				continue
			}
			for i := lo; i < lo+1<<(24-p.Bits()); i++ {
				e[i] = int32(id + 1) // shorter first: no -1 is set yet
			}
		}
		// 4-byte entries (today's) in 64-byte lines; 2-byte ones (a
		// next-hop group's number) in 32-byte half lines.
		for _, width := range []int{4, 2} {
			slot := 16 * width
			b.Run(fmt.Sprintf("first=%d/entry=%dB", first, width), func(b *testing.B) {
				for b.Loop() {
					var runs, oneLine, bytes int
					for _, e := range groups {
						r := 1
						for i := 1; i < len(e); i++ {
							if e[i] != e[i-1] {
								r++
							}
						}
						// The IPv6 lines' header: the bitmap, then a word
						// of run counts before each 64 bits of it.
						size := 1<<stride/8 + 8 + width*r
						runs += r
						bytes += (size + slot - 1) / slot * slot
						if size <= slot {
							oneLine++
						}
					}
					b.ReportMetric(float64(bytes)/(1<<20), "MiB")
					b.ReportMetric(float64(runs)/float64(len(groups)), "runs/group")
					b.ReportMetric(float64(oneLine)/float64(len(groups)), "one-line")
					b.ReportMetric(float64(int(4)<<first)/1024, "first-KiB")
				}
			})
		}
	}
}
