package soak

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/msr-router/msr/bench"
	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/router/routerapi"
	"github.com/msr-router/msr/traffic"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// The large lab's soak (msr soak --size large): the router of 16 LBs × 4
// external ports under the instrument's accounted traffic, its LBs' hosts
// dying and coming back. The generator sends from lb1/e1's host, its flows
// spread over every other port's host (largeFlowsPerPort each; IPv4 and
// IPv6 in turn), and the sink on each host counts what reaches it. A
// quiet step must lose nothing. A fault step kills one LB's host (lb2 to
// lb16, drawn by the seed: lb1 carries the generator) soakFaultAt into
// it, keeps it dead for lbHostHold and brings it back: only the flows to
// its ports may lose frames, every other flow none. After each fault the
// router must converge again within largeRepairWithin (an LB with a BGP
// peer waits for BIRD's error wait time, 60 s, before the session is
// tried again).

// LargeDefaultRate is the large soak's traffic when none is asked, frames
// a second: 8 a second for each of its 504 flows, what the generator,
// beside the large lab's 26 agents on two cores, offers on its schedule.
const LargeDefaultRate = 4000

// LargeFaultKinds are the faults the large lab's soak draws from.
var LargeFaultKinds = []string{"lb-host"}

const (
	// lbHostHold is how long a dead LB stays dead: past the VCP's grace
	// for a silent LB (4 s), so that its ports go down as a line card's.
	lbHostHold = 6 * time.Second
	// lbHostTail is the traffic after it came back: its ports carry again.
	lbHostTail        = 4 * time.Second
	largeFlowsPerPort = 8
	largeRepairWithin = 3 * time.Minute
)

// largeGen is the port the large soak's generator sends into.
var largeGen = demo.LargePort{LB: 1, Port: 1, Host: "h1e1"}

// A largeSoak is the large lab's soak under way.
type largeSoak struct {
	o        Options
	lab      *bench.RouterLab
	plan     *demo.LargePlan
	progress io.Writer
	rng      *rand.Rand
	rate     float64
	dsts     []demo.LargePort // flow i goes to dsts[i%len(dsts)]
	procs    map[string]int
	start    time.Time
	rep      *Report
	inv      *invariants
}

// RunLarge runs the large lab's soak and returns its report; an error is
// a soak that could not run, not one that failed (InvariantsOK false).
func RunLarge(o Options, progress io.Writer) (rep *Report, err error) {
	if o.Duration < 30*time.Second {
		return nil, fmt.Errorf("soak: --duration of 30s at least")
	}
	if o.Faults == nil {
		o.Faults = LargeFaultKinds
	}
	for _, f := range o.Faults {
		if !slices.Contains(LargeFaultKinds, f) {
			return nil, fmt.Errorf("soak: fault %q: the large lab's soak injects %s", f, strings.Join(LargeFaultKinds, ", "))
		}
	}
	if o.Rate == 0 {
		o.Rate = LargeDefaultRate
	}
	fmt.Fprintf(progress, "soak: bringing up the large lab\n")
	suiteLogs := suiteLogSizes(demo.LargeRunDir)
	s := &largeSoak{o: o, progress: progress, rng: rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15)),
		inv: newInvariants("no_loss_outside_faults", "lb_host_only_its_ports", "no_duplicates", "one_hop", "repaired", "no_process_leak")}
	flows := (demo.LargeLBs*demo.LargePortsPerLB - 1) * largeFlowsPerPort // to every port but the generator's
	if s.lab, s.plan, err = bench.OpenLargeLab(o.MSRBin, flows, largeGen); err != nil {
		return nil, err
	}
	defer s.lab.Close()
	for _, p := range s.plan.Ports {
		if p.Host != largeGen.Host {
			s.dsts = append(s.dsts, p)
		}
	}
	defer func() {
		if err != nil || !rep.InvariantsOK || o.LogsDir != "" {
			keepLabLogs(demo.LargeLab, demo.LargeRunDir, o.LogsDir, suiteLogs, progress)
		}
	}()
	s.family(false)
	if s.rate, err = s.steadyRate(o.Rate); err != nil {
		return nil, err
	}
	if s.procs, err = processesOf(demo.LargeLab); err != nil {
		return nil, err
	}
	s.rep = &Report{Lab: demo.LargeLab, Seed: o.Seed, RatePPS: s.rate, Invariants: map[string]Invariant{}, Faults: []FaultReport{}, NotYet: []string{}}
	s.start = time.Now()
	for n := 0; time.Since(s.start)+soakStep < o.Duration || n == 0; n++ {
		if err := s.step(n); err != nil {
			return nil, err
		}
	}
	return s.finish(), nil
}

// steadyRate is the rate, at most rate and halved from it, at which a
// second's trial loses nothing. The generator shares two cores with 26
// agents here and falls short of its schedule above a few thousand frames
// a second: what it offered is said, not asked of it.
func (s *largeSoak) steadyRate(rate float64) (float64, error) {
	for range 4 {
		t, err := s.lab.Send(traffic.MinFrameSize, rate, func(g *traffic.Generator) (uint64, error) { return g.Blast(time.Second) })
		if err != nil {
			return 0, err
		}
		fmt.Fprintf(s.progress, "soak: the large router at %.0f pps for a second: sent %d, lost %d\n", rate, t.Sent, t.Lost())
		if t.Lost() == 0 {
			return rate, nil
		}
		rate /= 2
	}
	return 0, fmt.Errorf("the large router lost frames at every rate down to %.0f pps", 2*rate)
}

// family makes the flows IPv6 or IPv4, each to its port's host.
func (s *largeSoak) family(ipv6 bool) {
	addrs := make([]netip.Addr, len(s.dsts))
	for i, p := range s.dsts {
		addrs[i] = p.HostAddr
		if ipv6 {
			addrs[i] = p.HostAddr6
		}
	}
	s.lab.SetDestinations(ipv6, addrs)
}

// step runs step n: every other one an LB's host dies in it.
func (s *largeSoak) step(n int) error {
	ipv6 := n%4 >= 2
	s.family(ipv6)
	at := time.Since(s.start)
	var f *lbHostFault
	length := soakStep
	if n%2 == 1 {
		f = &lbHostFault{lb: 2 + s.rng.IntN(s.plan.LBs-1)}
		length = soakFaultAt + lbHostHold + lbHostTail
	}
	// The fault runs beside the traffic, from its first frame.
	var faulted chan error
	size := traffic.MinFrameSize
	if ipv6 {
		size = traffic.MinFrameSize6
	}
	trial, err := s.lab.Send(size, s.rate, func(g *traffic.Generator) (uint64, error) {
		if f != nil {
			faulted = make(chan error, 1)
			go func() { faulted <- f.run(s.plan) }()
		}
		return g.Blast(length)
	})
	if faulted != nil {
		err = errors.Join(err, <-faulted)
	}
	if err != nil {
		return err
	}
	counts, err := s.lab.FlowCounts()
	if err != nil {
		return err
	}
	st := Step{AtS: at.Seconds(), TrafficS: length.Seconds(), Family: familyName(ipv6), Sent: trial.Sent, Received: trial.Sink.RxPackets,
		Lost: trial.Lost(), Duplicated: trial.Sink.Duplicated, Reordered: trial.Sink.Reordered, BeyondWindow: trial.Sink.BeyondWindow}
	lost := s.lostByLB(counts, trial.Sent)
	s.judgeCommon(&st, trial)
	if f == nil {
		if st.Lost > 0 {
			s.inv.broke("no_loss_outside_faults", "step at %.0f s lost %d frames (%s)", st.AtS, st.Lost, lostText(lost))
		}
		s.rep.Steps = append(s.rep.Steps, st)
		fmt.Fprintf(s.progress, "soak: %5.0f s  %s  sent %d, lost %d\n", st.AtS, st.Family, st.Sent, st.Lost)
		return nil
	}
	st.Fault = f.name()
	s.rep.Steps = append(s.rep.Steps, st)
	return s.judgeFault(f, st, lost, trial)
}

// judgeCommon checks what every step must show: no frame twice, and every
// frame one router hop from the generator (TTL 63).
func (s *largeSoak) judgeCommon(st *Step, trial *bench.Trial) {
	s.rep.Sent += st.Sent
	s.rep.Received += st.Received
	s.rep.Duplicated += st.Duplicated
	s.rep.BeyondWindow += st.BeyondWindow
	if st.Duplicated > 0 {
		s.inv.broke("no_duplicates", "step at %.0f s: %d frames twice", st.AtS, st.Duplicated)
	}
	if trial.Sink.RxPackets > 0 && (trial.Sink.TTLMin != 63 || trial.Sink.TTLMax != 63) {
		s.inv.broke("one_hop", "step at %.0f s: TTL %d to %d, want 63 (one router)", st.AtS, trial.Sink.TTLMin, trial.Sink.TTLMax)
	}
}

// judgeFault judges a fault step: only the dead LB's flows lost frames,
// its ports went down and their routes left every back-end while it was
// dead, they came back, and the router converged again.
func (s *largeSoak) judgeFault(f *lbHostFault, st Step, lost map[int]uint64, trial *bench.Trial) error {
	var other []string
	for l, n := range lost {
		if l != f.lb && n > 0 {
			other = append(other, fmt.Sprintf("lb%d %d", l, n))
		}
	}
	slices.Sort(other)
	fr := FaultReport{Kind: "lb-host", Target: fmt.Sprintf("lb%d", f.lb), Family: st.Family, AtS: st.AtS + soakFaultAt.Seconds(),
		LostPackets: lost[f.lb], OutageMS: ms(trial.Sink.LossSpan), Goal: fmt.Sprintf("only lb%d's ports' flows lost; its ports down and their routes withdrawn within %v, up again after", f.lb, lbHostHold),
		PortsDownMS: ms(f.portsDown), WithdrawnMS: ms(f.withdrawn), RestoredMS: ms(f.portsUp)}
	fr.Met = len(other) == 0 && f.portsDown > 0 && f.withdrawn > 0 && f.portsUp > 0
	if len(other) > 0 {
		s.inv.broke("lb_host_only_its_ports", "lb%d died at %.0f s: other LBs' flows lost frames (%s)", f.lb, fr.AtS, strings.Join(other, ", "))
	}
	repairStart := time.Now()
	if err := s.lab.Converge(); err != nil {
		s.inv.broke("repaired", "after lb%d died at %.0f s: %v", f.lb, fr.AtS, err)
		fr.Met = false
		s.rep.Faults = append(s.rep.Faults, fr)
		return nil
	}
	fr.RepairedMS = ms(f.back.Sub(f.died) + time.Since(repairStart))
	if procs, err := processesOf(demo.LargeLab); err == nil {
		if d := diffCounts(s.procs, procs); d != "" {
			s.inv.broke("no_process_leak", "after lb%d died at %.0f s: %s", f.lb, fr.AtS, d)
		}
	}
	s.rep.Faults = append(s.rep.Faults, fr)
	fmt.Fprintf(s.progress, "soak: %5.0f s  %s  lb%d died: sent %d, its flows lost %d (outage %.0f ms), others %s; ports down %.0f ms, routes off %.0f ms, up %.0f ms after it came back; converged %.1f s after it died\n",
		st.AtS, st.Family, f.lb, st.Sent, lost[f.lb], fr.OutageMS, map[bool]string{true: "0", false: strings.Join(other, ", ")}[len(other) == 0],
		fr.PortsDownMS, fr.WithdrawnMS, fr.RestoredMS, fr.RepairedMS/1000)
	return nil
}

// lostByLB is the frames each LB's ports' flows lost: flow i goes to
// s.dsts[i%len(s.dsts)].
func (s *largeSoak) lostByLB(counts []uint64, sent uint64) map[int]uint64 {
	lost := map[int]uint64{}
	for i, n := range flowLoss(counts, sent) {
		if n > 0 {
			lost[s.dsts[i%len(s.dsts)].LB] += n
		}
	}
	return lost
}

// lostText says which LBs' flows lost frames.
func lostText(lost map[int]uint64) string {
	var out []string
	for l, n := range lost {
		out = append(out, fmt.Sprintf("lb%d %d", l, n))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// finish gives the report its verdicts.
func (s *largeSoak) finish() *Report {
	s.rep.DurationS = time.Since(s.start).Seconds()
	for _, st := range s.rep.Steps {
		if st.Fault == "" {
			s.rep.LostOutsideFaults += st.Lost
		}
	}
	faults := len(s.rep.Faults)
	s.inv.held("lb_host_only_its_ports", fmt.Sprintf("%d LB hosts died and came back; no other LB's flows lost a frame", faults))
	s.rep.Invariants, s.rep.InvariantsOK = s.inv.verdicts()
	for _, f := range s.rep.Faults {
		s.rep.InvariantsOK = s.rep.InvariantsOK && f.Met
	}
	if faults == 0 {
		s.rep.NotYet = append(s.rep.NotYet, "no LB host died: a --duration long enough for a fault step")
	}
	return s.rep
}

// An lbHostFault is lb-host: LB lb's host dies (demo.KillLargeLB) and,
// lbHostHold later, comes back, watched from the active VCP and the
// back-ends: when its ports went down, when no back-end routed to their
// subnets, when they were up again.
type lbHostFault struct {
	lb                            int
	died, back                    time.Time
	portsDown, withdrawn, portsUp time.Duration
}

func (f *lbHostFault) name() string { return fmt.Sprintf("lb-host lb%d", f.lb) }

// run does the fault, beside the step's traffic.
func (f *lbHostFault) run(p *demo.LargePlan) error {
	time.Sleep(soakFaultAt)
	var subnets []netip.Prefix
	for _, port := range p.Ports {
		if port.LB == f.lb {
			subnets = append(subnets, netip.PrefixFrom(port.Router, 24).Masked())
		}
	}
	f.died = time.Now()
	if err := demo.KillLargeLB(f.lb); err != nil {
		return err
	}
	for time.Since(f.died) < lbHostHold {
		if f.portsDown == 0 && lbPortsUp(f.lb) == 0 {
			f.portsDown = time.Since(f.died)
		}
		if f.withdrawn == 0 && noBackendRoutes(subnets) {
			f.withdrawn = time.Since(f.died)
		}
		time.Sleep(50 * time.Millisecond)
	}
	f.back = time.Now()
	if err := demo.ReviveLargeLB(f.lb); err != nil {
		return err
	}
	for time.Since(f.back) < lbHostTail-500*time.Millisecond && f.portsUp == 0 {
		if lbPortsUp(f.lb) == demo.LargePortsPerLB {
			f.portsUp = time.Since(f.back)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// lbPortsUp is how many of LB l's external ports the active VCP has up
// (-1: no VCP active).
func lbPortsUp(l int) int {
	var ports *vcpapi.PortsView
	for _, v := range demo.VCPs {
		if st, err := vcpapi.Local(v, "").Status(); err == nil && st.Role == "active" {
			ports, _ = vcpapi.Local(v, "").Ports()
		}
	}
	if ports == nil {
		return -1
	}
	up := 0
	for _, pt := range ports.Ports {
		if pt.Role == "external" && pt.LB == fmt.Sprintf("lb%d", l) && pt.Up {
			up++
		}
	}
	return up
}

// noBackendRoutes says whether no back-end routes to any of subnets.
func noBackendRoutes(subnets []netip.Prefix) bool {
	for r := 1; r <= demo.LargeBackends; r++ {
		api := routerapi.Local(fmt.Sprintf("r%d", r), "")
		for _, p := range subnets {
			rs, err := api.Lookup(p.Addr().Next())
			if err != nil || len(rs) > 0 && rs[0].Prefix == p.String() {
				return false
			}
		}
	}
	return true
}
