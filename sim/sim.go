// Package sim is `msr sim`: a model of the multistage router past what one
// machine can hold (N1 LBs up to 64, N2 back-ends up to 512), fed with the
// elements' measured costs, that predicts the router's zero-loss capacity,
// how evenly the back-ends are loaded, what is lost at ρmin (docs/scaling.md) and
// how much is reordered, under each balancing mode.
//
// It models packets, not fluid: every packet of a trial is placed by the
// LB's own code (lb.BuildTable's tables, lb.CapacityWeights' weights, the
// LB model's choice of slot, lb.Model.Slot, in the trial's clock, and
// lb.Table.Via's internal port), and every
// element is a queue served at its capacity with a ring of Queue frames,
// which is the GCRA of bpf/cap.h (virtual scheduling: a frame is
// dropped when the element is more than Queue frames of work behind).
// So at the sizes the lab can hold the model and `msr bench scale` are
// the same experiment, and the model is validated against the lab's
// reports (Validate).
//
// What it does not model: the switch (a non-blocking fabric), the shared
// CPU of one lab machine (the lab's "machine" points), control traffic,
// and TCP's reaction to loss (traffic is open loop).
package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"sort"
	"time"

	"github.com/msr-router/msr/internal/element"
	"github.com/msr-router/msr/lb"
)

// Options is one `msr sim` run: the sizes to predict, the elements'
// capacities, and the traffic.
type Options struct {
	LBs           []int    `json:"lbs"`
	Backends      []int    `json:"backends"`
	InternalPorts []int    `json:"internal_ports"`
	Modes         []string `json:"modes"`

	// Element costs: the CPU time one packet takes, in ns, on one core
	// (`msr bench fwd`'s napi_ns_per_packet), and the cores each element
	// gives its data path. An LB spends LBNs on a packet it balances and
	// EgressNs on one it sends out of the router (every packet crosses
	// two LBs; with symmetric traffic each LB does both for as many
	// packets, so the model charges both at the ingress LB).
	LBNs, EgressNs, BackendNs float64
	LBCores, BackendCores     int
	// LinkGbps is every port's line rate (0: none); frames also cost
	// their preamble and gap on the wire.
	LinkGbps float64
	// Caps, as `msr bench scale`'s (frames a second, 0 none), replace the
	// costs: an LB's balanced frames, each internal port's, each
	// back-end's (back-end J takes the (J-1 mod len)th; weights follow).
	CapLB, CapPort uint64
	CapBackend     []uint64

	Size  int // frame size, bytes
	Flows int // flows in a trial
	// FlowSizes is the flows' size distribution: equal (the lab's
	// generator: every flow a packet in turn), pareto:ALPHA, or websearch.
	FlowSizes string
	// Burst is how many packets a flow sends back to back (1 for the
	// lab's generator; a TCP window for bulk traffic).
	Burst int
	// LBSpread is how flows reach the LBs: hash (upstream ECMP) or even
	// (the lab: each LB its own generator, flows dealt in turn).
	LBSpread string
	// Hosts is how many source MACs (upstream routers or hosts) each LB
	// receives from; they pick its internal port (lb.Table.Via). With
	// EvenHosts they are picked to spread evenly (the lab's), else at
	// random.
	Hosts     int
	EvenHosts bool
	// FlowletGap is flowlet mode's gap; PathSpread the spread of the
	// back-ends' fixed path latency (each gets one from [0, PathSpread]).
	FlowletGap time.Duration
	PathSpread time.Duration
	// Queue is each element's ring in frames (bpf/cap.h's tolerance).
	Queue int
	// Packets per trial (0: 50 rings' worth a back-end), the search's
	// resolution, and the seed of every random choice.
	Packets    int
	Resolution float64
	Seed       uint64
}

// Defaults: the costs are this machine's napi_ns_per_packet, the median
// of three alternating rounds of `msr bench fwd --dut lb|router --flows
// 1000 --duration 4s -o json` on 2026-11-23 (LB 403, 403, 478 ns; back-end
// 318, 593, 609 ns; docs/scaling.md); real hosts give each element's
// data path several cores.
const (
	DefaultLBNs      = 400
	DefaultBackendNs = 600
	DefaultCores     = 4
	DefaultLinkGbps  = 10
	DefaultQueue     = element.CapBurst // the caps' bucket, a NIC ring's worth
	// DefaultPathSpread is the spread of the back-ends' fixed path
	// latency: a few switch hops' and hosts' differences in a data centre
	// (an assumption; give what the deployment measures).
	DefaultPathSpread = 50 * time.Microsecond
)

// Complete fills the defaults and checks the options.
func (o *Options) Complete() error {
	if len(o.LBs) == 0 {
		o.LBs = []int{1, 2, 4, 8, 16, 32, 64}
	}
	if len(o.Backends) == 0 {
		o.Backends = []int{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}
	}
	if len(o.InternalPorts) == 0 {
		o.InternalPorts = []int{1}
	}
	if len(o.Modes) == 0 {
		o.Modes = []string{"wrr", "hash", "maglev", "flowlet"}
	}
	for _, m := range o.Modes {
		if _, err := lb.ParseMode(m); err != nil {
			return fmt.Errorf("--modes %q: wrr, hash, maglev or flowlet", m)
		}
	}
	for _, n := range o.LBs {
		if n < 1 || n > MaxLBs {
			return fmt.Errorf("--lbs %d: use 1 to %d", n, MaxLBs)
		}
	}
	for _, n := range o.Backends {
		if n < 1 || n > MaxBackends {
			return fmt.Errorf("--backends %d: use 1 to %d", n, MaxBackends)
		}
	}
	for _, n := range o.InternalPorts {
		if n < 1 || n > lb.MaxPorts-1 {
			return fmt.Errorf("--internal-ports %d: use 1 to %d", n, lb.MaxPorts-1)
		}
	}
	if o.LBNs == 0 {
		o.LBNs = DefaultLBNs
	}
	if o.EgressNs == 0 {
		o.EgressNs = o.LBNs
	}
	if o.BackendNs == 0 {
		o.BackendNs = DefaultBackendNs
	}
	if o.LBCores == 0 {
		o.LBCores = DefaultCores
	}
	if o.BackendCores == 0 {
		o.BackendCores = DefaultCores
	}
	if o.LBNs < 0 || o.EgressNs < 0 || o.BackendNs < 0 || o.LBCores < 0 || o.BackendCores < 0 || o.LinkGbps < 0 {
		return errors.New("costs, cores and link rates cannot be negative")
	}
	if o.Size == 0 {
		o.Size = 64
	}
	if o.Size < 64 || o.Size > 9018 {
		return fmt.Errorf("--size %d: use 64 to 9018", o.Size)
	}
	if o.Flows == 0 {
		o.Flows = 100000
	}
	if o.Flows < 1 || o.Flows > MaxFlows {
		return fmt.Errorf("--flows %d: use 1 to %d", o.Flows, MaxFlows)
	}
	if o.FlowSizes == "" {
		o.FlowSizes = "websearch"
	}
	if _, err := ParseSizes(o.FlowSizes); err != nil {
		return err
	}
	if o.Burst == 0 {
		o.Burst = 1
	}
	if o.Burst < 1 || o.Burst > 1024 {
		return fmt.Errorf("--burst %d: use 1 to 1024", o.Burst)
	}
	if o.LBSpread == "" {
		o.LBSpread = "hash"
	}
	if o.LBSpread != "hash" && o.LBSpread != "even" {
		return fmt.Errorf("--lb-spread %q: hash or even", o.LBSpread)
	}
	if o.Hosts == 0 {
		o.Hosts = 16
	}
	if o.Hosts < 1 || o.Hosts > 1<<16 {
		return fmt.Errorf("--hosts %d: use 1 to 65536", o.Hosts)
	}
	if o.FlowletGap == 0 {
		o.FlowletGap = lb.DefaultFlowletGap
	}
	if o.PathSpread < 0 || o.FlowletGap < 0 {
		return errors.New("--flowlet-gap and --path-spread cannot be negative")
	}
	if o.Queue == 0 {
		o.Queue = DefaultQueue
	}
	if o.Resolution == 0 {
		o.Resolution = 0.005
	}
	if o.Resolution <= 0 || o.Resolution >= 0.5 {
		return fmt.Errorf("--resolution %g: use a fraction above 0 and below 0.5", o.Resolution)
	}
	if o.Packets < 0 || o.Packets > 1e8 {
		return fmt.Errorf("--packets %d: use 0 (automatic) to 100000000", o.Packets)
	}
	return nil
}

// The model's bounds: past the 64 LBs and 512 back-ends it is checked
// at; the LB's table holds 65,537 slots, and flowlet mode remembers 65,536 flows.
const (
	MaxLBs      = 256
	MaxBackends = 4096
	MaxFlows    = 10000000
)

// Point is one predicted (N1, N2, n, mode).
type Point struct {
	LBs           int    `json:"lbs"`
	Backends      int    `json:"backends"`
	InternalPorts int    `json:"internal_ports"`
	Mode          string `json:"mode"`
	// PredictedPPS is the aggregate zero-loss rate; FormulaPPS is ρmin =
	// min(N1 × R_LB, N2 × R_R) from the same capacities, and Limit the
	// element kind that dropped first a tenth above the prediction (lb,
	// internal_port, backend).
	PredictedPPS float64 `json:"predicted_pps"`
	FormulaPPS   float64 `json:"formula_pps"`
	Ratio        float64 `json:"ratio"`
	Limit        string  `json:"limit"`
	// PredictedGbps is the prediction in bit/s of frames; FormulaMaxGbps
	// is ρmax = (link rate) × min(N1, N2) (docs/scaling.md).
	PredictedGbps  float64 `json:"predicted_gbps"`
	FormulaMaxGbps float64 `json:"formula_max_gbps,omitempty"`
	// LoadMaxMean is the busiest back-end's load over the mean (by
	// capacity) at the prediction; LossAtFormula the fraction lost when
	// ρmin is offered; Reordered the fraction of packets that left the
	// router behind a later packet of their flow, at the prediction.
	LoadMaxMean   float64   `json:"backend_load_max_mean"`
	LossAtFormula float64   `json:"loss_at_formula"`
	Reordered     float64   `json:"reordered"`
	TableSlots    int       `json:"table_slots"`
	Shares        []float64 `json:"backend_shares,omitempty"`
	// Error says why a point cannot be built (a table that does not fit
	// the LB's map).
	Error string `json:"error,omitempty"`
}

// Result is a `msr sim` run.
type Result struct {
	Options Options `json:"options"`
	Points  []Point `json:"points"`
	Seconds float64 `json:"seconds"`
}

// Run predicts every point.
func Run(o Options) (*Result, error) {
	if err := o.Complete(); err != nil {
		return nil, err
	}
	start := time.Now()
	r := &Result{Options: o}
	for _, n1 := range o.LBs {
		for _, n2 := range o.Backends {
			for _, ports := range o.InternalPorts {
				for _, mode := range o.Modes {
					p, err := Predict(o, n1, n2, ports, mode)
					if err != nil {
						return nil, err
					}
					r.Points = append(r.Points, *p)
				}
			}
		}
	}
	r.Seconds = time.Since(start).Seconds()
	return r, nil
}

// linePPS is a port's frames a second at the line rate (0: no limit).
func (o *Options) linePPS() float64 {
	if o.LinkGbps == 0 {
		return 0
	}
	return o.LinkGbps * 1e9 / (8 * float64(o.Size+20))
}

// capacities are one point's element rates in frames a second (0: no
// limit): an LB's, each internal port's, each back-end's.
func (o *Options) capacities(n2 int) (lbRate, portRate float64, backends []float64) {
	minPositive := func(a, b float64) float64 {
		switch {
		case a == 0:
			return b
		case b == 0:
			return a
		}
		return math.Min(a, b)
	}
	line := o.linePPS()
	if o.CapLB > 0 || o.CapPort > 0 || len(o.CapBackend) > 0 {
		lbRate, portRate = float64(o.CapLB), float64(o.CapPort)
		for j := range n2 {
			c := 0.0
			if len(o.CapBackend) > 0 {
				c = float64(o.CapBackend[j%len(o.CapBackend)])
			}
			backends = append(backends, c)
		}
		return lbRate, portRate, backends
	}
	lbRate = minPositive(float64(o.LBCores)*1e9/(o.LBNs+o.EgressNs), line)
	portRate = line
	r := minPositive(float64(o.BackendCores)*1e9/o.BackendNs, line)
	for range n2 {
		backends = append(backends, r)
	}
	return lbRate, portRate, backends
}

// weights are the back-ends' WRR weights from their capacities, as
// `msr bench scale` gives the lab's (lb.CapacityWeights).
func weights(backends []float64) []uint16 {
	caps := make([]uint64, len(backends))
	for j, c := range backends {
		caps[j] = uint64(math.Round(c))
	}
	return lb.CapacityWeights(caps)
}

// backendMAC names back-end j in the model's tables.
func backendMAC(j int) net.HardwareAddr {
	return net.HardwareAddr{0x02, 0, 0x0b, byte(j >> 16), byte(j >> 8), byte(j)}
}

func backendOf(mac net.HardwareAddr) int { return int(mac[3])<<16 | int(mac[4])<<8 | int(mac[5]) }

// Predict finds one point's zero-loss rate and what happens around it.
func Predict(o Options, n1, n2, ports int, modeName string) (*Point, error) {
	if err := o.Complete(); err != nil {
		return nil, err
	}
	mode, _ := lb.ParseMode(modeName)
	p := &Point{LBs: n1, Backends: n2, InternalPorts: ports, Mode: modeName}
	lbRate, portRate, caps := o.capacities(n2)
	p.FormulaPPS, _ = Formula(n1, ports, lbRate, portRate, caps)
	if g := o.LinkGbps; g > 0 {
		p.FormulaMaxGbps = g * float64(min(n1, n2))
	}
	w := weights(caps)
	var entries []lb.Backend
	for k := range ports {
		for j := range n2 {
			entries = append(entries, lb.Backend{MAC: backendMAC(j), Ifindex: k + 1, PortIndex: uint8(k), Weight: w[j]})
		}
	}
	table, err := lb.BuildTable(mode, entries)
	if err != nil {
		p.Error = err.Error()
		return p, nil
	}
	if len(table.Slots) > lb.TableSlots {
		p.Error = fmt.Sprintf("a table of %d slots, the LB's map holds %d", len(table.Slots), lb.TableSlots)
		return p, nil
	}
	p.TableSlots = len(table.Slots)
	top := p.FormulaPPS
	if math.IsInf(top, 1) || top == 0 {
		return nil, errors.New("nothing limits the router: give costs or caps")
	}
	m := newModel(&o, n1, n2, ports, table, lbRate, portRate, caps)
	// The zero-loss rate: a bisection between a rate that loses nothing
	// and one that loses, to the resolution; at is the trial at lo.
	lo, hi := 0.0, top*1.05
	var at outcome
	for t := m.trial(hi); t.lost == 0; t = m.trial(hi) {
		lo, hi, at = hi, hi*2, t
	}
	for (hi-lo)/hi > o.Resolution {
		mid := (lo + hi) / 2
		if t := m.trial(mid); t.lost == 0 {
			lo, at = mid, t
		} else {
			hi = mid
		}
	}
	if lo == 0 {
		return nil, fmt.Errorf("%d x %d x %d %s: every rate loses", n1, n2, ports, modeName)
	}
	p.PredictedPPS = lo
	p.Ratio = lo / p.FormulaPPS
	p.PredictedGbps = lo * float64(o.Size) * 8 / 1e9
	p.Reordered = at.reorderedFraction()
	p.LoadMaxMean = at.maxMean(caps)
	if n2 <= 16 {
		p.Shares = at.shares()
	}
	p.LossAtFormula = m.trial(p.FormulaPPS).lossFraction()
	p.Limit = m.trial(lo * 1.1).limit()
	return p, nil
}

// model is one point's elements and traffic.
type model struct {
	o              *Options
	n1, n2, ports  int
	table          *lb.Table
	slotBackend    []int32 // table slot → back-end
	lbService      float64 // seconds a frame (0: no limit)
	portService    float64
	backendService []float64
	backendLatency []float64
	flows          []flow
	order          []int32 // the trial's bursts: which flow sends each
	trialPackets   int
	// rrStart is each LB's round robin's first slot: random, as
	// lb.LoadDataplane seeds it.
	rrStart []uint32
	// A trial's packets (reused): when each left its last stage, its
	// back-end (-1: dropped), flow and internal port; and an order.
	at                []float64
	backendOf, flowOf []int32
	portOf, order2    []int32
	counts, sorted    []int32
}

// flow is one flow: its LB, the internal port its source MAC takes, and
// its hash.
type flow struct {
	lb   int32
	port int32
	hash uint32
}

func service(rate float64) float64 {
	if rate == 0 {
		return 0
	}
	return 1 / rate
}

func newModel(o *Options, n1, n2, ports int, table *lb.Table, lbRate, portRate float64, caps []float64) *model {
	rng := rand.New(rand.NewPCG(o.Seed, uint64(n1)<<32|uint64(n2)<<8|uint64(ports)))
	m := &model{o: o, n1: n1, n2: n2, ports: ports, table: table,
		lbService: service(lbRate), portService: service(portRate)}
	for _, s := range table.Slots {
		m.slotBackend = append(m.slotBackend, int32(backendOf(s.MAC)))
	}
	for range n1 {
		m.rrStart = append(m.rrStart, rng.Uint32())
	}
	for _, c := range caps {
		m.backendService = append(m.backendService, service(c))
		m.backendLatency = append(m.backendLatency, rng.Float64()*o.PathSpread.Seconds())
	}
	// Each LB's source hosts, and the internal port each takes.
	hostPort := make([][]int32, n1)
	for i := range n1 {
		var macs []net.HardwareAddr
		if o.EvenHosts {
			macs = table.EvenSources(byte(i+1), ports, o.Hosts)
		}
		if len(macs) == 0 {
			for range o.Hosts {
				mac := make(net.HardwareAddr, 6)
				for k := range mac {
					mac[k] = byte(rng.UintN(256))
				}
				mac[0] = mac[0]&^1 | 2
				macs = append(macs, mac)
			}
		}
		for _, mac := range macs {
			via, _ := table.Via(mac)
			hostPort[i] = append(hostPort[i], int32(via.PortIndex))
		}
	}
	sizes, _ := ParseSizes(o.FlowSizes)
	weight := make([]float64, o.Flows)
	perLB := make([]int, n1)
	for f := range o.Flows {
		var l int
		if o.LBSpread == "even" {
			l = f % n1
		} else {
			l = int(rng.UintN(uint(n1)))
		}
		host := perLB[l] % len(hostPort[l])
		perLB[l]++
		m.flows = append(m.flows, flow{lb: int32(l), port: hostPort[l][host], hash: rng.Uint32()})
		weight[f] = sizes.packets(rng, o.Size)
	}
	// The trial: long enough that 1% above a back-end's capacity fills
	// the half of its ring a trial starts with free (queues start half
	// full, as under steady load: a short trial would otherwise pass a
	// rate above capacity on the rings' slack), in bursts of flows drawn
	// by their sizes (round robin for equal flows, as the lab's
	// generator sends).
	m.trialPackets = o.Packets
	if m.trialPackets == 0 {
		m.trialPackets = max(200000, 50*o.Queue*n2)
	}
	bursts := (m.trialPackets + o.Burst - 1) / o.Burst
	m.order = make([]int32, bursts)
	if sizes.kind == sizesEqual {
		for b := range m.order {
			m.order[b] = int32(b % o.Flows)
		}
		return m
	}
	cum := make([]float64, o.Flows)
	total := 0.0
	for f, w := range weight {
		total += w
		cum[f] = total
	}
	for b := range m.order {
		x := rng.Float64() * total
		m.order[b] = int32(sort.SearchFloat64s(cum, x))
		if int(m.order[b]) >= o.Flows {
			m.order[b] = int32(o.Flows - 1)
		}
	}
	return m
}

// outcome is one trial's counts.
type outcome struct {
	sent, lost, reordered uint64
	dropped               map[string]uint64 // by element kind
	perBackend            []uint64
}

func (t outcome) lossFraction() float64      { return float64(t.lost) / float64(t.sent) }
func (t outcome) reorderedFraction() float64 { return float64(t.reordered) / float64(t.sent-t.lost) }

func (t outcome) shares() []float64 {
	var sum uint64
	for _, n := range t.perBackend {
		sum += n
	}
	out := make([]float64, len(t.perBackend))
	for j, n := range t.perBackend {
		out[j] = float64(n) / float64(max(sum, 1))
	}
	return out
}

// maxMean is the busiest back-end's load (packets over capacity) over
// the mean load.
func (t outcome) maxMean(caps []float64) float64 {
	top, sum := 0.0, 0.0
	for j, n := range t.perBackend {
		c := caps[j]
		if c == 0 {
			c = 1
		}
		l := float64(n) / c
		top = math.Max(top, l)
		sum += l
	}
	if sum == 0 {
		return 0
	}
	return top / (sum / float64(len(t.perBackend)))
}

// limit is the element kind that dropped most.
func (t outcome) limit() string {
	best, kind := uint64(0), "none"
	for _, k := range []string{"lb", "internal_port", "backend"} {
		if t.dropped[k] > best {
			best, kind = t.dropped[k], k
		}
	}
	return kind
}

// queue is one element: the GCRA of bpf/cap.h in virtual time (its
// theoretical arrival time), which is also a FIFO served at its rate
// with a ring of Queue frames.
type queue struct{ tat float64 }

// offer admits a frame arriving at t to an element serving one every s
// seconds with tolerance tau; it returns the time the frame leaves and
// whether it was admitted.
func (q *queue) offer(t, s, tau float64) (float64, bool) {
	if s == 0 {
		return t, true
	}
	tat := math.Max(q.tat, t)
	if tat-t > tau*(1+1e-9) { // rounding must not shorten the ring
		return 0, false
	}
	q.tat = tat + s
	return q.tat, true
}

// trial offers the trial's packets at rate pps (evenly spaced, as the
// generator sends) and counts what is lost, where, and what leaves out
// of order. Each stage takes its packets in the order they reach it: the
// LBs in the order sent, the internal ports and the back-ends in the
// order the stage before let them go (a queue fed out of time order
// would see one LB's backlog as another's burst).
func (m *model) trial(pps float64) outcome {
	o := m.o
	tau := func(s float64) float64 { return float64(o.Queue) * s }
	n := m.trialPackets
	if len(m.at) < n {
		m.at, m.backendOf, m.flowOf = make([]float64, n), make([]int32, n), make([]int32, n)
		m.portOf, m.order2 = make([]int32, n), make([]int32, 0, n)
	}
	at, backendOf, flowOf, portOf := m.at[:n], m.backendOf[:n], m.flowOf[:n], m.portOf[:n]
	out := outcome{sent: uint64(n), dropped: map[string]uint64{}, perBackend: make([]uint64, m.n2)}
	// Stage 1, the LBs: their caps, then their choice of back-end.
	// Every queue starts half full (trialPackets says why).
	half := func(q []queue, s float64) []queue {
		for i := range q {
			q[i].tat = tau(s) / 2
		}
		return q
	}
	lbs := half(make([]queue, m.n1), m.lbService)
	// Each LB's choices are the LB's model's (lb.Model.Slot: its round
	// robin from its seeded start, its flowlets), in the trial's clock.
	choosers := make([]lb.Model, m.n1)
	for i := range choosers {
		choosers[i] = lb.Model{Table: *m.table, RR: m.rrStart[i], Config: lb.Config{FlowletGap: o.FlowletGap}}
	}
	var epoch time.Time
	dt := 1 / pps
	i := 0
	for _, fi := range m.order {
		f := &m.flows[fi]
		for range o.Burst {
			if i >= n {
				break
			}
			t := float64(i) * dt
			flowOf[i], backendOf[i] = fi, -1
			t1, ok := lbs[f.lb].offer(t, m.lbService, tau(m.lbService))
			if !ok {
				out.dropped["lb"]++
				i++
				continue
			}
			idx := choosers[f.lb].Slot(f.hash, epoch.Add(time.Duration(t*1e9)))
			at[i], backendOf[i], portOf[i] = t1, m.slotBackend[idx], f.lb*int32(m.ports)+f.port
			i++
		}
	}
	// The order the admitted packets reach the next stage.
	order := m.order2[:0]
	for k := range n {
		if backendOf[k] >= 0 {
			order = append(order, int32(k))
		}
	}
	// Stage 2, the internal ports (when capped).
	if m.portService > 0 {
		if m.lbService > 0 {
			m.byTime(order, at, dt)
		}
		ports := half(make([]queue, m.n1*m.ports), m.portService)
		kept := order[:0]
		for _, k := range order {
			t2, ok := ports[portOf[k]].offer(at[k], m.portService, tau(m.portService))
			if !ok {
				out.dropped["internal_port"]++
				backendOf[k] = -1
				continue
			}
			at[k] = t2
			kept = append(kept, k)
		}
		order = kept
	}
	// Stage 3, the back-ends.
	if m.lbService > 0 || m.portService > 0 {
		m.byTime(order, at, dt)
	}
	backends := make([]queue, m.n2)
	for b := range backends {
		backends[b].tat = tau(m.backendService[b]) / 2
	}
	for _, k := range order {
		b := backendOf[k]
		s := m.backendService[b]
		t3, ok := backends[b].offer(at[k], s, tau(s))
		if !ok {
			out.dropped["backend"]++
			backendOf[k] = -1
			continue
		}
		out.perBackend[b]++
		at[k] = t3 + m.backendLatency[b]
	}
	m.order2 = order[:0]
	// What left, in the order each flow sent it.
	lastExit := make([]float64, len(m.flows))
	for k := range n {
		if backendOf[k] < 0 {
			out.lost++
			continue
		}
		f := flowOf[k]
		if at[k] < lastExit[f] {
			out.reordered++
		} else {
			lastExit[f] = at[k]
		}
	}
	return out
}

// byTime puts order in the order of at: a counting sort on the packet
// slot (dt, 1/pps) each time falls in, stable, so packets within one slot
// keep the order of the stage before (they are simultaneous to within a
// packet time).
func (m *model) byTime(order []int32, at []float64, dt float64) {
	top := 0
	for _, k := range order {
		top = max(top, int(at[k]/dt))
	}
	if cap(m.counts) < top+2 {
		m.counts = make([]int32, top+2)
	}
	counts := m.counts[:top+2]
	clear(counts)
	for _, k := range order {
		counts[int(at[k]/dt)+1]++
	}
	for b := 1; b < len(counts); b++ {
		counts[b] += counts[b-1]
	}
	if cap(m.sorted) < len(order) {
		m.sorted = make([]int32, len(order))
	}
	sorted := m.sorted[:len(order)]
	for _, k := range order {
		b := int(at[k] / dt)
		sorted[counts[b]] = k
		counts[b]++
	}
	copy(order, sorted)
}
