package lb

import (
	"net"
	"testing"
	"time"
)

var (
	pathR1 = net.HardwareAddr{2, 0, 0, 0, 0xb0, 1}
	pathR2 = net.HardwareAddr{2, 0, 0, 0, 0xb0, 2}
	pathR3 = net.HardwareAddr{2, 0, 0, 0, 0xb0, 3}
)

// meterRound sends one probe to each back-end and has each come back
// after its round trip; it returns the time after the round closed.
func meterRound(m *pathMeter, at time.Time, seq *uint64, rtts map[string]time.Duration, macs ...net.HardwareAddr) time.Time {
	round, _ := m.newRound(at, len(macs))
	for _, mac := range macs {
		*seq++
		m.sentProbe(*seq, round, pathKey{mac: mac.String(), port: 1}, at)
		if rtt, ok := rtts[mac.String()]; ok {
			m.returned(*seq, mac, at.Add(rtt))
		}
	}
	end := at.Add(probeTimeout)
	m.closeRounds(end)
	return end
}

// The gap is GapFactor times the rounds' spread (longest less shortest
// round trip), from the 99th percentile of the window or the last round,
// whichever is larger, within MinAutoGap and MaxAutoGap; nothing until
// minRounds rounds closed.
func TestPathMeterGap(t *testing.T) {
	m := newPathMeter()
	var seq uint64
	at := time.Unix(1000, 0)
	rtts := map[string]time.Duration{pathR1.String(): 100 * time.Microsecond, pathR2.String(): 400 * time.Microsecond, pathR3.String(): 250 * time.Microsecond}
	for i := range 150 {
		if _, ok := m.gap(); ok && i < minRounds {
			t.Fatalf("a gap after %d rounds, want none before %d", i, minRounds)
		}
		at = meterRound(m, at, &seq, rtts, pathR1, pathR2, pathR3)
	}
	if g, ok := m.gap(); !ok || g != GapFactor*300*time.Microsecond {
		t.Errorf("gap %v (%v), want %v: %d × the 300 µs spread", g, ok, GapFactor*300*time.Microsecond, GapFactor)
	}
	// One round whose spread is 2 ms raises the gap at once.
	rtts[pathR2.String()] = 2100 * time.Microsecond
	at = meterRound(m, at, &seq, rtts, pathR1, pathR2, pathR3)
	if g, _ := m.gap(); g != GapFactor*2*time.Millisecond {
		t.Errorf("after a 2 ms round: gap %v, want %v", g, GapFactor*2*time.Millisecond)
	}
	// Calm again: the last round no longer counts, and the window's 99th
	// percentile is not the one round in 152 above it.
	rtts[pathR2.String()] = 400 * time.Microsecond
	at = meterRound(m, at, &seq, rtts, pathR1, pathR2, pathR3)
	if g, _ := m.gap(); g != GapFactor*300*time.Microsecond {
		t.Errorf("after a calm round: gap %v, want %v", g, GapFactor*300*time.Microsecond)
	}
	// Bounds.
	small, big := newPathMeter(), newPathMeter()
	for range minRounds {
		at = meterRound(small, at, &seq, map[string]time.Duration{pathR1.String(): 10 * time.Microsecond, pathR2.String(): 20 * time.Microsecond}, pathR1, pathR2)
		at = meterRound(big, at, &seq, map[string]time.Duration{pathR1.String(): 0, pathR2.String(): 90 * time.Millisecond}, pathR1, pathR2)
	}
	if g, _ := small.gap(); g != MinAutoGap {
		t.Errorf("10 µs spread: gap %v, want the floor %v", g, MinAutoGap)
	}
	if g, _ := big.gap(); g != MaxAutoGap {
		t.Errorf("90 ms spread: gap %v, want the ceiling %v", g, MaxAutoGap)
	}
}

// A probe is counted once, from the back-end it was sent to: one that
// comes back twice, from another back-end, or that this meter never sent
// is ignored; one not back within probeTimeout is lost, on its path.
func TestPathMeterAccounting(t *testing.T) {
	m := newPathMeter()
	at := time.Unix(1000, 0)
	round, _ := m.newRound(at, 2)
	m.sentProbe(1, round, pathKey{mac: pathR1.String(), port: 1}, at)
	m.sentProbe(2, round, pathKey{mac: pathR2.String(), port: 1}, at)
	m.sentProbe(3, round, pathKey{mac: pathR2.String(), port: 1}, at)
	m.sentProbe(4, round, pathKey{mac: pathR1.String(), port: 1}, at)
	m.unsent(4)
	for _, c := range []struct {
		seq  uint64
		from net.HardwareAddr
		want bool
	}{
		{1, pathR1, true},
		{1, pathR1, false}, // twice
		{2, pathR1, false}, // from another back-end than it went to
		{2, pathR2, true},
		{9, pathR2, false}, // never sent
	} {
		if got := m.returned(c.seq, c.from, at.Add(50*time.Microsecond)); got != c.want {
			t.Errorf("probe %d from %s: taken %v, want %v", c.seq, c.from, got, c.want)
		}
	}
	m.closeRounds(at.Add(probeTimeout))
	s := m.status()
	if s.Sent != 3 || s.Returned != 2 || s.Lost != 1 || s.Rounds != 1 {
		t.Errorf("sent %d returned %d lost %d rounds %d, want 3 2 1 1", s.Sent, s.Returned, s.Lost, s.Rounds)
	}
	for _, p := range s.Paths {
		if wantLost := map[string]uint64{pathR1.String(): 0, pathR2.String(): 1}[p.Backend]; p.Lost != wantLost || p.RTTP50Us != 50 {
			t.Errorf("path %s: lost %d rtt %d µs, want %d and 50", p.Backend, p.Lost, p.RTTP50Us, wantLost)
		}
	}
	// A back-end gone from the table is forgotten.
	m.forget(map[pathKey]bool{{mac: pathR1.String(), port: 1}: true})
	if s := m.status(); len(s.Paths) != 1 || s.Paths[0].Backend != pathR1.String() {
		t.Errorf("after r2 left: paths %+v", s.Paths)
	}
}

// With more paths than MaxProbesPerRound, rounds take them in turn.
func TestPathMeterRoundsTakeTurns(t *testing.T) {
	m := newPathMeter()
	n := MaxProbesPerRound*2 + 5
	seen := map[int]int{}
	for r := range 3 {
		_, first := m.newRound(time.Unix(int64(r), 0), n)
		for i := range MaxProbesPerRound {
			seen[(first+i)%n]++
		}
	}
	for i := range n {
		if seen[i] == 0 {
			t.Fatalf("path %d of %d never probed in 3 rounds of %d", i, n, MaxProbesPerRound)
		}
	}
}
