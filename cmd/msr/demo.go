package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/internal/cli"
)

var demoCommand = command{
	summary: "the main job: the default lab, converged, with real traffic through it",
	usage: `  msr demo [--duration 10s] [--prefixes 3000] [--prefixes6 200] [--keep] [-o json]
      bring the default lab up (labs/default.yaml: 2 LBs, 3 back-ends, 2 VCPs,
      3 external hosts, a BGP and an OSPF neighbour), wait until it has
      converged, push traffic (ping, traceroute, iperf3 h1 -> h3) with a live
      view, print a summary and tear it down (Ctrl-C too; --keep leaves it up)
  msr demo up [--prefixes 3000] [--prefixes6 200] [--monitoring] [--lab FILE] [--sflow ADDR:PORT] [--ipfix ADDR:PORT] [--sflow-rate N]
                                   bring it up and wait; it prints the web view's URL and the console's command;
                                   --monitoring runs Prometheus on mon (10.0.0.40:9090), scraping every agent;
                                   --sflow has the LBs send sFlow to a collector (10.0.0.40:6343: mon), 1 in N sampled;
                                   --ipfix the flows of those samples as IPFIX (10.0.0.40:4739: mon);
                                   --lab builds FILE in labs/default.yaml's place (a variant of it: every host,
                                   address, MAC, process and link of the default lab kept), as msr soak --lab
  msr demo add-backend NAME [--capacity MBPS]   add a back-end (r4 ... r9) to the running lab: a
                                   new machine whose file holds only its identity; the VCP configures it
  msr demo down                    remove it
  msr demo up|down --size large    the large lab instead (demo/large.go): 16 LBs x 4 external ports,
                                   8 back-ends, both VCPs, a host on every port, 8 BGP and 4 OSPF
                                   neighbours; it and the default lab are not up together
  msr demo add-lb --size large     add the next LB (lb17 ...) with 4 ports and their hosts to the
                                   running large lab; both VCPs reloaded take its ports
`,
	run:  runDemo,
	root: true,
}

func runDemo(args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	out := cli.AddOutput(fs)
	duration := fs.Duration("duration", 10*time.Second, "how long iperf3 runs")
	prefixes := fs.Int("prefixes", 3000, "how many RouteViews prefixes bgp1 announces")
	prefixes6 := fs.Int("prefixes6", demo.Prefixes6, "how many IPv6 prefixes bgp1 announces (the 2015 snapshot, grown beyond its 27,693)")
	keep := fs.Bool("keep", false, "leave the lab up at the end")
	monitoring := fs.Bool("monitoring", false, "run Prometheus on the lab's host mon, scraping every agent")
	var sflowTo netip.AddrPort
	fs.Func("sflow", "the LBs send sFlow to this collector, ADDR:PORT (mon: 10.0.0.40:6343)", func(s string) (err error) {
		sflowTo, err = netip.ParseAddrPort(s)
		return err
	})
	sflowRate := fs.Uint("sflow-rate", 0, "with --sflow or --ipfix: sample 1 in N frames (0: 1000)")
	var ipfixTo netip.AddrPort
	fs.Func("ipfix", "the LBs send the flows of their samples as IPFIX to this collector, ADDR:PORT (mon: 10.0.0.40:4739)", func(s string) (err error) {
		ipfixTo, err = netip.ParseAddrPort(s)
		return err
	})
	labFile := fs.String("lab", "", "a lab file built in place of labs/default.yaml (its variant: every host, address, MAC, process and link of the default lab kept)")
	capacity := fs.Int("capacity", 10000, "add-backend: the new back-end's capacity, Mbit/s")
	size := fs.String("size", "default", "which lab: default, or large (16 LBs x 4 ports)")
	pos, _, err := cli.Parse(fs, args)
	if err != nil {
		return err
	}
	switch *size {
	case "default":
	case "large":
		return runLargeDemo(pos)
	default:
		return cli.Usagef("--size %q: default or large", *size)
	}
	if len(pos) == 1 && pos[0] == "down" {
		return demo.Down()
	}
	if len(pos) == 2 && pos[0] == "add-backend" {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		return demo.AddBackend(self, pos[1], *capacity)
	}
	if len(pos) > 1 || (len(pos) == 1 && pos[0] != "up") {
		return cli.Usagef("unknown demo command %q", strings.Join(pos, " "))
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	w := os.Stderr
	if *prefixes < 1 || *prefixes6 < 3 {
		return cli.Usagef("--prefixes at least 1, --prefixes6 at least 3")
	}
	o := demo.Options{Prefixes: *prefixes, Prefixes6: *prefixes6, Monitoring: *monitoring, LabFile: *labFile, SFlow: sflowTo, SFlowRate: uint32(*sflowRate), IPFIX: ipfixTo}
	spec, err := demo.LabSpec(self, o)
	if err != nil {
		return err // before a previous run's lab is taken down
	}
	fmt.Fprintln(w, "bringing up the default lab ...")
	start := time.Now()
	demo.Down() // a previous run's
	plan, err := demo.UpLab(spec, o)
	if err != nil {
		return err
	}
	upOnly := len(pos) == 1
	if !upOnly && !*keep {
		defer func() {
			fmt.Fprintln(w, "tearing the default lab down")
			demo.Down()
		}()
	}
	fmt.Fprintf(w, "up in %.1f s; bgp1 announces %d prefixes and %d IPv6 ones; waiting for convergence ...\n", time.Since(start).Seconds(), len(plan.Prefixes), len(plan.Prefixes6))
	// Two minutes, and one more per 100,000 prefixes (a full table takes
	// FRR's bgpd a while to read).
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute+time.Duration((len(plan.Prefixes)+len(plan.Prefixes6))/100_000)*time.Minute)
	defer cancel()
	if err := demo.Wait(wctx, plan, w); err != nil {
		return err
	}
	converged := time.Since(start).Seconds()
	if upOnly {
		fmt.Fprintln(w, "the default lab is up: msr lab exec --lab default h1 -- ping 203.0.113.10; msr demo down removes it")
		fmt.Fprintf(w, "web view: https://%s/ (from a host of the lab; certificate %s)\n", demo.VCPAPI, demo.APIFile("ca.crt"))
		fmt.Fprintf(w, "console: msr lab exec --lab default r1 -- msr ctl --api %s --ca %s --token-file %s status\n", demo.VCPAPI, demo.APIFile("ca.crt"), demo.APIFile("read.token"))
		if *monitoring {
			fmt.Fprintf(w, "Prometheus: http://%s (msr lab exec --lab default mon -- curl -s 'http://%s/api/v1/query?query=msr_vcp_router_packets_total')\n",
				demo.PrometheusAddr, demo.PrometheusAddr)
		}
		return nil
	}
	res, err := demo.Traffic(ctx, plan, *duration, w)
	if err != nil {
		return err
	}
	res.Converged = converged
	return out.Print(os.Stdout, res, func(w io.Writer) {
		fmt.Fprintf(w, "\nsummary: converged %.1f s after start\n", res.Converged)
		for _, k := range sortedKeys(res.Ping) {
			fmt.Fprintf(w, "  ping %-33s %s\n", k, res.Ping[k])
		}
		fmt.Fprintf(w, "  traceroute h1 -> h3: %d hops: %s\n", len(res.Traceroute), strings.Join(res.Traceroute, " | "))
		fmt.Fprintf(w, "  traceroute h1 -> h3 (IPv6): %d hops: %s\n", len(res.Traceroute6), strings.Join(res.Traceroute6, " | "))
		fmt.Fprintf(w, "  iperf3 h1 -> h3: %.0f Mbit/s, %d retransmits\n", res.IperfMbps, res.IperfRetr)
		fmt.Fprintf(w, "  iperf3 h1 -> h3 (IPv6): %.0f Mbit/s, %d retransmits\n", res.Iperf6Mbps, res.Iperf6Retr)
		var sh []string
		for _, r := range demo.Backends {
			sh = append(sh, fmt.Sprintf("%s %.0f%% (weight %.0f%%)", r, res.Shares[r]*100, res.Weights[r]*100))
		}
		fmt.Fprintf(w, "  back-end shares, %s mode: %s\n", res.Mode, strings.Join(sh, ", "))
		var rt []string
		for _, r := range sortedKeys(res.Routes) {
			rt = append(rt, fmt.Sprintf("%s %d IPv4 and %d IPv6", r, res.Routes[r], res.Routes6[r]))
		}
		fmt.Fprintf(w, "  routes on each back-end: %s\n", strings.Join(rt, ", "))
	})
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// runLargeDemo is msr demo up, down and add-lb of the large lab.
func runLargeDemo(pos []string) error {
	if len(pos) != 1 {
		return cli.Usagef("--size large: msr demo up, down or add-lb")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	w := os.Stderr
	switch pos[0] {
	case "down":
		return demo.DownLarge()
	case "add-lb":
		plan, err := demo.LoadLargePlan()
		if err != nil {
			return err
		}
		start := time.Now()
		if err := demo.AddLargeLB(self, plan); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := demo.WaitLarge(ctx, plan, w); err != nil {
			return err
		}
		fmt.Fprintf(w, "lb%d joined with %d ports in %.1f s: the router has %d external ports\n", plan.LBs, demo.LargePortsPerLB, time.Since(start).Seconds(), len(plan.Ports))
		return nil
	case "up":
	default:
		return cli.Usagef("--size large: msr demo up, down or add-lb")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fmt.Fprintln(w, "bringing up the large lab ...")
	start := time.Now()
	plan, err := demo.UpLarge(self)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "up in %.1f s: %d LBs, %d external ports, %d back-ends; waiting for convergence ...\n", time.Since(start).Seconds(), plan.LBs, len(plan.Ports), demo.LargeBackends)
	wctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	if err := demo.WaitLarge(wctx, plan, w); err != nil {
		return err
	}
	fmt.Fprintf(w, "the large lab is up, %.1f s after start: msr lab exec --lab large h1e0 -- ping 10.16.3.10; msr demo down --size large removes it\n", time.Since(start).Seconds())
	return nil
}
