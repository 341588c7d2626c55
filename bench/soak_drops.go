package bench

import (
	"fmt"
	"sort"
	"strings"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/router/routerapi"
)

// The soak's drop ledger: every element's drop counters are read before
// and after each step, and a step that lost frames says which counters
// grew meanwhile, so that a loss is accounted for by the element and the
// reason that dropped it (or by none: then it was lost on a wire, in a
// host, or by an agent-less moment that no counter sees). A back-end's
// data-path counters outlive its agent (pinned maps); its agent's own
// (the slow path's) start again with it, so a counter that went down is
// taken as counted from zero.

// dropLedger is one look at every drop counter: "ELEMENT REASON" →
// count.
type dropLedger map[string]uint64

// lookDrops reads the drop counters of both LBs' ports and of backends:
// the data paths' drops, the frames they passed their slow path for no
// route, and what the agents' slow paths dropped.
func lookDrops(backends []string) dropLedger {
	l := dropLedger{}
	for _, b := range backends {
		st, err := routerapi.Local(b, "").Status()
		if err != nil || st.Stats == nil {
			continue
		}
		for k, v := range st.Stats.Drops {
			l[b+" "+k] = v
		}
		l[b+" no_route (slow path)"] = st.Stats.Slow["no_route"]
		for k, v := range st.SlowPath {
			if strings.Contains(k, "drop") || strings.HasPrefix(k, "no_route") || strings.HasSuffix(k, "errors") {
				l[b+" agent "+k] = v
			}
		}
	}
	for _, lb := range demo.LBs {
		st, err := demo.LBStatus(lb)
		if err != nil {
			continue
		}
		for _, p := range st.Ports {
			if p.Stats == nil {
				continue
			}
			for k, v := range p.Stats.Drops {
				l[p.Name+" "+k] = v
			}
		}
	}
	return l
}

// grown is what grew from l to after (a counter that went down counted
// from zero), but for ignored reasons.
func (l dropLedger) grown(after dropLedger) map[string]uint64 {
	g := map[string]uint64{}
	for k, v := range after {
		if was := l[k]; v > was {
			g[k] = v - was
		} else if v < was && v > 0 {
			g[k] = v
		}
	}
	return g
}

// dropsText lists grown counters, the largest first.
func dropsText(g map[string]uint64) string {
	keys := make([]string, 0, len(g))
	for k := range g {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return g[keys[i]] > g[keys[j]] || g[keys[i]] == g[keys[j]] && keys[i] < keys[j] })
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s +%d", k, g[k]))
	}
	if len(parts) == 0 {
		return "no drop counter grew"
	}
	return strings.Join(parts, ", ")
}
