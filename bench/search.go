package bench

import (
	"fmt"
	"math"
	"slices"
)

// The throughput search of RFC 2544 §26.1, made to stand on machines
// where a trial at a rate the DUT can carry still loses a little now and
// then (here, near NDR, in about half the trials at every rate across
// several percent).
//
// As IETF MLRsearch does, a rate is judged on several trials against a
// goal: its loss ratio (0 for NDR, 0.005 for PDR) and how many of the
// trials may exceed it (the exceed ratio). A rate passes a goal when too
// few of its trials can still exceed it to fail, and fails when more than
// that already have; trials at a rate stop as soon as that is decided.
// One set of trials serves every goal: a trial that loses nothing passes
// NDR and PDR at once.
//
// From its start (the DUT's rate flat out, or an earlier search's NDR)
// the search widens geometrically until a rate passed and one failed
// (without a start, it bisects from the maximum down), then bisects
// between the highest rate that passed and the lowest that failed until
// the gap is within the resolution. While the bounds are far apart its
// trials are coarse (the driver makes them shorter). Then both ends get a
// second look, with fresh full trials: the rate found must pass again
// (else the search goes on below it), and the rate just above it must fail
// again (else the search goes on above it). A burst that made a rate the
// DUT carries fail once, or luck that made one it cannot carry pass once,
// does not decide the result alone. A trial budget bounds the whole.

// Goal is a loss criterion of the search.
type Goal struct {
	Name        string  `json:"name"`         // ndr, pdr
	LossRatio   float64 `json:"loss_ratio"`   // a trial exceeds the goal when it loses more than this
	ExceedRatio float64 `json:"exceed_ratio"` // the share of a rate's trials that may exceed it
}

// The goals RFC 2544 and TRex name: no drop, and partial drop (0.5%).
var (
	NDR = Goal{Name: "ndr", LossRatio: 0, ExceedRatio: 0.5}
	PDR = Goal{Name: "pdr", LossRatio: 0.005, ExceedRatio: 0.5}
)

// SearchConfig bounds a search.
type SearchConfig struct {
	Max float64 // the highest rate tried: the instrument's ceiling
	// Start, if set, is the first rate tried: the DUT's forwarding rate
	// flat out (MLRsearch's maximum receive rate), which NDR rarely
	// exceeds, or an earlier search's NDR. From it the search widens
	// geometrically, up or down, until a rate passes and one fails, then
	// bisects; without it, it bisects from Max down.
	Start      float64
	Resolution float64 // relative: stop when (failing-passing)/failing is at most this
	Trials     int     // trials per rate (default 3)
	Goals      []Goal
	// MaxTrials, if set, ends the search after that many trials: where a
	// DUT loses a burst in about half its trials at every rate near its
	// NDR, each verdict there is a coin toss and a search could wander
	// for long. A goal not found by then gets the highest rate that
	// passed full trials below its upper bound, marked not converged
	// (MLRsearch, too, bounds its search's duration).
	MaxTrials int
}

// rateTrials are the trials at one rate: each one's loss ratio, and the
// rate the instrument really offered.
type rateTrials struct {
	rate    float64
	losses  []float64
	offered []float64
	coarse  bool // shorter trials, far from the result
}

// goalSearch is one goal's progress: the highest passing and lowest
// failing rates so far, and the second looks at both.
type goalSearch struct {
	goal        Goal
	lo, hi      float64 // lo passed (0: none yet), hi failed (+Inf: none yet)
	phase       phase
	result      *rateTrials      // lo's confirming trials
	recheckedHi map[float64]bool // failing rates already looked at twice
	fine        bool             // its trials are no longer coarse
	gaveUp      bool             // the trial budget ended its search
	// step is the relative step of the next rate while only one bound is
	// known: from the start, the search widens its bounds geometrically,
	// as MLRsearch does, before it bisects between them.
	step float64
}

type phase int

const (
	searching phase = iota
	confirmingLo
	confirmingHi
	found
)

// Search is a throughput search's state. Next names the rate of the next
// trial; Add records its loss ratio. It needs no DUT, so the driver
// (rfc2544.go) can interleave the searches of several DUTs, and tests can
// drive it against a simulated DUT.
type Search struct {
	cfg   SearchConfig
	goals []*goalSearch
	cur   *rateTrials // the rate under trial
	// coarse says the rate under trial is far from the result yet (the
	// goal's bounds are CoarseWidth resolutions apart or more, or it has
	// no upper bound): the driver may make its trials shorter, as
	// MLRsearch's early phases do. Second looks are never coarse.
	coarse bool
	// Tried is every rate tried, in order, with its trials' loss ratios.
	Tried []rateTrials
}

// NewSearch starts a search.
func NewSearch(cfg SearchConfig) (*Search, error) {
	if cfg.Trials == 0 {
		cfg.Trials = 3
	}
	if cfg.Max <= 0 || cfg.Resolution <= 0 || cfg.Resolution >= 1 || len(cfg.Goals) == 0 {
		return nil, fmt.Errorf("search: a maximum rate, a resolution in (0, 1) and a goal are needed")
	}
	s := &Search{cfg: cfg}
	for _, g := range cfg.Goals {
		s.goals = append(s.goals, &goalSearch{goal: g, hi: math.Inf(1), recheckedHi: map[float64]bool{}, step: firstStep * cfg.Resolution})
	}
	return s, nil
}

// verdict judges trials against g: +1 passed, -1 failed, 0 undecided.
// Of the search's Trials trials at a rate, the goal's exceed ratio may
// exceed its loss ratio.
func (s *Search) verdict(t *rateTrials, g Goal) int {
	target := s.cfg.Trials
	exceeded := 0
	for _, l := range t.losses {
		if l > g.LossRatio {
			exceeded++
		}
	}
	switch allowed := int(math.Floor(g.ExceedRatio * float64(target))); {
	case exceeded > allowed:
		return -1
	case len(t.losses)-exceeded >= target-allowed:
		return 1
	}
	return 0
}

// Next is the rate of the next trial, or false when every goal is found.
func (s *Search) Next() (float64, bool) {
	if s.cur != nil {
		return s.cur.rate, true
	}
	if s.cfg.MaxTrials > 0 && s.TrialCount() >= s.cfg.MaxTrials {
		s.giveUp()
		return 0, false
	}
	g := s.open()
	for g != nil && g.phase == searching {
		// A goal whose bounds other goals' trials already closed goes
		// straight to its second looks (or its result of 0).
		if s.settle(g); g.phase != found {
			break
		}
		g = s.open()
	}
	if g == nil {
		return 0, false
	}
	var rate float64
	switch {
	case g.phase == confirmingLo:
		rate = g.lo
	case g.phase == confirmingHi:
		rate = g.hi
	case g.lo == 0 && math.IsInf(g.hi, 1):
		rate = s.cfg.Max // can the DUT take everything the instrument makes?
		if s.cfg.Start > 0 && s.cfg.Start < s.cfg.Max {
			rate = s.cfg.Start
		}
	case math.IsInf(g.hi, 1) && s.cfg.Start > 0:
		// From a start, passed, nothing failed yet: up, by a step that
		// doubles.
		rate = min(g.lo*(1+g.step), s.cfg.Max)
		g.step = min(2*g.step, 1)
	case math.IsInf(g.hi, 1):
		rate = s.cfg.Max
	case g.lo == 0 && s.cfg.Start > 0:
		// From a start, failed, nothing passed yet: down, by a step
		// that doubles (to halving).
		rate = g.hi * (1 - g.step)
		g.step = min(2*g.step, 0.5)
	default:
		rate = (g.lo + g.hi) / 2
	}
	// Coarse until the bounds are close, and never again after: a rate
	// that passes short trials may fail long ones, and going back to
	// short trials would find it again.
	s.coarse = g.phase == searching && !g.fine && (math.IsInf(g.hi, 1) || g.hi-g.lo > CoarseWidth*s.cfg.Resolution*g.hi)
	g.fine = g.fine || !s.coarse
	// Trials of the same length already made at this rate count (another
	// goal's), unless this is a second look.
	if g.phase == searching {
		for i := range s.Tried {
			if t := s.Tried[i]; t.rate == rate && t.coarse == s.coarse {
				s.cur = &rateTrials{rate: rate, losses: slices.Clone(t.losses), offered: slices.Clone(t.offered), coarse: t.coarse}
				s.Tried = slices.Delete(s.Tried, i, i+1)
				return rate, true
			}
		}
	}
	s.cur = &rateTrials{rate: rate, coarse: s.coarse}
	return rate, true
}

// firstStep is the search's first step from its start, in resolutions.
const firstStep = 4

// CoarseWidth is how many resolutions apart a goal's bounds are while
// its trials are coarse.
const CoarseWidth = 8

// Coarse says whether the rate Next named is still far from the result
// (see Search.coarse).
func (s *Search) Coarse() bool { return s.coarse }

// open is the first goal not yet found.
func (s *Search) open() *goalSearch {
	for _, g := range s.goals {
		if g.phase != found {
			return g
		}
	}
	return nil
}

// Add records a trial at the rate Next named: its loss ratio, and the
// rate the instrument really offered.
func (s *Search) Add(loss, offered float64) {
	t := s.cur
	t.losses = append(t.losses, loss)
	t.offered = append(t.offered, offered)
	g := s.open()
	v := s.verdict(t, g.goal)
	if v == 0 {
		return
	}
	s.cur = nil
	s.Tried = append(s.Tried, *t)
	switch g.phase {
	case confirmingLo:
		if v < 0 { // lo failed on a second look: search below it
			g.phase, g.hi, g.lo = searching, g.lo, 0
			s.rebound(g)
			return
		}
		g.result = t
		if math.IsInf(g.hi, 1) || g.recheckedHi[g.hi] {
			g.phase = found
			return
		}
		g.phase = confirmingHi
		return
	case confirmingHi:
		g.recheckedHi[g.hi] = true
		if v < 0 {
			g.phase = found
			return
		}
		// hi passed on a second look: search above it.
		g.phase, g.lo, g.hi = searching, g.hi, math.Inf(1)
		s.rebound(g)
		return
	}
	// Every goal still searching learns from a decided rate.
	for _, o := range s.goals {
		if o.phase != searching {
			continue
		}
		switch s.verdict(t, o.goal) {
		case 1:
			if t.rate > o.lo && t.rate < o.hi {
				o.lo = t.rate
			}
		case -1:
			if t.rate < o.hi && t.rate > o.lo {
				o.hi = t.rate
			}
		}
	}
	s.settle(g)
}

// rebound rebuilds g's bounds around a second look that overturned a
// verdict: the highest rate that passed below hi, the lowest that failed
// above lo, of the rates decided so far (the latest trials at a rate
// decide it; a pass in coarse trials does not count, since a full trial
// may fail where a short one passed).
func (s *Search) rebound(g *goalSearch) {
	g.step = firstStep * s.cfg.Resolution // widen again from the overturned bound
	latest := map[float64]int{}
	for _, t := range s.Tried {
		if v := s.verdict(&t, g.goal); v < 0 || !t.coarse {
			latest[t.rate] = v
		}
	}
	for rate, v := range latest {
		switch {
		case v > 0 && rate > g.lo && rate < g.hi:
			g.lo = rate
		case v < 0 && rate < g.hi && rate > g.lo:
			g.hi = rate
		}
	}
	s.settle(g)
}

// minShare is the lowest rate a search tries, as a share of its maximum:
// a goal that fails there is found, at 0.
const minShare = 0.001

// settle starts g's confirmation once its bounds are within the
// resolution, or it passed at the maximum; a goal that failed at every
// rate down to minShare of the maximum is found, at 0.
func (s *Search) settle(g *goalSearch) {
	switch {
	case g.phase != searching:
	case g.lo >= s.cfg.Max:
		g.phase = confirmingLo
	case math.IsInf(g.hi, 1):
	case g.lo == 0 && g.hi <= minShare*s.cfg.Max:
		g.phase = found
	case g.lo > 0 && g.hi-g.lo <= s.cfg.Resolution*g.hi:
		g.phase = confirmingLo
	}
}

// GoalResult is what a search found for one goal.
type GoalResult struct {
	Goal Goal    `json:"goal"`
	Rate float64 `json:"rate_pps"` // the rate asked for; 0: no rate passed
	// OfferedPPS is the median of what the instrument offered in the
	// confirming trials: the result.
	OfferedPPS float64 `json:"offered_pps"`
	// Trials and Exceeded are the confirming trials at Rate: how many,
	// and how many of them exceeded the goal's loss ratio.
	Trials   int  `json:"trials"`
	Exceeded int  `json:"exceeded"`
	AtMax    bool `json:"at_max"` // the DUT passed at the search's maximum: the instrument is the limit
	// Converged is false for a goal the search's trial budget ended
	// before its bounds met and were confirmed.
	Converged bool `json:"converged"`
}

// Results are the goals' rates, once Next says the search is over. A
// goal's result is the highest rate whose confirming trials pass it, its
// own or another goal's: the NDR's confirming trials also confirm the
// PDR at that rate (a trial without loss is within 0.5%), so on a noisy
// DUT, where the PDR's own second looks may settle lower than the NDR
// did (TestRFC2544 once: NDR 668,898 pps, PDR 581,121), the PDR is
// reported at the NDR's rate, never below it.
func (s *Search) Results() []GoalResult {
	var out []GoalResult
	for _, g := range s.goals {
		r := GoalResult{Goal: g.goal, Converged: !g.gaveUp}
		best := g.result
		for _, o := range s.goals {
			if o.result != nil && (best == nil || o.result.rate > best.rate) && s.verdict(o.result, g.goal) > 0 {
				best = o.result
			}
		}
		if best != nil {
			r.Rate, r.Trials, r.AtMax = best.rate, len(best.losses), best.rate >= s.cfg.Max
			r.OfferedPPS = median(best.offered)
			for _, l := range best.losses {
				if l > g.goal.LossRatio {
					r.Exceeded++
				}
			}
		}
		out = append(out, r)
	}
	return out
}

// giveUp ends the search at its trial budget: every goal not found gets
// the highest rate that passed full trials below its upper bound (the
// lowest rate that failed, as the search stood; none: no result).
func (s *Search) giveUp() {
	for _, g := range s.goals {
		if g.phase == found {
			continue
		}
		g.phase, g.gaveUp = found, true
		for i := range s.Tried {
			t := &s.Tried[i]
			if !t.coarse && t.rate < g.hi && s.verdict(t, g.goal) > 0 && (g.result == nil || t.rate > g.result.rate) {
				g.result = t
			}
		}
	}
}

// Done says the search is over: Next has said so, and Results hold.
func (s *Search) Done() bool { return s.cur == nil && s.open() == nil }

// TrialCount is how many trials the search has made.
func (s *Search) TrialCount() int {
	n := 0
	for _, t := range s.Tried {
		n += len(t.losses)
	}
	if s.cur != nil {
		n += len(s.cur.losses)
	}
	return n
}
