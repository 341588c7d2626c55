package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/lab"
)

// TestPrometheus: `msr demo up --monitoring` runs a real Prometheus
// (Debian's) on mon that scrapes every agent of the default lab (https,
// the metrics public): every target is up, the router's packet counters as Prometheus has them grow
// by the traffic h1 sends through it, and every query of the shipped
// Grafana dashboard is valid PromQL that returns data.
func TestPrometheus(t *testing.T) {
	upDefaultLabWith(t, demo.Options{Prefixes: 100, Monitoring: true})
	query := func(q string) promVector { t.Helper(); return promQuery(t, q) }
	scalar := func(q string) float64 {
		t.Helper()
		v := query(q)
		if len(v.Data.Result) != 1 {
			t.Fatalf("query %q: %d series", q, len(v.Data.Result))
		}
		f, _ := strconv.ParseFloat(v.Data.Result[0].Value[1].(string), 64)
		return f
	}

	// Every target up.
	want := len(demo.Targets["vcp"]) + len(demo.Targets["lb"]) + len(demo.Targets["router"])
	waitFor(t, 30*time.Second, "every target up", func() bool {
		var r struct {
			Data struct {
				ActiveTargets []struct {
					Health    string `json:"health"`
					ScrapeURL string `json:"scrapeUrl"`
				} `json:"activeTargets"`
			} `json:"data"`
		}
		out, err := demo.Exec("mon", "curl", "-sf", "--max-time", "5", "http://"+demo.PrometheusAddr+"/api/v1/targets")
		if err != nil || json.Unmarshal([]byte(out), &r) != nil {
			return false
		}
		up := 0
		for _, tg := range r.Data.ActiveTargets {
			if tg.Health == "up" {
				up++
			}
		}
		return len(r.Data.ActiveTargets) == want && up == want
	})

	// The router's counters in Prometheus grow with h1's 1,000 pings to
	// h3: requests in at lb1/e0, replies in at lb2/e0.
	routerRx := `msr_vcp_router_packets_total{direction="rx"}`
	lbRx := `msr_lb_port_packets_total{port="lb1/e0",direction="rx"}`
	before, beforeLB := scalar(routerRx), scalar(lbRx)
	if _, err := demo.Exec("h1", "ping", "-q", "-c", "1000", "-i", "0.002", demo.H3); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "Prometheus sees the pings", func() bool {
		return scalar(routerRx)-before >= 2000 && scalar(lbRx)-beforeLB >= 1000
	})

	checkAPITokens(t)
	checkLocalSockets(t)
	checkDashboard(t)
}

// checkAPITokens: the VCP's API over TLS; a read needs the read token,
// a change the admin one; refusals counted in the (public) metrics.
func checkAPITokens(t *testing.T) {
	query := func(q string) promVector { t.Helper(); return promQuery(t, q) }
	curl := func(args ...string) string {
		out, _ := demo.Exec("mon", append([]string{"curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", demo.APIFile("ca.crt")}, args...)...)
		return strings.TrimSpace(out)
	}
	read, _ := os.ReadFile(demo.APIFile("read.token"))
	status := "https://" + demo.VCPAPI + "/status"
	if code := curl(status); code != "401" {
		t.Errorf("GET /status without a token: %s, want 401", code)
	}
	if code := curl("-H", "Authorization: Bearer "+strings.TrimSpace(string(read)), status); code != "200" {
		t.Errorf("GET /status with the read token: %s, want 200", code)
	}
	if code := curl("-X", "POST", "-H", "Authorization: Bearer "+strings.TrimSpace(string(read)), "https://"+demo.VCPAPI+"/reload"); code != "401" {
		t.Errorf("POST /reload with the read token: %s, want 401", code)
	}
	waitFor(t, 5*time.Second, "Prometheus sees the refusals", func() bool {
		v := query(`msr_api_refused_requests_total{job="vcp"}`)
		if len(v.Data.Result) != 1 {
			return false
		}
		n, _ := strconv.ParseFloat(v.Data.Result[0].Value[1].(string), 64)
		return n >= 2
	})

}

// checkLocalSockets: on the router's hosts every user reads the agents'
// local sockets, a change needs root; the log level changes at run time.
func checkLocalSockets(t *testing.T) {
	// On the router's hosts every user reads the agents' local sockets;
	// a change there needs root (the peer's uid, SO_PEERCRED).
	asNobody := func(args ...string) (string, error) {
		cmd := exec.Command(msrBin, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for args, want := range map[string]string{"lb status --name lb1": "lb lb1", "router status --name r1": "r1", "ctl --name vcp1 ports": "lb1/e0"} {
		if out, err := asNobody(strings.Fields(args)...); err != nil || !strings.Contains(out, want) {
			t.Errorf("msr %s as nobody: %v\n%s", args, err, out)
		}
	}
	if out, err := asNobody("ctl", "--name", "vcp1", "undrain", "r3"); err == nil || !strings.Contains(out, "needs root") {
		t.Errorf("msr ctl undrain as nobody: %v, %q; want refused, needs root", err, out)
	}

	// The log level changes at run time through the console: r1 to debug
	// and back, each change in r1's own log; nobody may not change it.
	if out, err := asNobody("ctl", "--name", "vcp1", "log", "r1", "debug"); err == nil || !strings.Contains(out, "needs root") {
		t.Errorf("msr ctl log r1 debug as nobody: %v, %q; want refused", err, out)
	}
	for _, level := range []string{"debug", "info"} {
		if out, _, code := msr(t, "ctl", "--name", "vcp1", "log", "r1", level); code != 0 || !strings.Contains(out, "r1 logs at "+level) {
			t.Errorf("msr ctl log r1 %s: exit %d, %q", level, code, out)
		}
	}
	if out, _, _ := msr(t, "ctl", "--name", "vcp1", "-o", "json", "log", "r1"); !strings.Contains(out, `"level": "info"`) {
		t.Errorf("msr ctl log r1 -o json: %q", out)
	}
	r1Log, _ := os.ReadFile(filepath.Join(lab.RunDir, demo.LabName, "logs", "r1.router.log"))
	if logs := string(r1Log); !strings.Contains(logs, "from=INFO to=DEBUG") || !strings.Contains(logs, "from=DEBUG to=INFO") {
		t.Errorf("r1's log does not show the two changes:\n%s", logs)
	}

}

// checkDashboard: the Grafana dashboard's every query runs and returns
// data.
func checkDashboard(t *testing.T) {
	query := func(q string) promVector { t.Helper(); return promQuery(t, q) }
	b, err := os.ReadFile("../deploy/grafana/msr-router.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			if v := query(q.Expr); len(v.Data.Result) == 0 {
				t.Errorf("panel %q: %q returns nothing", p.Title, q.Expr)
			}
		}
	}
}

// A promVector is the answer to a Prometheus query.
type promVector struct {
	Status string `json:"status"`
	Data   struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	} `json:"data"`
}

// promQuery asks the default lab's Prometheus, from mon, the query q.
func promQuery(t *testing.T, q string) promVector {
	t.Helper()
	argv := []string{"curl", "-sfG", "--max-time", "5", "http://" + demo.PrometheusAddr + "/api/v1/query", "--data-urlencode", "query=" + q}
	out, err := demo.Exec("mon", argv...)
	if err != nil {
		t.Fatalf("prometheus query %s: %v", q, err)
	}
	var v promVector
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Status != "success" {
		t.Fatalf("query %q: %v %+v", q, err, v)
	}
	return v
}
