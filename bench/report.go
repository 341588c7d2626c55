package bench

import (
	"io"
	"os"

	msrreport "github.com/msr-router/msr/internal/report"
)

// A report is a result `--report DIR` writes: as JSON, as text for
// people, and as plots.
type report interface {
	Plots(dir string) ([]Plot, error)
	WriteText(w io.Writer)
	setFigures([]Plot)
}

// writeReport draws r's plots into dir, then writes report.json (r, with
// the plots listed) and report.md (the title, the command, the machine,
// the text and the plots).
func writeReport(r report, dir, title, command, machine string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	plots, err := r.Plots(dir)
	if err != nil {
		return err
	}
	r.setFigures(plots)
	var figures []msrreport.Figure
	for _, p := range plots {
		figures = append(figures, msrreport.Figure{File: p.File, Title: p.Title})
	}
	return msrreport.Write(dir, r, title, command, machine, figures)
}

// saveFigures saves every figure with a series in it into dir.
func saveFigures(dir string, figs []*figure) ([]Plot, error) {
	var out []Plot
	for _, f := range figs {
		if len(f.plot.Series) == 0 {
			continue
		}
		p, err := f.save(dir)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}
