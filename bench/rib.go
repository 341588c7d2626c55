package bench

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/msr-router/msr/internal/routetable"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/router/routerapi"
)

// RIBOptions is one RIB distribution benchmark: the VCP's routing suite
// holds Routes static routes and reflects them to Backends back-ends; then
// an external BGP peer announces and withdraws one prefix Changes times.
type RIBOptions struct {
	Routes   string // "pyasn" or a number of prefixes
	Backends int
	Changes  int
	// Msr is the msr binary the lab's elements run (default: this one).
	Msr string
}

// RIBResult is what `msr bench rib` reports.
type RIBResult struct {
	Routes            int       `json:"routes"`
	Backends          int       `json:"backends"`
	SuiteLoadSeconds  float64   `json:"suite_load_s"`   // BIRD up to holding every route
	DistributeSeconds float64   `json:"distribute_s"`   // BIRD holding them to every back-end's FIB holding them
	ChangeMs          Quantiles `json:"change_ms"`      // a peer's announcement or withdrawal to every back-end's FIB
	VCPToFIBMs        Quantiles `json:"vcp_to_fib_ms"`  // the VCP's suite holding the change to every back-end's FIB
	BackendRSSMB      []float64 `json:"backend_rss_mb"` // each back-end agent's resident set, all routes loaded
}

// Quantiles of a sample.
type Quantiles struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
	N   int     `json:"n"`
}

// RIB runs the benchmark in a lab of msr processes (this binary).
func RIB(o RIBOptions) (*RIBResult, error) {
	self := o.Msr
	if self == "" {
		var err error
		if self, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	prefixes, err := routetable.Named(o.Routes)
	if err != nil || prefixes == nil {
		return nil, fmt.Errorf("--routes: pyasn or a number of prefixes (%v)", err)
	}
	dir, err := os.MkdirTemp("", "msr-bench-rib")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	if err := writeRIBFiles(dir, self, prefixes, o.Backends); err != nil {
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
	r := &RIBResult{Routes: len(prefixes), Backends: o.Backends}
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
	// Each back-end also has its port's subnet (which the table may hold
	// too: the connected route wins).
	want := len(prefixes) + 1
	for _, p := range prefixes {
		if p == netip.MustParsePrefix("192.0.2.0/24") {
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
	var ms, fromVCP []float64
	for i := 0; i < o.Changes; i++ {
		p := fmt.Sprintf("100.%d.%d.0/24", 64+i/256, i%256)
		for _, add := range []bool{true, false} {
			cmd := "network " + p
			if !add {
				cmd = "no " + cmd
			}
			t0 := time.Now()
			if out, err := exec.Command("nsenter", "--net=/var/run/netns/"+lab.Namespace(spec.Name, "peer"), "--",
				"vtysh", "--vty_socket", dir, "-d", "bgpd", "-c", "configure terminal", "-c", "router bgp 65010",
				"-c", "address-family ipv4 unicast", "-c", cmd).CombinedOutput(); err != nil {
				return nil, fmt.Errorf("vtysh: %v: %s", err, out)
			}
			if err := waitFor(10*time.Second, time.Millisecond, func() bool { return birdHas(bird, p) == add }); err != nil {
				return nil, fmt.Errorf("change %s (add %v) never reached the VCP", p, add)
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
				return nil, fmt.Errorf("change %s (add %v) never reached every back-end", p, add)
			}
			ms = append(ms, float64(time.Since(t0).Microseconds())/1000)
			fromVCP = append(fromVCP, float64(time.Since(t1).Microseconds())/1000)
		}
	}
	r.ChangeMs = quantiles(ms)
	r.VCPToFIBMs = quantiles(fromVCP)
	return r, nil
}

// routerClient asks a back-end how many routes it has, and whether it
// has one.
type routerClient struct{ *routerapi.Client }

func (c routerClient) routes() int {
	s, err := c.Status()
	if err != nil {
		return 0
	}
	return s.Routes
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

// writeRIBFiles writes the key, the route file, every element's config,
// the peer's config and the lab: a peer on the LB's port, the LB, the VCP
// and the back-ends on a switch, every element an msr process.
func writeRIBFiles(dir, msr string, prefixes []netip.Prefix, backends int) error {
	files := map[string]string{
		"key": strings.Repeat("5e", 32),
		"bgpd.conf": `frr defaults traditional
router bgp 65010
 bgp router-id 192.0.2.10
 no bgp ebgp-requires-policy
 no bgp network import-check
 neighbor 192.0.2.1 remote-as 65000
`,
		"lb.yaml": "name: bench-rib-lb\nkey_file: " + dir + "/key\npin_dir: /sys/fs/bpf/msr-bench-rib/lb\nsocket: " + dir + "/lb.sock\n" +
			"ports:\n  e0: {role: external, address: 192.0.2.1/24, vlan: 10}\n  i0: {role: internal, default: true}\n",
		"vcp.yaml": "name: bench-rib-vcp\nkey_file: " + dir + "/key\ninterface: eth0\nsocket: " + dir + "/vcp.sock\n" +
			"external_ports:\n  - {lb: bench-rib-lb, mac: \"02:00:00:00:e0:00\", address: 192.0.2.1/24, vlan: 10}\n" +
			"routing:\n  asn: 65000\n  run_dir: " + dir + "/vcp\n  bgp:\n    - {neighbor: 192.0.2.10, asn: 65010}\n" +
			"  static_files:\n    - {file: " + dir + "/routes.dat, via: 192.0.2.20}\n  backends: {listen: 10.0.0.1, range: 10.0.0.0/24}\n",
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
			"socket: %s/r%d.sock\nports:\n  net1: {vlan: 10, address: 192.0.2.1/24}\nrib: {neighbor: 10.0.0.1, asn: 65000}\n", i, dir, i, dir, i)
		fmt.Fprintf(&labText, `  r%[1]d:
    interfaces:
      eth0: {addresses: [10.0.0.%[2]d/24], vlan_offload: off, tx_checksum: off}
    processes:
      - {name: router, command: [%[3]s, router, --config, %[4]s/r%[1]d.yaml]}
`, i, 10+i, msr, dir)
		links += fmt.Sprintf("  - ends: [r%d:eth0, sw:p%d]\n", i, i+1)
		ports += fmt.Sprintf("      p%d: {xdp_pass: on, vlan_offload: off}\n", i+1)
	}
	labText.WriteString("switches:\n  sw:\n    interfaces:\n" + ports + links)
	files["lab.yaml"] = labText.String()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			return err
		}
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

// WriteText prints a result for people.
func (r *RIBResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "%d routes to %d back-ends: BIRD loaded them in %.1f s, every back-end's FIB held them %.1f s later\n",
		r.Routes, r.Backends, r.SuiteLoadSeconds, r.DistributeSeconds)
	fmt.Fprintf(w, "one change (announce or withdraw), from the peer to every FIB: p50 %.1f ms, p99 %.1f ms, max %.1f ms over %d\n",
		r.ChangeMs.P50, r.ChangeMs.P99, r.ChangeMs.Max, r.ChangeMs.N)
	fmt.Fprintf(w, "  from the VCP's suite to every FIB: p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
		r.VCPToFIBMs.P50, r.VCPToFIBMs.P99, r.VCPToFIBMs.Max)
	fmt.Fprintf(w, "back-end agents' resident sets: %v MB\n", r.BackendRSSMB)
}
