package bench

import (
	"encoding/xml"
	"strings"
	"testing"
)

// The plot is well-formed SVG with a bar a step (and one more where a step
// lost frames), a dashed line a fault with its kind, and nothing drawn
// outside the picture.
func TestSoakPlot(t *testing.T) {
	r := &SoakReport{DurationS: 16, Seed: 1, Sent: 320_000, Steps: []SoakStep{
		{AtS: 0, Family: "ipv4", Sent: 80_000, Received: 80_000},
		{AtS: 4, Family: "ipv4", Sent: 80_000, Received: 78_000, Lost: 2000, Fault: "backend-links"},
		{AtS: 8, Family: "ipv6", Sent: 80_000, Received: 80_000},
		{AtS: 12, Family: "ipv6", Sent: 80_000, Received: 80_000, Fault: "lb-agent"}},
		Faults: []SoakFault{{Kind: "backend-links", AtS: 5}, {Kind: "lb-agent", AtS: 13}}}
	var b strings.Builder
	if err := r.WritePlot(&b); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	d := xml.NewDecoder(strings.NewReader(svg))
	rects, lines, kinds := 0, 0, 0
	for {
		tok, err := d.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("not well-formed: %v\n%s", err, svg)
			}
			break
		}
		switch e := tok.(type) {
		case xml.StartElement:
			switch e.Name.Local {
			case "rect":
				rects++
			case "line":
				lines++
			}
		case xml.CharData:
			if s := string(e); s == "backend-links" || s == "lb-agent" {
				kinds++
			}
		}
	}
	// The background, two panels, four steps' bars, one loss bar.
	if rects != 1+2+4+1 || lines != 2 || kinds != 2 {
		t.Errorf("%d rects, %d lines, %d kinds named; want 8, 2, 2:\n%s", rects, lines, kinds, svg)
	}
}
