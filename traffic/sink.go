package traffic

import (
	"fmt"
	"math"
	"net"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/msr-router/msr/internal/xdp"
)

// Sink counts test frames arriving on one interface (trafficsink).
type Sink struct {
	objs  trafficsinkObjects
	links []link.Link
	flows int
	// hostProgs are the instances AttachHost loaded.
	hostProgs []*ebpf.Program
}

// NewSink loads the sink and attaches it, in native XDP mode, to ifname.
// Call it inside the interface's namespace.
func NewSink(ifname string, flows int) (*Sink, error) {
	s, err := loadSink(flows)
	if err != nil {
		return nil, err
	}
	if err := s.Attach(ifname); err != nil {
		s.objs.Close()
		return nil, err
	}
	return s, nil
}

// Attach attaches the sink to one more interface, in the calling thread's
// namespace: several sinks (two test machines' worth) count into one
// set of counters.
func (s *Sink) Attach(ifname string) error {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return fmt.Errorf("sink interface: %w", err)
	}
	l, err := xdp.Attach(s.objs.Trafficsink, ifi.Index)
	if err != nil {
		return fmt.Errorf("%s: %w", ifname, err)
	}
	s.links = append(s.links, l)
	return nil
}

// Detach detaches the sink from every interface, keeping its counters.
func (s *Sink) Detach() error {
	var first error
	for _, l := range s.links {
		if err := l.Close(); err != nil && first == nil {
			first = err
		}
	}
	s.links = nil
	return first
}

// AttachHost attaches the sink to a host's interface, in the calling
// thread's namespace: there it counts only the test frames addressed to
// the interface's MAC (a switch flooding a frame to it is not delivering
// it). Another instance of the program, with that MAC, into the same
// counters.
func (s *Sink) AttachHost(ifname string) error {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return fmt.Errorf("sink interface: %w", err)
	}
	var mac [6]byte
	copy(mac[:], ifi.HardwareAddr)
	prog, err := s.hostProgram(mac)
	if err != nil {
		return err
	}
	l, err := xdp.Attach(prog, ifi.Index)
	if err != nil {
		return fmt.Errorf("%s: %w", ifname, err)
	}
	s.links = append(s.links, l)
	return nil
}

// hostProgram loads an instance of the sink counting only the test frames
// addressed to mac, into the sink's maps; Close closes it.
func (s *Sink) hostProgram(mac [6]byte) (*ebpf.Program, error) {
	spec, err := loadTrafficsink()
	if err != nil {
		return nil, fmt.Errorf("load sink: %w", err)
	}
	for name, v := range map[string]any{"flows": uint32(s.flows), "host_mac": mac, "host_only": uint32(1)} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("configure sink: %s: %w", name, err)
		}
	}
	var prog trafficsinkPrograms
	err = spec.LoadAndAssign(&prog, &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{
		"sink_flows": s.objs.SinkFlows, "sink_counters": s.objs.SinkCounters, "sink_hist": s.objs.SinkHist}})
	if err != nil {
		return nil, fmt.Errorf("load sink: %w", err)
	}
	s.hostProgs = append(s.hostProgs, prog.Trafficsink)
	return prog.Trafficsink, nil
}

// loadSink loads the sink for a run of flows flows, without attaching it.
func loadSink(flows int) (*Sink, error) {
	if flows < 1 || flows > MaxFlows {
		return nil, fmt.Errorf("%d flows: use 1 to %d", flows, MaxFlows)
	}
	spec, err := loadTrafficsink()
	if err != nil {
		return nil, fmt.Errorf("load sink: %w", err)
	}
	if err := spec.Variables["flows"].Set(uint32(flows)); err != nil {
		return nil, fmt.Errorf("configure sink: %w", err)
	}
	s := &Sink{flows: flows}
	if err := spec.LoadAndAssign(&s.objs, nil); err != nil {
		return nil, fmt.Errorf("load sink: %w", err)
	}
	return s, nil
}

// SinkReport is what the sink counted.
type SinkReport struct {
	RxPackets uint64 `json:"rx_packets"`
	RxBytes   uint64 `json:"rx_bytes"`
	Reordered uint64 `json:"reordered"`
	// Duplicated counts the frames whose sequence number had arrived
	// already, within their flow's window of the last 256 (counted in
	// RxPackets too, not in Reordered); BeyondWindow the late frames
	// older than that, counted Reordered, which may have been duplicates:
	// Duplicated is exact while BeyondWindow is 0.
	Duplicated   uint64 `json:"duplicated"`
	BeyondWindow uint64 `json:"beyond_window"`
	BadFlow      uint64 `json:"bad_flow"`
	Passed       uint64 `json:"passed"`
	// Skipped counts the frames missing where a flow's sequence jumped
	// ahead; LossFirst and LossLast are when (the generator's clock,
	// CLOCK_MONOTONIC) the first and the last of them were sent, since
	// the sink last restarted (0: none).
	Skipped   uint64        `json:"skipped"`
	LossFirst time.Duration `json:"-"`
	LossLast  time.Duration `json:"-"`
	// LossSpan is the longest of the jumps, from its first missing frame
	// to its last: an outage, apart from frames lost before or after it.
	LossSpan time.Duration `json:"-"`
	// TTLMin and TTLMax are the lowest and highest TTL of the test frames
	// (the generator sends 64: 63 is one router's decrement), since the
	// sink last restarted; 0 before any.
	TTLMin uint8 `json:"ttl_min"`
	TTLMax uint8 `json:"ttl_max"`
	// FlowsSeen is how many flows delivered at least one frame since the
	// sink last restarted.
	FlowsSeen int       `json:"flows_seen"`
	Latency   Histogram `json:"-"`
}

// Read sums the sink's per-CPU counters, flows and histogram.
func (s *Sink) Read() (*SinkReport, error) {
	var stats []trafficsinkSinkStats
	if err := s.objs.SinkCounters.Lookup(uint32(0), &stats); err != nil {
		return nil, fmt.Errorf("read sink counters: %w", err)
	}
	r := &SinkReport{}
	for _, c := range stats {
		r.RxPackets += c.RxPackets
		r.RxBytes += c.RxBytes
		r.Reordered += c.Reordered
		r.Duplicated += c.Duplicated
		r.BeyondWindow += c.BeyondWindow
		r.BadFlow += c.BadFlow
		r.Passed += c.Passed
		r.Skipped += c.Skipped
		if c.LossFirstNs != 0 && (r.LossFirst == 0 || time.Duration(c.LossFirstNs) < r.LossFirst) {
			r.LossFirst = time.Duration(c.LossFirstNs)
		}
		r.LossLast = max(r.LossLast, time.Duration(c.LossLastNs))
		r.LossSpan = max(r.LossSpan, time.Duration(c.LossSpanNs))
		if c.TtlMin != 0 && (r.TTLMin == 0 || uint8(c.TtlMin) < r.TTLMin) {
			r.TTLMin = uint8(c.TtlMin)
		}
		r.TTLMax = max(r.TTLMax, uint8(c.TtlMax))
	}
	var f trafficsinkSinkFlow
	for i := 0; i < s.flows; i++ {
		if err := s.objs.SinkFlows.Lookup(uint32(i), &f); err != nil {
			return nil, fmt.Errorf("read sink flow %d: %w", i, err)
		}
		if f.Seen != 0 {
			r.FlowsSeen++
		}
	}
	r.Latency = make(Histogram, s.objs.SinkHist.MaxEntries())
	var perCPU []uint64
	for b := range r.Latency {
		if err := s.objs.SinkHist.Lookup(uint32(b), &perCPU); err != nil {
			return nil, fmt.Errorf("read sink histogram: %w", err)
		}
		for _, v := range perCPU {
			r.Latency[b] += v
		}
	}
	return r, nil
}

// Since is what the sink counted after prev, an earlier report of the
// same sink: counters and latencies of the frames in between. FlowsSeen
// and the loss window stay what they were since the sink last restarted.
func (r *SinkReport) Since(prev *SinkReport) *SinkReport {
	d := *r
	d.RxPackets -= prev.RxPackets
	d.RxBytes -= prev.RxBytes
	d.Reordered -= prev.Reordered
	d.Duplicated -= prev.Duplicated
	d.BeyondWindow -= prev.BeyondWindow
	d.BadFlow -= prev.BadFlow
	d.Passed -= prev.Passed
	d.Skipped -= prev.Skipped
	d.Latency = make(Histogram, len(r.Latency))
	for i := range r.Latency {
		d.Latency[i] = r.Latency[i]
		if i < len(prev.Latency) {
			d.Latency[i] -= prev.Latency[i]
		}
	}
	return &d
}

// Received is how many test frames the sink has counted: cheap enough to
// sample every few milliseconds during a trial.
func (s *Sink) Received() (uint64, error) {
	var stats []trafficsinkSinkStats
	if err := s.objs.SinkCounters.Lookup(uint32(0), &stats); err != nil {
		return 0, fmt.Errorf("read sink counters: %w", err)
	}
	var n uint64
	for _, c := range stats {
		n += c.RxPackets
	}
	return n, nil
}

// Restart forgets the flows (a new generator starts their sequences
// again), the loss window and the TTLs; the counters keep counting. Call it while
// no test frames arrive.
func (s *Sink) Restart() error {
	var stats []trafficsinkSinkStats
	if err := s.objs.SinkCounters.Lookup(uint32(0), &stats); err != nil {
		return fmt.Errorf("read sink counters: %w", err)
	}
	for i := range stats {
		stats[i].LossFirstNs, stats[i].LossLastNs, stats[i].LossSpanNs = 0, 0, 0
		stats[i].TtlMin, stats[i].TtlMax = 0, 0
	}
	if err := s.objs.SinkCounters.Put(uint32(0), stats); err != nil {
		return fmt.Errorf("restart sink: %w", err)
	}
	keys := make([]uint32, s.flows)
	for i := range keys {
		keys[i] = uint32(i)
	}
	if _, err := s.objs.SinkFlows.BatchUpdate(keys, make([]trafficsinkSinkFlow, s.flows), nil); err != nil {
		return fmt.Errorf("restart sink flows: %w", err)
	}
	return nil
}

// Close detaches and unloads the sink.
func (s *Sink) Close() error {
	for _, l := range s.links {
		l.Close()
	}
	for _, p := range s.hostProgs {
		p.Close()
	}
	return s.objs.Close()
}

// histSubBits is BENCH_HIST_SUB_BITS of bench.h: a #define, which BTF
// does not carry. TestSinkLatencyBuckets checks the two agree.
const histSubBits = 3

// Histogram counts latencies per bucket of trafficsink's hist_bucket.
type Histogram []uint64

// BucketLow is the smallest latency in ns that falls in bucket b.
func BucketLow(b int) uint64 {
	const sub = 1 << histSubBits
	if b < sub {
		return uint64(b)
	}
	m := b/sub + histSubBits - 1
	return uint64(sub+b%sub) << (m - histSubBits)
}

// Quantile returns the latency below which a fraction q of the samples
// lie, as the upper bound of the bucket holding that sample (so it never
// understates).
func (h Histogram) Quantile(q float64) time.Duration {
	var total uint64
	for _, c := range h {
		total += c
	}
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	rank = max(rank, 1)
	var seen uint64
	for b, c := range h {
		seen += c
		if seen >= rank {
			if b+1 < len(h) {
				return time.Duration(BucketLow(b + 1))
			}
			return time.Duration(BucketLow(b))
		}
	}
	return 0
}

// FlowCounts returns, per flow id, how many frames of it arrived.
func (s *Sink) FlowCounts() ([]uint64, error) {
	out := make([]uint64, s.flows)
	var f trafficsinkSinkFlow
	for i := range out {
		if err := s.objs.SinkFlows.Lookup(uint32(i), &f); err != nil {
			return nil, fmt.Errorf("read sink flow %d: %w", i, err)
		}
		out[i] = f.Received
	}
	return out, nil
}
