package lb

import (
	"net/http"

	"github.com/msr-router/msr/internal/api"
	"github.com/msr-router/msr/internal/metrics"
	"github.com/msr-router/msr/internal/trace"
	"github.com/msr-router/msr/lb/lbapi"
)

// The agent's API (lbapi names its paths and types).

// Handler answers the API's requests.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET "+metrics.Path, metrics.Handler(a.Metrics()))
	mux.HandleFunc("GET "+lbapi.PathStatus, func(w http.ResponseWriter, r *http.Request) { api.Reply(w, a.Status(), nil) })
	mux.HandleFunc("GET "+lbapi.PathTable, func(w http.ResponseWriter, r *http.Request) { api.Reply(w, a.SlotTable(), nil) })
	trace.Register(mux, &a.trace, a.dp.SetTrace)
	return mux
}
