package main

import (
	"flag"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/msr-router/msr/internal/cli"
	"github.com/msr-router/msr/router"
	"github.com/msr-router/msr/router/routerapi"
)

var routerCommand = command{
	summary: "the back-end router: XDP forwarding, FIB, slow path, and its agent",
	usage: `  msr router --config FILE.yaml                 run the agent (in the back-end's namespace)
  msr router --check --config FILE.yaml         check the file and exit (0: good; else its line and why)
  msr router status --name NAME [-o json]        routes, neighbours, counters
  msr router route list --name NAME [-o json]
  msr router route add PREFIX via GW [GW...] --name NAME
  msr router route del PREFIX --name NAME
  msr router neighbors flush --name NAME         forget every neighbour learned (clear ip arp)
  msr router capacity PPS --name NAME            cap the frames it routes a second (0: no cap)
  (--socket PATH instead of --name)
`,
	run:   runRouter,
	root:  true,
	reads: [][]string{{"status"}, {"route", "list"}},
}

func runRouter(args []string) error {
	fs := flag.NewFlagSet("router", flag.ContinueOnError)
	out := cli.AddOutput(fs)
	file := fs.String("config", "", "router configuration file")
	name := fs.String("name", "", "router name")
	socket := fs.String("socket", "", "API socket")
	check := fs.Bool("check", false, "check --config and exit")
	force := fs.Bool("force", false, "load the data path over maps a later build pinned (a downgrade), starting empty those it cannot migrate")
	pos, _, err := cli.Parse(fs, args)
	if err != nil {
		return err
	}
	if *check {
		return checkConfig(*file, func(f string) error { _, err := router.LoadConfig(f); return err })
	}
	if len(pos) == 0 && *file != "" {
		return runRouterAgent(*file, *force)
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
			fmt.Fprintf(w, "router %s: %d routes, %d tbl8 groups; %d IPv6 routes in %d groups, %d of %d lines; forwarded %d\n",
				s.Name, s.Routes, s.Tbl8Used, s.Routes6, s.FIB6Groups, s.FIB6LinesUsed, s.FIB6Lines, s.Stats.Forwarded)
			if s.Busy > 0 {
				fmt.Fprintf(w, "  data path busy %.3f cores (program run time, sampled 100 ms a second)\n", s.Busy)
			}
			m := s.Memory
			fmt.Fprintf(w, "  memory: resident %.1f MB; RIB %.1f MB, Go heap %.1f MB, BPF maps %.1f MB (the FIBs mmapped: resident as touched)\n",
				float64(m.RSSBytes)/1e6, float64(m.RIBBytes)/1e6, float64(m.HeapBytes)/1e6, float64(m.MapsBytes)/1e6)
			if s.CapacityPPS > 0 || s.CapDrop > 0 {
				fmt.Fprintf(w, "  capacity %s cap_drop %d\n", capacityText(s.CapacityPPS), s.CapDrop)
			}
			ready := "ready"
			if !s.Ready {
				ready = "not ready (no flows: it waits for its ports or its RIB feed's table)"
			}
			fmt.Fprintf(w, "  %s; ports %s\n", ready, orNone(strings.Join(s.Ports, ", ")))
			if r := s.RIB; r != nil {
				fmt.Fprintf(w, "  RIB feed %s %s: %d prefixes, %d paths (%d stale), %d updates, add-path %v, graceful restart %v\n",
					r.Neighbor, r.State, r.Prefixes, r.Paths, r.Stale, r.Updates, r.AddPath, r.GR)
				if r.Refused > 0 {
					fmt.Fprintf(w, "  RIB routes the FIB refused: %d (the agent's log says why; a full IPv6 pool: raise fib6_lines)\n", r.Refused)
				}
			}
			for i, rule := range s.ACL {
				var hits uint64
				if i < len(s.Stats.ACLPermit) && i < len(s.Stats.ACLDeny) {
					hits = s.Stats.ACLPermit[i] + s.Stats.ACLDeny[i]
				}
				fmt.Fprintf(w, "  acl %d: %s (%d hits)\n", i, rule, hits)
			}
			fmt.Fprintf(w, "  slow: %s\n  slow dropped (over its rate): %s\n  drops: %s\n  slow path: %s\n", orNone(sortedPairs(s.Stats.Slow)),
				orNone(sortedPairs(s.Stats.SlowDropped)), orNone(sortedPairs(s.Stats.Drops)), orNone(sortedPairs(s.SlowPath)))
			var rates []string
			for _, k := range slices.Sorted(maps.Keys(s.SlowRates)) {
				rates = append(rates, fmt.Sprintf("%s %d/s burst %d", k, s.SlowRates[k].PPS, s.SlowRates[k].Burst))
			}
			fmt.Fprintf(w, "  slow path rates: %s\n  inside: %s (infra_dropped %d)\n", orNone(strings.Join(rates, ", ")), orNone(strings.Join(s.Infrastructure, ", ")), s.InfraDropped)
			for _, k := range slices.Sorted(maps.Keys(s.Neighbors)) {
				fmt.Fprintf(w, "  neighbour %s at %s\n", k, s.Neighbors[k])
			}
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

func runRouterAgent(file string, force bool) error {
	cfg, err := router.LoadConfig(file)
	if err != nil {
		return err
	}
	cfg.Force = force
	log, level := newLogger(cfg.Log, cfg.Warnings)
	a, err := router.NewAgent(cfg, log)
	if err != nil {
		return err
	}
	rekeyOnHUP(a, log)
	// A back-end configured by the VCP (no ports in its file) serves its
	// API where the VCP looks for it unless its file says, when it has
	// TLS and tokens for it (or is told it may go without).
	listen := cfg.APIListen
	if !listen.IsValid() && len(cfg.Ports) == 0 && a.HostIP().IsValid() {
		if cfg.APISecured() || cfg.APIInsecure {
			listen = netip.AddrPortFrom(a.HostIP(), routerapi.DefaultPort)
		} else {
			log.Warn("no api_security: the API answers on the local socket only, and the VCP's console does not reach this back-end")
		}
	}
	return runAgent("router", cfg.Name, endpointsOf(cfg.Socket, listen, cfg.KeyFile, cfg.KeyID, cfg.APISecurity), a, log, level)
}
