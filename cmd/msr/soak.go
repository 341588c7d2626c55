package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/msr-router/msr/internal/cli"
	"github.com/msr-router/msr/soak"
)

var soakCommand = command{
	summary: "the whole router under accounted traffic and faults for a long time: what it lost, and why",
	usage: `  msr soak [--duration 10m] [--seed N] [--faults all|LIST] [--rate N] [--churn 1000] [--prefixes 600000] [--prefixes6 1000] [--overlap=true] [--ops=true] [--clients=true] [--lab FILE] [--size large] [--report DIR] [-o json]
      brings up the default lab (or --lab FILE in its place: a copy of
      labs/default.yaml changed, keeping its hosts, their addresses, MACs and
      processes, its switch ports and links; a line it cannot take is refused
      with its position, a missing element by name), sends sequenced UDP from
      h1 (1,000 flows, half to h3, half over bgp1's prefixes; IPv4 and IPv6 in
      turn), and injects a fault drawn by the seed every other 4 s step:
      kill -9 of an LB agent, a back-end agent, BIRD, keepalived or the active
      VCP, a back-end host's links down for a second, bgp1's link down for a
      second, or for 16 s, past its BGP hold time, its routes withdrawn and
      restored, a flood of forged DIST and random frames from h2, a memory
      cgroup's limit on a back-end's agent, or r4 joining the router or
      leaving it (in half the fault steps a second fault comes 100-600 ms
      after the first, --overlap); meanwhile bgp1, holding a full IPv4 table
      (--prefixes), withdraws and announces 500 of its IPv4 and 500 of its
      IPv6 prefixes in turn (--churn route changes a second), and the operator
      drains or undrains a back-end, sets or clears a weight, or reloads both
      VCPs' config with another balancing mode and OSPF cost, once a step
      (--ops); real clients run every step (--clients): iperf3's UDP from h3
      to h1, iperf3 TCP from h1 to h3, HTTP downloads from h3 to h1 with their
      sha256; counts every frame lost, in a fault's step or outside any, and
      checks after each step that the router converged again, every back-end's
      FIB equals the suite's RIB, and the router holds what the operator last
      asked.
      Faults: ` + strings.Join(soak.FaultKinds, ", ") + `.
      With --size large (or --lab large) the large lab instead (msr demo up
      --size large: 16 LBs × 4 ports, 8 back-ends): sequenced UDP from h1e1
      to the hosts of the 63 other ports (8 flows each, IPv4 and IPv6 in
      turn), and every other step an LB's host dies (its agent killed, its
      links down) for 6 s and comes back: only its ports' flows may lose
      frames, its ports must go down and their routes leave every back-end,
      and the router must converge again. Faults: ` + strings.Join(soak.LargeFaultKinds, ", ") + `; --churn,
      --prefixes, --overlap, --ops and --clients are the default lab's.
      Exits 1 when an invariant broke or a fault missed its goal. The
      lab's logs are kept in DIR/logs with --report (pass or fail), and
      without it in a new directory under $TMPDIR when the run fails or
      cannot go on.
`,
	run:  runSoak,
	root: true,
}

func runSoak(args []string) error {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	out := cli.AddOutput(fs)
	o := soak.Options{}
	fs.DurationVar(&o.Duration, "duration", 10*time.Minute, "how long the soak runs")
	fs.Uint64Var(&o.Seed, "seed", 1, "the seed the faults are drawn with")
	faults := fs.String("faults", "all", "the faults drawn from, comma-separated, or all: "+strings.Join(soak.FaultKinds, ", "))
	fs.Float64Var(&o.Rate, "rate", 0, fmt.Sprintf("the traffic, frames per second (halved until a step loses nothing; 0: %d, %d in the large lab)", soak.DefaultRate, soak.LargeDefaultRate))
	fs.BoolVar(&o.Overlap, "overlap", true, "in half the fault steps, a second fault 100-600 ms after the first, while it heals")
	fs.Float64Var(&o.ChurnRate, "churn", 1000, "route changes a second bgp1 sends while the traffic runs, withdrawing and announcing the IPv4 prefixes the traffic does not cross (0: none)")
	fs.IntVar(&o.Prefixes, "prefixes", 600_000, "the IPv4 prefixes bgp1 announces (the RouteViews table, grown beyond its 512,621: 600,000 is a full table of today); the churn swings 500 of them")
	fs.IntVar(&o.Prefixes6, "prefixes6", 1000, "the IPv6 prefixes bgp1 announces (the 2015 table, grown beyond its 27,693: 250,000 is a full table of today); the churn swings 500 of them")
	fs.BoolVar(&o.Ops, "ops", true, "the operator drains, weights and reloads once a step (msr ctl drain|undrain|weight|reload)")
	fs.BoolVar(&o.Clients, "clients", true, "real clients every step: iperf3 UDP h3 -> h1, iperf3 TCP h1 -> h3, HTTP downloads h3 -> h1 checked by sha256")
	fs.StringVar(&o.LabFile, "lab", "", "a lab file built in place of labs/default.yaml (its variant: every host, address, MAC, process and link of the default lab kept)")
	size := fs.String("size", "default", "default, or large: the large lab (16 LBs × 4 ports) with LB hosts dying")
	report := fs.String("report", "", "write report.json and report.md into this directory")
	if _, _, err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *report != "" {
		o.LogsDir = filepath.Join(*report, "logs")
		os.RemoveAll(o.LogsDir) // a former run's
	}
	if *faults != "all" {
		o.Faults = strings.Split(*faults, ",")
	}
	var err error
	if o.MSRBin, err = os.Executable(); err != nil {
		return err
	}
	if o.LabFile == "large" {
		*size, o.LabFile = "large", ""
	}
	run := soak.Run
	switch *size {
	case "default":
	case "large":
		if o.LabFile != "" {
			return fmt.Errorf("--size large takes no --lab file")
		}
		run = soak.RunLarge
	default:
		return fmt.Errorf("--size %q: default or large", *size)
	}
	r, err := run(o, os.Stderr)
	if err != nil {
		return err
	}
	if *report != "" {
		if err := r.WriteReport(*report, "msr "+strings.Join(os.Args[1:], " ")); err != nil {
			return err
		}
	}
	if err := out.Print(os.Stdout, r, r.WriteText); err != nil {
		return err
	}
	if !r.InvariantsOK {
		return fmt.Errorf("soak failed: an invariant broke or a fault missed its goal")
	}
	return nil
}
