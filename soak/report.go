package soak

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/internal/report"
	"github.com/msr-router/msr/lab"
)

// keepLogs copies the lab's logs into dir (a new one in os.TempDir() if
// "") and says where, so that a failed soak's lab can go down with its
// evidence kept.
func keepLogs(dir string, suite map[string]int64, progress io.Writer) {
	keepLabLogs(demo.LabName, demo.RunDir, dir, suite, progress)
}

// keepLabLogs is keepLogs of the lab name, its VCPs' suites' logs in run.
func keepLabLogs(name, run, dir string, suite map[string]int64, progress io.Writer) {
	from := filepath.Join(lab.RunDir, name, "logs")
	var err error
	if dir == "" {
		dir, err = os.MkdirTemp("", "msr-soak-logs-")
	} else {
		err = os.MkdirAll(dir, 0o755)
	}
	if err == nil {
		err = os.CopyFS(dir, os.DirFS(from))
	}
	if err == nil {
		err = keepSuiteLogs(dir, run, suite)
	}
	if err != nil {
		fmt.Fprintf(progress, "soak: keeping the lab's logs: %v\n", err)
		return
	}
	fmt.Fprintf(progress, "soak: the lab's logs are kept in %s\n", dir)
}

// vcpSuiteLogs are the VCPs' own logs of their routing suite and
// keepalived (in demo.RunDir), which outlive a lab: each run appends to
// them. Some faults show in BIRD's log alone (docs/reliability.md,
// finding 36).
var vcpSuiteLogs = []string{"vcp1/bird.log", "vcp1/keepalived.log", "vcp2/bird.log", "vcp2/keepalived.log"}

// suiteLogSizes is how long each of vcpSuiteLogs (in run) is before the
// soak: what it writes comes after.
func suiteLogSizes(run string) map[string]int64 {
	m := map[string]int64{}
	for _, f := range vcpSuiteLogs {
		if fi, err := os.Stat(filepath.Join(run, f)); err == nil {
			m[f] = fi.Size()
		}
	}
	return m
}

// keepSuiteLogs copies into dir what vcpSuiteLogs (in run) gained since
// the sizes in was (a log shorter than it was is copied whole), as
// vcp1.bird.log and so on.
func keepSuiteLogs(dir, run string, was map[string]int64) error {
	for _, f := range vcpSuiteLogs {
		in, err := os.Open(filepath.Join(run, f))
		if err != nil {
			continue // a suite that never started
		}
		if fi, err := in.Stat(); err == nil && fi.Size() >= was[f] {
			in.Seek(was[f], io.SeekStart)
		}
		out, err := os.Create(filepath.Join(dir, strings.ReplaceAll(f, "/", ".")))
		if err == nil {
			_, err = io.Copy(out, in)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
		}
		in.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// sinceText is "what N ms after when", or "not seen what" for 0 (the
// figures' "not seen": a look never saw it).
func sinceText(what string, ms float64, when string) string {
	if ms == 0 {
		return "not seen " + what
	}
	return fmt.Sprintf("%s %.0f ms after %s", what, ms, when)
}

// WriteText prints the report for a reader.
func (r *Report) WriteText(w io.Writer) {
	verdict := "PASSED"
	if !r.InvariantsOK {
		verdict = "FAILED"
	}
	flows := "from h1 to h3 and bgp1's prefixes"
	if r.Lab == demo.LargeLab {
		flows = "from h1e1 (lb1/e1) to every other port's host in the large lab"
	}
	fmt.Fprintf(w, "soak %s: %.0f s, seed %d, %.0f pps %s, %d sent, %d received; lost outside faults %d, duplicated %d\n",
		verdict, r.DurationS, r.Seed, r.RatePPS, flows, r.Sent, r.Received, r.LostOutsideFaults, r.Duplicated)
	if r.Lab != demo.DefaultLabFile && r.Lab != demo.LargeLab {
		fmt.Fprintf(w, "lab: %s in the default lab's place\n", r.Lab)
	}
	if c := r.Churn; c != nil {
		fmt.Fprintf(w, "churn: bgp1 withdrew and announced %d IPv4 and %d IPv6 prefixes in turn for %.0f s: %.0f route changes/s, %d UPDATE messages\n",
			c.Prefixes, c.Prefixes6, c.ChurnedS, c.ChangesPerS, c.UpdatesSent)
	}
	if c := r.Clients; c != nil {
		fmt.Fprintf(w, "clients: %d HTTP downloads h3 -> h1 with their sha256 (%d failed), iperf3 TCP h1 -> h3 %.0f MB (%d retransmits, %d tests failed), iperf3 UDP h3 -> h1 %d datagrams, %d lost\n",
			c.Downloads, len(c.Failed), float64(c.TCPBytes)/1e6, c.TCPRetransmits, len(c.TCPFailed), c.ReverseSent, c.ReverseLost)
	}
	if len(r.Operations) > 0 {
		var ops []string
		for _, k := range slices.Sorted(maps.Keys(r.Operations)) {
			ops = append(ops, fmt.Sprintf("%s %d", k, r.Operations[k]))
		}
		fmt.Fprintf(w, "operations: %s (msr ctl, on the active VCP; reload on both)\n", strings.Join(ops, ", "))
	}
	fmt.Fprintf(w, "%-14s %-30s %8s %8s %10s %11s  %s\n", "FAULT", "TARGET", "AT S", "LOST", "OUTAGE MS", "REPAIRED MS", "GOAL")
	for _, f := range r.Faults {
		met := "met"
		if !f.Met {
			met = "MISSED"
		}
		fmt.Fprintf(w, "%-14s %-30s %8.1f %8d %10.1f %11.0f  %s: %s\n", f.Kind, f.Target, f.AtS, f.LostPackets, f.OutageMS, f.RepairedMS, f.Goal, met)
	}
	names := make([]string, 0, len(r.Invariants))
	for n := range r.Invariants {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		v := r.Invariants[n]
		fmt.Fprintf(w, "invariant %-24s %-5v %s\n", n, v.OK, v.Detail)
	}
	if len(r.NotYet) > 0 {
		fmt.Fprintf(w, "not yet: %s\n", strings.Join(r.NotYet, "; "))
	}
}

// WriteReport writes report.json, report.md, its plot (soak.svg) and the
// watches' CSVs (memory, releases, CPUs, processes) into dir.
func (r *Report) WriteReport(dir, command string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if r.memory != nil {
		if err := r.memory.writeCSV(filepath.Join(dir, "memory.csv"), r.start); err != nil {
			return err
		}
		if err := r.memory.writeReleasesCSV(filepath.Join(dir, "releases.csv"), r.start); err != nil {
			return err
		}
	}
	if r.cpu != nil {
		if err := r.cpu.writeCSVs(dir); err != nil {
			return err
		}
	}
	var svg strings.Builder
	if err := r.WritePlot(&svg); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "soak.svg"), []byte(svg.String()), 0o644); err != nil {
		return err
	}
	return report.Write(dir, r, "Soak", command, "", []report.Figure{{File: "soak.svg", Title: "forwarded and lost over the run, the faults marked"}})
}
