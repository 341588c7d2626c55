package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"time"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/traffic"
)

// OpenLargeLab brings the large lab up (demo.UpLarge) with msrBin as
// every element's program, waits until it has converged, and puts the
// generator on gen's host, sending flows flows into gen's port, and the
// sink on every other port's host, each counting only the frames
// addressed to it. SetDestinations says where the flows go. A default or
// large lab already up is refused, not taken down.
func OpenLargeLab(msrBin string, flows int, gen demo.LargePort) (*RouterLab, *demo.LargePlan, error) {
	if labs, _ := lab.Labs(); slices.Contains(labs, demo.LabName) || slices.Contains(labs, demo.LargeLab) {
		return nil, nil, errors.New("a lab is up: msr demo down (--size large) first")
	}
	dstMAC, err := net.ParseMAC(fmt.Sprintf("02:00:00:%02x:e%d:00", gen.LB, gen.Port)) // the large lab's LB port MACs
	if err != nil {
		return nil, nil, err
	}
	awake, err := keepCPUsAwake()
	if err != nil {
		return nil, nil, err
	}
	s := &session{o: FwdOptions{DUT: "msr", Flows: flows}, dstMAC: dstMAC, awake: awake, undo: func() { demo.DownLarge() },
		gen: lab.Endpoint{Node: gen.Host, Iface: "eth0"}, genHasXDP: true, spec: &lab.Spec{Name: demo.LargeLab}}
	plan, err := demo.UpLarge(msrBin)
	if err != nil {
		s.Close()
		return nil, nil, fmt.Errorf("the large lab: %w", err)
	}
	if s.spec, err = plan.Spec(msrBin); err != nil {
		s.Close()
		return nil, nil, err
	}
	r := &routerSession{session: s, large: plan}
	if err := r.converge(); err != nil {
		s.Close()
		return nil, nil, err
	}
	var sinks []lab.Endpoint
	for _, p := range plan.Ports {
		if p.Host != gen.Host {
			sinks = append(sinks, lab.Endpoint{Node: p.Host, Iface: "eth0"})
		}
	}
	if s.sink, err = hostSink(s.spec.Name, sinks, flows); err != nil {
		s.Close()
		return nil, nil, err
	}
	if s.last, err = s.sink.Read(); err != nil {
		s.Close()
		return nil, nil, err
	}
	s.sinkEnd = sinks[0]
	runtime.GC()
	return &RouterLab{r: r}, plan, nil
}

// hostSink loads a sink for flows flows and attaches it to every host
// interface of ends (from the lab's xdp_pass), each instance counting
// only the frames addressed to its interface.
func hostSink(labName string, ends []lab.Endpoint, flows int) (*traffic.Sink, error) {
	var sink *traffic.Sink
	for _, e := range ends {
		if err := lab.DetachXDP(labName, e); err != nil {
			return nil, err
		}
		err := netns.Do(lab.Namespace(labName, e.Node), func() (err error) {
			if sink == nil {
				if sink, err = traffic.NewSink(e.Iface, flows); err != nil {
					return err
				}
				if err := sink.Detach(); err != nil {
					return err
				}
			}
			return sink.AttachHost(e.Iface)
		})
		if err != nil {
			if sink != nil {
				sink.Close()
			}
			return nil, fmt.Errorf("the sink on %s: %w", e.Node, err)
		}
	}
	return sink, nil
}

// convergeLarge waits until the large router has converged again (every
// element alive, every LB's table, every port up, every back-end's
// routes), and a second more for the LBs' tables to settle.
func convergeLarge(p *demo.LargePlan, within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := demo.WaitLarge(ctx, p, io.Discard); err != nil {
		return fmt.Errorf("the large lab: %w", err)
	}
	time.Sleep(time.Second)
	return nil
}
