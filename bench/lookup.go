package bench

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/internal/routetable"
	"github.com/msr-router/msr/internal/xdp"
	"github.com/msr-router/msr/router"
	"github.com/msr-router/msr/router/routerapi"
)

// LookupOptions are `msr bench lookup`'s: the tables (routetable names:
// pyasn, N, FILE; pyasn6, Nv6), the numbers of destinations drawn from
// each, the runs and the lookups a run makes.
type LookupOptions struct {
	Tables []string
	Dsts   []int
	Runs   int
	Count  int
}

// LookupResult is the lookup alone, timed in the kernel (bpf/lookup.bpf.c)
// for msr's FIBs and the kernel's (bpf_fib_lookup), the FIBs alternating
// within each run.
type LookupResult struct {
	Runs     int         `json:"runs"`
	Count    int         `json:"lookups_per_run"`
	Rows     []LookupRow `json:"rows"`
	StealPct float64     `json:"steal_pct"`
}

// LookupRow is one FIB with one table and one number of destinations:
// ns per lookup in each run less the loop's own cost in the same run, the
// median and interquartile range over the runs, and the share of lookups
// that found a route.
type LookupRow struct {
	Table        string    `json:"table"`
	Routes       int       `json:"routes"`
	Destinations int       `json:"destinations"`
	FIB          string    `json:"fib"` // msr, kernel
	LoopNs       float64   `json:"loop_ns_median"`
	NsPerLookup  []float64 `json:"ns_per_lookup"`
	Median       float64   `json:"ns_per_lookup_median"`
	IQR          float64   `json:"ns_per_lookup_iqr"`
	Found        float64   `json:"found_ratio"`
}

// lookupNS is the namespace whose kernel FIB holds the table.
const lookupNS = "msr-bench-lookup"

// Lookup runs the benchmark: for each table, msr's FIB and the kernel's
// loaded with it, and for each number of destinations, runs alternating
// the loop alone, msr and the kernel.
func Lookup(o LookupOptions) (*LookupResult, error) {
	if len(o.Tables) == 0 || len(o.Dsts) == 0 || o.Runs < 1 || o.Count < 1 || slices.Max(o.Dsts) > 1<<21 {
		return nil, fmt.Errorf("bench lookup: tables, destinations (at most %d), runs and lookups a run", 1<<21)
	}
	tables := make([][]netip.Prefix, len(o.Tables))
	lines := router.DefaultFIB6Lines
	for i, name := range o.Tables {
		named := routetable.Named
		if routetable.IsIPv6(name) {
			named = routetable.Named6
		}
		var err error
		if tables[i], err = named(name); err != nil {
			return nil, err
		}
		if routetable.IsIPv6(name) {
			lines = max(lines, routerapi.FIB6LinesFor(tables[i], 16)*5/4)
		}
	}
	l, err := newLookupBench(slices.Max(o.Dsts), lines)
	if err != nil {
		return nil, err
	}
	defer l.close()
	r := &LookupResult{Runs: o.Runs, Count: o.Count}
	before := readSteal()
	for i, name := range o.Tables {
		rows, err := l.table(o, name, tables[i])
		if err != nil {
			return nil, err
		}
		r.Rows = append(r.Rows, rows...)
	}
	r.StealPct = before.pctTo(readSteal())
	return r, nil
}

// lookupBench is the program, msr's FIB arrays mmapped, and the namespace.
type lookupBench struct {
	objs  lookupObjects
	maps  [][]byte
	fib   *router.FIB
	fib6  *router.FIB6
	arr   [4][]uint32 // tbl24, tbl8, tbl16, the IPv6 pool
	index int         // the ingress device's ifindex in lookupNS (load makes it)
}

func newLookupBench(dsts, lines int) (*lookupBench, error) {
	spec, err := loadLookup()
	if err != nil {
		return nil, err
	}
	spec.Maps["lk_dsts"].MaxEntries = uint32(dsts)
	spec.Maps["rt6_pool"].MaxEntries = uint32(lines)
	l := &lookupBench{}
	if _, err := xdp.Load(spec, &l.objs, "", xdp.LoadOptions{}); err != nil {
		return nil, fmt.Errorf("load lookup program: %w", err)
	}
	for i, m := range []struct {
		m *ebpf.Map
		n int
	}{{l.objs.RtTbl24, router.Tbl24Entries}, {l.objs.RtTbl8, router.Tbl8Groups * 256}, {l.objs.Rt6Tbl16, 1 << 16}, {l.objs.Rt6Pool, lines * router.FIB6LineWords}} {
		w, b, err := xdp.MmapWords(m.m, m.n)
		if err != nil {
			l.close()
			return nil, err
		}
		l.maps = append(l.maps, b)
		l.arr[i] = w
	}
	return l, nil
}

func (l *lookupBench) close() {
	for _, b := range l.maps {
		unix.Munmap(b)
	}
	l.objs.Close()
	exec.Command("ip", "netns", "del", lookupNS).Run()
}

// lookupNamespace makes lookupNS anew: forwarding on (bpf_fib_lookup
// answers FWD_DISABLED without it), a veth pair up, eth0 with an address
// of each family and its next hop's neighbour entry permanent.
// It returns eth0's ifindex.
func lookupNamespace() (int, error) {
	exec.Command("ip", "netns", "del", lookupNS).Run()
	for _, args := range [][]string{
		{"netns", "add", lookupNS},
		{"netns", "exec", lookupNS, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"},
		{"-n", lookupNS, "link", "add", "eth0", "type", "veth", "peer", "name", "eth1"},
		{"-n", lookupNS, "link", "set", "eth0", "up"},
		{"-n", lookupNS, "link", "set", "eth1", "up"},
		{"-n", lookupNS, "addr", "add", "10.10.1.1/24", "dev", "eth0"},
		{"-n", lookupNS, "addr", "add", "2001:db8:1::1/64", "dev", "eth0", "nodad"},
		{"-n", lookupNS, "neigh", "replace", "10.10.1.2", "lladdr", "02:00:00:00:00:02", "dev", "eth0", "nud", "permanent"},
		{"-n", lookupNS, "neigh", "replace", "2001:db8:1::2", "lladdr", "02:00:00:00:00:02", "dev", "eth0", "nud", "permanent"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return 0, fmt.Errorf("the lookup namespace: ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	index := 0
	err := netns.Do(lookupNS, func() error {
		i, err := net.InterfaceByName("eth0")
		if err == nil {
			index = i.Index
		}
		return err
	})
	return index, err
}

// load puts routes, every one via the next hop, in msr's FIB and in the
// kernel's, in a namespace made anew.
func (l *lookupBench) load(routes []netip.Prefix) error {
	for _, a := range l.arr {
		clear(a)
	}
	var err error
	if l.fib, err = router.NewFIB(l.arr[0], l.arr[1]); err != nil {
		return err
	}
	if l.fib6, err = router.NewFIB6(16, l.arr[2], l.arr[3]); err != nil {
		return err
	}
	m := make(map[netip.Prefix]uint32, len(routes))
	for _, p := range routes {
		m[p] = 1
	}
	if len(routes) > 0 && routes[0].Addr().Is6() {
		err = l.fib6.SetAll(m)
	} else {
		err = l.fib.SetAll(m)
	}
	if err != nil {
		return fmt.Errorf("msr's FIB: %w", err)
	}
	if l.index, err = lookupNamespace(); err != nil {
		return err
	}
	var b strings.Builder
	writeRoutes(&b, routes, "10.10.1.2", "2001:db8:1::2", "eth0")
	cmd := exec.Command("ip", "-n", lookupNS, "-batch", "-")
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("the kernel's FIB: %v: %s", err, out)
	}
	return nil
}

// table measures one table with each number of destinations.
func (l *lookupBench) table(o LookupOptions, name string, routes []netip.Prefix) ([]LookupRow, error) {
	start := time.Now()
	if err := l.load(routes); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "bench lookup: %s, %d routes loaded in %v\n", name, len(routes), time.Since(start).Round(time.Millisecond))
	v6 := routes[0].Addr().Is6()
	var rows []LookupRow
	for _, n := range o.Dsts {
		if err := l.setDsts(flowDsts(routes, n)); err != nil {
			return nil, err
		}
		whats := []lookupLkWhat{lookupLkWhatLK_NONE, lookupLkWhatLK_MSR4, lookupLkWhatLK_KERNEL4}
		if v6 {
			whats = []lookupLkWhat{lookupLkWhatLK_NONE, lookupLkWhatLK_MSR6, lookupLkWhatLK_KERNEL6}
		}
		ns := map[lookupLkWhat][]float64{}
		found := map[lookupLkWhat]float64{}
		for run := 0; run < o.Runs; run++ {
			// The loop first, then msr and the kernel, in turn first.
			order := []lookupLkWhat{whats[0], whats[1+run%2], whats[2-run%2]}
			for _, w := range order {
				d, f, err := l.run(w, uint32(n), uint32(o.Count))
				if err != nil {
					return nil, err
				}
				ns[w] = append(ns[w], d)
				found[w] = f
			}
		}
		loop := median(ns[whats[0]])
		for i, fib := range []string{"msr", "kernel"} {
			w := whats[1+i]
			row := LookupRow{Table: name, Routes: len(routes), Destinations: n, FIB: fib, LoopNs: loop, Found: found[w]}
			for r, d := range ns[w] {
				row.NsPerLookup = append(row.NsPerLookup, d-ns[whats[0]][r])
			}
			row.Median = median(row.NsPerLookup)
			q1, q3 := quartiles(row.NsPerLookup)
			row.IQR = q3 - q1
			rows = append(rows, row)
		}
		if found[whats[1]] < 0.99 {
			return nil, fmt.Errorf("bench lookup: %s, %d destinations: msr's FIB found routes for %.3f of them, want all", name, n, found[whats[1]])
		}
	}
	return rows, nil
}

// setDsts writes the destinations into lk_dsts (an IPv4 address in the
// first 4 bytes).
func (l *lookupBench) setDsts(dsts []netip.Addr) error {
	keys := make([]uint32, len(dsts))
	vals := make([][16]byte, len(dsts))
	for i, a := range dsts {
		keys[i] = uint32(i)
		if a.Is4() {
			b := a.As4()
			copy(vals[i][:], b[:])
		} else {
			vals[i] = a.As16()
		}
	}
	_, err := l.objs.LkDsts.BatchUpdate(keys, vals, nil)
	return err
}

// run makes one run of count lookups of the n destinations by what, and
// returns the wall time per lookup and the share that found a route.
func (l *lookupBench) run(what lookupLkWhat, n, count uint32) (float64, float64, error) {
	if err := l.objs.LkConfig.Put(uint32(0), lookupLkCfg{What: uint32(what), N: n, Count: count}); err != nil {
		return 0, 0, err
	}
	frame := make([]byte, 64)
	var took time.Duration
	err := netns.Do(lookupNS, func() error {
		ctx := lookupXdpMd{DataEnd: uint32(len(frame)), IngressIfindex: uint32(l.index)}
		start := time.Now()
		ret, err := l.objs.Lookup.Run(&ebpf.RunOptions{Data: frame, Context: ctx, Repeat: 1})
		took = time.Since(start)
		if err == nil && ret != 2 { // XDP_PASS
			err = fmt.Errorf("lookup program: verdict %d", ret)
		}
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	var cfg lookupLkCfg
	if err := l.objs.LkConfig.Lookup(uint32(0), &cfg); err != nil {
		return 0, 0, err
	}
	return float64(took.Nanoseconds()) / float64(count), float64(cfg.Found) / float64(count), nil
}

// WriteText prints the rows as a table.
func (r *LookupResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "the lookup alone, in the kernel: ns per lookup (median, IQR) over %d runs of %d lookups, less the loop's own; steal %.2f%%\n", r.Runs, r.Count, r.StealPct)
	fmt.Fprintf(w, "%-12s %9s %12s %-7s %9s %7s %7s %6s\n", "table", "routes", "destinations", "fib", "ns", "iqr", "loop", "found")
	for _, row := range r.Rows {
		fmt.Fprintf(w, "%-12s %9d %12d %-7s %9.1f %7.1f %7.1f %6.3f\n", row.Table, row.Routes, row.Destinations, row.FIB, row.Median, row.IQR, row.LoopNs, row.Found)
	}
}
