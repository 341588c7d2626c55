package soak

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/msr-router/msr/bench"
	"github.com/msr-router/msr/demo"
)

// A fault is one kind of fault the soak injects, as a Click element is
// one contract: what it does to the router (inject), what it hits, what
// it may cost the step it comes in (its outage and allowance), and its
// own figures in its row of the report. Each kind has its own file and
// its place in faultTable.
type fault interface {
	kind() string
	target() string
	// inject does the fault; it is tried again for up to overlapWait
	// while its target is between lives (no VCP active yet).
	inject(*bench.RouterLab) error
	// outage is the longest run of frames it may lose alone (0: none).
	outage() time.Duration
	// allow is what of the step's loss it allows; controlPlane says a
	// fault of the step restarts the routing suite.
	allow(st Step, controlPlane bool) allowance
	// report puts its own figures into its row; text says them in the
	// progress line.
	report(*FaultReport)
	text(FaultReport) string
	// restarts is what of the control plane it starts again.
	restarts() restart
	// exclusive names what it holds that a second fault in its step may
	// not touch ("": nothing).
	exclusive() string
}

// An allowance is a fault's share of its step's goal: the goal's words
// ("": none may be lost), the frames it may lose, whether h3's flows may
// lose any, and whether its own figures met their goals.
type allowance struct {
	goal   string
	frames float64
	h3     bool
	met    bool
}

// restart is what of the control plane a fault starts again.
type restart int

const (
	restartsNothing restart = iota
	// restartsFeed: a back-end's RIB feed (its agent killed or joining).
	restartsFeed
	// restartsSuite: the routing suite (a takeover, a suite or keepalived
	// killed); its feeds with it.
	restartsSuite
)

// quiet is a fault's defaults: allowed no loss, no figures of its own,
// nothing restarted, nothing held.
type quiet struct{}

func (quiet) outage() time.Duration      { return 0 }
func (quiet) allow(Step, bool) allowance { return allowance{met: true} }
func (quiet) report(*FaultReport)        {}
func (quiet) text(FaultReport) string    { return "" }
func (quiet) restarts() restart          { return restartsNothing }
func (quiet) exclusive() string          { return "" }

// A longFault holds its step longer than soakStep (external-link-down),
// and is over only when its watch is.
type longFault interface {
	fault
	// prepare readies it for its step and says the step's traffic length.
	prepare(plan *demo.Plan, churned int, backends func() []string) time.Duration
	wait()
}

// faultTable is every kind of fault, in the order FaultKinds lists them;
// draw picks its target (with the soak's rng, so a seed replays a run).
var faultTable = []struct {
	kind string
	draw func(d drawing) fault
}{
	{"lb-agent", func(d drawing) fault { return &agentCrash{what: "lb-agent", host: d.pick(demo.LBs), name: "lb"} }},
	{"backend-agent", func(d drawing) fault {
		return &agentCrash{what: "backend-agent", host: d.pick(demo.Backends), name: "router", feed: true}
	}},
	{"suite", func(drawing) fault {
		return &activeKill{what: "suite", name: "bird", conf: "bird.conf", daemon: "BIRD"}
	}},
	{"keepalived", func(drawing) fault {
		return &activeKill{what: "keepalived", name: "keepalived", conf: "keepalived.conf", daemon: "keepalived"}
	}},
	{"vcp", func(drawing) fault { return vcpCrash{} }},
	{"backend-links", func(d drawing) fault { return &hostDown{host: d.pick(demo.Backends)} }},
	{"external-link", func(drawing) fault { return linkFlap{} }},
	{"external-link-down", func(drawing) fault { return &linkDown{done: make(chan struct{})} }},
	{"hostile", func(drawing) fault { return &flood{} }},
	{"backend-memory", func(d drawing) fault { return &pressure{backend: d.pick(demo.Backends)} }},
	{"backend-join", func(d drawing) fault { return d.join.turn() }},
	{"upgrade", func(d drawing) fault {
		host := d.pick(append(slices.Clone(demo.LBs), demo.Backends...))
		return &upgradeInPlace{host: host, backend: slices.Contains(demo.Backends, host)}
	}},
}

// FaultKinds are the faults a soak draws from (faultTable's).
var FaultKinds = func() []string {
	var kinds []string
	for _, f := range faultTable {
		kinds = append(kinds, f.kind)
	}
	return kinds
}()

// drawing is what drawing a fault needs: the soak's rng, and r4's state
// across the soak (backend-join joins it or takes it out in turn).
type drawing struct {
	rng  *rand.Rand
	join *backendJoin
}

func (d drawing) pick(names []string) string { return names[d.rng.IntN(len(names))] }

// A soakFault is a fault drawn, and when it was injected.
type soakFault struct {
	fault
	at time.Time
}

// drawFault draws a fault of one of kinds.
func drawFault(d drawing, kinds []string) *soakFault {
	kind := kinds[d.rng.IntN(len(kinds))]
	for _, f := range faultTable {
		if f.kind == kind {
			return &soakFault{fault: f.draw(d)}
		}
	}
	panic("soak: fault " + kind) // kinds are checked against FaultKinds first
}

// sameTarget says whether two faults hit the same thing in a way that
// cannot overlap: bgp1's link, r4's joining and leaving.
func (f *soakFault) sameTarget(g *soakFault) bool {
	return f != nil && g != nil && f.exclusive() != "" && f.exclusive() == g.exclusive()
}

// restartsOf is the most any of faults starts again.
func restartsOf(faults ...*soakFault) restart {
	r := restartsNothing
	for _, f := range faults {
		if f != nil {
			r = max(r, f.restarts())
		}
	}
	return r
}

// injectWaiting injects f, trying again every 20 ms for up to
// overlapWait while its target is between lives.
func injectWaiting(f *soakFault, r *bench.RouterLab) error {
	f.at = time.Now()
	err := f.inject(r)
	for err != nil && time.Since(f.at) < overlapWait {
		time.Sleep(20 * time.Millisecond)
		err = f.inject(r)
	}
	return err
}

// backendDownGoal is the longest a back-end host's flows may be lost: the
// LBs drop it after three missed hellos (100 ms apart), and 100 ms more
// for a frame to see it.
const backendDownGoal = 400 * time.Millisecond

// overlapMin and overlapMax bound when an overlapping fault comes after
// the first: within the repairs measured (18 ms for an LB agent to 1.2 s
// for a back-end host down).
const (
	overlapMin = 100 * time.Millisecond
	overlapMax = 600 * time.Millisecond
	// overlapWait is how long an overlapping fault waits for its target
	// to be there.
	overlapWait = 5 * time.Second
)

// stepGoal is a fault step's goal and whether the step met it: none lost
// but what its faults allow (each its own allowance, added), and the
// longest outage they may cause together the union of their own
// (outageUnion).
func stepGoal(faults []*soakFault, st Step, span time.Duration) (string, bool) {
	controlPlane := restartsOf(faults...) == restartsSuite
	var allowed float64
	var parts []string
	h3, met := false, true
	for _, f := range faults {
		a := f.allow(st, controlPlane)
		met = met && a.met
		if a.goal == "" {
			continue
		}
		allowed += a.frames
		h3 = h3 || a.h3
		parts = append(parts, a.goal)
	}
	if parts == nil {
		return "0 lost", st.Lost == 0 && st.ReverseLost == 0
	}
	goal := strings.Join(parts, "; ")
	spanGoal := outageUnion(faults)
	if len(faults) > 1 {
		goal += fmt.Sprintf(" (together: outage ≤ %v, their windows' union)", spanGoal.Round(time.Millisecond))
	}
	if allowed == 0 {
		goal = "0 lost; " + goal
	}
	return goal, float64(st.Lost) <= allowed && span <= spanGoal && (h3 || st.LostToH3 == 0 && st.ReverseLost == 0) && met
}

// outageUnion is the longest run of frames faults together may lose (a
// step's outage: the sink's longest jump of one flow): each fault's window
// is its own outage goal from when it came, and a flow may lose frames
// through windows that overlap one after the other, so the goal is the
// longest stretch of their union. A fault allowed no loss has no window.
func outageUnion(faults []*soakFault) time.Duration {
	type window struct{ from, to time.Time }
	var ws []window
	for _, f := range faults {
		if g := f.outage(); g > 0 {
			ws = append(ws, window{f.at, f.at.Add(g)})
		}
	}
	if len(ws) == 0 {
		return 0
	}
	slices.SortFunc(ws, func(a, b window) int { return a.from.Compare(b.from) })
	longest, cur := time.Duration(0), ws[0]
	for _, w := range ws[1:] {
		if w.from.After(cur.to) {
			longest, cur = max(longest, cur.to.Sub(cur.from)), w
			continue
		}
		if w.to.After(cur.to) {
			cur.to = w.to
		}
	}
	return max(longest, cur.to.Sub(cur.from))
}

// watchRepair is when the router has converged again after a fault (every
// element alive, both LBs' tables, every back-end's routes), looked at every
// 100 ms until until; zero if not by then. A fault whose damage the looks
// never see (a restart quicker than one) is repaired at the first.
func watchRepair(plan *demo.Plan, until time.Time) time.Time {
	for time.Now().Before(until) {
		if len(demo.Look().Converged(plan)) == 0 {
			return time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Time{}
}
