package bench

import (
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"gonum.org/v1/plot/plotter"

	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/lb"
	"github.com/msr-router/msr/router"
	"github.com/msr-router/msr/sim"
	"github.com/msr-router/msr/traffic"
)

// `msr bench scale` shows the multistage router's claim: its
// capacity grows with its elements, ρmin = min(N1 × R_LB, N2 × R_R). For
// each (N1, N2, n) it builds a lab of N1 LBs with n internal ports each,
// N2 back-ends and one switch (a Linux bridge with the lab's XDP fast
// path), loads their data paths (no agents: it measures forwarding), caps
// each element (bpf/cap.h) so that the elements, not the two cores the
// whole lab shares, are the limit, and finds the aggregate zero-loss rate
// with the throughput search of `bench rfc2544`.
//
//	gen:gI --- eI0:lbI:eI1 --- sI:sink     (I = 1..N1; each LB its own
//	           lbI:iIK --- sw --- rJ:r0     generator port and sink port)
//
// LB I's traffic enters by its e0 (VLAN 100+I) towards 198.19.I.0/24,
// which every back-end routes out of LB I's e1 (VLAN 200+I) to sink port
// sI: each LB carries its own share, as each LB has its own external
// ports.

// ScaleOptions is `msr bench scale`.
type ScaleOptions struct {
	LBs           []int // N1 values
	Backends      []int // N2 values
	InternalPorts []int // n of DTX-n
	// Caps in frames a second (0: none): an LB's own (what it balances),
	// each internal port's (DTX-n's back-NICs).
	CapLB, CapPort uint64
	// CapBackend are the back-ends' caps: back-end J takes the (J-1 mod
	// len)th, so one value caps them alike and 40000,40000,20000 gives
	// three back-ends capacities 2:2:1. The LBs' weights follow the caps
	// (backendWeights), as the VCP's follow the capacities the back-ends
	// announce.
	CapBackend []uint64
	// Mode is the LBs' balancing mode: wrr (the seed's round robin,
	// default) or flowlet; hash and maglev spread flows, not packets, and
	// miss the weights by the flows' luck.
	Mode       string
	Size       int
	Flows      int
	Trial      time.Duration
	Resolution float64
	Trials     int // trials per rate
	MaxTrials  int
}

func (o *ScaleOptions) complete() error {
	if len(o.LBs) == 0 {
		o.LBs = []int{1, 2}
	}
	if len(o.Backends) == 0 {
		o.Backends = []int{1, 2, 4}
	}
	if len(o.InternalPorts) == 0 {
		o.InternalPorts = []int{1}
	}
	if o.Mode == "" {
		o.Mode = "wrr"
	}
	if m, err := lb.ParseMode(o.Mode); err != nil || (m != lb.ModeWRR && m != lb.ModeFlowlet) {
		return fmt.Errorf("--mode %q: wrr or flowlet", o.Mode)
	}
	if o.Size == 0 {
		o.Size = 64
	}
	if o.Flows == 0 {
		o.Flows = 1000
	}
	if o.Trial == 0 {
		o.Trial = time.Second
	}
	if o.Resolution == 0 {
		o.Resolution = 0.01
	}
	if o.Trials == 0 {
		o.Trials = 2
	}
	if o.MaxTrials == 0 {
		o.MaxTrials = 30
	}
	for _, n := range o.LBs {
		if n < 1 || n > maxScaleLBs {
			return fmt.Errorf("--lbs %d: use 1 to %d (each LB takes a generator and a sink port)", n, maxScaleLBs)
		}
	}
	for _, n := range o.Backends {
		if n < 1 || n > maxScaleBackends {
			return fmt.Errorf("--backends %d: use 1 to %d", n, maxScaleBackends)
		}
	}
	for _, n := range o.InternalPorts {
		if n < 1 || n > maxScalePorts {
			return fmt.Errorf("--internal-ports %d: use 1 to %d", n, maxScalePorts)
		}
	}
	if o.Size < traffic.MinFrameSize || o.Size > traffic.MaxFrameSize {
		return fmt.Errorf("--size %d: use %d to %d", o.Size, traffic.MinFrameSize, traffic.MaxFrameSize)
	}
	if o.Flows < 1 || o.Flows > traffic.MaxFlows {
		return fmt.Errorf("--flows %d: use 1 to %d", o.Flows, traffic.MaxFlows)
	}
	return nil
}

// The lab's bounds: each LB takes two VLANs, a /24 of destinations and a
// port of the generator and of the sink; the switch's port names are
// short (IFNAMSIZ).
const (
	maxScaleLBs      = 8
	maxScaleBackends = 16
	maxScalePorts    = 4
)

// scaleHosts is how many hosts (source MACs) each LB's generator port
// sends from when the LB has several internal ports: an LB picks the
// internal port by source MAC (lb.bpf.c's balance says why), so one
// host's frames always take one port, as one upstream router's would.
// The hosts are picked so that the LB's hash spreads them evenly over its
// internal ports (lb.Table.EvenSources): the point measures the ports' capacity, not
// how evenly 16 random MACs happen to hash (one set of 16 gave a port 58%
// of the frames, and the point 87% of ρmin).
const scaleHosts = 16

// ScaleResult is a scale run: every point, and the machine.
type ScaleResult struct {
	Options ScaleOptions     `json:"options"`
	Points  []sim.ScalePoint `json:"points"`
	Machine string           `json:"machine"`
	Seconds float64          `json:"seconds"`
	Figures []Plot           `json:"figures,omitempty"`
}

// formula is ρmin for a point from the caps, and which element kind sets
// it (sim.Formula).
func (o *ScaleOptions) formula(n1, n2, ports int) (float64, string) {
	caps := make([]float64, n2)
	for j := range caps {
		caps[j] = float64(o.backendCap(j))
	}
	return sim.Formula(n1, ports, float64(o.CapLB), float64(o.CapPort), caps)
}

// backendCap is back-end j's cap (j from 0), 0 for none.
func (o *ScaleOptions) backendCap(j int) uint64 {
	if len(o.CapBackend) == 0 {
		return 0
	}
	return o.CapBackend[j%len(o.CapBackend)]
}

// backendWeights are the WRR weights of n2 back-ends, from their caps
// (lb.CapacityWeights).
func (o *ScaleOptions) backendWeights(n2 int) []uint16 {
	caps := make([]uint64, n2)
	for j := range caps {
		caps[j] = o.backendCap(j)
	}
	return lb.CapacityWeights(caps)
}

// Scale runs every point, in order of N1, then n, then N2.
func Scale(o ScaleOptions, progress io.Writer) (*ScaleResult, error) {
	if err := o.complete(); err != nil {
		return nil, err
	}
	start := time.Now()
	res := &ScaleResult{Options: o, Machine: machine()}
	for _, n1 := range o.LBs {
		for _, ports := range o.InternalPorts {
			for _, n2 := range o.Backends {
				p, err := scalePoint(o, n1, n2, ports, progress)
				if err != nil {
					return nil, fmt.Errorf("%d LBs × %d back-ends, %d internal ports: %w", n1, n2, ports, err)
				}
				res.Points = append(res.Points, *p)
			}
		}
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// scaleLab is one point's lab: its session (generator, sinks), and the
// data paths whose caps and counters the point reads.
type scaleLab struct {
	s        *session
	lbs      []*lb.Dataplane
	lbPorts  [][]lb.Port // by LB: its ports (e0, e1, internal)
	tables   []*lb.Table // by LB
	backends []*router.Dataplane
}

func (l *scaleLab) Close() { l.s.Close() }

// scalePoint measures one point.
func scalePoint(o ScaleOptions, n1, n2, ports int, progress io.Writer) (*sim.ScalePoint, error) {
	formula, limit := o.formula(n1, n2, ports)
	p := &sim.ScalePoint{LBs: n1, Backends: n2, InternalPorts: ports, FormulaPPS: formula, Limit: limit}
	var weights []float64
	for _, w := range o.backendWeights(n2) {
		weights = append(weights, float64(w))
	}
	p.Weights = fractions(weights)
	fmt.Fprintf(progress, "  %d LB × %d back-ends, %d internal port(s): bringing the lab up; ρmin %s\n", n1, n2, ports, ppsText(formula))
	l, err := openScaleLab(o, n1, n2, ports)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	top := 1_000_000.0
	if formula > 0 {
		top = min(top, 1.25*formula)
	}
	s, err := NewSearch(SearchConfig{Max: top, Start: min(top, formula), Resolution: o.Resolution, Trials: o.Trials, Goals: []Goal{NDR}, MaxTrials: o.MaxTrials})
	if err != nil {
		return nil, err
	}
	for {
		rate, ok := s.Next()
		if !ok {
			break
		}
		length := o.Trial
		if s.Coarse() {
			length = coarseTrial(o.Trial)
		}
		t, err := l.s.trial(o.Size, rate, length)
		if err != nil {
			return nil, err
		}
		s.Add(t.lossRatio(), t.offeredPPS())
		fmt.Fprintf(progress, "  %d×%d×%d  offered %9.0f pps  loss %.6f  (%v)%s\n", n1, n2, ports, t.offeredPPS(), t.lossRatio(), length, t.behind())
	}
	g := s.Results()[0]
	p.MeasuredPPS, p.Converged, p.Trials = g.OfferedPPS, g.Converged, s.TrialCount()
	if formula > 0 {
		p.Ratio = p.MeasuredPPS / formula
		p.Within10 = math.Abs(p.Ratio-1) <= 0.10
	}
	if p.Over, p.Shares, err = l.over(o, 1.1*p.MeasuredPPS); err != nil {
		return nil, err
	}
	explain(p)
	fmt.Fprintf(progress, "  %d×%d×%d  zero loss at %s, ρmin %s: %s\n", n1, n2, ports, ppsText(p.MeasuredPPS), ppsText(formula), p.Reason)
	return p, nil
}

// over runs a trial at rate (above the zero-loss rate) and reads what
// each element dropped at its cap, what was lost, and each back-end's
// share of what they routed.
func (l *scaleLab) over(o ScaleOptions, rate float64) (*sim.ScaleOver, []float64, error) {
	before, err := l.counters()
	if err != nil {
		return nil, nil, err
	}
	t, err := l.s.trial(o.Size, rate, o.Trial)
	if err != nil {
		return nil, nil, err
	}
	after, err := l.counters()
	if err != nil {
		return nil, nil, err
	}
	ov := &sim.ScaleOver{OfferedPPS: t.offeredPPS(), Lost: t.lost(), CapDrops: map[string]uint64{}}
	for k, v := range after.caps {
		if d := v - before.caps[k]; d > 0 {
			ov.CapDrops[k] = d
		}
	}
	var routed []float64
	for i := range after.routed {
		routed = append(routed, float64(after.routed[i]-before.routed[i]))
	}
	return ov, fractions(routed), nil
}

// fractions divides each of xs by their sum, in place (all 0 if it is).
func fractions(xs []float64) []float64 {
	var total float64
	for _, x := range xs {
		total += x
	}
	for i := range xs {
		if total > 0 {
			xs[i] /= total
		}
	}
	return xs
}

// scaleCounters are the elements' cap drops (by element name) and each
// back-end's routed frames.
type scaleCounters struct {
	caps   map[string]uint64
	routed []uint64
}

func (l *scaleLab) counters() (*scaleCounters, error) {
	c := &scaleCounters{caps: map[string]uint64{}}
	for i, dp := range l.lbs {
		name := fmt.Sprintf("lb%d", i+1)
		for _, p := range l.lbPorts[i] {
			st, err := dp.Stats(p.Index)
			if err != nil {
				return nil, err
			}
			c.caps[name] += st.Drops["cap"]
			// A port cap is counted on the ingress port: name the
			// LB's internal ports' caps together.
			c.caps[name+" internal ports"] += st.Drops["port_cap"]
		}
	}
	for j, dp := range l.backends {
		st, err := dp.Stats(0)
		if err != nil {
			return nil, err
		}
		c.caps[fmt.Sprintf("r%d", j+1)] = st.Drops["cap"]
		c.routed = append(c.routed, st.Forwarded)
	}
	return c, nil
}

// explain says what limits a point, from the over trial: the elements
// whose caps dropped, or the machine (frames lost beyond what the caps
// dropped: veth rings overflowing on the two shared cores).
func explain(p *sim.ScalePoint) {
	var capped uint64
	var names []string
	for k, v := range p.Over.CapDrops {
		capped += v
		names = append(names, k)
	}
	slices.Sort(names)
	machineLost := int64(p.Over.Lost) - int64(capped)
	switch {
	case p.FormulaPPS == 0:
		p.Reason = fmt.Sprintf("nothing capped: the machine's limit (%d frames lost a tenth above it)", p.Over.Lost)
	case p.Within10:
		p.Reason = fmt.Sprintf("the caps: a tenth above, %s dropped %d of %d lost", strings.Join(names, ", "), capped, p.Over.Lost)
	case p.Over.Lost == 0:
		p.Limit = "machine"
		p.Reason = fmt.Sprintf("short of ρmin by %.0f%%: the search's trials lost frames sporadically below it, and one a tenth above (%s offered) lost none: the lab's rings on two shared cores, not the caps",
			100*(1-p.Ratio), ppsText(p.Over.OfferedPPS))
	case machineLost <= 0:
		p.Limit = "uneven"
		p.Reason = fmt.Sprintf("short of ρmin by %.0f%%, and a tenth above only caps dropped (%s): the capped elements were loaded unevenly",
			100*(1-p.Ratio), strings.Join(names, ", "))
	default:
		p.Limit = "machine"
		p.Reason = fmt.Sprintf("short of ρmin by %.0f%%: a tenth above, %d of %d lost frames were not the caps' (the lab's veth rings on two shared cores)",
			100*(1-p.Ratio), machineLost, p.Over.Lost)
	}
}

// openScaleLab brings a point's lab up, with its sink on every sink port,
// the data paths loaded and capped, and the switch taught where each MAC
// is.
func openScaleLab(o ScaleOptions, n1, n2, ports int) (*scaleLab, error) {
	spec, err := lab.Load("scale", []byte(scaleLabYAML(n1, n2, ports)))
	if err != nil {
		return nil, err
	}
	awake, err := upLab(spec)
	if err != nil {
		return nil, err
	}
	l := &scaleLab{s: &session{o: FwdOptions{Flows: o.Flows, Size: o.Size}, spec: spec, undo: func() {}, awake: awake,
		gen: lab.Endpoint{Node: "gen", Iface: "g1"}, sinkEnd: lab.Endpoint{Node: "sink", Iface: "s1"}}}
	fail := func(err error) (*scaleLab, error) {
		l.Close()
		return nil, err
	}
	err = netns.Do(lab.Namespace(spec.Name, "sink"), func() (err error) {
		if l.s.sink, err = traffic.NewSink("s1", o.Flows); err != nil {
			return err
		}
		for i := 2; i <= n1; i++ {
			if err := l.s.sink.Attach(fmt.Sprintf("s%d", i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fail(err)
	}
	if err := l.load(o, n1, n2, ports); err != nil {
		return fail(err)
	}
	if err := l.teachSwitch(n1, n2); err != nil {
		return fail(err)
	}
	// The flows: flow k leaves by LB (k mod N1)+1's generator port, to a
	// destination behind that LB's sink port.
	for i := 1; i <= n1; i++ {
		m, err := macs(spec, lab.Endpoint{Node: fmt.Sprintf("lb%d", i), Iface: "e0"})
		if err != nil {
			return fail(err)
		}
		gp := traffic.GenPort{Ifname: fmt.Sprintf("g%d", i), DstMAC: m[0]}
		if ports > 1 {
			gp.SrcMACs = l.tables[i-1].EvenSources(byte(i), ports, scaleHosts)
		}
		l.s.ports = append(l.s.ports, gp)
	}
	l.s.dstMAC = l.s.ports[0].DstMAC
	per := (o.Flows + n1 - 1) / n1
	for k := range per * n1 {
		i, h := k%n1+1, k/n1
		l.s.dsts = append(l.s.dsts, netip.AddrFrom4([4]byte{198, 19, byte(i), byte(1 + h%250)}))
	}
	if l.s.last, err = l.s.sink.Read(); err != nil {
		return fail(err)
	}
	runtime.GC()
	return l, nil
}

// load loads every LB's and back-end's data path, with the caps.
func (l *scaleLab) load(o ScaleOptions, n1, n2, ports int) error {
	spec := l.s.spec
	var d dataPaths
	l.s.undo = d.undo
	var ends []lab.Endpoint
	for j := 1; j <= n2; j++ {
		ends = append(ends, lab.Endpoint{Node: fmt.Sprintf("r%d", j), Iface: "r0"})
	}
	for i := 1; i <= n1; i++ {
		ends = append(ends, lab.Endpoint{Node: "sink", Iface: fmt.Sprintf("s%d", i)})
	}
	m, err := macs(spec, ends...)
	if err != nil {
		return err
	}
	backendMACs, sinkMACs := m[:n2], m[n2:]
	for i := 1; i <= n1; i++ {
		set := []lbPort{
			{"e0", lb.RoleExternal, uint16(100 + i), netip.AddrFrom4([4]byte{10, 1, byte(i), 1})},
			{"e1", lb.RoleExternal, uint16(200 + i), netip.AddrFrom4([4]byte{10, 2, byte(i), 1})},
		}
		for k := range ports {
			set = append(set, lbPort{fmt.Sprintf("i%d", k), lb.RoleInternal, 0, netip.Addr{}})
		}
		var dp *lb.Dataplane
		var lp []lb.Port
		var t *lb.Table
		err := netns.Do(lab.Namespace(spec.Name, fmt.Sprintf("lb%d", i)), func() (err error) {
			mode, _ := lb.ParseMode(o.Mode)
			if dp, lp, t, err = d.loadLB(set, backendMACs, o.backendWeights(n2), mode); err != nil {
				return err
			}
			if err := dp.SetCap(lb.CapElement, o.CapLB); err != nil {
				return err
			}
			for _, p := range lp {
				if p.Role == lb.RoleInternal {
					if err := dp.SetCap(lb.CapPort+uint32(p.Index), o.CapPort); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("lb%d: %w", i, err)
		}
		l.lbs, l.lbPorts, l.tables = append(l.lbs, dp), append(l.lbPorts, lp), append(l.tables, t)
	}
	// Every back-end has every LB's two ports; LB I's sink is next hop I.
	var rports []router.Port
	var hops []benchHop
	table := map[netip.Prefix]uint32{}
	for i := 1; i <= n1; i++ {
		rports = append(rports,
			router.Port{Index: uint16(2*i - 2), VLAN: uint16(100 + i), MTU: 1500, Addr: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 1, byte(i), 1}), 24)},
			router.Port{Index: uint16(2*i - 1), VLAN: uint16(200 + i), MTU: 1500, Addr: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 2, byte(i), 1}), 24)})
		hops = append(hops, benchHop{netip.AddrFrom4([4]byte{10, 2, byte(i), 2}), 2*i - 1, sinkMACs[i-1]})
		table[netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, byte(i), 0}), 24)] = uint32(i)
	}
	for j := 1; j <= n2; j++ {
		var dp *router.Dataplane
		err := netns.Do(lab.Namespace(spec.Name, fmt.Sprintf("r%d", j)), func() (err error) {
			if dp, err = d.loadRouterHops("r0", rports, hops, table); err != nil {
				return err
			}
			return dp.SetCap(o.backendCap(j - 1))
		})
		if err != nil {
			return fmt.Errorf("r%d: %w", j, err)
		}
		l.backends = append(l.backends, dp)
	}
	return nil
}

// teachSwitch has the switch learn where every MAC the traffic is sent to
// is, before the traffic: each back-end's (from its port) and each sink
// port's (from its LB's first internal port, where the LB sends what the
// back-ends route to it). The back-ends run no agent and the sinks send
// nothing, so the switch would otherwise flood every frame through the
// bridge, as a real switch floods until the hosts speak.
func (l *scaleLab) teachSwitch(n1, n2 int) error {
	spec := l.s.spec
	for j := 1; j <= n2; j++ {
		host := fmt.Sprintf("r%d", j)
		m, err := macs(spec, lab.Endpoint{Node: host, Iface: "r0"})
		if err != nil {
			return err
		}
		if err := sendFrom(spec, host, "r0", m[0]); err != nil {
			return err
		}
	}
	for i := 1; i <= n1; i++ {
		m, err := macs(spec, lab.Endpoint{Node: "sink", Iface: fmt.Sprintf("s%d", i)})
		if err != nil {
			return err
		}
		if err := sendFrom(spec, fmt.Sprintf("lb%d", i), "i0", m[0]); err != nil {
			return err
		}
	}
	// The switch's fast path learns from the frames' sources as they
	// cross it; give the last frame time to arrive.
	time.Sleep(50 * time.Millisecond)
	return nil
}

// sendFrom sends one broadcast frame with source src out of host's
// interface ifname (an EtherType nobody handles: every element drops it,
// and the switch learns src).
func sendFrom(spec *lab.Spec, host, ifname string, src net.HardwareAddr) error {
	return netns.Do(lab.Namespace(spec.Name, host), func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		frame := make([]byte, 60)
		copy(frame, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
		copy(frame[6:], src)
		frame[12], frame[13] = 0x88, 0xb6 // IEEE 802 Local Experimental Ethertype 2
		return sendRaw(ifi.Index, frame)
	})
}

// scaleLabYAML writes the lab of a point (see the top of this file).
func scaleLabYAML(n1, n2, ports int) string {
	var b strings.Builder
	fast := "{gro: on, threaded: on, vlan_offload: off}"
	b.WriteString("# msr bench scale's lab (bench/scale.go), generated.\nname: scale\nhosts:\n  gen:\n    interfaces:\n")
	for i := 1; i <= n1; i++ {
		fmt.Fprintf(&b, "      g%d: {mac: \"02:00:0b:01:%02x:02\", tx_checksum: off}\n", i, i)
	}
	for i := 1; i <= n1; i++ {
		fmt.Fprintf(&b, "  lb%d:\n    interfaces:\n", i)
		fmt.Fprintf(&b, "      e0: {mac: \"02:00:0b:01:%02x:01\", gro: on, threaded: on}\n", i)
		fmt.Fprintf(&b, "      e1: {mac: \"02:00:0b:02:%02x:01\"}\n", i)
		for k := range ports {
			fmt.Fprintf(&b, "      i%d: {mac: \"02:00:0b:03:%02x:%02x\", gro: on, threaded: on, vlan_offload: off}\n", k, i, k)
		}
	}
	for j := 1; j <= n2; j++ {
		fmt.Fprintf(&b, "  r%d:\n    interfaces:\n      r0: {mac: \"02:00:0b:04:%02x:01\", gro: on, threaded: on, vlan_offload: off}\n", j, j)
	}
	b.WriteString("  sink:\n    interfaces:\n")
	for i := 1; i <= n1; i++ {
		fmt.Fprintf(&b, "      s%d: {mac: \"02:00:0b:02:%02x:02\"}\n", i, i)
	}
	b.WriteString("switches:\n  sw:\n    xdp: on\n    interfaces:\n")
	for i := 1; i <= n1; i++ {
		for k := range ports {
			fmt.Fprintf(&b, "      l%dp%d: %s\n", i, k, fast)
		}
	}
	for j := 1; j <= n2; j++ {
		fmt.Fprintf(&b, "      b%d: %s\n", j, fast)
	}
	b.WriteString("links:\n")
	for i := 1; i <= n1; i++ {
		fmt.Fprintf(&b, "  - ends: [gen:g%d, lb%d:e0]\n  - ends: [lb%d:e1, sink:s%d]\n", i, i, i, i)
		for k := range ports {
			fmt.Fprintf(&b, "  - ends: [lb%d:i%d, sw:l%dp%d]\n", i, k, i, k)
		}
	}
	for j := 1; j <= n2; j++ {
		fmt.Fprintf(&b, "  - ends: [r%d:r0, sw:b%d]\n", j, j)
	}
	return b.String()
}

// ppsText writes a rate for people: "50,000 pps", or "–" for none.
func ppsText(pps float64) string {
	if pps <= 0 {
		return "–"
	}
	return commas(uint64(math.Round(pps))) + " pps"
}

// commas writes n with thousands separators.
func commas(n uint64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// WriteText writes the points as a table.
func (r *ScaleResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "msr bench scale, %s, %d B, %d flows, caps: LB %s, internal port %s, back-end %s; %.0f s\n", r.Options.Mode, r.Options.Size, r.Options.Flows,
		capText(r.Options.CapLB), capText(r.Options.CapPort), capsText(r.Options.CapBackend), r.Seconds)
	fmt.Fprintf(w, "%4s %4s %5s %12s %12s %7s %-13s %s\n", "N1", "N2", "PORTS", "MEASURED", "ρMIN", "RATIO", "LIMIT", "WHY")
	for _, p := range r.Points {
		ratio := "–"
		if p.FormulaPPS > 0 {
			ratio = fmt.Sprintf("%.3f", p.Ratio)
		}
		fmt.Fprintf(w, "%4d %4d %5d %12.0f %12.0f %7s %-13s %s\n", p.LBs, p.Backends, p.InternalPorts, p.MeasuredPPS, p.FormulaPPS, ratio, p.Limit, p.Reason)
	}
}

// capsText writes the back-ends' caps.
func capsText(caps []uint64) string {
	if len(caps) == 0 {
		return "none"
	}
	var parts []string
	for _, c := range caps {
		parts = append(parts, capText(c))
	}
	return strings.Join(parts, ", ")
}

func capText(pps uint64) string {
	if pps == 0 {
		return "none"
	}
	return commas(pps) + " pps"
}

// sendRaw sends one frame out of the interface ifindex, in the calling
// thread's namespace.
func sendRaw(ifindex int, frame []byte) error {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("AF_PACKET socket: %w", err)
	}
	defer unix.Close(fd)
	return unix.Sendto(fd, frame, 0, &unix.SockaddrLinklayer{Ifindex: ifindex, Halen: 6})
}

// Plots draws the run's figures into dir: the zero-loss rate measured and
// ρmin against N2, a pair of lines per (N1, n); and against N1 per (N2,
// n) where the run has several N1.
func (r *ScaleResult) Plots(dir string) ([]Plot, error) {
	o := r.Options
	var figs []*figure
	against := func(file, title, x string, key func(sim.ScalePoint) (group string, groupIdx int, xv int)) error {
		f := newFigure(file, title, x, "zero-loss throughput (frames per second)")
		f.p.Legend.Left = true // the lines rise to the right
		f.p.Y.Min = 0
		measured, formula := map[string]plotter.XYs{}, map[string]plotter.XYs{}
		idx := map[string]int{}
		var groups []string
		for _, p := range r.Points {
			g, gi, xv := key(p)
			if _, ok := idx[g]; !ok {
				idx[g] = gi
				groups = append(groups, g)
			}
			measured[g] = append(measured[g], plotter.XY{X: float64(xv), Y: p.MeasuredPPS})
			if p.FormulaPPS > 0 {
				formula[g] = append(formula[g], plotter.XY{X: float64(xv), Y: p.FormulaPPS})
			}
		}
		for _, g := range groups {
			if err := f.lineColored("measured, "+g, sizeColor(idx[g]), measured[g], false); err != nil {
				return err
			}
			if err := f.lineColored("ρmin, "+g, sizeColor(idx[g]), formula[g], true); err != nil {
				return err
			}
		}
		figs = append(figs, f)
		return nil
	}
	err := against("scale_backends.png", "Zero-loss throughput against the back-ends (N2), beside ρmin", "back-ends (N2)",
		func(p sim.ScalePoint) (string, int, int) {
			return fmt.Sprintf("N1 = %d, %d port(s)", p.LBs, p.InternalPorts), slices.Index(o.LBs, p.LBs)*len(o.InternalPorts) + slices.Index(o.InternalPorts, p.InternalPorts), p.Backends
		})
	if err == nil && len(o.LBs) > 1 {
		err = against("scale_lbs.png", "Zero-loss throughput against the LBs (N1), beside ρmin", "LBs (N1)",
			func(p sim.ScalePoint) (string, int, int) {
				return fmt.Sprintf("N2 = %d, %d port(s)", p.Backends, p.InternalPorts), slices.Index(o.Backends, p.Backends)*len(o.InternalPorts) + slices.Index(o.InternalPorts, p.InternalPorts), p.LBs
			})
	}
	if err != nil {
		return nil, err
	}
	return saveFigures(dir, figs)
}

// WriteReport writes report.json, the plots and report.md into dir.
func (r *ScaleResult) WriteReport(dir, command string) error {
	return writeReport(r, dir, "Scale-out: ρmin", command, r.Machine)
}

func (r *ScaleResult) setFigures(p []Plot) { r.Figures = p }
