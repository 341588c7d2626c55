package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/api"
	"github.com/msr-router/msr/internal/cli"
	"github.com/msr-router/msr/vcp"
)

var ctlCommand = command{
	summary: "the router's console: one router, asked through its VCP",
	usage: `  msr ctl [--api ADDR:PORT | --name VCP] [--key-file FILE] [-o json] COMMAND
    elements                       every LB and back-end: alive, capacity, installed
    ports                          the router's ports and counters, and the sum of the external ones
    tables                         every LB's balancing table
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
	var c *api.Client
	switch {
	case *name != "":
		path, err := agentSocket("vcp", *name, "")
		if err != nil {
			return err
		}
		c = vcp.NewClient(path)
	case *addr != "":
		token := ""
		if *keyFile != "" {
			key, err := dist.ReadKeyFile(*keyFile, uint8(*keyID))
			if err != nil {
				return err
			}
			token = api.Token(key.Secret)
		}
		c = api.NewTCPClient(*addr, token, "the VCP at "+*addr)
	default:
		return cli.Usagef("where is the VCP? --api ADDR:PORT (or $MSR_API), or --name")
	}
	ctl := &console{c: c, out: *out}
	return ctl.run(pos)
}

type console struct {
	c   *api.Client
	out cli.Output
}

func (k *console) run(pos []string) error {
	w := os.Stdout
	switch {
	case len(pos) == 1 && pos[0] == "elements":
		var es []vcp.ElementStatus
		return k.get("/elements", &es, func(w io.Writer) {
			fmt.Fprintf(w, "%-7s %-10s %-18s %-17s %-6s %-8s %s\n", "ROLE", "NAME", "ID", "MAC", "ALIVE", "MBIT/S", "INSTALLED")
			for _, e := range es {
				alive := fmt.Sprint(e.Alive)
				if e.Drained {
					alive += ",drained"
				}
				fmt.Fprintf(w, "%-7s %-10s %-18s %-17s %-6s %-8d %d\n", e.Role, e.Name, e.ID, e.MAC, alive, e.Capacity, e.Installed)
			}
		})
	case len(pos) == 1 && pos[0] == "ports":
		var v vcp.PortsView
		return k.get("/ports", &v, func(w io.Writer) {
			fmt.Fprintf(w, "%-12s %-8s %-5s %-18s %-4s %6s %12s %12s %12s\n", "PORT", "ROLE", "VLAN", "ADDRESS", "UP", "MTU", "RX PACKETS", "TX PACKETS", "RX DROPPED")
			for _, p := range v.Ports {
				fmt.Fprintf(w, "%-12s %-8s %-5d %-18s %-4v %6d %12d %12d %12d\n", p.Name, p.Role, p.VLAN, p.Address, p.Up, p.MTU, p.RxPackets, p.TxPackets, p.RxDropped)
			}
			e := v.External
			fmt.Fprintf(w, "the router (external ports): rx %d packets %d bytes, tx %d packets %d bytes, dropped %d\n", e.RxPackets, e.RxBytes, e.TxPackets, e.TxBytes, e.RxDropped)
		})
	case len(pos) == 1 && pos[0] == "tables":
		var ts []vcp.TableStatus
		return k.get("/tables", &ts, func(w io.Writer) {
			for _, t := range ts {
				fmt.Fprintf(w, "%s: %s, generation %d, applied %v, weights %v\n", t.LB, t.Mode, t.Generation, t.Applied, t.Weights)
			}
		})
	case len(pos) == 1 && pos[0] == "routes":
		var v vcp.RoutesView
		return k.get("/routes", &v, func(w io.Writer) {
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
	case len(pos) == 2 && pos[0] == "route":
		var v vcp.LookupView
		return k.get("/routes/lookup?addr="+url.QueryEscape(pos[1]), &v, func(w io.Writer) {
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
					fmt.Fprintf(w, " %s via %s%s", r.Prefix, strings.Join(r.Via, ","), r.Port)
				}
				fmt.Fprintln(w)
			}
		})
	case len(pos) == 2 && (pos[0] == "drain" || pos[0] == "undrain"):
		return k.post("/"+pos[0]+"?name="+url.QueryEscape(pos[1]), pos[0]+"ed "+pos[1])
	case len(pos) == 3 && pos[0] == "weight":
		return k.post("/weight?name="+url.QueryEscape(pos[1])+"&capacity="+url.QueryEscape(pos[2]), pos[1]+": capacity "+pos[2]+" Mbit/s")
	case len(pos) == 1 && pos[0] == "reload":
		var v vcp.ReloadResult
		if err := k.c.Do("POST", "/reload", nil, &v); err != nil {
			return err
		}
		return k.out.Print(w, &v, func(w io.Writer) {
			if len(v.Changes) == 0 {
				fmt.Fprintln(w, "no change")
			}
			for _, c := range v.Changes {
				fmt.Fprintln(w, c)
			}
		})
	case len(pos) >= 2 && pos[0] == "element":
		method, path, body := "GET", "/status", []byte(nil)
		switch len(pos) {
		case 2:
		case 4, 5:
			method, path = strings.ToUpper(pos[2]), pos[3]
			if len(pos) == 5 {
				body = []byte(pos[4])
			}
		default:
			return cli.Usagef("element ELEMENT [METHOD PATH [JSON]]")
		}
		status, answer, err := k.c.Raw(method, "/relay/"+url.PathEscape(pos[1])+path, body)
		if err != nil {
			return err
		}
		if status != 200 {
			var e struct{ Error string }
			json.Unmarshal(answer, &e)
			return fmt.Errorf("%s: %s", pos[1], orNone(e.Error))
		}
		var v any
		if err := json.Unmarshal(answer, &v); err != nil {
			return fmt.Errorf("%s answered something other than JSON: %.100s", pos[1], answer)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v) // an element's own answer: JSON either way
	}
	return cli.Usagef("unknown ctl command %q", strings.Join(pos, " "))
}

func (k *console) get(path string, v any, text func(io.Writer)) error {
	if err := k.c.Do("GET", path, nil, v); err != nil {
		return err
	}
	return k.out.Print(os.Stdout, v, text)
}

func (k *console) post(path, done string) error {
	var v map[string]any
	if err := k.c.Do("POST", path, nil, &v); err != nil {
		return err
	}
	return k.out.Print(os.Stdout, v, func(w io.Writer) { fmt.Fprintln(w, done) })
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
