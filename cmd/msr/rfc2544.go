package main

import (
	"flag"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/msr-router/msr/bench"
	"github.com/msr-router/msr/internal/cli"
)

func runBenchRFC2544(args []string) error {
	fs := flag.NewFlagSet("bench rfc2544", flag.ContinueOnError)
	out := cli.AddOutput(fs)
	duts := fs.String("dut", "linux,msr", "the devices under test, comma-separated: linux, lb, router, msr, msr-switch, msr-xdpswitch")
	sizes := fs.String("sizes", "64,128,256,512,1024,1280,1518", "frame sizes in bytes with FCS")
	tests := fs.String("tests", strings.Join(bench.RFC2544Tests, ","), "the tests, comma-separated: "+strings.Join(bench.RFC2544Tests, ", "))
	o := bench.RFC2544Options{}
	fs.IntVar(&o.Flows, "flows", 1000, "number of flows")
	fs.StringVar(&o.FIB, "fib", "", "routes in the DUTs that route: pyasn, a number of prefixes, or a pyasn-format file")
	fs.DurationVar(&o.Trial, "trial", 2*time.Second, "each trial's length")
	res := fs.String("ndr-resolution", "1%", "the search's resolution, relative")
	fs.IntVar(&o.Trials, "trials", 3, "trials that judge a rate (half of them may exceed the loss goal)")
	fs.IntVar(&o.Confirmations, "confirmations", 3, "NDR searches, for NDR's run-to-run spread")
	fs.Float64Var(&o.Overload, "overload", 1.1, "the recovery test's overload, a multiple of NDR")
	fs.DurationVar(&o.OverloadTime, "overload-time", 30*time.Second, "how long the overload test runs at 150% of NDR")
	report := fs.String("report", "", "write report.json and report.md into this directory")
	if _, _, err := cli.Parse(fs, args); err != nil {
		return err
	}
	o.DUTs = strings.Split(*duts, ",")
	o.Tests = strings.Split(*tests, ",")
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(s)
		if err != nil {
			return cli.Usagef("--sizes %q: frame sizes such as 64,1518", *sizes)
		}
		o.Sizes = append(o.Sizes, n)
	}
	r, err := strconv.ParseFloat(strings.TrimSuffix(*res, "%"), 64)
	if err != nil || !strings.HasSuffix(*res, "%") {
		return cli.Usagef("--ndr-resolution %q: a percentage such as 1%%", *res)
	}
	o.Resolution = r / 100
	progress := io.Writer(os.Stderr)
	result, err := bench.RFC2544(o, progress)
	if err != nil {
		return err
	}
	if *report != "" {
		if err := result.WriteReport(*report, "msr "+strings.Join(os.Args[1:], " ")); err != nil {
			return err
		}
	}
	return out.Print(os.Stdout, result, result.WriteText)
}
