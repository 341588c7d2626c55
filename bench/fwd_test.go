package bench

import (
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/msr-router/msr/internal/element"
	"github.com/msr-router/msr/traffic"
)

// TestFwd runs the whole instrument through each DUT's lab: frames are
// generated, cross the DUT, and are counted at the sink, every flow of
// them, with latency measured.
func TestFwd(t *testing.T) {
	for _, dut := range DUTs {
		t.Run(dut, func(t *testing.T) {
			r, err := Fwd(FwdOptions{DUT: dut, Size: 64, Flows: 100, Duration: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%+v", r)
			if r.OfferedPackets < 100_000 || r.ReceivedPackets == 0 || r.ReceivedPackets > r.OfferedPackets {
				t.Errorf("offered %d, received %d", r.OfferedPackets, r.ReceivedPackets)
			}
			if r.FlowsSeen != 100 {
				t.Errorf("%d of 100 flows reached the sink", r.FlowsSeen)
			}
			if r.LossRatio < 0 || r.LossRatio >= 1 {
				t.Errorf("loss ratio %v", r.LossRatio)
			}
			if r.Latency.P50 <= 0 || r.Latency.P50 > r.Latency.P99 || r.Latency.P99 > r.Latency.Max {
				t.Errorf("latency %+v", r.Latency)
			}
		})
	}
}

// TestFwdRate checks that a set rate is the rate offered, within 1%
// over the generator's sending window while it kept its schedule (and
// over the whole window unless the machine left it behind: CI's compiler
// beside it once took 8% of 50 kpps), and that at a rate far below the
// DUT's capacity nothing is reordered and (almost) nothing lost: a loss
// of 10% would be a fault (before benchmark sessions kept the CPUs from
// halting, a NAPI thread woken on an idle vCPU ran milliseconds late and
// lost up to 5% here; docs/rfc2544.md).
func TestFwdRate(t *testing.T) {
	const pps = 50_000
	r, err := Fwd(FwdOptions{DUT: "linux", Size: 128, Flows: 10, Duration: 2 * time.Second, Rate: pps})
	if err != nil {
		t.Fatal(err)
	}
	if r.ScheduledPPS < 0.99*pps || r.ScheduledPPS > 1.01*pps {
		t.Errorf("offered %.0f pps while on schedule, asked for %d", r.ScheduledPPS, pps)
	}
	if r.BehindSeconds == 0 && (r.OfferedPPS < 0.99*pps || r.OfferedPPS > 1.01*pps) {
		t.Errorf("offered %.0f pps, never behind, asked for %d", r.OfferedPPS, pps)
	}
	if r.OfferedPPS < 0.8*pps {
		t.Errorf("offered %.0f pps, asked for %d (behind for %.3f s)", r.OfferedPPS, pps, r.BehindSeconds)
	}
	if r.LossRatio > 0.1 || r.Reordered != 0 {
		t.Errorf("at %d pps: loss %v, reordered %d", pps, r.LossRatio, r.Reordered)
	}
}

// TestProg measures the LB program beside the minimal forwarder; both
// must take the forwarding path (Prog checks the verdict) and cost
// something plausible.
func TestProg(t *testing.T) {
	r, err := Prog(20_000, 2)
	if err != nil {
		t.Fatal(err)
	}
	if r.NsPerPacket <= 0 || r.MinimalNs <= 0 || r.NsPerPacket > 100_000 {
		t.Errorf("%+v", r)
	}
	noThreadPinned(t)
}

// TestFwdFIB runs the router, its peer xdp-fib and Linux with 10,000
// real prefixes and the flows spread over them: every flow must come
// through.
func TestFwdFIB(t *testing.T) {
	for _, dut := range []string{"router", "xdp-fib", "linux"} {
		r, err := Fwd(FwdOptions{DUT: dut, Size: 64, Flows: 100, Duration: time.Second, FIB: "10000", ProgStats: true})
		if err != nil {
			t.Fatal(err)
		}
		if r.Routes != 10000 || r.FlowsSeen != 100 || r.ReceivedPackets == 0 {
			t.Errorf("%s: %+v", dut, r)
		}
		// The XDP programs' time comes from BPF statistics; Linux has no
		// program.
		if (dut != "linux") != (r.DUTNsPerPacket > 0) {
			t.Errorf("%s: DUT ns/packet %v", dut, r.DUTNsPerPacket)
		}
	}
	if _, err := Fwd(FwdOptions{DUT: "lb", Size: 64, Flows: 1, Duration: time.Second, FIB: "10"}); err == nil {
		t.Error("--fib accepted for the lb DUT")
	}
}

// TestFwdIPv6: IPv6 test frames (RFC 5180) through each DUT, the routers
// over 2,000 prefixes of the 2015 IPv6 table, the LB's columns with their
// tagged frames, every flow counted at the sink, at a rate they take.
func TestFwdIPv6(t *testing.T) {
	for _, dut := range []string{"none", "linux", "router", "xdp-fib", "msr", "lb", "lb-int-ext", "lb-both"} {
		o := FwdOptions{DUT: dut, Size: traffic.MinFrameSize6, Flows: 100, Duration: time.Second, Rate: 50_000, IPv6: true}
		if slices.Contains(fibDUTs, dut) {
			o.FIB = "2000v6"
		}
		r, err := Fwd(o)
		if err != nil {
			t.Fatalf("%s: %v", dut, err)
		}
		if r.FlowsSeen != 100 || r.LossRatio > 0.1 || r.Reordered != 0 || !r.IPv6 || (o.FIB != "" && r.Routes != 2000) {
			t.Errorf("%s: %+v", dut, r)
		}
	}
}

func TestFlowDsts6(t *testing.T) {
	routes := []netip.Prefix{netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("2a00:1450:4001::/45"), netip.MustParsePrefix("2001:db8:1:2::7/128")}
	for i, d := range flowDsts(routes, 300) {
		if !slices.ContainsFunc(routes, func(p netip.Prefix) bool { return p.Contains(d) }) {
			t.Fatalf("flow %d's destination %v is in none of %v", i, d, routes)
		}
	}
}

// TestFwdMsr: the whole router's data path (LB, back-end, LB) forwards
// the generator's flows over 1,000 routes to the sink, at a rate it can
// take, losing little.
func TestFwdMsr(t *testing.T) {
	r, err := Fwd(FwdOptions{DUT: "msr", Size: 64, Flows: 100, Duration: time.Second, Rate: 50_000, FIB: "1000"})
	if err != nil {
		t.Fatal(err)
	}
	if r.FlowsSeen != 100 || r.LossRatio > 0.1 || r.Reordered != 0 {
		t.Errorf("%+v", r)
	}
}

// TestFlat runs the flat-lookup benchmark for one round of two small
// tables, an IPv4 and an IPv6 one (IPv6 test frames), with the back-end
// and xdp-fib: each table's ratio is its rate over the first's in the
// round, each DUT's cost its NAPI time per packet, and the back-end is
// set against xdp-fib.
func TestFlat(t *testing.T) {
	r, err := Flat(FlatOptions{Tables: []string{"10", "100v6"}, DUTs: []string{"router", "xdp-fib"}, Rounds: 1, Flows: []int{100}, Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Tables) != 4 || len(r.Versus) != 2 {
		t.Fatalf("%d tables, %d comparisons: want 2 DUTs × 2 tables, and 2", len(r.Tables), len(r.Versus))
	}
	for _, dut := range []string{"router", "xdp-fib"} {
		i := slices.IndexFunc(r.Tables, func(ft FlatTable) bool { return ft.DUT == dut && ft.FIB == "10" })
		base, other := r.Tables[i], r.Tables[slices.IndexFunc(r.Tables, func(ft FlatTable) bool { return ft.DUT == dut && ft.FIB == "100v6" })]
		if base.Routes != 10 || other.Routes != 100 || len(other.ReceivedPPS) != 1 || base.ReceivedPPS[0] <= 0 || other.ReceivedPPS[0] <= 0 {
			t.Fatalf("%s: %+v", dut, r)
		}
		if want := other.ReceivedPPS[0] / base.ReceivedPPS[0]; other.Ratio[0] != want || other.MedianRatio != want || base.MedianRatio != 1 {
			t.Errorf("%s: ratios %v (median %v), want %v; baseline's median %v", dut, other.Ratio, other.MedianRatio, want, base.MedianRatio)
		}
		if base.NAPINsPerPacket[0] <= 0 || other.NAPINsPerPacket[0] <= 0 || other.NsPerPacketMedian != other.NAPINsPerPacket[0] || other.NsPerPacketIQR != 0 {
			t.Fatalf("%s: DUT cost per packet %v, %v (median %v, IQR %v): want the NAPI thread's time", dut, base.NAPINsPerPacket, other.NAPINsPerPacket,
				other.NsPerPacketMedian, other.NsPerPacketIQR)
		}
		if want := base.NAPINsPerPacket[0] / other.NAPINsPerPacket[0]; other.MedianCapacityRatio != want {
			t.Errorf("%s: capacity ratio %v, want %v", dut, other.MedianCapacityRatio, want)
		}
		if len(other.StealPct) != 1 {
			t.Errorf("%s: steal %v, want one run's", dut, other.StealPct)
		}
	}
	v := r.Versus[0]
	peer := r.Tables[slices.IndexFunc(r.Tables, func(ft FlatTable) bool { return ft.DUT == "xdp-fib" && ft.FIB == v.FIB })]
	own := r.Tables[slices.IndexFunc(r.Tables, func(ft FlatTable) bool { return ft.DUT == "router" && ft.FIB == v.FIB })]
	if v.DUT != "router" || v.Against != "xdp-fib" || v.Median != peer.NAPINsPerPacket[0]/own.NAPINsPerPacket[0] {
		t.Errorf("versus %+v", v)
	}
	if _, err := Flat(FlatOptions{Tables: []string{"10", "100"}, DUTs: []string{"lb"}, Rounds: 1}); err == nil {
		t.Error("bench flat took the lb DUT, which routes over no table")
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.xs); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}

// TestLBDirections checks the LB's three setups carry what
// they claim, every flow: outside in (lb) as they came, a back-end's
// tagged 68-byte frames out (lb-int-ext) with their tag popped, and both
// at once (lb-both: half the flows each way; only the other half would
// leave any flow unseen).
func TestLBDirections(t *testing.T) {
	const frame = 64 - 4 // bytes without FCS, untagged
	for _, dut := range []string{"lb", "lb-int-ext", "lb-both"} {
		t.Run(dut, func(t *testing.T) {
			s, err := openSession(FwdOptions{DUT: dut, Size: 64, Flows: 100, Duration: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			tr, err := s.trial(64, 100_000, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			rep := tr.rep
			t.Logf("sent %d, received %d frames, %d bytes, %d flows", tr.sent, rep.RxPackets, rep.RxBytes, rep.FlowsSeen)
			if rep.RxPackets == 0 || tr.lossRatio() > 0.01 {
				t.Fatalf("sent %d, received %d", tr.sent, rep.RxPackets)
			}
			if got := float64(rep.RxBytes) / float64(rep.RxPackets); got != frame {
				t.Errorf("frames arrived with %.2f bytes on average, want %d", got, frame)
			}
			if rep.FlowsSeen != 100 {
				t.Errorf("%d of 100 flows arrived", rep.FlowsSeen)
			}
		})
	}
}

// TestQuartiles: Tukey's hinges, the middle value of an odd count in
// neither half.
func TestQuartiles(t *testing.T) {
	for _, c := range []struct {
		xs     []float64
		q1, q3 float64
	}{
		{[]float64{5}, 5, 5},
		{[]float64{4, 1}, 1, 4},
		{[]float64{7, 1, 3, 5, 9, 11, 13}, 3, 11},
		{[]float64{1, 2, 3, 4, 5, 6, 7, 8}, 2.5, 6.5},
	} {
		if q1, q3 := quartiles(c.xs); q1 != c.q1 || q3 != c.q3 {
			t.Errorf("quartiles(%v) = %v, %v, want %v, %v", c.xs, q1, q3, c.q1, c.q3)
		}
	}
}

// TestStealPct: the most any CPU's steal grew, over the time between
// the samples.
func TestStealPct(t *testing.T) {
	at := time.Now()
	a := stealSample{at: at, ticks: map[string]uint64{"cpu0": 10, "cpu1": 100}}
	b := stealSample{at: at.Add(2 * time.Second), ticks: map[string]uint64{"cpu0": 12, "cpu1": 106}}
	if got := a.pctTo(b); got != 3 {
		t.Errorf("steal %v%%, want 3%% (cpu1: 6 ticks of 10 ms in 2 s)", got)
	}
	if s := readSteal(); len(s.ticks) == 0 {
		t.Error("no CPU's steal read from /proc/stat")
	}
}

// TestFwdMultiQueue: each element's data path on veths of two queues,
// both CPUs sending and so both receiving, as a NIC's RSS spreads its
// queues over the cores. The DUT's per-CPU counts of the frames it
// forwarded add up to the sink's count, exactly; each CPU takes its
// generator's half; no flow is
// reordered (each stays on its queue, as RSS keeps it); and a cap holds
// across the CPUs to within its bucket, one bucket for both.
func TestFwdMultiQueue(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Fatalf("two queues on two CPUs: this machine has %d", runtime.NumCPU())
	}
	const pps = 50_000 // far below either DUT's capacity on one core
	for _, dut := range []string{"router", "lb", "lb-int-ext"} {
		t.Run(dut, func(t *testing.T) {
			r := fwdLossless(t, FwdOptions{DUT: dut, Size: 64, Flows: 1000, Duration: 2 * time.Second, Rate: pps, Queues: 2})
			if r.Queues != 2 || len(r.DUTForwardedPerCPU) < 2 {
				t.Fatalf("%d queues, the DUT's per-CPU counts %v", r.Queues, r.DUTForwardedPerCPU)
			}
			var sum uint64
			for _, n := range r.DUTForwardedPerCPU {
				sum += n
			}
			if sum != r.OfferedPackets || r.ReceivedPackets != r.OfferedPackets {
				t.Errorf("offered %d, the DUT's CPUs forwarded %v (sum %d), the sink counted %d", r.OfferedPackets, r.DUTForwardedPerCPU, sum, r.ReceivedPackets)
			}
			for cpu, n := range r.DUTForwardedPerCPU[:2] {
				if n < sum*2/5 {
					t.Errorf("CPU %d forwarded %d of %d frames: each queue's generator sent half", cpu, n, sum)
				}
			}
			if r.Reordered != 0 || r.Duplicated != 0 || r.FlowsSeen != 1000 {
				t.Errorf("reordered %d, duplicated %d, %d of 1000 flows seen", r.Reordered, r.Duplicated, r.FlowsSeen)
			}
		})
	}
	for _, dut := range []string{"router", "lb"} {
		t.Run(dut+"-cap", func(t *testing.T) {
			const capPPS = 20_000
			r, err := Fwd(FwdOptions{DUT: dut, Size: 64, Flows: 1000, Duration: 2 * time.Second, Rate: 3 * capPPS, Queues: 2, CapPPS: capPPS})
			if err != nil {
				t.Fatal(err)
			}
			// GCRA lets through one frame an interval and a burst ahead:
			// in the sending window, at most that; at least the rate's
			// worth, the offered load being three times it.
			most := uint64(capPPS*r.DurationSeconds) + element.CapBurst + 1
			least := uint64(0.95 * capPPS * r.DurationSeconds)
			if r.ReceivedPackets > most || r.ReceivedPackets < least {
				t.Errorf("cap %d pps over %.3f s from two CPUs: %d frames through, want %d to %d (offered %d, per CPU %v)",
					capPPS, r.DurationSeconds, r.ReceivedPackets, least, most, r.OfferedPackets, r.DUTForwardedPerCPU)
			}
			if len(r.DUTForwardedPerCPU) < 2 || r.DUTForwardedPerCPU[0] == 0 || r.DUTForwardedPerCPU[1] == 0 {
				t.Errorf("both CPUs must meet the cap: per CPU %v", r.DUTForwardedPerCPU)
			}
		})
	}
}

// fwdLossless runs o until a run loses nothing, three times at most: at
// a rate far below the DUT's capacity only the machine loses frames (a
// stall of the hypervisor's longer than a veth ring holds).
func fwdLossless(t *testing.T, o FwdOptions) *FwdResult {
	t.Helper()
	var r *FwdResult
	for try := 0; try < 3; try++ {
		var err error
		if r, err = Fwd(o); err != nil {
			t.Fatal(err)
		}
		if r.ReceivedPackets == r.OfferedPackets {
			return r
		}
		t.Logf("run %d: offered %d, received %d: again", try+1, r.OfferedPackets, r.ReceivedPackets)
	}
	t.Fatalf("three runs at %.0f pps lost frames: the machine cannot carry this rate without loss", o.Rate)
	return nil
}
