package bench

import (
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/router/routerapi"
	"github.com/msr-router/msr/traffic"
)

// A resetAction restarts one part of a DUT: RFC 2544 §26.6's reset.
type resetAction struct {
	name string // what is reset, as the results name it
	do   func(*session) error
	// hold is how long do keeps the part down; the trial sends for a
	// whole trial after it, to see the part's return.
	hold time.Duration
}

// resetActions are what the reset test restarts in each DUT of the bench
// labs. Those labs run data paths without agents or a VCP (they measure
// forwarding), so the only part of msr there to restart is a host's
// links: the back-end host's. Linux's reset is its forwarding host's
// links, and then the routes and neighbours its configuration installs
// (taking a link down flushes them).
func resetActions(dut string) []resetAction {
	switch dut {
	case "linux":
		return []resetAction{{name: "host links", do: resetLinuxHost}}
	case "msr", "msr-switch", "msr-xdpswitch":
		return []resetAction{{name: "back-end host links", do: func(s *session) error { return bounceLinks(s, "r1", 0) }}}
	case "router", "lb":
		return []resetAction{{name: "host links", do: func(s *session) error { return bounceLinks(s, "dut", 0) }}}
	case "xdp-fib":
		// The links' return flushed the kernel's routes it forwards by.
		return []resetAction{{name: "host links", do: func(s *session) error {
			if err := bounceLinks(s, "dut", 0); err != nil {
				return err
			}
			return xdpFibKernel(s.spec, s.routes, s.o.IPv6)
		}}}
	}
	return nil
}

// bounceLinks takes every interface of host down, keeps them down for
// hold, and brings them up again. With hold 0 the links come back in the
// same ip batch: what is lost is what the host's queues held and what
// the links' return flushed (neighbours, routes).
func bounceLinks(s *session, host string, hold time.Duration) error {
	h := s.spec.Hosts[host]
	if h == nil {
		return fmt.Errorf("lab %s has no host %s", s.spec.Name, host)
	}
	var down, up strings.Builder
	for name := range h.Interfaces {
		fmt.Fprintf(&down, "link set %s down\n", name)
		fmt.Fprintf(&up, "link set %s up\n", name)
	}
	if hold == 0 {
		return ipBatch(s.spec, host, down.String()+up.String())
	}
	if err := ipBatch(s.spec, host, down.String()); err != nil {
		return err
	}
	time.Sleep(hold)
	return ipBatch(s.spec, host, up.String())
}

// resetLinuxHost bounces the Linux DUT's links, then puts back what its
// configuration holds: the lab file's routes and neighbours, and the
// benchmark's table.
func resetLinuxHost(s *session) error {
	if err := bounceLinks(s, "dut", 0); err != nil {
		return err
	}
	if err := resetLinuxNeighbors(s); err != nil {
		return err
	}
	var b strings.Builder
	for _, r := range s.spec.Hosts["dut"].Routes {
		fmt.Fprintf(&b, "route replace %s via %s\n", r.To, r.Via)
	}
	if err := ipBatch(s.spec, "dut", b.String()); err != nil {
		return err
	}
	return installLinuxRoutes(s.spec, s.routes)
}

func ipBatch(spec *lab.Spec, host, batch string) error {
	cmd := exec.Command("ip", "-n", lab.Namespace(spec.Name, host), "-batch", "-")
	cmd.Stdin = strings.NewReader(batch)
	if out, err := onGenCPU(cmd); err != nil {
		return fmt.Errorf("%s: ip -batch: %v: %s", host, err, out)
	}
	return nil
}

// resetAfter is how long into a reset trial the reset comes.
const resetAfter = time.Second

// reset runs RFC 2544 §26.6 at one size, per DUT with a zero-loss rate and
// per part it can restart: a steady half of NDR for resetAfter plus a
// trial's length, the part restarted at resetAfter; the outage as frames
// lost × the inter-frame gap, as the longest run of frames lost (the
// sink's longest sequence jump, first missing frame to last), and as the
// time from the first frame lost in the trial to the last. For msr, with
// o.MSRBin, the whole router's parts too, in the default lab
// (rfc2544_router.go).
func reset(o RFC2544Options, sessions map[string]*session, router *routerLab, size int, ndr []RFC2544Row, progress io.Writer) ([]RFC2544Row, error) {
	var rows []RFC2544Row
	for _, tp := range ndr {
		if tp.NDRPPS == 0 {
			continue
		}
		for _, a := range resetActions(tp.DUT) {
			row, err := resetTrial(o, sessions[tp.DUT], size, tp.NDRPPS/2, a, progress)
			if err != nil {
				return nil, err
			}
			rows = append(rows, row)
		}
		if tp.DUT == "msr" && o.MSRBin != "" {
			more, err := resetRouter(o, router, size, tp.NDRPPS/2, progress)
			if err != nil {
				return nil, fmt.Errorf("msr, the whole router: %w", err)
			}
			rows = append(rows, more...)
		}
	}
	return rows, nil
}

// resetRouter restarts each of the whole router's parts in turn, each in
// a trial of its own at a steady rate, the router converged again before
// the next.
func resetRouter(o RFC2544Options, router *routerLab, size int, rate float64, progress io.Writer) ([]RFC2544Row, error) {
	r, err := router.open(size, progress)
	if err != nil {
		return nil, err
	}
	if rate, err = r.steadyRate(size, rate, progress); err != nil {
		return nil, err
	}
	var rows []RFC2544Row
	for _, a := range routerResets() {
		row, err := resetTrial(o, r.session, size, rate, a, progress)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
		if err := r.converge(); err != nil {
			return nil, fmt.Errorf("after the reset of the %s: %w", a.name, err)
		}
	}
	return rows, nil
}

// resetTrial is one reset: rate for resetAfter plus a trial's length, the
// part restarted at resetAfter, and on until a trial's length after the
// part is back if it took longer than planned (blastPast).
func resetTrial(o RFC2544Options, s *session, size int, rate float64, a resetAction, progress io.Writer) (RFC2544Row, error) {
	dut := s.o.DUT
	var resetErr error
	var took time.Duration
	t, err := s.send(sendSpec{size: size, rate: rate, sample: SeriesStep}, func(g *traffic.Generator) (uint64, error) {
		back := make(chan time.Time, 1)
		go func() {
			time.Sleep(resetAfter)
			start := time.Now()
			resetErr = a.do(s)
			took = time.Since(start)
			back <- time.Now()
		}()
		return blastPast(g, resetAfter+a.hold+o.Trial, back, o.Trial)
	})
	if err != nil {
		return RFC2544Row{}, fmt.Errorf("%s: %w", dut, err)
	}
	if resetErr != nil {
		return RFC2544Row{}, fmt.Errorf("%s: reset %s: %w", dut, a.name, resetErr)
	}
	row := RFC2544Row{DUT: dut, Size: size, Test: "reset", Reset: a.name, Lab: s.labName(), RatePPS: t.offeredPPS(), LossRatio: t.lossRatio(),
		Lost: t.lost(), SeriesPPS: t.series, SeriesStepMS: ms(SeriesStep), ResetMS: ms(took)}
	row.OutageMS = float64(row.Lost) / row.RatePPS * 1e3
	if t.rep.LossLast > t.rep.LossFirst && t.rep.LossFirst > 0 {
		row.LossWindowMS = ms(t.rep.LossLast - t.rep.LossFirst)
	}
	row.LossSpanMS = ms(t.rep.LossSpan)
	fmt.Fprintf(progress, "  %-8s %4d B  reset %s%s (took %.0f ms) at %.0f pps: %d frames lost (%.1f ms), longest outage %.1f ms%s\n",
		dut, size, a.name, row.labSuffix(), row.ResetMS, row.RatePPS, row.Lost, row.OutageMS, row.LossSpanMS, t.behind())
	return row, nil
}

// blastPast sends for d, and on until a whole trial (after) has gone by
// since the part came back (the time back gives): a reset that takes
// longer than planned is still followed by a trial's frames, which show
// the part's return. (CI's machine once took 312 ms over the Linux DUT's
// ip commands, longer than TestRFC2544's 300 ms trials: the trial ended
// before the routes were back, and the sink saw no frame after the
// loss.) While it waits, it sends in short calls, so that it looks at
// back often; each call's setup is time without frames, not frames lost.
func blastPast(g *traffic.Generator, d time.Duration, back <-chan time.Time, after time.Duration) (uint64, error) {
	n, err := g.Blast(d)
	if err != nil {
		return n, err
	}
	for {
		select {
		case at := <-back:
			if left := time.Until(at.Add(after)); left > 0 {
				m, err := g.Blast(left)
				return n + m, err
			}
			return n, nil
		default:
		}
		m, err := g.Blast(waitSlice)
		n += m
		if err != nil {
			return n, err
		}
	}
}

// waitSlice is how long blastPast's calls send while the part is not
// back yet.
const waitSlice = 50 * time.Millisecond

// labSuffix names a row's lab where it is not the DUT's bench lab.
func (r RFC2544Row) labSuffix() string {
	if r.Lab == "" {
		return ""
	}
	return " (" + r.Lab + " lab)"
}

// single runs the single-frame test at one size, per DUT: one frame
// to the sink while the DUT has not resolved the next hop's address (only
// where the DUT resolves it itself: Linux, and with o.MSRBin the whole
// router in the default lab; the bench labs' msr data paths hold a static
// neighbour and no agent to resolve one), then one with it resolved;
// whether each arrived, and its latency.
func single(o RFC2544Options, sessions map[string]*session, router *routerLab, size int, progress io.Writer) ([]RFC2544Row, error) {
	var rows []RFC2544Row
	for _, dut := range o.DUTs {
		s := sessions[dut]
		cases := []string{"resolved"}
		if dut == "linux" {
			cases = []string{"unresolved", "resolved"}
		}
		for _, c := range cases {
			if c == "unresolved" {
				if err := ipBatch(s.spec, "dut", "neigh flush dev d1\n"); err != nil {
					return nil, err
				}
			}
			row, err := singleFrame(s, size, c, progress)
			if err != nil {
				return nil, err
			}
			rows = append(rows, row)
		}
		if dut == "linux" {
			// Put the lab's permanent entry back.
			if err := resetLinuxNeighbors(s); err != nil {
				return nil, err
			}
		}
		if dut == "msr" && o.MSRBin != "" {
			more, err := singleRouter(router, size, progress)
			if err != nil {
				return nil, fmt.Errorf("msr, the whole router: %w", err)
			}
			rows = append(rows, more...)
		}
	}
	return rows, nil
}

// singleFrame sends one frame alone through s's DUT, the next hop
// neighbor ("unresolved", "resolved"): whether it arrived, and its
// latency.
func singleFrame(s *session, size int, neighbor string, progress io.Writer) (RFC2544Row, error) {
	dut := s.o.DUT
	t, err := s.send(sendSpec{size: size}, func(g *traffic.Generator) (uint64, error) { return 1, g.Burst(1) })
	if err != nil {
		return RFC2544Row{}, fmt.Errorf("%s: %w", dut, err)
	}
	row := RFC2544Row{DUT: dut, Size: size, Test: "single", Lab: s.labName(), Neighbor: neighbor, Forwarded: t.rep.RxPackets == 1}
	if row.Forwarded {
		row.LatencyUS = latencyOf(t.rep.Latency)
	}
	fmt.Fprintf(progress, "  %-8s %4d B  single frame, next hop %s%s: forwarded %v\n", dut, size, neighbor, row.labSuffix(), row.Forwarded)
	return row, nil
}

// singleRouter is the single-frame test on the whole router (the default
// lab), whose back-ends resolve their neighbours themselves: one frame
// after every back-end has forgotten its neighbours (`msr router
// neighbors flush`: the back-end holds it while it asks for h3's address
// through lb2), then one with h3 resolved.
func singleRouter(router *routerLab, size int, progress io.Writer) ([]RFC2544Row, error) {
	r, err := router.open(size, progress)
	if err != nil {
		return nil, err
	}
	var rows []RFC2544Row
	for _, c := range []string{"unresolved", "resolved"} {
		if c == "unresolved" {
			for _, b := range demo.Backends {
				c := routerapi.Local(b, "")
				if _, err := c.FlushNeighbors(); err != nil {
					return nil, fmt.Errorf("%s: %w", b, err)
				}
				// Else the frame would not wait for a resolution.
				st, err := c.Status()
				if err != nil {
					return nil, fmt.Errorf("%s: %w", b, err)
				}
				if len(st.Neighbors) > 0 {
					return nil, fmt.Errorf("%s: neighbours %v left after the flush", b, st.Neighbors)
				}
			}
		}
		row, err := singleFrame(r.session, size, c, progress)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// resetLinuxNeighbors puts back the Linux DUT's permanent neighbours of
// the lab file.
func resetLinuxNeighbors(s *session) error {
	var b strings.Builder
	for _, n := range s.spec.Hosts["dut"].Neighbors {
		fmt.Fprintf(&b, "neigh replace %s lladdr %s dev %s nud permanent\n", n.IP, n.MAC, n.Dev)
	}
	return ipBatch(s.spec, "dut", b.String())
}
