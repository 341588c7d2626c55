package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The agent's local API, HTTP on a Unix socket:
//   GET    /status          Status
//   GET    /routes          []RouteInfo
//   POST   /routes          RouteRequest: add or replace
//   DELETE /routes?prefix=P remove

// RouteRequest adds a route.
type RouteRequest struct {
	Prefix string   `json:"prefix"`
	Via    []string `json:"via"`
}

// Serve answers API requests on the Unix socket path until ctx ends.
func (a *Agent) Serve(ctx context.Context, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("API socket: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) { reply(w, a.Status(), nil) })
	mux.HandleFunc("GET /routes", func(w http.ResponseWriter, r *http.Request) { reply(w, a.Routes(), nil) })
	mux.HandleFunc("POST /routes", func(w http.ResponseWriter, r *http.Request) {
		var req RouteRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
			reply(w, nil, fmt.Errorf("route request: %w", err))
			return
		}
		p, via, err := req.parse()
		if err == nil {
			err = a.AddRoute(p, via)
		}
		reply(w, map[string]string{"added": p.String()}, err)
	})
	mux.HandleFunc("DELETE /routes", func(w http.ResponseWriter, r *http.Request) {
		p, err := netip.ParsePrefix(r.URL.Query().Get("prefix"))
		if err == nil {
			err = a.DeleteRoute(p)
		}
		reply(w, map[string]string{"deleted": p.String()}, err)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
		os.Remove(path)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (r RouteRequest) parse() (netip.Prefix, []netip.Addr, error) {
	p, err := netip.ParsePrefix(r.Prefix)
	if err != nil || !p.Addr().Is4() {
		return p, nil, fmt.Errorf("prefix %q: an IPv4 prefix such as 10.0.0.0/8", r.Prefix)
	}
	var via []netip.Addr
	for _, v := range r.Via {
		a, err := netip.ParseAddr(v)
		if err != nil || !a.Is4() {
			return p, nil, fmt.Errorf("gateway %q: an IPv4 address", v)
		}
		via = append(via, a)
	}
	return p, via, nil
}

func reply(w http.ResponseWriter, v any, err error) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	json.NewEncoder(w).Encode(v)
}

// Client talks to an agent's API.
type Client struct{ http *http.Client }

// NewClient dials the agent on the Unix socket path.
func NewClient(path string) *Client {
	return &Client{http: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		},
	}}}
}

// Do sends a request and decodes the answer into out.
func (c *Client) Do(method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, "http://router"+path, rd)
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("is msr router running? %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		json.NewDecoder(resp.Body).Decode(&e)
		return errors.New(e.Error)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
