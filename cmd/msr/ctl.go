package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/api"
	"github.com/msr-router/msr/internal/cli"
	"github.com/msr-router/msr/internal/logging"
	"github.com/msr-router/msr/internal/trace"
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
    acl                            the router's ACL, each rule's hits summed over the back-ends
    drain|undrain BACKEND          no new flows to a back-end, or again
    weight BACKEND MBPS            a back-end's capacity (its weight); 0: the configured one
    reload [--dry-run] [--confirm 2m]   read the router's config again, apply and say what changed
                                   (--dry-run: check it and say what would change, apply nothing;
                                   --confirm: rolled back unless confirm comes within the time)
    confirm                        keep the change applied with reload --confirm
    rollback [N]                   apply the config applied N changes ago (default 1)
    history                        the last ten configs applied: who, when, how, what changed
    upgrade --binary PATH [--drain-wait 2s] [--vcps VCP,VCP] [--force]
                                   roll a new build (at PATH on every host) over the elements in
                                   place: each back-end drained, upgraded, undrained when ready,
                                   then each LB; with --vcps the VCPs too, the standby first
    trace --src ADDR --dst ADDR [--proto udp|tcp|icmp|N] [--dport N] [--count 1] [--wait 5s]
                                   follow the next packets from ADDR to ADDR through every stage:
                                   one walk a packet, what each LB and back-end did and why, when
    element ELEMENT [METHOD PATH [JSON]]   relay a request to one element's API (default GET /status)
    log [ELEMENT] [LEVEL]          the VCP's or an element's log level; with LEVEL (debug, info,
                                   warn, error) set it until the agent restarts
  --api is the VCP's api_listen on the management network (default $MSR_API);
  --name its local socket. Over --api, with the router's api_security: --ca its
  certificate (https), --token-file the read or admin token; without it, changes
  need the router's DIST key file (--key-file), and a token goes over plain
  http to another host only with --insecure.
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
	tokenFile := fs.String("token-file", os.Getenv("MSR_TOKEN_FILE"), "the management API's read or admin token (api_security)")
	caFile := fs.String("ca", os.Getenv("MSR_CA"), "the deployment's API certificate: https, trusting it (api_security)")
	dryRun := fs.Bool("dry-run", false, "reload: say what would change, apply nothing")
	confirm := fs.String("confirm", "", "reload: roll the change back unless `msr ctl confirm` comes within this time (10s to 1h, such as 2m)")
	binary := fs.String("binary", "", "upgrade: the new build, at this path on every element's host")
	drainWait := fs.Duration("drain-wait", 2*time.Second, "upgrade: how long a drained back-end is left before its upgrade")
	force := fs.Bool("force", false, "upgrade: to a build of an earlier map layout too (a downgrade: its agents start with --force)")
	vcps := fs.String("vcps", "", "upgrade: the VCPs too, by name through their local sockets (vcp1,vcp2): the standby first, then the active")
	src := fs.String("src", "", "trace: the packets' source address")
	dst := fs.String("dst", "", "trace: the packets' destination address")
	proto := fs.String("proto", "", "trace: their protocol: udp, tcp, icmp, icmpv6 or a number (default any)")
	dport := fs.Uint("dport", 0, "trace: their destination port (udp or tcp; default any)")
	count := fs.Uint("count", 1, "trace: how many packets to follow")
	wait := fs.Duration("wait", 5*time.Second, "trace: how long to wait for them")
	insecure := fs.Bool("insecure", false, "send the token over plain http to an address not this host's (no --ca)")
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
		switch {
		case *tokenFile != "":
			b, err := os.ReadFile(*tokenFile)
			if err != nil {
				return err
			}
			token = strings.TrimSpace(string(b))
		case *keyFile != "":
			key, err := dist.ReadKeyFile(*keyFile, uint8(*keyID))
			if err != nil {
				return err
			}
			token = api.Token(key.Secret)
		}
		if err := clearToken(*addr, token, *caFile, *insecure); err != nil {
			return err
		}
		tc, err := api.ClientTLS(*caFile)
		if err != nil {
			return err
		}
		c = vcpapi.New(api.NewTCPClient(*addr, token, "the VCP at "+*addr, tc))
	default:
		return cli.Usagef("where is the VCP? --api ADDR:PORT (or $MSR_API), or --name")
	}
	cmd, ok := ctlCommands[pos[0]]
	if !ok || len(pos)-1 < cmd.args || (!cmd.more && len(pos)-1 > cmd.args) {
		return cli.Usagef("unknown ctl command %q", strings.Join(pos, " "))
	}
	if (*dryRun || *confirm != "") && pos[0] != "reload" {
		return cli.Usagef("--dry-run and --confirm are for reload")
	}
	if (*binary != "") != (pos[0] == "upgrade") {
		return cli.Usagef("--binary is for upgrade, and upgrade needs it")
	}
	if (*src != "" || *dst != "") != (pos[0] == "trace") {
		return cli.Usagef("--src and --dst are for trace, and trace needs them")
	}
	k := &console{c: c, out: *out, dryRun: *dryRun, binary: *binary, drainWait: *drainWait, force: *force, wait: *wait}
	if pos[0] == "trace" {
		if k.trace, err = traceSpec(*src, *dst, *proto, *dport, *count); err != nil {
			return cli.Usagef("trace: %v", err)
		}
	}
	if *vcps != "" {
		k.vcps = strings.Split(*vcps, ",")
	}
	if *confirm != "" {
		if k.confirm, err = vcpapi.ParseConfirm(*confirm); err != nil {
			return cli.Usagef("--confirm: %v", err)
		}
	}
	return cmd.run(k, pos[1:])
}

// clearToken refuses to send a token in clear across the network: over
// plain http (no --ca) to an address that is not loopback, unless the
// operator says --insecure. Anyone on the path would read it, and the
// admin token changes the router.
func clearToken(addr, token, ca string, insecure bool) error {
	if token == "" || ca != "" || insecure {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return cli.Usagef("--api %s: ADDR:PORT", addr)
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsLoopback() || host == "localhost" {
		return nil
	}
	return cli.Usagef("refusing to send the API token in clear to %s: give --ca (https, the router's api_security) or --insecure", addr)
}

// console is one `msr ctl` command's client and output.
type console struct {
	c       *vcpapi.Client
	out     cli.Output
	dryRun  bool          // reload --dry-run
	confirm time.Duration // reload --confirm
	// upgrade --binary, --drain-wait, --force, --vcps
	binary    string
	drainWait time.Duration
	force     bool
	vcps      []string
	// trace's packets and --wait
	trace trace.Spec
	wait  time.Duration
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
	"acl":      {0, false, (*console).acl},
	"drain":    {1, false, func(k *console, args []string) error { return k.drain(args[0], true) }},
	"undrain":  {1, false, func(k *console, args []string) error { return k.drain(args[0], false) }},
	"weight":   {2, false, (*console).weight},
	"reload":   {0, false, (*console).reload},
	"confirm":  {0, false, (*console).confirmChange},
	"rollback": {0, true, (*console).rollback},
	"history":  {0, false, (*console).history},
	"upgrade":  {0, false, (*console).rollUpgrade},
	"trace":    {0, false, (*console).traceWalks},
	"element":  {1, true, (*console).element},
	"log":      {0, true, (*console).logLevel},
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

// acl shows the router's ACL and each rule's hits over every back-end.
func (k *console) acl(_ []string) error {
	v, err := k.c.ACL()
	if err != nil {
		return err
	}
	return k.print(v, func(w io.Writer) {
		if !v.Configured {
			fmt.Fprintln(w, "the router's config has no acl: each back-end applies its own file's")
		}
		fmt.Fprintf(w, "%-4s %-12s %s\n", "#", "HITS", "RULE")
		for _, r := range v.Rules {
			fmt.Fprintf(w, "%-4d %-12d %s\n", r.Index, r.Hits, r.Rule)
		}
		for _, b := range v.Backends {
			switch {
			case b.Error != "":
				fmt.Fprintf(w, "  %s: %s (not counted)\n", b.Name, b.Error)
			case !b.Applied:
				fmt.Fprintf(w, "  %s: %d rules of its own, not the router's (not counted)\n", b.Name, b.Rules)
			default:
				fmt.Fprintf(w, "  %s: hits %v\n", b.Name, b.Hits)
			}
		}
	})
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
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "PORT\tROLE\tVLAN\tADDRESS\tSTATE\tSPEED\tMTU\tCHANGES\tRX PACKETS\tTX PACKETS\tRX DROPPED\t")
		for _, p := range v.Ports {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t\n", p.Name, p.Role, p.VLAN, orNone(p.Address), portStateText(p), portSpeedText(p.SpeedMbps, p.FullDuplex),
				p.MTU, p.Changes, p.RxPackets, p.TxPackets, p.RxDropped)
		}
		tw.Flush()
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
	v, err := k.c.ReloadConfirm(k.dryRun, k.confirm)
	if err != nil {
		return err
	}
	return k.print(v, func(w io.Writer) { writeReload(w, v) })
}

func writeReload(w io.Writer, v *vcpapi.ReloadResult) {
	if len(v.Changes) == 0 {
		fmt.Fprintln(w, "no change")
	}
	for _, c := range v.Changes {
		fmt.Fprintln(w, c)
	}
	if v.DryRun && len(v.Changes) > 0 {
		fmt.Fprintln(w, "(dry run: nothing applied)")
	}
	if e := v.Entry; e != nil && e.Pending {
		fmt.Fprintf(w, "config %d applied: rolled back at %s unless `msr ctl confirm` comes first\n", e.Seq, e.ConfirmBy.Format(time.TimeOnly))
	}
}

// confirmChange keeps a change applied with reload --confirm.
func (k *console) confirmChange(_ []string) error {
	v, err := k.c.Confirm()
	if err != nil {
		return err
	}
	return k.print(v, func(w io.Writer) {
		fmt.Fprintln(w, "confirmed: the change stays")
		writeHistory(w, v)
	})
}

// rollback applies the config applied N changes ago (default 1).
func (k *console) rollback(args []string) error {
	n := 1
	switch {
	case len(args) > 1:
		return cli.Usagef("rollback [N]: one number")
	case len(args) == 1:
		var err error
		if n, err = strconv.Atoi(args[0]); err != nil || n < 1 {
			return cli.Usagef("rollback %q: the number of changes back, 1 or more (msr ctl history)", args[0])
		}
	}
	v, err := k.c.Rollback(n)
	if err != nil {
		return err
	}
	return k.print(v, func(w io.Writer) { writeReload(w, v) })
}

// history lists the configs applied, newest first: N is what
// `msr ctl rollback N` returns to.
func (k *console) history(_ []string) error {
	v, err := k.c.History()
	if err != nil {
		return err
	}
	return k.print(v, func(w io.Writer) { writeHistory(w, v) })
}

func writeHistory(w io.Writer, v *vcpapi.HistoryView) {
	fmt.Fprintf(w, "%-3s %-7s %-20s %-8s %-40s %s\n", "N", "CONFIG", "APPLIED", "CHANGES", "BY", "HOW")
	for i, e := range v.Entries {
		how := e.How
		switch {
		case e.Pending:
			how += fmt.Sprintf(" (waiting: rolled back at %s)", e.ConfirmBy.Format(time.TimeOnly))
		case e.ConfirmedBy != "":
			how += ", confirmed by " + e.ConfirmedBy
		}
		fmt.Fprintf(w, "%-3d %-7d %-20s %-8d %-40s %s\n", i, e.Seq, e.Time.Format(time.DateTime), len(e.Changes), e.Who, how)
	}
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

// logLevel is `log [ELEMENT] [LEVEL]`: a lone word that names a level is
// the VCP's new level.
func (k *console) logLevel(args []string) error {
	element, level := "", ""
	switch len(args) {
	case 0:
	case 1:
		if _, err := logging.ParseLevel(args[0]); err == nil {
			level = args[0]
		} else {
			element = args[0]
		}
	case 2:
		element, level = args[0], args[1]
	default:
		return cli.Usagef("log [ELEMENT] [LEVEL]")
	}
	got, err := k.c.LogLevel(element, level)
	if err != nil {
		return err
	}
	who := element
	if who == "" {
		who = "the VCP"
	}
	return k.print(logging.LevelView{Level: got}, func(w io.Writer) { fmt.Fprintf(w, "%s logs at %s\n", who, got) })
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

// portStateText is a port's state in a word or two: up, down, admin-down.
func portStateText(p vcpapi.PortView) string {
	switch {
	case p.Up:
		return "up"
	case !p.AdminUp:
		return "admin-down"
	default:
		return "down"
	}
}

// portSpeedText is a link's speed and duplex: "10G full", "100M half",
// "unknown".
func portSpeedText(mbps uint32, full bool) string {
	if mbps == 0 {
		return "unknown"
	}
	d := "half"
	if full {
		d = "full"
	}
	if mbps%1000 == 0 {
		return fmt.Sprintf("%dG %s", mbps/1000, d)
	}
	return fmt.Sprintf("%dM %s", mbps, d)
}
