package soak

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/msr-router/msr/bench"
	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/traffic"
)

// A soak is a run under way: the lab, what runs beside the traffic, the
// watches, and the report as it grows.
type soak struct {
	o        Options
	lab      *bench.RouterLab
	progress io.Writer
	rng      *rand.Rand
	rate     float64
	// looked is what a look at the router must see: with the churn, not
	// its prefixes.
	looked  *demo.Plan
	churn   *bgpChurn
	clients *soakClients
	ops     *soakOps
	join    *backendJoin
	maps    *soakMaps
	ribs    *ribWatch
	procs   map[string]int
	start   time.Time
	mem     *memWatch
	cpu     *cpuWatch
	unwatch context.CancelFunc
	rep     *Report
	inv     *invariants
	// The longest a step's FIBs took to equal the RIB: from the step's
	// end, from quiet, and from the RIB's last change in a step whose
	// feeds started again.
	fibTook, fibLag, fibRefresh time.Duration
}

// start readies a soak in the lab: the sink on h3 and bgp1, the traffic's
// rate, bgp1's churn, the clients, the operator, the watches.
func start(o Options, lab *bench.RouterLab, progress io.Writer) (s *soak, err error) {
	s = &soak{o: o, lab: lab, progress: progress, rng: rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15)), looked: lab.Plan(),
		join: &backendJoin{msrBin: o.MSRBin}, maps: newSoakMaps(), ribs: &ribWatch{},
		inv: newInvariants("fib_equals_rib", "no_loss_outside_faults", "no_duplicates", "no_process_leak", "agent_memory", "bpf_map_bounds")}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if err := sinkOnHosts(lab); err != nil {
		return nil, err
	}
	soakFamily(lab, false)
	if s.rate, err = lab.SteadyRate(traffic.MinFrameSize, o.Rate, progress); err != nil {
		return nil, err
	}
	if o.ChurnRate > 0 {
		if s.churn, err = newBGPChurn(lab.Plan(), append(soakDsts(lab, false), soakDsts(lab, true)...), o.ChurnRate); err != nil {
			return nil, err
		}
		s.looked = s.churn.kept(lab.Plan())
	}
	s.rep = &Report{Lab: o.labFile(), Seed: o.Seed, RatePPS: s.rate, Invariants: map[string]Invariant{}, Faults: []FaultReport{}, NotYet: soakNotYet(o)}
	if o.Clients {
		if s.clients, err = startSoakClients(); err != nil {
			return nil, err
		}
		s.inv.watch("tcp_intact")
	}
	if o.Ops {
		s.ops = newSoakOps()
		s.inv.watch("operator_state")
	}
	if s.procs, err = labProcesses(); err != nil {
		return nil, err
	}
	s.start = time.Now()
	ctx, unwatch := context.WithCancel(context.Background())
	s.unwatch = unwatch
	s.mem, s.cpu = watchMemory(ctx), watchCPU(ctx, s.start)
	return s, nil
}

// close stops the watches, restores what the operator changed, and stops
// the clients.
func (s *soak) close() {
	if s.unwatch != nil {
		s.unwatch()
	}
	if s.ops != nil {
		if err := s.ops.restore(); err != nil {
			fmt.Fprintf(s.progress, "soak: the operator's state not restored: %v\n", err)
		}
	}
	if s.clients != nil {
		s.clients.close()
	}
}

// A stepPlan is a step drawn: its faults (the second, with --overlap,
// secondAfter the first), the operator's command at opAt, the traffic's
// family and length.
type stepPlan struct {
	fault, second *soakFault
	secondAfter   time.Duration
	op            *soakOp
	opAt          time.Duration
	ipv6          bool
	length        time.Duration
}

// faults are the step's faults, none for a quiet step.
func (p *stepPlan) faults() []*soakFault {
	var fs []*soakFault
	for _, f := range []*soakFault{p.fault, p.second} {
		if f != nil {
			fs = append(fs, f)
		}
	}
	return fs
}

// kinds names the step's faults: "vcp", "vcp+hostile", "" when quiet.
func (p *stepPlan) kinds() string {
	var ks []string
	for _, f := range p.faults() {
		ks = append(ks, f.kind())
	}
	return strings.Join(ks, "+")
}

// plan draws step n: a fault every other step (in half of those, with
// --overlap, a second one on another target), the operator's command,
// and the family (a fault step and the quiet one after it share one).
func (s *soak) plan(n int) *stepPlan {
	p := &stepPlan{ipv6: n/2%2 == 1, length: soakStep}
	d := drawing{rng: s.rng, join: s.join}
	if n%2 == 1 {
		p.fault = drawFault(d, s.o.Faults)
		if s.o.Overlap && s.rng.IntN(2) == 0 {
			p.second = drawFault(d, s.o.Faults)
			for tries := 0; p.fault.sameTarget(p.second) && tries < 100; tries++ {
				p.second = drawFault(d, s.o.Faults)
			}
			if p.fault.sameTarget(p.second) {
				p.second = nil
			}
			p.secondAfter = overlapMin + time.Duration(s.rng.Int64N(int64(overlapMax-overlapMin)))
		}
	}
	if s.ops != nil {
		p.op, p.opAt = s.ops.draw(s.rng), 300*time.Millisecond+time.Duration(s.rng.Int64N(int64(3*time.Second)))
	}
	for _, f := range p.faults() {
		if l, ok := f.fault.(longFault); ok {
			p.length = l.prepare(s.lab.Plan(), s.churn.churned(), s.join.backends)
		}
	}
	return p
}

// A stepResult is what a step's traffic and the activities beside it
// came to, and when the router was whole again after its faults.
type stepResult struct {
	at       time.Duration // from the soak's start
	trial    *bench.Trial
	clients  clientStep
	opErr    error
	repaired time.Time
	drops    dropLedger
	softirqs map[string]uint64
}

// run runs a step: the instrument's traffic, its faults injected into it,
// and beside it bgp1's churn, the clients and the operator's command.
func (s *soak) run(p *stepPlan) (*stepResult, error) {
	soakFamily(s.lab, p.ipv6)
	size := traffic.MinFrameSize
	if p.ipv6 {
		size = traffic.MinFrameSize6
	}
	res := &stepResult{at: time.Since(s.start), drops: lookDrops(s.join.backends()), softirqs: softirqLook()}
	sides := s.besides(p, res)
	var faultErr error
	t, err := s.lab.Send(size, s.rate, func(g *traffic.Generator) (uint64, error) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			faultErr = s.inject(p, res)
		}()
		g.SetCallLimit(soakCallLimit)
		n, err := g.Blast(p.length)
		<-done
		return n, err
	})
	if serr := sides.end(); err == nil {
		err = serr
	}
	if res.opErr != nil {
		p.op.undo() // refused, not lost: the state expected is what was before
	}
	if err == nil {
		err = faultErr
	}
	res.trial = t
	return res, err
}

// inject injects the step's fault soakFaultAt into it and the second
// secondAfter later, while the first may still be healing; then watches
// for the router's repair until the step's end.
func (s *soak) inject(p *stepPlan, res *stepResult) error {
	if p.fault == nil {
		return nil
	}
	time.Sleep(soakFaultAt)
	var wg sync.WaitGroup
	var secondErr error
	if p.second != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(p.secondAfter)
			secondErr = injectWaiting(p.second, s.lab)
		}()
	}
	err := injectWaiting(p.fault, s.lab)
	wg.Wait()
	for _, f := range []*soakFault{p.fault, p.second} {
		if f == nil {
			continue
		}
		if u, ok := f.fault.(*upgradeInPlace); ok {
			s.mem.restarted(u.host, f.at)
		}
	}
	if err != nil {
		return fmt.Errorf("soak: fault %s on %s: %w", p.fault.kind(), p.fault.target(), err)
	}
	if secondErr != nil {
		return fmt.Errorf("soak: fault %s on %s: %w", p.second.kind(), p.second.target(), secondErr)
	}
	res.repaired = watchRepair(s.looked, p.fault.at.Add(p.length-soakFaultAt))
	return nil
}

// besides starts what runs beside a step's traffic: bgp1's churn until
// the traffic ends, the clients for the step's length, the operator's
// command at its time.
func (s *soak) besides(p *stepPlan, res *stepResult) *sides {
	b := &sides{stop: make(chan struct{})}
	if s.churn != nil {
		b.run(s.churn.run)
	}
	if s.clients != nil {
		b.run(func(<-chan struct{}) error {
			res.clients = s.clients.run(p.length, res.at)
			return nil
		})
	}
	if p.op != nil {
		b.run(func(<-chan struct{}) error {
			time.Sleep(p.opAt)
			res.opErr = p.op.do()
			return nil
		})
	}
	return b
}

// sides are activities beside a step's traffic, each in its goroutine;
// end tells them to stop and waits for them, with the first error.
type sides struct {
	stop chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	err  error
}

func (b *sides) run(f func(stop <-chan struct{}) error) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		if err := f(b.stop); err != nil {
			b.mu.Lock()
			if b.err == nil {
				b.err = err
			}
			b.mu.Unlock()
		}
	}()
}

func (b *sides) end() error {
	close(b.stop)
	b.wg.Wait()
	return b.err
}
