// Command msr is the multi-stage software router: one binary, one
// subcommand per role. Each subcommand is a thin client of its package.
package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"sort"
	"strings"

	"github.com/msr-router/msr/internal/cli"
	"github.com/msr-router/msr/internal/metrics"
)

// command is one subcommand: its one-line summary, usage, and body.
type command struct {
	summary string
	usage   string
	run     func(args []string) error
	// root says the command cannot work without root, but for its
	// subcommands in reads: those ask the agent's API on its socket, which
	// answers reads to every local user.
	root  bool
	reads [][]string
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
	"cert":   certCommand,
	"key":    keyCommand,
	"soak":   soakCommand,
}

// isHelp says whether an argument asks for help.
func isHelp(a string) bool { return a == "-h" || a == "-help" || a == "--help" }

func main() {
	metrics.Version, metrics.Commit = version, commit
	switch {
	case len(os.Args) < 2:
		usage(os.Stderr)
		os.Exit(2)
	case isHelp(os.Args[1]) || (os.Args[1] == "help" && len(os.Args) == 2):
		usage(os.Stdout)
		return
	case os.Args[1] == "help":
		c, ok := commands[os.Args[2]]
		if !ok {
			fmt.Fprintf(os.Stderr, "msr: unknown command %q\n", os.Args[2])
			usage(os.Stderr)
			os.Exit(2)
		}
		fmt.Printf("msr %s: %s\nusage:\n%s", os.Args[2], c.summary, c.usage)
		return
	case os.Args[1] == "version" || os.Args[1] == "--version":
		fmt.Println(versionText())
		fmt.Println(layoutsText())
		return
	case os.Args[1] == "completion":
		if err := runCompletion(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "msr:", err)
			os.Exit(2)
		}
		return
	case os.Args[1] == "__complete": // the completion script's question
		for _, w := range completions(os.Args[2:]) {
			fmt.Println(w)
		}
		return
	}
	c, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "msr: unknown command %q\n", os.Args[1])
		usage(os.Stderr)
		os.Exit(2)
	}
	if len(os.Args) > 2 && isHelp(os.Args[2]) {
		fmt.Printf("msr %s: %s\nusage:\n%s", os.Args[1], c.summary, c.usage)
		return
	}
	if c.root && os.Geteuid() != 0 && !readOnly(c, os.Args[2:]) {
		cli.Fatal(fmt.Errorf("msr %s needs root: it makes network namespaces and loads BPF programs; run it with sudo", os.Args[1]))
	}
	err := c.run(os.Args[2:])
	var help *cli.HelpError
	if errors.As(err, &help) {
		fmt.Printf("msr %s: %s\nusage:\n%sflags:\n", os.Args[1], c.summary, c.usage)
		help.PrintFlags(os.Stdout)
		return
	}
	if err != nil {
		if errors.Is(err, cli.ErrUsage) {
			fmt.Fprintf(os.Stderr, "msr %s: %v\nusage:\n%s", os.Args[1], strings.TrimPrefix(err.Error(), "usage: "), c.usage)
			os.Exit(2)
		}
		cli.Fatal(err)
	}
}

// readOnly says whether args ask c for nothing the kernel keeps from a
// user: help, --check (a file read, nothing started), or one of c's
// reads (a status query on the agent's socket).
func readOnly(c command, args []string) bool {
	var words []string
	for i, a := range args {
		switch {
		case isHelp(a) || a == "--check" || a == "-check":
			return true
		case strings.HasPrefix(a, "-"):
		case i > 0 && strings.HasPrefix(args[i-1], "-") && !strings.Contains(args[i-1], "=") && !boolFlags[strings.TrimLeft(args[i-1], "-")]:
			// the value of the flag before it
		default:
			words = append(words, a)
		}
	}
	return slices.ContainsFunc(c.reads, func(r []string) bool { return slices.Equal(r, words) })
}

// boolFlags are the agents' flags that take no value.
var boolFlags = map[string]bool{"check": true, "standby": true}

func usage(w io.Writer) {
	fmt.Fprintln(w, "msr: the multi-stage software router\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(w, "  %-8s %s\n  %-8s %s\n  %-8s %s\n", "help", "msr help COMMAND: a command's usage", "version", "the version and the commit it was built from",
		"completion", "msr completion bash: a bash completion script (msr completion bash > /usr/share/bash-completion/completions/msr)")
	fmt.Fprintln(w, "\nRun msr COMMAND -h for a command's usage and flags.")
}

// version and commit are set at link time (make build: -ldflags "-X
// main.version=... -X main.commit=..."), else taken from the build
// information (the module's version, the VCS revision Go stamps).
var version, commit = "", ""

// versionText is the version and the commit the binary was built from.
func versionText() string {
	v, c, dirty := version, commit, ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if c == "" {
					c = s.Value
				}
			case "vcs.modified":
				if s.Value == "true" {
					dirty = " (modified)"
				}
			}
		}
		return fmt.Sprintf("msr %s commit %s%s %s", v, cmp.Or(c, "unknown"), dirty, bi.GoVersion)
	}
	return fmt.Sprintf("msr %s commit %s", v, cmp.Or(c, "unknown"))
}
