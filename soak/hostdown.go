package soak

import (
	"fmt"
	"time"

	"github.com/msr-router/msr/bench"
	"github.com/msr-router/msr/demo"
)

// hostDown is backend-links: every link of a back-end's host down for
// bench.HostDownHold, then up. Its flows (its share of the step) are lost
// until the LBs drop it, backendDownGoal at most; no other flow.
type hostDown struct {
	quiet
	host string
}

func (h *hostDown) kind() string          { return "backend-links" }
func (h *hostDown) target() string        { return h.host }
func (h *hostDown) outage() time.Duration { return backendDownGoal }

func (h *hostDown) inject(s *bench.RouterLab) error {
	return s.BounceLinks(h.host, bench.HostDownHold)
}

func (h *hostDown) allow(st Step, _ bool) allowance {
	return allowance{goal: fmt.Sprintf("%s's flows only, outage ≤ %v", h.host, backendDownGoal),
		frames: float64(st.Sent) / float64(len(demo.Backends)), h3: true, met: true}
}
