package bench

import (
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/msr-router/msr/internal/routetable"
	"github.com/msr-router/msr/traffic"
)

// FlatOptions is the flat-lookup benchmark: routing DUTs forwarding with
// tables of different sizes and flows spread over them, run after run,
// each round in the same order with the DUTs alternating innermost. These
// machines are noisy (one round can be 40% off the next), so a figure is
// a median over the rounds with its interquartile range, a table's cost
// is also its rate over the first table's in the same round, and a run
// the hypervisor took more than MaxStealPct of a CPU from is run again.
type FlatOptions struct {
	Tables []string // --fib values; the first is the baseline
	// DUTs are the routing DUTs compared (nil: the back-end, router);
	// the first is the one the others are set against.
	DUTs []string
	// Flows are the flow counts run (nil: 1,000).
	Flows       []int
	Rounds      int
	Duration    time.Duration
	ProgStats   bool
	MaxStealPct float64 // 0: defaultMaxSteal
}

// defaultMaxSteal is the share of a CPU the hypervisor may take during a
// run before it is run again: these VMs lose a CPU for ~8 ms every 10 s
// (0.1-0.3% of a run), and a run that lost ten times that measured the
// hypervisor.
const defaultMaxSteal = 2.0

// flatRetries is how many times a run over MaxStealPct is run again.
const flatRetries = 2

// FlatTable is one DUT's runs of one table with one flow count.
type FlatTable struct {
	DUT         string    `json:"dut"`
	Flows       int       `json:"flows"`
	FIB         string    `json:"fib"`
	Routes      int       `json:"routes"`
	ReceivedPPS []float64 `json:"received_pps"`
	// DUTNsPerPacket is the DUT program's own time, with ProgStats.
	DUTNsPerPacket []float64 `json:"dut_ns_per_packet,omitempty"`
	// Ratio is each round's rate over the baseline table's in that round
	// (the same DUT and flows).
	Ratio       []float64 `json:"ratio_to_baseline"`
	MedianRatio float64   `json:"median_ratio"`
	// NAPINsPerPacket is the DUT's whole cost per packet (its NAPI
	// thread's CPU time), and CapacityRatio the baseline's cost over this
	// table's in each round: the DUT's capacity with this table relative
	// to the baseline's, whatever the generator managed to offer.
	NAPINsPerPacket     []float64 `json:"napi_ns_per_packet"`
	CapacityRatio       []float64 `json:"capacity_ratio_to_baseline"`
	MedianCapacityRatio float64   `json:"median_capacity_ratio"`
	// NsPerPacketMedian and NsPerPacketIQR are the median of
	// NAPINsPerPacket over the rounds and its interquartile range (Q3 -
	// Q1, NsPerPacketQuartiles); ProgramNsMedian the program's.
	NsPerPacketMedian    float64    `json:"ns_per_packet_median"`
	NsPerPacketIQR       float64    `json:"ns_per_packet_iqr"`
	NsPerPacketQuartiles [2]float64 `json:"ns_per_packet_quartiles"`
	ProgramNsMedian      float64    `json:"program_ns_median,omitempty"`
	// StealPct is each run's steal, the most the hypervisor took from one
	// CPU during it, in percent; Repeated the runs run again for it.
	StealPct []float64 `json:"steal_pct"`
	Repeated int       `json:"repeated,omitempty"`
}

// FlatVersus sets a DUT against the first: the first's capacity over
// this one's (this one's NAPI cost per packet over the first's), round by
// round, and the median.
type FlatVersus struct {
	DUT           string    `json:"dut"`
	Against       string    `json:"against"`
	Flows         int       `json:"flows"`
	FIB           string    `json:"fib"`
	CapacityRatio []float64 `json:"capacity_ratio"`
	Median        float64   `json:"median_capacity_ratio"`
}

// FlatResult is what `msr bench flat` reports.
type FlatResult struct {
	Flows  int          `json:"flows"` // the first flow count
	Rounds int          `json:"rounds"`
	DUTs   []string     `json:"duts"`
	Tables []FlatTable  `json:"tables"`
	Versus []FlatVersus `json:"versus,omitempty"`
}

// flatDUTs are the DUTs bench flat takes: those that route over a table.
var flatDUTs = []string{"router", "xdp-fib", "linux"}

// complete fills in the defaults and checks the options.
func (o *FlatOptions) complete() error {
	if len(o.Tables) < 2 || o.Rounds < 1 {
		return fmt.Errorf("flat: a baseline and at least one table, and at least one round")
	}
	if o.DUTs == nil {
		o.DUTs = []string{"router"}
	}
	for _, d := range o.DUTs {
		if !slices.Contains(flatDUTs, d) {
			return fmt.Errorf("flat: DUT %q: one of %v", d, flatDUTs)
		}
	}
	if o.Flows == nil {
		o.Flows = []int{1000}
	}
	if o.MaxStealPct == 0 {
		o.MaxStealPct = defaultMaxSteal
	}
	return nil
}

// Flat runs `msr bench fwd` for each DUT, flow count and table, Rounds
// times: an IPv6 table (pyasn6, Nv6) with IPv6 test frames of the
// smallest size (82 bytes), the others with IPv4's (64), so that one run
// can set IPv6's cost beside IPv4's.
func Flat(o FlatOptions) (*FlatResult, error) {
	if err := o.complete(); err != nil {
		return nil, err
	}
	r := &FlatResult{Flows: o.Flows[0], Rounds: o.Rounds, DUTs: o.DUTs}
	index := map[string]int{} // dut, flows, fib -> its table
	key := func(dut string, flows int, fib string) string { return fmt.Sprint(dut, " ", flows, " ", fib) }
	for _, flows := range o.Flows {
		for _, fib := range o.Tables {
			for _, dut := range o.DUTs {
				index[key(dut, flows, fib)] = len(r.Tables)
				r.Tables = append(r.Tables, FlatTable{DUT: dut, Flows: flows, FIB: fib})
			}
		}
	}
	for round := 0; round < o.Rounds; round++ {
		for _, flows := range o.Flows {
			for _, fib := range o.Tables {
				for _, dut := range o.DUTs {
					t := &r.Tables[index[key(dut, flows, fib)]]
					if err := t.run(o, round); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	for i := range r.Tables {
		t := &r.Tables[i]
		t.summarize(&r.Tables[index[key(t.DUT, t.Flows, o.Tables[0])]])
	}
	for _, flows := range o.Flows {
		for _, fib := range o.Tables {
			first := r.Tables[index[key(o.DUTs[0], flows, fib)]]
			for _, dut := range o.DUTs[1:] {
				t := r.Tables[index[key(dut, flows, fib)]]
				v := FlatVersus{DUT: o.DUTs[0], Against: dut, Flows: flows, FIB: fib}
				for round := range t.NAPINsPerPacket {
					v.CapacityRatio = append(v.CapacityRatio, ratio(t.NAPINsPerPacket[round], first.NAPINsPerPacket[round]))
				}
				v.Median = median(v.CapacityRatio)
				r.Versus = append(r.Versus, v)
			}
		}
	}
	return r, nil
}

// run is one round of the table's DUT, run again while the hypervisor
// took more than o.MaxStealPct of a CPU during it (flatRetries times).
func (t *FlatTable) run(o FlatOptions, round int) error {
	size, ipv6 := traffic.MinFrameSize, routetable.IsIPv6(t.FIB)
	if ipv6 {
		size = traffic.MinFrameSize6
	}
	for try := 0; ; try++ {
		before := readSteal()
		f, err := Fwd(FwdOptions{DUT: t.DUT, Size: size, Flows: t.Flows, Duration: o.Duration, FIB: t.FIB, IPv6: ipv6, ProgStats: o.ProgStats})
		if err != nil {
			return fmt.Errorf("round %d, %s, %d flows, --fib %s: %w", round+1, t.DUT, t.Flows, t.FIB, err)
		}
		steal := before.pctTo(readSteal())
		if steal > o.MaxStealPct && try < flatRetries {
			t.Repeated++
			continue
		}
		t.Routes = f.Routes
		t.ReceivedPPS = append(t.ReceivedPPS, f.ReceivedPPS)
		t.NAPINsPerPacket = append(t.NAPINsPerPacket, f.NAPINsPerPacket)
		t.StealPct = append(t.StealPct, steal)
		if o.ProgStats {
			t.DUTNsPerPacket = append(t.DUTNsPerPacket, f.DUTNsPerPacket)
		}
		return nil
	}
}

// summarize sets the table's medians, quartiles and ratios to base's.
func (t *FlatTable) summarize(base *FlatTable) {
	for round := range t.ReceivedPPS {
		t.Ratio = append(t.Ratio, ratio(t.ReceivedPPS[round], base.ReceivedPPS[round]))
		t.CapacityRatio = append(t.CapacityRatio, ratio(base.NAPINsPerPacket[round], t.NAPINsPerPacket[round]))
	}
	t.MedianRatio = median(t.Ratio)
	t.MedianCapacityRatio = median(t.CapacityRatio)
	t.NsPerPacketMedian = median(t.NAPINsPerPacket)
	q1, q3 := quartiles(t.NAPINsPerPacket)
	t.NsPerPacketQuartiles, t.NsPerPacketIQR = [2]float64{q1, q3}, q3-q1
	t.ProgramNsMedian = median(t.DUTNsPerPacket)
}

func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// quartiles are xs's first and third quartiles: the medians of its lower
// and upper halves (the middle value, for an odd count, in neither:
// Tukey's hinges without it).
func quartiles(xs []float64) (q1, q3 float64) {
	if len(xs) < 2 {
		return median(xs), median(xs)
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	half := len(s) / 2
	return median(s[:half]), median(s[len(s)-half:])
}

// stealSample is each CPU's steal in USER_HZ ticks (100 a second), and
// when it was read.
type stealSample struct {
	at    time.Time
	ticks map[string]uint64
}

// readSteal reads /proc/stat's per-CPU steal.
func readSteal() stealSample {
	s := stealSample{at: time.Now(), ticks: map[string]uint64{}}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		// cpuN user nice system idle iowait irq softirq steal ...
		if len(f) < 9 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		s.ticks[f[0]], _ = strconv.ParseUint(f[8], 10, 64)
	}
	return s
}

// pctTo is the most any CPU's steal grew from s to later, as a share of
// the time between them, in percent.
func (s stealSample) pctTo(later stealSample) float64 {
	d := later.at.Sub(s.at).Seconds()
	most := 0.0
	for cpu, t := range later.ticks {
		if d > 0 && t >= s.ticks[cpu] {
			most = max(most, float64(t-s.ticks[cpu])/100/d*100)
		}
	}
	return most
}

// WriteText prints one line per round and the medians.
func (r *FlatResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "%s, 64 B (IPv6 tables: 82 B), flows spread over each table; received pps (ratio to %s in the same round), DUT NAPI CPU per packet\n",
		strings.Join(r.DUTs, ", "), r.Tables[0].FIB)
	head := []string{"round"}
	for _, t := range r.Tables {
		head = append(head, fmt.Sprintf("%s %d flows %s (%d routes)", t.DUT, t.Flows, t.FIB, t.Routes))
	}
	fmt.Fprintln(w, strings.Join(head, "\t"))
	for round := 0; round < r.Rounds; round++ {
		cells := []string{fmt.Sprint(round + 1)}
		for _, t := range r.Tables {
			c := fmt.Sprintf("%.0f", t.ReceivedPPS[round])
			if t.FIB != r.Tables[0].FIB {
				c += fmt.Sprintf(" (%.2f×)", t.Ratio[round])
			}
			if len(t.DUTNsPerPacket) > round {
				c += fmt.Sprintf(" program %.0f ns", t.DUTNsPerPacket[round])
			}
			c += fmt.Sprintf(" DUT %.0f ns steal %.1f%%", t.NAPINsPerPacket[round], t.StealPct[round])
			cells = append(cells, c)
		}
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	for _, t := range r.Tables {
		fmt.Fprintf(w, "%s, %d flows, %s: DUT %.0f ns/packet median, IQR %.0f (%.0f-%.0f)", t.DUT, t.Flows, t.FIB, t.NsPerPacketMedian, t.NsPerPacketIQR, t.NsPerPacketQuartiles[0], t.NsPerPacketQuartiles[1])
		if t.ProgramNsMedian > 0 {
			fmt.Fprintf(w, ", program %.0f ns", t.ProgramNsMedian)
		}
		if t.FIB != r.Tables[0].FIB {
			fmt.Fprintf(w, "; over %s: rate %.3f, capacity %.3f", r.Tables[0].FIB, t.MedianRatio, t.MedianCapacityRatio)
		}
		if t.Repeated > 0 {
			fmt.Fprintf(w, "; %d runs repeated for steal", t.Repeated)
		}
		fmt.Fprintln(w)
	}
	for _, v := range r.Versus {
		fmt.Fprintf(w, "%s's capacity over %s's, %d flows, %s: %.3f (median of the rounds)\n", v.DUT, v.Against, v.Flows, v.FIB, v.Median)
	}
}
