package lb

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"

	"github.com/msr-router/msr/internal/api"
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
	case 1: // sent
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
	case 2: // dropped
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

// registerTrace serves the trace on the agent's API: POST a spec starts
// it (a change: the admin's), GET says what it caught, DELETE ends it.
func (a *Agent) registerTrace(mux *http.ServeMux) {
	mux.HandleFunc("POST "+trace.Path, func(w http.ResponseWriter, r *http.Request) {
		var spec trace.Spec
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&spec); err != nil {
			api.Reply(w, nil, fmt.Errorf("trace: %w", err))
			return
		}
		if err := spec.Check(); err != nil {
			api.Reply(w, nil, err)
			return
		}
		a.trace.Start(spec)
		if err := a.dp.SetTrace(&spec); err != nil {
			a.trace.Stop()
			api.Reply(w, nil, err)
			return
		}
		api.Reply(w, a.trace.Capture(), nil)
	})
	mux.HandleFunc("GET "+trace.Path, func(w http.ResponseWriter, r *http.Request) { api.Reply(w, a.trace.Capture(), nil) })
	mux.HandleFunc("DELETE "+trace.Path, func(w http.ResponseWriter, r *http.Request) {
		err := a.dp.SetTrace(nil)
		a.trace.Stop()
		api.Reply(w, a.trace.Capture(), err)
	})
}
