package vcp

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/api"
)

// The VCP's API (internal/api), on its Unix socket and, with api_listen,
// on the management network, where `msr ctl` is its client:
//
//	GET  /status                   Status: everything below at once
//	GET  /elements                 []ElementStatus
//	GET  /ports                    PortsView: the router's ports and counters
//	GET  /tables                   []TableStatus: every LB's balancing table
//	GET  /routes                   RoutesView: count, protocols, per back-end install state
//	GET  /routes/lookup?addr=A     LookupView: the suite's and every back-end's routes for A
//	POST /drain?name=B, /undrain?name=B
//	POST /weight?name=B&capacity=MBPS   (0: the configured or announced one again)
//	POST /reload                   ReloadResult: the config file read again, the difference applied
//	ANY  /relay/ELEMENT/PATH       the request, passed to ELEMENT's own API (by name or id)

// Status is the router as the VCP sees it.
type Status struct {
	Name     string            `json:"name"`
	Role     string            `json:"role"` // active, or standby (docs/vcp.md, hot standby)
	Elements []ElementStatus   `json:"elements"`
	Tables   []TableStatus     `json:"tables"`
	Suite    *SuiteStatus      `json:"suite,omitempty"`
	Mirrors  map[string]uint64 `json:"mirrors"`
	// DIST counts control frames sent, accepted, and refused by reason
	// (a wrong key shows as "auth" or "unknown_key").
	DIST map[string]uint64 `json:"dist"`
}

// ElementStatus is one element.
type ElementStatus struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Role        string `json:"role"`
	MAC         string `json:"mac"`
	Alive       bool   `json:"alive"`
	Drained     bool   `json:"drained,omitempty"`
	Capacity    uint32 `json:"capacity_mbps"`
	LastHelloMs int64  `json:"last_hello_ms"`
	// Installed: an LB's table generation, a back-end's FIB routes.
	Installed uint32            `json:"installed"`
	Ports     []dist.PortStatus `json:"ports"`
}

// TableStatus is the table the VCP computed for one LB.
type TableStatus struct {
	LB         string            `json:"lb"`
	Mode       string            `json:"mode"`
	Generation uint32            `json:"generation"`
	Applied    bool              `json:"applied"` // the LB reports this generation
	Weights    map[string]uint16 `json:"weights"` // back-end name -> weight (per port)
}

// Status reports elements and tables, the suite, mirrors and DIST.
func (a *Agent) Status() *Status {
	s := &Status{Name: a.cfg.Name, Mirrors: a.mirrors.Counters(), DIST: a.conn.Counters()}
	if suite := a.currentSuite(); suite != nil {
		st := suite.Status()
		s.Suite = &st
	}
	s.Role, s.Elements, s.Tables = a.topology()
	return s
}

// topology is the VCP's role, the elements, and the table of each LB: what
// the VCP knows without asking its suite.
func (a *Agent) topology() (string, []ElementStatus, []TableStatus) {
	a.mu.Lock()
	defer a.mu.Unlock()
	role := "standby"
	if a.active {
		role = "active"
	}
	elements, tables := []ElementStatus{}, []TableStatus{}
	now := time.Now()
	names := map[string]string{}
	for _, e := range a.elements {
		names[e.mac.String()] = e.hello.Name
		elements = append(elements, ElementStatus{ID: fmt.Sprintf("%#x", e.id), Name: e.hello.Name, Role: roleName(e.hello.Role),
			MAC: e.mac.String(), Alive: e.alive, Drained: a.drained[e.hello.Name], Capacity: a.capacity(e),
			LastHelloMs: now.Sub(e.last).Milliseconds(), Installed: e.hello.Installed, Ports: e.hello.Ports})
	}
	sort.Slice(elements, func(i, j int) bool { return elements[i].Name < elements[j].Name })
	for _, lb := range a.sorted(dist.RoleLB) {
		mode, entries := a.table(lb)
		t := TableStatus{LB: lb.hello.Name, Mode: [...]string{"", "wrr", "hash", "maglev"}[mode], Weights: map[string]uint16{}}
		if p := a.pushed[lb.id]; p != nil {
			t.Generation = p.generation
			t.Applied = lb.hello.Installed == p.generation
		}
		for _, e := range entries {
			t.Weights[names[e.MAC.String()]] = e.Weight
		}
		tables = append(tables, t)
	}
	return role, elements, tables
}

// Handler answers the API's requests.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) { api.Reply(w, a.Status(), nil) })
	mux.HandleFunc("GET /elements", func(w http.ResponseWriter, r *http.Request) {
		_, elements, _ := a.topology()
		api.Reply(w, elements, nil)
	})
	mux.HandleFunc("GET /tables", func(w http.ResponseWriter, r *http.Request) {
		_, _, tables := a.topology()
		api.Reply(w, tables, nil)
	})
	mux.HandleFunc("GET /ports", func(w http.ResponseWriter, r *http.Request) { api.Reply(w, a.Ports(), nil) })
	mux.HandleFunc("GET /routes", func(w http.ResponseWriter, r *http.Request) {
		v, err := a.Routes()
		api.Reply(w, v, err)
	})
	mux.HandleFunc("GET /routes/lookup", func(w http.ResponseWriter, r *http.Request) {
		addr, err := api.IPv4Param(r, "addr")
		if err != nil {
			api.Reply(w, nil, err)
			return
		}
		api.Reply(w, a.Lookup(addr), nil)
	})
	for _, op := range []string{"drain", "undrain"} {
		mux.HandleFunc("POST /"+op, func(w http.ResponseWriter, r *http.Request) {
			name := r.URL.Query().Get("name")
			api.Reply(w, map[string]string{op: name}, a.Drain(name, op == "drain"))
		})
	}
	mux.HandleFunc("POST /weight", func(w http.ResponseWriter, r *http.Request) {
		name, c := r.URL.Query().Get("name"), r.URL.Query().Get("capacity")
		mbps, err := strconv.ParseUint(c, 10, 32)
		if err != nil {
			api.Reply(w, nil, fmt.Errorf("capacity %q: Mbit/s, such as 1000", c))
			return
		}
		api.Reply(w, map[string]any{"name": name, "capacity_mbps": mbps}, a.SetCapacity(name, uint32(mbps)))
	})
	mux.HandleFunc("POST /reload", func(w http.ResponseWriter, r *http.Request) {
		res, err := a.Reload()
		api.Reply(w, res, err)
	})
	mux.HandleFunc("/relay/{element}/{path...}", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if len(body) == 0 {
			body = nil
		}
		path := "/" + r.PathValue("path")
		if r.URL.RawQuery != "" {
			path += "?" + r.URL.RawQuery
		}
		var status int
		if err == nil {
			status, body, err = a.Relay(r.PathValue("element"), r.Method, path, body)
		}
		if err != nil {
			api.Reply(w, nil, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write(body)
	})
	return mux
}

// NewClient dials the VCP on the Unix socket path.
func NewClient(path string) *api.Client { return api.NewClient(path, "msr vcp") }
