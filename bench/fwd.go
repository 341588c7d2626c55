package bench

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/internal/routetable"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/labs"
	"github.com/msr-router/msr/traffic"
)

// DUTs are the devices under test `msr bench fwd` knows, each a shipped
// lab (bench-DUT.yaml) with hosts gen (interface g0) and, but for router,
// xdp-fib and lb-both, sink (interface s0); setupDUT loads the data paths
// of all but none and linux. lb, lb-int-ext and lb-both are the LB's three
// setups: the LB from outside in, from a back-end out, and both
// at once. xdp-fib is the back-end's peer: XDP forwarding by the kernel's
// FIB (bench/xdpfib.go). xdp-min is the least an XDP forwarder does (both
// MACs, a redirect: bpf/minfwd.bpf.c) on the LB's topology, the ceiling
// the LB is measured against.
var DUTs = []string{"none", "linux", "lb", "lb-int-ext", "lb-both", "router", "xdp-fib", "xdp-min", "msr", "msr-switch", "msr-xdpswitch"}

// fibDUTs are the DUTs that hold a routing table (--fib).
var fibDUTs = []string{"linux", "router", "xdp-fib", "msr", "msr-switch", "msr-xdpswitch"}

// FwdOptions is one forwarding benchmark run.
type FwdOptions struct {
	DUT      string
	Size     int
	Flows    int
	Duration time.Duration
	// Rate is the offered load in frames per second; 0 is flat out.
	Rate float64
	// FIB is the routing table the DUT holds (linux, router): "" for one
	// route, "pyasn" for the RouteViews table, a number N for N prefixes
	// (the RouteViews table, cut or grown with its length distribution),
	// or a pyasn-format file. The flows' destinations are spread over it.
	FIB string
	// IPv6 sends IPv6/UDP test frames (RFC 5180), to 2001:2:0:8000::/49
	// or over an IPv6 table (FIB: pyasn6, Nv6).
	IPv6 bool
	// ProgStats turns on the kernel's BPF statistics for the run and
	// reports the DUT program's run time per packet. They cost two clock
	// reads per packet, so rates are lower with them.
	ProgStats bool
	// URPF, for the router DUT: its frames come tagged with its port's
	// VLAN, as an LB balances them from a port with unicast RPF, and the
	// port checks their sources so (off, loose, strict); the sources'
	// prefix is in its FIB through that port. "": untagged, no check.
	URPF string
	// Queues, above 1, gives the lab's links that many queues and sends
	// from as many CPUs, each its own flows: the DUT receives on every
	// one of those CPUs (session.sendQueues).
	Queues int
	// CapPPS sets the DUT element's capacity (lb, router), frames a
	// second: its bucket is one for all CPUs.
	CapPPS uint64
	// SFlowRate has the lb DUT sample 1 in SFlowRate of the frames into
	// e0 for sFlow, a reader taking the samples as the agent does.
	SFlowRate uint32
}

// flowIDs is how many flows the generator sends and the sink counts:
// Flows, or with more than traffic.MaxFlows (the payload's 16-bit flow
// ids), that many, their frames walking Flows destinations.
func (o FwdOptions) flowIDs() int { return min(o.Flows, traffic.MaxFlows) }

// Stage is one DUT program's run time.
type Stage struct {
	NsPerRun      float64 `json:"ns_per_run"`
	RunsPerPacket float64 `json:"runs_per_packet"`
}

// FwdResult is what `msr bench fwd` reports.
type FwdResult struct {
	DUT   string `json:"dut"`
	IPv6  bool   `json:"ipv6,omitempty"`
	Size  int    `json:"size"`
	Flows int    `json:"flows"`
	// FlowIDs are the flows the sink counted apart, each with its own
	// sequence and window: Flows, or with more than the payload's 65,536
	// flow ids that many, the frames walking Flows destinations (each
	// frame to the next, whatever its flow: DestinationsWalked).
	FlowIDs            int     `json:"flow_ids"`
	DestinationsWalked bool    `json:"destinations_walked,omitempty"`
	DurationSeconds    float64 `json:"duration_s"`
	OfferedPackets     uint64  `json:"offered_packets"`
	ReceivedPackets    uint64  `json:"received_packets"`
	OfferedPPS         float64 `json:"offered_pps"`
	// ScheduledPPS is the rate offered while the generator kept its
	// schedule, and BehindSeconds the time it gave up when the machine
	// left it behind (traffic.Generator.PaceStats): with --rate, offered
	// falls short of the rate asked only by what the machine took.
	ScheduledPPS   float64 `json:"scheduled_pps,omitempty"`
	BehindSeconds  float64 `json:"behind_s,omitempty"`
	ReceivedPPS    float64 `json:"received_pps"`
	ReceivedMbps   float64 `json:"received_mbps"`
	LossRatio      float64 `json:"loss_ratio"`
	Routes         int     `json:"routes"`
	FIBLoadSeconds float64 `json:"fib_load_s"`
	DUTNsPerPacket float64 `json:"dut_ns_per_packet,omitempty"`
	// NAPINsPerPacket is the CPU time of the DUT's NAPI threads (the
	// threaded interfaces: everything the DUT does to a frame, driver
	// and programs) per received packet, and NAPIBusy the share of one
	// core they used. Unlike the rates it does not depend on how fast the
	// generator got to run; at NAPIBusy near 1 (n threads: n), the DUT's
	// capacity is 1e9/NAPINsPerPacket packets a second.
	NAPINsPerPacket float64 `json:"napi_ns_per_packet,omitempty"`
	NAPIBusy        float64 `json:"napi_busy,omitempty"`
	// Stages are each DUT program's run time, from kernel.bpf_stats:
	// per run, and runs per received packet (the whole router's LB runs
	// twice on each).
	Stages    map[string]Stage `json:"stages,omitempty"`
	Reordered uint64           `json:"reordered"`
	// Duplicated counts frames the sink received twice (traffic.SinkReport).
	Duplicated uint64 `json:"duplicated"`
	// Queues are the queues of the lab's links, and DUTForwardedPerCPU
	// the frames the DUT (lb, router) counted out by CPU in the trial.
	Queues             int       `json:"queues,omitempty"`
	DUTForwardedPerCPU []uint64  `json:"dut_forwarded_per_cpu,omitempty"`
	FlowsSeen          int       `json:"flows_seen"`
	Latency            LatencyUS `json:"latency_us"`
}

// LatencyUS is latency in microseconds, generator to sink.
type LatencyUS struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// drainTime is how long the sink keeps counting after the generator
// stops, for frames still queued in the DUT: RFC 2544 §23 waits 2 s; the
// deepest DUT here (bench-msr: three 256-frame veth rings) drains in
// milliseconds, and a search makes hundreds of trials.
const drainTime = 50 * time.Millisecond

// Fwd builds the DUT's lab, runs the generator for the duration, reads
// the sink, and tears the lab down.
func Fwd(o FwdOptions) (*FwdResult, error) {
	s, err := openSession(o)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	progs := s.progs
	if !o.ProgStats {
		progs = nil
	}
	stats, err := startProgStats(progs)
	if err != nil {
		return nil, err
	}
	defer stats.Close()
	var fwdBefore []uint64
	if s.forwardedPerCPU != nil {
		if fwdBefore, err = s.forwardedPerCPU(); err != nil {
			return nil, err
		}
	}
	t, err := s.trial(o.Size, o.Rate, o.Duration)
	if err != nil {
		return nil, err
	}
	r := result(o, t)
	if s.forwardedPerCPU != nil {
		after, err := s.forwardedPerCPU()
		if err != nil {
			return nil, err
		}
		for i := range after {
			r.DUTForwardedPerCPU = append(r.DUTForwardedPerCPU, after[i]-fwdBefore[i])
		}
	}
	r.Queues = max(o.Queues, 1)
	r.NAPINsPerPacket, r.NAPIBusy = t.napiNsPerPacket, t.napiBusy
	if r.Stages, err = stats.stages(t.rep.RxPackets); err != nil {
		return nil, err
	}
	for _, st := range r.Stages {
		if len(progs) == 1 { // the DUT is one program: its cost is the DUT's
			r.DUTNsPerPacket = st.NsPerRun
		}
	}
	r.Routes = len(s.routes)
	if s.routes != nil {
		r.FIBLoadSeconds = s.fibLoad.Seconds()
	}
	return r, nil
}

// check refuses options the run could not honour, before anything is
// built, and finds the lab, the table and the MAC the generator sends to.
func (o FwdOptions) check() (*lab.Spec, []netip.Prefix, net.HardwareAddr, error) {
	gc := traffic.GenConfig{DstMAC: make(net.HardwareAddr, 6), Size: o.Size, Flows: o.flowIDs(), Rate: o.Rate, IPv6: o.IPv6}
	if err := gc.Check(); err != nil {
		return nil, nil, nil, err
	}
	if o.Flows > traffic.MaxDsts {
		return nil, nil, nil, fmt.Errorf("%d flows: at most %d (destinations the generator walks)", o.Flows, traffic.MaxDsts)
	}
	if o.Duration <= 0 {
		return nil, nil, nil, fmt.Errorf("duration %v: must be positive", o.Duration)
	}
	if !slices.Contains(DUTs, o.DUT) {
		return nil, nil, nil, fmt.Errorf("unknown DUT %q: use one of %v", o.DUT, DUTs)
	}
	if _, err := dist.ParseURPF(o.URPF); err != nil || o.URPF != "" && o.DUT != "router" {
		return nil, nil, nil, fmt.Errorf("--urpf %q: off, loose or strict, for the router DUT", o.URPF)
	}
	if o.SFlowRate > 0 && o.DUT != "lb" {
		return nil, nil, nil, fmt.Errorf("--sflow-rate is for the lb DUT")
	}
	if o.CapPPS > 0 && !slices.Contains([]string{"lb", "lb-int-ext", "lb-both", "router"}, o.DUT) {
		return nil, nil, nil, fmt.Errorf("--cap is for the lb and router DUTs, whose element it caps")
	}
	if o.Queues < 0 || o.Queues > min(runtime.NumCPU(), lab.MaxQueues) {
		return nil, nil, nil, fmt.Errorf("%d queues: this machine sends from 1 to %d CPUs", o.Queues, min(runtime.NumCPU(), lab.MaxQueues))
	}
	if o.Queues > o.flowIDs() {
		return nil, nil, nil, fmt.Errorf("%d queues for %d flows: each queue's generator sends flows of its own", o.Queues, o.flowIDs())
	}
	spec, err := labs.Load("bench-" + o.DUT)
	if err != nil {
		return nil, nil, nil, err
	}
	for i := range spec.Links {
		spec.Links[i].Queues = o.Queues
	}
	named := routetable.Named
	if o.IPv6 {
		named = routetable.Named6
	}
	routes, err := named(o.FIB)
	if err != nil {
		return nil, nil, nil, err
	}
	if routes != nil && !slices.Contains(fibDUTs, o.DUT) {
		return nil, nil, nil, fmt.Errorf("--fib is for the DUTs that route: %v", fibDUTs)
	}
	dst, ok := spec.Peer(lab.Endpoint{Node: "gen", Iface: "g0"})
	if !ok {
		return nil, nil, nil, fmt.Errorf("lab %s: gen:g0 is not linked", spec.Name)
	}
	dstMAC, ok := spec.MAC(dst)
	if !ok {
		return nil, nil, nil, fmt.Errorf("lab %s: %s:%s has no MAC in the file", spec.Name, dst.Node, dst.Iface)
	}
	return spec, routes, dstMAC, nil
}

// openSink starts the sink on its own host, except for the router, which
// sends its output back to the generator's host, and lb-both, whose
// generator's two interfaces both receive.
func openSink(spec *lab.Spec, o FwdOptions) (*traffic.Sink, lab.Endpoint, error) {
	end := lab.Endpoint{Node: "sink", Iface: "s0"}
	if o.DUT == "router" || o.DUT == "xdp-fib" || o.DUT == "lb-both" {
		end = lab.Endpoint{Node: "gen", Iface: "g0"}
	}
	var sink *traffic.Sink
	err := netns.Do(lab.Namespace(spec.Name, end.Node), func() (err error) {
		if sink, err = traffic.NewSink(end.Iface, o.flowIDs()); err != nil {
			return err
		}
		if o.DUT == "lb-both" {
			if err = sink.Attach("g1"); err != nil {
				sink.Close()
			}
		}
		return err
	})
	return sink, end, err
}

// progStats is the DUT programs' run time, from the kernel's BPF
// statistics: unlike the rates, it does not depend on the generator.
type progStats struct {
	progs  map[string]*ebpf.Program
	before map[string]*ebpf.ProgramStats
	on     io.Closer
}

// startProgStats turns the statistics on (if there are programs) and
// reads where each program starts.
func startProgStats(progs map[string]*ebpf.Program) (*progStats, error) {
	ps := &progStats{progs: progs, before: map[string]*ebpf.ProgramStats{}}
	if len(progs) == 0 {
		return ps, nil
	}
	on, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		return nil, fmt.Errorf("enable BPF statistics: %w", err)
	}
	ps.on = on
	for name, p := range progs {
		if ps.before[name], err = p.Stats(); err != nil {
			on.Close()
			return nil, err
		}
	}
	return ps, nil
}

// stages is each program's time per run since the start, and its runs
// per packet received; nil without programs.
func (ps *progStats) stages(rxPackets uint64) (map[string]Stage, error) {
	var out map[string]Stage
	for name, p := range ps.progs {
		after, err := p.Stats()
		if err != nil {
			return nil, err
		}
		n := after.RunCount - ps.before[name].RunCount
		if n == 0 {
			continue
		}
		st := Stage{NsPerRun: float64(after.Runtime-ps.before[name].Runtime) / float64(n)}
		if rxPackets > 0 {
			st.RunsPerPacket = float64(n) / float64(rxPackets)
		}
		if out == nil {
			out = map[string]Stage{}
		}
		out[name] = st
	}
	return out, nil
}

func (ps *progStats) Close() {
	if ps.on != nil {
		ps.on.Close()
	}
}

// result is a trial's figures, its rates over the generator's sending
// window (as rfc2544's), not over the time its runs took to set up too.
func result(o FwdOptions, t *trialResult) *FwdResult {
	secs, sent, rep := t.seconds(), t.sent, t.rep
	r := &FwdResult{
		DUT: o.DUT, IPv6: o.IPv6, Size: o.Size, Flows: o.Flows, FlowIDs: o.flowIDs(), DestinationsWalked: o.Flows > o.flowIDs(), DurationSeconds: secs,
		OfferedPackets: sent, ReceivedPackets: rep.RxPackets,
		OfferedPPS: float64(sent) / secs, ReceivedPPS: float64(rep.RxPackets) / secs,
		ReceivedMbps: float64(rep.RxPackets) * float64(o.Size) * 8 / secs / 1e6,
		Reordered:    rep.Reordered, Duplicated: rep.Duplicated, FlowsSeen: rep.FlowsSeen,
		BehindSeconds: t.paceSkipped.Seconds(),
		Latency: LatencyUS{
			P50: us(rep.Latency.Quantile(0.50)),
			P99: us(rep.Latency.Quantile(0.99)),
			Max: us(rep.Latency.Quantile(1)),
		},
	}
	if o.Rate > 0 {
		r.ScheduledPPS = t.scheduledPPS()
	}
	if got := rep.RxPackets - rep.Duplicated; sent > 0 && sent > got { // each frame once
		r.LossRatio = float64(sent-got) / float64(sent)
	}
	return r
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// WriteText prints a result for people.
func (r *FwdResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "dut %-6s size %4d B  flows %5d  %.1fs\n", r.DUT, r.Size, r.Flows, r.DurationSeconds)
	fmt.Fprintf(w, "  offered  %12.0f pps (%d frames)\n", r.OfferedPPS, r.OfferedPackets)
	if r.BehindSeconds > 0 {
		fmt.Fprintf(w, "  the generator fell behind: %.3f s of schedule given up, %.0f pps while on it\n", r.BehindSeconds, r.ScheduledPPS)
	}
	fmt.Fprintf(w, "  received %12.0f pps (%d frames, %.0f Mbit/s)\n", r.ReceivedPPS, r.ReceivedPackets, r.ReceivedMbps)
	fmt.Fprintf(w, "  loss %.4f  reordered %d  duplicated %d  flows seen %d\n", r.LossRatio, r.Reordered, r.Duplicated, r.FlowsSeen)
	if r.DestinationsWalked {
		fmt.Fprintf(w, "  %d destinations walked frame by frame by %d flow ids (each counted apart, not each destination)\n", r.Flows, r.FlowIDs)
	}
	fmt.Fprintf(w, "  latency p50 %.1f us  p99 %.1f us  max %.1f us\n", r.Latency.P50, r.Latency.P99, r.Latency.Max)
	if r.DUTNsPerPacket > 0 {
		fmt.Fprintf(w, "  DUT program %.1f ns/packet (kernel.bpf_stats)\n", r.DUTNsPerPacket)
	}
	if r.NAPINsPerPacket > 0 {
		fmt.Fprintf(w, "  DUT NAPI threads %.0f ns/packet, %.0f%% of a core\n", r.NAPINsPerPacket, 100*r.NAPIBusy)
	}
	if len(r.Stages) > 1 {
		var total float64
		for _, st := range r.Stages {
			total += st.NsPerRun * st.RunsPerPacket
		}
		for _, name := range []string{"lb", "router"} {
			if st, ok := r.Stages[name]; ok {
				fmt.Fprintf(w, "  stage %-6s %.1f ns/run, %.2f runs/packet, %.0f%% of the programs' time (kernel.bpf_stats)\n",
					name, st.NsPerRun, st.RunsPerPacket, 100*st.NsPerRun*st.RunsPerPacket/total)
			}
		}
	}
	if r.Routes > 0 {
		fmt.Fprintf(w, "  %d routes, loaded in %.1fs\n", r.Routes, r.FIBLoadSeconds)
	}
	if r.Queues > 1 || len(r.DUTForwardedPerCPU) > 0 {
		fmt.Fprintf(w, "  %d queues; the DUT forwarded by CPU %v\n", r.Queues, r.DUTForwardedPerCPU)
	}
}
