package soak

import (
	"fmt"
	"strings"
	"time"
)

// judge holds a step to the soak's goals once its traffic has run: the
// router converged again, the loss outside faults and the duplicates,
// the faults' goals, the FIBs against the RIB, the operator's state and
// the maps; then says the step in a progress line.
func (s *soak) judge(p *stepPlan, res *stepResult) error {
	st := s.account(p, res)
	if err := s.lab.Converge(); err != nil {
		return fmt.Errorf("soak: at %.0f s (%s): %w", res.at.Seconds(), st.Fault, err)
	}
	for _, f := range p.faults() {
		if l, ok := f.fault.(longFault); ok {
			l.wait()
		}
	}
	var rows []FaultReport
	if p.fault == nil {
		s.lostOutsideFaults(st)
	} else {
		if res.repaired.IsZero() {
			res.repaired = time.Now().Add(-time.Second) // not within the step: when converge saw it (it waits a second more)
		}
		rows = s.faultRows(p, res, st)
	}
	fibText := s.checkFIBs(p, res, &st)
	s.rep.Steps = append(s.rep.Steps, st)
	if s.ops != nil {
		if err := untilOpsHeld(s.ops); err != nil {
			s.inv.broke("operator_state", "after %.0f s (%s): %v", res.at.Seconds(), p.op.text, err)
		}
	}
	if err := s.maps.look(time.Since(s.start) >= 2*time.Minute); err != nil {
		s.inv.broke("bpf_map_bounds", "at %.0f s: %v", res.at.Seconds(), err)
	}
	s.say(p, st, rows, fibText)
	return nil
}

// account is the step's row: what it sent and lost, and where, into the
// report's totals, with the duplicates', the clients' and the operator's
// invariants.
func (s *soak) account(p *stepPlan, res *stepResult) Step {
	t, cs, at := res.trial, res.clients, res.at.Seconds()
	st := Step{AtS: at, TrafficS: p.length.Seconds(), Family: familyName(p.ipv6), Sent: t.Sent, Received: t.Sink.RxPackets, Lost: t.Lost(), Fault: p.kinds(),
		ReverseSent: cs.udpSent, ReverseLost: cs.udpLost - min(cs.udpLost, cs.udpRcvbuf), ReverseRcvbuf: min(cs.udpLost, cs.udpRcvbuf),
		Duplicated: t.Sink.Duplicated, Reordered: t.Sink.Reordered, BeyondWindow: t.Sink.BeyondWindow}
	if st.ReverseLost > 0 {
		st.ReverseLostAt = cs.udpLostAt
	}
	st.Softirq = dropLedger(res.softirqs).grown(softirqLook())
	if st.Lost > 0 || st.ReverseLost > 0 {
		st.Drops = res.drops.grown(lookDrops(s.join.backends()))
	}
	if st.Lost > 0 {
		st.LostToH3, st.LostToBGP1 = lostByDestination(s.lab, t.Sent)
	}
	if err := cs.err(); err != nil {
		s.inv.broke("tcp_intact", "%v", err)
	}
	if res.opErr != nil {
		s.inv.broke("operator_state", "at %.0f s, %s: %v", at, p.op.text, res.opErr)
	}
	s.rep.Sent += t.Sent
	s.rep.Received += t.Sink.RxPackets
	s.rep.Duplicated += t.Sink.Duplicated
	s.rep.BeyondWindow += t.Sink.BeyondWindow
	switch {
	case t.Sink.Duplicated > 0:
		s.inv.broke("no_duplicates", "%d frames duplicated at %.0f s", t.Sink.Duplicated, at)
	case t.Sink.RxPackets > t.Sent: // beyond the sink's window
		s.inv.broke("no_duplicates", "%d frames more than sent at %.0f s", t.Sink.RxPackets-t.Sent, at)
	}
	return st
}

// lostOutsideFaults counts a quiet step's loss against the soak.
func (s *soak) lostOutsideFaults(st Step) {
	if st.Lost > 0 {
		s.rep.LostOutsideFaults += st.Lost
		s.inv.broke("no_loss_outside_faults", "%d lost at %.0f s", st.Lost, st.AtS)
	}
	if st.ReverseLost > 0 {
		s.rep.LostOutsideFaults += st.ReverseLost
		s.inv.broke("no_loss_outside_faults", "%d of h3's UDP datagrams to h1 lost at %.0f s (%s)", st.ReverseLost, st.AtS, st.ReverseLostAt)
	}
}

// faultRows are a fault step's rows of the report, one per fault: the
// two of an overlap share the step's loss, outage and goal.
func (s *soak) faultRows(p *stepPlan, res *stepResult, st Step) []FaultReport {
	faults := p.faults()
	span := res.trial.Sink.LossSpan
	goal, met := stepGoal(faults, st, span)
	var rows []FaultReport
	for i, f := range faults {
		row := FaultReport{Kind: f.kind(), Target: f.target(), Family: st.Family, AtS: f.at.Sub(s.start).Seconds(), LostPackets: st.Lost,
			OutageMS: ms(span), RepairedMS: ms(res.repaired.Sub(f.at)), Goal: goal, Met: met}
		if len(faults) == 2 {
			row.Overlaps = faults[1-i].kind()
		}
		f.report(&row)
		rows = append(rows, row)
	}
	s.rep.Faults = append(s.rep.Faults, rows...)
	return rows
}

// checkFIBs holds the back-ends' FIBs to the RIB after the step, and
// says how they fared for the progress line. After a takeover or a
// suite's restart the new suite holds its feed to the back-ends until
// its peers are back, and the back-ends' feeds connect again; a
// back-end's agent started again (killed, or a joining back-end's) has a
// new feed. Each new session brings the table whole, and the step is
// quiet once every table has arrived (ribSync).
func (s *soak) checkFIBs(p *stepPlan, res *stepResult, st *Step) string {
	at := res.at.Seconds()
	refresh := restartsOf(p.faults()...) != restartsNothing
	sync, err := s.ribs.until(ribSyncLimit, s.join.backends(), refresh)
	if err != nil {
		s.inv.broke("fib_equals_rib", "at %.0f s, still %v after: %v", at, ribSyncLimit, err)
		return fmt.Sprintf("; FIBs not the RIB %v after the step", ribSyncLimit)
	}
	st.FIBLagMS = ms(sync.Lag)
	text := fmt.Sprintf("; FIBs = RIB %.0f ms after quiet", st.FIBLagMS)
	if sync.Lag > ribQuietLimit {
		s.inv.broke("fib_equals_rib", "at %.0f s, the FIBs equalled the RIB %v after quiet (goal %v); the looks: %s", at, sync.Lag.Round(time.Millisecond), ribQuietLimit, sync.Looks)
	}
	s.fibLag = max(s.fibLag, sync.Lag)
	if refresh {
		st.FIBRefreshMS = ms(sync.AfterRIB)
		text += fmt.Sprintf(" (%.0f ms after the RIB's last change: the tables sent again)", st.FIBRefreshMS)
		s.fibRefresh = max(s.fibRefresh, sync.AfterRIB)
	}
	s.fibTook = max(s.fibTook, sync.Took)
	return text
}

// say prints the step's progress line.
func (s *soak) say(p *stepPlan, st Step, rows []FaultReport, fibText string) {
	split := ""
	if st.Lost > 0 {
		split = fmt.Sprintf(" (to h3 %d, to bgp1's prefixes %d)", st.LostToH3, st.LostToBGP1)
	}
	if st.ReverseLost > 0 {
		split += fmt.Sprintf(", h3 -> h1 UDP lost %d of %d (%s)", st.ReverseLost, st.ReverseSent, st.ReverseLostAt)
	}
	if st.ReverseRcvbuf > 0 {
		split += fmt.Sprintf(", h3 -> h1 UDP %d dropped by h1's full socket buffer", st.ReverseRcvbuf)
	}
	if st.Drops != nil {
		split += " [" + dropsText(st.Drops) + "] [softirq: " + dropsText(st.Softirq) + "]"
	}
	text := ""
	if f := p.fault; f != nil {
		text = fmt.Sprintf(", fault %s on %s: outage %.1f ms, repaired in %.0f ms", f.kind(), f.target(), rows[0].OutageMS, rows[0].RepairedMS) + f.text(rows[0])
	}
	if g := p.second; g != nil {
		text += fmt.Sprintf(", and %s on %s %v later", g.kind(), g.target(), g.at.Sub(p.fault.at).Round(time.Millisecond))
	}
	if p.op != nil {
		text += "; " + p.op.text
	}
	fmt.Fprintf(s.progress, "soak %5.0f s: %s, sent %d, lost %d%s%s%s\n", st.AtS, st.Family, st.Sent, st.Lost, split, text, fibText)
}

// finish ends the soak: r4 out if it is in, the processes, maps, memory
// and CPUs watched to the end, and every invariant's verdict.
func (s *soak) finish() (*Report, error) {
	rep := s.rep
	rep.DurationS = time.Since(s.start).Seconds()
	if s.churn != nil {
		rep.Churn = s.churn.report()
		if c := rep.Churn; c.ChangesPerS < issueChurnRate {
			rep.NotYet = append(rep.NotYet, fmt.Sprintf("churn at %d route changes a second or more (this run: %.0f while churning)", issueChurnRate, c.ChangesPerS))
		}
	}
	if s.ops != nil {
		rep.Operations = s.ops.done
	}
	if s.clients != nil {
		rep.Clients = s.clients.report()
	}
	if s.join.in { // r4 leaves, so that the lab's processes are as they began
		if err := s.join.leave(); err != nil {
			return nil, fmt.Errorf("soak: %s leaving at the end: %w", joinName, err)
		}
	}
	if after, err := labProcesses(); err != nil {
		return nil, err
	} else if d := diffCounts(s.procs, after); d != "" {
		s.inv.broke("no_process_leak", "%s", d)
	}
	for _, b := range s.maps.broken() {
		s.inv.broke("bpf_map_bounds", "%s", b)
	}
	s.unwatch()
	<-s.mem.done
	<-s.cpu.done
	memGrown, memCompared, memLevels := s.mem.grown()
	for _, g := range memGrown {
		s.inv.broke("agent_memory", "%s", g)
	}
	rep.memory, rep.cpu, rep.start = s.mem, s.cpu, s.start
	s.holds(memCompared, memLevels)
	rep.Invariants, rep.InvariantsOK = s.inv.verdicts()
	for _, f := range rep.Faults {
		if !f.Met {
			rep.InvariantsOK = false
		}
	}
	return rep, nil
}

// holds says what each invariant checked, for those that held.
func (s *soak) holds(memCompared int, memLevels []string) {
	rep := s.rep
	if c := rep.Clients; c != nil {
		s.inv.held("tcp_intact", fmt.Sprintf(
			"every client completed: %d HTTP downloads of 256 KiB from h3 to h1, each with its sha256; %d iperf3 TCP tests from h1 to h3 (%.0f MB, %d retransmits); h3's UDP to h1: %d datagrams, %d lost (in fault steps; %d of them dropped by h1's full socket buffer), %d out of order",
			c.Downloads, len(rep.Steps), float64(c.TCPBytes)/1e6, c.TCPRetransmits, c.ReverseSent, c.ReverseLost, c.ReverseRcvbuf, c.ReverseOutOfOrder))
	}
	s.inv.held("agent_memory", fmt.Sprintf("every agent process watched for a minute or more (%d compared, from a minute old) grew less than 10%% from its first watched minute to its last: a back-end agent's resident memory just after each of its releases (asked every %v), an LB agent's floors (sampled every %v): %s", memCompared, releaseEvery, memEvery, strings.Join(memLevels, "; ")))
	if s.ops != nil {
		s.inv.held("operator_state", "after every step the router held what the operator last asked: the drained back-end in no table, the weight set, the file's mode and OSPF cost")
	}
	var reordered uint64
	for _, st := range rep.Steps {
		reordered += st.Reordered
	}
	exact := "exact: no late frame was further behind its flow's newest than the sink's window of 256"
	if rep.BeyondWindow > 0 {
		exact = fmt.Sprintf("a lower bound: %d late frames were further behind their flow's newest than the sink's window of 256, and may have been duplicates", rep.BeyondWindow)
	}
	s.inv.held("no_duplicates", fmt.Sprintf("the sink received no frame of the instrument twice (%d duplicated, %d late; the count is %s)", rep.Duplicated, reordered, exact))
	s.inv.held("bpf_map_bounds", s.maps.detail())
	s.inv.held("fib_equals_rib", fmt.Sprintf("after every step every back-end's routes were the active VCP's RIB's within %v at most of quiet (goal %v): of the RIB's last change, or in a step whose feeds started again (a takeover, a suite's restart, whose feed waits for its peers, or a back-end agent's) of the last back-end's table arriving whole on its new session, %v at most after the RIB's last change; and %v at most after the step's end (limit %v, the suite's own convergence included)",
		s.fibLag.Round(time.Millisecond), ribQuietLimit, s.fibRefresh.Round(time.Millisecond), s.fibTook.Round(time.Millisecond), ribSyncLimit))
}
