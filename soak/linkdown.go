package soak

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/msr-router/msr/bench"
	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/router/routerapi"
)

// The external-link-down fault keeps bgp1's link down past its BGP hold
// time (9 s) and the graceful-restart time bgp1 advertises (5 s: the
// router keeps a lost peer's routes that long), so that the router's BIRD
// ends the session and withdraws bgp1's routes from every back-end. The
// goals: bgp1's routes gone from every back-end within linkDownTimers of
// the link going down (the two timers and 2 s for the RIB feed), back
// within linkUpTimers of it coming up (BIRD's next SYN, at most its
// connect retry time of 5 s; BGP's OPEN; bgp1's UPDATEs; the feed), each
// plus the time the back-ends take to lose or learn bgp1's table
// (tableMove), and none of h3's flows lost meanwhile. The link stays down
// for the withdrawal's goal; its step carries linkDownAfter of traffic
// more.
const (
	linkDownTimers = 16 * time.Second
	linkUpTimers   = 20 * time.Second
	linkDownAfter  = 14 * time.Second
)

// tableMoveRate is how many routes a second the back-ends lose or learn
// under the soak's load. Measured with a full table (600,000 routes, the
// default lab idle, bgp1's link down 25 s): they left the three back-ends
// 6.6-7.6 s after BIRD flushed them and came back 6.1-8.9 s after the
// link did, about 80,000 a second, the agents' CPU bound (40-75% of a core
// each, two cores for the whole lab); the soak's traffic, churn and a
// back-end joining take some of those cores.
const tableMoveRate = 50_000

// tableMove is how long n routes take to leave or reach the back-ends:
// 0.04 s for TestSoak's 2,000, 12 s for a full table.
func tableMove(n int) time.Duration { return time.Duration(n) * time.Second / tableMoveRate }

// linkDown is an external-link-down fault: bgp1's link down at the switch
// (as linkFlap) for downFor, and a watch of bgp1's routes on the
// back-ends from then until they are back after the link (or for a
// minute more).
type linkDown struct {
	quiet
	prefixes []netip.Prefix // bgp1's, one of each family the traffic crosses
	// bgp1Routes is how many prefixes bgp1 announces: the routes each
	// back-end loses with its link, but for those the churn holds
	// withdrawn (churned: both families' churned prefixes).
	bgp1Routes, churned int
	// backends are the back-ends in the router now: the lab's, and r4
	// while it is in (a back-end joining in the same step must learn
	// bgp1's routes back too; one that joined before the fault, lose
	// them). A back-end that joined after the watch began is not held to
	// its count of routes before.
	backends            func() []string
	downAt, upAt        time.Time
	withdrawn, restored time.Time
	done                chan struct{} // closed when the watch ends
}

func (d *linkDown) inject(s *bench.RouterLab) error {
	if err := s.IPBatch("ext3", "link set q2 down\n"); err != nil {
		return err
	}
	d.downAt = time.Now()
	up := make(chan time.Time, 1)
	go d.watch(up)
	time.Sleep(d.downFor())
	err := s.IPBatch("ext3", "link set q2 up\n")
	up <- time.Now()
	return err
}

// watch looks at every back-end's (d.backends) routes to d.prefixes
// every 100 ms, and at its count of routes: withdrawn when none has any
// and each has lost bgp1's table (its count at least bgp1Routes, less
// what the churn may have held withdrawn, below its count before the
// fault), restored when, after the link came up, all have all and each
// has its count back (withdrawn before or not: a takeover's graceful
// restart keeps them, stepGoal). With a full table the few prefixes alone would say
// withdrawn while most of bgp1's routes are still being removed.
func (d *linkDown) watch(up <-chan time.Time) {
	defer close(d.done)
	var upAt time.Time
	defer func() { d.upAt = upAt }()
	before := map[string]int{}
	for _, b := range d.backends() {
		if st, err := routerapi.Local(b, "").Status(); err == nil {
			before[b] = st.Routes + st.Routes6
		}
	}
	slack := d.churned // the churned prefixes, announced or not
	for deadline := d.downAt.Add(d.downFor() + time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		select {
		case upAt = <-up:
		default:
		}
		present, absent := 0, 0
		allGone, allBack := true, true // by the counts
		bs := d.backends()
		for _, b := range bs {
			if st, err := routerapi.Local(b, "").Status(); err == nil && before[b] > 0 {
				n := st.Routes + st.Routes6
				allGone = allGone && n <= before[b]-d.bgp1Routes+slack
				allBack = allBack && n >= before[b]-slack
			}
			for _, p := range d.prefixes {
				routes, err := routerapi.Local(b, "").Route(p.String())
				switch {
				case err != nil: // between lives: neither
				case len(routes) > 0:
					present++
				default:
					absent++
				}
			}
		}
		total := len(bs) * len(d.prefixes)
		switch {
		case d.withdrawn.IsZero() && absent == total && allGone:
			d.withdrawn = time.Now()
		case !upAt.IsZero() && present == total && allBack:
			d.restored = time.Now()
			return
		}
	}
}

// goals are the withdrawal's and the restoration's, for bgp1's table.
func (d *linkDown) goals() (withdraw, restore time.Duration) {
	return linkDownTimers + tableMove(d.bgp1Routes), linkUpTimers + tableMove(d.bgp1Routes)
}

// downFor is how long the link stays down: the withdrawal's goal, so that
// the watch can see it before the link comes back.
func (d *linkDown) downFor() time.Duration {
	w, _ := d.goals()
	return w
}

// figures are the withdrawal's time from the link going down and the
// restoration's from its coming up, in ms (0: not seen); none for a
// fault of another kind.
func (d *linkDown) figures() (withdrawnMS, restoredMS float64) {
	if d == nil {
		return 0, 0
	}
	if !d.withdrawn.IsZero() {
		withdrawnMS = ms(d.withdrawn.Sub(d.downAt))
	}
	if !d.restored.IsZero() {
		restoredMS = ms(d.restored.Sub(d.upAt))
	}
	return withdrawnMS, restoredMS
}

// bgp1Watched are the bgp1 prefixes the soak's traffic crosses first, of
// each family (soakFamily: the first flow to bgp1's goes to the first
// prefix; never churned).
func bgp1Watched(plan *demo.Plan) []netip.Prefix {
	ps := []netip.Prefix{plan.Prefixes[0]}
	if len(plan.Prefixes6) > 0 {
		ps = append(ps, plan.Prefixes6[0])
	}
	return ps
}

func (d *linkDown) kind() string      { return "external-link-down" }
func (d *linkDown) target() string    { return "bgp1's link, past its hold time" }
func (d *linkDown) exclusive() string { return bgp1Link }

// prepare gives the watch what it looks for, and says how long the
// step's traffic runs: the link's time down and linkDownAfter.
func (d *linkDown) prepare(plan *demo.Plan, churned int, backends func() []string) time.Duration {
	d.prefixes = bgp1Watched(plan)
	d.bgp1Routes = len(plan.Prefixes) + len(plan.Prefixes6)
	d.churned = churned
	d.backends = backends
	return d.downFor() + linkDownAfter
}

// wait returns when the watch saw bgp1's routes back, or gave up.
func (d *linkDown) wait() { <-d.done }

// outage is its flows' longest loss: the link down, and its routes back.
func (d *linkDown) outage() time.Duration {
	_, restore := d.goals()
	return d.downFor() + restore
}

// allow is bgp1's flows (half the step's), none of h3's, and bgp1's
// routes withdrawn and back in time. With the suite restarted in the
// step, the new suite's feed waits for its peers (up to 30 s), the
// back-ends keeping the routes they had: bgp1's stay, and only their
// return is judged.
func (d *linkDown) allow(st Step, controlPlane bool) allowance {
	withdrawGoal, restoreGoal := d.goals()
	w, r := d.figures()
	a := allowance{frames: float64(st.Sent) / 2}
	if controlPlane {
		a.goal = fmt.Sprintf("bgp1's flows only, its routes back ≤ %v after the link came up (a takeover's graceful restart may keep them meanwhile)", restoreGoal)
		a.met = r > 0 && r <= ms(restoreGoal)
		return a
	}
	a.goal = fmt.Sprintf("bgp1's flows only, its routes withdrawn ≤ %v after the link went down, back ≤ %v after it came up", withdrawGoal, restoreGoal)
	a.met = w > 0 && r > 0 && w <= ms(withdrawGoal) && r <= ms(restoreGoal)
	return a
}

func (d *linkDown) report(into *FaultReport) { into.WithdrawnMS, into.RestoredMS = d.figures() }

func (d *linkDown) text(row FaultReport) string {
	return " (bgp1's routes " + sinceText("withdrawn", row.WithdrawnMS, "the link went down") + ", " + sinceText("back", row.RestoredMS, "it came up") + ")"
}
