package bench

import (
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/traffic"
)

// A RouterLab is the default lab under the instrument, for a harness
// outside this package (the soak): the generator on h1, the sink on h3,
// the router converged; or the large lab (OpenLargeLab). It is the reset test's routerSession, with the
// few handles such a harness needs.
type RouterLab struct {
	r *routerSession
}

// OpenRouterLab brings the default lab up with msrBin as every
// element's program and flows flows (openRouterSessionWith): IPv4's
// frames to h3 until SetDestinations says otherwise.
func OpenRouterLab(msrBin string, flows int, o demo.Options) (*RouterLab, error) {
	r, err := openRouterSessionWith(msrBin, flows, false, o)
	if err != nil {
		return nil, err
	}
	return &RouterLab{r: r}, nil
}

// Close takes the lab down.
func (l *RouterLab) Close() { l.r.Close() }

// Plan is the default lab's plan: its elements, and bgp1's prefixes (nil
// in the large lab).
func (l *RouterLab) Plan() *demo.Plan { return l.r.plan }

// Flows is how many flows the generator sends, and the sink counts.
func (l *RouterLab) Flows() int { return l.r.o.Flows }

// SetDestinations makes the frames IPv6 or IPv4, flow i to dsts[i %
// len(dsts)].
func (l *RouterLab) SetDestinations(ipv6 bool, dsts []netip.Addr) {
	l.r.family(ipv6)
	l.r.dsts = dsts
}

// SinkAlsoOn puts the sink on e too (from the lab's xdp_pass), beside
// h3's interface. Each counts only the frames addressed to its own MAC
// (traffic.Sink.AttachHost): a switch flooding a frame for one host to
// another, its port down, is not delivering it.
func (l *RouterLab) SinkAlsoOn(e lab.Endpoint) error {
	if err := lab.DetachXDP(l.r.spec.Name, e); err != nil {
		return err
	}
	r := l.r
	if err := r.sink.Detach(); err != nil {
		return err
	}
	for _, e := range []lab.Endpoint{r.sinkEnd, e} {
		if err := netns.Do(lab.Namespace(r.spec.Name, e.Node), func() error { return r.sink.AttachHost(e.Iface) }); err != nil {
			return err
		}
	}
	return nil
}

// FlowCounts is the sink's count of each flow's frames.
func (l *RouterLab) FlowCounts() ([]uint64, error) { return l.r.sink.FlowCounts() }

// SteadyRate is the rate, at most rate and halved from it, at which a
// second's trial of frames of size loses nothing.
func (l *RouterLab) SteadyRate(size int, rate float64, progress io.Writer) (float64, error) {
	return l.r.steadyRate(size, rate, progress)
}

// PDR is the router's partial drop rate for frames of size (RFC 2544's
// throughput at 0.5% loss): a trial flat out, whose offered rate bounds
// the search (the instrument's ceiling in this lab) and whose receive
// rate is its first guess, then a bisection of second-long trials, one
// per rate, pdrTrials in all. A rate passes if it lost at most 0.5% and
// the generator kept up with it (95%); the PDR is the highest passed.
func (l *RouterLab) PDR(size int, progress io.Writer) (float64, error) {
	flat, err := l.r.trial(size, 0, time.Second)
	if err != nil {
		return 0, err
	}
	lo, hi, rate := 0.0, flat.offeredPPS(), flat.receivedPPS()
	for range pdrTrials {
		t, err := l.r.trial(size, rate, time.Second)
		if err != nil {
			return 0, err
		}
		passed := t.lossRatio() <= PDR.LossRatio && t.offeredPPS() >= 0.95*rate
		fmt.Fprintf(progress, "  msr %4d B  PDR search: %9.0f pps offered %9.0f, loss %.6f, passed %v%s\n", size, rate, t.offeredPPS(), t.lossRatio(), passed, t.behind())
		if passed {
			lo = rate
		} else {
			hi = rate
		}
		rate = (lo + hi) / 2
	}
	if lo == 0 {
		return 0, fmt.Errorf("no rate up to %.0f pps lost under 0.5%% of its frames", flat.offeredPPS())
	}
	return lo, nil
}

// pdrTrials bounds RouterLab.PDR's search: a harness wants the router's
// rate within a few percent, not a report.
const pdrTrials = 8

// A Trial is what one Send sent and what the sink counted of it.
type Trial struct {
	Sent uint64
	Sink *traffic.SinkReport
}

// Lost is the frames sent that the sink did not count.
func (t *Trial) Lost() uint64 { return (&trialResult{sent: t.Sent, rep: t.Sink}).lost() }

// Send runs one trial of frames of size at rate, sent by transmit.
func (l *RouterLab) Send(size int, rate float64, transmit func(*traffic.Generator) (uint64, error)) (*Trial, error) {
	t, err := l.r.send(sendSpec{size: size, rate: rate}, transmit)
	if err != nil {
		return nil, err
	}
	return &Trial{Sent: t.sent, Sink: t.rep}, nil
}

// Converge waits until the router has converged again.
func (l *RouterLab) Converge() error { return l.r.converge() }

// BounceLinks takes every link of host down for hold, then up.
func (l *RouterLab) BounceLinks(host string, hold time.Duration) error {
	return bounceLinks(l.r.session, host, hold)
}

// IPBatch runs `ip -batch` with batch in host's namespace.
func (l *RouterLab) IPBatch(host, batch string) error { return ipBatch(l.r.spec, host, batch) }
