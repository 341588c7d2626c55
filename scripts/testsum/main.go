// Command testsum reads `go test -json` on its standard input and prints
// what plain `go test` prints (each package's result, and the whole
// output of every test that failed, or that was still running when its
// package failed: a timeout's), then the outcome of the whole run in one
// line, "N passed, M failed, K skipped", with the failed and skipped tests
// by name and the slowest: a reader of a CI log sees how it ended
// without scrolling through it. It exits 1 when a test or a package
// failed (a build too), and when it read no package at all. With
// -summary FILE it writes that line to FILE too (.ci/run prints it last).
//
//	go test -json ./... | go run ./scripts/testsum [-summary FILE]
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// event is one line of test2json's stream (go doc cmd/test2json).
type event struct {
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	FailedBuild string
}

// tally is the run's account: tests by outcome, packages that failed,
// the output of tests still running.
type tally struct {
	// failed names every test that failed, subtests too; failedTop
	// counts the top-level ones.
	passed, failed, skipped []string
	failedTop               int
	elapsed                 map[string]float64
	running                 map[string]*strings.Builder // package + " " + test
	packages, failedPkgs    int
}

func newTally() *tally {
	return &tally{elapsed: map[string]float64{}, running: map[string]*strings.Builder{}}
}

// add takes one event, writing to w what plain go test would print.
func (t *tally) add(e event, w io.Writer) {
	key := e.Package + " " + e.Test
	name := shortPkg(e.Package) + "." + e.Test
	switch {
	case e.Action == "build-output":
		fmt.Fprint(w, e.Output)
	case e.Test == "":
		t.addPackage(e, w)
	case e.Action == "run":
		t.running[key] = &strings.Builder{}
	case e.Action == "output":
		if b := t.running[key]; b != nil {
			b.WriteString(e.Output)
		}
	case e.Action == "pass" || e.Action == "fail" || e.Action == "skip":
		out := t.running[key]
		delete(t.running, key)
		top := !strings.Contains(e.Test, "/")
		switch e.Action {
		case "fail":
			t.failed = append(t.failed, name)
			// A failed subtest's output is printed with its top-level
			// test's, where plain go test prints it.
			parent := t.running[key[:max(strings.LastIndex(key, "/"), 0)]]
			switch {
			case !top && parent != nil && out != nil:
				parent.WriteString(out.String())
			case out != nil:
				fmt.Fprint(w, out.String())
			}
		case "skip":
			t.skipped = append(t.skipped, name+": "+skipReason(out))
		case "pass":
			if top {
				t.passed = append(t.passed, name)
			}
		}
		if top {
			t.elapsed[name] = e.Elapsed
			if e.Action == "fail" {
				t.failedTop++
			}
		}
	}
}

// addPackage takes a package's own event.
func (t *tally) addPackage(e event, w io.Writer) {
	switch e.Action {
	case "output":
		if e.Output != "PASS\n" {
			fmt.Fprint(w, e.Output)
		}
	case "pass", "skip":
		t.packages++
	case "fail":
		t.packages++
		t.failedPkgs++
		// A test still running when its package failed (a timeout, a
		// crash) has no result of its own: its output says why.
		for key, b := range t.running {
			if strings.HasPrefix(key, e.Package+" ") && !strings.Contains(key, "/") {
				fmt.Fprintf(w, "--- unfinished: %s\n%s", key, b.String())
				t.failed = append(t.failed, shortPkg(e.Package)+"."+strings.TrimPrefix(key, e.Package+" ")+" (unfinished)")
				t.failedTop++
			}
		}
		if e.FailedBuild != "" {
			t.failed = append(t.failed, shortPkg(e.Package)+" (build failed)")
			t.failedTop++
		}
	}
}

// line is the run's outcome in one line.
func (t *tally) line() string {
	return fmt.Sprintf("%d passed, %d failed, %d skipped in %d packages (%d failed)",
		len(t.passed), t.failedTop, len(t.skipped), t.packages, t.failedPkgs)
}

// slowest is how many of the slowest tests the summary names: enough to
// see where the run's time goes (the whole run should keep under 30
// minutes, docs/testing.md).
const slowest = 15

// summary is the run's outcome: the failed, the skipped and the slowest
// tests, then the line.
func (t *tally) summary(w io.Writer) {
	fmt.Fprintln(w, "\ntests:")
	for _, f := range t.failed {
		fmt.Fprintf(w, "  FAIL %s\n", f)
	}
	for _, s := range t.skipped {
		fmt.Fprintf(w, "  skip %s\n", s)
	}
	names := make([]string, 0, len(t.elapsed))
	for n := range t.elapsed {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return t.elapsed[names[i]] > t.elapsed[names[j]] })
	var slow []string
	for _, n := range names[:min(slowest, len(names))] {
		slow = append(slow, fmt.Sprintf("%s %v", n, time.Duration(t.elapsed[n]*float64(time.Second)).Round(time.Second)))
	}
	fmt.Fprintf(w, "  slowest: %s\n", strings.Join(slow, ", "))
	fmt.Fprintln(w, t.line())
}

func (t *tally) ok() bool { return t.packages > 0 && t.failedPkgs == 0 && t.failedTop == 0 }

// skipReason is the last line a skipped test printed before "--- SKIP".
func skipReason(out *strings.Builder) string {
	if out == nil {
		return "no reason given"
	}
	var last string
	for _, l := range strings.Split(out.String(), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "=== ") && !strings.HasPrefix(l, "--- SKIP") {
			last = l
		}
	}
	if last == "" {
		return "no reason given"
	}
	return last
}

// shortPkg drops the module's path from a package's.
func shortPkg(p string) string {
	if i := strings.Index(p, "/msr/"); i >= 0 {
		return p[i+len("/msr/"):]
	}
	return p
}

func main() {
	summary := flag.String("summary", "", "also write the outcome's line to this file")
	flag.Parse()
	t := newTally()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	for in.Scan() {
		var e event
		if err := json.Unmarshal(in.Bytes(), &e); err != nil {
			// Not test2json's (go's own errors before any package ran).
			fmt.Println(in.Text())
			continue
		}
		t.add(e, os.Stdout)
	}
	if err := in.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "testsum: read: %v\n", err)
		t.failedPkgs++
	}
	t.summary(os.Stdout)
	if *summary != "" {
		if err := os.WriteFile(*summary, []byte(t.line()+"\n"), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "testsum: %v\n", err)
		}
	}
	if !t.ok() {
		os.Exit(1)
	}
}
