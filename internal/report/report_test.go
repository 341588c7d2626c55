package report

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type result struct {
	Rate float64 `json:"rate_pps"`
}

func (r *result) WriteText(w io.Writer) { fmt.Fprintf(w, "rate %.0f pps\n", r.Rate) }

// A report directory holds the result as JSON, and its text, title,
// command, machine and figures in report.md.
func TestWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new")
	r := &result{Rate: 1250}
	if err := Write(dir, r, "Title", "msr bench x", "2 CPUs", []Figure{{File: "a.svg", Title: "the a"}}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back result
	if err := json.Unmarshal(b, &back); err != nil || back != *r {
		t.Errorf("report.json %s: %+v (%v), want %+v", b, back, err, *r)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := "# Title\n\n`msr bench x`\n\n2 CPUs\n\n```\nrate 1250 pps\n```\n\n![the a](a.svg)\n"
	if string(md) != want {
		t.Errorf("report.md:\n%s\nwant:\n%s", md, want)
	}
	if m := Markdown(r, "T", "c", "", nil); strings.Contains(m, "\n\n\n") {
		t.Errorf("no machine leaves an empty paragraph: %q", m)
	}
}
