package router

import (
	"net/netip"
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
