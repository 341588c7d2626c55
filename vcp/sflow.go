package vcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/sflow"
	"github.com/msr-router/msr/lb/lbapi"
)

// sFlow from the router's config: the active VCP gives every live LB the
// export its sflow section and external ports say (lbapi.PathSFlow on the
// LB's API), in place of the LB file's, and takes it back when the
// section goes. It looks each sflowSync, and at once when an LB appears
// or comes back, the config is reloaded or this VCP takes over: an LB
// agent that restarts exports its file's until then.

const sflowSync = 5 * time.Second

// syncSFlow keeps the LBs' exports as the config wants until ctx ends.
func (a *Agent) syncSFlow(ctx context.Context) {
	t := time.NewTicker(sflowSync)
	defer t.Stop()
	failed := map[string]string{} // an LB's last error, logged once
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.sflowKick:
		}
		for _, w := range a.sflowWanted() {
			err := a.syncSFlowOf(w.lb, w.export)
			switch {
			case err != nil && failed[w.lb] != err.Error():
				a.log.Warn("sflow export", "lb", w.lb, "err", err)
				failed[w.lb] = err.Error()
			case err == nil:
				delete(failed, w.lb)
			}
		}
	}
}

// kickSFlow has syncSFlow look now.
func (a *Agent) kickSFlow() {
	select {
	case a.sflowKick <- struct{}{}:
	default:
	}
}

type sflowWant struct {
	lb     string
	export *lbapi.SFlowExport // nil: the LB's own
}

// sflowWanted is the export each live LB should have; none while standby.
// An LB without an API in the config is left out unless the config has
// an export (it then fails, and says why).
func (a *Agent) sflowWanted() []sflowWant {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.active {
		return nil
	}
	var out []sflowWant
	for _, e := range a.elements.sorted(dist.RoleLB) {
		if !e.alive {
			continue
		}
		w := sflowWant{lb: e.hello.Name}
		if _, ok := a.cfg.apiOf(w.lb); !ok && a.cfg.SFlow == nil {
			continue // nothing to take back where nothing could be set
		}
		if s := a.cfg.SFlow; s != nil {
			w.export = &lbapi.SFlowExport{Collectors: s.Collectors, AgentAddress: s.AgentAddress,
				CounterInterval: uint32(s.CounterInterval / time.Second), Rates: map[string]uint32{}, IPFIX: lbapi.IPFIXOf(s.IPFIX)}
			for _, hp := range e.hello.Ports {
				if rate := a.cfg.sflowRate(e.hello.Name, hp.MAC.String(), s); rate > 0 {
					w.export.Rates[hp.MAC.String()] = rate
				}
			}
		}
		out = append(out, w)
	}
	return out
}

// sflowRate is the rate the config gives an LB's port (0: none, or not an
// external port).
func (c *Config) sflowRate(lb, mac string, s *sflow.FileConfig) uint32 {
	for _, p := range c.ExternalPorts {
		if p.LB == lb && p.mac.String() == mac {
			if p.SFlowRate != nil {
				return *p.SFlowRate
			}
			return s.SamplingRate
		}
	}
	return 0
}

// syncSFlowOf gives one LB the export wanted (nil: its own file's), if it
// has another.
func (a *Agent) syncSFlowOf(lb string, want *lbapi.SFlowExport) error {
	status, body, err := a.Relay(lb, "GET", lbapi.PathSFlow, nil)
	if err != nil {
		return err
	}
	var got *lbapi.SFlowExport
	if status != http.StatusOK || json.Unmarshal(body, &got) != nil {
		return fmt.Errorf("GET %s: %d %.200s", lbapi.PathSFlow, status, body)
	}
	fromVCP := got != nil && got.From == lbapi.SFlowFromVCP
	method, put := "", []byte(nil)
	switch {
	case want == nil && fromVCP:
		method = "DELETE"
	case want != nil && (!fromVCP || !want.Same(got)):
		method = "PUT"
		put, _ = json.Marshal(want)
	default:
		return nil
	}
	status, body, err = a.Relay(lb, method, lbapi.PathSFlow, put)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("%s %s: %d %.200s", method, lbapi.PathSFlow, status, body)
	}
	if err == nil {
		a.log.Info("sflow export set", "lb", lb, "from", map[bool]string{true: "the router's config", false: "the LB's file"}[want != nil])
	}
	return err
}
