package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/msr-router/msr/internal/cli"
	"github.com/msr-router/msr/lb"
	"github.com/msr-router/msr/sim"
)

var simCommand = command{
	summary: "model the router past one machine: capacity, load, loss and reordering for N1 LBs and N2 back-ends",
	usage: `  msr sim [--lbs 1,2,4,8,16,32,64] [--backends 1,2,4,...,512] [--internal-ports 1] [--modes wrr,hash,maglev,flowlet]
          [--lb-ns 300] [--egress-ns NS] [--backend-ns 350] [--lb-costs FILE] [--backend-costs FILE]
          [--lb-cores 4] [--backend-cores 4] [--link-gbps 10] [--cap-lb PPS] [--cap-port PPS] [--cap-backend PPS,...]
          [--size 64] [--flows 100000] [--flow-sizes websearch|pareto:ALPHA|equal] [--burst 1]
          [--lb-spread hash|even] [--hosts 16] [--flowlet-gap 1ms] [--path-spread 50us] [--queue 256]
          [--packets N] [--resolution 0.5%] [--seed 1] [--report DIR] [-o json]
      every element a queue served at its capacity (from its measured cost per
      packet, or a cap), every packet placed by the LB's own tables and
      choices: the zero-loss rate beside rho_min (docs/scaling.md), the busiest
      back-end's load over the mean, loss at rho_min and reordering, per mode.
      --lb-costs and --backend-costs read napi_ns_per_packet from
      'msr bench fwd --dut lb|router -o json'.
  msr sim --validate REPORT.json[,...] [-o json]
      predicts every point of 'msr bench scale' reports with the lab's caps
      and traffic, beside what the lab measured (docs/scaling.md).
`,
	run: runSim,
}

func runSim(args []string) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	out := cli.AddOutput(fs)
	var o sim.Options
	lbs := fs.String("lbs", "1,2,4,8,16,32,64", "numbers of LBs (N1), comma-separated")
	backends := fs.String("backends", "1,2,4,8,16,32,64,128,256,512", "numbers of back-ends (N2), comma-separated")
	ports := fs.String("internal-ports", "1", "internal ports per LB (DTX-n), comma-separated")
	modes := fs.String("modes", "wrr,hash,maglev,flowlet", "balancing modes, comma-separated")
	fs.Float64Var(&o.LBNs, "lb-ns", sim.DefaultLBNs, "an LB's CPU time to balance a packet, ns on one core")
	fs.Float64Var(&o.EgressNs, "egress-ns", 0, "an LB's CPU time to send a packet out of the router, ns (default: --lb-ns)")
	fs.Float64Var(&o.BackendNs, "backend-ns", sim.DefaultBackendNs, "a back-end's CPU time to route a packet, ns on one core")
	lbCosts := fs.String("lb-costs", "", "read --lb-ns from this 'msr bench fwd --dut lb -o json' output")
	backendCosts := fs.String("backend-costs", "", "read --backend-ns from this 'msr bench fwd --dut router -o json' output")
	fs.IntVar(&o.LBCores, "lb-cores", sim.DefaultCores, "cores an LB's data path has")
	fs.IntVar(&o.BackendCores, "backend-cores", sim.DefaultCores, "cores a back-end's data path has")
	fs.Float64Var(&o.LinkGbps, "link-gbps", sim.DefaultLinkGbps, "every port's line rate, Gbit/s (0: none)")
	fs.Uint64Var(&o.CapLB, "cap-lb", 0, "caps instead of costs: an LB's frames a second")
	fs.Uint64Var(&o.CapPort, "cap-port", 0, "caps instead of costs: an internal port's frames a second")
	capBackend := fs.String("cap-backend", "", "caps instead of costs: the back-ends', comma-separated, back-end J taking the (J-1 mod len)th")
	fs.IntVar(&o.Size, "size", 64, "frame size in bytes with FCS")
	fs.IntVar(&o.Flows, "flows", 100000, "flows in a trial")
	fs.StringVar(&o.FlowSizes, "flow-sizes", "websearch", "flow sizes: websearch (DCTCP's web search cluster), pareto:ALPHA, or equal")
	fs.IntVar(&o.Burst, "burst", 1, "packets a flow sends back to back")
	fs.StringVar(&o.LBSpread, "lb-spread", "hash", "how flows reach the LBs: hash (upstream ECMP) or even")
	fs.IntVar(&o.Hosts, "hosts", 16, "source MACs each LB receives from (they pick its internal port)")
	fs.DurationVar(&o.FlowletGap, "flowlet-gap", lb.DefaultFlowletGap, "flowlet mode's gap")
	fs.DurationVar(&o.PathSpread, "path-spread", sim.DefaultPathSpread, "spread of the back-ends' fixed path latency")
	fs.IntVar(&o.Queue, "queue", sim.DefaultQueue, "each element's ring, frames")
	fs.IntVar(&o.Packets, "packets", 0, "packets a trial (0: max(200000, 50 x queue x N2))")
	res := fs.String("resolution", "0.5%", "the search's resolution, relative")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of every random choice")
	report := fs.String("report", "", "write report.json, report.md and the plots into this directory")
	validate := fs.String("validate", "", "'msr bench scale' report(s) to predict, comma-separated")
	if _, _, err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *validate != "" {
		return runSimValidate(out, strings.Split(*validate, ","), o)
	}
	var err error
	if o.LBs, o.Backends, o.InternalPorts, err = parseCounts(*lbs, *backends, *ports); err != nil {
		return err
	}
	o.Modes = strings.Split(*modes, ",")
	if o.CapBackend, err = parseCaps(*capBackend); err != nil {
		return err
	}
	for _, c := range []struct {
		file string
		dst  *float64
	}{{*lbCosts, &o.LBNs}, {*backendCosts, &o.BackendNs}} {
		if c.file == "" {
			continue
		}
		ns, err := napiNs(c.file)
		if err != nil {
			return err
		}
		*c.dst = ns
	}
	if o.Resolution, err = parsePercent("resolution", *res); err != nil {
		return err
	}
	if err := o.Complete(); err != nil {
		return cli.Usagef("%v", err)
	}
	result, err := sim.Run(o)
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

// napiNs reads napi_ns_per_packet from `msr bench fwd -o json`.
func napiNs(file string) (float64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	var fwd struct {
		NAPINsPerPacket float64 `json:"napi_ns_per_packet"`
	}
	if err := json.Unmarshal(b, &fwd); err != nil || fwd.NAPINsPerPacket <= 0 {
		return 0, fmt.Errorf("%s: no napi_ns_per_packet (the output of 'msr bench fwd --dut lb|router -o json')", file)
	}
	return fwd.NAPINsPerPacket, nil
}

// simValidation is `msr sim --validate -o json`: per report, its checks.
type simValidation struct {
	Reports []simValidated `json:"reports"`
}

type simValidated struct {
	Report string      `json:"report"`
	Checks []sim.Check `json:"checks"`
}

func runSimValidate(out *cli.Output, reports []string, o sim.Options) error {
	var v simValidation
	for _, rep := range reports {
		checks, err := sim.Validate(rep, o)
		if err != nil {
			return err
		}
		v.Reports = append(v.Reports, simValidated{rep, checks})
	}
	return out.Print(os.Stdout, v, func(w io.Writer) {
		for _, r := range v.Reports {
			sim.WriteChecks(w, r.Report, r.Checks)
		}
	})
}
