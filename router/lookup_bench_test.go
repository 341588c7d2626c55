package router

import (
	"math/rand/v2"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/msr-router/msr/internal/routetable"
	"github.com/msr-router/msr/router/routerapi"
)

// BenchmarkRouterLookup is the router program's own cost per packet in the
// kernel (BPF_PROG_RUN's repeat: no NIC, no traffic), IPv4 and IPv6, with
// 10 prefixes and with full tables, for frames to 256 destinations drawn
// from the table (each destination run lookupRepeat times, so the arrays'
// entries on its path are as cached as a flow's would be). Every route
// goes to a next hop on a port without a VLAN: the frame passes every
// check, the trie walk, the ECMP group, the next hop and the port, and is
// dropped as bad_nexthop just before the neighbour lookup and rewrite,
// which leaves it unchanged for the next repeat (XDP_TX's rewrite would
// tag it again on every run). So this is the lookup path's cost, not a
// forwarding rate: docs/router.md gives the figures and the command,
//
//	go test ./router -run - -bench RouterLookup -benchtime 3x
func BenchmarkRouterLookup(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, c := range []struct{ name, fib string }{
		{"ipv4-10", "10"}, {"ipv4-pyasn", "pyasn"}, {"ipv4-600000", "600000"},
		{"ipv6-10", "10v6"}, {"ipv6-pyasn6", "pyasn6"}, {"ipv6-250000v6", "250000v6"},
	} {
		b.Run(c.name, func(b *testing.B) {
			v6 := c.fib == "pyasn6" || strings.HasSuffix(c.fib, "v6")
			var ps []netip.Prefix
			var err error
			if v6 {
				ps, err = routetable.Named6(c.fib)
			} else {
				ps, err = routetable.Named(c.fib)
			}
			if err != nil {
				b.Fatal(err)
			}
			lines := max(DefaultFIB6Lines, routerapi.FIB6LinesFor(ps, 16)*5/4)
			dp, err := LoadDataplane("", Sizes{FIB6Lines: lines}, false)
			if err != nil {
				b.Fatal(err)
			}
			defer dp.Close()
			if err := dp.SetConfig(macSelf, 0); err != nil {
				b.Fatal(err)
			}
			if err := dp.SetPort(Port{Index: 1, MTU: 9000}); err != nil { // no VLAN: bad_nexthop
				b.Fatal(err)
			}
			if err := dp.SetNextHop(1, netip.Addr{}, 1); err != nil {
				b.Fatal(err)
			}
			if err := dp.SetGroup(1, []uint32{1}); err != nil {
				b.Fatal(err)
			}
			routes := make(map[netip.Prefix]uint32, len(ps))
			for _, p := range ps {
				routes[p] = 1
			}
			start := time.Now()
			if v6 {
				err = dp.FIB6.SetAll(routes)
			} else {
				err = dp.FIB.SetAll(routes)
			}
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("%d prefixes loaded in %v; IPv6 groups %d in %d lines", len(ps), time.Since(start).Round(time.Millisecond), dp.FIB6.Groups(), dp.FIB6.LinesUsed())
			r := rand.New(rand.NewPCG(1, 2))
			frames := make([][]byte, 256)
			for i := range frames {
				p := ps[r.IntN(len(ps))]
				a := p.Addr().AsSlice()
				for bit := p.Bits(); bit < len(a)*8; bit++ {
					if r.IntN(2) == 0 {
						a[bit/8] |= 0x80 >> (bit % 8)
					}
				}
				dst, _ := netip.AddrFromSlice(a)
				if v6 {
					frames[i] = data6(dst, 64)
				} else {
					frames[i] = data(dst, 64)
				}
			}
			const lookupRepeat = 2000
			var total time.Duration
			for b.Loop() {
				total = 0
				for _, f := range frames {
					ret, per, err := dp.Program().Benchmark(f, lookupRepeat, nil)
					if err != nil || ret != XDPDrop {
						b.Fatalf("verdict %d, %v", ret, err)
					}
					total += per
				}
			}
			st, err := dp.Stats(0)
			if err != nil || st.Drops["bad_nexthop"] == 0 || st.Forwarded != 0 {
				b.Fatalf("the frames did not take the lookup path: %+v %v", st, err)
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(len(frames)), "ns/packet")
			b.ReportMetric(float64(dp.FIB6.LinesUsed()), "fib6-lines")
		})
	}
}
