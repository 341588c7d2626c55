package soak

import (
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

// flapBGP1Link takes bgp1's link down for extLinkHold at the switch
// (ext3's port q2: the cable pulled at the switch, bgp1 sees its carrier
// go), then up. Not bgp1's own interface: set down, Linux would flush its
// IPv6 addresses (keep_addr_on_down is off), a lab artifact that ends its
// IPv6 session for good.
func flapBGP1Link(s *bench.RouterLab) error {
	if err := s.IPBatch("ext3", "link set q2 down\n"); err != nil {
		return err
	}
	time.Sleep(extLinkHold)
	return s.IPBatch("ext3", "link set q2 up\n")
}
