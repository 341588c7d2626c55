package lb

import (
	"encoding/json"
	"fmt"
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
	mux.HandleFunc("GET "+lbapi.PathSFlow, func(w http.ResponseWriter, r *http.Request) { api.Reply(w, a.sflow.exportOf(), nil) })
	mux.HandleFunc("PUT "+lbapi.PathSFlow, func(w http.ResponseWriter, r *http.Request) {
		var x lbapi.SFlowExport
		d := json.NewDecoder(http.MaxBytesReader(w, r.Body, 16<<10))
		d.DisallowUnknownFields()
		err := d.Decode(&x)
		if err != nil {
			err = fmt.Errorf("sflow: %w", err)
			a.sflow.countRefused()
		} else {
			err = a.SetSFlow(&x)
		}
		api.Reply(w, a.sflow.exportOf(), err)
	})
	mux.HandleFunc("DELETE "+lbapi.PathSFlow, func(w http.ResponseWriter, r *http.Request) {
		err := a.SetSFlow(nil)
		api.Reply(w, a.sflow.exportOf(), err)
	})
	trace.Register(mux, &a.trace, a.dp.SetTrace)
	return mux
}
