package main

import (
	"flag"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/msr-router/msr/bench"
	"github.com/msr-router/msr/internal/cli"
)

func runBenchScale(args []string) error {
	fs := flag.NewFlagSet("bench scale", flag.ContinueOnError)
	out := cli.AddOutput(fs)
	lbs := fs.String("lbs", "1,2", "numbers of LBs (N1), comma-separated")
	backends := fs.String("backends", "1,2,4", "numbers of back-ends (N2), comma-separated")
	ports := fs.String("internal-ports", "1", "internal ports per LB (DTX-n), comma-separated")
	o := bench.ScaleOptions{}
	fs.Uint64Var(&o.CapLB, "cap-lb", 0, "each LB's capacity in frames a second (what it balances; 0: none)")
	fs.Uint64Var(&o.CapPort, "cap-port", 0, "each internal port's capacity in frames a second (DTX-n; 0: none)")
	capBackend := fs.String("cap-backend", "0", "the back-ends' capacities in frames a second, comma-separated, back-end J taking the (J-1 mod len)th (0: none); the LBs' weights follow them")
	fs.StringVar(&o.Mode, "mode", "wrr", "the LBs' balancing mode: wrr or flowlet")
	fs.IntVar(&o.Size, "size", 64, "frame size in bytes with FCS")
	fs.IntVar(&o.Flows, "flows", 1000, "flows, spread over the LBs")
	fs.DurationVar(&o.Trial, "trial", time.Second, "each trial's length (a search's coarse trials are a quarter of it)")
	res := fs.String("ndr-resolution", "1%", "the search's resolution, relative")
	fs.IntVar(&o.Trials, "trials", 2, "trials that judge a rate")
	fs.IntVar(&o.MaxTrials, "max-trials", 30, "trials a point's search may make")
	report := fs.String("report", "", "write report.json, report.md and the plots into this directory")
	if _, _, err := cli.Parse(fs, args); err != nil {
		return err
	}
	var err error
	if o.LBs, o.Backends, o.InternalPorts, err = parseCounts(*lbs, *backends, *ports); err != nil {
		return err
	}
	if o.CapBackend, err = parseCaps(*capBackend); err != nil {
		return err
	}
	if o.Resolution, err = parsePercent("ndr-resolution", *res); err != nil {
		return err
	}
	result, err := bench.Scale(o, os.Stderr)
	if err != nil {
		return err
	}
	return printReport(out, result, *report)
}

// parseCounts reads --lbs, --backends and --internal-ports: numbers,
// comma-separated (bench scale's and sim's).
func parseCounts(lbs, backends, ports string) (n1, n2, n []int, err error) {
	for _, l := range []struct {
		flag, text string
		dst        *[]int
	}{{"lbs", lbs, &n1}, {"backends", backends, &n2}, {"internal-ports", ports, &n}} {
		for _, s := range strings.Split(l.text, ",") {
			v, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				return nil, nil, nil, cli.Usagef("--%s %q: numbers, comma-separated", l.flag, l.text)
			}
			*l.dst = append(*l.dst, v)
		}
	}
	return n1, n2, n, nil
}

// parseCaps reads --cap-backend: frames a second, comma-separated; "" or
// "0" is none.
func parseCaps(text string) ([]uint64, error) {
	if text == "" || text == "0" {
		return nil, nil
	}
	var caps []uint64
	for _, c := range strings.Split(text, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(c), 10, 64)
		if err != nil {
			return nil, cli.Usagef("--cap-backend %q: frames a second, comma-separated", text)
		}
		caps = append(caps, v)
	}
	return caps, nil
}

// parsePercent reads a relative resolution written as a percentage (1%).
func parsePercent(flag, text string) (float64, error) {
	r, err := strconv.ParseFloat(strings.TrimSuffix(text, "%"), 64)
	if err != nil || !strings.HasSuffix(text, "%") {
		return 0, cli.Usagef("--%s %q: a percentage such as 1%%", flag, text)
	}
	return r / 100, nil
}
