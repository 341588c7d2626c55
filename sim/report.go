package sim

import (
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/msr-router/msr/internal/report"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// modeColor is each balancing mode's colour in the plots.
var modeColor = map[string]color.RGBA{
	"wrr":     {0x1f, 0x77, 0xb4, 0xff},
	"hash":    {0xd6, 0x27, 0x28, 0xff},
	"maglev":  {0x94, 0x67, 0xbd, 0xff},
	"flowlet": {0x2c, 0xa0, 0x2c, 0xff},
	"formula": {0x44, 0x44, 0x44, 0xff},
}

// WriteText prints the points for people.
func (r *Result) WriteText(w io.Writer) {
	o := r.Options
	if o.CapLB > 0 || o.CapPort > 0 || len(o.CapBackend) > 0 {
		fmt.Fprintf(w, "caps: LB %d, internal port %d, back-ends %v frames/s;", o.CapLB, o.CapPort, o.CapBackend)
	} else {
		fmt.Fprintf(w, "costs: LB %.0f + %.0f ns/packet on %d cores, back-end %.0f ns/packet on %d cores, links %g Gbit/s;",
			o.LBNs, o.EgressNs, o.LBCores, o.BackendNs, o.BackendCores, o.LinkGbps)
	}
	fmt.Fprintf(w, " %d-byte frames, %d flows (%s), bursts of %d, flowlet gap %v, path spread %v\n",
		o.Size, o.Flows, o.FlowSizes, o.Burst, o.FlowletGap, o.PathSpread)
	fmt.Fprintf(w, "%4s %5s %2s %-8s %14s %14s %7s %-13s %8s %9s %10s %6s\n",
		"N1", "N2", "n", "mode", "predicted pps", "ρmin pps", "ratio", "limit", "max/mean", "loss@ρmin", "reordered", "slots")
	for _, p := range r.Points {
		if p.Error != "" {
			fmt.Fprintf(w, "%4d %5d %2d %-8s %s\n", p.LBs, p.Backends, p.InternalPorts, p.Mode, p.Error)
			continue
		}
		fmt.Fprintf(w, "%4d %5d %2d %-8s %14.0f %14.0f %7.3f %-13s %8.2f %8.2f%% %9.4f%% %6d\n",
			p.LBs, p.Backends, p.InternalPorts, p.Mode, p.PredictedPPS, p.FormulaPPS, p.Ratio, p.Limit,
			p.LoadMaxMean, 100*p.LossAtFormula, 100*p.Reordered, p.TableSlots)
	}
	fmt.Fprintf(w, "%.1f s\n", r.Seconds)
}

// WriteReport writes report.json, report.md and the plots into dir.
func (r *Result) WriteReport(dir, command string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files, err := r.plots(dir)
	if err != nil {
		return err
	}
	var figures []report.Figure
	for _, f := range files {
		figures = append(figures, report.Figure{File: f, Title: f})
	}
	return report.Write(dir, r, "The multistage router modelled: `msr sim`", command, "", figures)
}

// plots draws, per (N1, n), the prediction of each mode and ρmin against
// N2, and the busiest back-end's load over the mean.
func (r *Result) plots(dir string) ([]string, error) {
	var files []string
	for _, n1 := range r.Options.LBs {
		for _, ports := range r.Options.InternalPorts {
			var pts []Point
			for _, p := range r.Points {
				if p.LBs == n1 && p.InternalPorts == ports && p.Error == "" {
					pts = append(pts, p)
				}
			}
			if len(pts) < 2 {
				continue
			}
			suffix := fmt.Sprintf("n1_%d_ports_%d.png", n1, ports)
			rate := newPlot(fmt.Sprintf("Predicted zero-loss rate, N1 = %d, DTX-%d", n1, ports), "back-ends (N2)", "packets/s")
			load := newPlot(fmt.Sprintf("Busiest back-end's load over the mean, N1 = %d, DTX-%d", n1, ports), "back-ends (N2)", "max / mean")
			rate.Legend.Left = true // the rates rise to the right
			rate.X.Scale, rate.Y.Scale = plot.LogScale{}, plot.LogScale{}
			rate.X.Tick.Marker, rate.Y.Tick.Marker = plot.LogTicks{}, plot.LogTicks{}
			load.X.Scale, load.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{}
			var formula plotter.XYs
			for _, mode := range r.Options.Modes {
				var xy, mm plotter.XYs
				for _, p := range pts {
					if p.Mode != mode {
						continue
					}
					xy = append(xy, plotter.XY{X: float64(p.Backends), Y: p.PredictedPPS})
					mm = append(mm, plotter.XY{X: float64(p.Backends), Y: p.LoadMaxMean})
					if !slices.ContainsFunc(formula, func(v plotter.XY) bool { return v.X == float64(p.Backends) }) {
						formula = append(formula, plotter.XY{X: float64(p.Backends), Y: p.FormulaPPS})
					}
				}
				if err := addLine(rate, mode, modeColor[mode], xy, false); err != nil {
					return nil, err
				}
				if err := addLine(load, mode, modeColor[mode], mm, false); err != nil {
					return nil, err
				}
			}
			if err := addLine(rate, "ρmin", modeColor["formula"], formula, true); err != nil {
				return nil, err
			}
			for _, f := range []struct {
				p    *plot.Plot
				file string
			}{{rate, "rate_" + suffix}, {load, "load_" + suffix}} {
				if err := f.p.Save(8*vg.Inch, 5*vg.Inch, filepath.Join(dir, f.file)); err != nil {
					return nil, fmt.Errorf("plot %s: %w", f.file, err)
				}
				files = append(files, f.file)
			}
		}
	}
	return files, nil
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, x, y
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p
}

func addLine(p *plot.Plot, name string, c color.RGBA, xys plotter.XYs, dashed bool) error {
	if len(xys) == 0 {
		return nil
	}
	l, s, err := plotter.NewLinePoints(xys)
	if err != nil {
		return fmt.Errorf("plot %s: %w", name, err)
	}
	l.Color, s.Color = c, c
	l.Width = vg.Points(1.5)
	s.Shape, s.Radius = draw.CircleGlyph{}, vg.Points(3)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		s.Shape = draw.TriangleGlyph{}
	}
	p.Add(l, s)
	p.Legend.Add(name, l, s)
	return nil
}

// WriteChecks prints a validation for people.
func WriteChecks(w io.Writer, report string, checks []Check) {
	fmt.Fprintf(w, "%s:\n%4s %3s %2s %-8s %14s %14s %7s %-6s %10s\n", report, "N1", "N2", "n", "mode", "lab pps", "model pps", "ratio", "10%", "shares off")
	for _, c := range checks {
		within := fmt.Sprint(c.Within10)
		if !c.Modelled {
			within = "machine (not modelled)"
		}
		fmt.Fprintf(w, "%4d %3d %2d %-8s %14.0f %14.0f %7.3f %-6s %10.4f\n",
			c.LBs, c.Backends, c.InternalPorts, c.Mode, c.MeasuredPPS, c.PredictedPPS, c.Ratio, within, c.SharesOff)
	}
}
