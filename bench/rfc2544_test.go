package bench

import (
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The generator offers what it is asked: within 1% of the rate, over its
// sending window, at 10 and 100 kpps. Above, it falls short (measured:
// 2.5-3.5% at 300 kpps): its pacer restarts its clock rather than burst
// after a delay of more than 64 gaps. The searches use what it offered,
// not what it was asked, so their results do not depend on it; logged.
func TestGeneratorRateAccuracy(t *testing.T) {
	s, err := openSession(FwdOptions{DUT: "none", Size: 64, Flows: 100, Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, rate := range []float64{10_000, 100_000, 300_000} {
		tr, err := s.trial(64, rate, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if got := tr.offeredPPS(); rate <= 100_000 && math.Abs(got/rate-1) > 0.01 {
			t.Errorf("asked %.0f pps, offered %.0f (%d frames in %v)", rate, got, tr.sent, tr.window)
		}
		// Not asserted: the instrument alone loses a burst now and then,
		// even at low rates (measured: 0.2% of one trial at 100 kpps);
		// that is what bench rfc2544's stability pre-check reports.
		t.Logf("%.0f pps asked, %.0f offered, loss %.4f", rate, tr.offeredPPS(), tr.lossRatio())
	}
}

// A short run of the suite on Linux: the instrument's ceiling, the
// stability pre-check, NDR and PDR found and ordered, latency at each
// share of NDR beside the instrument's floor, the frame-loss-rate curve
// down to two clean steps, the names tools rely on in the JSON, and the
// report.
func TestRFC2544(t *testing.T) {
	r, err := RFC2544(RFC2544Options{DUTs: []string{"linux"}, Sizes: []int{64}, Trial: 300 * time.Millisecond,
		Resolution: 0.2, Trials: 2, Confirmations: 2}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ceiling := r.CeilingPPS[64]
	if len(r.Results) != 3+len(LatencyShares) || ceiling < 100_000 {
		t.Fatalf("results %+v, ceiling %.0f", r.Results, ceiling)
	}
	row := r.Results[0]
	if row.DUT != "linux" || row.Test != "throughput" || row.NDRPPS <= 0 || row.NDRPPS > ceiling || row.PDRPPS < row.NDRPPS*0.9 ||
		len(row.StabilityLoss) != 2 || len(row.NDRs) != 2 || row.Goals[0].Trials < 1 {
		t.Errorf("row %+v (ceiling %.0f)", row, ceiling)
	}
	b2b := r.Results[1+len(LatencyShares)]
	if b2b.Test != "back-to-back" || len(b2b.Bursts) != 2 || b2b.BurstLimit == 0 || b2b.BurstFrames > b2b.BurstLimit {
		t.Errorf("back-to-back %+v", b2b)
	}
	curve := r.Results[len(r.Results)-1]
	if curve.Test != "loss" || len(curve.Curve) < 2 || curve.Curve[0].OfferedPPS < curve.Curve[len(curve.Curve)-1].OfferedPPS {
		t.Errorf("loss curve %+v", curve)
	}
	for i, n := 0, len(curve.Curve); n < 10 && i < 2; i++ {
		if curve.Curve[n-1-i].LossRatio != 0 {
			t.Errorf("the loss curve stopped at step %d, but its last two steps were not both clean: %+v", n, curve.Curve)
		}
	}
	for i, lat := range r.Results[1 : 1+len(LatencyShares)] {
		l, f := lat.LatencyUS, lat.FloorUS
		if lat.Test != "latency" || lat.NDRShare != LatencyShares[i] || math.Abs(lat.RatePPS/(LatencyShares[i]*row.NDRPPS)-1) > 0.1 ||
			l == nil || f == nil || l.P50 <= 0 || l.P99 < l.P50 || l.P999 < l.P99 || l.Max < l.P999 || f.P50 <= 0 || len(lat.Histogram) == 0 {
			t.Errorf("latency %d: %+v, latency %+v, floor %+v", i, lat, l, f)
		}
	}
	dir := t.TempDir()
	if err := r.WriteReport(dir, "msr bench rfc2544 (test)"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "report.json"))
	var doc struct {
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || len(doc.Results) != 3+len(LatencyShares) {
		t.Fatalf("report.json: %v: %s", err, b)
	}
	for _, k := range []string{"dut", "size", "test", "ndr_pps", "pdr_pps", "ndr_spread"} {
		if _, ok := doc.Results[0][k]; !ok {
			t.Errorf("report.json's throughput result lacks %q", k)
		}
	}
	lat, _ := doc.Results[1]["latency_us"].(map[string]any)
	for _, k := range []string{"p50", "p99", "p999", "max"} {
		if _, ok := lat[k]; !ok || doc.Results[1]["rate_pps"] == nil {
			t.Errorf("report.json's latency result lacks rate_pps or latency_us.%s: %v", k, doc.Results[1])
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	if !strings.Contains(string(md), "linux       64") || !strings.Contains(string(md), "msr bench rfc2544 (test)") {
		t.Errorf("report.md:\n%s", md)
	}
}
