package main

import (
	"flag"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/msr-router/msr/bench"
	"github.com/msr-router/msr/internal/cli"
	"github.com/msr-router/msr/traffic"
)

var benchCommand = command{
	summary: "measure forwarding: msr's own RFC 2544-style instrument",
	usage: `  msr bench fwd --dut none|linux|lb|router|xdp-fib|xdp-min|msr|msr-switch|msr-xdpswitch [--size 64] [--flows 1000] [--duration 5s] [--rate PPS]
                [--fib pyasn|N|FILE] [--ipv6 [--fib pyasn6|Nv6]] [--prog-stats] [--urpf off|loose|strict]
                [--queues 2] [--cap PPS] [-o json]
      builds its own lab (gen -> DUT -> sink), runs, tears it down, and prints
      offered_pps, received_pps, loss_ratio, reordered and latency_us.
      --dut none connects gen straight to sink: the instrument's ceiling;
      --dut xdp-fib is the back-end's peer, XDP forwarding by the kernel's
      FIB (bpf_fib_lookup); --dut xdp-min the least XDP forwarder (both
      MACs, a redirect) on the LB's topology. --queues N: links of N queues,
      N CPUs sending, each its own flows, the DUT receiving on each
      (dut_forwarded_per_cpu); --cap the LB's or back-end's cap.
      More than 65,536 --flows (up to 1,048,576):
      the frames walk that many destinations, each to the next, and the
      sink counts 65,536 flow ids (flow_ids, destinations_walked).
      --ipv6 sends IPv6/UDP test frames (RFC 5180, 2001:2::/48; 82 bytes
      at least), tagged where the DUT's frames are (the LB's columns).
  msr bench rib [--routes pyasn|N|pyasn6|Nv6] [--backends 3] [--changes 20] [--clients N] [-o json]
      the RIB from the VCP's BIRD to every back-end's FIB: load time, and one
      BGP change's time to every FIB, in a lab of msr processes.
  msr bench flat [--tables 10,pyasn,1000000] [--duts router,xdp-fib,linux] [--rounds 7] [--flows 1000,65536] [--duration 4s] [--max-steal 2]
                 [--prog-stats] [-o json]
      each routing DUT (the back-end; its peer xdp-fib, XDP over the kernel's
      FIB; Linux) with each table and flow count, round after round, the DUTs
      alternating: each DUT's NAPI CPU per packet (median and IQR over the
      rounds: ns_per_packet_median, ns_per_packet_iqr), each table's rate and
      capacity over the first's in the same round, and the first DUT's
      capacity over each other's. A run during which the hypervisor took more
      than --max-steal of a CPU is run again. IPv6 tables (pyasn6, Nv6) get
      IPv6 test frames: --tables 10v6,pyasn6,250000v6,600000
  msr bench rfc2544 --dut linux|lb|router|xdp-fib|msr[,...] [--sizes 64,128,256,512,1024,1280,1518] [--ipv6]
                    [--tests throughput,latency,loss,back-to-back,recovery,reset,single,overload]
                    [--flows 1000] [--fib N|pyasn] [--trial 500ms] [--ndr-resolution 1%] [--trials 3]
                    [--confirmations 3] [--overload 1.1] [--overload-time 30s] [--report DIR] [-o json]
      RFC 2544's tests (docs/rfc2544.md) of every DUT, their trials
      interleaved, beside the instrument's ceiling of the same run; --report
      writes report.md, report.json and the plots.
  msr bench study --topology single|star|multistage[,...] [--sizes 64,576,1470] [--fib 1000,167000]
                  [--flows 1,2,many] [--steps 10] [--trial 1s] [--report DIR] [-o json]
      the load study: forwarded against offered load for a single
      Linux router, a star of four, and msr, two sources and two sinks.
  msr bench transfers [--dut linux,msr] [--protocols http,ftp] [--size-mb 100] [--count 10] [--report DIR] [-o json]
      real transfers: a file fetched over HTTP (nginx, curl) and
      FTP (vsftpd, ftp) across a Linux router and across msr (the default
      lab), interleaved; times side by side.
  msr bench scale [--lbs 1,2] [--backends 1,2,4] [--internal-ports 1] [--cap-lb PPS] [--cap-port PPS]
                  [--cap-backend PPS] [--size 64] [--flows 1000] [--trial 1s] [--report DIR] [-o json]
      scale-out: for each N1 LBs, N2 back-ends and n internal ports,
      a lab with one switch, every element capped, the aggregate zero-loss
      rate beside rho_min = min(N1 x R_LB, N2 x R_R) (docs/scaling.md).
  msr bench vcp [--backends 500] [--lbs 8] [--ports-per-lb 0] [--duration 30s] [-o json]
      the VCP at scale: one msr vcp and a DIST load generator speaking for
      that many elements (authenticated hellos at the default interval): the
      VCP's CPU, memory and DIST bytes sent, and every LB's new table after
      a back-end dies; --ports-per-lb gives each LB external ports, which
      every back-end is sent (paged) and reports holding.
  msr bench lookup [--tables 1000000,250000v6] [--dsts 1000,100000,1000000] [--runs 7] [--count 1000000] [-o json]
      the FIB lookup alone, in the kernel (BPF_PROG_RUN): ns per lookup of
      that many destinations drawn from each table, in a random order, by
      msr's FIB (the back-end's code) and by the kernel's (bpf_fib_lookup,
      the table loaded in a namespace), alternating, less the loop's own.
  msr bench prog [--repeat N] [--rounds R] [-o json]
      ns per packet of the LB program on a data frame (kernel test run),
      beside a minimal MAC-rewrite-and-redirect program, same run.
`,
	run:  runBench,
	root: true,
}

// benchCommands are the bench subcommands besides fwd.
var benchCommands = map[string]func([]string) error{
	"prog": runBenchProg, "rib": runBenchRIB, "flat": runBenchFlat,
	"rfc2544": runBenchRFC2544, "study": runBenchStudy, "transfers": runBenchTransfers,
	"scale": runBenchScale, "vcp": runBenchVCP, "lookup": runBenchLookup,
}

func runBench(args []string) error {
	if len(args) > 0 {
		if run, ok := benchCommands[args[0]]; ok {
			return run(args[1:])
		}
	}
	if len(args) == 0 || args[0] != "fwd" {
		return cli.Usagef("msr bench fwd|flat|prog|rfc2544|rib|study|transfers ...")
	}
	fs := flag.NewFlagSet("bench fwd", flag.ContinueOnError)
	out := cli.AddOutput(fs)
	o := bench.FwdOptions{}
	fs.StringVar(&o.DUT, "dut", "linux", "device under test: none, linux, lb, lb-int-ext, lb-both, router, xdp-fib, xdp-min, msr, msr-switch (msr through a Linux bridge) or msr-xdpswitch (through the bridge with its XDP fast path)")
	fs.IntVar(&o.Size, "size", 64, "frame size in bytes with FCS, 64..1518")
	fs.IntVar(&o.Flows, "flows", 1, "number of flows (destinations), 1..1048576: past 65536 the frames walk them")
	fs.DurationVar(&o.Duration, "duration", 5*time.Second, "how long to send")
	fs.Float64Var(&o.Rate, "rate", 0, "offered frames per second; 0 is flat out")
	fs.BoolVar(&o.ProgStats, "prog-stats", false, "report the DUT program's ns/packet from kernel BPF statistics (lowers rates)")
	fs.StringVar(&o.FIB, "fib", "", "routes in the DUT (linux, router): pyasn, a number of prefixes, or a pyasn-format file; with --ipv6, pyasn6 or Nv6")
	fs.BoolVar(&o.IPv6, "ipv6", false, "IPv6/UDP test frames (RFC 5180); the size defaults to the smallest, 82 bytes")
	fs.StringVar(&o.URPF, "urpf", "", "router: frames tagged as an LB balances them from a port with unicast RPF off, loose or strict (the sources routed through it)")
	fs.IntVar(&o.Queues, "queues", 1, "queues of the lab's links, and CPUs sending, each its own flows: the DUT receives on that many CPUs")
	fs.Uint64Var(&o.CapPPS, "cap", 0, "lb, router: the element's capacity in frames a second (0: none)")
	fs.Func("sflow-rate", "lb: sample 1 in N of the frames into e0 for sFlow, the samples read as the agent does", func(s string) error {
		n, err := strconv.ParseUint(s, 10, 32)
		o.SFlowRate = uint32(n)
		return err
	})
	pos, _, err := cli.Parse(fs, args[1:])
	if err != nil {
		return err
	}
	if o.IPv6 && !flagSet(fs, "size") {
		o.Size = traffic.MinFrameSize6
	}
	if len(pos) != 0 {
		return cli.Usagef("unexpected argument %q", pos[0])
	}
	if o.Duration <= 0 || o.Rate < 0 {
		return cli.Usagef("duration must be positive and rate not negative")
	}
	r, err := bench.Fwd(o)
	if err != nil {
		return err
	}
	return out.Print(os.Stdout, r, r.WriteText)
}

func runBenchProg(args []string) error {
	fs := flag.NewFlagSet("bench prog", flag.ContinueOnError)
	out := cli.AddOutput(fs)
	repeat := fs.Uint("repeat", 1_000_000, "runs per measurement")
	rounds := fs.Int("rounds", 5, "measurements of each program, alternating")
	if _, _, err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *repeat == 0 || *rounds <= 0 {
		return cli.Usagef("repeat and rounds must be positive")
	}
	r, err := bench.Prog(uint32(*repeat), *rounds)
	if err != nil {
		return err
	}
	return out.Print(os.Stdout, r, r.WriteText)
}

func runBenchRIB(args []string) error {
	fs := flag.NewFlagSet("bench rib", flag.ContinueOnError)
	out := cli.AddOutput(fs)
	o := bench.RIBOptions{}
	fs.StringVar(&o.Routes, "routes", "pyasn", "static routes in the VCP's suite: pyasn or a number of prefixes; IPv6: pyasn6 or Nv6 (250000v6)")
	fs.IntVar(&o.Backends, "backends", 3, "back-ends, 1-8")
	fs.IntVar(&o.Changes, "changes", 20, "announce/withdraw pairs timed")
	fs.IntVar(&o.Clients, "clients", 0, "receive-only iBGP clients of the VCP's reflector, 0-150, started with every route loaded")
	if _, _, err := cli.Parse(fs, args); err != nil {
		return err
	}
	if o.Backends < 1 || o.Backends > 8 || o.Changes < 0 || o.Clients < 0 || o.Clients > 150 {
		return cli.Usagef("backends 1-8, changes not negative, clients 0-150")
	}
	r, err := bench.RIB(o)
	if err != nil {
		return err
	}
	return out.Print(os.Stdout, r, r.WriteText)
}

func runBenchVCP(args []string) error {
	fs := flag.NewFlagSet("bench vcp", flag.ContinueOnError)
	out := cli.AddOutput(fs)
	o := bench.VCPScaleOptions{}
	fs.IntVar(&o.Backends, "backends", 500, "back-ends the generator speaks for")
	fs.IntVar(&o.LBs, "lbs", 8, "LBs the generator speaks for (they install the tables sent)")
	fs.IntVar(&o.PortsPerLB, "ports-per-lb", 0, "external ports on each LB (0-15), one port range in the VCP's file; every back-end is sent them all")
	fs.DurationVar(&o.Duration, "duration", 30*time.Second, "how long the VCP's CPU is measured")
	if _, _, err := cli.Parse(fs, args); err != nil {
		return err
	}
	r, err := bench.VCPScale(o, os.Stderr)
	if err != nil {
		return err
	}
	return out.Print(os.Stdout, r, r.WriteText)
}

func runBenchFlat(args []string) error {
	fs := flag.NewFlagSet("bench flat", flag.ContinueOnError)
	out := cli.AddOutput(fs)
	o := bench.FlatOptions{}
	tables := fs.String("tables", "10,pyasn,1000000", "--fib values, comma-separated; the first is the baseline")
	fs.IntVar(&o.Rounds, "rounds", 7, "rounds of every table")
	duts := fs.String("duts", "router", "the routing DUTs, comma-separated (router, xdp-fib, linux); the first is set against the others")
	flows := fs.String("flows", "1000", "flow counts, comma-separated: each run's flows, their destinations spread over each table")
	fs.Float64Var(&o.MaxStealPct, "max-steal", 2, "run again (twice at most) a run during which the hypervisor took more than this share of a CPU, percent")
	fs.DurationVar(&o.Duration, "duration", 4*time.Second, "how long each run sends")
	fs.BoolVar(&o.ProgStats, "prog-stats", false, "also report the router program's ns/packet (lowers rates)")
	if _, _, err := cli.Parse(fs, args); err != nil {
		return err
	}
	o.Tables, o.DUTs = strings.Split(*tables, ","), strings.Split(*duts, ",")
	for _, f := range strings.Split(*flows, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return cli.Usagef("--flows %q: flow counts, comma-separated", *flows)
		}
		o.Flows = append(o.Flows, n)
	}
	if len(o.Tables) < 2 || o.Rounds < 1 || o.Duration <= 0 {
		return cli.Usagef("at least two tables, one round and a positive duration")
	}
	r, err := bench.Flat(o)
	if err != nil {
		return err
	}
	return out.Print(os.Stdout, r, r.WriteText)
}

func runBenchLookup(args []string) error {
	fs := flag.NewFlagSet("bench lookup", flag.ContinueOnError)
	out := cli.AddOutput(fs)
	o := bench.LookupOptions{}
	tables := fs.String("tables", "1000000,250000v6", "tables, comma-separated: pyasn, N, FILE (IPv4); pyasn6, Nv6 (IPv6)")
	dsts := fs.String("dsts", "1000,100000,1000000", "destinations drawn from each table, comma-separated")
	fs.IntVar(&o.Runs, "runs", 7, "runs of each FIB, alternating")
	fs.IntVar(&o.Count, "count", 1_000_000, "lookups a run makes")
	if _, _, err := cli.Parse(fs, args); err != nil {
		return err
	}
	o.Tables = strings.Split(*tables, ",")
	for _, f := range strings.Split(*dsts, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 1<<21 {
			return cli.Usagef("--dsts %q: destination counts up to %d, comma-separated", *dsts, 1<<21)
		}
		o.Dsts = append(o.Dsts, n)
	}
	if o.Runs < 1 || o.Count < 1 {
		return cli.Usagef("at least one run of one lookup")
	}
	r, err := bench.Lookup(o)
	if err != nil {
		return err
	}
	return out.Print(os.Stdout, r, r.WriteText)
}

// flagSet says whether the command line set the flag.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
