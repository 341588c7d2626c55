package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/msr-router/msr/bench"
	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/traffic"
)

// The soak: the whole router in the default lab under the
// instrument's accounted traffic for a long time, with faults drawn by a
// seed and invariants checked after every step. It runs in steps of
// soakStep: a step carries the instrument's sequenced UDP from h1 to h3
// and to bgp1's prefixes (1,000 flows, below the rate at which a step
// loses nothing; IPv4 and IPv6 in turn) while bgp1 churns the prefixes
// the traffic does not cross (churn.go), and a fault step injects a
// fault soakFaultAt into it, in half of them a second one while the first
// heals (Overlap). Every frame lost is counted with its step: in a fault
// step it is the fault's, in any other it is a loss outside the faults,
// which fails the run. After each step the router must converge again
// (the time from the fault to then is its repair), and the back-ends'
// FIBs are compared with the suite's RIB.
//
// The operator's drains, weights and reloads run beside it (ops.go),
// and the BPF maps are counted after every step (maps.go).
//
// Real clients run beside it: UDP from h3 to h1, TCP and HTTP
// (clients.go).
//
// bgp1 holds a full table with --prefixes 600000 (msr soak's default;
// TestSoak's two minutes keep the lab's 1,000 prefixes); the churn swings
// 500 prefixes of each family within it, and the back-ends' FIBs are
// compared with the RIB by digest (ribWatch). With fewer prefixes, or a
// churn under 1,000 changes a second, Report.NotYet says so.

// FaultKinds are the faults a soak draws from, each with the loss it is
// allowed (the issue's goals): none, but for a back-end host's links,
// whose flows are lost until the LBs drop it.
var FaultKinds = []string{"lb-agent", "backend-agent", "suite", "keepalived", "vcp", "backend-links", "external-link", "external-link-down", "hostile", "backend-memory", "backend-join"}

// soakStep is a step's length; soakFaultAt is when in a fault step the
// fault comes.
const (
	soakStep    = 4 * time.Second
	soakFaultAt = time.Second
)

// DefaultRate is the instrument's traffic when none is asked, frames a
// second. Every frame crosses veth rings of vethRing frames (lb1's e0, the
// switch's ports to the LBs, ...), each emptied by its NAPI on one CPU,
// and a frame that finds its ring full is lost. This machine's hypervisor
// takes a CPU for 8.4 ms now and then, and the softirqs it interrupts run
// up to 11.5 ms (finding 38: /proc/stat's steal grows with them), while
// h1's TCP client puts bursts of 45 frames into lb1's e0 beside the
// instrument's. At 20,000 frames a second a ring held 12.8 ms less such a
// burst, and runs 30, 33 and 54 lost 2 to 36 frames so. At 10,000 it
// holds 25.6 ms (ringHold), twice the longest stall measured.
const DefaultRate = 10_000

// vethRing is a veth's receive ring (the kernel's VETH_RING_SIZE), fixed.
const vethRing = 256

// ringHold is how long a ring of vethRing frames holds traffic at rate
// frames a second when its NAPI is not polled.
func ringHold(rate float64) time.Duration {
	return time.Duration(vethRing / rate * float64(time.Second))
}

// longestStall is the longest a CPU's softirqs were measured stalled on
// this machine while the soak ran (finding 38: a softirq of 11.5 ms).
const longestStall = 11500 * time.Microsecond

// ringWarning says when rate leaves a veth ring less than twice the
// longest stall to hold (empty otherwise): such a run may lose frames to
// the machine's hypervisor, not the router.
func ringWarning(rate float64) string {
	if hold := ringHold(rate); hold < 2*longestStall {
		return fmt.Sprintf("at %.0f frames a second a veth ring of %d holds %s, less than twice the %s this machine's CPUs were measured stalled (finding 38): frames may be lost to that", rate, vethRing, hold.Round(100*time.Microsecond), longestStall)
	}
	return ""
}

// soakCallLimit bounds the generator's calls (traffic.Generator's
// SetCallLimit): the instrument's core is the lab's too, and a call that
// spins for a whole 28 s step kept that core's kernel threads waiting for
// seconds (cpu.csv, procs.csv).
const soakCallLimit = 500 * time.Millisecond

// Options are a soak's.
type Options struct {
	Duration time.Duration
	Seed     uint64
	// Faults are the kinds drawn from (nil: FaultKinds).
	Faults []string
	// Rate is the traffic's, in frames per second (halved until a step
	// loses nothing); Flows its flows.
	Rate  float64
	Flows int
	// Overlap draws, in half the fault steps, a second fault 100 to 600
	// ms after the first, while the first may still be healing.
	Overlap bool
	// ChurnRate is the route changes a second bgp1's churn sends while
	// the traffic runs (churn.go); 0: no churn.
	ChurnRate float64
	// Prefixes and Prefixes6 are the IPv4 and IPv6 prefixes bgp1
	// announces (0: routerLabPrefixes, soakPrefixes6): 600,000 and
	// 250,000 are full tables of today.
	Prefixes, Prefixes6 int
	// Ops has the operator drain, weight and reload during every step
	// (ops.go).
	Ops bool
	// Clients runs real clients beside the instrument every step
	// (clients.go): iperf3's UDP from h3 to h1, iperf3 TCP from h1
	// to h3, HTTP downloads from h3 to h1 with their sha256.
	Clients bool
	// LabFile is a lab file built in place of the default lab (msr soak
	// --lab): a variant of labs/default.yaml with its hosts, addresses,
	// processes and links, and settings of its own (demo.Options.LabFile).
	LabFile string
	// MSRBin is the program every element of the lab runs.
	MSRBin string
	// LogsDir is where the lab's logs are copied before the lab goes down:
	// always when set (a report's), and when the soak fails or cannot go
	// on into a new directory in os.TempDir() when not. A passing run's
	// logs say what its faults cost where the figures do not (the VCPs'
	// "died" and "came back", finding 34).
	LogsDir string
}

// FaultReport is one fault injected: its kind, when (seconds into the
// soak), the frames lost in its step, the longest outage (the sink's
// longest run of frames lost), the time from the fault until the router
// had converged again, and whether that met the goal.
type FaultReport struct {
	Kind        string  `json:"kind"`
	Target      string  `json:"target"`
	Family      string  `json:"family"` // the traffic's in its step: ipv4 or ipv6
	AtS         float64 `json:"at_s"`
	LostPackets uint64  `json:"lost_packets"`
	OutageMS    float64 `json:"outage_ms"`
	RepairedMS  float64 `json:"repaired_ms"`
	Goal        string  `json:"goal"`
	Met         bool    `json:"met"`
	// Overlaps is the kind of the fault injected in the same step while
	// this one healed (--overlap): the two share the step's loss, outage
	// and goal.
	Overlaps string `json:"overlaps,omitempty"`
	// WithdrawnMS and RestoredMS are an external-link-down's: from the
	// link going down until no back-end had a route to bgp1's prefix, and
	// from the link coming up until every back-end had it again.
	WithdrawnMS float64 `json:"withdrawn_ms,omitempty"`
	RestoredMS  float64 `json:"restored_ms,omitempty"`
	// DISTSent, JunkSent and DISTDropped are a hostile fault's: the DIST
	// frames (forged or replayed) and the random ones it sent, and the
	// DIST frames the router's edge dropped and counted meanwhile;
	// Changed what of the forger's asking the router took ("": nothing).
	DISTSent    uint64 `json:"dist_sent,omitempty"`
	JunkSent    uint64 `json:"junk_sent,omitempty"`
	DISTDropped uint64 `json:"dist_dropped,omitempty"`
	Changed     string `json:"changed,omitempty"`
	// ClaimsSent, InsideSent and InsideDropped are a hostile fault's
	// too: the forged ARP replies and advertisements for ospf1, the SYNs
	// to the router's inside, and those lb1's e1 dropped as infra.
	ClaimsSent    uint64 `json:"claims_sent,omitempty"`
	InsideSent    uint64 `json:"inside_sent,omitempty"`
	InsideDropped uint64 `json:"inside_dropped,omitempty"`
	// GTSMSent and GTSMDropped: its single-hop BFD at TTL 64 to the
	// router, and what lb1's e1 dropped as gtsm.
	GTSMSent    uint64 `json:"gtsm_sent,omitempty"`
	GTSMDropped uint64 `json:"gtsm_dropped,omitempty"`
	// MemoryLimit and OOMKilled are a backend-memory fault's: the
	// cgroup's limit on the agent, and whether the kernel killed it for
	// it (it was started again).
	MemoryLimit int64 `json:"memory_limit,omitempty"`
	OOMKilled   bool  `json:"oom_killed,omitempty"`
}

// Invariant is one invariant's verdict over the whole soak.
type Invariant struct {
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Step is one step of the soak: when, what it sent and lost, and its
// fault if it had one.
type Step struct {
	AtS float64 `json:"at_s"`
	// TrafficS is how long its traffic ran: soakStep, or longer for a
	// fault that takes longer (external-link-down).
	TrafficS float64 `json:"traffic_s"`
	Family   string  `json:"family"`
	Sent     uint64  `json:"sent"`
	Received uint64  `json:"received"`
	Lost     uint64  `json:"lost"`
	// LostToH3 and LostToBGP1 split Lost by the flows' destinations (the
	// sink's count of each flow against what the generator sent it).
	LostToH3   uint64 `json:"lost_to_h3"`
	LostToBGP1 uint64 `json:"lost_to_bgp1"`
	// Duplicated, Reordered and BeyondWindow are the sink's: frames
	// received twice, late (first arrival after a later frame of their
	// flow), and late by more than its window (traffic.SinkReport).
	Duplicated   uint64 `json:"duplicated,omitempty"`
	Reordered    uint64 `json:"reordered,omitempty"`
	BeyondWindow uint64 `json:"beyond_window,omitempty"`
	// ReverseSent and ReverseLost are the clients' UDP from h3 to h1
	// (iperf3's datagrams), with Clients.
	ReverseSent uint64 `json:"reverse_sent,omitempty"`
	ReverseLost uint64 `json:"reverse_lost,omitempty"`
	// ReverseRcvbuf are the datagrams iperf3 counted lost that h1's
	// kernel dropped for a full socket buffer (its server late to read
	// them): the router delivered them, and they are not in ReverseLost.
	ReverseRcvbuf uint64 `json:"reverse_rcvbuf_dropped,omitempty"`
	// ReverseLostAt says in which seconds of the step they were lost.
	ReverseLostAt string `json:"reverse_lost_at,omitempty"`
	// Drops are the drop counters that grew in a step that lost frames
	// (drops.go): which element dropped them, and why.
	Drops map[string]uint64 `json:"drops,omitempty"`
	// Softirq is how the kernel's softirqs fared in the step, per CPU
	// (softirqLook): net_rx_action's time squeezes, ksoftirqd's run and
	// wait in ms.
	Softirq map[string]uint64 `json:"softirq,omitempty"`
	Fault   string            `json:"fault,omitempty"`
	// FIBLagMS is how long after quiet the back-ends' FIBs equalled the
	// RIB (ribSync's Lag); FIBRefreshMS, in a step whose feeds started
	// again, how long after the RIB's last change (the tables' new
	// arrival within it).
	FIBLagMS     float64 `json:"fib_lag_ms"`
	FIBRefreshMS float64 `json:"fib_refresh_ms,omitempty"`
}

// Report is what `msr soak -o json` prints. duration_s,
// invariants_ok, invariants, faults (kind, at_s, lost_packets, outage_ms,
// repaired_ms), lost_outside_faults and duplicated are names tools rely
// on.
type Report struct {
	// memory is the agents' resident memory, sampled; written to the
	// report's memory.csv, seconds from start.
	memory *memWatch
	// cpu is where the CPUs went and which lab processes waited for one;
	// written to cpu.csv and procs.csv (cpu.go).
	cpu   *cpuWatch
	start time.Time

	// Lab is the lab file the soak ran in: labs/default.yaml, or --lab's.
	Lab               string               `json:"lab"`
	DurationS         float64              `json:"duration_s"`
	Seed              uint64               `json:"seed"`
	RatePPS           float64              `json:"rate_pps"`
	Sent              uint64               `json:"sent"`
	Received          uint64               `json:"received"`
	InvariantsOK      bool                 `json:"invariants_ok"`
	Invariants        map[string]Invariant `json:"invariants"`
	Faults            []FaultReport        `json:"faults"`
	LostOutsideFaults uint64               `json:"lost_outside_faults"`
	// Duplicated counts the frames the sink received a second time
	// (exact for frames no more than 256 behind their flow's newest);
	// BeyondWindow the late frames further behind, which the sink counts
	// reordered and cannot tell from duplicates (0: Duplicated is exact).
	Duplicated   uint64 `json:"duplicated"`
	BeyondWindow uint64 `json:"beyond_window"`
	// Churn is bgp1's BGP churn while the traffic ran (nil: none).
	Churn *ChurnReport `json:"churn,omitempty"`
	// Operations are the operator's commands given while the traffic
	// ran, by kind (drain, undrain, weight, reload).
	Operations map[string]int `json:"operations,omitempty"`
	// Clients is the real clients' account (nil: none ran).
	Clients *ClientsReport `json:"clients,omitempty"`
	Steps   []Step         `json:"steps"`
	NotYet  []string       `json:"not_yet"`
}

// soakPrefixes6 is bgp1's IPv6 prefixes unless asked: as many as the
// IPv4 ones (bench.RouterLabPrefixes), so that the soak's flows cross half
// of them and the churn turns the other half.
const soakPrefixes6 = bench.RouterLabPrefixes

// fullTable is the IPv4 table of today (docs/benchmarks.md, Memory): a
// soak whose bgp1 holds fewer churns over less than the issue asks.
const fullTable = 600_000

// issueChurnRate is the churn the soak's goal asks for, in route changes a
// second: a run whose churn fell short says so in its not_yet.
const issueChurnRate = 1000

// soakNotYet is what the issue asks that this soak does not do: with fewer
// than fullTable prefixes, churn over a full table. (A churn that fell
// short of issueChurnRate is added at the end.)
func soakNotYet(o Options) []string {
	if o.Prefixes >= fullTable {
		return []string{}
	}
	return []string{fmt.Sprintf("churn over a full table (this run: bgp1 holds %d IPv4 and %d IPv6 prefixes; --prefixes %d)", o.Prefixes, o.Prefixes6, fullTable)}
}

// Run runs the soak and returns its report; an error is a soak that
// could not run, not one that failed (that is InvariantsOK false).
func Run(o Options, progress io.Writer) (rep *Report, err error) {
	if o.Duration < 30*time.Second {
		return nil, errors.New("soak: --duration of 30s at least")
	}
	if o.Faults == nil {
		o.Faults = FaultKinds
	}
	for _, f := range o.Faults {
		if !slices.Contains(FaultKinds, f) {
			return nil, fmt.Errorf("soak: fault %q: this release injects %s", f, strings.Join(FaultKinds, ", "))
		}
	}
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if w := ringWarning(o.Rate); w != "" {
		fmt.Fprintf(progress, "soak: %s\n", w)
	}
	if o.Flows == 0 {
		o.Flows = 1000
	}
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	labFile := demo.DefaultLabFile
	if o.LabFile != "" {
		labFile = o.LabFile
	}
	fmt.Fprintf(progress, "soak: bringing up the default lab (%s)\n", labFile)
	if o.Prefixes == 0 {
		o.Prefixes = bench.RouterLabPrefixes
	}
	if o.Prefixes6 == 0 {
		o.Prefixes6 = soakPrefixes6
	}
	suiteLogs := suiteLogSizes(demo.RunDir)
	r, err := bench.OpenRouterLab(o.MSRBin, o.Flows, demo.Options{Prefixes: o.Prefixes, Prefixes6: o.Prefixes6, LabFile: o.LabFile})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	defer func() {
		if err != nil || !rep.InvariantsOK || o.LogsDir != "" {
			keepLogs(o.LogsDir, suiteLogs, progress)
		}
	}()
	if err := sinkOnHosts(r); err != nil {
		return nil, err
	}
	soakFamily(r, false)
	rate, err := r.SteadyRate(traffic.MinFrameSize, o.Rate, progress)
	if err != nil {
		return nil, err
	}
	var churn *bgpChurn
	looked := r.Plan() // what a look at the router must see: with the churn, not its prefixes
	if o.ChurnRate > 0 {
		if churn, err = newBGPChurn(r.Plan(), append(soakDsts(r, false), soakDsts(r, true)...), o.ChurnRate); err != nil {
			return nil, err
		}
		looked = churn.kept(r.Plan())
	}
	rep = &Report{Lab: labFile, Seed: o.Seed, RatePPS: rate, Invariants: map[string]Invariant{}, Faults: []FaultReport{}, NotYet: soakNotYet(o)}
	inv := map[string][]string{} // invariant -> what broke it
	for _, name := range []string{"fib_equals_rib", "no_loss_outside_faults", "no_duplicates", "no_process_leak", "agent_memory", "bpf_map_bounds"} {
		inv[name] = nil
	}
	maps := newSoakMaps()
	ribs := &ribWatch{}
	join := &backendJoin{msrBin: o.MSRBin}
	var clients *soakClients
	if o.Clients {
		if clients, err = startSoakClients(); err != nil {
			return nil, err
		}
		defer clients.close()
		inv["tcp_intact"] = nil
	}
	var ops *soakOps
	if o.Ops {
		ops = newSoakOps()
		inv["operator_state"] = nil
		defer func() {
			if err := ops.restore(); err != nil {
				fmt.Fprintf(progress, "soak: the operator's state not restored: %v\n", err)
			}
		}()
	}
	procs, err := labProcesses()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	memCtx, memStop := context.WithCancel(context.Background())
	defer memStop()
	mem := watchMemory(memCtx)
	cpu := watchCPU(memCtx, start)
	var ribTook, ribLag, ribRefresh time.Duration // the longest a step's FIBs took to equal the RIB: from the step's end, from quiet, from the RIB's last change in a step whose feeds started again
	for step := 0; time.Since(start)+soakStep < o.Duration || step == 0; step++ {
		var fault, second *soakFault
		var secondAfter time.Duration
		if step%2 == 1 { // every other step: quiet ones between tell a fault's loss from the rest
			fault = drawFault(rng, o.Faults, join)
			if o.Overlap && rng.IntN(2) == 0 {
				second = drawFault(rng, o.Faults, join)
				for tries := 0; fault.sameTarget(second) && tries < 100; tries++ {
					second = drawFault(rng, o.Faults, join) // one fault at a time on bgp1's link, on r4
				}
				if fault.sameTarget(second) {
					second = nil
				}
				secondAfter = overlapMin + time.Duration(rng.Int64N(int64(overlapMax-overlapMin)))
			}
		}
		var op *soakOp
		var opAt time.Duration
		if ops != nil {
			op, opAt = ops.draw(rng), 300*time.Millisecond+time.Duration(rng.Int64N(int64(3*time.Second)))
		}
		stepLen := soakStep
		for _, f := range []*soakFault{fault, second} {
			if f.isLinkDown() {
				f.down.prefixes = bgp1Watched(r.Plan())
				f.down.bgp1Routes = len(r.Plan().Prefixes) + len(r.Plan().Prefixes6)
				f.down.churned = churn.churned()
				f.down.backends = join.backends
				stepLen = f.down.downFor() + linkDownAfter
			}
		}
		ipv6 := step/2%2 == 1 // a fault step and the quiet one after it: one family
		soakFamily(r, ipv6)
		size := traffic.MinFrameSize
		if ipv6 {
			size = traffic.MinFrameSize6
		}
		at := time.Since(start)
		drops, softirqs := lookDrops(join.backends()), softirqLook()
		var faultErr, secondErr error
		var faultAt, secondAt, repaired time.Time
		stopChurn, churned := make(chan struct{}), make(chan error, 1)
		if churn != nil {
			go func() { churned <- churn.run(stopChurn) }()
		} else {
			churned <- nil
		}
		clientsDone := make(chan clientStep, 1)
		if clients != nil {
			go func() { clientsDone <- clients.run(stepLen, at) }()
		} else {
			clientsDone <- clientStep{}
		}
		opDone := make(chan error, 1)
		if op != nil {
			go func() {
				time.Sleep(opAt)
				opDone <- op.do()
			}()
		} else {
			opDone <- nil
		}
		t, err := r.Send(size, rate, func(g *traffic.Generator) (uint64, error) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				if fault == nil {
					return
				}
				time.Sleep(soakFaultAt)
				faultAt = time.Now()
				fault.at = faultAt
				var wg sync.WaitGroup
				if second != nil { // while the first may still be healing
					wg.Add(1)
					go func() {
						defer wg.Done()
						time.Sleep(secondAfter)
						secondAt = time.Now()
						second.at = secondAt
						// Its target may be between lives (no VCP active
						// yet, BIRD being restarted): it waits for one.
						for secondErr = second.do(r); secondErr != nil && time.Since(secondAt) < overlapWait; secondErr = second.do(r) {
							time.Sleep(20 * time.Millisecond)
						}
					}()
				}
				// Its target may be between lives too (a VCP standing down,
				// none active yet): it waits for one, as the second does.
				for faultErr = fault.do(r); faultErr != nil && time.Since(faultAt) < overlapWait; faultErr = fault.do(r) {
					time.Sleep(20 * time.Millisecond)
				}
				wg.Wait()
				if faultErr == nil && secondErr == nil {
					repaired = watchRepair(looked, faultAt.Add(stepLen-soakFaultAt))
				}
			}()
			g.SetCallLimit(soakCallLimit)
			n, err := g.Blast(stepLen)
			<-done
			return n, err
		})
		close(stopChurn)
		if cerr := <-churned; err == nil && cerr != nil {
			err = cerr
		}
		cs := <-clientsDone
		if oerr := <-opDone; oerr != nil {
			// Refused, not lost: the state expected is what was before.
			op.undo()
			inv["operator_state"] = append(inv["operator_state"], fmt.Sprintf("at %.0f s, %s: %v", at.Seconds(), op.text, oerr))
		}
		if err != nil {
			return nil, err
		}
		if faultErr != nil {
			return nil, fmt.Errorf("soak: fault %s on %s: %w", fault.kind, fault.target, faultErr)
		}
		if secondErr != nil {
			return nil, fmt.Errorf("soak: fault %s on %s: %w", second.kind, second.target, secondErr)
		}
		st := Step{AtS: at.Seconds(), TrafficS: stepLen.Seconds(), Family: familyName(ipv6), Sent: t.Sent, Received: t.Sink.RxPackets, Lost: t.Lost(),
			ReverseSent: cs.udpSent, ReverseLost: cs.udpLost - min(cs.udpLost, cs.udpRcvbuf), ReverseRcvbuf: min(cs.udpLost, cs.udpRcvbuf)}
		if st.ReverseLost > 0 {
			st.ReverseLostAt = cs.udpLostAt
		}
		st.Softirq = dropLedger(softirqs).grown(softirqLook())
		if st.Lost > 0 || st.ReverseLost > 0 {
			st.Drops = drops.grown(lookDrops(join.backends()))
		}
		if err := cs.err(); err != nil {
			inv["tcp_intact"] = append(inv["tcp_intact"], err.Error())
		}
		if st.Lost > 0 {
			st.LostToH3, st.LostToBGP1 = lostByDestination(r, t.Sent)
		}
		rep.Sent += t.Sent
		rep.Received += t.Sink.RxPackets
		st.Duplicated, st.Reordered, st.BeyondWindow = t.Sink.Duplicated, t.Sink.Reordered, t.Sink.BeyondWindow
		rep.Duplicated += t.Sink.Duplicated
		rep.BeyondWindow += t.Sink.BeyondWindow
		switch {
		case t.Sink.Duplicated > 0:
			inv["no_duplicates"] = append(inv["no_duplicates"], fmt.Sprintf("%d frames duplicated at %.0f s", t.Sink.Duplicated, at.Seconds()))
		case t.Sink.RxPackets > t.Sent: // beyond the sink's window
			inv["no_duplicates"] = append(inv["no_duplicates"], fmt.Sprintf("%d frames more than sent at %.0f s", t.Sink.RxPackets-t.Sent, at.Seconds()))
		}
		if err := r.Converge(); err != nil {
			return nil, fmt.Errorf("soak: at %.0f s (%s): %w", at.Seconds(), st.Fault, err)
		}
		for _, f := range []*soakFault{fault, second} {
			if f.isLinkDown() {
				<-f.down.done // it saw bgp1's routes back, or gave up
			}
		}
		if fault != nil && repaired.IsZero() {
			repaired = time.Now().Add(-time.Second) // not within the step: when converge saw it (it waits a second more)
		}
		if fault == nil {
			if st.Lost > 0 {
				rep.LostOutsideFaults += st.Lost
				inv["no_loss_outside_faults"] = append(inv["no_loss_outside_faults"], fmt.Sprintf("%d lost at %.0f s", st.Lost, at.Seconds()))
			}
			if st.ReverseLost > 0 {
				rep.LostOutsideFaults += st.ReverseLost
				inv["no_loss_outside_faults"] = append(inv["no_loss_outside_faults"], fmt.Sprintf("%d of h3's UDP datagrams to h1 lost at %.0f s (%s)", st.ReverseLost, at.Seconds(), st.ReverseLostAt))
			}
		} else {
			st.Fault = fault.kind
			faults := []*soakFault{fault}
			if second != nil {
				faults = append(faults, second)
				st.Fault += "+" + second.kind
			}
			goal, met := stepGoal(faults, st, t.Sink.LossSpan)
			f := FaultReport{Kind: fault.kind, Target: fault.target, Family: st.Family, AtS: faultAt.Sub(start).Seconds(), LostPackets: st.Lost, OutageMS: ms(t.Sink.LossSpan),
				RepairedMS: ms(repaired.Sub(faultAt)), Goal: goal, Met: met}
			f.WithdrawnMS, f.RestoredMS = fault.down.figures()
			fault.flood.report(&f)
			fault.pressure.report(&f)
			if second != nil {
				f.Overlaps = second.kind
				g := f
				g.Kind, g.Target, g.AtS, g.Overlaps, g.RepairedMS = second.kind, second.target, secondAt.Sub(start).Seconds(), fault.kind, ms(repaired.Sub(secondAt))
				g.WithdrawnMS, g.RestoredMS = second.down.figures()
				g.DISTSent, g.JunkSent, g.DISTDropped, g.Changed = 0, 0, 0, ""
				g.ClaimsSent, g.InsideSent, g.InsideDropped, g.GTSMSent, g.GTSMDropped = 0, 0, 0, 0, 0
				g.MemoryLimit, g.OOMKilled = 0, false
				second.flood.report(&g)
				second.pressure.report(&g)
				rep.Faults = append(rep.Faults, f, g)
			} else {
				rep.Faults = append(rep.Faults, f)
			}
		}
		// After a takeover or a suite's restart the new suite holds its
		// feed to the back-ends until its peers are back (finding 5),
		// and the back-ends' feeds connect again; a back-end's agent
		// started again (killed, or a joining back-end's) has a new
		// feed. Each new session brings the table whole, and the step is
		// quiet once every table has arrived (ribSync).
		refresh := restartsFeed(fault, second)
		fibText := fmt.Sprintf("; FIBs not the RIB %v after the step", ribSyncLimit)
		if sync, err := ribs.until(ribSyncLimit, join.backends(), refresh); err != nil {
			inv["fib_equals_rib"] = append(inv["fib_equals_rib"], fmt.Sprintf("at %.0f s, still %v after: %v", at.Seconds(), ribSyncLimit, err))
		} else {
			st.FIBLagMS = ms(sync.Lag)
			fibText = fmt.Sprintf("; FIBs = RIB %.0f ms after quiet", st.FIBLagMS)
			if sync.Lag > ribQuietLimit {
				inv["fib_equals_rib"] = append(inv["fib_equals_rib"], fmt.Sprintf("at %.0f s, the FIBs equalled the RIB %v after quiet (goal %v); the looks: %s", at.Seconds(), sync.Lag.Round(time.Millisecond), ribQuietLimit, sync.Looks))
			}
			ribLag = max(ribLag, sync.Lag)
			if refresh {
				st.FIBRefreshMS = ms(sync.AfterRIB)
				fibText += fmt.Sprintf(" (%.0f ms after the RIB's last change: the tables sent again)", st.FIBRefreshMS)
				ribRefresh = max(ribRefresh, sync.AfterRIB)
			}
			ribTook = max(ribTook, sync.Took)
		}
		rep.Steps = append(rep.Steps, st)
		if ops != nil {
			if err := untilOpsHeld(ops); err != nil {
				inv["operator_state"] = append(inv["operator_state"], fmt.Sprintf("after %.0f s (%s): %v", at.Seconds(), op.text, err))
			}
		}
		if err := maps.look(time.Since(start) >= 2*time.Minute); err != nil {
			inv["bpf_map_bounds"] = append(inv["bpf_map_bounds"], fmt.Sprintf("at %.0f s: %v", at.Seconds(), err))
		}
		split := ""
		if st.Lost > 0 {
			split = fmt.Sprintf(" (to h3 %d, to bgp1's prefixes %d)", st.LostToH3, st.LostToBGP1)
		}
		if st.ReverseLost > 0 {
			split += fmt.Sprintf(", h3 -> h1 UDP lost %d of %d (%s)", st.ReverseLost, st.ReverseSent, st.ReverseLostAt)
		}
		if st.ReverseRcvbuf > 0 {
			split += fmt.Sprintf(", h3 -> h1 UDP %d dropped by h1's full socket buffer", st.ReverseRcvbuf)
		}
		if st.Drops != nil {
			split += " [" + dropsText(st.Drops) + "] [softirq: " + dropsText(st.Softirq) + "]"
		}
		text := faultText(rep, fault)
		if second != nil {
			text += fmt.Sprintf(", and %s on %s %v later", second.kind, second.target, secondAt.Sub(faultAt).Round(time.Millisecond))
		}
		if op != nil {
			text += "; " + op.text
		}
		text += fibText
		fmt.Fprintf(progress, "soak %5.0f s: %s, sent %d, lost %d%s%s\n", at.Seconds(), st.Family, st.Sent, st.Lost, split, text)
	}
	rep.DurationS = time.Since(start).Seconds()
	if churn != nil {
		rep.Churn = churn.report()
		if c := rep.Churn; c.ChangesPerS < issueChurnRate {
			rep.NotYet = append(rep.NotYet, fmt.Sprintf("churn at %d route changes a second or more (this run: %.0f while churning)", issueChurnRate, c.ChangesPerS))
		}
	}
	if ops != nil {
		rep.Operations = ops.done
	}
	if clients != nil {
		rep.Clients = clients.report()
	}
	if join.in { // r4 leaves, so that the lab's processes are as they began
		if err := join.leave(); err != nil {
			return nil, fmt.Errorf("soak: %s leaving at the end: %w", joinName, err)
		}
	}
	if after, err := labProcesses(); err != nil {
		return nil, err
	} else if d := diffCounts(procs, after); d != "" {
		inv["no_process_leak"] = append(inv["no_process_leak"], d)
	}
	inv["bpf_map_bounds"] = append(inv["bpf_map_bounds"], maps.broken()...)
	memStop()
	<-mem.done
	<-cpu.done
	memGrown, memCompared, memLevels := mem.grown()
	inv["agent_memory"] = append(inv["agent_memory"], memGrown...)
	rep.memory, rep.cpu, rep.start = mem, cpu, start
	rep.InvariantsOK = true
	for name, broken := range inv {
		v := Invariant{OK: len(broken) == 0, Detail: "held"}
		if !v.OK {
			v.Detail = strings.Join(broken, "; ")
			rep.InvariantsOK = false
		}
		rep.Invariants[name] = v
	}
	if c := rep.Clients; c != nil {
		rep.Invariants["tcp_intact"] = withDetail(rep.Invariants["tcp_intact"], fmt.Sprintf(
			"every client completed: %d HTTP downloads of 256 KiB from h3 to h1, each with its sha256; %d iperf3 TCP tests from h1 to h3 (%.0f MB, %d retransmits); h3's UDP to h1: %d datagrams, %d lost (in fault steps; %d of them dropped by h1's full socket buffer), %d out of order",
			c.Downloads, len(rep.Steps), float64(c.TCPBytes)/1e6, c.TCPRetransmits, c.ReverseSent, c.ReverseLost, c.ReverseRcvbuf, c.ReverseOutOfOrder))
	}
	rep.Invariants["agent_memory"] = withDetail(rep.Invariants["agent_memory"],
		fmt.Sprintf("every agent process watched for a minute or more (%d compared, from a minute old) grew less than 10%% from its first watched minute to its last: a back-end agent's resident memory just after each of its releases (asked every %v), an LB agent's floors (sampled every %v): %s", memCompared, releaseEvery, memEvery, strings.Join(memLevels, "; ")))
	if ops != nil {
		rep.Invariants["operator_state"] = withDetail(rep.Invariants["operator_state"],
			"after every step the router held what the operator last asked: the drained back-end in no table, the weight set, the file's mode and OSPF cost")
	}
	var reordered uint64
	for _, st := range rep.Steps {
		reordered += st.Reordered
	}
	exact := "exact: no late frame was further behind its flow's newest than the sink's window of 256"
	if rep.BeyondWindow > 0 {
		exact = fmt.Sprintf("a lower bound: %d late frames were further behind their flow's newest than the sink's window of 256, and may have been duplicates", rep.BeyondWindow)
	}
	rep.Invariants["no_duplicates"] = withDetail(rep.Invariants["no_duplicates"],
		fmt.Sprintf("the sink received no frame of the instrument twice (%d duplicated, %d late; the count is %s)", rep.Duplicated, reordered, exact))
	rep.Invariants["bpf_map_bounds"] = withDetail(rep.Invariants["bpf_map_bounds"], maps.detail())
	rep.Invariants["fib_equals_rib"] = withDetail(rep.Invariants["fib_equals_rib"],
		fmt.Sprintf("after every step every back-end's routes were the active VCP's RIB's within %v at most of quiet (goal %v): of the RIB's last change, or in a step whose feeds started again (a takeover, a suite's restart, whose feed waits for its peers, or a back-end agent's) of the last back-end's table arriving whole on its new session, %v at most after the RIB's last change; and %v at most after the step's end (limit %v, the suite's own convergence included)",
			ribLag.Round(time.Millisecond), ribQuietLimit, ribRefresh.Round(time.Millisecond), ribTook.Round(time.Millisecond), ribSyncLimit))
	for _, f := range rep.Faults {
		if !f.Met {
			rep.InvariantsOK = false
		}
	}
	return rep, nil
}
