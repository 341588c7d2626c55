package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/traffic"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// The whole router's parts restarted: RFC 2544 §26.6 for msr. The bench
// labs run msr's data paths without agents or a VCP (they measure
// forwarding), so the parts an operator restarts — an LB agent, a
// back-end agent, a back-end host, the active VCP — are restarted in the
// default lab, as `msr demo` brings it up: every element an msr process,
// BIRD as the suite, keepalived between the VCPs, bgp1 announcing
// RouterLabPrefixes prefixes. The generator in h1 sends to h3 (in by lb1,
// through r1-r3, out by lb2), and the sink takes h3's interface; with
// --ipv6 the frames are IPv6 (RFC 5180's, to h3's IPv6 address): the lab
// is dual stack.

// RouterLabPrefixes is what bgp1 announces in the reset test's router
// and, unless asked otherwise, in the soak's.
const RouterLabPrefixes = 1000

// A routerSession is the default lab under the instrument, or the large
// lab (large set, plan nil).
type routerSession struct {
	*session
	plan  *demo.Plan
	large *demo.LargePlan
}

// openRouterSession brings the default lab up with msrBin as every
// element's program, waits until it has converged, and puts the
// generator on h1 and the sink on h3, the frames of IPv6's family or
// IPv4's. A default lab already up (someone's `msr demo up`) is refused,
// not taken down.
func openRouterSession(msrBin string, flows int, ipv6 bool) (*routerSession, error) {
	return openRouterSessionWith(msrBin, flows, ipv6, demo.Options{Prefixes: RouterLabPrefixes})
}

// openRouterSessionWith is openRouterSession with bgp1's table (and the
// lab's other options) as o says.
func openRouterSessionWith(msrBin string, flows int, ipv6 bool, o demo.Options) (*routerSession, error) {
	spec, err := demo.LabSpec(msrBin, o) // a bad lab file before all else
	if err != nil {
		return nil, err
	}
	if _, err := lab.ReadState(demo.LabName); err == nil {
		return nil, errors.New("the default lab is up: the reset test brings up its own (msr demo down first)")
	}
	dstMAC, ok := spec.MAC(lab.Endpoint{Node: "lb1", Iface: "e0"})
	if !ok {
		return nil, errors.New("the default lab gives lb1:e0 no MAC")
	}
	awake, err := keepCPUsAwake()
	if err != nil {
		return nil, err
	}
	s := &session{o: FwdOptions{DUT: "msr", Flows: flows}, spec: spec, dstMAC: dstMAC, awake: awake,
		undo: func() { demo.Down() },
		gen:  lab.Endpoint{Node: "h1", Iface: "eth0"}, genHasXDP: true, // the lab's xdp_pass
		sinkEnd: lab.Endpoint{Node: "h3", Iface: "eth0"}}
	r := &routerSession{session: s}
	r.family(ipv6)
	if r.plan, err = demo.UpLab(spec, o); err != nil {
		s.Close()
		return nil, fmt.Errorf("the default lab: %w", err)
	}
	if err := r.converge(); err != nil {
		s.Close()
		return nil, err
	}
	// The sink takes h3's interface from the lab's xdp_pass.
	if err := lab.DetachXDP(demo.LabName, s.sinkEnd); err != nil {
		s.Close()
		return nil, err
	}
	err = netns.Do(lab.Namespace(demo.LabName, s.sinkEnd.Node), func() (err error) {
		s.sink, err = traffic.NewSink(s.sinkEnd.Iface, flows)
		return err
	})
	if err == nil {
		s.last, err = s.sink.Read()
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	runtime.GC()
	return r, nil
}

// family makes the session's frames IPv6 (to h3's IPv6 address) or IPv4
// (to its IPv4 one).
func (r *routerSession) family(ipv6 bool) {
	r.o.IPv6 = ipv6
	r.dsts = []netip.Addr{netip.MustParseAddr(demo.H3)}
	if ipv6 {
		r.dsts = []netip.Addr{netip.MustParseAddr(demo.H3v6)}
	}
}

// A routerLab is the whole router's lab for the tests of one frame size
// that need it (reset, single): brought up by the first, closed after
// the size (not left to add its processes' work to the next size's
// searches). ipv6 says the frames' family.
type routerLab struct {
	msrBin string
	flows  int
	ipv6   bool
	r      *routerSession
}

// open brings the lab up unless it is up, and returns it, its frames of
// the lab's family.
func (l *routerLab) open(size int, progress io.Writer) (*routerSession, error) {
	if l.r != nil {
		l.r.family(l.ipv6)
		return l.r, nil
	}
	fmt.Fprintf(progress, "  %-8s %4d B  bringing up the default lab for the whole router's parts\n", "msr", size)
	r, err := openRouterSession(l.msrBin, l.flows, l.ipv6)
	if err != nil {
		return nil, err
	}
	l.r = r
	return r, nil
}

// Close takes the lab down if it is up.
func (l *routerLab) Close() {
	if l.r != nil {
		l.r.Close()
		l.r = nil
	}
}

// converge waits until the router has converged again (every element
// alive, both LBs' tables, every back-end's routes), and a second more
// for the LBs' tables to settle.
func (r *routerSession) converge() error {
	if r.large != nil {
		return convergeLarge(r.large, 2*time.Minute)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := demo.Wait(ctx, r.plan, io.Discard); err != nil {
		return fmt.Errorf("the default lab: %w", err)
	}
	time.Sleep(time.Second)
	return nil
}

// HostDownHold is how long the whole router's back-end host stays down:
// longer than the LBs take to drop it (three hello intervals, 300 ms by
// default), so the outage measured is theirs, not the hold's. A bounce
// in one ip batch took the links down for less time than a frame takes
// to cross the lab, and lost nothing or a few frames by chance.
const HostDownHold = time.Second

// routerResets are the parts of the whole router the reset test
// restarts, each with kill -9 (a crash) and a new process of the same
// command, as a supervisor would: lb1's agent (its data path keeps
// forwarding from its pinned programs and maps), r1's agent, r1's host
// (its links down for HostDownHold, then up: its flows are lost until the
// LBs drop it from their tables, and then nothing), and the active VCP
// (the standby takes its address over).
func routerResets() []resetAction {
	return []resetAction{
		{name: "LB agent", do: crash("lb1", "lb")},
		{name: "back-end agent", do: crash("r1", "router")},
		{name: "back-end host links", do: func(s *session) error { return bounceLinks(s, "r1", HostDownHold) }, hold: HostDownHold},
		{name: "active VCP", do: func(*session) error { return CrashActiveVCP() }},
	}
}

// CrashActiveVCP kills the active VCP's agent and starts it again: the
// standby takes the router over.
func CrashActiveVCP() error {
	active, err := ActiveVCP()
	if err != nil {
		return err
	}
	return Crash(active, "vcp")
}

// crash is Crash as a reset's action.
func crash(host, name string) func(*session) error {
	return func(*session) error { return Crash(host, name) }
}

// Crash kills the default lab's process name on host with SIGKILL and
// starts a new one of the same command, as a supervisor would.
func Crash(host, name string) error {
	_, _, err := lab.Restart(demo.LabName, host, name, syscall.SIGKILL)
	return err
}

// ActiveVCP is the default lab's active VCP; with none, the error says
// what each VCP answered.
func ActiveVCP() (string, error) {
	active := demo.Look().VCP
	if active != "" {
		return active, nil
	}
	var said []string
	for _, v := range demo.VCPs {
		st, err := vcpapi.Local(v, "").Status()
		if err != nil {
			said = append(said, fmt.Sprintf("%s: %v", v, err))
			continue
		}
		said = append(said, v+": "+st.Role)
	}
	return "", fmt.Errorf("no VCP is active (%s)", strings.Join(said, "; "))
}

// steadyRate is the rate the router's resets run at: half of msr's NDR on
// its bench lab, halved until a trial of a second loses nothing here and
// the generator keeps its schedule (the default lab's path crosses a Linux
// bridge twice, and three back-ends, BIRD and the agents share two cores
// with the generator: at 350 kpps it offered half of that), at most five
// times.
func (r *routerSession) steadyRate(size int, rate float64, progress io.Writer) (float64, error) {
	for range 5 {
		t, err := r.trial(size, rate, time.Second)
		if err != nil {
			return 0, err
		}
		fmt.Fprintf(progress, "  %-8s %4d B  the whole router at %.0f pps: offered %.0f, loss %.6f%s\n", "msr", size, rate, t.offeredPPS(), t.lossRatio(), t.behind())
		if t.lost() == 0 && t.offeredPPS() >= 0.99*rate {
			return rate, nil
		}
		rate /= 2
	}
	return 0, fmt.Errorf("the whole router lost frames, or the generator fell behind, at every rate down to %.0f pps", 2*rate)
}
