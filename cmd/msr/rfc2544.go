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
	duts := fs.String("dut", "linux,msr", "the devices under test, comma-separated: "+strings.Join(bench.DUTs[1:], ", "))
	sizes := fs.String("sizes", "64,128,256,512,1024,1280,1518", "frame sizes in bytes with FCS")
	tests := fs.String("tests", strings.Join(bench.RFC2544Tests, ","), "the tests, comma-separated: "+strings.Join(bench.RFC2544Tests, ", "))
	o := bench.RFC2544Options{}
	fs.IntVar(&o.Flows, "flows", 1000, "number of flows")
	fs.StringVar(&o.FIB, "fib", "", "routes in the DUTs that route: pyasn, a number of prefixes, or a pyasn-format file")
	fs.DurationVar(&o.Trial, "trial", 500*time.Millisecond, "each trial's length (a search's coarse trials are a quarter of it)")
	res := fs.String("ndr-resolution", "1%", "the search's resolution, relative")
	fs.IntVar(&o.Trials, "trials", 3, "trials that judge a rate (half of them may exceed the loss goal)")
	fs.IntVar(&o.Confirmations, "confirmations", 3, "NDR searches, for NDR's run-to-run spread")
	fs.BoolVar(&o.PDROnly, "pdr-only", false, "search PDR alone, once (CSIT's headline where no rate passes NDR's goal); --tests then defaults to throughput, the only one it runs")
	fs.IntVar(&o.MaxTrials, "max-trials", 40, "trials an NDR search may make (the first, which finds PDR too, half as many again); 0: no bound")
	fs.Float64Var(&o.Overload, "overload", 1.1, "the recovery test's overload, a multiple of NDR")
	fs.DurationVar(&o.OverloadTime, "overload-time", 30*time.Second, "how long the overload test runs at 150% of NDR")
	fs.BoolVar(&o.IPv6, "ipv6", false, "IPv6/UDP test frames (RFC 5180); --sizes then default to 82,128,256,512,1024,1280,1518")
	report := fs.String("report", "", "write report.json and report.md into this directory")
	if _, _, err := cli.Parse(fs, args); err != nil {
		return err
	}
	if o.IPv6 && !flagSet(fs, "sizes") {
		*sizes = "82,128,256,512,1024,1280,1518"
	}
	if o.PDROnly && !flagSet(fs, "tests") {
		*tests = "throughput"
	}
	o.DUTs = strings.Split(*duts, ",")
	o.Tests = strings.Split(*tests, ",")
	var err error
	if o.Sizes, err = parseSizes(*sizes); err != nil {
		return err
	}
	r, err := strconv.ParseFloat(strings.TrimSuffix(*res, "%"), 64)
	if err != nil || !strings.HasSuffix(*res, "%") {
		return cli.Usagef("--ndr-resolution %q: a percentage such as 1%%", *res)
	}
	o.Resolution = r / 100
	// The reset test runs the whole router's elements with this program.
	if o.MSRBin, err = os.Executable(); err != nil {
		return err
	}
	progress := io.Writer(os.Stderr)
	result, err := bench.RFC2544(o, progress)
	if err != nil {
		return err
	}
	return printReport(out, result, *report)
}

func runBenchStudy(args []string) error {
	fs := flag.NewFlagSet("bench study", flag.ContinueOnError)
	out := cli.AddOutput(fs)
	topos := fs.String("topology", strings.Join(bench.StudyTopologies, ","), "the topologies, comma-separated: single, star, multistage")
	sizes := fs.String("sizes", "64,576,1470", "frame sizes in bytes with FCS")
	fibs := fs.String("fib", "1000,167000", "table sizes, comma-separated: numbers of prefixes, or pyasn")
	flows := fs.String("flows", "1,2,many", "flow sets, comma-separated: 1, 2, many")
	o := bench.StudyOptions{}
	fs.IntVar(&o.Steps, "steps", 10, "offered loads a curve, from a 32nd of the instrument's ceiling to the ceiling")
	fs.IntVar(&o.ManyFlows, "many", 1000, "flows of the many-flows set")
	fs.DurationVar(&o.Trial, "trial", time.Second, "each offered load's trial")
	report := fs.String("report", "", "write report.json, report.md and the plots into this directory")
	if _, _, err := cli.Parse(fs, args); err != nil {
		return err
	}
	o.Topologies, o.FIBs, o.Flows = strings.Split(*topos, ","), strings.Split(*fibs, ","), strings.Split(*flows, ",")
	var err error
	if o.Sizes, err = parseSizes(*sizes); err != nil {
		return err
	}
	result, err := bench.Study(o, os.Stderr)
	if err != nil {
		return err
	}
	return printReport(out, result, *report)
}

func runBenchTransfers(args []string) error {
	fs := flag.NewFlagSet("bench transfers", flag.ContinueOnError)
	out := cli.AddOutput(fs)
	duts := fs.String("dut", "linux,msr", "the routers, comma-separated: linux, msr (the default lab)")
	protos := fs.String("protocols", "http,ftp", "the protocols, comma-separated: http (nginx, curl), ftp (vsftpd, ftp)")
	o := bench.TransferOptions{}
	fs.IntVar(&o.SizeMB, "size-mb", 100, "the file's size in MB")
	fs.IntVar(&o.Count, "count", 10, "transfers per router and protocol")
	report := fs.String("report", "", "write report.json, report.md and the plot into this directory")
	if _, _, err := cli.Parse(fs, args); err != nil {
		return err
	}
	o.DUTs, o.Protocols = strings.Split(*duts, ","), strings.Split(*protos, ",")
	var err error
	if o.MSR, err = os.Executable(); err != nil {
		return err
	}
	result, err := bench.Transfers(o, os.Stderr)
	if err != nil {
		return err
	}
	return printReport(out, result, *report)
}

// A benchReport is a bench result with a report.
type benchReport interface {
	WriteReport(dir, command string) error
	WriteText(w io.Writer)
}

// printReport writes the result's report into dir (if set) and prints
// it.
func printReport(out *cli.Output, r benchReport, dir string) error {
	if dir != "" {
		if err := r.WriteReport(dir, "msr "+strings.Join(os.Args[1:], " ")); err != nil {
			return err
		}
	}
	return out.Print(os.Stdout, r, r.WriteText)
}

// parseSizes reads --sizes.
func parseSizes(sizes string) ([]int, error) {
	var out []int
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(s)
		if err != nil {
			return nil, cli.Usagef("--sizes %q: frame sizes such as 64,1518", sizes)
		}
		out = append(out, n)
	}
	return out, nil
}
