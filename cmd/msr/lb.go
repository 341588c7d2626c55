package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/msr-router/msr/internal/cli"
	"github.com/msr-router/msr/lb"
	"github.com/msr-router/msr/lb/lbapi"
)

var lbCommand = command{
	summary: "the front-end load balancer: XDP data path and its agent",
	usage: `  msr lb --config FILE.yaml        run the agent (in the LB's network namespace)
  msr lb status --name NAME [-o json] | --socket PATH
                                    ports, counters, back-ends, table
  msr lb remove --config FILE.yaml  detach the data path and delete its pins
`,
	run:  runLB,
	root: true,
}

func runLB(args []string) error {
	fs := flag.NewFlagSet("lb", flag.ContinueOnError)
	out := cli.AddOutput(fs)
	file := fs.String("config", "", "LB configuration file")
	name := fs.String("name", "", "LB name (status)")
	socket := fs.String("socket", "", "API socket (status)")
	pos, _, err := cli.Parse(fs, args)
	if err != nil {
		return err
	}
	switch {
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
		return runLBAgent(*file)
	}
	return cli.Usagef("run msr lb --config FILE.yaml, or msr lb status")
}

func runLBAgent(file string) error {
	cfg, err := lb.LoadConfig(file)
	if err != nil {
		return err
	}
	log := newLogger(cfg.Warnings)
	a, err := lb.NewAgent(cfg, log)
	if err != nil {
		return err
	}
	return runAgent("lb", cfg.Name, endpointsOf(cfg.Socket, cfg.APIListen, cfg.KeyFile, cfg.KeyID), a, log)
}

func writeLBStatus(w io.Writer, s *lbapi.Status) {
	fmt.Fprintf(w, "lb %s (id %#x) vcp %s\n", s.Name, s.ID, s.VCPMAC)
	if s.CapacityPPS > 0 || s.CapDrop > 0 {
		fmt.Fprintf(w, "  capacity %s cap_drop %d\n", capacityText(s.CapacityPPS), s.CapDrop)
	}
	for _, p := range s.Ports {
		capText := ""
		if p.CapacityPPS > 0 {
			capText = " capacity " + capacityText(p.CapacityPPS)
		}
		fmt.Fprintf(w, "  port %-8s %-8s %s vlan %d %s rx %d tx %d%s\n", p.Name, p.Role, p.MAC, p.VLAN, p.Address, p.Stats.RxPackets, p.Stats.TxPackets, capText)
		for k, v := range p.Stats.Modules {
			if v > 0 {
				fmt.Fprintf(w, "      %-12s %d\n", k, v)
			}
		}
		for k, v := range p.Stats.Drops {
			if v > 0 {
				fmt.Fprintf(w, "      drop %-12s %d\n", k, v)
			}
		}
	}
	for _, b := range s.Backends {
		fmt.Fprintf(w, "  backend %s %-8s alive %v draining %v last hello %d ms ago\n", b.MAC, b.Name, b.Alive, b.Draining, b.LastHelloMs)
	}
	fmt.Fprintf(w, "  table %s generation %d slots %d shares %v\n", s.Table.Mode, s.Table.Generation, s.Table.Slots, s.Table.Shares)
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
}

// capacityText is an element's or a port's capacity_pps as status shows it.
func capacityText(pps uint64) string {
	if pps == 0 {
		return "unlimited"
	}
	return fmt.Sprintf("%d pps", pps)
}
