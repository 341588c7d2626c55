package router

import (
	"fmt"
	"strings"

	"github.com/msr-router/msr/internal/trace"
	"github.com/msr-router/msr/internal/xdp"
)

// msr trace at a back-end (internal/trace): the data path reports the
// frames that match the trace when it sends, drops, hands to the slow
// path or passes them; the agent says by which VLAN (external port) it
// came, the route the FIB holds for it and the next hop chosen, what the
// ACL or unicast RPF said, its TTL and the VLAN it leaves on.

// SetTrace sets the data path's trace match; nil: none.
func (d *Dataplane) SetTrace(spec *trace.Spec) error { return xdp.SetTrace(d.objs.RtTrace, spec) }

// startTrace starts reading the data path's trace reports.
func (a *Agent) startTrace() (func(), error) {
	rd, err := xdp.ReadTrace(a.dp.objs.RtTraceEvents, &a.trace, a.describeTrace)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	return func() { rd.Close() }, nil
}

// describeTrace puts a report in words.
func (a *Agent) describeTrace(r trace.Raw, p trace.Packet) trace.Event {
	e := trace.Event{Element: a.cfg.Name, Kind: "router"}
	if r.InPort != 0 {
		e.In = fmt.Sprintf("vlan %d", r.InPort)
	}
	var words []string
	if rs := a.Lookup(p.Dst); len(rs) > 0 {
		ri := rs[0]
		route := "route " + ri.Prefix
		if len(ri.Via) > 0 {
			route += " via " + strings.Join(ri.Via, ", ")
		}
		if ri.Protocol != "" {
			route += " (" + ri.Protocol + ")"
		}
		words = append(words, route)
	} else {
		words = append(words, "no route")
	}
	switch r.Verdict {
	case uint16(rtxdpMsrTraceVerdictMSR_TRACE_SENT):
		e.Out = fmt.Sprintf("vlan %d", r.OutPort)
		words = append(words, a.nextHopWords(r.Detail[0]), fmt.Sprintf("ttl %d -> %d", p.TTL+1, p.TTL))
	case uint16(rtxdpMsrTraceVerdictMSR_TRACE_DROPPED):
		if int(r.Reason) < len(DropNames) {
			e.Reason = DropNames[r.Reason]
		}
	case uint16(rtxdpMsrTraceVerdictMSR_TRACE_SLOW):
		if int(r.Reason) < len(SlowNames) {
			e.Reason = SlowNames[r.Reason]
		}
		if r.Detail[0] != 0 {
			words = append(words, a.nextHopWords(r.Detail[0]))
		}
		words = append(words, fmt.Sprintf("ttl %d", p.TTL))
	case uint16(rtxdpMsrTraceVerdictMSR_TRACE_PASSED):
		e.Reason = "this host"
	}
	e.Decision = strings.Join(words, ", ")
	return e
}

// nextHopWords says next hop id: its gateway (or the destination itself,
// connected) and the VLAN of its port.
func (a *Agent) nextHopWords(id uint32) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	k, ok := a.nh.next(id)
	if !ok {
		return fmt.Sprintf("next hop %d", id)
	}
	var vlan uint16
	if int(k.port) < len(a.ports) {
		vlan = a.ports[k.port].VLAN
	}
	if !k.gw.IsValid() {
		return fmt.Sprintf("next hop: the destination, connected on vlan %d", vlan)
	}
	return fmt.Sprintf("next hop %s on vlan %d", k.gw, vlan)
}
