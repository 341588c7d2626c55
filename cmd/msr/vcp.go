package main

import (
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/msr-router/msr/internal/cli"
	"github.com/msr-router/msr/vcp"
	"github.com/msr-router/msr/vcp/vcpapi"
)

var vcpCommand = command{
	summary: "the virtual control plane: discovery, topology, LB ports and balancing tables",
	usage: `  msr vcp --config FILE.yaml [--standby]     run it (on the interconnect); SIGHUP reloads FILE
  msr vcp --check --config FILE.yaml         check the file and exit (0: good; else its line and why)
  msr vcp status --name NAME [-o json]       elements, LB tables
  msr vcp drain|undrain BACKEND --name NAME  no new flows to a back-end, or again
  (--socket PATH instead of --name)
`,
	run:   runVCP,
	root:  true,
	reads: [][]string{{"status"}},
}

func runVCP(args []string) error {
	fs := flag.NewFlagSet("vcp", flag.ContinueOnError)
	out := cli.AddOutput(fs)
	file := fs.String("config", "", "VCP configuration file")
	name := fs.String("name", "", "VCP name")
	socket := fs.String("socket", "", "API socket")
	standby := fs.Bool("standby", false, "start as the standby VCP (lower VRRP priority)")
	check := fs.Bool("check", false, "check --config and exit")
	pos, _, err := cli.Parse(fs, args)
	if err != nil {
		return err
	}
	if *check {
		return checkConfig(*file, func(f string) error { _, err := vcp.LoadConfig(f); return err })
	}
	if len(pos) == 0 && *file != "" {
		cfg, err := vcp.LoadConfig(*file)
		if err != nil {
			return err
		}
		cfg.AsStandby = *standby
		log, level := newLogger(cfg.Log, cfg.Warnings)
		a, err := vcp.NewAgent(cfg, log)
		if err != nil {
			return err
		}
		// SIGHUP reloads the config, as `msr ctl reload` does.
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		go func() {
			for range hup {
				if res, err := a.Reload(vcp.ReloadOptions{Who: "SIGHUP"}); err != nil {
					log.Error("reload", "err", err)
				} else {
					log.Info("reload", "changes", len(res.Changes))
				}
			}
		}()
		return runAgent("vcp", cfg.Name, endpointsOf(cfg.Socket, cfg.APIListen, cfg.KeyFile, cfg.KeyID, cfg.APISecurity), a, log, level)
	}
	if err := needAgent("vcp", *name, *socket); err != nil {
		return err
	}
	c := vcpapi.Local(*name, *socket)
	switch {
	case len(pos) == 1 && pos[0] == "status":
		s, err := c.Status()
		if err != nil {
			return err
		}
		return out.Print(os.Stdout, s, func(w io.Writer) { writeVCPStatus(w, s) })
	case len(pos) == 2 && (pos[0] == "drain" || pos[0] == "undrain"):
		return c.Drain(pos[1], pos[0] == "drain")
	}
	return cli.Usagef("unknown vcp command %q", strings.Join(pos, " "))
}

func writeVCPStatus(w io.Writer, s *vcpapi.Status) {
	fmt.Fprintf(w, "%s: %s\n", s.Name, s.Role)
	for _, e := range s.Elements {
		busy := ""
		if e.Busy > 0 {
			busy = fmt.Sprintf(", busy %.3f cores", e.Busy)
		}
		if e.LoadFactor > 0 && e.LoadFactor != 1 {
			busy += fmt.Sprintf(", load factor %.2f", e.LoadFactor)
		}
		fmt.Fprintf(w, "%-7s %-10s %s alive %v capacity %d Mbit/s, installed %d, last hello %d ms ago%s\n", e.Role, e.Name, e.MAC, e.Alive, e.Capacity, e.Installed, e.LastHelloMs, busy)
	}
	for _, t := range s.Tables {
		fmt.Fprintf(w, "table of %s: %s generation %d applied %v weights %s\n", t.LB, t.Mode, t.Generation, t.Applied, sortedPairs(t.Weights))
	}
	fmt.Fprintf(w, "DIST frames:")
	for _, k := range slices.Sorted(maps.Keys(s.DIST)) {
		if v := s.DIST[k]; v != 0 || k == "auth" {
			fmt.Fprintf(w, " %s %d", k, v)
		}
	}
	fmt.Fprintln(w)
	for _, peer := range slices.Sorted(maps.Keys(s.PrefixLimitHits)) {
		fmt.Fprintf(w, "BGP peer %s: session shut %d times for max_prefixes\n", peer, s.PrefixLimitHits[peer])
	}
}
