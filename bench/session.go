package bench

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/traffic"
)

// A session is one DUT's lab, sink and data path, up for as many trials
// as a measurement needs: `bench fwd` runs one, `bench rfc2544` hundreds,
// several DUTs' sessions open at once so that their trials interleave.
type session struct {
	o       FwdOptions // DUT, flows and table; each trial sets size and rate
	spec    *lab.Spec
	routes  []netip.Prefix
	dstMAC  net.HardwareAddr
	sink    *traffic.Sink
	sinkEnd lab.Endpoint
	progs   map[string]*ebpf.Program
	undo    func()
	// forwardedPerCPU reads the frames the DUT forwarded by CPU (nil: not
	// counted).
	forwardedPerCPU func() ([]uint64, error)
	awake           func() // releases keepCPUsAwake
	fibLoad         time.Duration
	last            *traffic.SinkReport // the sink's counters after the last trial
	// gen is where the generator sends from: gen:g0 in the bench labs;
	// genHasXDP says its interfaces have an XDP program already (a sink's,
	// or the lab's xdp_pass).
	gen       lab.Endpoint
	genHasXDP bool
	// ports and dsts, if set, are where the flows leave and go (a study's
	// two sources); else gen's interface to dstMAC, over the routes.
	ports []traffic.GenPort
	dsts  []netip.Addr
	// studyPorts are a study lab's two sources (see aim).
	studyPorts []traffic.GenPort
}

// benchGen is where the bench labs' generator sends from.
var benchGen = lab.Endpoint{Node: "gen", Iface: "g0"}

// openSession checks o, builds the DUT's lab, starts the sink and loads
// the DUT.
func openSession(o FwdOptions) (*session, error) {
	spec, routes, dstMAC, err := o.check()
	if err != nil {
		return nil, err
	}
	awake, err := upLab(spec)
	if err != nil {
		return nil, err
	}
	s := &session{o: o, spec: spec, routes: routes, dstMAC: dstMAC, undo: func() {}, awake: awake,
		gen: benchGen}
	if s.sink, s.sinkEnd, err = openSink(spec, o); err != nil {
		s.Close()
		return nil, err
	}
	s.genHasXDP = s.sinkEnd.Node == s.gen.Node
	if o.Queues > 1 {
		if err := unthreadNAPI(spec); err != nil {
			s.Close()
			return nil, err
		}
	}
	loadStart := time.Now()
	dut, err := setupDUT(o, spec, routes)
	if err != nil {
		s.Close()
		return nil, err
	}
	s.progs, s.undo, s.forwardedPerCPU = dut.progs, dut.undo, dut.forwardedPerCPU
	s.fibLoad = time.Since(loadStart)
	if s.ports, err = lbPorts(o.DUT, spec); err != nil {
		s.Close()
		return nil, err
	}
	if o.URPF != "" {
		s.ports = []traffic.GenPort{{Ifname: s.gen.Iface, DstMAC: dstMAC, VLAN: routerBenchVLAN}}
	}
	if s.last, err = s.sink.Read(); err != nil {
		s.Close()
		return nil, err
	}
	// Building the table (1M routes: a gigabyte of garbage) leaves this
	// process a collection to do; done during a trial, it would take CPU
	// from the generator and the DUT. Do it now.
	runtime.GC()
	return s, nil
}

// upLab keeps the CPUs awake and brings the lab up; it returns what
// releases the CPUs (Close calls it).
func upLab(spec *lab.Spec) (awake func(), err error) {
	if awake, err = keepCPUsAwake(); err != nil {
		return nil, err
	}
	if _, err := lab.Up(spec); err != nil {
		awake()
		return nil, err
	}
	return awake, nil
}

// Close unloads the DUT and takes the lab down.
func (s *session) Close() {
	s.undo()
	if s.sink != nil {
		s.sink.Close()
	}
	lab.Down(s.spec.Name)
	s.awake()
}

// labName is the session's lab where it is not its DUT's bench lab (the
// default lab, for the whole router's parts), as results name it; "" in a
// bench lab.
func (s *session) labName() string {
	if s.spec.Name == demo.LabName {
		return demo.LabName
	}
	return ""
}

// trialResult is one trial: what the generator sent and in how long, what
// the sink counted of it (counters of this trial only), and the DUT's own
// CPU time per packet.
type trialResult struct {
	sent            uint64
	elapsed         time.Duration
	window          time.Duration // first frame to last: the generator's own clock
	rep             *traffic.SinkReport
	napiNsPerPacket float64
	napiBusy        float64
	// paceRestarts counts the times a paced generator fell so far behind
	// its schedule (its core taken for long) that it gave the schedule
	// up and started a new one; paceSkipped is the time it gave up. Its
	// frames are all sent, later: the trial offered less than asked.
	paceRestarts uint64
	paceSkipped  time.Duration
	// series is the rate the sink counted, per sampleEvery, from the
	// first sample after the generator started (with sampling on).
	series []float64
}

// offeredPPS and receivedPPS are the trial's rates over its sending
// window (over its elapsed time if the window is unknown); lossRatio the
// share of the frames sent that the sink did not count.
func (t *trialResult) offeredPPS() float64  { return float64(t.sent) / t.seconds() }
func (t *trialResult) receivedPPS() float64 { return float64(t.rep.RxPackets) / t.seconds() }

// scheduledPPS is the rate over the time the generator kept its
// schedule: the rate asked, unless the generator itself fell short.
func (t *trialResult) scheduledPPS() float64 {
	return float64(t.sent) / (t.seconds() - t.paceSkipped.Seconds())
}

// behind says, for a progress line, whether the generator fell behind
// its schedule in the trial.
func (t *trialResult) behind() string {
	if t.paceRestarts == 0 {
		return ""
	}
	return fmt.Sprintf("  generator behind %d times, %v of schedule given up", t.paceRestarts, t.paceSkipped.Round(time.Microsecond))
}

func (t *trialResult) seconds() float64 {
	if t.window > 0 && t.sent > 1 {
		// sent frames span sent-1 gaps.
		return t.window.Seconds() * float64(t.sent) / float64(t.sent-1)
	}
	return t.elapsed.Seconds()
}
func (t *trialResult) lossRatio() float64 {
	if t.sent == 0 {
		return 0
	}
	return float64(t.lost()) / float64(t.sent)
}

// lost is how many frames sent were not counted.
func (t *trialResult) lost() uint64 {
	got := t.rep.RxPackets - t.rep.Duplicated // each frame once
	if got >= t.sent {
		return 0
	}
	return t.sent - got
}

// burst sends n frames back to back with frames of size, flat out in one
// generator run, waits for the DUT to drain, and reads what the sink
// counted of them.
func (s *session) burst(size int, n uint64) (*trialResult, error) {
	return s.send(sendSpec{size: size}, func(g *traffic.Generator) (uint64, error) {
		first := g.Sent()
		err := g.Burst(n)
		return g.Sent() - first, err
	})
}

// trial runs the generator at rate (0: flat out) with frames of size for
// d, waits for the DUT to drain, and reads what the sink counted since
// the last trial.
func (s *session) trial(size int, rate float64, d time.Duration) (*trialResult, error) {
	return s.send(sendSpec{size: size, rate: rate}, func(g *traffic.Generator) (uint64, error) { return g.Blast(d) })
}

// sendSpec is a trial's frames and rate, and what happens beside them.
type sendSpec struct {
	size int
	rate float64 // 0: flat out
	// sample, if set, samples the sink's count this often into the
	// trial's series.
	sample time.Duration
}

// send makes a generator for frames of the spec's size at its rate in the
// generator's host, places the DUT's NAPI threads, has transmit send with
// it and says how many frames it sent, waits for the DUT to drain, and
// reads what the sink counted since the last trial and the DUT's CPU time
// meanwhile.
func (s *session) send(sp sendSpec, transmit func(*traffic.Generator) (uint64, error)) (*trialResult, error) {
	if s.o.Queues > 1 {
		return s.sendQueues(sp, transmit)
	}
	t := &trialResult{}
	var napi []int
	var napiStart time.Duration
	if err := s.sink.Restart(); err != nil {
		return nil, err
	}
	var stopSampling func() []float64
	err := netns.Do(lab.Namespace(s.spec.Name, s.gen.Node), func() error {
		g, err := traffic.NewGenerator(s.genConfig(sp, 0, s.o.flowIDs(), s.genHasXDP))
		if err != nil {
			return err
		}
		defer g.Close()
		if napi, err = placeNAPI(s.spec); err != nil {
			return err
		}
		unpin, err := pinGenerator()
		if err != nil {
			return err
		}
		defer unpin()
		if err := g.ResetWindow(); err != nil {
			return err
		}
		if sp.sample > 0 {
			stopSampling = s.sample(sp.sample)
		}
		napiStart = cpuTime(napi)
		start := time.Now()
		t.sent, err = transmit(g)
		t.elapsed, t.window = time.Since(start), g.Window()
		t.paceRestarts, t.paceSkipped = g.PaceStats()
		return err
	})
	if err != nil {
		if stopSampling != nil {
			stopSampling()
		}
		return nil, err
	}
	time.Sleep(drainTime)
	if stopSampling != nil {
		// The samples of the sending time, not of the drain's (nor the
		// last one, which the end of sending cut short).
		t.series = stopSampling()
		t.series = t.series[:min(len(t.series), int(t.elapsed/sp.sample))]
	}
	now, err := s.sink.Read()
	if err != nil {
		return nil, err
	}
	t.rep, s.last = now.Since(s.last), now
	// The DUT's NAPI time counts the drain too: it forwards what was
	// queued, and the sink counts it.
	if busy := cpuTime(napi) - napiStart; busy > 0 && t.rep.RxPackets > 0 {
		t.napiNsPerPacket = float64(busy.Nanoseconds()) / float64(t.rep.RxPackets)
		t.napiBusy = busy.Seconds() / (t.elapsed + drainTime).Seconds()
	}
	return t, nil
}

// genConfig is a trial's generator of flows first..first+n-1, at the
// share of the trial's rate they are of all the flows.
func (s *session) genConfig(sp sendSpec, first, n int, hasXDP bool) traffic.GenConfig {
	dsts := s.dsts
	if dsts == nil {
		routes := s.routes
		if routes == nil && s.o.Flows > s.o.flowIDs() {
			routes = benchRoutes(nil, s.o.IPv6) // destinations to walk without a table
		}
		dsts = flowDsts(routes, s.o.Flows)
	}
	return traffic.GenConfig{Ifname: s.gen.Iface, DstMAC: s.dstMAC, Size: sp.size, Flows: n, FirstFlow: first,
		Rate: sp.rate * float64(n) / float64(s.o.flowIDs()), Dsts: dsts, IPv6: s.o.IPv6, HasXDP: hasXDP, Ports: s.ports}
}

// sendQueues is send with a generator on each of the first o.Queues
// CPUs, each sending a share of the flows at that share of the rate. A
// veth hands a frame to its peer's queue of the sending CPU, and the
// lab's NAPI is not threaded (unthreadNAPI), so each of the DUT's queues
// receives on a CPU of its own, as a NIC's RSS queues do; each flow stays
// on one CPU, its frames in order. No NAPI time is taken (the DUT's work
// is softirq time on the generators' CPUs) and nothing is sampled.
func (s *session) sendQueues(sp sendSpec, transmit func(*traffic.Generator) (uint64, error)) (*trialResult, error) {
	n, flows := s.o.Queues, s.o.flowIDs()
	if sp.sample > 0 {
		return nil, errors.New("a trial over several queues is not sampled")
	}
	if err := s.sink.Restart(); err != nil {
		return nil, err
	}
	ns := lab.Namespace(s.spec.Name, s.gen.Node)
	gens := make([]*traffic.Generator, n)
	defer func() {
		for _, g := range gens {
			if g != nil {
				g.Close()
			}
		}
	}()
	// One after another, so that the first has attached xdp_pass (if
	// any) before any sends.
	err := netns.Do(ns, func() (err error) {
		for q := range n {
			first, last := q*flows/n, (q+1)*flows/n
			if gens[q], err = traffic.NewGenerator(s.genConfig(sp, first, last-first, s.genHasXDP || q > 0)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	parts := make([]trialResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for q := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[q] = netns.Do(ns, func() error {
				unpin, err := pinCPU(q)
				if err != nil {
					return err
				}
				defer unpin()
				g, p := gens[q], &parts[q]
				if err := g.ResetWindow(); err != nil {
					return err
				}
				start := time.Now()
				p.sent, err = transmit(g)
				p.elapsed = time.Since(start)
				p.paceRestarts, p.paceSkipped = g.PaceStats()
				return err
			})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// The window is from the first frame of any generator to the last of
	// any: they start milliseconds apart.
	t := &trialResult{}
	var first, last time.Duration
	for q, p := range parts {
		t.sent += p.sent
		t.elapsed = max(t.elapsed, p.elapsed)
		t.paceRestarts, t.paceSkipped = t.paceRestarts+p.paceRestarts, max(t.paceSkipped, p.paceSkipped)
		f, l := gens[q].TxSpan()
		if f > 0 && (first == 0 || f < first) {
			first = f
		}
		last = max(last, l)
	}
	if first > 0 && last > first {
		t.window = last - first
	}
	time.Sleep(drainTime)
	now, err := s.sink.Read()
	if err != nil {
		return nil, err
	}
	t.rep, s.last = now.Since(s.last), now
	return t, nil
}

// sample reads the sink's count every interval, from a thread of its own,
// until the returned function is called; that returns the rates counted,
// one per interval.
//
// The thread is the sampler's alone, on the generator's core at a
// real-time priority (pinSampler), and put back as it was before stop
// returns: the other core is the DUT's, whose SCHED_FIFO NAPI threads
// take all of it under overload, and a Go ticker fires only when a thread
// of the runtime gets a core. CI's 1 s overload at 150% of NDR counted 6
// steps of 100 ms with a ticker, one of them 4.6 Mpps (a late tick's
// read, divided by the tick's time, not the read's). Each rate is now the
// count between two reads over the time between them; a step the sampler
// overslept gets the average of the steps it spans, so the series stays
// on its grid.
func (s *session) sample(every time.Duration) (stop func() []float64) {
	var stopped atomic.Bool
	out := make(chan []float64, 1)
	go func() { out <- s.sampleUntil(every, &stopped) }()
	return func() []float64 {
		stopped.Store(true)
		return <-out
	}
}

// sampleUntil is sample's loop, on its own locked and pinned thread.
func (s *session) sampleUntil(every time.Duration, stopped *atomic.Bool) []float64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer pinSampler()()
	var rates []float64
	prev, _ := s.sink.Received()
	last := time.Now()
	next := last.Add(every)
	for !stopped.Load() {
		// Short naps, so that stop does not wait out a whole step.
		if d := time.Until(next); d > 0 {
			nap := unix.NsecToTimespec(min(d, 10*time.Millisecond).Nanoseconds())
			unix.Nanosleep(&nap, nil)
			continue
		}
		n, err := s.sink.Received()
		now := time.Now()
		if err != nil {
			next = next.Add(every)
			continue
		}
		span := now.Sub(last)
		rate := float64(n-prev) / span.Seconds()
		for i := 0; i < max(1, int(math.Round(float64(span)/float64(every)))); i++ {
			rates = append(rates, rate)
		}
		prev, last = n, now
		for !next.After(now) {
			next = next.Add(every)
		}
	}
	return rates
}
