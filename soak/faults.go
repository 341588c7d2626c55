package soak

import (
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/msr-router/msr/bench"
	"github.com/msr-router/msr/demo"
)

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

// stepGoal is a fault step's goal and whether the step met it: none lost,
// but a back-end host's links down may lose its share of the step (a
// third) for backendDownGoal, and bgp1's link down bgp1's flows (half)
// for extLinkGoal, none of h3's; overlapping faults add their allowances,
// and the longest outage they may cause together is the union of their
// own (outageUnion).
func stepGoal(faults []*soakFault, st Step, span time.Duration) (string, bool) {
	var allowed float64
	var parts []string
	h3 := false // may h3's flows lose frames
	routesMet := true
	controlPlane := restartsControlPlane(faults...) // a suite, keepalived or VCP restarted in the step
	for _, f := range faults {
		switch f.kind {
		case "backend-links":
			allowed += float64(st.Sent) / float64(len(demo.Backends))
			h3 = true
			parts = append(parts, fmt.Sprintf("%s's flows only, outage ≤ %v", f.target, backendDownGoal))
		case "external-link":
			allowed += float64(st.Sent) / 2
			parts = append(parts, fmt.Sprintf("bgp1's flows only, outage ≤ %v", extLinkGoal))
		case "external-link-down":
			allowed += float64(st.Sent) / 2
			withdrawGoal, restoreGoal := f.down.goals()
			w, r := f.down.figures()
			if controlPlane {
				// The new suite's feed waits for its peers (up to 30 s),
				// the back-ends keeping the routes they had: bgp1's stay.
				parts = append(parts, fmt.Sprintf("bgp1's flows only, its routes back ≤ %v after the link came up (a takeover's graceful restart may keep them meanwhile)", restoreGoal))
				routesMet = routesMet && r > 0 && r <= ms(restoreGoal)
				continue
			}
			parts = append(parts, fmt.Sprintf("bgp1's flows only, its routes withdrawn ≤ %v after the link went down, back ≤ %v after it came up", withdrawGoal, restoreGoal))
			routesMet = routesMet && w > 0 && r > 0 && w <= ms(withdrawGoal) && r <= ms(restoreGoal)
		}
	}
	for _, f := range faults {
		if f.kind == "hostile" {
			parts = append(parts, "every DIST frame, SYN to the inside and BFD below TTL 255 dropped at the edge and counted, nothing changed")
			routesMet = routesMet && f.flood.met()
		}
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
	return goal, float64(st.Lost) <= allowed && span <= spanGoal && (h3 || st.LostToH3 == 0 && st.ReverseLost == 0) && routesMet
}

// outageGoal is the longest run of frames a fault may lose alone: its
// own goal's outage (0: none may be lost).
func (f *soakFault) outageGoal() time.Duration {
	switch f.kind {
	case "backend-links":
		return backendDownGoal
	case "external-link":
		return extLinkGoal
	case "external-link-down":
		_, restore := f.down.goals()
		return f.down.downFor() + restore
	}
	return 0
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
		if g := f.outageGoal(); g > 0 {
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

func faultText(rep *Report, f *soakFault) string {
	if f == nil {
		return ""
	}
	last := rep.Faults[len(rep.Faults)-1]
	if last.Overlaps != "" { // the pair's second: the first is the one before
		last = rep.Faults[len(rep.Faults)-2]
	}
	text := fmt.Sprintf(", fault %s on %s: outage %.1f ms, repaired in %.0f ms", f.kind, f.target, last.OutageMS, last.RepairedMS)
	if f.flood != nil {
		changed := ""
		if last.Changed != "" {
			changed = "; " + last.Changed
		}
		text += fmt.Sprintf(" (%d DIST frames, %d claims for ospf1, %d SYNs to the inside, %d BFD at TTL 64 and %d random ones from h2: %d DIST, %d to the inside and %d BFD dropped at lb1/e1%s)",
			last.DISTSent, last.ClaimsSent, last.InsideSent, last.GTSMSent, last.JunkSent, last.DISTDropped, last.InsideDropped, last.GTSMDropped, changed)
	}
	if f.pressure != nil {
		text += fmt.Sprintf(" (limit %.1f MB", float64(last.MemoryLimit)/1e6)
		if last.OOMKilled {
			text += ", killed for it and started again"
		}
		text += ")"
	}
	if f.isLinkDown() {
		text += " (bgp1's routes " + sinceText("withdrawn", last.WithdrawnMS, "the link went down") + ", " + sinceText("back", last.RestoredMS, "it came up") + ")"
	}
	return text
}

// A soakFault is a fault drawn: its kind, the element it hits, and how;
// an external-link-down's watch of bgp1's routes.
type soakFault struct {
	kind, target string
	at           time.Time // when it was injected
	do           func(*bench.RouterLab) error
	down         *linkDown
	flood        *flood
	pressure     *pressure
	join         *backendJoin
}

func (f *soakFault) isLinkDown() bool { return f != nil && f.down != nil }

// sameTarget says whether two faults hit the same thing in a way that
// cannot overlap: bgp1's link, r4's joining and leaving.
func (f *soakFault) sameTarget(g *soakFault) bool {
	return f.bgp1Link() && g.bgp1Link() || f != nil && g != nil && f.join != nil && g.join != nil
}

// bgp1Link says whether the fault takes bgp1's link down.
func (f *soakFault) bgp1Link() bool {
	return f != nil && (f.kind == "external-link" || f.kind == "external-link-down")
}

// drawFault draws a fault of one of kinds, and the element it hits; join
// is r4's state, which backend-join changes.
func drawFault(rng *rand.Rand, kinds []string, join *backendJoin) *soakFault {
	kind := kinds[rng.IntN(len(kinds))]
	switch kind {
	case "lb-agent":
		lb := demo.LBs[rng.IntN(len(demo.LBs))]
		return &soakFault{kind: kind, target: lb, do: func(*bench.RouterLab) error { return bench.Crash(lb, "lb") }}
	case "backend-agent":
		b := demo.Backends[rng.IntN(len(demo.Backends))]
		return &soakFault{kind: kind, target: b, do: func(*bench.RouterLab) error { return bench.Crash(b, "router") }}
	case "backend-links":
		b := demo.Backends[rng.IntN(len(demo.Backends))]
		return &soakFault{kind: kind, target: b, do: func(s *bench.RouterLab) error { return s.BounceLinks(b, bench.HostDownHold) }}
	case "external-link":
		return &soakFault{kind: kind, target: "bgp1's link", do: flapBGP1Link}
	case "external-link-down":
		d := &linkDown{done: make(chan struct{})}
		return &soakFault{kind: kind, target: "bgp1's link, past its hold time", do: d.run, down: d}
	case "vcp":
		return &soakFault{kind: kind, target: "the active VCP", do: func(*bench.RouterLab) error { return bench.CrashActiveVCP() }}
	case "backend-join":
		what := joinName + " joining"
		if join.in {
			what = joinName + " leaving"
		}
		return &soakFault{kind: kind, target: what, do: join.run, join: join}
	case "backend-memory":
		p := &pressure{backend: demo.Backends[rng.IntN(len(demo.Backends))]}
		return &soakFault{kind: kind, target: p.backend + "'s agent", do: p.run, pressure: p}
	case "hostile":
		f := &flood{}
		return &soakFault{kind: kind, target: "lb1/e1, from h2", do: f.run, flood: f}
	case "suite":
		return &soakFault{kind: kind, target: "BIRD on the active VCP", do: func(*bench.RouterLab) error { return killActive("bird", "bird.conf") }}
	case "keepalived":
		return &soakFault{kind: kind, target: "keepalived on the active VCP", do: func(*bench.RouterLab) error { return killActive("keepalived", "keepalived.conf") }}
	}
	panic("soak: fault " + kind)
}

// killActive kills -9 every process named name whose command line names
// the active VCP's file conf (its run directory's).
func killActive(name, conf string) error {
	active, err := bench.ActiveVCP()
	if err != nil {
		return err
	}
	path := filepath.Join(demo.RunDir, active, conf)
	out, err := exec.Command("pgrep", "-f", name+" .*"+path).Output()
	if err != nil {
		return fmt.Errorf("no %s of %s running: %v", name, active, err)
	}
	for _, f := range strings.Fields(string(out)) {
		pid, _ := strconv.Atoi(f)
		syscall.Kill(pid, syscall.SIGKILL)
	}
	return nil
}

// restartsControlPlane says whether one of faults restarts a suite (a
// takeover, a keepalived or suite kill).
func restartsControlPlane(faults ...*soakFault) bool {
	for _, f := range faults {
		if f != nil && (f.kind == "suite" || f.kind == "keepalived" || f.kind == "vcp") {
			return true
		}
	}
	return false
}

// restartsFeed says whether one of faults starts a RIB feed again: a
// control plane's restart, or a back-end's agent killed (by the soak or
// by its memory limit) or joining.
func restartsFeed(faults ...*soakFault) bool {
	for _, f := range faults {
		if f != nil && (f.kind == "backend-agent" || f.kind == "backend-join" || f.pressure != nil && f.pressure.killed) {
			return true
		}
	}
	return restartsControlPlane(faults...)
}
