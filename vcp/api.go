package vcp

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/api"
	"github.com/msr-router/msr/internal/metrics"
	"github.com/msr-router/msr/internal/trace"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// The VCP's API (internal/api), on its Unix socket and, with api_listen,
// on the management network, where `msr ctl` is its client:
//
//	GET  /status                   Status: everything below at once
//	GET  /elements                 []vcpapi.ElementStatus
//	GET  /ports                    vcpapi.PortsView: the router's ports and counters
//	GET  /tables                   []vcpapi.TableStatus: every LB's balancing table
//	GET  /routes                   vcpapi.RoutesView: count, protocols, per back-end install state
//	GET  /routes/lookup?addr=A     vcpapi.LookupView: the suite's and every back-end's routes for A
//	POST /drain?name=B, /undrain?name=B
//	POST /weight?name=B&capacity=MBPS   (0: the configured or announced one again)
//	POST /reload[?dry_run=1][&confirm=2m]  vcpapi.ReloadResult: the config file read again, the difference applied (or only said); rolled back unless confirmed in time
//	POST /confirm                  vcpapi.HistoryView: the changes waiting for a confirm kept
//	POST /rollback?n=N             vcpapi.ReloadResult: the config applied N changes ago applied again
//	GET  /history                  vcpapi.HistoryView: the last ten configs applied, who, when, how
//	ANY  /relay/ELEMENT/PATH       the request, passed to ELEMENT's own API (by name or id)

// Status reports elements and tables, the suite, mirrors and DIST.
func (a *Agent) Status() *vcpapi.Status {
	s := &vcpapi.Status{Name: a.cfg.Name, Mirrors: a.mirrors.Counters(), DIST: a.conn.Counters()}
	s.DISTRoleRefused = s.DIST["role_refused"]
	if suite := a.currentSuite(); suite != nil {
		st := suite.Status()
		s.Suite = &st
	}
	s.Role, s.Elements, s.Tables = a.topology()
	a.mu.Lock()
	s.LastPush = a.lastPush
	s.PrefixLimitHits = maps.Clone(a.limitHits)
	s.AllBackendsSilent = a.allSilentCount
	s.UnknownPorts = uint64(len(a.unknownPorts))
	a.mu.Unlock()
	return s
}

// topology is the VCP's role, the elements, and the table of each LB: what
// the VCP knows without asking its suite.
func (a *Agent) topology() (string, []vcpapi.ElementStatus, []vcpapi.TableStatus) {
	a.mu.Lock()
	defer a.mu.Unlock()
	role := "standby"
	if a.active {
		role = "active"
	}
	elements, tables := []vcpapi.ElementStatus{}, []vcpapi.TableStatus{}
	now := time.Now()
	names := map[string]string{}
	for _, e := range a.elements {
		names[e.mac.String()] = e.hello.Name
		elements = append(elements, vcpapi.ElementStatus{ID: fmt.Sprintf("%#x", e.id), Name: e.hello.Name, Role: roleName(e.hello.Role),
			MAC: e.mac.String(), Alive: e.alive, Drained: a.op.drained[e.hello.Name], Capacity: a.capacity(e),
			LastHelloMs: now.Sub(e.last).Milliseconds(), Installed: e.hello.Installed, Ports: elementPorts(e.hello),
			Busy: float64(e.hello.Busy) / 10000})
		if e.hello.Role == dist.RoleRouter {
			elements[len(elements)-1].LoadFactor = a.loadFactor(e.hello.Name)
		}
	}
	sort.Slice(elements, func(i, j int) bool { return elements[i].Name < elements[j].Name })
	for _, lb := range a.elements.sorted(dist.RoleLB) {
		mode, entries := a.table(lb)
		t := vcpapi.TableStatus{LB: lb.hello.Name, Mode: mode.String(), Weights: map[string]uint16{}}
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
	mux.Handle("GET "+metrics.Path, metrics.Handler(a.Metrics()))
	mux.HandleFunc("GET "+vcpapi.PathStatus, func(w http.ResponseWriter, r *http.Request) { api.Reply(w, a.Status(), nil) })
	mux.HandleFunc("GET "+vcpapi.PathView, func(w http.ResponseWriter, r *http.Request) { api.Reply(w, a.View(), nil) })
	mux.Handle("GET /{$}", webHandler())
	mux.Handle("GET /web/", http.StripPrefix("/web", webHandler()))
	mux.HandleFunc("GET "+vcpapi.PathElements, func(w http.ResponseWriter, r *http.Request) {
		_, elements, _ := a.topology()
		api.Reply(w, elements, nil)
	})
	mux.HandleFunc("GET "+vcpapi.PathTables, func(w http.ResponseWriter, r *http.Request) {
		_, _, tables := a.topology()
		api.Reply(w, tables, nil)
	})
	mux.HandleFunc("GET "+vcpapi.PathACL, func(w http.ResponseWriter, r *http.Request) { api.Reply(w, a.ACL(), nil) })
	mux.HandleFunc("GET "+vcpapi.PathPorts, func(w http.ResponseWriter, r *http.Request) { api.Reply(w, a.Ports(), nil) })
	mux.HandleFunc("GET "+vcpapi.PathRoutes, func(w http.ResponseWriter, r *http.Request) {
		v, err := a.Routes()
		api.Reply(w, v, err)
	})
	mux.HandleFunc("GET "+vcpapi.PathLookup, func(w http.ResponseWriter, r *http.Request) {
		addr, err := api.AddrParam(r, "addr")
		if err != nil {
			api.Reply(w, nil, err)
			return
		}
		api.Reply(w, a.Lookup(addr), nil)
	})
	for path, drain := range map[string]bool{vcpapi.PathDrain: true, vcpapi.PathUndrain: false} {
		mux.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) {
			name := r.URL.Query().Get("name")
			api.Reply(w, map[string]string{path[1:]: name}, a.Drain(name, drain))
		})
	}
	mux.HandleFunc("POST "+vcpapi.PathWeight, func(w http.ResponseWriter, r *http.Request) {
		name, c := r.URL.Query().Get("name"), r.URL.Query().Get("capacity")
		mbps, err := strconv.ParseUint(c, 10, 32)
		if err != nil {
			api.Reply(w, nil, fmt.Errorf("capacity %q: Mbit/s, such as 1000", c))
			return
		}
		api.Reply(w, map[string]any{"name": name, "capacity_mbps": mbps}, a.SetCapacity(name, uint32(mbps)))
	})
	mux.HandleFunc("POST "+vcpapi.PathReload, func(w http.ResponseWriter, r *http.Request) {
		o := ReloadOptions{DryRun: r.URL.Query().Get("dry_run") == "1", Who: api.Who(r)}
		if c := r.URL.Query().Get("confirm"); c != "" {
			var err error
			if o.Confirm, err = vcpapi.ParseConfirm(c); err != nil {
				api.Reply(w, nil, err)
				return
			}
		}
		res, err := a.Reload(o)
		api.Reply(w, res, err)
	})
	mux.HandleFunc("POST "+vcpapi.PathConfirm, func(w http.ResponseWriter, r *http.Request) {
		v, err := a.Confirm(api.Who(r))
		api.Reply(w, v, err)
	})
	mux.HandleFunc("POST "+vcpapi.PathRollback, func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.URL.Query().Get("n"))
		if err != nil {
			api.Reply(w, nil, fmt.Errorf("rollback %q: the number of changes back, 1 to %d", r.URL.Query().Get("n"), historyKeep-1))
			return
		}
		res, err := a.Rollback(n, api.Who(r))
		api.Reply(w, res, err)
	})
	mux.HandleFunc("GET "+vcpapi.PathHistory, func(w http.ResponseWriter, r *http.Request) {
		v, err := a.History()
		api.Reply(w, v, err)
	})
	mux.HandleFunc("POST "+vcpapi.PathTrace, func(w http.ResponseWriter, r *http.Request) {
		wait := 5 * time.Second
		if q := r.URL.Query().Get("wait"); q != "" {
			var err error
			if wait, err = time.ParseDuration(q); err != nil {
				api.Reply(w, nil, fmt.Errorf("trace: wait %q: %v", q, err))
				return
			}
		}
		var spec trace.Spec
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&spec); err != nil {
			api.Reply(w, nil, fmt.Errorf("trace: %w", err))
			return
		}
		res, err := a.Trace(spec, wait)
		api.Reply(w, res, err)
	})
	mux.HandleFunc(vcpapi.PathRelay+"/{element}/{path...}", func(w http.ResponseWriter, r *http.Request) {
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

// elementPorts are h's ports as the API gives them.
func elementPorts(h *dist.Hello) []vcpapi.ElementPort {
	ports := make([]vcpapi.ElementPort, 0, len(h.Ports))
	for _, p := range h.Ports {
		ports = append(ports, vcpapi.ElementPort{Name: dist.PortName(h.Name, p.Name), Index: p.Index, Role: p.Role.String(), VLAN: p.VLAN,
			MAC: p.MAC.String(), Prefix: p.Prefix, Up: p.Up(), AdminUp: p.AdminUp(), SpeedMbps: p.SpeedMbps, MTU: p.MTU,
			RxPackets: p.RxPackets, RxBytes: p.RxBytes, TxPackets: p.TxPackets, TxBytes: p.TxBytes, RxDropped: p.RxDropped})
	}
	return ports
}
