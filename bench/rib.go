package bench

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/routetable"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/router/routerapi"
)

// RIBOptions is one RIB distribution benchmark: the VCP's routing suite
// holds Routes static routes and reflects them to Backends back-ends; then
// an external BGP peer announces and withdraws one prefix Changes times.
type RIBOptions struct {
	Routes   string // "pyasn" or a number of prefixes; IPv6: "pyasn6" or "Nv6"
	Backends int
	Changes  int
	// Clients are receive-only iBGP clients of the VCP's route reflector
	// (a BIRD each, each from its own address on one lab host), started
	// once the VCP's suite holds every route: the RIB feed's
	// fan-out to a router of that many back-ends.
	Clients int
	// Msr is the msr binary the lab's elements run (default: this one).
	Msr string
}

// RIBResult is what `msr bench rib` reports.
type RIBResult struct {
	Routes            int       `json:"routes"`
	IPv6              bool      `json:"ipv6,omitempty"` // the table is IPv6's
	Backends          int       `json:"backends"`
	SuiteLoadSeconds  float64   `json:"suite_load_s"`   // BIRD up to holding every route
	DistributeSeconds float64   `json:"distribute_s"`   // BIRD holding them to every back-end's FIB holding them
	ChangeMs          Quantiles `json:"change_ms"`      // a peer's announcement or withdrawal to every back-end's FIB
	VCPToFIBMs        Quantiles `json:"vcp_to_fib_ms"`  // the VCP's suite holding the change to every back-end's FIB
	BackendRSSMB      []float64 `json:"backend_rss_mb"` // each back-end agent's resident set, all routes loaded
	SuiteRSSMB        float64   `json:"suite_rss_mb"`   // the VCP's BIRD, every route and session up
	// With clients: their sessions' start to every client having received
	// every route, and the VCP's BIRD's resident set before and after.
	Clients            int     `json:"clients,omitempty"`
	ClientsFanoutS     float64 `json:"clients_fanout_s,omitempty"`
	SuiteRSSBeforeMB   float64 `json:"suite_rss_before_clients_mb,omitempty"`
	ClientsSuiteRSSMB  float64 `json:"clients_bird_rss_mb,omitempty"`
	ClientsSuiteCPUSec float64 `json:"suite_cpu_fanout_s,omitempty"` // the VCP's BIRD's CPU time during the fan-out
}

// Quantiles of a sample.
type Quantiles struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
	N   int     `json:"n"`
}

// msrBinary is the msr binary a lab's elements run: msr if set, else this
// one.
func msrBinary(msr string) (string, error) {
	if msr != "" {
		return msr, nil
	}
	return os.Executable()
}

// writeFiles writes each file's text into dir.
func writeFiles(dir string, files map[string]string) error {
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// RIB runs the benchmark in a lab of msr processes (this binary).
func RIB(o RIBOptions) (*RIBResult, error) {
	self, err := msrBinary(o.Msr)
	if err != nil {
		return nil, err
	}
	ipv6 := routetable.IsIPv6(o.Routes)
	named := routetable.Named
	if ipv6 {
		named = routetable.Named6
	}
	prefixes, err := named(o.Routes)
	if err != nil || prefixes == nil {
		return nil, fmt.Errorf("--routes: pyasn, a number of prefixes, pyasn6 or Nv6 (%v)", err)
	}
	dir, err := os.MkdirTemp("", "msr-bench-rib")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	if err := writeRIBFiles(dir, self, prefixes, o.Backends, o.Clients, ipv6); err != nil {
		return nil, err
	}
	spec, err := lab.LoadFile(filepath.Join(dir, "lab.yaml"))
	if err != nil {
		return nil, err
	}
	start := time.Now()
	st, err := lab.Up(spec)
	if err != nil {
		return nil, err
	}
	defer func() {
		lab.Down(spec.Name)
		os.RemoveAll("/sys/fs/bpf/msr-bench-rib")
		for i := 1; i <= o.Backends; i++ {
			os.Remove(routerapi.StatePath(fmt.Sprintf("bench-rib-r%d", i)))
		}
	}()
	r := &RIBResult{Routes: len(prefixes), IPv6: ipv6, Backends: o.Backends}
	bird := filepath.Join(dir, "vcp", "bird.ctl")
	if err := waitFor(5*time.Minute, 50*time.Millisecond, func() bool { return birdRoutes(bird) >= len(prefixes) }); err != nil {
		return nil, fmt.Errorf("BIRD never held %d routes: %w", len(prefixes), err)
	}
	loaded := time.Now()
	r.SuiteLoadSeconds = loaded.Sub(start).Seconds()
	clients := make([]routerClient, o.Backends)
	for i := range clients {
		clients[i] = routerClient{routerapi.Local("", filepath.Join(dir, fmt.Sprintf("r%d.sock", i+1)))}
	}
	// Each back-end also has its port's subnets (which the table may hold
	// too: the connected route wins), IPv6's with an IPv6 table.
	connected := []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	if ipv6 {
		connected = append(connected, ribBenchSubnet6)
	}
	want := len(prefixes) + len(connected)
	for _, p := range prefixes {
		if slices.Contains(connected, p) {
			want--
		}
	}
	if err := waitFor(5*time.Minute, 50*time.Millisecond, func() bool {
		for _, c := range clients {
			if c.routes() < want {
				return false
			}
		}
		return true
	}); err != nil {
		return nil, fmt.Errorf("the back-ends never held every route: %w", err)
	}
	r.DistributeSeconds = time.Since(loaded).Seconds()
	for _, p := range st.Processes {
		if strings.HasPrefix(p.Host, "r") {
			r.BackendRSSMB = append(r.BackendRSSMB, rssMB(p.PID))
		}
	}
	suitePID := birdPID(filepath.Join(dir, "vcp", "bird.conf"))
	r.SuiteRSSMB = rssMB(suitePID)
	if o.Clients > 0 {
		// What the reflector sends: every route but one the VCP's own
		// connected network hides (want counts that network once).
		if err := ribFanout(r, dir, spec, suitePID, o.Clients, want-1); err != nil {
			return nil, err
		}
	}
	return r, ribChanges(r, o.Changes, dir, spec, bird, clients)
}

// ribChanges times o.Changes announcements and withdrawals at the peer
// (each of a prefix of its own), from the peer's vtysh to every
// back-end's FIB, and from the VCP's RIB to them.
func ribChanges(r *RIBResult, changes int, dir string, spec *lab.Spec, bird string, clients []routerClient) error {
	var ms, fromVCP []float64
	for i := 0; i < changes; i++ {
		// Public space: the default import policy takes it from an eBGP
		// peer (100.64.0.0/10 below it is shared space, a martian).
		p := fmt.Sprintf("100.%d.%d.0/24", 128+i/256, i%256)
		for _, add := range []bool{true, false} {
			cmd := "network " + p
			if !add {
				cmd = "no " + cmd
			}
			t0 := time.Now()
			if out, err := exec.Command("nsenter", "--net=/var/run/netns/"+lab.Namespace(spec.Name, "peer"), "--",
				"vtysh", "--vty_socket", dir, "-d", "bgpd", "-c", "configure terminal", "-c", "router bgp 65010",
				"-c", "address-family ipv4 unicast", "-c", cmd).CombinedOutput(); err != nil {
				return fmt.Errorf("vtysh: %v: %s", err, out)
			}
			if err := waitFor(10*time.Second, time.Millisecond, func() bool { return birdHas(bird, p) == add }); err != nil {
				return fmt.Errorf("change %s (add %v) never reached the VCP", p, add)
			}
			t1 := time.Now()
			if err := waitFor(10*time.Second, time.Millisecond, func() bool {
				for _, c := range clients {
					if c.has(p) != add {
						return false
					}
				}
				return true
			}); err != nil {
				return fmt.Errorf("change %s (add %v) never reached every back-end", p, add)
			}
			ms = append(ms, float64(time.Since(t0).Microseconds())/1000)
			fromVCP = append(fromVCP, float64(time.Since(t1).Microseconds())/1000)
		}
	}
	r.ChangeMs = quantiles(ms)
	r.VCPToFIBMs = quantiles(fromVCP)
	return nil
}

// routerClient asks a back-end how many routes it has, and whether it
// has one.
type routerClient struct{ *routerapi.Client }

// routes counts both families' routes.
func (c routerClient) routes() int {
	s, err := c.Status()
	if err != nil {
		return 0
	}
	return s.Routes + s.Routes6
}

func (c routerClient) has(p string) bool {
	rs, err := c.Route(p)
	return err == nil && len(rs) == 1
}

// waitFor asks ok every interval until it says yes, for limit at most.
// Loads are watched every 50 ms (asking an agent too often slows what is
// measured), single changes every millisecond.
func waitFor(limit, interval time.Duration, ok func() bool) error {
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v", limit)
		}
		time.Sleep(interval)
	}
	return nil
}

var birdImported = regexp.MustCompile(`Routes:\s+(\d+) imported`)

// birdRoutes is the number of routes BIRD's protocols have imported (0 if
// it is not up). Not `show route count`: that walks the whole table, and
// asked often it keeps BIRD from doing what is measured.
func birdRoutes(socket string) int {
	out, err := exec.Command("birdc", "-s", socket, "show", "protocols", "all").CombinedOutput()
	if err != nil {
		return 0
	}
	n := 0
	for _, m := range birdImported.FindAllSubmatch(out, -1) {
		i, _ := strconv.Atoi(string(m[1]))
		n += i
	}
	return n
}

// birdHas says whether BIRD's table holds p.
func birdHas(socket, p string) bool {
	out, _ := exec.Command("birdc", "-s", socket, "show", "route", p).CombinedOutput()
	return strings.Contains(string(out), p+" ")
}

func rssMB(pid int) float64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.Atoi(f[1])
			return float64(kb) / 1024
		}
	}
	return 0
}

func quantiles(xs []float64) Quantiles {
	if len(xs) == 0 {
		return Quantiles{}
	}
	sort.Float64s(xs)
	at := func(q float64) float64 { return xs[min(len(xs)-1, int(q*float64(len(xs))))] }
	return Quantiles{P50: at(0.5), P99: at(0.99), Max: xs[len(xs)-1], N: len(xs)}
}

// ribBenchKey is the deployment key of the bench's labs.
var ribBenchKey = bytes.Repeat([]byte{0x5e}, 32)

// writeRIBFiles writes the key, the route file, every element's config,
// the peer's config and the lab: a peer on the LB's port, the LB, the VCP
// and the back-ends on a switch, every element an msr process.
// ribBenchSubnet6 is the port's IPv6 subnet in `bench rib` with an IPv6
// table, whose routes go via its ::20.
var ribBenchSubnet6 = netip.MustParsePrefix("2001:db8:10::/64")

func writeRIBFiles(dir, msr string, prefixes []netip.Prefix, backends, clients int, ipv6 bool) error {
	port6, via, pool := "", "192.0.2.20", ""
	if ipv6 {
		port6, via = `, address6: "2001:db8:10::1/64"`, `"2001:db8:10::20"`
		// The IPv6 group pool sized for the table, as an operator sizes it.
		pool = fmt.Sprintf("fib6_lines: %d\n", max(routerapi.DefaultFIB6Lines, routerapi.FIB6LinesFor(prefixes, 16)*5/4))
	}
	files := map[string]string{
		"key": hex.EncodeToString(ribBenchKey),
		// The RIB feed's password, which the clients sign with too.
		dist.RIBKeyFile: dist.Key{Secret: ribBenchKey}.RIBPassword(),
		"bgpd.conf":     demo.PeerBGP{ASN: 65010, RouterID: "192.0.2.10", Router: "192.0.2.1", RouterASN: 65000}.Config(),
		"lb.yaml": "name: bench-rib-lb\nkey_file: " + dir + "/key\npin_dir: /sys/fs/bpf/msr-bench-rib/lb\nsocket: " + dir + "/lb.sock\n" +
			"ports:\n  e0: {role: external, address: 192.0.2.1/24, vlan: 10}\n  i0: {role: internal, default: true}\n",
		"vcp.yaml": "name: bench-rib-vcp\nkey_file: " + dir + "/key\ninterface: eth0\nsocket: " + dir + "/vcp.sock\n" +
			"external_ports:\n  - {lb: bench-rib-lb, mac: \"02:00:00:00:e0:00\", address: 192.0.2.1/24" + port6 + ", vlan: 10}\n" +
			"routing:\n  asn: 65000\n  run_dir: " + dir + "/vcp\n  bgp:\n    - {neighbor: 192.0.2.10, asn: 65010, export: [connected]}\n" +
			"  static_files:\n    - {file: " + dir + "/routes.dat, via: " + via + "}\n  backends: {listen: 10.0.0.1, range: 10.0.0.0/24}\n",
	}
	var labText strings.Builder
	fmt.Fprintf(&labText, `name: bench-rib
hosts:
  peer:
    interfaces:
      eth0: {addresses: [192.0.2.10/24], xdp_pass: on, tx_checksum: off}
    processes:
      - {name: bgpd, command: [/usr/lib/frr/bgpd, -f, %[1]s/bgpd.conf, -Z, -S, -i, %[1]s/bgpd.pid, --vty_socket, %[1]s, -P, "0"]}
  lb:
    interfaces:
      e0: {mac: "02:00:00:00:e0:00"}
      i0: {mac: "02:00:00:00:10:00", vlan_offload: off}
    processes:
      - {name: lb, command: [%[2]s, lb, --config, %[1]s/lb.yaml]}
  vcp:
    interfaces:
      eth0: {addresses: [10.0.0.1/24], mac: "02:00:00:00:cc:01", vlan_offload: off, tx_checksum: off}
    processes:
      - {name: vcp, command: [%[2]s, vcp, --config, %[1]s/vcp.yaml]}
`, dir, msr)
	links := "links:\n  - ends: [peer:eth0, lb:e0]\n  - ends: [lb:i0, sw:p0]\n  - ends: [vcp:eth0, sw:p1]\n"
	ports := "      p0: {xdp_pass: on, vlan_offload: off}\n      p1: {vlan_offload: off}\n"
	for i := 1; i <= backends; i++ {
		files[fmt.Sprintf("r%d.yaml", i)] = fmt.Sprintf("name: bench-rib-r%d\nkey_file: %s/key\ninterface: eth0\npin_dir: /sys/fs/bpf/msr-bench-rib/r%d\n"+
			"socket: %s/r%d.sock\nports:\n  net1: {vlan: 10, address: 192.0.2.1/24%s}\nrib: {neighbor: 10.0.0.1, asn: 65000}\n%s", i, dir, i, dir, i, port6, pool)
		fmt.Fprintf(&labText, `  r%[1]d:
    interfaces:
      eth0: {addresses: [10.0.0.%[2]d/24], vlan_offload: off, tx_checksum: off}
    processes:
      - {name: router, command: [%[3]s, router, --config, %[4]s/r%[1]d.yaml]}
`, i, 10+i, msr, dir)
		links += fmt.Sprintf("  - ends: [r%d:eth0, sw:p%d]\n", i, i+1)
		ports += fmt.Sprintf("      p%d: {xdp_pass: on, vlan_offload: off}\n", i+1)
	}
	if clients > 0 {
		// The clients' host: one address a client, in the VCP's range.
		var addrs []string
		for c := range clients {
			addrs = append(addrs, fmt.Sprintf("10.0.0.%d/24", ribClientBase+c))
		}
		fmt.Fprintf(&labText, "  clients:\n    interfaces:\n      eth0: {addresses: [%s], vlan_offload: off, tx_checksum: off}\n", strings.Join(addrs, ", "))
		links += fmt.Sprintf("  - ends: [clients:eth0, sw:p%d]\n", backends+2)
		ports += fmt.Sprintf("      p%d: {vlan_offload: off}\n", backends+2)
		// One BIRD a client (one BIRD's second protocol to the same
		// neighbor stays Idle), each listening on its own address only
		// (strict bind), or the second BIRD's session never starts.
		// The feed is signed with TCP-MD5 under the deployment's RIB
		// password (rib.key), as the back-ends sign theirs.
		password := files[dist.RIBKeyFile]
		for c := range clients {
			files[fmt.Sprintf("client%d.conf", c)] = fmt.Sprintf("router id 10.0.1.%d;\nprotocol device {}\n"+
				"protocol bgp feed { local 10.0.0.%d as 65000; neighbor 10.0.0.1 as 65000; strict bind yes; password \"%s\"; ipv4 { import filter { reject; }; export none; }; }\n",
				1+c, ribClientBase+c, password)
		}
	}
	labText.WriteString("switches:\n  sw:\n    interfaces:\n" + ports + links)
	files["lab.yaml"] = labText.String()
	if err := writeFiles(dir, files); err != nil {
		return err
	}
	if err := dist.MakeKeys(dir, 1, dist.DefaultVCPKeyID); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "routes.dat"))
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for _, p := range prefixes {
		fmt.Fprintf(w, "%s\t1\n", p)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// ribClientBase is the first client's address, 10.0.0.ribClientBase: the
// back-ends have 10.0.0.11 onwards, the VCP's range is 10.0.0.0/24.
const ribClientBase = 100

// ribFanout starts the receive-only clients once the VCP's suite holds
// every route and times the full table's trip to all of them; their
// import filter rejects each route after counting it, so the clients
// keep nothing and the figure is the reflector's.
func ribFanout(r *RIBResult, dir string, spec *lab.Spec, suitePID, clients, routes int) error {
	if clients > 150 {
		return fmt.Errorf("--clients %d: at most 150 (10.0.0.100-249)", clients)
	}
	// The clients' configurations differ only in their addresses: BIRD
	// checks one, before the clock starts.
	if out, err := exec.Command("bird", "-p", "-c", filepath.Join(dir, "client0.conf")).CombinedOutput(); err != nil {
		return fmt.Errorf("the clients' BIRD config: %v: %s", err, out)
	}
	r.Clients = clients
	r.SuiteRSSBeforeMB = r.SuiteRSSMB
	cpu0 := processCPU(suitePID)
	start := time.Now()
	var sockets []string
	var procs []*exec.Cmd
	defer func() {
		for _, cmd := range procs {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	for c := range clients {
		socket := filepath.Join(dir, fmt.Sprintf("client%d.ctl", c))
		cmd := exec.Command("nsenter", "--net=/var/run/netns/"+lab.Namespace(spec.Name, "clients"), "--",
			"bird", "-f", "-c", filepath.Join(dir, fmt.Sprintf("client%d.conf", c)), "-s", socket)
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start client %d's BIRD: %w", c, err)
		}
		sockets, procs = append(sockets, socket), append(procs, cmd)
	}
	done := make([]bool, clients)
	if err := waitFor(10*time.Minute, 500*time.Millisecond, func() bool {
		all := true
		for c, socket := range sockets {
			if !done[c] {
				got := birdReceived(socket)
				done[c] = len(got) == 1 && got[0] >= routes
			}
			all = all && done[c]
		}
		return all
	}); err != nil {
		n := 0
		for _, d := range done {
			if d {
				n++
			}
		}
		return fmt.Errorf("%d of %d clients received %d routes: %w", n, clients, routes, err)
	}
	r.ClientsFanoutS = time.Since(start).Seconds()
	r.ClientsSuiteCPUSec = (processCPU(suitePID) - cpu0).Seconds()
	r.SuiteRSSMB = rssMB(suitePID)
	for _, cmd := range procs {
		// nsenter execs bird: the process is BIRD.
		r.ClientsSuiteRSSMB += rssMB(cmd.Process.Pid)
	}
	return nil
}

var birdImportUpdates = regexp.MustCompile(`Import updates:\s+(\d+)`)

// birdReceived is, per BGP protocol of a BIRD, the routes it received
// (its import updates, filtered or not).
func birdReceived(socket string) []int {
	out, err := exec.Command("birdc", "-s", socket, "show", "protocols", "all").CombinedOutput()
	if err != nil {
		return nil
	}
	var got []int
	for _, m := range birdImportUpdates.FindAllSubmatch(out, -1) {
		n, _ := strconv.Atoi(string(m[1]))
		got = append(got, n)
	}
	return got
}

// birdPID finds the BIRD whose configuration is conf (its control socket
// is in a directory of its own, BIRD's user's).
func birdPID(conf string) int {
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, c := range cmdlines {
		b, err := os.ReadFile(c)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 0 && filepath.Base(args[0]) == "bird" && slices.Contains(args, conf) {
			pid, _ := strconv.Atoi(strings.Split(c, "/")[2])
			return pid
		}
	}
	return 0
}

// WriteText prints a result for people.
func (r *RIBResult) WriteText(w io.Writer) {
	family := "IPv4"
	if r.IPv6 {
		family = "IPv6"
	}
	fmt.Fprintf(w, "%d %s routes to %d back-ends: BIRD loaded them in %.1f s, every back-end's FIB held them %.1f s later\n",
		r.Routes, family, r.Backends, r.SuiteLoadSeconds, r.DistributeSeconds)
	fmt.Fprintf(w, "one change (announce or withdraw), from the peer to every FIB: p50 %.1f ms, p99 %.1f ms, max %.1f ms over %d\n",
		r.ChangeMs.P50, r.ChangeMs.P99, r.ChangeMs.Max, r.ChangeMs.N)
	fmt.Fprintf(w, "  from the VCP's suite to every FIB: p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
		r.VCPToFIBMs.P50, r.VCPToFIBMs.P99, r.VCPToFIBMs.Max)
	fmt.Fprintf(w, "back-end agents' resident sets: %v MB; the VCP's BIRD: %.0f MB\n", r.BackendRSSMB, r.SuiteRSSMB)
	if r.Clients > 0 {
		fmt.Fprintf(w, "%d receive-only clients had every route %.1f s after their sessions started (the VCP's BIRD used %.1f s of CPU; %.0f MB before, %.0f MB after; the clients' BIRDs together %.0f MB)\n",
			r.Clients, r.ClientsFanoutS, r.ClientsSuiteCPUSec, r.SuiteRSSBeforeMB, r.SuiteRSSMB, r.ClientsSuiteRSSMB)
	}
}
