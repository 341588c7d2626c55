package soak

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/msr-router/msr/demo"
)

// TestLostByLB: the frames each flow lacks are its destination's LB's,
// the generator's round-robin giving the first sent%flows one more.
func TestLostByLB(t *testing.T) {
	s := &largeSoak{dsts: []demo.LargePort{{LB: 2}, {LB: 3}, {LB: 2}}}
	// 6 flows, 20 sent: flows 0 and 1 were sent 4, the others 3.
	counts := []uint64{4, 2, 1, 3, 3, 3}
	lost := s.lostByLB(counts, 20)
	if len(lost) != 2 || lost[2] != 2 || lost[3] != 2 {
		t.Errorf("lost by LB %v, want lb2 2 (flow 2), lb3 2 (flow 1)", lost)
	}
	if got := lostText(lost); got != "lb2 2, lb3 2" {
		t.Errorf("lostText %q", got)
	}
}

// TestRunLargeRefuses: a fault the large lab's soak does not inject, or
// a soak too short, is refused before any lab is built.
func TestRunLargeRefuses(t *testing.T) {
	for _, o := range []Options{{Duration: time.Minute, Faults: []string{"vcp"}}, {Duration: time.Second}} {
		if _, err := RunLarge(o, io.Discard); err == nil || !strings.Contains(err.Error(), "soak:") {
			t.Errorf("%+v: %v", o, err)
		}
	}
}
