package vcp

import (
	"testing"
	"time"
)

// The supervisor gives up after crashLimit deaths within crashWindow,
// across the suite's daemons; older deaths do not count.
func TestSupervisorCrashWindow(t *testing.T) {
	var s supervisor
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		after time.Duration
		want  bool
	}{
		{0, false},
		{10 * time.Second, false},
		{61 * time.Second, false}, // the first is out of the window
		{65 * time.Second, true},  // 10 s, 61 s, 65 s
		{200 * time.Second, false},
	} {
		if got := s.crashed(t0.Add(c.after)); got != c.want {
			t.Errorf("death at +%v: limit reached %v, want %v", c.after, got, c.want)
		}
	}
}
