package soak

import (
	"fmt"
	"html"
	"io"
	"math"
)

// The soak's plot (in its report): the frames forwarded a second and
// the frames lost in each step over the run, the faults marked where they
// came. One SVG, drawn by hand: a bar a step, so what a reader sees is
// what the sink counted, not a smoothing of it.

// plot geometry, in SVG units.
const (
	plotW, plotH       = 1000.0, 420.0
	plotLeft, plotTop  = 70.0, 30.0
	plotInnerH         = 150.0 // each of the two panels
	plotGap            = 50.0
	plotInnerW         = plotW - plotLeft - 20
	plotStepSecondsMin = 1.0
)

// WritePlot draws the report as SVG: the forwarded rate (frames a second
// the sink counted, per step) above, the frames lost per step below (on a
// log scale: one frame and a back-end's share both show), a dashed line
// and the kind at each fault.
func (r *Report) WritePlot(w io.Writer) error {
	if len(r.Steps) == 0 {
		return fmt.Errorf("soak plot: no steps")
	}
	end := r.DurationS
	last := r.Steps[len(r.Steps)-1]
	end = math.Max(end, last.AtS+last.seconds())
	x := func(s float64) float64 { return plotLeft + s/end*plotInnerW }
	maxRate, maxLost := 1.0, 1.0
	for _, st := range r.Steps {
		maxRate = math.Max(maxRate, float64(st.Received)/st.seconds())
		maxLost = math.Max(maxLost, float64(st.Lost))
	}
	rateTop := plotTop
	lostTop := plotTop + plotInnerH + plotGap
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", plotW, plotH)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(w, `<text x="%.0f" y="16" font-size="13">msr soak, seed %d: %.0f s, %d frames sent, %d lost outside faults</text>`+"\n",
		plotLeft, r.Seed, r.DurationS, r.Sent, r.LostOutsideFaults)
	// Panels and their axes.
	for _, p := range []struct {
		top   float64
		label string
		max   string
	}{{rateTop, "forwarded, frames/s", fmt.Sprintf("%.0f", maxRate)}, {lostTop, "lost per step (log)", fmt.Sprintf("%.0f", maxLost)}} {
		fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#999"/>`+"\n", plotLeft, p.top, plotInnerW, plotInnerH)
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", plotLeft-4, p.top+10, p.max)
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="end">0</text>`+"\n", plotLeft-4, p.top+plotInnerH)
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", plotLeft+plotInnerW-4, p.top+12, p.label)
	}
	for s := 0.0; s <= end; s += 60 {
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle">%.0f s</text>`+"\n", x(s), lostTop+plotInnerH+14, s)
	}
	// A bar a step.
	for _, st := range r.Steps {
		barW := math.Max(plotInnerW*st.seconds()/end-1, plotStepSecondsMin)
		rate := float64(st.Received) / st.seconds()
		h := rate / maxRate * plotInnerH
		color := "#4a7ebb"
		if st.Family == "ipv6" {
			color = "#7bb04a"
		}
		fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", x(st.AtS), rateTop+plotInnerH-h, barW, h, color)
		if st.Lost > 0 {
			h := math.Log10(float64(st.Lost)+1) / math.Log10(maxLost+1) * plotInnerH
			fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#c0392b"><title>%d lost at %.0f s</title></rect>`+"\n",
				x(st.AtS), lostTop+plotInnerH-h, barW, h, st.Lost, st.AtS)
		}
	}
	// The faults.
	for _, f := range r.Faults {
		fx := x(f.AtS)
		fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#555" stroke-dasharray="3,3"/>`+"\n", fx, rateTop, fx, lostTop+plotInnerH)
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" font-size="9" transform="rotate(-90 %.1f %.1f)">%s</text>`+"\n",
			fx-2, rateTop+plotInnerH+plotGap-4, fx-2, rateTop+plotInnerH+plotGap-4, html.EscapeString(f.Kind))
	}
	fmt.Fprintf(w, `<text x="%.1f" y="%.1f">bars: IPv4 steps blue, IPv6 green; dashed: a fault, its kind beside it</text>`+"\n", plotLeft, plotH-8)
	_, err := fmt.Fprintln(w, "</svg>")
	return err
}

// seconds is how long the step's traffic ran (a report from before steps
// had their own length: soakStep).
func (st Step) seconds() float64 {
	if st.TrafficS > 0 {
		return st.TrafficS
	}
	return soakStep.Seconds()
}
