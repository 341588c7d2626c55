package bench

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/msr-router/msr/traffic"
)

// RFC2544Options is `msr bench rfc2544`: RFC 2544's tests, every DUT in
// one run, their trials interleaved (the only comparison that holds on
// these noisy machines), with the instrument's own ceiling measured in the
// same run.
type RFC2544Options struct {
	DUTs  []string
	Sizes []int
	Tests []string
	Flows int
	FIB   string
	// IPv6 runs every test with IPv6 test frames (RFC 5180); FIB is then
	// an IPv6 table (pyasn6, Nv6).
	IPv6 bool `json:"ipv6,omitempty"`
	// Trial is each trial's length (RFC 2544 §24 asks for at least 60 s;
	// seconds are enough to see the bursts these machines lose, and keep
	// a search within minutes).
	Trial time.Duration
	// Resolution is the throughput search's, relative (0.01: 1%).
	Resolution float64
	// Trials is how many trials judge a rate (Goal.ExceedRatio of them may
	// exceed the loss goal).
	Trials int
	// Confirmations is how many times NDR is searched, for its spread.
	Confirmations int
	// PDROnly searches PDR alone, once: the headline where no rate meets
	// NDR's goal (these VMs' stalls lose frames at any load) and NDR's
	// search would take the whole budget. The throughput test alone.
	PDROnly bool `json:"pdr_only,omitempty"`
	// MaxTrials bounds each NDR search's trials (the first, which finds
	// PDR too, half as many again); 0: unbounded (SearchConfig.MaxTrials).
	MaxTrials int
	// Overload is the recovery test's overload, a multiple of NDR (RFC
	// 2544: 1.1; the overload test goes further).
	Overload float64
	// OverloadTime is how long the overload test runs at 150% of NDR.
	OverloadTime time.Duration
	// MSRBin, if set, is the msr program the reset test runs the whole
	// router's elements with (msr bench: itself); without it, msr's reset
	// restarts only what its bench lab has, the back-end host's links.
	MSRBin string `json:"-"`
}

// RFC2544Tests are the tests `--tests` takes. Per frame size the
// throughput search runs first whenever a test needs its NDR (ndrTests),
// then latency, back-to-back, loss, recovery, reset, overload, single.
var RFC2544Tests = []string{"throughput", "latency", "loss", "back-to-back", "recovery", "reset", "single", "overload"}

// RFC2544Result is a run: each DUT's results per size and test, beside
// the instrument's ceiling of the same run.
type RFC2544Result struct {
	Options RFC2544Options `json:"options"`
	// CeilingPPS is what the instrument alone (generator straight into
	// the sink) carried flat out, per frame size: no DUT result above it
	// is one.
	CeilingPPS map[int]float64 `json:"ceiling_pps"`
	Results    []RFC2544Row    `json:"results"`
	Seconds    float64         `json:"seconds"`
	// Machine says what ran it: kernel, CPUs, memory.
	Machine string `json:"machine"`
	// Figures are the plots WriteReport drew.
	Figures []Plot `json:"figures,omitempty"`
}

// RFC2544Row is one DUT's result of one test at one frame size. The
// throughput fields are the names tools outside rely on.
type RFC2544Row struct {
	DUT  string `json:"dut"`
	Size int    `json:"size"`
	Test string `json:"test"`
	// NDRPPS and PDRPPS are the highest rates with no loss and with at
	// most 0.5% loss, each judged on Trials trials of which half may
	// exceed the goal (Goals says how each was confirmed).
	NDRPPS float64 `json:"ndr_pps"`
	PDRPPS float64 `json:"pdr_pps"`
	// NDRSpread is (max-min)/median of the NDR found by Confirmations
	// searches, NDRs those NDRs.
	NDRSpread float64   `json:"ndr_spread"`
	NDRs      []float64 `json:"ndr_searches_pps"`
	// Converged says every search met its bounds within its trial
	// budget (a DUT whose every rate near NDR loses in about half its
	// trials may not).
	Converged bool    `json:"converged"`
	NDRMbps   float64 `json:"ndr_mbps"` // frames of Size at NDR, L2 with FCS
	// MRRPPS is what the DUT forwarded flat out (MLRsearch's maximum
	// receive rate), where the searches start.
	MRRPPS float64 `json:"mrr_pps"`
	// StabilityLoss are the loss ratios of trials at 10% of the
	// instrument's ceiling, before the search (PASTRAMI: VMs lose
	// frames even at low load).
	StabilityLoss []float64    `json:"stability_loss"`
	Goals         []GoalResult `json:"goals"`
	Trials        int          `json:"trials"`
	// Refused says why a result is not one: at the instrument's ceiling
	// the instrument, not the DUT, was the limit.
	Refused string `json:"refused,omitempty"`

	// Latency (§26.2): one trial at RatePPS (NDRShare of NDR), the
	// latency of every frame the sink counted, and the instrument's own
	// (generator straight into the sink) at the same rate in the same run.
	RatePPS   float64   `json:"rate_pps,omitempty"`
	NDRShare  float64   `json:"ndr_share,omitempty"`
	LatencyUS *Latency  `json:"latency_us,omitempty"`
	FloorUS   *Latency  `json:"instrument_floor_us,omitempty"`
	LossRatio float64   `json:"loss_ratio,omitempty"`
	Histogram []HistBin `json:"histogram,omitempty"`

	// Loss (§26.3): the frame loss rate from the instrument's ceiling
	// down in steps of 10% of it, until two steps in a row lose nothing.
	Curve []LossPoint `json:"curve,omitempty"`

	// Back-to-back (§26.4): the longest burst at the instrument's full
	// rate the DUT forwards without loss, found Trials times; BurstFrames
	// is their median, BurstPPS the rate the bursts left the generator at.
	Bursts      []uint64 `json:"bursts,omitempty"`
	BurstFrames uint64   `json:"burst_frames,omitempty"`
	BurstPPS    float64  `json:"burst_pps,omitempty"`
	// BurstLimit is the longest burst tried (a trial's worth of frames):
	// a DUT that takes it has no limit this test can see.
	BurstLimit uint64 `json:"burst_limit,omitempty"`

	// Recovery (§26.5): RatePPS (NDRShare of NDR) then LowPPS (half NDR);
	// RecoveryMS from the change to the last frame lost. Overload: RatePPS
	// (150% of NDR) for --overload-time, ForwardedPPS on average. Both
	// keep the rate the sink counted per SeriesStepMS.
	LowPPS       float64   `json:"low_pps,omitempty"`
	RecoveryMS   float64   `json:"recovery_ms"`
	ForwardedPPS float64   `json:"forwarded_pps,omitempty"`
	SeriesPPS    []float64 `json:"series_pps,omitempty"`
	SeriesStepMS float64   `json:"series_step_ms,omitempty"`

	// Reset (§26.6): what was restarted (ResetMS: how long the restart
	// itself took) at RatePPS, the frames Lost, the outage as Lost × the
	// inter-frame gap (OutageMS), as the longest run of frames lost
	// (LossSpanMS), and from the first frame lost in the trial to the last
	// (LossWindowMS, which a frame lost apart from the outage widens).
	// Lab is where, if not in the DUT's bench lab: "default" for the
	// whole router's parts (an LB agent, a back-end agent, a back-end
	// host, the active VCP).
	Reset        string  `json:"reset,omitempty"`
	Lab          string  `json:"lab,omitempty"`
	ResetMS      float64 `json:"reset_ms,omitempty"`
	Lost         uint64  `json:"lost,omitempty"`
	OutageMS     float64 `json:"outage_ms,omitempty"`
	LossSpanMS   float64 `json:"loss_span_ms,omitempty"`
	LossWindowMS float64 `json:"loss_window_ms,omitempty"`

	// Single frame: one frame with the next hop's address
	// Neighbor ("unresolved", "resolved"); whether it arrived, and its
	// latency (LatencyUS).
	Neighbor  string `json:"neighbor,omitempty"`
	Forwarded bool   `json:"forwarded,omitempty"`
}

// LossPoint is one step of the frame-loss-rate curve.
type LossPoint struct {
	OfferedPPS float64 `json:"offered_pps"`
	LossRatio  float64 `json:"loss_ratio"`
}

// Latency is a trial's latency quantiles, in microseconds.
type Latency struct {
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
}

// HistBin is one bucket of a latency histogram: how many frames took at
// least LowUS and less than HighUS.
type HistBin struct {
	LowUS  float64 `json:"low_us"`
	HighUS float64 `json:"high_us"`
	Count  uint64  `json:"count"`
}

func latencyOf(h traffic.Histogram) *Latency {
	return &Latency{P50: us(h.Quantile(0.5)), P99: us(h.Quantile(0.99)), P999: us(h.Quantile(0.999)), Max: us(h.Quantile(1))}
}

func histBins(h traffic.Histogram) []HistBin {
	var out []HistBin
	for b, c := range h {
		if c > 0 {
			out = append(out, HistBin{LowUS: float64(traffic.BucketLow(b)) / 1e3, HighUS: float64(traffic.BucketLow(b+1)) / 1e3, Count: c})
		}
	}
	return out
}

// coarseTrial is the length of a search's trials far from its result,
// for full trials of trial: a quarter of one, at least 250 ms (MLRsearch's
// early phases are shorter too), never longer than a full one. A rate
// they pass or fail is looked at again with full trials if it ends up a
// result.
func coarseTrial(trial time.Duration) time.Duration {
	return max(trial/4, min(trial, 250*time.Millisecond))
}

// ndrTests are the tests that need the throughput test's NDR.
var ndrTests = []string{"throughput", "latency", "recovery", "reset", "overload"}

// LatencyShares are the fractions of NDR latency is measured at.
var LatencyShares = []float64{0.1, 0.5, 0.9, 1}

func (o *RFC2544Options) complete() error {
	if len(o.DUTs) == 0 || len(o.Sizes) == 0 {
		return fmt.Errorf("rfc2544: name the DUTs and frame sizes")
	}
	for _, d := range o.DUTs {
		if d == "none" {
			return fmt.Errorf("rfc2544: the instrument (none) is measured in every run; name the DUTs")
		}
	}
	if len(o.Tests) == 0 {
		o.Tests = RFC2544Tests
	}
	for _, t := range o.Tests {
		if !slices.Contains(RFC2544Tests, t) {
			return fmt.Errorf("rfc2544: test %q: this release runs %v", t, RFC2544Tests)
		}
	}
	if o.IPv6 {
		for _, size := range o.Sizes {
			if size < traffic.MinFrameSize6 {
				return fmt.Errorf("rfc2544: frame size %d: an IPv6 test frame is %d bytes at least", size, traffic.MinFrameSize6)
			}
		}
	}
	if o.Trial <= 0 || o.Resolution <= 0 || o.Resolution >= 0.5 || o.Trials < 1 || o.Confirmations < 1 {
		return fmt.Errorf("rfc2544: a positive trial length, a resolution below 50%%, at least one trial and one search")
	}
	if o.PDROnly && !slices.Equal(o.Tests, []string{"throughput"}) {
		return fmt.Errorf("rfc2544: a PDR-only search runs the throughput test alone (the others are taken at shares of NDR)")
	}
	if o.Flows == 0 {
		o.Flows = 1000
	}
	if o.Overload == 0 {
		o.Overload = 1.1
	}
	if o.OverloadTime == 0 {
		o.OverloadTime = 30 * time.Second
	}
	if o.Overload <= 1 || o.OverloadTime < SeriesStep {
		return fmt.Errorf("rfc2544: an overload above 1 (a multiple of NDR) and an overload time of at least %v", SeriesStep)
	}
	return nil
}

// RFC2544 runs the tests. Every DUT's session (lab, sink, data path) and
// the instrument's stay up for the whole run; per frame size the
// instrument's ceiling is measured first, then the DUTs' searches advance
// trial by trial in turn.
func RFC2544(o RFC2544Options, progress io.Writer) (*RFC2544Result, error) {
	start := time.Now()
	if err := o.complete(); err != nil {
		return nil, err
	}
	sessions := map[string]*session{}
	defer func() {
		for _, s := range sessions {
			s.Close()
		}
	}()
	for _, dut := range append([]string{"none"}, o.DUTs...) {
		fo := FwdOptions{DUT: dut, Size: o.Sizes[0], Flows: o.Flows, Duration: o.Trial, IPv6: o.IPv6}
		if dut != "none" {
			fo.FIB = o.FIB
		}
		s, err := openSession(fo)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", dut, err)
		}
		sessions[dut] = s
	}
	// The whole router's lab, for msr's reset and single frames: once a
	// size at most.
	router := &routerLab{msrBin: o.MSRBin, flows: o.Flows, ipv6: o.IPv6}
	defer router.Close()
	res := &RFC2544Result{Options: o, CeilingPPS: map[int]float64{}, Machine: machine()}
	for _, size := range o.Sizes {
		t, err := sessions["none"].trial(size, 0, o.Trial)
		if err != nil {
			return nil, fmt.Errorf("the instrument's ceiling: %w", err)
		}
		ceiling := t.receivedPPS()
		res.CeilingPPS[size] = ceiling
		fmt.Fprintf(progress, "size %d: the instrument carries %.0f pps\n", size, ceiling)
		var rows []RFC2544Row // the throughput test's, which the tests at shares of NDR need
		if slices.ContainsFunc(o.Tests, func(t string) bool { return slices.Contains(ndrTests, t) }) {
			if rows, err = throughput(o, sessions, size, ceiling, progress); err != nil {
				return nil, err
			}
		}
		if slices.Contains(o.Tests, "throughput") {
			res.Results = append(res.Results, rows...)
		}
		if slices.Contains(o.Tests, "latency") {
			lat, err := latency(o, sessions, size, rows, progress)
			if err != nil {
				return nil, err
			}
			res.Results = append(res.Results, lat...)
		}
		if slices.Contains(o.Tests, "back-to-back") {
			b2b, err := backToBack(o, sessions, size, ceiling, progress)
			if err != nil {
				return nil, err
			}
			res.Results = append(res.Results, b2b...)
		}
		if slices.Contains(o.Tests, "loss") {
			curves, err := lossCurves(o, sessions, size, ceiling, progress)
			if err != nil {
				return nil, err
			}
			res.Results = append(res.Results, curves...)
		}
		for _, t := range []struct {
			name string
			run  func(RFC2544Options, map[string]*session, int, []RFC2544Row, io.Writer) ([]RFC2544Row, error)
		}{{"recovery", recovery}, {"reset", func(o RFC2544Options, sessions map[string]*session, size int, ndr []RFC2544Row, progress io.Writer) ([]RFC2544Row, error) {
			return reset(o, sessions, router, size, ndr, progress)
		}}, {"overload", overload}} {
			if !slices.Contains(o.Tests, t.name) {
				continue
			}
			more, err := t.run(o, sessions, size, rows, progress)
			if err != nil {
				return nil, err
			}
			res.Results = append(res.Results, more...)
		}
		if slices.Contains(o.Tests, "single") {
			more, err := single(o, sessions, router, size, progress)
			if err != nil {
				return nil, err
			}
			res.Results = append(res.Results, more...)
		}
		router.Close()
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// dutSearch is one DUT's throughput searches at one size.
type dutSearch struct {
	dut      string
	row      *RFC2544Row
	searches []*Search // the first finds NDR and PDR, the others NDR again
}

// search is the DUT's search under way, a new one once the last ended (at
// the last one's NDR, or the DUT's rate flat out), or nil when all have.
func (d *dutSearch) search(o RFC2544Options, ceiling float64) (*Search, error) {
	n := len(d.searches)
	if n > 0 && !d.searches[n-1].Done() {
		return d.searches[n-1], nil
	}
	if n == o.Confirmations || o.PDROnly && n == 1 {
		return nil, nil
	}
	goals, start := []Goal{NDR, PDR}, d.row.MRRPPS
	if o.PDROnly {
		goals = []Goal{PDR}
	}
	if n > 0 {
		goals = []Goal{NDR}
		if ndr := d.searches[n-1].Results()[0].Rate; ndr > 0 {
			start = ndr
		}
	}
	budget := o.MaxTrials
	if n == 0 {
		budget += budget / 2
	}
	s, err := NewSearch(SearchConfig{Max: ceiling, Start: min(start, ceiling), Resolution: o.Resolution, Trials: o.Trials, Goals: goals, MaxTrials: budget})
	if err != nil {
		return nil, err
	}
	d.searches = append(d.searches, s)
	return s, nil
}

// throughput runs RFC 2544 §26.1 for every DUT at one size: the
// stability pre-check, one trial flat out (the DUT's maximum receive rate,
// where the first search starts; the others start at the NDR before
// theirs), then the searches, interleaved.
func throughput(o RFC2544Options, sessions map[string]*session, size int, ceiling float64, progress io.Writer) ([]RFC2544Row, error) {
	var all []*dutSearch
	for _, dut := range o.DUTs {
		all = append(all, &dutSearch{dut: dut, row: &RFC2544Row{DUT: dut, Size: size, Test: "throughput"}})
	}
	for i := 0; i < o.Trials; i++ {
		for _, d := range all {
			t, err := sessions[d.dut].trial(size, ceiling/10, o.Trial)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", d.dut, err)
			}
			d.row.StabilityLoss = append(d.row.StabilityLoss, t.lossRatio())
		}
	}
	for _, d := range all {
		t, err := sessions[d.dut].trial(size, 0, o.Trial)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.dut, err)
		}
		d.row.MRRPPS = t.receivedPPS()
	}
	for open := len(all); open > 0; {
		open = 0
		for _, d := range all {
			s, err := d.search(o, ceiling)
			if err != nil {
				return nil, err
			}
			if s == nil {
				continue
			}
			open++
			rate, ok := s.Next()
			if !ok {
				continue // done: the next round starts the next search
			}
			length := o.Trial
			if s.Coarse() {
				length = coarseTrial(o.Trial)
			}
			t, err := sessions[d.dut].trial(size, rate, length)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", d.dut, err)
			}
			s.Add(t.lossRatio(), t.offeredPPS())
			fmt.Fprintf(progress, "  %-8s %4d B  search %d  offered %9.0f pps  loss %.6f  (%v)%s\n", d.dut, size, len(d.searches), t.offeredPPS(), t.lossRatio(), length, t.behind())
		}
	}
	var rows []RFC2544Row
	for _, d := range all {
		d.finish(size, ceiling)
		rows = append(rows, *d.row)
	}
	return rows, nil
}

// finish fills a DUT's row from its searches.
func (d *dutSearch) finish(size int, ceiling float64) {
	r := d.row
	r.Converged = true
	for i, s := range d.searches {
		res := s.Results()
		r.Trials += s.TrialCount()
		for _, g := range res {
			r.Converged = r.Converged && g.Converged
		}
		if res[0].Goal == PDR { // a PDR-only search
			r.Goals, r.PDRPPS = res, res[0].OfferedPPS
			continue
		}
		r.NDRs = append(r.NDRs, res[0].OfferedPPS)
		if i == 0 {
			r.Goals = res
			r.NDRPPS, r.PDRPPS = res[0].OfferedPPS, res[1].OfferedPPS
		}
	}
	r.NDRSpread = spread(r.NDRs)
	r.NDRMbps = r.NDRPPS * float64(size) * 8 / 1e6
	// A rate the instrument alone could not exceed is not the DUT's.
	for _, g := range r.Goals {
		if g.AtMax {
			r.Refused = fmt.Sprintf("%s at the instrument's ceiling (%.0f pps): the instrument, not the DUT, is the limit", g.Goal.Name, ceiling)
			if g.Goal == NDR {
				r.NDRPPS, r.NDRMbps = 0, 0
			}
			if g.Goal == PDR {
				r.PDRPPS = 0
			}
		}
	}
}

// spread is (max-min)/median, 0 for fewer than two values or a median
// of 0.
func spread(xs []float64) float64 {
	med := median(xs)
	if len(xs) < 2 || med == 0 {
		return 0
	}
	return (slices.Max(xs) - slices.Min(xs)) / med
}

// WriteText prints the results for people: the DUTs side by side.
func (r *RFC2544Result) WriteText(w io.Writer) {
	searches := fmt.Sprintf("%d NDR searches", r.Options.Confirmations)
	if r.Options.PDROnly {
		searches = "one PDR search, no NDR"
	}
	fmt.Fprintf(w, "RFC 2544, %d flows, trials of %v, resolution %.1f%%, %d trials a rate (half may exceed the goal), %s; %.0f s\n",
		r.Options.Flows, r.Options.Trial, 100*r.Options.Resolution, r.Options.Trials, searches, r.Seconds)
	fmt.Fprintf(w, "%-8s %5s %12s %12s %10s %8s %9s  %s\n", "DUT", "SIZE", "NDR PPS", "PDR PPS", "NDR MBIT/S", "SPREAD", "CEILING", "STABILITY (LOSS AT 10% OF CEILING)")
	for _, row := range r.Results {
		if row.Test != "throughput" {
			continue
		}
		fmt.Fprintf(w, "%-8s %5d %12.0f %12.0f %10.0f %7.1f%% %9.0f  %v\n", row.DUT, row.Size, row.NDRPPS, row.PDRPPS, row.NDRMbps,
			100*row.NDRSpread, r.CeilingPPS[row.Size], row.StabilityLoss)
		if row.Refused != "" {
			fmt.Fprintf(w, "         refused: %s\n", row.Refused)
		}
		if !row.Converged {
			fmt.Fprintf(w, "         not converged: a search's trial budget (--max-trials) ended it; its result is the highest rate that passed full trials\n")
		}
	}
	for _, row := range r.Results {
		if row.Test != "loss" {
			continue
		}
		fmt.Fprintf(w, "\nRFC 2544 frame loss rate, %s %d B (offered pps: loss ratio)\n ", row.DUT, row.Size)
		for _, p := range row.Curve {
			fmt.Fprintf(w, " %.0f: %.4f", p.OfferedPPS, p.LossRatio)
		}
		fmt.Fprintln(w)
	}
	for _, row := range r.Results {
		if row.Test == "back-to-back" {
			fmt.Fprintf(w, "\nRFC 2544 back-to-back, %s %d B: bursts of %v frames without loss (median %d, at %.0f pps; longest tried %d)\n",
				row.DUT, row.Size, row.Bursts, row.BurstFrames, row.BurstPPS, row.BurstLimit)
		}
	}
	for _, row := range r.Results {
		switch row.Test {
		case "recovery":
			fmt.Fprintf(w, "\nRFC 2544 system recovery, %s %d B: %.0f pps (%.0f%% of NDR) for %v, then %.0f pps: loss %.4f, recovered %.1f ms after the change\n",
				row.DUT, row.Size, row.RatePPS, 100*row.NDRShare, r.Options.Trial, row.LowPPS, row.LossRatio, row.RecoveryMS)
		case "reset":
			fmt.Fprintf(w, "\nRFC 2544 reset, %s %d B, %s%s (took %.0f ms) at %.0f pps: %d frames lost = %.1f ms of frames; longest outage %.1f ms; first to last lost %.1f ms\n",
				row.DUT, row.Size, row.Reset, row.labSuffix(), row.ResetMS, row.RatePPS, row.Lost, row.OutageMS, row.LossSpanMS, row.LossWindowMS)
		case "overload":
			fmt.Fprintf(w, "\nOverload, %s %d B: %.0f pps offered (150%% of NDR) for %v: %.0f pps forwarded, loss %.4f\n",
				row.DUT, row.Size, row.RatePPS, r.Options.OverloadTime, row.ForwardedPPS, row.LossRatio)
		case "single":
			lat := "-"
			if row.LatencyUS != nil {
				lat = fmt.Sprintf("%.1f us", row.LatencyUS.Max)
			}
			fmt.Fprintf(w, "\nSingle frame, %s %d B, next hop %s%s: forwarded %v, latency %s\n", row.DUT, row.Size, row.Neighbor, row.labSuffix(), row.Forwarded, lat)
		}
	}
	head := false
	for _, row := range r.Results {
		if row.Test != "latency" {
			continue
		}
		if !head {
			fmt.Fprintf(w, "\nRFC 2544 latency, microseconds, beside the instrument alone at the same rate\n")
			fmt.Fprintf(w, "%-8s %5s %5s %10s %8s %8s %8s %8s  %s\n", "DUT", "SIZE", "NDR", "PPS", "P50", "P99", "P99.9", "MAX", "INSTRUMENT P50/P99/MAX")
			head = true
		}
		l, f := row.LatencyUS, row.FloorUS
		fmt.Fprintf(w, "%-8s %5d %4.0f%% %10.0f %8.1f %8.1f %8.1f %8.1f  %.1f / %.1f / %.1f\n", row.DUT, row.Size, 100*row.NDRShare, row.RatePPS,
			l.P50, l.P99, l.P999, l.Max, f.P50, f.P99, f.Max)
	}
}

// WriteReport writes report.json (the result), the plots (Plots) and
// report.md (the command, the machine, the tables and the plots, for
// people) into dir.
func (r *RFC2544Result) WriteReport(dir, command string) error {
	return writeReport(r, dir, "RFC 2544", command, r.Machine)
}

func (r *RFC2544Result) setFigures(p []Plot) { r.Figures = p }

// latency runs RFC 2544 §26.2 at one size: a trial at each share of every
// DUT's NDR, and the instrument alone at the same rate beside it (its
// floor). The DUTs' trials interleave, share by share.
func latency(o RFC2544Options, sessions map[string]*session, size int, ndr []RFC2544Row, progress io.Writer) ([]RFC2544Row, error) {
	var rows []RFC2544Row
	for _, share := range LatencyShares {
		for _, tp := range ndr {
			if tp.NDRPPS == 0 {
				continue // no zero-loss rate to measure at
			}
			rate := share * tp.NDRPPS
			t, err := sessions[tp.DUT].trial(size, rate, o.Trial)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", tp.DUT, err)
			}
			floor, err := sessions["none"].trial(size, rate, o.Trial)
			if err != nil {
				return nil, fmt.Errorf("the instrument's floor: %w", err)
			}
			row := RFC2544Row{DUT: tp.DUT, Size: size, Test: "latency", RatePPS: t.offeredPPS(), NDRShare: share,
				LatencyUS: latencyOf(t.rep.Latency), FloorUS: latencyOf(floor.rep.Latency), LossRatio: t.lossRatio(),
				Histogram: histBins(t.rep.Latency)}
			fmt.Fprintf(progress, "  %-8s %4d B  latency at %3.0f%% of NDR (%.0f pps): p50 %.1f p99 %.1f us (instrument %.1f / %.1f)\n",
				tp.DUT, size, 100*share, row.RatePPS, row.LatencyUS.P50, row.LatencyUS.P99, row.FloorUS.P50, row.FloorUS.P99)
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// lossCurves runs RFC 2544 §26.3 at one size: a trial per step, from the
// instrument's ceiling down by 10% of it, until two steps in a row lose
// nothing (or the last step, 10%); the DUTs' steps interleave.
func lossCurves(o RFC2544Options, sessions map[string]*session, size int, ceiling float64, progress io.Writer) ([]RFC2544Row, error) {
	rows := make([]RFC2544Row, len(o.DUTs))
	clean := make([]int, len(o.DUTs)) // steps in a row without loss
	for step := 10; step >= 1; step-- {
		for i, dut := range o.DUTs {
			if clean[i] >= 2 {
				continue
			}
			t, err := sessions[dut].trial(size, ceiling*float64(step)/10, o.Trial)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", dut, err)
			}
			p := LossPoint{OfferedPPS: t.offeredPPS(), LossRatio: t.lossRatio()}
			rows[i].Curve = append(rows[i].Curve, p)
			if p.LossRatio == 0 {
				clean[i]++
			} else {
				clean[i] = 0
			}
			fmt.Fprintf(progress, "  %-8s %4d B  loss curve: offered %9.0f pps  loss %.6f\n", dut, size, p.OfferedPPS, p.LossRatio)
		}
	}
	for i, dut := range o.DUTs {
		rows[i].DUT, rows[i].Size, rows[i].Test = dut, size, "loss"
	}
	return rows, nil
}

// backToBack runs RFC 2544 §26.4 at one size: per DUT, Trials times, a
// binary search on the burst length for the longest burst forwarded
// without loss, from one frame to a trial's worth at the ceiling.
func backToBack(o RFC2544Options, sessions map[string]*session, size int, ceiling float64, progress io.Writer) ([]RFC2544Row, error) {
	limit := uint64(ceiling * o.Trial.Seconds())
	var rows []RFC2544Row
	for _, dut := range o.DUTs {
		row := RFC2544Row{DUT: dut, Size: size, Test: "back-to-back", BurstLimit: limit}
		var rates []float64
		for range o.Trials {
			lo, hi := uint64(0), limit+1 // lo passed (0: none), hi failed
			for hi-lo > max(1, uint64(float64(lo)*o.Resolution)) {
				n := (lo + hi) / 2
				if lo == 0 && hi == limit+1 {
					n = limit // first: the longest
				}
				t, err := sessions[dut].burst(size, n)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", dut, err)
				}
				if t.lossRatio() == 0 && t.sent >= n {
					lo = n
					rates = append(rates, t.offeredPPS())
				} else {
					hi = n
				}
				fmt.Fprintf(progress, "  %-8s %4d B  back-to-back %8d frames  loss %.6f\n", dut, size, n, t.lossRatio())
			}
			row.Bursts = append(row.Bursts, lo)
		}
		bursts := make([]float64, len(row.Bursts))
		for i, b := range row.Bursts {
			bursts[i] = float64(b)
		}
		row.BurstFrames, row.BurstPPS = uint64(median(bursts)), median(rates)
		rows = append(rows, row)
	}
	return rows, nil
}
