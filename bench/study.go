package bench

import (
	"fmt"
	"io"
	"math"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/internal/routetable"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/labs"
	"github.com/msr-router/msr/lb"
	"github.com/msr-router/msr/router"
	"github.com/msr-router/msr/traffic"
)

// StudyOptions is `msr bench study`: the load study of single, star and
// multistage routers. Two sources and two sinks, as four test machines, around a single Linux
// router (§III), a star of four Linux forwarders (§IV, Fig. 6) or msr (the
// multistage router of §V); frame sizes, table sizes and flows as the
// seed's; the forwarded rate against the offered load, as its Figs. 3-5
// and 7-9 plot it.
type StudyOptions struct {
	Topologies []string
	Sizes      []int
	FIBs       []string // table sizes: a number of prefixes, or pyasn
	// Flows are "1" (one source to one sink), "2" (each
	// source to its own sink), "many" (ManyFlows flows from both
	// sources to random destinations over the table).
	Flows     []string
	ManyFlows int
	// Steps is how many offered loads a curve has, geometric from a
	// 32nd of the instrument's ceiling to the ceiling.
	Steps int
	Trial time.Duration
}

// StudyTopologies and StudyFlows are what the options take.
var (
	StudyTopologies = []string{"single", "star", "multistage"}
	StudyFlows      = []string{"1", "2", "many"}
)

// StudyResult is a study: every curve, beside the instrument's ceiling of
// the same run, and the study's observations checked against them.
type StudyResult struct {
	Options      StudyOptions    `json:"options"`
	CeilingPPS   map[int]float64 `json:"ceiling_pps"`
	Curves       []StudyCurve    `json:"curves"`
	Observations []Observation   `json:"observations"`
	Machine      string          `json:"machine"`
	Seconds      float64         `json:"seconds"`
	Figures      []Plot          `json:"figures,omitempty"`
}

// StudyCurve is one topology's forwarded rate against the offered load,
// at one frame size, table size and flow set.
type StudyCurve struct {
	Topology string       `json:"topology"`
	Size     int          `json:"size"`
	FIB      string       `json:"fib"`
	Routes   int          `json:"routes"`
	Flows    string       `json:"flows"`
	Points   []StudyPoint `json:"points"`
	PeakPPS  float64      `json:"peak_pps"` // the most it forwarded
	// TTL is what the sinks saw of the generator's 64: each router on
	// the way takes one.
	TTL uint8 `json:"ttl"`
}

// StudyPoint is one offered load of a curve.
type StudyPoint struct {
	OfferedPPS   float64 `json:"offered_pps"`
	ForwardedPPS float64 `json:"forwarded_pps"`
	LossRatio    float64 `json:"loss_ratio"`
}

// An Observation is one of the study's expected findings, and whether
// this run bears it out.
type Observation struct {
	Claim    string `json:"claim"`
	Holds    bool   `json:"holds"`
	Evidence string `json:"evidence"`
}

func (o *StudyOptions) complete() error {
	if len(o.Topologies) == 0 || len(o.Sizes) == 0 || len(o.FIBs) == 0 || len(o.Flows) == 0 {
		return fmt.Errorf("study: name the topologies, frame sizes, tables and flows")
	}
	for _, t := range o.Topologies {
		if !slices.Contains(StudyTopologies, t) {
			return fmt.Errorf("study: topology %q: use %v", t, StudyTopologies)
		}
	}
	for _, f := range o.Flows {
		if !slices.Contains(StudyFlows, f) {
			return fmt.Errorf("study: flows %q: use %v", f, StudyFlows)
		}
	}
	if o.ManyFlows == 0 {
		o.ManyFlows = 1000
	}
	if o.Steps < 2 || o.Trial <= 0 {
		return fmt.Errorf("study: at least 2 steps and a positive trial length")
	}
	return nil
}

// studyLab is each topology's lab file.
var studyLab = map[string]string{"single": "study-single", "star": "study-star", "multistage": "study-msr"}

// Study runs the study. Per table size, every topology's lab comes up with
// that table, beside the instrument alone; then, per frame size and flow
// set, each offered load is tried on every topology in turn (interleaved,
// as the machine's noise asks).
func Study(o StudyOptions, progress io.Writer) (*StudyResult, error) {
	start := time.Now()
	if err := o.complete(); err != nil {
		return nil, err
	}
	res := &StudyResult{Options: o, CeilingPPS: map[int]float64{}, Machine: machine()}
	none, err := openSession(FwdOptions{DUT: "none", Size: o.Sizes[0], Flows: o.ManyFlows, Duration: o.Trial})
	if err != nil {
		return nil, err
	}
	defer none.Close()
	for _, size := range o.Sizes {
		t, err := none.trial(size, 0, o.Trial)
		if err != nil {
			return nil, fmt.Errorf("the instrument's ceiling: %w", err)
		}
		res.CeilingPPS[size] = t.receivedPPS()
		fmt.Fprintf(progress, "size %d: the instrument carries %.0f pps\n", size, res.CeilingPPS[size])
	}
	for _, fib := range o.FIBs {
		routes, err := routetable.Named(fib)
		if err != nil {
			return nil, err
		}
		sessions := map[string]*session{}
		closeAll := func() {
			for _, s := range sessions {
				s.Close()
			}
		}
		for _, topo := range o.Topologies {
			s, err := openStudy(topo, routes, o.ManyFlows)
			if err != nil {
				closeAll()
				return nil, fmt.Errorf("%s: %w", topo, err)
			}
			sessions[topo] = s
		}
		curves, err := studyCurves(o, sessions, fib, len(routes), res.CeilingPPS, progress)
		closeAll()
		if err != nil {
			return nil, err
		}
		res.Curves = append(res.Curves, curves...)
	}
	res.Observations = observe(res)
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// studyCurves sweeps the offered load for every size and flow set, the
// topologies interleaved at each load.
func studyCurves(o StudyOptions, sessions map[string]*session, fib string, routes int, ceiling map[int]float64, progress io.Writer) ([]StudyCurve, error) {
	var out []StudyCurve
	for _, size := range o.Sizes {
		for _, flows := range o.Flows {
			curves := map[string]*StudyCurve{}
			for _, topo := range o.Topologies {
				curves[topo] = &StudyCurve{Topology: topo, Size: size, FIB: fib, Routes: routes, Flows: flows}
			}
			for k := 0; k < o.Steps; k++ {
				rate := ceiling[size] * math.Pow(32, float64(k-(o.Steps-1))/float64(o.Steps-1))
				for _, topo := range o.Topologies {
					s := sessions[topo]
					s.aim(flows, o.ManyFlows)
					t, err := s.trial(size, rate, o.Trial)
					if err != nil {
						return nil, fmt.Errorf("%s: %w", topo, err)
					}
					c := curves[topo]
					p := StudyPoint{OfferedPPS: t.offeredPPS(), ForwardedPPS: t.receivedPPS(), LossRatio: t.lossRatio()}
					c.Points = append(c.Points, p)
					c.PeakPPS = max(c.PeakPPS, p.ForwardedPPS)
					if t.rep.TTLMin != 0 {
						c.TTL = t.rep.TTLMin
					}
					fmt.Fprintf(progress, "  %-10s %4d B  %s routes  %4s flows  offered %9.0f  forwarded %9.0f  TTL %d\n",
						topo, size, fib, flows, p.OfferedPPS, p.ForwardedPPS, t.rep.TTLMin)
				}
			}
			for _, topo := range o.Topologies {
				out = append(out, *curves[topo])
			}
		}
	}
	return out, nil
}

// The study's destinations: the first source's outside every table (each
// topology's default takes it to the first sink), the second's to
// 198.19.1.0/24 (to the second sink).
var (
	studyDst0 = netip.MustParseAddr("198.19.0.1")
	studyDst1 = netip.MustParseAddr("198.19.1.1")
)

// aim sets the next trials' flows: one flow (the first source
// to the first sink), two (each source to its sink), or many (from both
// sources, to random destinations over the table).
func (s *session) aim(flows string, many int) {
	switch flows {
	case "1":
		s.o.Flows, s.dsts, s.ports = 1, []netip.Addr{studyDst0}, s.studyPorts[:1]
	case "2":
		s.o.Flows, s.dsts, s.ports = 2, []netip.Addr{studyDst0, studyDst1}, s.studyPorts
	default:
		s.o.Flows, s.dsts, s.ports = many, flowDsts(s.routes, many), s.studyPorts
	}
}

// openStudy brings up a topology's lab with the table, its sinks and (for
// msr) its data paths.
func openStudy(topo string, routes []netip.Prefix, flows int) (*session, error) {
	spec, err := labs.Load(studyLab[topo])
	if err != nil {
		return nil, err
	}
	awake, err := upLab(spec)
	if err != nil {
		return nil, err
	}
	s := &session{o: FwdOptions{Flows: flows}, spec: spec, routes: routes, undo: func() {}, awake: awake,
		gen: benchGen, sinkEnd: lab.Endpoint{Node: "sink", Iface: "s0"}}
	fail := func(err error) (*session, error) {
		s.Close()
		return nil, err
	}
	// The generator's ports, to whatever each is linked to.
	for _, g := range []string{"g0", "g1"} {
		peer, ok := spec.Peer(lab.Endpoint{Node: "gen", Iface: g})
		mac, ok2 := spec.MAC(peer)
		if !ok || !ok2 {
			return fail(fmt.Errorf("lab %s: gen:%s is not linked to an interface with a MAC", spec.Name, g))
		}
		s.studyPorts = append(s.studyPorts, traffic.GenPort{Ifname: g, DstMAC: mac})
	}
	s.dstMAC = s.studyPorts[0].DstMAC
	err = netns.Do(lab.Namespace(spec.Name, "sink"), func() (err error) {
		if s.sink, err = traffic.NewSink("s0", flows); err != nil {
			return err
		}
		return s.sink.Attach("s1")
	})
	if err != nil {
		return fail(err)
	}
	if err := studyTables(s, topo); err != nil {
		return fail(err)
	}
	if s.last, err = s.sink.Read(); err != nil {
		return fail(err)
	}
	return s, nil
}

// studyTables installs the table: in the single router, half via each
// sink; in the star, R3's via R2 and R4's via R1; in msr,
// the LB's and back-ends' data paths, each back-end's table half via each
// sink.
func studyTables(s *session, topo string) error {
	var b [2]strings.Builder
	switch topo {
	case "single":
		for i, p := range s.routes {
			fmt.Fprintf(&b[0], "route replace %s via 10.2.%d.2\n", p, i%2)
		}
		return ipBatch(s.spec, "r", b[0].String())
	case "star":
		for _, p := range s.routes {
			fmt.Fprintf(&b[0], "route replace %s via 10.0.0.2\n", p)
			fmt.Fprintf(&b[1], "route replace %s via 10.0.0.1\n", p)
		}
		if err := ipBatch(s.spec, "r3", b[0].String()); err != nil {
			return err
		}
		return ipBatch(s.spec, "r4", b[1].String())
	}
	undo, err := setupStudyMsr(s.spec, s.routes)
	if err != nil {
		return err
	}
	s.undo = undo
	return nil
}

// setupStudyMsr loads study-msr's data paths: the LB's (e0, e1 from the
// sources, e2, e3 to the sinks, i0 to the back-end) and the back-end's
// (the same four ports; next hop 1 the first sink, 2 the second; the
// table alternately via each, the default via the first, 198.19.1.0/24 via
// the second).
func setupStudyMsr(spec *lab.Spec, routes []netip.Prefix) (func(), error) {
	m, err := macs(spec, lab.Endpoint{Node: "sink", Iface: "s0"}, lab.Endpoint{Node: "sink", Iface: "s1"},
		lab.Endpoint{Node: "r1", Iface: "r0"})
	if err != nil {
		return nil, err
	}
	addr := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	var d dataPaths
	err = netns.Do(lab.Namespace(spec.Name, "lb"), func() error {
		_, err := d.loadHashLB([]lbPort{
			{"e0", lb.RoleExternal, 10, addr("10.1.0.1")},
			{"e1", lb.RoleExternal, 11, addr("10.1.1.1")},
			{"e2", lb.RoleExternal, 20, addr("10.2.0.1")},
			{"e3", lb.RoleExternal, 21, addr("10.2.1.1")},
			{"i0", lb.RoleInternal, 0, netip.Addr{}},
		}, m[2])
		return err
	})
	table := map[netip.Prefix]uint32{netip.MustParsePrefix("0.0.0.0/0"): 1, netip.MustParsePrefix("198.19.1.0/24"): 2}
	for i, p := range routes {
		table[p] = uint32(1 + i%2)
	}
	ports := []router.Port{
		{Index: 0, VLAN: 10, MTU: 1500, Addr: netip.MustParsePrefix("10.1.0.1/24")},
		{Index: 1, VLAN: 11, MTU: 1500, Addr: netip.MustParsePrefix("10.1.1.1/24")},
		{Index: 2, VLAN: 20, MTU: 1500, Addr: netip.MustParsePrefix("10.2.0.1/24")},
		{Index: 3, VLAN: 21, MTU: 1500, Addr: netip.MustParsePrefix("10.2.1.1/24")},
	}
	hops := []benchHop{{addr("10.2.0.2"), 2, m[0]}, {addr("10.2.1.2"), 3, m[1]}}
	if err == nil {
		err = netns.Do(lab.Namespace(spec.Name, "r1"), func() error {
			_, err := d.loadRouterHops("r0", ports, hops, table)
			return err
		})
	}
	if err != nil {
		d.undo()
		return nil, err
	}
	return d.undo, nil
}

// observe checks the study's expected findings against the curves.
func observe(r *StudyResult) []Observation {
	var out []Observation
	find := func(topo string, size int, fib, flows string) *StudyCurve {
		for i := range r.Curves {
			c := &r.Curves[i]
			if c.Topology == topo && c.Size == size && c.FIB == fib && c.Flows == flows {
				return c
			}
		}
		return nil
	}
	o := r.Options
	size, small, large := o.Sizes[0], o.FIBs[0], o.FIBs[len(o.FIBs)-1]
	// §IV.B double routing: TTL.
	want := map[string]uint8{"single": 63, "star": 62, "multistage": 63}
	for _, topo := range o.Topologies {
		c := find(topo, size, small, o.Flows[0])
		if c == nil {
			continue
		}
		out = append(out, Observation{
			Claim: fmt.Sprintf("%s decrements the TTL %d time(s) (the star routes every packet twice; the multistage router once)", topo, 64-int(want[topo])),
			Holds: c.TTL == want[topo], Evidence: fmt.Sprintf("the sinks saw TTL %d of the generator's 64", c.TTL)})
	}
	// §IV.A: two flows nearly double the star's throughput over one.
	if one, two := find("star", size, small, "1"), find("star", size, small, "2"); one != nil && two != nil && one.PeakPPS > 0 {
		ratio := two.PeakPPS / one.PeakPPS
		out = append(out, Observation{
			Claim: "two flows almost double the star's throughput over one (the two flows do not mix)",
			Holds: ratio >= 1.5, Evidence: fmt.Sprintf("%d B, %s routes: peak %.0f pps with one flow, %.0f with two (×%.2f); every forwarder here shares one core", size, small, one.PeakPPS, two.PeakPPS, ratio)})
	}
	// §III.C and §IV.A: a larger table lowers throughput with many flows.
	if small != large {
		for _, topo := range o.Topologies {
			a, b := find(topo, size, small, "many"), find(topo, size, large, "many")
			if a == nil || b == nil || a.PeakPPS == 0 {
				continue
			}
			ratio := b.PeakPPS / a.PeakPPS
			out = append(out, Observation{
				Claim: fmt.Sprintf("%s: a larger table lowers throughput with many flows", topo),
				Holds: ratio < 0.95, Evidence: fmt.Sprintf("%d B, many flows: peak %.0f pps with %s routes, %.0f with %s (×%.2f)", size, a.PeakPPS, small, b.PeakPPS, large, ratio)})
		}
	}
	// §V: the multistage router performs at least as the star.
	for _, fib := range o.FIBs {
		a, b := find("star", size, fib, "many"), find("multistage", size, fib, "many")
		if a == nil || b == nil || a.PeakPPS == 0 {
			continue
		}
		out = append(out, Observation{
			Claim: fmt.Sprintf("the multistage router forwards at least what the star does, %s routes, many flows", fib),
			Holds: b.PeakPPS >= a.PeakPPS, Evidence: fmt.Sprintf("%d B: peak %.0f pps (star), %.0f (multistage)", size, a.PeakPPS, b.PeakPPS)})
	}
	return out
}

// WriteText prints the curves' peaks and the observations.
func (r *StudyResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "Seed 001's study, %d offered loads a curve, trials of %v; %.0f s\n", r.Options.Steps, r.Options.Trial, r.Seconds)
	fmt.Fprintf(w, "%-10s %5s %8s %5s %12s %4s  %s\n", "TOPOLOGY", "SIZE", "ROUTES", "FLOWS", "PEAK PPS", "TTL", "FORWARDED AT EACH OFFERED LOAD (kpps)")
	for _, c := range r.Curves {
		var pts []string
		for _, p := range c.Points {
			pts = append(pts, fmt.Sprintf("%.0f:%.0f", p.OfferedPPS/1e3, p.ForwardedPPS/1e3))
		}
		fmt.Fprintf(w, "%-10s %5d %8d %5s %12.0f %4d  %s\n", c.Topology, c.Size, c.Routes, c.Flows, c.PeakPPS, c.TTL, strings.Join(pts, " "))
	}
	fmt.Fprintln(w, "\nSeed 001's observations, here:")
	for _, o := range r.Observations {
		mark := "holds"
		if !o.Holds {
			mark = "does not hold"
		}
		fmt.Fprintf(w, "  %s: %s (%s)\n", mark, o.Claim, o.Evidence)
	}
}

// WriteReport writes report.json, the plots and report.md into dir.
func (r *StudyResult) WriteReport(dir, command string) error {
	return writeReport(r, dir, "Seed 001's study", command, r.Machine)
}

func (r *StudyResult) setFigures(p []Plot) { r.Figures = p }
