package vcp

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// scrape GETs /metrics from an agent's API handler.
func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", w.Code, w.Body)
	}
	return w.Body.String()
}

// TestMetrics: the VCP and the LB it drives serve Prometheus metrics that
// pass Prometheus's own lint (names, units, help) and say what their
// status says: the VCP active, three back-ends alive, their weights in
// the LB's table; the LB's slots per back-end and its ports' counters;
// both with the build information.
func TestMetrics(t *testing.T) {
	l := startVCPLab(t)
	l.waitShares("start", map[string]int{macR1: 2, macR2: 2, macR3: 1})
	for name, c := range map[string]prometheus.Collector{"vcp": l.vcp.Metrics(), "lb": l.lb.Metrics()} {
		problems, err := testutil.CollectAndLint(c)
		if err != nil || len(problems) > 0 {
			t.Errorf("%s's metrics: %v %+v", name, err, problems)
		}
	}
	vcp, lb := scrape(t, l.vcp.Handler()), scrape(t, l.lb.Handler())
	for what, want := range map[string][]string{
		vcp: {"msr_vcp_active 1", `msr_vcp_elements{alive="true",role="router"} 3`, `msr_vcp_table_weight{backend="r3",lb=`,
			`msr_vcp_router_port_packets_total{direction="rx",port=`, "msr_build_info{", "go_goroutines "},
		lb: {`msr_lb_table_slots{backend="` + macR1 + `"}`, `msr_lb_port_packets_total{direction="rx",port=`,
			`msr_lb_police_packets_total{class="bgp",verdict="passed"}`, `msr_lb_backend_up{backend="` + macR1, "msr_build_info{"},
	} {
		for _, w := range want {
			if !strings.Contains(what, w) {
				t.Errorf("metrics lack %q:\n%s", w, what)
				break
			}
		}
	}
}
