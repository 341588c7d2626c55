package bench

import (
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/msr-router/msr/traffic"
)

// The generator offers what it is asked, within 1% over its sending
// window, from 10 kpps to 1 Mpps, in a 1 s trial the machine lets it run
// (at least one of up to seven: a CI run's generator lost 18 ms of its
// core in each of two trials at 1 Mpps and offered 98.2%); and
// up to 80% of its ceiling (the least the instrument carried flat out in
// three trials) it keeps its schedule within 1% whenever it is not
// behind it, and says when and for how long it was. The ceiling varies
// from second to second here (1.7 to 4.0 Mpps at 64 B), and a paced rate
// above what the machine gives the generator at that moment cannot be
// met: the generator catches up at most a third faster, and a stall of
// its core longer than 2,048 frames makes it give up its schedule and
// start a new one (a CI run offered 2.5 of 3.0 Mpps so). Such a trial's
// result is what it offered, and the generator's own account of it is
// what is checked.
func TestGeneratorRateAccuracy(t *testing.T) {
	s, err := openSession(FwdOptions{DUT: "none", Size: 64, Flows: 100, Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ceiling := math.Inf(1)
	for range 3 {
		flat, err := s.trial(64, 0, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		ceiling = min(ceiling, flat.receivedPPS())
	}
	t.Logf("ceiling %.0f pps", ceiling)
	for _, rate := range []float64{10_000, 100_000, 300_000, 1_000_000, 0.8 * ceiling} {
		if rate > 0.8*ceiling {
			continue
		}
		var offered, scheduled []float64
		for i := 0; i < 3 || rate <= 1_000_000 && i < 7 && !slices.ContainsFunc(offered, within(rate, 0.01)); i++ {
			tr, err := s.trial(64, rate, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			offered = append(offered, tr.offeredPPS())
			scheduled = append(scheduled, tr.scheduledPPS())
			if tr.paceRestarts == 0 && tr.paceSkipped != 0 {
				t.Errorf("the generator skipped %v without restarting its schedule", tr.paceSkipped)
			}
			// Not asserted: the loss of the instrument alone, which
			// bench rfc2544's stability pre-check reports.
			t.Logf("%.0f pps asked, %.0f offered, %.0f on schedule (%d restarts, %v skipped), loss %.4f",
				rate, tr.offeredPPS(), tr.scheduledPPS(), tr.paceRestarts, tr.paceSkipped, tr.lossRatio())
		}
		if got := median(scheduled); math.Abs(got/rate-1) > 0.01 {
			t.Errorf("asked %.0f pps, %.0f on schedule (median of %v)", rate, got, scheduled)
		}
		if rate <= 1_000_000 && !slices.ContainsFunc(offered, within(rate, 0.01)) {
			t.Errorf("asked %.0f pps, offered %v in %d trials, none within 1%%", rate, offered, len(offered))
		}
	}
	noThreadPinned(t)
}

// within reports whether a rate is within share of want.
func within(want, share float64) func(float64) bool {
	return func(got float64) bool { return math.Abs(got/want-1) <= share }
}

// noThreadPinned fails if a thread of this process is left on fewer CPUs
// than the machine's: the generator's thread, pinned to its core for a
// trial, went back to the Go runtime's pool pinned, and every process
// started from it later ran on that one core (finding 32).
func noThreadPinned(t *testing.T) {
	t.Helper()
	all := fmt.Sprintf("0-%d", runtime.NumCPU()-1)
	if runtime.NumCPU() == 1 {
		all = "0"
	}
	tasks, _ := filepath.Glob("/proc/self/task/*/status")
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // a thread gone
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok && strings.TrimSpace(v) != all {
				t.Errorf("%s: CPUs %s, not the machine's %s", f, strings.TrimSpace(v), all)
			}
		}
	}
	out, err := exec.Command("grep", "Cpus_allowed_list", "/proc/self/status").Output()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "\t"+all) {
		t.Errorf("a process started after: %q (%v), want CPUs %s", out, err, all)
	}
}

// A short run of the suite on Linux: the instrument's ceiling, the
// stability pre-check, NDR and PDR found and ordered, latency at each
// share of NDR beside the instrument's floor, the frame-loss-rate curve
// down to two clean steps, back-to-back, recovery, reset, single frames,
// overload, the names tools rely on in the JSON, and the report with
// every plot drawn.
func TestRFC2544(t *testing.T) {
	r, err := RFC2544(RFC2544Options{DUTs: []string{"linux"}, Sizes: []int{64}, Trial: 300 * time.Millisecond,
		Resolution: 0.2, Trials: 2, Confirmations: 2, OverloadTime: time.Second}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ceiling := r.CeilingPPS[64]
	byTest := map[string][]RFC2544Row{}
	for _, row := range r.Results {
		byTest[row.Test] = append(byTest[row.Test], row)
	}
	want := map[string]int{"throughput": 1, "latency": len(LatencyShares), "back-to-back": 1, "loss": 1, "recovery": 1, "reset": 1, "single": 2, "overload": 1}
	for test, n := range want {
		if len(byTest[test]) != n {
			t.Fatalf("%d %s results, want %d: %+v", len(byTest[test]), test, n, r.Results)
		}
	}
	if ceiling < 100_000 {
		t.Fatalf("ceiling %.0f", ceiling)
	}
	row := byTest["throughput"][0]
	if row.DUT != "linux" || row.NDRPPS <= 0 || row.NDRPPS > ceiling || row.PDRPPS < row.NDRPPS*0.9 ||
		len(row.StabilityLoss) != 2 || len(row.NDRs) != 2 || row.Goals[0].Trials < 1 {
		t.Errorf("row %+v (ceiling %.0f)", row, ceiling)
	}
	b2b := byTest["back-to-back"][0]
	if len(b2b.Bursts) != 2 || b2b.BurstLimit == 0 || b2b.BurstFrames > b2b.BurstLimit {
		t.Errorf("back-to-back %+v", b2b)
	}
	curve := byTest["loss"][0]
	if len(curve.Curve) < 2 || curve.Curve[0].OfferedPPS < curve.Curve[len(curve.Curve)-1].OfferedPPS {
		t.Errorf("loss curve %+v", curve)
	}
	for i, n := 0, len(curve.Curve); n < 10 && i < 2; i++ {
		if curve.Curve[n-1-i].LossRatio != 0 {
			t.Errorf("the loss curve stopped at step %d, but its last two steps were not both clean: %+v", n, curve.Curve)
		}
	}
	for i, lat := range byTest["latency"] {
		l, f := lat.LatencyUS, lat.FloorUS
		if lat.NDRShare != LatencyShares[i] || math.Abs(lat.RatePPS/(LatencyShares[i]*row.NDRPPS)-1) > 0.1 ||
			l == nil || f == nil || l.P50 <= 0 || l.P99 < l.P50 || l.P999 < l.P99 || l.Max < l.P999 || f.P50 <= 0 || len(lat.Histogram) == 0 {
			t.Errorf("latency %d: %+v, latency %+v, floor %+v", i, lat, l, f)
		}
	}
	// Recovery: overload, then half NDR, without a pause: the series
	// covers both (0.6 s), and the lower rate is half of NDR.
	rec := byTest["recovery"][0]
	if rec.RatePPS != 1.1*row.NDRPPS || rec.LowPPS != row.NDRPPS/2 || len(rec.SeriesPPS) < 5 || rec.RecoveryMS < 0 || rec.RecoveryMS > 600 {
		t.Errorf("recovery %+v", rec)
	}
	// Reset: bouncing Linux's links loses frames (its routes go with
	// them until put back), and the sink's loss window says for how long.
	res := byTest["reset"][0]
	t.Logf("reset: took %.0f ms, %d frames lost, first to last lost %.0f ms", res.ResetMS, res.Lost, res.LossWindowMS)
	if res.Reset != "host links" || res.Lost == 0 || res.OutageMS <= 0 || res.LossWindowMS <= 0 || res.LossWindowMS > 1300 {
		t.Errorf("reset %+v", res)
	}
	// Single frames: Linux holds a frame while it resolves the next hop
	// (its neighbour queue), and forwards one to a resolved next hop.
	for _, sf := range byTest["single"] {
		if !sf.Forwarded || sf.LatencyUS == nil || sf.LatencyUS.Max <= 0 {
			t.Errorf("single frame %+v", sf)
		}
	}
	if un, re := byTest["single"][0], byTest["single"][1]; un.Neighbor != "unresolved" || re.Neighbor != "resolved" {
		t.Errorf("single frames: %+v, %+v", un, re)
	}
	// The overload's series: a step per 100 ms of its second, none above
	// what was offered but for pacing's jitter (CI's sampler, starved by
	// the DUT's core, counted 6 steps, one of 4.6 Mpps at 1.07 Mpps offered).
	ov := byTest["overload"][0]
	t.Logf("overload: %.0f pps offered, series %.0f", ov.RatePPS, ov.SeriesPPS)
	if ov.NDRShare != 1.5 || len(ov.SeriesPPS) < 8 || ov.ForwardedPPS <= 0 || ov.ForwardedPPS > ov.RatePPS*1.01 {
		t.Errorf("overload %+v", ov)
	}
	for i, pps := range ov.SeriesPPS {
		if pps > 1.25*ov.RatePPS {
			t.Errorf("overload step %d: %.0f pps counted, %.0f offered: %v", i, pps, ov.RatePPS, ov.SeriesPPS)
		}
	}
	noThreadPinned(t) // the series' samplers put their threads back

	dir := t.TempDir()
	if err := r.WriteReport(dir, "msr bench rfc2544 (test)"); err != nil {
		t.Fatal(err)
	}
	checkPlots(t, dir, r.Figures, []string{"throughput_pps.png", "throughput_mbps.png", "back_to_back.png", "latency_cdf_64.png",
		"loss_64.png", "recovery_64.png", "overload_64.png", "reset_64.png"})
	b, _ := os.ReadFile(filepath.Join(dir, "report.json"))
	var doc struct {
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || len(doc.Results) != len(r.Results) {
		t.Fatalf("report.json: %v: %s", err, b)
	}
	for _, k := range []string{"dut", "size", "test", "ndr_pps", "pdr_pps", "ndr_spread"} {
		if _, ok := doc.Results[0][k]; !ok {
			t.Errorf("report.json's throughput result lacks %q", k)
		}
	}
	lat, _ := doc.Results[1]["latency_us"].(map[string]any)
	for _, k := range []string{"p50", "p99", "p999", "max"} {
		if _, ok := lat[k]; !ok || doc.Results[1]["rate_pps"] == nil || doc.Results[1]["test"] != "latency" {
			t.Errorf("report.json's latency result lacks rate_pps or latency_us.%s: %v", k, doc.Results[1])
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	if !strings.Contains(string(md), "linux       64") || !strings.Contains(string(md), "msr bench rfc2544 (test)") ||
		!strings.Contains(string(md), "](throughput_pps.png)") {
		t.Errorf("report.md:\n%s", md)
	}
}

// TestRFC2544IPv6 runs the tests that take a DUT's parts down and make
// it resolve its next hop with IPv6 frames (RFC 5180) on Linux: bouncing
// its links loses frames until its routes and neighbours are back, and a
// frame to a next hop it has not resolved is held while it asks (NDP),
// not dropped. (The whole router's, with --ipv6, in TestWholeRouter.)
func TestRFC2544IPv6(t *testing.T) {
	r, err := RFC2544(RFC2544Options{DUTs: []string{"linux"}, Sizes: []int{traffic.MinFrameSize6}, Tests: []string{"throughput", "reset", "single"},
		IPv6: true, Trial: 300 * time.Millisecond, Resolution: 0.2, Trials: 2, Confirmations: 2}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	byTest := map[string][]RFC2544Row{}
	for _, row := range r.Results {
		byTest[row.Test] = append(byTest[row.Test], row)
	}
	if len(byTest["throughput"]) != 1 || byTest["throughput"][0].NDRPPS <= 0 || len(byTest["reset"]) != 1 || len(byTest["single"]) != 2 {
		t.Fatalf("results %+v", r.Results)
	}
	res := byTest["reset"][0]
	t.Logf("reset: took %.0f ms, %d frames lost, first to last lost %.0f ms", res.ResetMS, res.Lost, res.LossWindowMS)
	if res.Reset != "host links" || res.Lost == 0 || res.LossWindowMS <= 0 || res.LossWindowMS > 1300 {
		t.Errorf("reset %+v", res)
	}
	for i, sf := range byTest["single"] {
		if !sf.Forwarded || sf.LatencyUS == nil || sf.Neighbor != []string{"unresolved", "resolved"}[i] || sf.Size != traffic.MinFrameSize6 {
			t.Errorf("single frame %d: %+v", i, sf)
		}
	}
}

// checkPlots checks that the report drew each of the files, as PNG, and
// that every series a plot lists has points and shows: the pixels of its
// colour are there.
func checkPlots(t *testing.T, dir string, plots []Plot, files []string) {
	t.Helper()
	drawn := map[string]Plot{}
	for _, p := range plots {
		drawn[p.File] = p
	}
	for _, name := range files {
		p, ok := drawn[name]
		if !ok {
			t.Errorf("no plot %s among %v", name, plots)
			continue
		}
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Error(err)
			continue
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(p.Series) == 0 || p.Title == "" {
			t.Errorf("%s: no series or no title: %+v", name, p)
		}
		for series, n := range p.Series {
			var c color.RGBA
			c.A = 0xff
			if _, err := fmt.Sscanf(p.Colors[series], "#%02x%02x%02x", &c.R, &c.G, &c.B); err != nil {
				t.Errorf("%s: series %q has no colour: %v", name, series, err)
				continue
			}
			if n == 0 || colourPixels(img, c) < 20 {
				t.Errorf("%s: series %q (%d points) does not show", name, series, n)
			}
		}
	}
}

func colourPixels(img image.Image, c color.RGBA) int {
	near := func(a uint32, b uint8) bool { return int(a>>8)-int(b) < 12 && int(b)-int(a>>8) < 12 }
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if near(r, c.R) && near(g, c.G) && near(bl, c.B) {
				n++
			}
		}
	}
	return n
}

// TestResetOutlastsTrial is a reset that takes longer than a trial (CI's
// machine once took 312 ms over the Linux DUT's ip commands, with 300 ms
// trials): the trial goes on sending until a trial's length after the
// part is back, so the sink sees the frames after the loss and the loss
// window is measured. Before blastPast the trial ended while the links
// were still down: frames lost, and no loss window.
func TestResetOutlastsTrial(t *testing.T) {
	s, err := openSession(FwdOptions{DUT: "linux", Size: 64, Flows: 100, Duration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const down = 600 * time.Millisecond
	slow := resetAction{name: "host links, slowly", do: func(s *session) error {
		if err := ipBatch(s.spec, "dut", "link set d0 down\n"); err != nil {
			return err
		}
		time.Sleep(down)
		return resetLinuxHost(s)
	}}
	row, err := resetTrial(RFC2544Options{Trial: 300 * time.Millisecond}, s, 64, 50_000, slow, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("reset: took %.0f ms, %d frames lost, first to last lost %.0f ms, series %.0f", row.ResetMS, row.Lost, row.LossWindowMS, row.SeriesPPS)
	if row.ResetMS < ms(down) || row.Lost == 0 || row.LossWindowMS < ms(down)*0.9 || row.LossWindowMS > 1300 {
		t.Errorf("reset %+v", row)
	}
	// A trial's length of frames after the part came back: the series
	// forwards again after its outage (at the rate, give or take the
	// sink's 100 ms steps and the DUT's catching up: CI's once read 15,740,
	// 38,350 and 61,871 frames a second after the zeros).
	zero := slices.Index(row.SeriesPPS, 0)
	if n := len(row.SeriesPPS); n < 16 || zero < 0 || !slices.ContainsFunc(row.SeriesPPS[zero:], func(pps float64) bool { return pps >= 40_000 }) {
		t.Errorf("series %v: no forwarding after the reset", row.SeriesPPS)
	}
}
