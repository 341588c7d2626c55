package main

import (
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/msr-router/msr/internal/cli"
	"github.com/msr-router/msr/lb"
	"github.com/msr-router/msr/lb/lbapi"
)

var lbCommand = command{
	summary: "the front-end load balancer: XDP data path and its agent",
	usage: `  msr lb --config FILE.yaml        run the agent (in the LB's network namespace)
  msr lb --check --config FILE.yaml  check the file and exit (0: good; else its line and why)
  msr lb status --name NAME [-o json] | --socket PATH
                                    ports, counters, back-ends, table
  msr lb remove --config FILE.yaml  detach the data path and delete its pins
`,
	run:   runLB,
	root:  true,
	reads: [][]string{{"status"}},
}

func runLB(args []string) error {
	fs := flag.NewFlagSet("lb", flag.ContinueOnError)
	out := cli.AddOutput(fs)
	file := fs.String("config", "", "LB configuration file")
	name := fs.String("name", "", "LB name (status)")
	socket := fs.String("socket", "", "API socket (status)")
	check := fs.Bool("check", false, "check --config and exit")
	force := fs.Bool("force", false, "load the data path over maps a later build pinned (a downgrade), starting empty those it cannot migrate")
	pos, _, err := cli.Parse(fs, args)
	if err != nil {
		return err
	}
	switch {
	case *check:
		return checkConfig(*file, func(f string) error { _, err := lb.LoadConfig(f); return err })
	case len(pos) == 1 && pos[0] == "status":
		if err := needAgent("lb", *name, *socket); err != nil {
			return err
		}
		s, err := lbapi.Local(*name, *socket).Status()
		if err != nil {
			return err
		}
		return out.Print(os.Stdout, s, func(w io.Writer) { writeLBStatus(w, s) })
	case len(pos) == 1 && pos[0] == "remove":
		cfg, err := lb.LoadConfig(*file)
		if err != nil {
			return err
		}
		return os.RemoveAll(cfg.PinDir)
	case len(pos) == 0 && *file != "":
		return runLBAgent(*file, *force)
	}
	return cli.Usagef("run msr lb --config FILE.yaml, or msr lb status")
}

func runLBAgent(file string, force bool) error {
	cfg, err := lb.LoadConfig(file)
	if err != nil {
		return err
	}
	cfg.Force = force
	log, level := newLogger(cfg.Log, cfg.Warnings)
	a, err := lb.NewAgent(cfg, log)
	if err != nil {
		return err
	}
	rekeyOnHUP(a, log)
	return runAgent("lb", cfg.Name, endpointsOf(cfg.Socket, cfg.APIListen, cfg.KeyFile, cfg.KeyID, cfg.APISecurity), a, log, level)
}

func writeLBStatus(w io.Writer, s *lbapi.Status) {
	fmt.Fprintf(w, "lb %s (id %#x) vcp %s\n", s.Name, s.ID, s.VCPMAC)
	fmt.Fprintf(w, "  inside: %s (infra_dropped %d)\n", orNone(strings.Join(s.Infrastructure, ", ")), s.InfraDropped)
	var peers []string
	for _, p := range s.Peers {
		gtsm := ""
		if p.GTSM {
			gtsm = " gtsm"
		}
		peers = append(peers, fmt.Sprintf("%s on %s%s (passed %d, dropped %d, gtsm_dropped %d)", p.Addr, p.Port, gtsm, p.Passed, p.Dropped, p.GTSMDropped))
	}
	fmt.Fprintf(w, "  peers: %s (gtsm_dropped %d)\n", orNone(strings.Join(peers, "; ")), s.GTSMDropped)
	if s.CapacityPPS > 0 || s.CapDrop > 0 {
		fmt.Fprintf(w, "  capacity %s cap_drop %d\n", capacityText(s.CapacityPPS), s.CapDrop)
	}
	if f := s.SFlow; f != nil {
		if x := f.Export; x != nil {
			fmt.Fprintf(w, "  sflow: from %s, to %v as agent %s, rates %v\n", x.From, x.Collectors, x.AgentAddress, x.Rates)
		}
		fmt.Fprintf(w, "  sflow: %d samples, %d lost, %d malformed; %d datagrams sent, %d failed; %d exports refused\n", f.Samples, f.Lost, f.Malformed, f.Datagrams, f.SendErrors, f.Refused)
		fmt.Fprintf(w, "  sflow routes: %d asked of the back-ends, %d failed, %d held\n", f.Routes.Lookups, f.Routes.Failures, f.Routes.Cached)
		if x := f.IPFIX; x != nil {
			fmt.Fprintf(w, "  ipfix: to %v, %d flows, %d records in %d messages, %d failed, %d samples past the flows held\n", f.Export.IPFIX.Collectors, x.Flows, x.Records, x.Messages, x.SendErrors, x.Overflow)
		}
	}
	for _, p := range s.Ports {
		capText := ""
		if p.CapacityPPS > 0 {
			capText = " capacity " + capacityText(p.CapacityPPS)
		}
		fmt.Fprintf(w, "  port %-8s %-8s %s vlan %d %s rx %d tx %d%s\n", p.Name, p.Role, p.MAC, p.VLAN, p.Address, p.Stats.RxPackets, p.Stats.TxPackets, capText)
		fmt.Fprintf(w, "      link %s\n", linkText(p.Link.Up, p.Link.AdminUp, p.Link.Carrier, p.Link.SpeedMbps, p.Link.FullDuplex, p.Link.MTU))
		for _, k := range slices.Sorted(maps.Keys(p.Stats.Modules)) {
			if v := p.Stats.Modules[k]; v > 0 {
				fmt.Fprintf(w, "      %-12s %d\n", k, v)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(p.Stats.Drops)) {
			if v := p.Stats.Drops[k]; v > 0 {
				fmt.Fprintf(w, "      drop %-12s %d\n", k, v)
			}
		}
	}
	for _, b := range s.Backends {
		fmt.Fprintf(w, "  backend %s %-8s alive %v draining %v last hello %d ms ago\n", b.MAC, b.Name, b.Alive, b.Draining, b.LastHelloMs)
	}
	fmt.Fprintf(w, "  table %s generation %d slots %d shares %s\n", s.Table.Mode, s.Table.Generation, s.Table.Slots, orNone(sortedPairs(s.Table.Shares)))
	how := "fixed"
	if s.FlowletGapAuto {
		how = "auto"
	}
	fmt.Fprintf(w, "  flowlet gap %d µs (%s)\n", s.FlowletGapUs, how)
	if p := s.Paths; p != nil {
		fmt.Fprintf(w, "  paths: probes sent %d returned %d lost %d; spread p50 %d p99 %d max %d µs over %d rounds\n",
			p.Sent, p.Returned, p.Lost, p.SpreadP50Us, p.SpreadP99Us, p.SpreadMaxUs, p.Rounds)
		for _, b := range p.Paths {
			fmt.Fprintf(w, "    %s port %d rtt p50 %d p99 %d µs lost %d\n", b.Backend, b.PortIndex, b.RTTP50Us, b.RTTP99Us, b.Lost)
		}
	}
	if len(s.Police) > 0 {
		fmt.Fprintf(w, "  police (to the router)   pps  per-source  burst      passed  dropped: source    class\n")
	}
	for _, c := range s.Police {
		fmt.Fprintf(w, "    %-6s %16s %11s %6d %11d %16d %8d\n", c.Class, rateText(c.PPS), rateText(c.PerSourcePPS), c.Burst, c.Passed, c.DroppedSource, c.DroppedClass)
	}
}

// rateText is a policing rate as status shows it.
func rateText(pps uint64) string {
	if pps == 0 {
		return "unlimited"
	}
	return fmt.Sprint(pps)
}

// capacityText is an element's or a port's capacity_pps as status shows it.
func capacityText(pps uint64) string {
	if pps == 0 {
		return "unlimited"
	}
	return fmt.Sprintf("%d pps", pps)
}

// linkText is a port's state as a line: "up 10 Gb/s full-duplex mtu 1500",
// or down and why (administratively, or no carrier).
func linkText(up, adminUp, carrier bool, speedMbps uint32, fullDuplex bool, mtu int) string {
	state := "up"
	switch {
	case !adminUp:
		state = "down (administratively)"
	case !carrier:
		state = "down (no carrier)"
	case !up:
		state = "down"
	}
	speed := "speed unknown"
	if speedMbps > 0 {
		speed = speedText(speedMbps)
	}
	duplex := "half-duplex"
	if fullDuplex {
		duplex = "full-duplex"
	}
	return fmt.Sprintf("%s %s %s mtu %d", state, speed, duplex, mtu)
}

// speedText is a link speed as operators write it: 100 Mb/s, 10 Gb/s.
func speedText(mbps uint32) string {
	if mbps >= 1000 && mbps%1000 == 0 {
		return fmt.Sprintf("%d Gb/s", mbps/1000)
	}
	return fmt.Sprintf("%d Mb/s", mbps)
}
