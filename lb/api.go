package lb

import (
	"net/http"

	"github.com/msr-router/msr/internal/api"
)

// The agent's local API (internal/api: HTTP on a Unix socket), read by
// `msr lb status`. GET /status returns Status; GET /table returns
// SlotTable, the installed table slot by slot.

// Handler answers the API's requests.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) { api.Reply(w, a.Status(), nil) })
	mux.HandleFunc("GET /table", func(w http.ResponseWriter, r *http.Request) { api.Reply(w, a.SlotTable(), nil) })
	return mux
}

// FetchStatus asks the agent listening on the Unix socket path.
func FetchStatus(path string) (*Status, error) {
	s := &Status{}
	return s, api.NewClient(path, "msr lb").Do("GET", "/status", nil, s)
}

// FetchTable asks the agent listening on the Unix socket path for its
// table, slot by slot.
func FetchTable(path string) (*SlotTable, error) {
	t := &SlotTable{}
	return t, api.NewClient(path, "msr lb").Do("GET", "/table", nil, t)
}
