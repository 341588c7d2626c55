package lab

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/internal/xdp"
)

// RunDir holds one directory per lab that is up: its state and its
// processes' logs.
var RunDir = "/run/msr/labs"

// ErrAlreadyUp is returned by Up for a lab whose name is taken.
var ErrAlreadyUp = errors.New("lab is already up")

// Up builds the lab described by s. On failure it removes whatever it had
// made and returns the error of the step that failed.
func Up(s *Spec) (*State, error) {
	if Stale(s.Name) { // a restarted machine's leftovers: nothing runs there
		if err := Down(s.Name); err != nil {
			return nil, fmt.Errorf("clear %s's stale state: %w", s.Name, err)
		}
	}
	if existing, _ := namespacesOf(s.Name); len(existing) > 0 {
		return nil, fmt.Errorf("%w: %s (run: msr lab down %s)", ErrAlreadyUp, s.Name, s.Name)
	}
	if _, err := os.Stat(filepath.Join(RunDir, s.Name)); err == nil {
		return nil, fmt.Errorf("%w: %s has a run directory %s (run: msr lab down %s)", ErrAlreadyUp, s.Name, filepath.Join(RunDir, s.Name), s.Name)
	}
	b := &builder{spec: s, st: &State{Name: s.Name, Created: time.Now().UTC()}}
	if err := b.build(); err != nil {
		if derr := Down(s.Name); derr != nil {
			return nil, fmt.Errorf("%w (and rolling back failed: %v)", err, derr)
		}
		return nil, err
	}
	return b.st, nil
}

type builder struct {
	spec *Spec
	st   *State
	// fastPaths are the switches' xdpswitch objects while they are
	// attached; the pinned links keep them after build.
	fastPaths map[string]*xdpswitchObjects
	// existing are the nodes a lab already has (Extend): not made again.
	existing map[string]bool
}

func (b *builder) build() error {
	dir := filepath.Join(RunDir, b.spec.Name)
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return fmt.Errorf("create run directory: %w", err)
	}
	defer func() {
		for _, objs := range b.fastPaths {
			objs.Close()
		}
	}()
	steps := []func() error{b.namespaces, b.switches, b.links, b.interfaces, b.carrier, b.sysctls, b.addresses, b.routes, b.processes}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
		if err := b.st.save(); err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) ns(node string) string { return Namespace(b.spec.Name, node) }

func (b *builder) namespaces() error {
	for _, kind := range []struct {
		names []string
		role  string
	}{{sortedKeys(b.spec.Switches), "switch"}, {sortedKeys(b.spec.Hosts), "host"}} {
		for _, name := range kind.names {
			if b.existing[name] {
				continue
			}
			ns := b.ns(name)
			if err := run("ip", "netns", "add", ns); err != nil {
				return err
			}
			b.st.Nodes = append(b.st.Nodes, NodeState{Name: name, Role: kind.role, Namespace: ns})
			if err := run("ip", "-n", ns, "link", "set", "lo", "up"); err != nil {
				return err
			}
		}
	}
	return nil
}

// switches makes one bridge per switch. STP is off and forwarding starts at
// once: a lab switch is one segment with no loops.
func (b *builder) switches() error {
	for _, name := range sortedKeys(b.spec.Switches) {
		ns := b.ns(name)
		if err := run("ip", "-n", ns, "link", "add", name, "type", "bridge",
			"stp_state", "0", "forward_delay", "0", "mcast_snooping", "0"); err != nil {
			return err
		}
		if err := run("ip", "-n", ns, "link", "set", name, "up"); err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) links() error {
	for _, l := range b.spec.Links {
		a, _ := ParseEndpoint(l.Ends[0])
		z, _ := ParseEndpoint(l.Ends[1])
		var queues []string
		if l.Queues > 1 {
			n := strconv.Itoa(l.Queues)
			queues = []string{"numtxqueues", n, "numrxqueues", n}
		}
		args := append(append([]string{"link", "add", a.Iface, "netns", b.ns(a.Node)}, queues...), "type", "veth")
		args = append(append(args, "peer", "name", z.Iface, "netns", b.ns(z.Node)), queues...)
		if err := run("ip", args...); err != nil {
			return fmt.Errorf("link %s -- %s: %w", l.Ends[0], l.Ends[1], err)
		}
		for _, e := range []Endpoint{a, z} {
			if _, ok := b.spec.Switches[e.Node]; ok {
				if err := run("ip", "-n", b.ns(e.Node), "link", "set", e.Iface, "master", e.Node); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// interfaces applies per-interface settings in two passes: addresses and
// MTUs, then link up, on every end; then offloads and NAPI. Features come
// last because veth recomputes its peer's XDP features (NDO_XMIT, which an
// XDP_REDIRECT into the pair needs) only when GRO changes while both ends
// are up.
func (b *builder) interfaces() error {
	for _, pass := range []func(Endpoint, *IfaceSpec) error{b.linkUp, b.features} {
		for _, l := range b.spec.Links {
			for _, end := range l.Ends {
				e, _ := ParseEndpoint(end)
				ifc := b.spec.iface(e)
				if ifc == nil {
					ifc = &IfaceSpec{}
				}
				if err := pass(e, ifc); err != nil {
					return fmt.Errorf("interface %s: %w", end, err)
				}
			}
		}
	}
	return nil
}

func (b *builder) linkUp(e Endpoint, ifc *IfaceSpec) error {
	ns := b.ns(e.Node)
	if ifc.MAC != "" {
		if err := run("ip", "-n", ns, "link", "set", e.Iface, "address", ifc.MAC); err != nil {
			return err
		}
	}
	if ifc.MTU != 0 {
		if err := run("ip", "-n", ns, "link", "set", e.Iface, "mtu", fmt.Sprint(ifc.MTU)); err != nil {
			return err
		}
	}
	return run("ip", "-n", ns, "link", "set", e.Iface, "up")
}

func (b *builder) features(e Endpoint, ifc *IfaceSpec) error {
	ns := b.ns(e.Node)
	var features []string
	for _, f := range []struct {
		set   *bool
		names []string
	}{{ifc.VLANOffload, []string{"rxvlan", "txvlan"}}, {ifc.TxChecksum, []string{"tx"}}, {ifc.GRO, []string{"gro"}}} {
		if f.set != nil {
			for _, n := range f.names {
				features = append(features, n, onOff(*f.set))
			}
		}
	}
	if len(features) > 0 {
		if err := inNS(ns, append([]string{"ethtool", "-K", e.Iface}, features...)...); err != nil {
			return err
		}
	}
	if ifc.XDPPass {
		if err := b.attachPass(e); err != nil {
			return err
		}
	}
	if sw := b.spec.Switches[e.Node]; sw != nil && sw.XDP {
		if err := b.attachSwitch(e); err != nil {
			return err
		}
	}
	if ifc.Qdisc != "" {
		if err := inNS(ns, "tc", "qdisc", "replace", "dev", e.Iface, "root", ifc.Qdisc); err != nil {
			return err
		}
	}
	if ifc.Threaded != nil {
		return SetThreaded(ns, e.Iface, *ifc.Threaded)
	}
	return nil
}

// pinDir holds the lab's pinned XDP links, which outlive `msr lab up`.
func pinDir(lab string) string { return filepath.Join(netns.BPFFS, "msr-lab", lab) }

// pinPath is where the XDP link the lab attached to an interface is pinned.
func pinPath(lab string, e Endpoint) string { return filepath.Join(pinDir(lab), e.Node+"_"+e.Iface) }

// attachPass attaches xdppass to an interface and pins the link.
func (b *builder) attachPass(e Endpoint) error {
	var objs xdppassObjects
	if err := loadXdppassObjects(&objs, nil); err != nil {
		return fmt.Errorf("load xdppass: %w", err)
	}
	defer objs.Close()
	return b.attachPinned(e, "xdppass", objs.Xdppass, nil)
}

// attachSwitch attaches a switch's fast path to one of its ports: one
// program and one pair of maps per switch, its ports in the devmap.
func (b *builder) attachSwitch(e Endpoint) error {
	if b.fastPaths == nil {
		b.fastPaths = map[string]*xdpswitchObjects{}
	}
	objs := b.fastPaths[e.Node]
	if objs == nil {
		objs = &xdpswitchObjects{}
		if err := loadXdpswitchObjects(objs, nil); err != nil {
			return fmt.Errorf("load xdpswitch: %w", err)
		}
		b.fastPaths[e.Node] = objs
	}
	return b.attachPinned(e, "xdpswitch", objs.Xdpswitch, func(ifindex int) error {
		if err := objs.SwPorts.Put(uint32(ifindex), uint32(ifindex)); err != nil {
			return fmt.Errorf("xdpswitch: port %s: %w", e.Iface, err)
		}
		return nil
	})
}

// attachPinned attaches prog to an interface, in its node's namespace,
// and pins the link in the lab's pin directory; prepare, if set, runs
// first with the interface's index.
func (b *builder) attachPinned(e Endpoint, name string, prog *ebpf.Program, prepare func(ifindex int) error) error {
	if err := netns.EnsureBPFFS(); err != nil {
		return err
	}
	dir := pinDir(b.spec.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return netns.Do(b.ns(e.Node), func() error {
		ifi, err := net.InterfaceByName(e.Iface)
		if err != nil {
			return err
		}
		if prepare != nil {
			if err := prepare(ifi.Index); err != nil {
				return err
			}
		}
		l, err := xdp.Attach(prog, ifi.Index)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		defer l.Close()
		return l.Pin(pinPath(b.spec.Name, e))
	})
}

// SetThreaded turns threaded NAPI of a device on or off. Attaching an XDP
// program to a veth, or to its peer, rebuilds its NAPI contexts without
// their threads: whoever attaches one sets this again.
func SetThreaded(ns, dev string, on bool) error {
	// /sys/class/net shows the namespace sysfs was mounted in: `ip netns
	// exec` remounts it, so the write lands on this namespace's device.
	// Writing 0 first makes the kernel start threads for NAPI contexts
	// created since the last write.
	script := fmt.Sprintf("echo 0 > /sys/class/net/%s/threaded", dev)
	if on {
		script += fmt.Sprintf(" && echo 1 > /sys/class/net/%s/threaded", dev)
	}
	return run("ip", "netns", "exec", ns, "sh", "-c", script)
}

// carrierTimeout bounds how long Up waits for every link end to run.
const carrierTimeout = 5 * time.Second

// carrier waits until the kernel reports every link end running (up, with
// carrier), so that a lab is usable the moment Up returns.
func (b *builder) carrier() error {
	deadline := time.Now().Add(carrierTimeout)
	for _, l := range b.spec.Links {
		for _, end := range l.Ends {
			e, _ := ParseEndpoint(end)
			for {
				ok, err := running(b.ns(e.Node), e.Iface)
				if err != nil || ok {
					if err != nil {
						return err
					}
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("interface %s has no carrier after %v", end, carrierTimeout)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	return nil
}

// running reports IFF_RUNNING of a device in a namespace.
func running(ns, dev string) (bool, error) {
	var up bool
	err := netns.Do(ns, func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return fmt.Errorf("interface %s in %s: %w", dev, ns, err)
		}
		up = ifi.Flags&net.FlagRunning != 0
		return nil
	})
	return up, err
}

func (b *builder) sysctls() error {
	for _, host := range sortedKeys(b.spec.Hosts) {
		h := b.spec.Hosts[host]
		for _, k := range sortedKeys(h.Sysctls) {
			if err := SetSysctl(b.ns(host), k, h.Sysctls[k]); err != nil {
				return fmt.Errorf("host %s: %w", host, err)
			}
		}
	}
	return nil
}

// SetSysctl writes a net.* sysctl of a namespace. /proc/sys/net resolves to
// the namespace of the thread that opens it.
func SetSysctl(ns, key, value string) error {
	path := "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
	return netns.Do(ns, func() error {
		if err := os.WriteFile(path, []byte(value), 0); err != nil {
			return fmt.Errorf("sysctl %s=%s: %w", key, value, err)
		}
		return nil
	})
}

func (b *builder) addresses() error {
	for _, host := range sortedKeys(b.spec.Hosts) {
		h := b.spec.Hosts[host]
		for _, ifname := range sortedKeys(h.Interfaces) {
			for _, p := range h.Interfaces[ifname].Addresses {
				args := []string{"-n", b.ns(host), "addr", "add", p.String(), "dev", ifname}
				if p.Addr().Is6() {
					// No duplicate address detection: the address is
					// usable at once, and the lab gives out each once
					// (spec.go checks).
					args = append(args, "nodad")
				}
				if err := run("ip", args...); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (b *builder) routes() error {
	for _, host := range sortedKeys(b.spec.Hosts) {
		h := b.spec.Hosts[host]
		for _, r := range h.Routes {
			args := []string{"-n", b.ns(host), "route", "add", r.To}
			if r.Via.Is6() || strings.Contains(r.To, ":") {
				args = []string{"-n", b.ns(host), "-6", "route", "add", r.To}
			}
			if r.Via.IsValid() {
				args = append(args, "via", r.Via.String())
			}
			if r.Dev != "" {
				args = append(args, "dev", r.Dev)
			}
			if err := run("ip", args...); err != nil {
				return fmt.Errorf("%s: %w", r.Pos, err)
			}
		}
		for _, n := range h.Neighbors {
			if err := run("ip", "-n", b.ns(host), "neigh", "replace", n.IP.String(), "lladdr", n.MAC, "dev", n.Dev, "nud", "permanent"); err != nil {
				return fmt.Errorf("%s: %w", n.Pos, err)
			}
		}
	}
	return nil
}

func (b *builder) processes() error {
	var started []ProcState
	for _, host := range sortedKeys(b.spec.Hosts) {
		for _, p := range b.spec.Hosts[host].Processes {
			ps, err := Start(b.spec.Name, host, p.Name, p.Command)
			if err != nil {
				return err
			}
			started = append(started, *ps)
		}
	}
	b.st.Processes = append(b.st.Processes, started...)
	if len(started) == 0 {
		return nil
	}
	// A process that ends in its first second did not start: a bad
	// config, a missing file. Say which, with what it said.
	time.Sleep(settleTime)
	for _, ps := range started {
		if !ps.Running() {
			b.st.Failed = append(b.st.Failed, fmt.Sprintf("process %s on %s (%s) ended within %v: %s", ps.Name, ps.Host,
				strings.Join(ps.Command, " "), settleTime, logTail(ps.Log, 5)))
		}
	}
	if len(b.st.Failed) > 0 && !b.spec.KeepGoing {
		return fmt.Errorf("%w:\n  %s\n(msr lab up --keep-going keeps the lab up regardless)", ErrProcessFailed, strings.Join(b.st.Failed, "\n  "))
	}
	return nil
}

// settleTime is how long a lab's processes must live to count as started.
const settleTime = time.Second

// ErrProcessFailed is Up's error when a lab's process ended at once.
var ErrProcessFailed = errors.New("a lab process failed to start")

// logTail is the last n lines of a log, on one line.
func logTail(path string, n int) string {
	lines, err := LogTail(path, n)
	switch {
	case err != nil:
		return "(no log)"
	case len(lines) == 0:
		return "(nothing in " + path + ")"
	}
	return strings.Join(lines, " | ")
}

// LogTail is the last n lines of a log (a lab process's: RunDir/LAB/logs).
func LogTail(path string, n int) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	text := strings.TrimSpace(string(b))
	if text == "" {
		return nil, nil
	}
	lines := strings.Split(text, "\n")
	return lines[max(0, len(lines)-n):], nil
}

// Start runs argv in a host of a lab as a process of its own session, its
// output in the lab's log directory. It returns once the process exists.
func Start(lab, host, name string, argv []string) (*ProcState, error) {
	logPath := filepath.Join(RunDir, lab, "logs", host+"."+name+".log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("process %s on %s: %w", name, host, err)
	}
	defer log.Close()
	cmd := nsCommand(Namespace(lab, host), argv...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = detached()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("process %s on %s: start %s: %w", name, host, argv[0], err)
	}
	// Reap it if it ends while this process lives (tests); after `msr lab
	// up` exits, init does.
	go cmd.Wait() //nolint:errcheck
	return &ProcState{Host: host, Name: name, Command: argv, PID: cmd.Process.Pid,
		StartTime: procStartTime(cmd.Process.Pid), Log: logPath}, nil
}

// nsCommand runs argv inside a namespace with nsenter, which enters only
// the network namespace: /sys stays the host's, /sys/fs/bpf stays visible.
func nsCommand(ns string, argv ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"--net=" + netns.Path(ns), "--"}, argv...)...)
}

func inNS(ns string, argv ...string) error {
	return run("nsenter", append([]string{"--net=" + netns.Path(ns), "--"}, argv...)...)
}

// run executes a command and, if it fails, returns its output in the error.
func run(name string, args ...string) error {
	var out bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// DetachXDP removes the XDP program the lab attached to an interface (its
// xdp_pass or its switch's fast path), so that another program can take
// the interface: a benchmark's sink on a host of a lab.
func DetachXDP(labName string, e Endpoint) error {
	l, err := link.LoadPinnedLink(pinPath(labName, e), nil)
	if err != nil {
		return fmt.Errorf("lab %s: %s:%s has no XDP program of the lab's: %w", labName, e.Node, e.Iface, err)
	}
	defer l.Close()
	return l.Unpin()
}
