// Command msr is the multi-stage software router: one binary, one
// subcommand per role. Each subcommand is a thin client of its package.
package main

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/msr-router/msr/internal/cli"
)

// command is one subcommand: its one-line summary, usage, and body.
type command struct {
	summary string
	usage   string
	run     func(args []string) error
	// root says the command cannot work without root.
	root bool
}

var commands = map[string]command{
	"lab":    labCommand,
	"bench":  benchCommand,
	"lb":     lbCommand,
	"router": routerCommand,
	"vcp":    vcpCommand,
	"ctl":    ctlCommand,
	"demo":   demoCommand,
	"sim":    simCommand,
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		if len(os.Args) < 2 {
			os.Exit(2)
		}
		return
	}
	c, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "msr: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if c.root && os.Geteuid() != 0 {
		cli.Fatal(fmt.Errorf("msr %s needs root: it makes network namespaces and loads BPF programs; run it with sudo", os.Args[1]))
	}
	if err := c.run(os.Args[2:]); err != nil {
		if errors.Is(err, cli.ErrUsage) {
			fmt.Fprintf(os.Stderr, "msr %s: %v\nusage:\n%s", os.Args[1], strings.TrimPrefix(err.Error(), "usage: "), c.usage)
			os.Exit(2)
		}
		cli.Fatal(err)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "msr: the multi-stage software router\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(os.Stderr, "\nRun msr COMMAND -h for a command's usage.")
}
