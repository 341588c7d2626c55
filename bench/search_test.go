package bench

import (
	"math"
	"math/rand/v2"
	"testing"
)

// simDUT is a DUT with a known loss curve: below its capacity it loses
// nothing but a burst now and then (as veth rings do here), above it
// loses what it cannot carry.
type simDUT struct {
	capacity float64 // pps
	burst    float64 // the chance that a trial below capacity loses a burst
	r        *rand.Rand
}

func (d *simDUT) trial(rate float64) float64 {
	if rate > d.capacity {
		return (rate - d.capacity) / rate * (0.9 + 0.2*d.r.Float64())
	}
	if d.r.Float64() < d.burst {
		return 1e-5 * d.r.Float64() // a few hundred frames of a trial
	}
	return 0
}

// run drives a search against d to its end.
func run(t *testing.T, s *Search, d *simDUT) []GoalResult {
	t.Helper()
	for n := 0; ; n++ {
		rate, ok := s.Next()
		if !ok {
			return s.Results()
		}
		if n > 500 {
			t.Fatalf("the search did not end: %+v", s.Tried)
		}
		s.Add(d.trial(rate), rate)
	}
}

// Against a DUT that loses a burst in one trial of ten below its
// capacity, the search finds NDR and PDR within the resolution, every
// time, in a bounded number of trials.
func TestSearchFindsNDRAndPDR(t *testing.T) {
	const capacity, max, res = 300_000.0, 2_500_000.0, 0.01
	pdr := capacity / (1 - PDR.LossRatio) // where the loss reaches 0.5%
	for seed := uint64(1); seed <= 200; seed++ {
		d := &simDUT{capacity: capacity, burst: 0.1, r: rand.New(rand.NewPCG(seed, 1))}
		s, err := NewSearch(SearchConfig{Max: max, Resolution: res, Goals: []Goal{NDR, PDR}})
		if err != nil {
			t.Fatal(err)
		}
		rs := run(t, s, d)
		ndr, got := rs[0], rs[1]
		if ndr.Rate > capacity || ndr.Rate < capacity*(1-2*res) {
			t.Errorf("seed %d: NDR %.0f, the DUT's is %.0f (resolution %.0f%%): %+v", seed, ndr.Rate, capacity, 100*res, s.Tried)
		}
		if got.Rate < ndr.Rate || got.Rate > pdr*(1+res) || got.Rate < pdr*(1-3*res) {
			t.Errorf("seed %d: PDR %.0f, the DUT's is %.0f", seed, got.Rate, pdr)
		}
		if ndr.Trials < 2 || ndr.Exceeded > 1 {
			t.Errorf("seed %d: NDR confirmed by %d trials, %d exceeding", seed, ndr.Trials, ndr.Exceeded)
		}
		if n := s.TrialCount(); n > 80 {
			t.Errorf("seed %d: %d trials", seed, n)
		}
	}
}

// A DUT that carries everything the instrument makes is reported at the
// maximum, marked so; one that loses at every rate is reported at 0.
func TestSearchLimits(t *testing.T) {
	for _, c := range []struct {
		capacity float64
		want     float64
		atMax    bool
	}{{5e6, 1e6, true}, {0, 0, false}} {
		d := &simDUT{capacity: c.capacity, r: rand.New(rand.NewPCG(1, 1))}
		s, _ := NewSearch(SearchConfig{Max: 1e6, Resolution: 0.01, Goals: []Goal{NDR}})
		r := run(t, s, d)[0]
		if r.Rate != c.want || r.AtMax != c.atMax {
			t.Errorf("capacity %.0f: %+v", c.capacity, r)
		}
	}
}

// A rate that passed by luck and fails its confirmation is searched again
// below: the result is one that passed twice.
func TestSearchConfirms(t *testing.T) {
	// Every trial at 500k and below passes; above, trials fail except
	// the first two at each rate (a DUT that is lucky once).
	seen := map[float64]int{}
	s, _ := NewSearch(SearchConfig{Max: 1e6, Resolution: 0.05, Goals: []Goal{NDR}})
	for n := 0; n < 500; n++ {
		rate, ok := s.Next()
		if !ok {
			break
		}
		seen[rate]++
		loss := 0.0
		if rate > 500_000 && seen[rate] > 2 {
			loss = 0.01
		}
		s.Add(loss, rate)
	}
	r := s.Results()[0]
	if r.Rate > 500_000 || r.Rate < 500_000*0.9 || math.IsNaN(r.Rate) {
		t.Errorf("NDR %.0f after a failed confirmation, want at most 500000: %+v", r.Rate, s.Tried)
	}
}
