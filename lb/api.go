package lb

import (
	"net/http"

	"github.com/msr-router/msr/internal/api"
)

// The agent's local API (internal/api: HTTP on a Unix socket), read by
// `msr lb status`. GET /status returns Status.

// Handler answers the API's requests.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) { api.Reply(w, a.Status(), nil) })
	return mux
}

// FetchStatus asks the agent listening on the Unix socket path.
func FetchStatus(path string) (*Status, error) {
	s := &Status{}
	return s, api.NewClient(path, "msr lb").Do("GET", "/status", nil, s)
}
