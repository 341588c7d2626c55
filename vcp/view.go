package vcp

import (
	"embed"
	"fmt"
	"io/fs"
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// The web view: a read-only page the VCP serves on its management
// listener (GET /, its assets embedded in the binary: no build step, no
// network at run time) that draws the router — its LBs, switch,
// back-ends and VCPs — with each port's rate, each back-end's share,
// the routes per protocol, the sessions and the recent events, from
// GET /view every second. Nothing on it changes anything: changes stay
// behind the API's token.

//go:embed web
var webFiles embed.FS

// webHandler serves the page and its assets.
func webHandler() http.Handler {
	sub, err := fs.Sub(webFiles, "web")
	if err != nil {
		panic(err)
	}
	return http.FileServerFS(sub)
}

// rateWindow is the least time between two samples of a counter that a
// rate is computed from: hellos come every 100 ms, counters move in steps.
const rateWindow = time.Second

// rateMeter turns counters into rates: per element and port, the last
// sample and the rate computed at it.
type rateMeter struct {
	samples map[string]*rateSample
}

type rateSample struct {
	at      time.Time
	packets uint64
	bytes   uint64
	pps     float64
	bps     float64
}

// observe records a port's receive counters at now.
func (m *rateMeter) observe(key string, now time.Time, packets, bytes uint64) {
	if m.samples == nil {
		m.samples = map[string]*rateSample{}
	}
	s := m.samples[key]
	switch {
	case s == nil || packets < s.packets: // new, or its counters restarted
		m.samples[key] = &rateSample{at: now, packets: packets, bytes: bytes}
	case now.Sub(s.at) >= rateWindow:
		dt := now.Sub(s.at).Seconds()
		s.pps, s.bps = float64(packets-s.packets)/dt, 8*float64(bytes-s.bytes)/dt
		s.at, s.packets, s.bytes = now, packets, bytes
	}
}

// rate is a port's last rates, zero when stale (no sample for 3 windows).
func (m *rateMeter) rate(key string, now time.Time) (pps, bps float64) {
	if s := m.samples[key]; s != nil && now.Sub(s.at) < 3*rateWindow {
		return s.pps, s.bps
	}
	return 0, 0
}

// maxEvents is how many recent events the view keeps.
const maxEvents = 50

// event records something an operator watching would want to see; call
// it with a.mu held.
func (a *Agent) event(format string, args ...any) {
	a.events = append(a.events, vcpapi.ViewEvent{At: time.Now().UTC(), Text: fmt.Sprintf(format, args...)})
	if len(a.events) > maxEvents {
		a.events = slices.Delete(a.events, 0, len(a.events)-maxEvents)
	}
}

// View is what the web view draws, now.
func (a *Agent) View() *vcpapi.View {
	now := time.Now()
	v := &vcpapi.View{Name: a.cfg.Name, At: now.UTC(), Routes: map[string]int{}, Talkers: a.topTalkers()}
	if suite := a.currentSuite(); suite != nil {
		for _, p := range suite.Protocols() {
			v.Sessions = append(v.Sessions, vcpapi.ViewSession{Name: p.Name, Proto: p.Proto, State: p.State, Info: p.Info, Routes: p.Imported})
			v.Routes[p.Proto] += p.Imported
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	v.Active = a.active
	var total float64
	for _, e := range a.elements {
		ve := vcpapi.ViewElement{Name: e.hello.Name, Role: roleName(e.hello.Role), Alive: e.alive, Drained: a.op.drained[e.hello.Name],
			Installed: e.hello.Installed}
		for _, p := range e.hello.Ports {
			key := e.hello.Name + "/" + fmt.Sprint(p.Index)
			pps, bps := a.rates.rate(key, now)
			vp := vcpapi.ViewPort{Name: portName(e.hello.Name, p), Role: p.Role.String(),
				Up: p.Up(), RxPPS: pps, RxBPS: bps}
			if e.hello.Role == dist.RoleLB {
				ve.Ports = append(ve.Ports, vp)
			}
			if e.hello.Role == dist.RoleRouter && p.Role == dist.PortInternal {
				ve.RxPPS = pps
			}
		}
		if e.hello.Role == dist.RoleRouter && e.alive {
			total += ve.RxPPS
		}
		v.Elements = append(v.Elements, ve)
	}
	for i := range v.Elements {
		if e := &v.Elements[i]; e.Role == "router" && e.Alive && total > 0 {
			e.Share = e.RxPPS / total
		}
	}
	// The VCPs: this one, and its twin as its announcements say.
	v.Elements = append(v.Elements, vcpapi.ViewElement{Name: a.cfg.Name, Role: "vcp", Alive: true, Active: a.active})
	sort.Slice(v.Elements, func(i, j int) bool {
		if v.Elements[i].Role != v.Elements[j].Role {
			return v.Elements[i].Role < v.Elements[j].Role
		}
		return v.Elements[i].Name < v.Elements[j].Name
	})
	v.Events = slices.Clone(a.events)
	slices.Reverse(v.Events) // newest first
	v.Traces = slices.Clone(a.traces)
	slices.Reverse(v.Traces)
	return v
}
