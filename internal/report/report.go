// Package report writes a result's report directory, the one form every
// `--report DIR` takes (bench, sim, soak): report.json, the result as
// JSON; report.md, for people, with its figures drawn beside it.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// A Result is what a report holds: marshalled as report.json, and its
// text for people.
type Result interface {
	WriteText(w io.Writer)
}

// A Figure is an image in the report's directory: its file name and what
// it shows.
type Figure struct {
	File, Title string
}

// Write writes r into dir as report.json and report.md: the title, the
// command that made it, the machine it ran on ("": not said), r's text,
// and the figures, which the caller has drawn into dir.
func Write(dir string, r Result, title, command, machine string, figures []Figure) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "report.md"), []byte(Markdown(r, title, command, machine, figures)), 0o644)
}

// Markdown is report.md's text.
func Markdown(r Result, title, command, machine string, figures []Figure) string {
	var md strings.Builder
	fmt.Fprintf(&md, "# %s\n\n`%s`\n\n", title, command)
	if machine != "" {
		fmt.Fprintf(&md, "%s\n\n", machine)
	}
	md.WriteString("```\n")
	r.WriteText(&md)
	md.WriteString("```\n")
	for _, f := range figures {
		fmt.Fprintf(&md, "\n![%s](%s)\n", f.Title, f.File)
	}
	return md.String()
}
