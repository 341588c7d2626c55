// Package grafana holds the Grafana dashboard msr ships
// (msr-router.json); its test checks the dashboard against the metrics
// the agents export.
package grafana

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/msr-router/msr/internal/metrics"
	_ "github.com/msr-router/msr/lb"     // the LB's metrics
	_ "github.com/msr-router/msr/router" // the back-end's
	_ "github.com/msr-router/msr/vcp"    // the VCP's
)

// dashboard is the part of Grafana's dashboard model the test reads.
type dashboard struct {
	Title  string  `json:"title"`
	UID    string  `json:"uid"`
	Panels []panel `json:"panels"`
}

// panel is one panel and its queries.
type panel struct {
	ID      int    `json:"id"`
	Title   string `json:"title"`
	Type    string `json:"type"`
	GridPos struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// Load reads the shipped dashboard.
func load(path string) (*dashboard, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d dashboard
	return &d, json.Unmarshal(b, &d)
}

var metricName = regexp.MustCompile(`\bmsr_[a-z0-9_]+`)

// TestDashboardQueriesExportedMetrics: every panel has a query, every
// metric a query names is one an agent exports, and every panel sits on
// the grid with its own id.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	d, err := load("msr-router.json")
	if err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.Title == "" || len(d.Panels) < 10 {
		t.Fatalf("dashboard %q (uid %q) with %d panels", d.Title, d.UID, len(d.Panels))
	}
	exported := metrics.Names()
	ids := map[int]bool{}
	used := map[string]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] || p.ID == 0 {
			t.Errorf("panel %q: id %d taken or zero", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W == 0 || p.GridPos.H == 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: grid position %+v", p.Title, p.GridPos)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			found := metricName.FindAllString(q.Expr, -1)
			if len(found) == 0 {
				t.Errorf("panel %q: query %q names no msr metric", p.Title, q.Expr)
			}
			for _, m := range found {
				used[m] = true
				if !slices.Contains(exported, m) {
					t.Errorf("panel %q: query %q reads %s, which no agent exports", p.Title, q.Expr, m)
				}
			}
		}
	}
	t.Logf("%d panels read %d of the %d metrics the agents export", len(d.Panels), len(used), len(exported))
}
