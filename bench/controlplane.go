package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/element"
	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// `msr bench vcp` measures the virtual control plane at a scale the lab
// cannot build from real elements: one real `msr vcp` process, and a DIST
// load generator that speaks for hundreds of elements. Each element is an
// identity of its own (sender id, epoch, sequence numbers, MAC) whose
// hellos are authenticated with the deployment key, sent at the default
// interval and spread over it as unsynchronized elements' are; the LBs
// among them install what the VCP sends them (their hellos report the
// generation), so the VCP works as it does in a router of that size. It
// measures the VCP's CPU and memory, then stops one back-end's hellos and
// times every LB's new table: the VCP's own pass (last_push), and from
// the back-end's last hello to the last LB's complete table on the wire.

// VCPScaleOptions is `msr bench vcp`.
type VCPScaleOptions struct {
	Backends int
	LBs      int
	// PortsPerLB external ports on each LB (0 to 15), in the VCP's file
	// as one port range: every back-end is sent them all, paged.
	PortsPerLB int
	Duration   time.Duration // the CPU and memory measurement
	Msr        string        // the msr binary the VCP runs (default: this one)
}

// VCPScaleResult is what `msr bench vcp` reports.
type VCPScaleResult struct {
	Backends int `json:"backends"`
	LBs      int `json:"lbs"`
	Ports    int `json:"ports"` // external ports in all
	// StartS: the VCP's start to its API's first answer (its mirrors made).
	StartS          float64 `json:"start_s"`
	HelloIntervalMs int     `json:"hello_interval_ms"`
	HellosPerSecond float64 `json:"hellos_per_s"` // sent to the VCP during the measurement
	// VCPCPU is the VCP's CPU time over wall time during the measurement
	// (1 = one core); RSS its resident memory at the end.
	VCPCPU   float64 `json:"vcp_cpu"`
	VCPRSSMB float64 `json:"vcp_rss_mb"`
	// FirstTablesS: the elements' first hellos to every LB holding a
	// table of every back-end.
	FirstTablesS float64 `json:"first_tables_s"`
	// FirstPortsS: the first hellos to every back-end holding every
	// external port (the digest its hello reports); 0 without ports.
	FirstPortsS float64 `json:"first_ports_s,omitempty"`
	// What the VCP sent during the measurement, on its interconnect
	// port: DIST to every element (tables, configs, announcements).
	TxBytesPerSecond  float64 `json:"tx_bytes_per_s"`
	TxFramesPerSecond float64 `json:"tx_frames_per_s"`
	// After one back-end's hellos stop: the VCP's pass that computed and
	// sent every LB's table (its own clock), and the back-end's last
	// hello to the last LB's complete table (the hold time included).
	PushMs        float64 `json:"push_ms"`
	PushEntries   int     `json:"push_entries"`
	PushFrames    int     `json:"push_frames"`
	DeathToTables float64 `json:"death_to_tables_ms"`
	HoldMs        int     `json:"hold_ms"`
	// Refused counts DIST frames the VCP refused (auth, replay, ...): 0
	// when the generator is what it claims.
	Refused uint64 `json:"refused"`
}

// VCPScale runs the benchmark.
func VCPScale(o VCPScaleOptions, progress io.Writer) (*VCPScaleResult, error) {
	if o.Backends < 1 || o.Backends > 4000 || o.LBs < 1 || o.LBs > 250 {
		return nil, fmt.Errorf("--backends 1 to 4000, --lbs 1 to 250")
	}
	if o.PortsPerLB < 0 || o.PortsPerLB > dist.MaxPorts-1 || o.LBs*o.PortsPerLB > dist.MaxRouterPorts {
		return nil, fmt.Errorf("--ports-per-lb 0 to %d, and %d in all at most", dist.MaxPorts-1, dist.MaxRouterPorts)
	}
	if o.Duration == 0 {
		o.Duration = 30 * time.Second
	}
	self, err := msrBinary(o.Msr)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "msr-bench-vcp")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	secret := strings.Repeat("5e", 32)
	files := map[string]string{
		"key":      secret,
		"vcp.yaml": "name: bench-vcp\nkey_file: " + dir + "/key\ninterface: eth0\nsocket: " + dir + "/vcp.sock\n" + portRange(o.LBs, o.PortsPerLB),
		"lab.yaml": fmt.Sprintf(`name: bench-vcp
hosts:
  vcp:
    interfaces:
      eth0: {mac: "02:00:00:00:cc:01", vlan_offload: off}
    processes:
      - {name: vcp, command: [%s, vcp, --config, %s/vcp.yaml]}
  elements:
    interfaces:
      eth0: {mac: "02:00:00:00:ee:01", vlan_offload: off}
links:
  - ends: [vcp:eth0, elements:eth0]
`, self, dir),
	}
	if err := writeFiles(dir, files); err != nil {
		return nil, err
	}
	if err := dist.MakeKeys(dir, element.DefaultKeyID, dist.DefaultVCPKeyID); err != nil {
		return nil, err
	}
	spec, err := lab.LoadFile(filepath.Join(dir, "lab.yaml"))
	if err != nil {
		return nil, err
	}
	st, err := lab.Up(spec)
	if err != nil {
		return nil, err
	}
	defer lab.Down(spec.Name)
	pid := 0
	for _, p := range st.Processes {
		if p.Host == "vcp" {
			pid = p.PID
		}
	}
	// The VCP answers once it has made a mirror of every external port
	// (a veth pair each): seconds at a thousand ports.
	client := vcpapi.Local("", filepath.Join(dir, "vcp.sock"))
	started := time.Now()
	if err := waitFor(10*time.Second+time.Duration(o.LBs*o.PortsPerLB)*100*time.Millisecond, 50*time.Millisecond, func() bool { _, err := client.Status(); return err == nil }); err != nil {
		return nil, fmt.Errorf("the VCP never answered: %w", err)
	}
	vcpStart := time.Since(started)
	keys, err := (&element.Config{KeyFile: filepath.Join(dir, "key")}).Keys(false)
	if err != nil {
		return nil, err
	}
	var g *helloGen
	err = netns.Do(lab.Namespace(spec.Name, "elements"), func() (err error) {
		g, err = newHelloGen("eth0", keys, o.Backends, o.LBs, o.PortsPerLB)
		return err
	})
	if err != nil {
		return nil, err
	}
	defer g.close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	go g.run(ctx)
	go g.receive(ctx)
	r := &VCPScaleResult{Backends: o.Backends, LBs: o.LBs, Ports: o.LBs * o.PortsPerLB, StartS: vcpStart.Seconds(), HelloIntervalMs: int(g.interval / time.Millisecond),
		HoldMs: int(g.interval/time.Millisecond) * int(g.hold)}
	fmt.Fprintf(progress, "%d back-ends and %d LBs sending hellos to the VCP\n", o.Backends, o.LBs)
	if err := waitFor(60*time.Second, 20*time.Millisecond, func() bool { return g.everyLBHas(o.Backends) }); err != nil {
		known := "the VCP does not answer"
		if st, serr := client.Status(); serr == nil {
			known = fmt.Sprintf("the VCP knows %d elements, DIST %v", len(st.Elements), st.DIST)
		}
		return nil, fmt.Errorf("the LBs never held a table of every back-end (%s; %d hellos sent; the LBs hold %s): %w", known, g.sent(), g.holding(), err)
	}
	r.FirstTablesS = time.Since(start).Seconds()
	if r.Ports > 0 {
		if err := waitFor(60*time.Second, 20*time.Millisecond, g.everyBackendServes); err != nil {
			return nil, fmt.Errorf("the back-ends never held every port (%s): %w", g.serving(), err)
		}
		r.FirstPortsS = time.Since(start).Seconds()
	}
	r.measureSteady(g, lab.Namespace(spec.Name, "vcp"), pid, o.Duration)
	fmt.Fprintf(progress, "steady: VCP %.1f%% of a core, %.0f MB resident, %.0f hellos/s in, %.0f kB/s out\n", 100*r.VCPCPU, r.VCPRSSMB, r.HellosPerSecond, r.TxBytesPerSecond/1000)
	return r, r.measureDeath(g, client, o.Backends)
}

// measureSteady measures the steady state for d: what the elements'
// hellos cost the VCP (pid, in namespace ns), and what it sends them.
func (r *VCPScaleResult) measureSteady(g *helloGen, ns string, pid int, d time.Duration) {
	time.Sleep(2 * time.Second)
	cpu0, t0, sent0, tx0 := processCPU(pid), time.Now(), g.sent(), txCounters(ns)
	time.Sleep(d)
	cpu1, t1, sent1, tx1 := processCPU(pid), time.Now(), g.sent(), txCounters(ns)
	r.VCPCPU = (cpu1 - cpu0).Seconds() / t1.Sub(t0).Seconds()
	r.HellosPerSecond = float64(sent1-sent0) / t1.Sub(t0).Seconds()
	r.TxBytesPerSecond = float64(tx1[0]-tx0[0]) / t1.Sub(t0).Seconds()
	r.TxFramesPerSecond = float64(tx1[1]-tx0[1]) / t1.Sub(t0).Seconds()
	r.VCPRSSMB = rssMB(pid)
}

// measureDeath stops the first of backends' hellos and times every LB's
// table without it, and the VCP's pass that made them.
func (r *VCPScaleResult) measureDeath(g *helloGen, client *vcpapi.Client, backends int) error {
	before, _ := client.Status()
	died := g.silence(0)
	if err := waitFor(10*time.Second, time.Millisecond, func() bool { return g.everyLBHas(backends - 1) }); err != nil {
		return fmt.Errorf("the LBs never lost the dead back-end: %w", err)
	}
	r.DeathToTables = float64(g.lastComplete().Sub(died).Microseconds()) / 1000
	after, err := client.Status()
	if err != nil {
		return err
	}
	if after.LastPush == nil || (before.LastPush != nil && !after.LastPush.At.After(before.LastPush.At)) {
		return errors.New("the VCP reports no table push after the back-end died")
	}
	r.PushMs, r.PushEntries, r.PushFrames = after.LastPush.Ms, after.LastPush.Entries, after.LastPush.Frames
	for reason, n := range after.DIST {
		if reason != "sent" && reason != "send_retried" && reason != "accepted" {
			r.Refused += n
		}
	}
	return nil
}

// WriteText prints a result for people.
func (r *VCPScaleResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "%d back-ends and %d LBs with %d external ports, hellos every %d ms (%.0f a second):\n", r.Backends, r.LBs, r.Ports, r.HelloIntervalMs, r.HellosPerSecond)
	fmt.Fprintf(w, "  the VCP: %.1f%% of a core, %.1f MB resident; every LB held every back-end %.1f s after the first hellos\n",
		100*r.VCPCPU, r.VCPRSSMB, r.FirstTablesS)
	if r.Ports > 0 {
		fmt.Fprintf(w, "  the VCP answered %.1f s after its start (a mirror of every port made); every back-end held every port %.1f s after the first hellos\n", r.StartS, r.FirstPortsS)
	}
	fmt.Fprintf(w, "  the VCP sent %.1f kB/s in %.0f frames/s\n", r.TxBytesPerSecond/1000, r.TxFramesPerSecond)
	fmt.Fprintf(w, "  one back-end dies: the VCP computed and sent %d LBs' tables (%d entries, %d frames) in %.1f ms;\n",
		r.LBs, r.PushEntries, r.PushFrames, r.PushMs)
	fmt.Fprintf(w, "  its last hello to the last LB's complete table: %.0f ms (the hold time is %d ms)\n", r.DeathToTables, r.HoldMs)
	fmt.Fprintf(w, "  DIST frames the VCP refused: %d\n", r.Refused)
}

// portRange is the VCP file's external ports: portsPerLB on each of the
// generator's LBs (lb000 ...), the LB's port 0 internal.
func portRange(lbs, portsPerLB int) string {
	if portsPerLB == 0 {
		return ""
	}
	return fmt.Sprintf("external_port_ranges:\n  - {lbs: \"lb[000-%03d]\", ports: \"[1-%d]\", mac: \"02:0e:{lb:02x}:00:00:{port:02x}\", address: \"10.{lb}.{port}.1/24\", vlan: %d}\n",
		lbs-1, portsPerLB, firstVLAN)
}

// firstVLAN is the generator's LBs' first external port's VLAN.
const firstVLAN = 100

// txCounters are the bytes and frames sent on eth0 of a namespace.
func txCounters(ns string) [2]uint64 {
	out, err := exec.Command("ip", "-j", "-s", "-n", ns, "link", "show", "eth0").Output()
	var links []struct {
		Stats struct {
			TX struct{ Bytes, Packets uint64 } `json:"tx"`
		} `json:"stats64"`
	}
	if err != nil || json.Unmarshal(out, &links) != nil || len(links) == 0 {
		return [2]uint64{}
	}
	return [2]uint64{links[0].Stats.TX.Bytes, links[0].Stats.TX.Packets}
}

// processCPU is a process's user and system CPU time so far, all its
// threads.
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// After the state: fields 14 and 15 of stat(5) are utime and stime, in
	// clock ticks (USER_HZ, 100 on Linux).
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// helloGen speaks for many elements on one DIST socket.
type helloGen struct {
	conn     *dist.Conn
	interval time.Duration
	hold     uint8
	elems    []*fakeElement
	ports    int // external ports in all, which every back-end is sent
	mu       sync.Mutex
	frames   uint64
	last     time.Time // the newest complete table any LB received
}

// fakeElement is one identity: a back-end, or an LB that installs the
// tables sent to it.
type fakeElement struct {
	sender   *dist.Sender
	mac      net.HardwareAddr
	hello    dist.Hello
	silent   bool
	lastSent time.Time
	// An LB's table being received, and the last complete one.
	gen, installed   uint32
	entries, applied int
	// A back-end's BACKEND_CONFIG being gathered, and the ports of the
	// last whole one.
	config dist.BackendConfigSet
	served int
}

func newHelloGen(ifname string, keys element.Keys, backends, lbs, portsPerLB int) (*helloGen, error) {
	conn, err := dist.Listen(ifname, keys.Ring)
	if err != nil {
		return nil, err
	}
	g := &helloGen{conn: conn, interval: 100 * time.Millisecond, hold: 3, ports: lbs * portsPerLB}
	add := func(role dist.Role, kind byte, i int, name string) error {
		s, err := dist.NewSender(uint64(kind)<<32|uint64(i+1), keys.Seal)
		if err != nil {
			return err
		}
		mac := net.HardwareAddr{0x02, 0x00, 0x0e, kind, byte(i >> 8), byte(i)}
		e := &fakeElement{sender: s, mac: mac, hello: dist.Hello{Role: role, HelloIntervalMs: uint16(g.interval / time.Millisecond),
			HoldMultiplier: g.hold, Capacity: 10000, Name: name,
			Ports: []dist.PortStatus{{Index: 0, Role: dist.PortInternal, MAC: mac, Flags: dist.PortFlagUp, SpeedMbps: 10000, MTU: 1500}}}}
		if role == dist.RoleLB {
			for p := 1; p <= portsPerLB; p++ {
				e.hello.Ports = append(e.hello.Ports, dist.PortStatus{Index: uint8(p), Role: dist.PortExternal, VLAN: uint16(firstVLAN + i*portsPerLB + p - 1),
					MAC:    net.HardwareAddr{0x02, 0x0e, byte(i), 0, 0, byte(p)},
					Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), byte(p), 1}), 24), Flags: dist.PortFlagUp | dist.PortFlagAdminUp,
					SpeedMbps: 10000, MTU: 1500, Name: fmt.Sprintf("e%d", p)})
			}
		}
		g.elems = append(g.elems, e)
		return nil
	}
	for i := range backends {
		if err := add(dist.RoleRouter, 0xb, i, fmt.Sprintf("b%04d", i)); err != nil {
			return nil, err
		}
	}
	for i := range lbs {
		if err := add(dist.RoleLB, 0x1, i, fmt.Sprintf("lb%03d", i)); err != nil {
			return nil, err
		}
	}
	return g, nil
}

func (g *helloGen) close() { g.conn.Close() }

// run sends every element's hello once an interval, spread evenly over
// it.
func (g *helloGen) run(ctx context.Context) {
	step := g.interval / time.Duration(len(g.elems))
	next := time.Now()
	for ctx.Err() == nil {
		for _, e := range g.elems {
			g.mu.Lock()
			silent := e.silent
			h := e.hello
			h.Installed = e.installed
			g.mu.Unlock()
			if !silent {
				if f, err := e.sender.Seal(dist.GroupMAC, e.mac, &h); err == nil && g.conn.Send(f) == nil {
					g.mu.Lock()
					g.frames++
					e.lastSent = time.Now()
					g.mu.Unlock()
				}
			}
			next = next.Add(step)
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			}
		}
	}
}

// receive installs the tables the VCP sends the LBs.
func (g *helloGen) receive(ctx context.Context) {
	byMAC := map[string]*fakeElement{}
	for _, e := range g.elems {
		byMAC[e.mac.String()] = e
	}
	for ctx.Err() == nil {
		f, err := g.conn.Recv(100 * time.Millisecond)
		if err != nil {
			continue
		}
		e := byMAC[f.Dst.String()]
		if c, ok := f.Msg.(*dist.BackendConfig); ok && e != nil {
			if whole := e.config.Add(f.Header.Sender, c); whole != nil {
				g.mu.Lock()
				e.served, e.hello.PortsDigest = len(whole.Ports), dist.PortsDigest(whole.Ports)
				g.mu.Unlock()
			}
			continue
		}
		t, ok := f.Msg.(*dist.TableUpdate)
		if !ok || e == nil {
			continue
		}
		g.mu.Lock()
		if t.Flags&dist.TableFlush != 0 || t.Generation != e.gen {
			e.gen, e.entries = t.Generation, 0
		}
		e.entries += len(t.Entries)
		if t.Flags&dist.TableLast != 0 {
			e.applied, e.installed, g.last = e.entries, t.Generation, time.Now()
		}
		g.mu.Unlock()
	}
}

// everyLBHas says whether every LB's last complete table has n entries.
func (g *helloGen) everyLBHas(n int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, e := range g.elems {
		if e.hello.Role == dist.RoleLB && e.applied != n {
			return false
		}
	}
	return true
}

// everyBackendServes says whether every back-end holds every port.
func (g *helloGen) everyBackendServes() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, e := range g.elems {
		if e.hello.Role == dist.RoleRouter && e.served != g.ports {
			return false
		}
	}
	return true
}

// serving counts the back-ends by how many ports they hold.
func (g *helloGen) serving() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := map[int]int{}
	for _, e := range g.elems {
		if e.hello.Role == dist.RoleRouter {
			n[e.served]++
		}
	}
	return fmt.Sprintf("back-ends by ports held: %v of %d", n, g.ports)
}

// holding lists the LBs' tables: entries of the last complete one.
func (g *helloGen) holding() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, e := range g.elems {
		if e.hello.Role == dist.RoleLB {
			out = append(out, fmt.Sprintf("%s %d (generation %d)", e.hello.Name, e.applied, e.installed))
		}
	}
	return strings.Join(out, ", ")
}

func (g *helloGen) lastComplete() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.last
}

func (g *helloGen) sent() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.frames
}

// silence stops element i's hellos and returns when its last one was
// sent.
func (g *helloGen) silence(i int) time.Time {
	e := g.elems[i]
	g.mu.Lock()
	e.silent = true
	g.mu.Unlock()
	// A hello the sender had begun before it saw silent goes out within
	// microseconds; wait that out, then read the last.
	time.Sleep(10 * time.Millisecond)
	g.mu.Lock()
	defer g.mu.Unlock()
	return e.lastSent
}
