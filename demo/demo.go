// Package demo is msr's main job: the default lab (labs/default.yaml) with
// every element an msr process, brought up, converged, and put to work
// with real traffic between external hosts, watched live.
package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/lb/lbapi"
	"github.com/msr-router/msr/router/routerapi"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// LabName is the default lab's name; RunDir is where its configs live.
const (
	LabName = "default"
	RunDir  = "/run/msr/default"
)

// Backends, LBs and VCPs are the default lab's elements.
var (
	Backends = []string{"r1", "r2", "r3"}
	LBs      = []string{"lb1", "lb2"}
	VCPs     = []string{"vcp1", "vcp2"}
)

// Options are how the default lab comes up.
type Options struct {
	// Prefixes is how many RouteViews prefixes bgp1 announces, and
	// Prefixes6 how many IPv6 ones (0: Prefixes6).
	Prefixes, Prefixes6 int
	// Monitoring runs Prometheus on mon, scraping every agent.
	Monitoring bool
	// LabFile is a lab file built in place of labs/default.yaml: a variant
	// of it, with the default lab's hosts, addresses, processes and links
	// (checkVariant) and settings, hosts or processes of its own. Its
	// MSR_BIN and MSR_RUN are filled as the default lab's.
	LabFile string
	// SFlow, if set, has the LBs send sFlow to this collector, sampling
	// 1 in SFlowRate (0: lb.DefaultSFlowRate) of the frames in.
	SFlow     netip.AddrPort
	SFlowRate uint32
	// IPFIX, if set, has the LBs send the flows of their samples (1 in
	// SFlowRate) to this collector as IPFIX.
	IPFIX netip.AddrPort
}

// Up writes the configs and builds the default lab (msr is this binary).
func Up(msr string, prefixes int) (*Plan, error) { return UpWith(msr, Options{Prefixes: prefixes}) }

// UpWith is Up with options.
func UpWith(msr string, o Options) (*Plan, error) {
	spec, err := LabSpec(msr, o)
	if err != nil {
		return nil, err
	}
	return UpLab(spec, o)
}

// UpLab is UpWith of a lab LabSpec returned: a caller that checked the
// lab file before all else builds the lab it checked, not the file read
// again.
func UpLab(spec *lab.Spec, o Options) (*Plan, error) {
	if labs, _ := lab.Labs(); slices.Contains(labs, LargeLab) {
		return nil, fmt.Errorf("the large lab is up: msr demo down --size large first (the default lab's elements have its names)")
	}
	plan, err := WriteConfigs(RunDir, o)
	if err != nil {
		return nil, err
	}
	if err := writeMonitoring(RunDir, o.Monitoring); err != nil {
		return nil, err
	}
	if _, err := lab.Up(spec); err != nil {
		return nil, err
	}
	return plan, nil
}

// Down removes the lab and what its agents pinned (back-ends added to it
// too).
func Down() error {
	err := lab.Down(LabName)
	removePins("msr-default-")
	return err
}

// AddBackend adds a back-end named name (r4, r5 ...) to the running
// default lab, as an operator racks a new machine: a host on the
// interconnect (10.0.0.1N) whose config holds only its identity; the VCP
// discovers it and configures it (ports, RIB feed, ACL), and once its FIB
// holds the table it joins every LB's table. msr is this binary.
func AddBackend(msr, name string, capacityMbps int) error {
	var n int
	if _, err := fmt.Sscanf(name, "r%d", &n); err != nil || n < 4 || n > 9 || fmt.Sprintf("r%d", n) != name {
		return fmt.Errorf("back-end %q: r4 to r9 (r1-r3 are the lab's)", name)
	}
	var cfg strings.Builder
	if err := configs.ExecuteTemplate(&cfg, "router", struct {
		Run, Lab, Name string
		Capacity       int
		FIB6Lines      int
	}{RunDir, LabName, name, capacityMbps, 0}); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(RunDir, name+".yaml"), []byte(cfg.String()), 0o600); err != nil {
		return err
	}
	spec := fmt.Sprintf(`name: %s
hosts:
  %s:
    interfaces:
      eth0: {addresses: [10.0.0.1%d/24], mac: "02:00:00:00:b0:0%d", vlan_offload: off, tx_checksum: off}
    processes:
      - {name: router, command: [%s, router, --config, %s/%s.yaml]}
switches:
  sw1:
    interfaces:
      p1%d: {xdp_pass: on, vlan_offload: off}
links:
  - ends: [%s:eth0, sw1:p1%d]
`, LabName, name, n, n, msr, RunDir, name, n, name, n)
	s, err := lab.Load(name+".yaml", []byte(spec))
	if err != nil {
		return err
	}
	_, err = lab.Extend(s)
	return err
}

// Snapshot is the router at one moment, as the live view shows it.
type Snapshot struct {
	Time     time.Time
	VCP      string            // the active VCP
	Routes   map[string]int    // back-end -> FIB routes
	Routes6  map[string]int    // back-end -> IPv6 FIB routes
	RxPkts   map[string]uint64 // back-end -> packets received
	Sessions map[string]string // the suite's BGP and OSPF protocols -> state
	Tables   map[string]bool   // LB -> its table applied
	Alive    int               // elements alive
}

// Look reads every element's local API.
func Look() *Snapshot {
	s := &Snapshot{Time: time.Now(), Routes: map[string]int{}, Routes6: map[string]int{}, RxPkts: map[string]uint64{}, Sessions: map[string]string{}, Tables: map[string]bool{}}
	for _, r := range Backends {
		if st, err := routerapi.Local(r, "").Status(); err == nil {
			s.Routes[r], s.Routes6[r] = st.Routes, st.Routes6
			if st.Stats != nil {
				s.RxPkts[r] = st.Stats.RxPackets
			}
		}
	}
	for _, v := range VCPs {
		st, err := vcpapi.Local(v, "").Status()
		if err != nil || st.Role != "active" {
			continue
		}
		s.VCP = v
		for _, e := range st.Elements {
			if e.Alive && (slices.Contains(LBs, e.Name) || slices.Contains(Backends, e.Name)) {
				s.Alive++ // the lab's own (a back-end added at run time is not)
			}
		}
		for _, t := range st.Tables {
			s.Tables[t.LB] = t.Applied
		}
		if st.Suite != nil {
			for _, l := range strings.Split(st.Suite.Protocols, "\n") {
				if f := strings.Fields(l); len(f) >= 4 && (f[1] == "BGP" || f[1] == "OSPF") && !strings.HasPrefix(f[0], "backends") {
					s.Sessions[f[0]] = strings.Join(f[3:4], "") + " " + strings.Join(f[5:], " ")
				}
			}
		}
	}
	return s
}

// Converged says what is still missing before the router is ready: the
// active VCP, every element alive, both LBs' tables applied, bgp1's and
// ospf1's routes on every back-end.
func (s *Snapshot) Converged(plan *Plan) []string {
	var missing []string
	if s.VCP == "" {
		missing = append(missing, "an active VCP")
	}
	if s.Alive < len(LBs)+len(Backends) {
		missing = append(missing, fmt.Sprintf("elements alive %d/%d", s.Alive, len(LBs)+len(Backends)))
	}
	for _, l := range LBs {
		if !s.Tables[l] {
			missing = append(missing, l+"'s table")
		}
	}
	want := len(plan.Prefixes) + 3 + 1   // bgp1's, the three ports', ospf1's
	want6 := len(plan.Prefixes6) + 3 + 2 // bgp1's, the three ports', ospf1's (OSPFv3, RIPng)
	for _, r := range Backends {
		if s.Routes[r] < want {
			missing = append(missing, fmt.Sprintf("%s routes %d/%d", r, s.Routes[r], want))
		}
		if s.Routes6[r] < want6 {
			missing = append(missing, fmt.Sprintf("%s IPv6 routes %d/%d", r, s.Routes6[r], want6))
		}
	}
	return missing
}

// Wait waits until the router has converged, or ctx ends.
func Wait(ctx context.Context, plan *Plan, w io.Writer) error {
	start := time.Now()
	last := ""
	for {
		snap := Look()
		missing := snap.Converged(plan)
		if len(missing) == 0 {
			fmt.Fprintf(w, "converged in %.1f s\n", time.Since(start).Seconds())
			return nil
		}
		if m := strings.Join(missing, ", "); m != last && time.Since(start) > 2*time.Second {
			fmt.Fprintf(w, "  waiting for %s\n", m)
			last = m
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not converged: %s; %s; the last of the logs:\n%s\n%s\n%s\n%s", strings.Join(missing, ", "),
				stuckDetail(snap), logTail("vcp1.vcp", 12), logTail("r1.router", 6), logTail("bgp1.bgpd", 8), logTail("ospf1.bird", 4))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// stuckDetail says what a router that did not converge shows of the ways
// to its peers: the suite's sessions (from its last look, snap), and each
// LB's VCP and the drops of what goes to it.
func stuckDetail(snap *Snapshot) string {
	var b strings.Builder
	fmt.Fprintf(&b, "sessions %v", snap.Sessions)
	for _, l := range LBs {
		st, err := LBStatus(l)
		if err != nil {
			fmt.Fprintf(&b, "; %s: %v", l, err)
			continue
		}
		fmt.Fprintf(&b, "; %s follows VCP %q", l, st.VCPMAC)
		for _, p := range st.Ports {
			if p.Role != "external" || p.Stats == nil {
				continue
			}
			fmt.Fprintf(&b, ", %s rx %d vcp %d", p.Name, p.Stats.RxPackets, p.Stats.Modules["vcp"])
			for _, d := range []string{"no_vcp", "policed", "no_internal", "not_ours"} {
				if n := p.Stats.Drops[d]; n > 0 {
					fmt.Fprintf(&b, " %s %d", d, n)
				}
			}
		}
	}
	return b.String()
}

// logTail is the last n lines of a process's log in the lab.
func logTail(proc string, n int) string {
	lines, err := lab.LogTail(filepath.Join(lab.RunDir, LabName, "logs", proc+".log"), n)
	if err != nil {
		return proc + ": " + err.Error()
	}
	return proc + ":\n  " + strings.Join(lines, "\n  ")
}

// Exec runs a command in a host of the lab, returning its output.
func Exec(host string, argv ...string) (string, error) { return execIn(LabName, host, argv) }

// execIn runs a command in a host of the lab labName, returning its
// output; an exit status but 0 is an error that says it.
func execIn(labName, host string, argv []string) (string, error) {
	var out bytes.Buffer
	code, err := lab.Exec(labName, host, argv, nil, &out, &out)
	if err == nil && code != 0 {
		err = fmt.Errorf("%s: %s exited %d: %s", host, strings.Join(argv, " "), code, strings.TrimSpace(out.String()))
	}
	return out.String(), err
}

// MAC is the MAC of interface ifname of a host of the lab, as its
// namespace sees it (a host's /sys is the machine's, not the
// namespace's).
func MAC(host, ifname string) (string, error) {
	out, err := Exec(host, "ip", "-br", "link", "show", ifname)
	if err != nil {
		return "", err
	}
	if f := strings.Fields(out); len(f) >= 3 {
		return f[2], nil
	}
	return "", fmt.Errorf("%s's %s: no MAC in %q", host, ifname, out)
}

// Result is what the main job did.
type Result struct {
	Converged  float64           `json:"converged_s"`
	Ping       map[string]string `json:"ping"`       // destination -> summary
	Traceroute []string          `json:"traceroute"` // h1 -> h3, one line a hop
	IperfMbps  float64           `json:"iperf3_mbps"`
	IperfRetr  int               `json:"iperf3_retransmits"`
	// The same over IPv6: h1 -> h3's IPv6 address.
	Traceroute6 []string           `json:"traceroute6"`
	Iperf6Mbps  float64            `json:"iperf3_ipv6_mbps"`
	Iperf6Retr  int                `json:"iperf3_ipv6_retransmits"`
	Shares      map[string]float64 `json:"backend_shares"` // of the packets the back-ends received
	// Mode is the LBs' balancing mode, Weights each back-end's share of
	// lb1's table: what the shares should follow (the VCP sets them from
	// the capacities the back-ends announce).
	Mode    string             `json:"balancing_mode"`
	Weights map[string]float64 `json:"backend_weights"`
	Routes  map[string]int     `json:"routes"`
	Routes6 map[string]int     `json:"routes6"`
}

var pingSummary = regexp.MustCompile(`(\d+) packets transmitted, (\d+) received.*\n.*= [\d.]+/([\d.]+)/`)

// Ping pings dst from host and says "N/N received, avg X ms".
func Ping(host, dst string) (string, error) {
	out, err := Exec(host, "ping", "-c", "3", "-i", "0.2", "-W", "2", dst)
	if m := pingSummary.FindStringSubmatch(out); m != nil {
		return fmt.Sprintf("%s/%s received, avg %s ms", m[2], m[1], m[3]), err
	}
	return strings.TrimSpace(out), err
}

// Traffic runs the main job's traffic for d: pings to every kind of
// destination, a traceroute, and iperf3 TCP from h1 to h3 (different LBs)
// while the live view prints every second.
func Traffic(ctx context.Context, plan *Plan, d time.Duration, w io.Writer) (*Result, error) {
	r := &Result{Ping: map[string]string{}}
	dests := map[string]string{"h3 (lb2)": H3, "h2 (lb1, other port)": H2, "ospf1's network": OSPFHost, "bgp1's prefix " + plan.Prefixes[0].String(): plan.Hosts[0].String(),
		"h3 (lb2) IPv6": H3v6, "h2 (lb1, other port) IPv6": H2v6, "bgp1's prefix " + plan.Prefixes6[0].String(): plan.Hosts6[0].String(),
		"ospf1's network IPv6 (OSPFv3)": OSPFHost6, "ospf1's network IPv6 (RIPng)": RIPngHost}
	names := make([]string, 0, len(dests))
	for n := range dests {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s, err := Ping("h1", dests[n])
		r.Ping[n] = s
		fmt.Fprintf(w, "ping h1 -> %-33s %s\n", n, s)
		if err != nil {
			return r, fmt.Errorf("ping %s: %w", n, err)
		}
	}
	var err error
	if r.Traceroute, err = traceroute(H3); err != nil {
		return r, err
	}
	fmt.Fprintf(w, "traceroute h1 -> h3:\n  %s\n", strings.Join(r.Traceroute, "\n  "))
	if r.Traceroute6, err = traceroute(H3v6); err != nil {
		return r, err
	}
	fmt.Fprintf(w, "traceroute h1 -> h3 (IPv6):\n  %s\n", strings.Join(r.Traceroute6, "\n  "))

	Exec("h3", "pkill", "-x", "iperf3")
	if _, err := Exec("h3", "iperf3", "-s", "-D", "-1"); err != nil {
		return r, err
	}
	time.Sleep(300 * time.Millisecond)
	type iperfOut struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
			SumSent struct {
				Retransmits int `json:"retransmits"`
			} `json:"sum_sent"`
		} `json:"end"`
	}
	done := make(chan error, 1)
	var iperf string
	go func() {
		var err error
		iperf, err = Exec("h1", "iperf3", "-c", H3, "-t", fmt.Sprint(int(d.Seconds())), "-P", "4", "-J")
		done <- err
	}()
	first := Look()
	prev := first
	fmt.Fprintf(w, "iperf3 h1 -> h3, 4 streams, %v:\n", d)
	fmt.Fprintf(w, "  %-6s %-28s %-22s %-6s %s\n", "t", "back-end kpps (r1 r2 r3)", "shares", "routes", "sessions")
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				return r, fmt.Errorf("iperf3: %w", err)
			}
			running = false
		case <-ctx.Done():
			return r, ctx.Err()
		case <-t.C:
			now := Look()
			fmt.Fprintln(w, liveLine(first, prev, now))
			prev = now
		}
	}
	var io iperfOut
	if err := json.Unmarshal([]byte(iperf), &io); err != nil {
		return r, fmt.Errorf("iperf3's answer: %v", err)
	}
	r.IperfMbps, r.IperfRetr = io.End.SumReceived.BitsPerSecond/1e6, io.End.SumSent.Retransmits
	last := Look()
	// IPv6: the same streams, shorter.
	d6 := min(d, 5*time.Second)
	if _, err := Exec("h3", "iperf3", "-s", "-D", "-1"); err != nil {
		return r, err
	}
	time.Sleep(300 * time.Millisecond)
	iperf, err = Exec("h1", "iperf3", "-6", "-c", H3v6, "-t", fmt.Sprint(int(d6.Seconds())), "-P", "4", "-J")
	if err != nil {
		return r, fmt.Errorf("iperf3 over IPv6: %w", err)
	}
	var io6 iperfOut
	if err := json.Unmarshal([]byte(iperf), &io6); err != nil {
		return r, fmt.Errorf("iperf3's answer over IPv6: %v", err)
	}
	r.Iperf6Mbps, r.Iperf6Retr = io6.End.SumReceived.BitsPerSecond/1e6, io6.End.SumSent.Retransmits
	fmt.Fprintf(w, "iperf3 h1 -> h3 over IPv6, 4 streams, %v: %.0f Mbit/s, %d retransmits\n", d6, r.Iperf6Mbps, r.Iperf6Retr)
	r.Shares, r.Routes, r.Routes6 = Shares(first, last), last.Routes, last.Routes6
	r.Mode, r.Weights = Weights("lb1")
	return r, nil
}

// traceroute is h1's traceroute to dst (either family), one line a hop.
func traceroute(dst string) ([]string, error) {
	out, err := Exec("h1", "traceroute", "-n", "-q", "1", "-w", "1", dst)
	if err != nil {
		return nil, err
	}
	var hops []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		hops = append(hops, strings.TrimSpace(l))
	}
	return hops, nil
}

// Weights reads an LB's balancing mode and each back-end's share of its
// table's slots, by back-end name.
func Weights(lb string) (string, map[string]float64) {
	st, err := LBStatus(lb)
	if err != nil {
		return "", nil
	}
	names := map[string]string{}
	for _, b := range st.Backends {
		names[b.MAC] = b.Name
	}
	out := map[string]float64{}
	for mac, n := range st.Table.Shares {
		if st.Table.Slots > 0 {
			out[names[mac]] += float64(n) / float64(st.Table.Slots)
		}
	}
	return st.Table.Mode, out
}

// Shares are the back-ends' shares of the packets they received between
// two looks.
func Shares(a, b *Snapshot) map[string]float64 {
	out := map[string]float64{}
	var total uint64
	for _, r := range Backends {
		total += b.RxPkts[r] - a.RxPkts[r]
	}
	for _, r := range Backends {
		if total > 0 {
			out[r] = float64(b.RxPkts[r]-a.RxPkts[r]) / float64(total)
		}
	}
	return out
}

func liveLine(first, prev, now *Snapshot) string {
	dt := now.Time.Sub(prev.Time).Seconds()
	var kpps, sh []string
	s := Shares(first, now)
	for _, r := range Backends {
		kpps = append(kpps, fmt.Sprintf("%6.1f", float64(now.RxPkts[r]-prev.RxPkts[r])/dt/1000))
		sh = append(sh, fmt.Sprintf("%2.0f%%", s[r]*100))
	}
	up := 0
	for _, st := range now.Sessions {
		if strings.Contains(st, "Established") || strings.Contains(st, "Running") {
			up++
		}
	}
	return fmt.Sprintf("  %-6s %-28s %-22s %-6d %d/%d up (%s)", now.Time.Sub(first.Time).Round(time.Second), strings.Join(kpps, " "),
		strings.Join(sh, " "), now.Routes["r1"], up, len(now.Sessions), now.VCP)
}

// LBStatus reads an LB agent's status.
func LBStatus(name string) (*lbapi.Status, error) {
	return lbapi.Local(name, "").Status()
}

// LBTable asks a running LB of the lab for its table, slot by slot.
func LBTable(name string) (*lbapi.SlotTable, error) {
	return lbapi.Local(name, "").Table()
}
