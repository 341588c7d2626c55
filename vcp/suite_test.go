package vcp

import (
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

// The feed gate opens once the sessions are up and the route count has
// been steady, within 1%, for feedSettle: an Internet table's background
// churn (here ±0.5%) does not keep it shut, a table still arriving or
// swinging by half (the soak's churn) does.
func TestFeedGate(t *testing.T) {
	gate := func(counts func(i int) int, within time.Duration) (time.Duration, bool) {
		stop := make(chan struct{})
		opened := make(chan time.Duration, 1)
		start := time.Now()
		var i atomic.Int64
		go feedGate(stop, slog.New(slog.DiscardHandler), func() (bool, int, error) {
			return true, counts(int(i.Add(1))), nil
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
	if d, ok := gate(func(i int) int { return 600_000 + i%2*3000 }, 3*time.Second); !ok || d > 2*time.Second {
		t.Errorf("a full table flickering by 0.5%%: gate opened %v after %v, want within 2 s", ok, d)
	}
	if d, ok := gate(func(i int) int { return 1000 + i%2*500 }, 2500*time.Millisecond); ok {
		t.Errorf("a table swinging by half every probe: gate opened after %v", d)
	}
	if d, ok := gate(func(i int) int { return min(i*100, 1000) }, 4*time.Second); !ok || d < 2*time.Second {
		t.Errorf("a table arriving for 2 s: gate opened %v after %v, want after it arrived and settled", ok, d)
	}
}
