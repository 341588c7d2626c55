package vcp

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/api"
)

// The VCP's local API (internal/api): GET /status; POST /drain?name=B and
// POST /undrain?name=B.

// Status is the router as the VCP sees it.
type Status struct {
	Name     string            `json:"name"`
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

// Status reports elements and tables.
func (a *Agent) Status() *Status {
	s := &Status{Name: a.cfg.Name, Elements: []ElementStatus{}, Tables: []TableStatus{}, Mirrors: a.mirrors.Counters(), DIST: a.conn.Counters()}
	if a.suite != nil {
		st := a.suite.Status()
		s.Suite = &st
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	names := map[string]string{}
	for _, e := range a.elements {
		names[e.mac.String()] = e.hello.Name
		s.Elements = append(s.Elements, ElementStatus{ID: fmt.Sprintf("%#x", e.id), Name: e.hello.Name, Role: roleName(e.hello.Role),
			MAC: e.mac.String(), Alive: e.alive, Drained: a.drained[e.hello.Name], Capacity: a.capacity(e),
			LastHelloMs: now.Sub(e.last).Milliseconds(), Installed: e.hello.Installed, Ports: e.hello.Ports})
	}
	sort.Slice(s.Elements, func(i, j int) bool { return s.Elements[i].Name < s.Elements[j].Name })
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
		s.Tables = append(s.Tables, t)
	}
	return s
}

// Serve answers API requests on the Unix socket path until ctx ends.
func (a *Agent) Serve(ctx context.Context, path string) error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) { api.Reply(w, a.Status(), nil) })
	for _, op := range []string{"drain", "undrain"} {
		mux.HandleFunc("POST /"+op, func(w http.ResponseWriter, r *http.Request) {
			name := r.URL.Query().Get("name")
			api.Reply(w, map[string]string{op: name}, a.Drain(name, op == "drain"))
		})
	}
	return api.Serve(ctx, path, mux)
}

// NewClient dials the VCP on the Unix socket path.
func NewClient(path string) *api.Client { return api.NewClient(path, "msr vcp") }
