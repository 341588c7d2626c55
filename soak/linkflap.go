package soak

import (
	"fmt"
	"time"

	"github.com/msr-router/msr/bench"
)

// extLinkHold is how long an external link flap keeps bgp1's link down:
// under its BGP hold time (9 s), so the session rides over it and its
// routes stay; extLinkGoal is the longest its flows may be lost: the
// flap, the two `ip` commands' own time and a frame's interval more (1.0
// to 1.15 s measured). No other flow may lose a frame.
const (
	extLinkHold = time.Second
	extLinkGoal = extLinkHold + 300*time.Millisecond
)

// bgp1Link is what a fault on bgp1's link holds: one at a time.
const bgp1Link = "bgp1's link"

// linkFlap is external-link: bgp1's link down for extLinkHold at the
// switch (ext3's port q2: the cable pulled at the switch, bgp1 sees its
// carrier go), then up. Not bgp1's own interface: set down, Linux would
// flush its IPv6 addresses (keep_addr_on_down is off), a lab artifact
// that ends its IPv6 session for good. Its goal: bgp1's flows (half the
// step's) lost for extLinkGoal at most, none of h3's.
type linkFlap struct{ quiet }

func (linkFlap) kind() string          { return "external-link" }
func (linkFlap) target() string        { return bgp1Link }
func (linkFlap) exclusive() string     { return bgp1Link }
func (linkFlap) outage() time.Duration { return extLinkGoal }

func (linkFlap) inject(s *bench.RouterLab) error {
	if err := s.IPBatch("ext3", "link set q2 down\n"); err != nil {
		return err
	}
	time.Sleep(extLinkHold)
	return s.IPBatch("ext3", "link set q2 up\n")
}

func (linkFlap) allow(st Step, _ bool) allowance {
	return allowance{goal: fmt.Sprintf("bgp1's flows only, outage ≤ %v", extLinkGoal), frames: float64(st.Sent) / 2, met: true}
}
