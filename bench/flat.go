package bench

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/msr-router/msr/internal/routetable"
	"github.com/msr-router/msr/traffic"
)

// FlatOptions is the flat-lookup benchmark: the back-end forwarding with
// tables of different sizes, run after run, each round in the same order.
// These machines are noisy (one round can be 20% off the next), so a
// table's cost is its rate over the first table's in the same round, and
// the verdict is the median of those ratios.
type FlatOptions struct {
	Tables    []string // --fib values; the first is the baseline
	Rounds    int
	Flows     int
	Duration  time.Duration
	ProgStats bool
}

// FlatTable is one table's runs.
type FlatTable struct {
	FIB         string    `json:"fib"`
	Routes      int       `json:"routes"`
	ReceivedPPS []float64 `json:"received_pps"`
	// DUTNsPerPacket is the router program's own time, with ProgStats.
	DUTNsPerPacket []float64 `json:"dut_ns_per_packet,omitempty"`
	// Ratio is each round's rate over the baseline's in that round.
	Ratio       []float64 `json:"ratio_to_baseline"`
	MedianRatio float64   `json:"median_ratio"`
	// NAPINsPerPacket is the DUT's whole cost per packet (its NAPI
	// thread's CPU time), and CapacityRatio the baseline's cost over this
	// table's in each round: the DUT's capacity with this table relative
	// to the baseline's, whatever the generator managed to offer.
	NAPINsPerPacket     []float64 `json:"napi_ns_per_packet"`
	CapacityRatio       []float64 `json:"capacity_ratio_to_baseline"`
	MedianCapacityRatio float64   `json:"median_capacity_ratio"`
}

// FlatResult is what `msr bench flat` reports.
type FlatResult struct {
	Flows  int         `json:"flows"`
	Rounds int         `json:"rounds"`
	Tables []FlatTable `json:"tables"`
}

// Flat runs `msr bench fwd --dut router` for each table, Rounds times:
// an IPv6 table (pyasn6, Nv6) with IPv6 test frames of the smallest size
// (82 bytes), the others with IPv4's (64), so that one run can set IPv6's
// cost beside IPv4's.
func Flat(o FlatOptions) (*FlatResult, error) {
	if len(o.Tables) < 2 || o.Rounds < 1 {
		return nil, fmt.Errorf("flat: a baseline and at least one table, and at least one round")
	}
	r := &FlatResult{Flows: o.Flows, Rounds: o.Rounds, Tables: make([]FlatTable, len(o.Tables))}
	for i, fib := range o.Tables {
		r.Tables[i].FIB = fib
	}
	for round := 0; round < o.Rounds; round++ {
		for i, fib := range o.Tables {
			size, ipv6 := traffic.MinFrameSize, routetable.IsIPv6(fib)
			if ipv6 {
				size = traffic.MinFrameSize6
			}
			f, err := Fwd(FwdOptions{DUT: "router", Size: size, Flows: o.Flows, Duration: o.Duration, FIB: fib, IPv6: ipv6, ProgStats: o.ProgStats})
			if err != nil {
				return nil, fmt.Errorf("round %d, --fib %s: %w", round+1, fib, err)
			}
			t := &r.Tables[i]
			t.Routes = f.Routes
			t.ReceivedPPS = append(t.ReceivedPPS, f.ReceivedPPS)
			t.NAPINsPerPacket = append(t.NAPINsPerPacket, f.NAPINsPerPacket)
			if o.ProgStats {
				t.DUTNsPerPacket = append(t.DUTNsPerPacket, f.DUTNsPerPacket)
			}
		}
	}
	base := r.Tables[0]
	for i := range r.Tables {
		t := &r.Tables[i]
		for round := range t.ReceivedPPS {
			t.Ratio = append(t.Ratio, ratio(t.ReceivedPPS[round], base.ReceivedPPS[round]))
			t.CapacityRatio = append(t.CapacityRatio, ratio(base.NAPINsPerPacket[round], t.NAPINsPerPacket[round]))
		}
		t.MedianRatio = median(t.Ratio)
		t.MedianCapacityRatio = median(t.CapacityRatio)
	}
	return r, nil
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

// WriteText prints one line per round and the median ratios.
func (r *FlatResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "router, 64 B (IPv6 tables: 82 B), %d flows spread over each table; received pps (ratio to %s in the same round), DUT NAPI CPU per packet\n", r.Flows, r.Tables[0].FIB)
	head := []string{"round"}
	for _, t := range r.Tables {
		head = append(head, fmt.Sprintf("%s (%d routes)", t.FIB, t.Routes))
	}
	fmt.Fprintln(w, strings.Join(head, "\t"))
	for round := 0; round < r.Rounds; round++ {
		cells := []string{fmt.Sprint(round + 1)}
		for i, t := range r.Tables {
			c := fmt.Sprintf("%.0f", t.ReceivedPPS[round])
			if i > 0 {
				c += fmt.Sprintf(" (%.2f×)", t.Ratio[round])
			}
			if len(t.DUTNsPerPacket) > round {
				c += fmt.Sprintf(" program %.0f ns", t.DUTNsPerPacket[round])
			}
			c += fmt.Sprintf(" DUT %.0f ns", t.NAPINsPerPacket[round])
			cells = append(cells, c)
		}
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	for _, t := range r.Tables[1:] {
		fmt.Fprintf(w, "median ratio %s / %s: rate %.3f, capacity (DUT ns/packet inverted) %.3f\n", t.FIB, r.Tables[0].FIB, t.MedianRatio, t.MedianCapacityRatio)
	}
}
