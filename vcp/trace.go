package vcp

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/trace"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// msr trace (internal/trace) across the router: the VCP gives every live
// LB and back-end the trace's match, gathers what each reports until
// every packet's walk has ended or the wait is over, ends the trace
// everywhere, and joins the reports into one walk a packet.

// tracePoll is how often the VCP gathers the elements' reports.
const tracePoll = 200 * time.Millisecond

// Trace follows spec's packets (its id drawn here) for at most wait.
func (a *Agent) Trace(spec trace.Spec, wait time.Duration) (*vcpapi.TraceResult, error) {
	if wait <= 0 || wait > trace.MaxWait {
		return nil, fmt.Errorf("trace: wait %v: up to %v", wait, trace.MaxWait)
	}
	spec.ID, spec.Hold = rand.Uint32()|1, false
	if err := spec.Check(); err != nil {
		return nil, err
	}
	res := &vcpapi.TraceResult{Spec: spec, Walks: []trace.Walk{}, Reports: map[string]int{}}
	var on []string
	defer func() {
		for _, name := range on {
			a.Relay(name, "DELETE", trace.Path, nil)
		}
	}()
	// Every stage armed for what comes from inside first, then the LBs
	// follow packets in: a packet followed finds every stage armed.
	arm := func(name string, s trace.Spec) error {
		body, _ := json.Marshal(s)
		status, answer, err := a.Relay(name, "POST", trace.Path, body)
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("%d %s", status, answer)
		}
		return err
	}
	held := spec
	held.Hold = true
	lbs, backends := a.traceElements()
	for _, name := range append(backends, lbs...) {
		if err := arm(name, held); err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		on = append(on, name)
		res.Elements = append(res.Elements, name)
	}
	in := 0
	for _, name := range lbs {
		if !slices.Contains(on, name) {
			continue
		}
		if err := arm(name, spec); err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("%s, following packets in: %v", name, err))
			continue
		}
		in++
	}
	if in == 0 {
		return nil, fmt.Errorf("trace: no LB took the trace: %v", res.Errors)
	}
	for deadline := time.Now().Add(wait); ; {
		time.Sleep(tracePoll)
		var events []trace.Event
		for _, name := range on {
			status, answer, err := a.Relay(name, "GET", trace.Path, nil)
			var c trace.Capture
			if err != nil || status != http.StatusOK || json.Unmarshal(answer, &c) != nil || c.Spec == nil || c.Spec.ID != spec.ID {
				continue
			}
			events = append(events, c.Events...)
			res.Reports[name] = len(c.Events)
		}
		res.Walks = trace.Join(events)
		if trace.Done(res.Walks, int(spec.Count)) || time.Now().After(deadline) {
			break
		}
	}
	a.mu.Lock()
	a.traces = append(a.traces, res.Walks...)
	a.traces = slices.Delete(a.traces, 0, max(0, len(a.traces)-maxTraces))
	a.mu.Unlock()
	return res, nil
}

// maxTraces is how many traced walks the web view keeps.
const maxTraces = 10

// traceElements are the live LBs and back-ends, by name.
func (a *Agent) traceElements() (lbs, backends []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range a.elements.sorted(dist.RoleLB) {
		if e.alive {
			lbs = append(lbs, e.hello.Name)
		}
	}
	for _, e := range a.elements.sorted(dist.RoleRouter) {
		if e.alive {
			backends = append(backends, e.hello.Name)
		}
	}
	return lbs, backends
}
