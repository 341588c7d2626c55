// Package metrics serves an agent's counters to Prometheus at /metrics
// (prometheus/client_golang): each agent registers one collector that
// reads its status when scraped, so the metrics are the status's numbers
// and cost nothing between scrapes. Names follow Prometheus's conventions:
// msr_<element>_<what>_<unit>, counters ending in _total, labels of low
// cardinality (ports, reasons, back-ends; never flows or addresses).
package metrics

import (
	"maps"
	"net/http"
	"runtime/debug"
	"slices"
	"sync"

	"github.com/msr-router/msr/internal/api"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Path is where every agent serves its metrics, on its API listeners.
const Path = "/metrics"

// Version and Commit are the binary's, for msr_build_info (cmd/msr sets
// them).
var Version, Commit = "", ""

var buildInfo = prometheus.NewDesc("msr_build_info", "The msr binary an agent runs: 1, labelled with its version, commit and Go version.",
	[]string{"version", "commit", "goversion"}, nil)

var apiRefused = prometheus.NewDesc("msr_api_refused_requests_total", "Requests to the API refused: without a valid token on the management network (401), or not root on the local socket (403).", nil, nil)

// buildCollector is what every agent exports besides its own: the build,
// and its management API's refusals.
type buildCollector struct{}

func (buildCollector) Describe(ch chan<- *prometheus.Desc) { ch <- buildInfo; ch <- apiRefused }

func (buildCollector) Collect(ch chan<- prometheus.Metric) {
	v, c, goVersion := Version, Commit, "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		if v == "" {
			v = bi.Main.Version
		}
	}
	if c == "" {
		c = "unknown"
	}
	ch <- prometheus.MustNewConstMetric(buildInfo, prometheus.GaugeValue, 1, v, c, goVersion)
	ch <- prometheus.MustNewConstMetric(apiRefused, prometheus.CounterValue, float64(api.Refused.Load()))
}

// Handler serves c, with the build information and the Go runtime's own
// metrics (go_*, process_*), in Prometheus's text format.
func Handler(c prometheus.Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c, buildCollector{}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Emit is what a collector's Collect writes with: one sample.
type Emit func(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string)

// Collector is a prometheus.Collector whose samples come from one
// function, called at each scrape; descs are every metric it may emit.
type Collector struct {
	descs   []*prometheus.Desc
	collect func(emit Emit)
}

// NewCollector makes a collector of descs, filled by collect.
func NewCollector(collect func(emit Emit), descs ...*prometheus.Desc) *Collector {
	return &Collector{descs: descs, collect: collect}
}

func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.collect(func(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, t, v, labels...)
	})
}

// Counter and Gauge are the two kinds the agents emit.
const (
	Counter = prometheus.CounterValue
	Gauge   = prometheus.GaugeValue
)

// Desc names a metric of an element: msr_<name>, with help and labels.
// The name is recorded for Names.
func Desc(name, help string, labels ...string) *prometheus.Desc {
	namesMu.Lock()
	names["msr_"+name] = true
	namesMu.Unlock()
	return prometheus.NewDesc("msr_"+name, help, labels, nil)
}

var (
	namesMu sync.Mutex
	names   = map[string]bool{"msr_build_info": true, "msr_api_refused_requests_total": true}
)

// Names are the metrics the packages linked into this binary can export
// (every Desc made so far, and msr_build_info), sorted: what a dashboard
// may query.
func Names() []string {
	namesMu.Lock()
	defer namesMu.Unlock()
	return slices.Sorted(maps.Keys(names))
}

// Bool is 1 for true, 0 for false.
func Bool(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
