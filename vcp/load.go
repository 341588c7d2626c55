package vcp

import (
	"time"

	"github.com/msr-router/msr/dist"
)

// Load-aware weights. A back-end's weight comes from its capacity
// (configured, set from the console, or announced), which says what the
// machine can do, not what it does now: a back-end slowed by something
// else (another tenant, a failing fan, a lower capacity_pps) keeps its
// share and drops what it cannot carry. So the VCP also watches what each
// back-end drops for want of capacity, from its hellos (the internal
// port's rx_dropped: the data path's capacity drops), and scales its
// weight by a load factor:
//
//   - over each window of at least loadWindow, a back-end that dropped
//     more than loadDropRatio of what it received gets its factor times
//     the share it carried (1 − dropped/received) and a margin
//     (loadMargin), so that its next share fits what it forwarded;
//   - a back-end that has dropped nothing for loadRecoverEvery gets its
//     factor back by loadRecoverStep (at most 1): a probe, so that a
//     back-end that recovered earns its share back, at the cost of one
//     window of drops every loadRecoverEvery while it has not.
//
// The factor stays between loadMinFactor and 1. The tables follow at the
// next tick, as for any weight change.
const (
	loadWindow       = time.Second
	loadDropRatio    = 0.002
	loadMargin       = 0.95
	loadRecoverEvery = 30 * time.Second
	loadRecoverStep  = 1.25
	loadMinFactor    = 0.05
)

// loadState is what the VCP knows of one back-end's load.
type loadState struct {
	factor      float64   // its weight's share of its capacity's, loadMinFactor..1
	rx, dropped uint64    // its counters at the window's start
	since       time.Time // the window's start
	calm        time.Time // since when it has dropped nothing (or the factor last rose)
}

// observeLoad takes a back-end's hello into its load state (a.mu held).
func (a *Agent) observeLoad(name string, h *dist.Hello, now time.Time) {
	if h.Role != dist.RoleRouter || len(h.Ports) == 0 {
		return
	}
	rx, dropped := h.Ports[0].RxPackets, h.Ports[0].RxDropped
	s := a.loads[name]
	if s == nil {
		a.loads[name] = &loadState{factor: 1, rx: rx, dropped: dropped, since: now, calm: now}
		return
	}
	if now.Sub(s.since) < loadWindow {
		return
	}
	drx, ddrop := rx-s.rx, dropped-s.dropped
	restarted := rx < s.rx || dropped < s.dropped // its counters began again
	s.rx, s.dropped, s.since = rx, dropped, now
	switch {
	case restarted:
	case drx > 0 && float64(ddrop) > loadDropRatio*float64(drx):
		carried := 1 - float64(ddrop)/float64(drx)
		before := s.factor
		s.factor = max(loadMinFactor, s.factor*carried*loadMargin)
		s.calm = now
		a.log.Info("back-end overloaded: weight lowered", "name", name, "dropped", ddrop, "received", drx,
			"load_factor", round2(s.factor), "was", round2(before))
	case ddrop > 0:
		s.calm = now
	case s.factor < 1 && now.Sub(s.calm) >= loadRecoverEvery:
		s.factor = min(1, s.factor*loadRecoverStep)
		s.calm = now
		a.log.Info("back-end calm: weight raised", "name", name, "load_factor", round2(s.factor))
	}
}

// loadFactor is a back-end's load factor (1 until it drops).
func (a *Agent) loadFactor(name string) float64 {
	if s := a.loads[name]; s != nil {
		return s.factor
	}
	return 1
}

func round2(f float64) float64 { return float64(int(f*100+0.5)) / 100 }
