package vcp

import (
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

// The feed gate opens once the sessions are up and the route count has
// reached no new high for feedSettle: a table still arriving keeps it
// shut, churn under the table's high does not (an Internet table's
// flicker, the soak's churn swinging a quarter of the lab's table), a tiny table's one late route
// does (CI's TestFRRSuite), and so does a table arriving again after its
// session went down, under the high it had before.
func TestFeedGate(t *testing.T) {
	// gate runs the gate with probe i (from 1, every 200 ms) answering
	// sessions(i), counts(i); when it opened, from its start.
	gate := func(sessions func(i int) bool, counts func(i int) int, within time.Duration) (time.Duration, bool) {
		stop := make(chan struct{})
		opened := make(chan time.Duration, 1)
		start := time.Now()
		var probes atomic.Int64
		go feedGate(stop, nil, slog.New(slog.DiscardHandler), func() (bool, int, error) {
			i := int(probes.Add(1))
			return sessions(i), counts(i), nil
		}, func() error {
			opened <- time.Since(start)
			return nil
		})
		defer close(stop)
		select {
		case d := <-opened:
			return d, true
		case <-time.After(within):
			return 0, false
		}
	}
	allUp := func(int) bool { return true }
	if d, ok := gate(allUp, func(i int) int { return 600_000 + i%2*3000 }, 3*time.Second); !ok || d > 2*time.Second {
		t.Errorf("a full table flickering by 0.5%%: gate opened %v after %v, want within 2 s", ok, d)
	}
	if d, ok := gate(allUp, func(i int) int { return 1500 - i%2*500 }, 3*time.Second); !ok || d > 2*time.Second {
		t.Errorf("a table swinging by a third every probe (churn): gate opened %v after %v, want within 2 s", ok, d)
	}
	if d, ok := gate(allUp, func(i int) int { return min(i*100, 1000) }, 4*time.Second); !ok || d < 2*time.Second {
		t.Errorf("a table arriving for 2 s: gate opened %v after %v, want after it arrived and settled", ok, d)
	}
	arrivingThenChurned := func(i int) int {
		if i <= 10 {
			return i * 200
		}
		return 2000 - i%3*250
	}
	if d, ok := gate(allUp, arrivingThenChurned, 5*time.Second); !ok || d < 2*time.Second || d > 4*time.Second {
		t.Errorf("a table arriving for 2 s, then churned by a quarter: gate opened %v after %v, want 3 s", ok, d)
	}
	lateRoute := func(i int) int {
		if i < 5 {
			return 6
		}
		return 7
	}
	if d, ok := gate(allUp, lateRoute, 4*time.Second); !ok || d < 1800*time.Millisecond {
		t.Errorf("six routes, a seventh 0.8 s later: gate opened %v after %v, want a second after the seventh", ok, d)
	}
	// Up with 1,000 routes, down at probes 6-7, then its routes again,
	// 100 a probe, up to 1,000 at probe 17 (3.4 s).
	flapped := func(i int) bool { return i < 6 || i > 7 }
	again := func(i int) int {
		switch {
		case i < 6:
			return 1000
		case i <= 7:
			return 0
		}
		return min((i-7)*100, 1000)
	}
	if d, ok := gate(flapped, again, 6*time.Second); !ok || d < 4*time.Second {
		t.Errorf("a session down and its table arriving again: gate opened %v after %v, want a second after it is all back (3.4 s)", ok, d)
	}
}

// A gate whose process ended stops at once, its feed not opened, and asks
// nothing more: the suite's restarted process has a gate of its own, and
// the old one, probing the new process by its own clock, could open the
// feed before the new process has converged.
func TestFeedGateEndsWithItsProcess(t *testing.T) {
	stop, exited := make(chan struct{}), make(chan struct{})
	defer close(stop)
	var probes atomic.Int64
	ended, opened := make(chan struct{}), make(chan struct{}, 1)
	go func() {
		defer close(ended)
		feedGate(stop, exited, slog.New(slog.DiscardHandler), func() (bool, int, error) {
			probes.Add(1)
			select {
			case <-exited: // the new process: converged
				return true, 100, nil
			default:
				return false, 0, nil
			}
		}, func() error {
			opened <- struct{}{}
			return nil
		})
	}()
	time.Sleep(500 * time.Millisecond)
	if probes.Load() == 0 {
		t.Fatal("the gate never probed")
	}
	close(exited)
	select {
	case <-ended:
	case <-time.After(time.Second):
		t.Fatal("the gate went on after its process ended")
	}
	n := probes.Load()
	time.Sleep(1500 * time.Millisecond) // the probe says converged: a gate still going would open by now
	if probes.Load() != n {
		t.Errorf("probed %d times after it ended", probes.Load()-n)
	}
	select {
	case <-opened:
		t.Error("the gate opened the feed")
	default:
	}
}
