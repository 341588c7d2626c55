package lab

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/msr-router/msr/internal/netns"
)

// upTest builds a lab from text and removes it when the test ends, even if
// it fails.
func upTest(t *testing.T, text string) *State {
	t.Helper()
	s, err := Load("test.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	st, err := Up(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Down(s.Name) })
	return st
}

func twoHosts(name string) string {
	return "name: " + name + `
hosts:
  h1:
    interfaces:
      eth0: {addresses: [10.9.0.1/24], mtu: 9000, xdp_pass: on}
    processes:
      - {name: sleeper, command: [sh, -c, "echo started in $(ip -br addr show eth0); exec sleep 600"]}
  h2:
    interfaces:
      eth0: {addresses: [10.9.0.2/24], mac: "02:00:00:00:09:02", vlan_offload: off, gro: on, threaded: on}
    sysctls: {net.ipv4.ip_forward: "1"}
switches:
  sw1:
    interfaces:
      p2: {vlan_offload: off}
links:
  - ends: [h1:eth0, sw1:p1]
  - ends: [h2:eth0, sw1:p2]
`
}

func TestUpExecStatusDown(t *testing.T) {
	const name = "t-up"
	st := upTest(t, twoHosts(name))

	var out bytes.Buffer
	code, err := Exec(name, "h1", []string{"ping", "-c", "1", "-w", "5", "10.9.0.2"}, nil, &out, &out)
	if err != nil || code != 0 {
		t.Fatalf("ping across the switch: code %d, %v\n%s", code, err, out.String())
	}
	if code, err := Exec(name, "h1", []string{"sh", "-c", "exit 7"}, nil, nil, nil); err != nil || code != 7 {
		t.Errorf("exit status = %d, %v; want 7", code, err)
	}
	out.Reset()
	if _, err := Exec(name, "h2", []string{"cat", "/proc/sys/net/ipv4/ip_forward", "/sys/class/net/eth0/mtu"}, nil, &out, &out); err != nil || !strings.HasPrefix(out.String(), "1\n") {
		t.Errorf("sysctl in h2: %q, %v", out.String(), err)
	}
	if _, err := Exec(name, "h9", []string{"true"}, nil, nil, nil); err == nil {
		t.Error("exec on a host that does not exist succeeded")
	}

	status, err := GetStatus(name)
	if err != nil {
		t.Fatal(err)
	}
	ifaces := map[string]IfaceStatus{}
	for _, n := range status.Nodes {
		if !n.Present {
			t.Errorf("node %s missing", n.Name)
		}
		for _, i := range n.Interfaces {
			ifaces[n.Name+":"+i.Name] = i
		}
	}
	if i := ifaces["h2:eth0"]; i.MAC != "02:00:00:00:09:02" || len(i.Addresses) != 1 || i.Addresses[0] != "10.9.0.2/24" || i.State != "UP" {
		t.Errorf("h2:eth0 = %+v", i)
	}
	if i := ifaces["h1:eth0"]; i.MTU != 9000 {
		t.Errorf("h1:eth0 MTU = %d, want 9000", i.MTU)
	}
	if i := ifaces["sw1:p1"]; i.Master != "sw1" {
		t.Errorf("sw1:p1 not in the bridge: %+v", i)
	}
	if len(status.Processes) != 1 || !status.Processes[0].Running {
		t.Fatalf("processes = %+v, want sleeper running", status.Processes)
	}
	// The process runs in its host's namespace, its output in the log.
	for i := 0; ; i++ {
		log, _ := os.ReadFile(status.Processes[0].Log)
		if strings.Contains(string(log), "started in eth0") && strings.Contains(string(log), "10.9.0.1/24") {
			break
		}
		if i == 50 {
			t.Fatalf("log %s = %q", status.Processes[0].Log, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if threaded := output(t, "ip", "netns", "exec", Namespace(name, "h2"), "cat", "/sys/class/net/eth0/threaded"); strings.TrimSpace(threaded) != "1" {
		t.Errorf("h2:eth0 threaded = %q, want 1", threaded)
	}
	if link := output(t, "ip", "-n", Namespace(name, "h1"), "link", "show", "eth0"); !strings.Contains(link, "xdp") {
		t.Errorf("h1:eth0 has no XDP program:\n%s", link)
	}
	offload := output(t, "nsenter", "--net=/var/run/netns/"+Namespace(name, "h2"), "ethtool", "-k", "eth0")
	if !strings.Contains(offload, "rx-vlan-offload: off") || !strings.Contains(offload, "tx-vlan-offload: off") {
		t.Errorf("vlan offload still on:\n%s", offload)
	}

	pid := st.Processes[0].PID
	if err := Down(name); err != nil {
		t.Fatal(err)
	}
	if nss, _ := namespacesOf(name); len(nss) != 0 {
		t.Errorf("namespaces left: %v", nss)
	}
	if _, err := os.Stat(filepath.Join(RunDir, name)); err == nil {
		t.Error("run directory left")
	}
	if (&ProcState{PID: pid, StartTime: st.Processes[0].StartTime}).Running() {
		t.Error("process still running after down")
	}
	if err := Down(name); !errors.Is(err, ErrNotUp) {
		t.Errorf("second down: %v, want ErrNotUp", err)
	}
}

func TestLabsCoexist(t *testing.T) {
	upTest(t, twoHosts("t-a"))
	s, _ := Load("t.yaml", []byte(strings.Replace(twoHosts("t-a-h1"), "10.9.0.", "10.8.0.", -1)))
	if _, err := Up(s); err != nil {
		t.Fatal(err)
	}
	defer Down("t-a-h1")
	if _, err := Up(s); !errors.Is(err, ErrAlreadyUp) {
		t.Errorf("bringing a lab up twice: %v, want ErrAlreadyUp", err)
	}
	if err := Down("t-a"); err != nil {
		t.Fatal(err)
	}
	if nss, _ := namespacesOf("t-a-h1"); len(nss) != 3 {
		t.Errorf("down t-a touched t-a-h1: namespaces %v", nss)
	}
	if code, err := Exec("t-a-h1", "h1", []string{"ping", "-c", "1", "-w", "5", "10.8.0.2"}, nil, nil, nil); err != nil || code != 0 {
		t.Errorf("t-a-h1 broken after t-a went down: %d %v", code, err)
	}
}

func TestUpRollsBack(t *testing.T) {
	// Valid as a file, but the kernel refuses the route: its gateway is
	// not on any connected network. Up must remove the namespaces it made.
	text := strings.Replace(twoHosts("t-rollback"), "    sysctls:", "    routes: [{to: 192.0.2.0/24, via: 203.0.113.1}]\n    sysctls:", 1)
	s, err := Load("t.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Up(s)
	if err == nil {
		Down(s.Name)
		t.Fatal("Up succeeded with an unreachable gateway")
	}
	if !strings.Contains(err.Error(), "203.0.113.1") {
		t.Errorf("error does not name the route: %v", err)
	}
	if nss, _ := namespacesOf(s.Name); len(nss) != 0 {
		t.Errorf("namespaces left after a failed up: %v", nss)
	}
	if _, err := os.Stat(filepath.Join(RunDir, s.Name)); err == nil {
		t.Error("run directory left after a failed up")
	}
}

func output(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// TestSwitchFastPath: a switch with xdp: on forwards known unicast between
// its ports in XDP (the ports count XDP redirects) and still passes
// broadcast to the bridge (ARP resolves; ping works both ways).
func TestSwitchFastPath(t *testing.T) {
	const name = "t-xdpsw"
	upTest(t, "name: "+name+`
hosts:
  h1:
    interfaces:
      eth0: {addresses: [10.9.0.1/24], gro: on}
  h2:
    interfaces:
      eth0: {addresses: [10.9.0.2/24], gro: on}
switches:
  sw1:
    xdp: on
links:
  - ends: [h1:eth0, sw1:p1]
  - ends: [h2:eth0, sw1:p2]
`)
	var out bytes.Buffer
	if code, err := Exec(name, "h1", []string{"ping", "-c", "20", "-i", "0.05", "-w", "5", "10.9.0.2"}, nil, &out, &out); err != nil || code != 0 {
		t.Fatalf("ping across the XDP switch: code %d, %v\n%s", code, err, out.String())
	}
	redirected := 0
	for _, port := range []string{"p1", "p2"} {
		stats := output(t, "ip", "netns", "exec", Namespace(name, "sw1"), "ethtool", "-S", port)
		for _, line := range strings.Split(stats, "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "rx_queue_0_xdp_redirect:" {
				n := 0
				fmt.Sscan(f[1], &n)
				redirected += n
			}
		}
	}
	// 20 echo requests and 20 replies; the first of each way may go
	// through the bridge while the destination is not yet learned.
	if redirected < 36 {
		t.Errorf("the switch's ports redirected %d frames in XDP, want the ~40 of the pings", redirected)
	}
}

// TestRestart kills a lab's process as a crash would and starts it again:
// a new process of the same command runs in the same host, the lab's
// state names it, and status sees it running; a process the lab does not
// have is an error.
func TestRestart(t *testing.T) {
	const name = "t-restart"
	st := upTest(t, twoHosts(name))
	old := st.Processes[0]
	ps, gone, err := Restart(name, "h1", "sleeper", syscall.SIGKILL)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pid %d -> %d, the old one gone after %v", old.PID, ps.PID, gone)
	if ps.PID == old.PID || !ps.Running() || old.Running() {
		t.Errorf("after the restart: old pid %d running %v, new pid %d running %v", old.PID, old.Running(), ps.PID, ps.Running())
	}
	if strings.Join(ps.Command, " ") != strings.Join(old.Command, " ") {
		t.Errorf("restarted %q, was %q", ps.Command, old.Command)
	}
	status, err := GetStatus(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(status.Processes) != 1 || status.Processes[0].PID != ps.PID || !status.Processes[0].Running {
		t.Errorf("status after the restart: %+v", status.Processes)
	}
	if _, _, err := Restart(name, "h2", "sleeper", syscall.SIGKILL); err == nil || !strings.Contains(err.Error(), "no process sleeper on h2") {
		t.Errorf("restarting a process the lab does not have: %v", err)
	}
	// Restarts at once, each a read-modify-write of the state: one
	// process runs after them, the one the state names (each saving its
	// own copy, the others ran on unseen).
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := Restart(name, "h1", "sleeper", syscall.SIGKILL); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	st, err = ReadState(name)
	if err != nil {
		t.Fatal(err)
	}
	pids := PIDsIn(Namespace(name, "h1"))
	for deadline := time.Now().Add(3 * time.Second); (len(pids) != 1 || pids[0] != st.Processes[0].PID) && time.Now().Before(deadline); pids = PIDsIn(Namespace(name, "h1")) {
		time.Sleep(50 * time.Millisecond) // the last one's shell starting, its $(ip ...)
	}
	if len(pids) != 1 || pids[0] != st.Processes[0].PID {
		t.Errorf("after 8 restarts at once: processes %v in h1, the state names %d", pids, st.Processes[0].PID)
	}
}

// TestStaleLabIsNotUp: what a restarted machine keeps of a lab (its run
// directory, and the names under /run/netns as plain files, /run being a
// disk) is not a lab that is up, and Up clears it instead of refusing.
func TestStaleLabIsNotUp(t *testing.T) {
	const name = "t-stale"
	dir := filepath.Join(RunDir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(`{"name":"t-stale"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	left := netns.Path(Namespace(name, "h1"))
	if err := os.WriteFile(left, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Down(name); os.Remove(left) })
	if !Stale(name) {
		t.Fatal("a run directory with no live namespace is not stale")
	}
	if _, err := ReadState(name); !errors.Is(err, ErrNotUp) {
		t.Errorf("ReadState of a stale lab: %v, want ErrNotUp", err)
	}
	if names, _ := Labs(); slices.Contains(names, name) {
		t.Errorf("Labs lists the stale lab: %v", names)
	}
	upTest(t, twoHosts(name))
	if Stale(name) {
		t.Error("the lab brought up over the stale one is stale")
	}
	if _, err := ReadState(name); err != nil {
		t.Errorf("ReadState of the lab up: %v", err)
	}
	if code, err := Exec(name, "h1", []string{"ping", "-c", "1", "-w", "5", "10.9.0.2"}, nil, nil, nil); err != nil || code != 0 {
		t.Errorf("the lab up over the stale one does not ping: %d %v", code, err)
	}
}

// A process whose main thread exited while another runs on (as a killed
// Go program's do for a moment, its sockets still open) is still running:
// Restart waits for it rather than start a second beside it.
func TestRunningZombieLeaderWithThreads(t *testing.T) {
	// The main thread leaves by pthread_exit; the other sleeps on.
	cmd := exec.Command("python3", "-c", `import ctypes, threading, time
threading.Thread(target=time.sleep, args=(600,)).start()
ctypes.CDLL(None).pthread_exit(None)`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	p := &ProcState{PID: cmd.Process.Pid, StartTime: procStartTime(cmd.Process.Pid)}
	state := func() string {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.PID))
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			return ""
		}
		return strings.Fields(string(b[i+1:]))[0]
	}
	for start := time.Now(); state() != "Z"; time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("the main thread did not exit: state %q", state())
		}
	}
	if n := threads(p.PID); n < 2 {
		t.Fatalf("%d threads, want the zombie leader and its other", n)
	}
	if !p.Running() {
		t.Error("a zombie main thread with a live thread beside it is taken for gone")
	}
	cmd.Process.Kill()
	cmd.Wait()
	if p.Running() {
		t.Error("a killed and reaped process is running")
	}
}
