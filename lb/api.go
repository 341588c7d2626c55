package lb

import (
	"context"
	"net/http"

	"github.com/msr-router/msr/internal/api"
)

// The agent's local API (internal/api: HTTP on a Unix socket), read by
// `msr lb status`. GET /status returns Status.

// Serve answers API requests on the Unix socket path until ctx ends.
func (a *Agent) Serve(ctx context.Context, path string) error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) { api.Reply(w, a.Status(), nil) })
	return api.Serve(ctx, path, mux)
}

// FetchStatus asks the agent listening on the Unix socket path.
func FetchStatus(path string) (*Status, error) {
	s := &Status{}
	return s, api.NewClient(path, "msr lb").Do("GET", "/status", nil, s)
}
