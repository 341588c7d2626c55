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
	for _, l := range []struct {
		flag, text string
		dst        *[]int
	}{{"lbs", *lbs, &o.LBs}, {"backends", *backends, &o.Backends}, {"internal-ports", *ports, &o.InternalPorts}} {
		for _, s := range strings.Split(l.text, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				return cli.Usagef("--%s %q: numbers, comma-separated", l.flag, l.text)
			}
			*l.dst = append(*l.dst, n)
		}
	}
	for _, c := range strings.Split(*capBackend, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(c), 10, 64)
		if err != nil {
			return cli.Usagef("--cap-backend %q: frames a second, comma-separated", *capBackend)
		}
		o.CapBackend = append(o.CapBackend, v)
	}
	if len(o.CapBackend) == 1 && o.CapBackend[0] == 0 {
		o.CapBackend = nil
	}
	r, err := strconv.ParseFloat(strings.TrimSuffix(*res, "%"), 64)
	if err != nil || !strings.HasSuffix(*res, "%") {
		return cli.Usagef("--ndr-resolution %q: a percentage such as 1%%", *res)
	}
	o.Resolution = r / 100
	result, err := bench.Scale(o, os.Stderr)
	if err != nil {
		return err
	}
	return printReport(out, result, *report)
}
