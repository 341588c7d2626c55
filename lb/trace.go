package lb

import (
	"fmt"
	"net"

	"github.com/msr-router/msr/internal/trace"
	"github.com/msr-router/msr/internal/xdp"
)

// msr trace at an LB (internal/trace): the data path reports the frames
// that match the trace at the moment it sends or drops them; the agent
// says which port they came by, which rule of Table 1 (the module) took
// them, and, balanced, which slot of which table mode chose which
// back-end, and where they went.

// SetTrace sets the data path's trace match; nil: none.
func (d *Dataplane) SetTrace(spec *trace.Spec) error { return xdp.SetTrace(d.objs.LbTrace, spec) }

// startTrace starts reading the data path's trace reports.
func (a *Agent) startTrace() (func(), error) {
	rd, err := xdp.ReadTrace(a.dp.objs.LbTraceEvents, &a.trace, a.describeTrace)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	return func() { rd.Close() }, nil
}

// describeTrace puts a report in words.
func (a *Agent) describeTrace(r trace.Raw, _ trace.Packet) trace.Event {
	e := trace.Event{Element: a.cfg.Name, Kind: "lb"}
	if p := a.portByIndex(uint8(r.InPort)); p != nil {
		e.In, e.Ingress = p.name, p.role == RoleExternal
	}
	module := ""
	if m := r.Detail[2]; m < uint32(len(ModuleNames)) {
		module = ModuleNames[m]
	}
	switch r.Verdict {
	case uint16(lbxdpMsrTraceVerdictMSR_TRACE_SENT):
		p := a.portByIndex(uint8(r.OutPort))
		if p != nil {
			e.Out = p.name
			e.Leaves = p.role == RoleExternal && r.Reason == uint16(lbxdpLbModuleLB_MOD_INT_TO_EXT)
		}
		e.Reason = module
		e.Decision = module
		if module == "balance" && len(r.Frame) >= 6 {
			mac := net.HardwareAddr(r.Frame[:6])
			e.Decision = fmt.Sprintf("balance: slot %d of the %s table, to %s", r.Detail[0], Mode(r.Detail[1]), a.backendName(mac))
		}
	case uint16(lbxdpMsrTraceVerdictMSR_TRACE_DROPPED):
		if int(r.Reason) < len(DropNames) {
			e.Reason = DropNames[r.Reason]
		}
		if module != "" && module != "ext_arp" { // 0: none taken yet
			e.Decision = module
		}
	}
	return e
}

// backendName is the name a back-end's hellos give (its MAC if none).
func (a *Agent) backendName(mac net.HardwareAddr) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if b := a.backends[mac.String()]; b != nil && b.name != "" {
		return b.name + " (" + mac.String() + ")"
	}
	return mac.String()
}
