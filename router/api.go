package router

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strconv"

	"github.com/msr-router/msr/internal/api"
	"github.com/msr-router/msr/internal/metrics"
	"github.com/msr-router/msr/internal/trace"
	"github.com/msr-router/msr/router/routerapi"
)

// The agent's API (routerapi names its paths and types).

// Handler answers the API's requests.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET "+metrics.Path, metrics.Handler(a.Metrics()))
	mux.HandleFunc("GET "+routerapi.PathStatus, func(w http.ResponseWriter, r *http.Request) { api.Reply(w, a.Status(), nil) })
	trace.Register(mux, &a.trace, a.dp.SetTrace)
	mux.HandleFunc("GET "+routerapi.PathRoutes, func(w http.ResponseWriter, r *http.Request) {
		if q := r.URL.Query().Get("prefix"); q != "" {
			p, err := netip.ParsePrefix(q)
			if err != nil {
				api.Reply(w, nil, fmt.Errorf("prefix %q: %v", q, err))
				return
			}
			api.Reply(w, a.Route(p), nil)
			return
		}
		// A page at a time (routerapi.RoutesPageSize unless ?limit= asks
		// for fewer), after ?after=PREFIX: a full table in one answer
		// would be hundreds of MB in the agent and the client.
		limit := routerapi.RoutesPageSize
		if q := r.URL.Query().Get("limit"); q != "" {
			n, err := strconv.Atoi(q)
			if err != nil || n < 1 || n > routerapi.RoutesPageSize {
				api.Reply(w, nil, fmt.Errorf("limit %q: 1 to %d", q, routerapi.RoutesPageSize))
				return
			}
			limit = n
		}
		var after netip.Prefix
		if q := r.URL.Query().Get("after"); q != "" {
			p, err := netip.ParsePrefix(q)
			if err != nil {
				api.Reply(w, nil, fmt.Errorf("after %q: %v", q, err))
				return
			}
			after = p
		}
		api.Reply(w, a.RoutesPage(after, limit), nil)
	})
	mux.HandleFunc("GET "+routerapi.PathRoutesDigest, func(w http.ResponseWriter, r *http.Request) { api.Reply(w, a.RoutesDigest(), nil) })
	mux.HandleFunc("GET "+routerapi.PathLookup, func(w http.ResponseWriter, r *http.Request) {
		addr, err := api.AddrParam(r, "addr")
		if err != nil {
			api.Reply(w, nil, err)
			return
		}
		api.Reply(w, a.Lookup(addr), nil)
	})
	mux.HandleFunc("POST "+routerapi.PathRoutes, func(w http.ResponseWriter, r *http.Request) {
		var req routerapi.RouteRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
			api.Reply(w, nil, fmt.Errorf("route request: %w", err))
			return
		}
		p, via, err := parseRouteRequest(req)
		if err == nil {
			err = a.AddOperatorRoute(p, via)
		}
		api.Reply(w, map[string]string{"added": p.String()}, err)
	})
	mux.HandleFunc("DELETE "+routerapi.PathRoutes, func(w http.ResponseWriter, r *http.Request) {
		p, err := netip.ParsePrefix(r.URL.Query().Get("prefix"))
		if err == nil {
			err = a.DeleteOperatorRoute(p)
		}
		api.Reply(w, map[string]string{"deleted": p.String()}, err)
	})
	mux.HandleFunc("DELETE "+routerapi.PathNeighbors, func(w http.ResponseWriter, r *http.Request) {
		n, err := a.FlushNeighbors()
		api.Reply(w, map[string]int{"flushed": n}, err)
	})
	mux.HandleFunc("PUT "+routerapi.PathCapacity, func(w http.ResponseWriter, r *http.Request) {
		var req routerapi.Capacity
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<12)).Decode(&req); err != nil {
			api.Reply(w, nil, fmt.Errorf("capacity request: %w", err))
			return
		}
		api.Reply(w, req, a.SetCapacity(req.CapacityPPS))
	})
	return mux
}

// parseRouteRequest checks a route request.
func parseRouteRequest(r routerapi.RouteRequest) (netip.Prefix, []netip.Addr, error) {
	p, err := netip.ParsePrefix(r.Prefix)
	if err != nil || p.Addr().Is4In6() || p.Addr().Zone() != "" {
		return p, nil, fmt.Errorf("prefix %q: an IPv4 or IPv6 prefix such as 10.0.0.0/8 or 2001:db8::/32", r.Prefix)
	}
	var via []netip.Addr
	for _, v := range r.Via {
		a, err := netip.ParseAddr(v)
		if err != nil || a.Is6() != p.Addr().Is6() || a.Zone() != "" {
			return p, nil, fmt.Errorf("gateway %q: an address of the prefix's family", v)
		}
		via = append(via, a)
	}
	return p, via, nil
}
