package bench

import (
	"fmt"
	"image/color"
	"path/filepath"
	"slices"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// A Plot is one figure of a report: its file and the series drawn in it,
// by name, with how many points each has.
type Plot struct {
	File   string         `json:"file"`
	Title  string         `json:"title"`
	Series map[string]int `json:"series"`
	// Colors are the series' colours, as #rrggbb.
	Colors map[string]string `json:"colors"`
}

// SeriesColor is the colour of a DUT's series in every plot (and of the
// instrument's, "none"), so that a DUT looks the same across figures.
func SeriesColor(dut string) color.RGBA {
	switch dut {
	case "none":
		return color.RGBA{0x17, 0xbe, 0xcf, 0xff}
	case "linux":
		return color.RGBA{0x1f, 0x77, 0xb4, 0xff}
	case "msr":
		return color.RGBA{0xd6, 0x27, 0x28, 0xff}
	case "lb":
		return color.RGBA{0x2c, 0xa0, 0x2c, 0xff}
	case "router":
		return color.RGBA{0x94, 0x67, 0xbd, 0xff}
	case "xdp-fib":
		return color.RGBA{0xe3, 0x77, 0xc2, 0xff}
	case "msr-switch":
		return color.RGBA{0xff, 0x7f, 0x0e, 0xff}
	}
	return color.RGBA{0x8c, 0x56, 0x4b, 0xff}
}

// figure is a plot being drawn: its series, each a DUT's line.
type figure struct {
	p    *plot.Plot
	plot Plot
}

func newFigure(file, title, x, y string) *figure {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return &figure{p: p, plot: Plot{File: file, Title: title, Series: map[string]int{}, Colors: map[string]string{}}}
}

// line adds a series in dut's colour (dashed: a second series of the same
// DUT, such as its PDR beside its NDR).
func (f *figure) line(name, dut string, xys plotter.XYs, dashed bool) error {
	return f.lineColored(name, SeriesColor(dut), xys, dashed)
}

// lineColored adds a series in colour c.
func (f *figure) lineColored(name string, c color.RGBA, xys plotter.XYs, dashed bool) error {
	if len(xys) == 0 {
		return nil
	}
	l, s, err := plotter.NewLinePoints(xys)
	if err != nil {
		return fmt.Errorf("plot %s: %s: %w", f.plot.File, name, err)
	}
	l.Color, s.Color = c, c
	l.Width = vg.Points(1.5)
	s.Shape = draw.CircleGlyph{}
	s.Radius = vg.Points(3.5)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		s.Shape = draw.TriangleGlyph{}
	}
	f.p.Add(l, s)
	f.p.Legend.Add(name, l, s)
	f.plot.Series[name] = len(xys)
	f.plot.Colors[name] = fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B)
	return nil
}

func (f *figure) save(dir string) (Plot, error) {
	if err := f.p.Save(8*vg.Inch, 5*vg.Inch, filepath.Join(dir, f.plot.File)); err != nil {
		return Plot{}, fmt.Errorf("plot %s: %w", f.plot.File, err)
	}
	return f.plot, nil
}

// Plots draws the result's figures into dir as PNG files: throughput
// against frame size (frames/s and bit/s), and per frame size the latency
// CDFs, the frame-loss curve, and the recovery, reset and overload time
// series; back-to-back against frame size. A figure is drawn only for the
// tests the run had.
func (r *RFC2544Result) Plots(dir string) ([]Plot, error) {
	var figs []*figure
	byTest := map[string][]RFC2544Row{}
	for _, row := range r.Results {
		byTest[row.Test] = append(byTest[row.Test], row)
	}
	duts := r.Options.DUTs
	if rows := byTest["throughput"]; len(rows) > 0 {
		pps := newFigure("throughput_pps.png", "RFC 2544 throughput (zero loss, NDR)", "frame size (bytes)", "frames per second")
		mbps := newFigure("throughput_mbps.png", "RFC 2544 throughput (zero loss, NDR)", "frame size (bytes)", "Mbit/s (L2 with FCS)")
		var ceil, ceilMbps plotter.XYs
		for _, size := range sortedSizes(r.CeilingPPS) {
			ceil = append(ceil, plotter.XY{X: float64(size), Y: r.CeilingPPS[size]})
			ceilMbps = append(ceilMbps, plotter.XY{X: float64(size), Y: r.CeilingPPS[size] * float64(size) * 8 / 1e6})
		}
		if err := pps.line("instrument ceiling", "none", ceil, true); err != nil {
			return nil, err
		}
		if err := mbps.line("instrument ceiling", "none", ceilMbps, true); err != nil {
			return nil, err
		}
		for _, dut := range duts {
			var ndr, pdr, ndrMbps plotter.XYs
			for _, row := range rows {
				if row.DUT == dut {
					ndr = append(ndr, plotter.XY{X: float64(row.Size), Y: row.NDRPPS})
					pdr = append(pdr, plotter.XY{X: float64(row.Size), Y: row.PDRPPS})
					ndrMbps = append(ndrMbps, plotter.XY{X: float64(row.Size), Y: row.NDRMbps})
				}
			}
			for _, err := range []error{pps.line(dut+" NDR", dut, ndr, false), pps.line(dut+" PDR (0.5%)", dut, pdr, true),
				mbps.line(dut+" NDR", dut, ndrMbps, false)} {
				if err != nil {
					return nil, err
				}
			}
		}
		figs = append(figs, pps, mbps)
	}
	if rows := byTest["back-to-back"]; len(rows) > 0 {
		f := newFigure("back_to_back.png", "RFC 2544 back-to-back: longest burst without loss", "frame size (bytes)", "frames")
		for _, dut := range duts {
			var xys plotter.XYs
			for _, row := range rows {
				if row.DUT == dut {
					xys = append(xys, plotter.XY{X: float64(row.Size), Y: float64(row.BurstFrames)})
				}
			}
			if err := f.line(dut, dut, xys, false); err != nil {
				return nil, err
			}
		}
		figs = append(figs, f)
	}
	for _, size := range r.Options.Sizes {
		more, err := r.sizeFigures(byTest, size)
		if err != nil {
			return nil, err
		}
		figs = append(figs, more...)
	}
	return saveFigures(dir, figs)
}

// sizeFigures are the figures of one frame size: latency CDFs, the loss
// curve, and the time series.
func (r *RFC2544Result) sizeFigures(byTest map[string][]RFC2544Row, size int) ([]*figure, error) {
	var figs []*figure
	lat := newFigure(fmt.Sprintf("latency_cdf_%d.png", size), fmt.Sprintf("RFC 2544 latency, %d B: CDF at shares of NDR", size),
		"latency (µs, log scale)", "share of frames")
	lat.p.X.Scale = plot.LogScale{}
	lat.p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	lat.p.Y.Min, lat.p.Y.Max = 0, 1
	lat.p.Legend.Top = false // a CDF's lower right is empty
	for _, row := range byTest["latency"] {
		if row.Size != size {
			continue
		}
		// Dashed: below 100% of NDR, so that the lines at NDR stand out.
		if err := lat.line(fmt.Sprintf("%s at %.0f%% of NDR", row.DUT, 100*row.NDRShare), row.DUT, cdf(row.Histogram), row.NDRShare < 1); err != nil {
			return nil, err
		}
	}
	loss := newFigure(fmt.Sprintf("loss_%d.png", size), fmt.Sprintf("RFC 2544 frame loss rate, %d B", size), "offered (frames per second)", "loss (share of frames)")
	for _, row := range byTest["loss"] {
		if row.Size != size {
			continue
		}
		var xys plotter.XYs
		for _, p := range row.Curve {
			xys = append(xys, plotter.XY{X: p.OfferedPPS, Y: p.LossRatio})
		}
		sort.Slice(xys, func(i, j int) bool { return xys[i].X < xys[j].X })
		if err := loss.line(row.DUT, row.DUT, xys, false); err != nil {
			return nil, err
		}
	}
	figs = append(figs, lat, loss)
	for _, ts := range []struct{ test, title string }{
		{"recovery", "RFC 2544 system recovery, %d B: overload, then half of NDR"},
		{"overload", "Overload at 150%% of NDR, %d B"},
		{"reset", "RFC 2544 reset, %d B: forwarded while a part restarts"},
	} {
		f := newFigure(fmt.Sprintf("%s_%d.png", ts.test, size), fmt.Sprintf(ts.title, size), "time (s)", "forwarded (frames per second)")
		f.p.Legend.Top = false // the forwarded rate runs along the top
		for _, row := range byTest[ts.test] {
			if row.Size != size {
				continue
			}
			name := row.DUT
			if row.Reset != "" {
				name += ": " + row.Reset
			}
			var xys plotter.XYs
			for i, v := range row.SeriesPPS {
				xys = append(xys, plotter.XY{X: float64(i+1) * row.SeriesStepMS / 1e3, Y: v})
			}
			if err := f.line(name, row.DUT, xys, false); err != nil {
				return nil, err
			}
		}
		figs = append(figs, f)
	}
	return figs, nil
}

// cdf turns a latency histogram into its CDF: at each bucket's upper
// bound in µs, the share of frames at or below it.
func cdf(h []HistBin) plotter.XYs {
	var total uint64
	for _, b := range h {
		total += b.Count
	}
	if total == 0 {
		return nil
	}
	var xys plotter.XYs
	var seen uint64
	for _, b := range h {
		seen += b.Count
		xys = append(xys, plotter.XY{X: max(b.HighUS, 0.001), Y: float64(seen) / float64(total)})
	}
	return xys
}

func sortedSizes(m map[int]float64) []int {
	var sizes []int
	for s := range m {
		sizes = append(sizes, s)
	}
	slices.Sort(sizes)
	return sizes
}

// sizeColor is the colour of a frame size's curves in the study's plots.
func sizeColor(i int) color.RGBA {
	palette := []color.RGBA{{0xd6, 0x27, 0x28, 0xff}, {0x2c, 0xa0, 0x2c, 0xff}, {0x1f, 0x77, 0xb4, 0xff}, {0x94, 0x67, 0xbd, 0xff}}
	return palette[i%len(palette)]
}

// Plots draws the study's figures into dir: per topology and flow set,
// the forwarded rate against the offered load, a line per frame size and
// table; and per flow set, the topologies
// side by side at the first frame size and table.
func (r *StudyResult) Plots(dir string) ([]Plot, error) {
	o := r.Options
	var figs []*figure
	xys := func(c StudyCurve) plotter.XYs {
		var out plotter.XYs
		for _, p := range c.Points {
			out = append(out, plotter.XY{X: p.OfferedPPS, Y: p.ForwardedPPS})
		}
		return out
	}
	for _, topo := range o.Topologies {
		for _, flows := range o.Flows {
			f := newFigure(fmt.Sprintf("study_%s_%s.png", topo, flows), fmt.Sprintf("%s, %s flow(s): forwarded against offered", topo, flows),
				"offered (frames per second)", "forwarded (frames per second)")
			for _, c := range r.Curves {
				if c.Topology != topo || c.Flows != flows {
					continue
				}
				si, fi := slices.Index(o.Sizes, c.Size), slices.Index(o.FIBs, c.FIB)
				if err := f.lineColored(fmt.Sprintf("%d B, %d routes", c.Size, c.Routes), sizeColor(si), xys(c), fi > 0); err != nil {
					return nil, err
				}
			}
			figs = append(figs, f)
		}
	}
	for _, flows := range o.Flows {
		f := newFigure(fmt.Sprintf("study_topologies_%s.png", flows), fmt.Sprintf("The topologies, %s flow(s), %d B, %s routes", flows, o.Sizes[0], o.FIBs[0]),
			"offered (frames per second)", "forwarded (frames per second)")
		for _, c := range r.Curves {
			if c.Flows == flows && c.Size == o.Sizes[0] && c.FIB == o.FIBs[0] {
				if err := f.lineColored(c.Topology, sizeColor(slices.Index(StudyTopologies, c.Topology)), xys(c), false); err != nil {
					return nil, err
				}
			}
		}
		figs = append(figs, f)
	}
	return saveFigures(dir, figs)
}
