package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/msr-router/msr/internal/cli"
	"github.com/msr-router/msr/router"
	"github.com/msr-router/msr/router/routerapi"
)

var routerCommand = command{
	summary: "the back-end router: XDP forwarding, FIB, slow path, and its agent",
	usage: `  msr router --config FILE.yaml                 run the agent (in the back-end's namespace)
  msr router status --name NAME [-o json]        routes, neighbours, counters
  msr router route list --name NAME [-o json]
  msr router route add PREFIX via GW [GW...] --name NAME
  msr router route del PREFIX --name NAME
  msr router neighbors flush --name NAME         forget every neighbour learned (clear ip arp)
  msr router capacity PPS --name NAME            cap the frames it routes a second (0: no cap)
  (--socket PATH instead of --name)
`,
	run:  runRouter,
	root: true,
}

func runRouter(args []string) error {
	fs := flag.NewFlagSet("router", flag.ContinueOnError)
	out := cli.AddOutput(fs)
	file := fs.String("config", "", "router configuration file")
	name := fs.String("name", "", "router name")
	socket := fs.String("socket", "", "API socket")
	pos, _, err := cli.Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 && *file != "" {
		return runRouterAgent(*file)
	}
	if err := needAgent("router", *name, *socket); err != nil {
		return err
	}
	c := routerapi.Local(*name, *socket)
	switch {
	case len(pos) == 1 && pos[0] == "status":
		s, err := c.Status()
		if err != nil {
			return err
		}
		return out.Print(os.Stdout, s, func(w io.Writer) {
			fmt.Fprintf(w, "router %s: %d routes, %d tbl8 groups; forwarded %d\n", s.Name, s.Routes, s.Tbl8Used, s.Stats.Forwarded)
			if s.Busy > 0 {
				fmt.Fprintf(w, "  data path busy %.3f cores (program run time, sampled 100 ms a second)\n", s.Busy)
			}
			if s.CapacityPPS > 0 || s.CapDrop > 0 {
				fmt.Fprintf(w, "  capacity %s cap_drop %d\n", capacityText(s.CapacityPPS), s.CapDrop)
			}
			fmt.Fprintf(w, "  slow %v\n  drops %v\n  slow path %v\n  neighbours %v\n", s.Stats.Slow, s.Stats.Drops, s.SlowPath, s.Neighbors)
		})
	case len(pos) == 2 && pos[0] == "route" && pos[1] == "list":
		rs, err := c.Routes()
		if err != nil {
			return err
		}
		return out.Print(os.Stdout, rs, func(w io.Writer) {
			for _, r := range rs {
				if r.Port != "" {
					fmt.Fprintf(w, "%s connected %s\n", r.Prefix, r.Port)
				} else {
					fmt.Fprintf(w, "%s via %s (%s)\n", r.Prefix, strings.Join(r.Via, " "), r.From())
				}
			}
		})
	case len(pos) >= 5 && pos[0] == "route" && pos[1] == "add" && pos[3] == "via":
		return c.AddRoute(routerapi.RouteRequest{Prefix: pos[2], Via: pos[4:]})
	case len(pos) == 3 && pos[0] == "route" && pos[1] == "del":
		return c.DeleteRoute(pos[2])
	case len(pos) == 2 && pos[0] == "capacity":
		pps, err := strconv.ParseUint(pos[1], 10, 64)
		if err != nil {
			return cli.Usagef("capacity %q: frames a second, 0 for no cap", pos[1])
		}
		return c.SetCapacity(pps)
	case len(pos) == 2 && pos[0] == "neighbors" && pos[1] == "flush":
		n, err := c.FlushNeighbors()
		if err != nil {
			return err
		}
		fmt.Printf("%d neighbours flushed\n", n)
		return nil
	}
	return cli.Usagef("unknown router command %q", strings.Join(pos, " "))
}

func runRouterAgent(file string) error {
	cfg, err := router.LoadConfig(file)
	if err != nil {
		return err
	}
	log := newLogger(cfg.Warnings)
	a, err := router.NewAgent(cfg, log)
	if err != nil {
		return err
	}
	return runAgent("router", cfg.Name, endpointsOf(cfg.Socket, cfg.APIListen, cfg.KeyFile, cfg.KeyID), a, log)
}
