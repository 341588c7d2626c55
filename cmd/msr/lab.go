package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/msr-router/msr/internal/cli"
	"github.com/msr-router/msr/lab"
)

var labCommand = command{
	summary: "build, inspect and remove lab topologies of namespaces, veths and bridges",
	usage: `  msr lab up FILE.yaml [--keep-going] [-o json]
                                           build the lab; prints its name. A process that ends in
                                           its first second fails it (rolled back) unless --keep-going
  msr lab extend FILE.yaml [-o json]      add the file's hosts and links to the lab it names
                                           (links may end on the lab's switches: new ports)
  msr lab down NAME                        remove everything the lab made
  msr lab status [NAME] [-o json]          hosts, interfaces, addresses, processes
  msr lab list [-o json]                   the labs that are up
  msr lab exec [--lab NAME] HOST -- CMD... run CMD inside HOST; exits with its status
`,
	run:  runLab,
	root: true,
}

func runLab(args []string) error {
	if len(args) == 0 {
		return cli.Usagef("missing lab subcommand")
	}
	fs := flag.NewFlagSet("lab", flag.ContinueOnError)
	out := cli.AddOutput(fs)
	labName := fs.String("lab", "", "lab to act on (default: the only lab up)")
	keepGoing := fs.Bool("keep-going", false, "up: keep the lab up when a process ends in its first second")
	pos, rest, err := cli.Parse(fs, args[1:])
	if err != nil {
		return err
	}
	switch args[0] {
	case "up":
		if len(pos) != 1 {
			return cli.Usagef("lab up takes one FILE.yaml")
		}
		spec, err := lab.LoadFile(pos[0])
		if err != nil {
			return err
		}
		spec.KeepGoing = *keepGoing
		st, err := lab.Up(spec)
		if err != nil {
			return err
		}
		for _, f := range st.Failed {
			fmt.Fprintln(os.Stderr, "msr lab up: warning:", f)
		}
		return out.Print(os.Stdout, st, func(w io.Writer) { fmt.Fprintln(w, st.Name) })
	case "extend":
		if len(pos) != 1 {
			return cli.Usagef("lab extend takes one FILE.yaml")
		}
		spec, err := lab.LoadFile(pos[0])
		if err != nil {
			return err
		}
		st, err := lab.Extend(spec)
		if err != nil {
			return err
		}
		return out.Print(os.Stdout, st, func(w io.Writer) { fmt.Fprintln(w, st.Name) })
	case "down":
		if len(pos) != 1 {
			return cli.Usagef("lab down takes one lab NAME")
		}
		return lab.Down(pos[0])
	case "status":
		name, err := oneLab(pos, *labName)
		if err != nil {
			return err
		}
		st, err := lab.GetStatus(name)
		if err != nil {
			return err
		}
		return out.Print(os.Stdout, st, st.WriteText)
	case "list":
		names, err := lab.Labs()
		if err != nil {
			return err
		}
		if names == nil {
			names = []string{}
		}
		return out.Print(os.Stdout, names, func(w io.Writer) {
			for _, n := range names {
				fmt.Fprintln(w, n)
			}
		})
	case "exec":
		if len(pos) != 1 || len(rest) == 0 {
			return cli.Usagef("lab exec takes HOST -- CMD ARGS...")
		}
		name, err := oneLab(nil, *labName)
		if err != nil {
			return err
		}
		code, err := lab.Exec(name, pos[0], rest, os.Stdin, os.Stdout, os.Stderr)
		if err != nil {
			return err
		}
		os.Exit(code)
	}
	return cli.Usagef("unknown lab subcommand %q", args[0])
}

// oneLab picks the lab a command acts on: named, or the only one up.
func oneLab(pos []string, flagName string) (string, error) {
	switch {
	case len(pos) > 1:
		return "", cli.Usagef("name one lab")
	case len(pos) == 1:
		return pos[0], nil
	case flagName != "":
		return flagName, nil
	}
	return lab.Only()
}
