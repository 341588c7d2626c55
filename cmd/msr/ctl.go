package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/api"
	"github.com/msr-router/msr/internal/cli"
	"github.com/msr-router/msr/lb/lbapi"
	"github.com/msr-router/msr/vcp/vcpapi"
)

var ctlCommand = command{
	summary: "the router's console: one router, asked through its VCP",
	usage: `  msr ctl [--api ADDR:PORT | --name VCP] [--key-file FILE] [-o json] COMMAND
    status                         the VCP's role, the elements, the tables, DIST counters
    elements                       every LB and back-end: alive, capacity, installed
    ports                          the router's ports and counters, and the sum of the external ones
    tables                         every LB's balancing table
    table LB                       one LB's installed table, slot by slot
    routes                         route count, protocols, each back-end's install state
    route ADDR                     the routes for ADDR in the suite and in every back-end's FIB
    drain|undrain BACKEND          no new flows to a back-end, or again
    weight BACKEND MBPS            a back-end's capacity (its weight); 0: the configured one
    reload                         read the router's config again, apply and say what changed
    element ELEMENT [METHOD PATH [JSON]]   relay a request to one element's API (default GET /status)
  --api is the VCP's api_listen on the management network (default $MSR_API);
  --name its local socket. Changes over --api need the router's DIST key file.
`,
	run: runCtl,
}

func runCtl(args []string) error {
	fs := flag.NewFlagSet("ctl", flag.ContinueOnError)
	out := cli.AddOutput(fs)
	addr := fs.String("api", os.Getenv("MSR_API"), "the VCP's management API, ADDR:PORT")
	name := fs.String("name", "", "the VCP's name (local socket)")
	keyFile := fs.String("key-file", os.Getenv("MSR_KEY_FILE"), "the router's DIST key (for changes over --api)")
	keyID := fs.Uint("key-id", 1, "the key's id")
	pos, _, err := cli.Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return cli.Usagef("which command?")
	}
	var c *vcpapi.Client
	switch {
	case *name != "":
		c = vcpapi.Local(*name, "")
	case *addr != "":
		token := ""
		if *keyFile != "" {
			key, err := dist.ReadKeyFile(*keyFile, uint8(*keyID))
			if err != nil {
				return err
			}
			token = api.Token(key.Secret)
		}
		c = vcpapi.New(api.NewTCPClient(*addr, token, "the VCP at "+*addr))
	default:
		return cli.Usagef("where is the VCP? --api ADDR:PORT (or $MSR_API), or --name")
	}
	cmd, ok := ctlCommands[pos[0]]
	if !ok || len(pos)-1 < cmd.args || (!cmd.more && len(pos)-1 > cmd.args) {
		return cli.Usagef("unknown ctl command %q", strings.Join(pos, " "))
	}
	return cmd.run(&console{c: c, out: *out}, pos[1:])
}

// console is one `msr ctl` command's client and output.
type console struct {
	c   *vcpapi.Client
	out cli.Output
}

// A consoleCommand takes args arguments (at least, with more).
type consoleCommand struct {
	args int
	more bool
	run  func(k *console, args []string) error
}

var ctlCommands = map[string]consoleCommand{
	"status":   {0, false, (*console).status},
	"elements": {0, false, (*console).elements},
	"ports":    {0, false, (*console).ports},
	"tables":   {0, false, (*console).tables},
	"table":    {1, false, (*console).table},
	"routes":   {0, false, (*console).routes},
	"route":    {1, false, (*console).route},
	"drain":    {1, false, func(k *console, args []string) error { return k.drain(args[0], true) }},
	"undrain":  {1, false, func(k *console, args []string) error { return k.drain(args[0], false) }},
	"weight":   {2, false, (*console).weight},
	"reload":   {0, false, (*console).reload},
	"element":  {1, true, (*console).element},
}

// print writes v as JSON with -o json, or as text.
func (k *console) print(v any, text func(io.Writer)) error { return k.out.Print(os.Stdout, v, text) }

func (k *console) status(_ []string) error {
	s, err := k.c.Status()
	if err != nil {
		return err
	}
	return k.print(s, func(w io.Writer) { writeVCPStatus(w, s) })
}

func (k *console) elements(_ []string) error {
	es, err := k.c.Elements()
	if err != nil {
		return err
	}
	return k.print(es, func(w io.Writer) {
		fmt.Fprintf(w, "%-7s %-10s %-18s %-17s %-6s %-8s %s\n", "ROLE", "NAME", "ID", "MAC", "ALIVE", "MBIT/S", "INSTALLED")
		for _, e := range es {
			alive := fmt.Sprint(e.Alive)
			if e.Drained {
				alive += ",drained"
			}
			fmt.Fprintf(w, "%-7s %-10s %-18s %-17s %-6s %-8d %d\n", e.Role, e.Name, e.ID, e.MAC, alive, e.Capacity, e.Installed)
		}
	})
}

func (k *console) ports(_ []string) error {
	v, err := k.c.Ports()
	if err != nil {
		return err
	}
	return k.print(v, func(w io.Writer) {
		fmt.Fprintf(w, "%-12s %-8s %-5s %-18s %-4s %6s %12s %12s %12s\n", "PORT", "ROLE", "VLAN", "ADDRESS", "UP", "MTU", "RX PACKETS", "TX PACKETS", "RX DROPPED")
		for _, p := range v.Ports {
			fmt.Fprintf(w, "%-12s %-8s %-5d %-18s %-4v %6d %12d %12d %12d\n", p.Name, p.Role, p.VLAN, p.Address, p.Up, p.MTU, p.RxPackets, p.TxPackets, p.RxDropped)
		}
		e := v.External
		fmt.Fprintf(w, "the router (external ports): rx %d packets %d bytes, tx %d packets %d bytes, dropped %d\n", e.RxPackets, e.RxBytes, e.TxPackets, e.TxBytes, e.RxDropped)
	})
}

func (k *console) tables(_ []string) error {
	ts, err := k.c.Tables()
	if err != nil {
		return err
	}
	return k.print(ts, func(w io.Writer) {
		for _, t := range ts {
			fmt.Fprintf(w, "%s: %s, generation %d, applied %v, weights %s\n", t.LB, t.Mode, t.Generation, t.Applied, sortedPairs(t.Weights))
		}
	})
}

// table is one LB's installed table, asked through the VCP's relay.
func (k *console) table(args []string) error {
	t, err := lbapi.New(k.c.Element(args[0])).Table()
	if err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	return k.print(t, func(w io.Writer) {
		shares := map[string]int{}
		for _, mac := range t.Slots {
			shares[mac]++
		}
		fmt.Fprintf(w, "%s: %s, generation %d, %d slots, slots per back-end %s\n", args[0], t.Mode, t.Generation, len(t.Slots), sortedPairs(shares))
		for i, mac := range t.Slots {
			fmt.Fprintf(w, "  %4d %s\n", i, mac)
		}
	})
}

func (k *console) routes(_ []string) error {
	v, err := k.c.Routes()
	if err != nil {
		return err
	}
	return k.print(v, func(w io.Writer) {
		fmt.Fprintf(w, "%d networks in the routing suite\n", v.Networks)
		for _, p := range v.Protocols {
			if p.Proto == "BGP" || p.Proto == "OSPF" || p.Proto == "Static" {
				fmt.Fprintf(w, "  %-10s %-6s %-6s %-12s imported %d exported %d\n", p.Name, p.Proto, p.State, p.Info, p.Imported, p.Exported)
			}
		}
		for _, b := range v.Backends {
			fmt.Fprintf(w, "back-end %-6s alive %-5v FIB %d routes; RIB feed %s, %d routes sent\n", b.Name, b.Alive, b.Installed, orNone(b.Session), b.Exported)
		}
	})
}

func (k *console) route(args []string) error {
	v, err := k.c.Lookup(args[0])
	if err != nil {
		return err
	}
	return k.print(v, func(w io.Writer) {
		fmt.Fprintf(w, "routes for %s\n  suite:\n", v.Addr)
		for _, r := range v.Suite {
			best := " "
			if r.Best {
				best = "*"
			}
			fmt.Fprintf(w, "   %s %-18s from %-10s via %s%s\n", best, r.Prefix, r.Protocol, strings.Join(r.Via, ","), r.Dev)
		}
		for _, b := range v.Backends {
			fmt.Fprintf(w, "  %s:", b.Name)
			switch {
			case b.Error != "":
				fmt.Fprintf(w, " unknown (%s)", b.Error)
			case len(b.Routes) == 0:
				fmt.Fprint(w, " no route")
			}
			for _, r := range b.Routes {
				fmt.Fprintf(w, " %s via %s%s (%s)", r.Prefix, strings.Join(r.Via, ","), r.Port, r.From())
			}
			fmt.Fprintln(w)
		}
	})
}

func (k *console) drain(name string, drain bool) error {
	if err := k.c.Drain(name, drain); err != nil {
		return err
	}
	op := map[bool]string{true: "drain", false: "undrain"}[drain]
	return k.print(map[string]string{op: name}, func(w io.Writer) { fmt.Fprintln(w, op+"ed "+name) })
}

func (k *console) weight(args []string) error {
	mbps, err := strconv.ParseUint(args[1], 10, 32)
	if err != nil {
		return cli.Usagef("weight %s %q: a capacity in Mbit/s, such as 1000 (0: the configured one)", args[0], args[1])
	}
	if err := k.c.Weight(args[0], uint32(mbps)); err != nil {
		return err
	}
	return k.print(map[string]any{"name": args[0], "capacity_mbps": mbps}, func(w io.Writer) {
		fmt.Fprintf(w, "%s: capacity %d Mbit/s\n", args[0], mbps)
	})
}

func (k *console) reload(_ []string) error {
	v, err := k.c.Reload()
	if err != nil {
		return err
	}
	return k.print(v, func(w io.Writer) {
		if len(v.Changes) == 0 {
			fmt.Fprintln(w, "no change")
		}
		for _, c := range v.Changes {
			fmt.Fprintln(w, c)
		}
	})
}

// element relays a request to one element's own API: the raw escape
// hatch, for what no named command asks.
func (k *console) element(args []string) error {
	// Every element answers its status at the same path.
	method, path, body := "GET", lbapi.PathStatus, []byte(nil)
	switch len(args) {
	case 1:
	case 3, 4:
		method, path = strings.ToUpper(args[1]), args[2]
		if len(args) == 4 {
			body = []byte(args[3])
		}
	default:
		return cli.Usagef("element ELEMENT [METHOD PATH [JSON]]")
	}
	status, answer, err := k.c.Relay(args[0], method, path, body)
	if err != nil {
		return err
	}
	if status != 200 {
		var e struct{ Error string }
		json.Unmarshal(answer, &e)
		return fmt.Errorf("%s: %s", args[0], orNone(e.Error))
	}
	var v any
	if err := json.Unmarshal(answer, &v); err != nil {
		return fmt.Errorf("%s answered something other than JSON: %.100s", args[0], answer)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v) // an element's own answer: JSON either way
}

// sortedPairs writes a map as "k=v k=v" in key order, the same every run.
func sortedPairs[V any](m map[string]V) string {
	var b strings.Builder
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%v", k, m[k])
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
