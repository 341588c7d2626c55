package lb

import (
	"cmp"
	"encoding/binary"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/lb/lbapi"
)

// The path meter times the LB's paths through the back-ends and, with
// flowlet_gap auto, sets flowlet mode's gap from their spread.
//
// A flow that moves from back-end A to back-end B after a pause g arrives
// in order if g exceeds how much longer A's path is than B's at that
// moment: its last packet through A must be out before its first through
// B. So every ProbeInterval the agent sends a DIST PROBE through each
// internal port to each back-end of its table, at once (a round); the
// back-end's data path sends it straight back (bpf/router.bpf.c), so it
// waits in the same rings as the data it is balanced with, and the kernel
// stamps its return (SO_TIMESTAMPNS). A round's spread is its longest
// round trip less its shortest. The gap is GapFactor times the 99th
// percentile of the spreads of the last PathWindow, within MinAutoGap and
// MaxAutoGap: a few times the spread, as CONGA's and LetFlow's flowlet
// timeouts are set from the paths' latency difference (Alizadeh et al.,
// SIGCOMM 2014; Vanini et al., NSDI 2017), but measured where the LB runs,
// not fixed at build time.
const (
	ProbeInterval = 10 * time.Millisecond
	// MaxProbesPerRound bounds what a round sends: with hundreds of
	// back-ends each round times the next 32 paths (3,200 frames a
	// second per LB), and the window still holds every path.
	MaxProbesPerRound = 32
	// probeTimeout: a probe not back by then is lost, and its round
	// closed with the others.
	probeTimeout = 100 * time.Millisecond
	PathWindow   = 2 * time.Second
	GapFactor    = 3
	MinAutoGap   = 500 * time.Microsecond
	MaxAutoGap   = 20 * time.Millisecond
	// minRounds: the spread is trusted once this many rounds closed.
	minRounds = 20
)

// pathKey is one path: a back-end through one internal port.
type pathKey struct {
	mac  string
	port uint8
}

type probeOut struct {
	round uint64
	path  pathKey
	sent  time.Time
}

type probeRound struct {
	at  time.Time
	rtt []time.Duration
}

// pathMeter is the meter's state; safe for concurrent use.
type pathMeter struct {
	mu      sync.Mutex
	pending map[uint64]probeOut // by DIST seq
	rounds  map[uint64]*probeRound
	round   uint64
	first   int             // the path the next round starts with
	spreads []time.Duration // closed rounds', oldest first, PathWindow of them
	paths   map[pathKey][]time.Duration
	lostBy  map[pathKey]uint64
	sent    uint64
	back    uint64
	lost    uint64
}

func newPathMeter() *pathMeter {
	return &pathMeter{pending: map[uint64]probeOut{}, rounds: map[uint64]*probeRound{}, paths: map[pathKey][]time.Duration{},
		lostBy: map[pathKey]uint64{}}
}

// windowLen is how many rounds (and samples per path) are kept.
const windowLen = int(PathWindow / ProbeInterval)

// newRound starts a round at now over n paths and returns its number and
// the first path it probes: rounds of more than MaxProbesPerRound paths
// take the next ones in turn.
func (m *pathMeter) newRound(now time.Time, n int) (uint64, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.round++
	m.rounds[m.round] = &probeRound{at: now}
	first := m.first % n
	m.first = first + min(n, MaxProbesPerRound)
	return m.round, first
}

// sentProbe records a probe sealed with seq, sent at t.
func (m *pathMeter) sentProbe(seq, round uint64, p pathKey, t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pending[seq] = probeOut{round: round, path: p, sent: t}
	m.sent++
}

// unsent forgets a probe that could not be sent.
func (m *pathMeter) unsent(seq uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.pending, seq)
	m.sent--
}

// returned takes a reflected probe (authentic and fresh: dist.Conn checked
// it): the seq it was sealed with, the back-end it came from and when the
// kernel received it. A probe this meter did not send, or from another
// back-end than it was sent to, is ignored.
func (m *pathMeter) returned(seq uint64, from net.HardwareAddr, at time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	out, ok := m.pending[seq]
	if !ok || out.path.mac != from.String() {
		return false
	}
	delete(m.pending, seq)
	rtt := at.Sub(out.sent)
	if rtt < 0 {
		rtt = 0
	}
	m.back++
	if r := m.rounds[out.round]; r != nil {
		r.rtt = append(r.rtt, rtt)
	}
	m.paths[out.path] = appendWindow(m.paths[out.path], rtt)
	return true
}

// closeRounds ends the rounds older than probeTimeout: each gives its
// spread, and what did not come back is lost.
func (m *pathMeter) closeRounds(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for n, r := range m.rounds {
		if now.Sub(r.at) < probeTimeout {
			continue
		}
		delete(m.rounds, n)
		if len(r.rtt) >= 2 {
			m.spreads = appendWindow(m.spreads, slices.Max(r.rtt)-slices.Min(r.rtt))
		}
	}
	for seq, out := range m.pending {
		if now.Sub(out.sent) >= probeTimeout {
			delete(m.pending, seq)
			m.lost++
			m.lostBy[out.path]++
		}
	}
}

// forget drops the paths no longer probed (a back-end gone).
func (m *pathMeter) forget(keep map[pathKey]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for p := range m.paths {
		if !keep[p] {
			delete(m.paths, p)
			delete(m.lostBy, p)
		}
	}
}

// gap is flowlet mode's gap from the spreads measured, and false until
// there are enough of them.
func (m *pathMeter) gap() (time.Duration, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.spreads) < minRounds {
		return 0, false
	}
	// The last round counts at once: queues build within milliseconds
	// when traffic starts, faster than a window's percentile moves.
	spread := max(quantile(m.spreads, 0.99), m.spreads[len(m.spreads)-1])
	return min(max(GapFactor*spread, MinAutoGap), MaxAutoGap), true
}

// status reports the paths and the spread.
func (m *pathMeter) status() *lbapi.BackendPaths {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := &lbapi.BackendPaths{Sent: m.sent, Returned: m.back, Lost: m.lost, Rounds: len(m.spreads)}
	if len(m.spreads) > 0 {
		s.SpreadP50Us = quantile(m.spreads, 0.5).Microseconds()
		s.SpreadP99Us = quantile(m.spreads, 0.99).Microseconds()
		s.SpreadMaxUs = slices.Max(m.spreads).Microseconds()
	}
	for p, rtts := range m.paths {
		s.Paths = append(s.Paths, lbapi.BackendPath{Backend: p.mac, PortIndex: p.port, Samples: len(rtts), Lost: m.lostBy[p],
			RTTP50Us: quantile(rtts, 0.5).Microseconds(), RTTP99Us: quantile(rtts, 0.99).Microseconds()})
	}
	slices.SortFunc(s.Paths, func(a, b lbapi.BackendPath) int {
		if a.Backend != b.Backend {
			return cmp.Compare(a.Backend, b.Backend)
		}
		return int(a.PortIndex) - int(b.PortIndex)
	})
	return s
}

// appendWindow appends v, keeping the last windowLen values.
func appendWindow(w []time.Duration, v time.Duration) []time.Duration {
	if len(w) >= windowLen {
		w = append(w[:0], w[len(w)-windowLen+1:]...)
	}
	return append(w, v)
}

// quantile is the q-quantile of w (nearest rank), 0 for none.
func quantile(w []time.Duration, q float64) time.Duration {
	if len(w) == 0 {
		return 0
	}
	s := slices.Clone(w)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// probePaths sends one round: a PROBE to every back-end of the installed
// table through every internal port it is reached by (MaxProbesPerRound
// of them at most).
func (a *Agent) probePaths(now time.Time) {
	a.mu.Lock()
	type target struct {
		path pathKey
		mac  net.HardwareAddr
		port *agentPort
	}
	var targets []target
	keep := map[pathKey]bool{}
	for _, b := range a.tableOf {
		p := pathKey{mac: b.MAC.String(), port: b.PortIndex}
		if keep[p] || int(b.PortIndex) >= len(a.ports) {
			continue
		}
		keep[p] = true
		targets = append(targets, target{path: p, mac: b.MAC, port: a.ports[b.PortIndex]})
	}
	a.mu.Unlock()
	a.paths.forget(keep)
	if len(targets) == 0 {
		return
	}
	round, first := a.paths.newRound(now, len(targets))
	for i := range min(len(targets), MaxProbesPerRound) {
		t := targets[(first+i)%len(targets)]
		c := a.conns[t.port.name]
		if c == nil {
			continue
		}
		sent := time.Now()
		frame, err := a.sender.SealProbe(t.port.mac, t.mac, sent)
		if err != nil {
			continue
		}
		// Recorded before it is sent: it can be back before Send returns.
		seq := binary.BigEndian.Uint64(frame[dist.EthHeaderLen+24:])
		a.paths.sentProbe(seq, round, t.path, sent)
		if c.SendNow(frame) != nil { // a probe sent late would time its wait, not the path's
			a.paths.unsent(seq)
		}
	}
}

// measureGap writes the measured gap when it moved by more than a tenth.
func (a *Agent) measureGap() {
	gap, ok := a.paths.gap()
	if !ok || a.cfg.FlowletGap != 0 {
		return
	}
	a.mu.Lock() // writeConfig writes a.flowletGap too
	defer a.mu.Unlock()
	cur := a.flowletGap
	if d := gap - cur; d < cur/10 && -d < cur/10 {
		return
	}
	if err := a.dp.SetFlowletGap(gap); err != nil {
		a.log.Error("set flowlet gap", "err", err)
		return
	}
	a.flowletGap = gap
}
