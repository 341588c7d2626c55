package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/msr-router/msr/internal/netns"
)

// State is what a lab that is up consists of, kept in RunDir/NAME/state.json.
type State struct {
	Name      string      `json:"name"`
	Created   time.Time   `json:"created"`
	Nodes     []NodeState `json:"nodes"`
	Processes []ProcState `json:"processes"`
	// Failed are the processes that ended in their first second, with the
	// end of their logs (a lab kept up with KeepGoing).
	Failed []string `json:"failed,omitempty"`
}

// NodeState is a host or switch and its namespace.
type NodeState struct {
	Name      string `json:"name"`
	Role      string `json:"role"`
	Namespace string `json:"namespace"`
}

// ProcState is a process a lab started. StartTime (from /proc/PID/stat)
// tells the process from a later one that reused its pid.
type ProcState struct {
	Host      string   `json:"host"`
	Name      string   `json:"name"`
	Command   []string `json:"command"`
	PID       int      `json:"pid"`
	StartTime uint64   `json:"start_time"`
	Log       string   `json:"log"`
}

// ErrNotUp is returned for a lab name that has no namespaces and no state.
var ErrNotUp = errors.New("no such lab is up")

func (st *State) save() error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(RunDir, st.Name, "state.json")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("save lab state: %w", err)
	}
	return os.Rename(tmp, path)
}

// lockState holds a lab's state for one read-modify-write (Restart,
// Extend), so that two of them at once do not each save their own copy:
// a process restarted while a host was added was lost from the state,
// and the next restart started a second agent beside the first (msr soak,
// finding 10). It returns the unlock.
func lockState(name string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(RunDir, name, "state.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock lab state: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock lab state: %w", err)
	}
	return func() { f.Close() }, nil // closing releases the lock
}

// ReadState returns the state of a lab that is up. A lab whose state
// outlived its namespaces (Stale) is not up.
func ReadState(name string) (*State, error) {
	b, err := os.ReadFile(filepath.Join(RunDir, name, "state.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotUp, name)
	}
	if err != nil {
		return nil, fmt.Errorf("read lab state: %w", err)
	}
	st := &State{}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("read lab state %s: %w", name, err)
	}
	if Stale(name) {
		return nil, fmt.Errorf("%w: %s left its state but none of its namespaces (msr lab down %s clears it)", ErrNotUp, name, name)
	}
	return st, nil
}

// Stale reports whether lab name has a run directory but no live
// namespace. /run is a disk here, not a tmpfs: a machine that restarted,
// or one started from a copy of another's disk, keeps a lab's run
// directory and the names under /run/netns, but a name there is a
// namespace only while a nsfs is mounted on it.
func Stale(name string) bool {
	if _, err := os.Stat(filepath.Join(RunDir, name)); err != nil {
		return false
	}
	nss, err := namespacesOf(name)
	if err != nil {
		return false
	}
	for _, ns := range nss {
		if liveNamespace(ns) {
			return false
		}
	}
	return true
}

// liveNamespace reports whether /run/netns/ns is a namespace's mount.
func liveNamespace(ns string) bool {
	var fsst unix.Statfs_t
	if err := unix.Statfs(netns.Path(ns), &fsst); err != nil {
		return false
	}
	return fsst.Type == unix.NSFS_MAGIC
}

// Labs lists the names of the labs that are up.
func Labs() ([]string, error) {
	entries, err := os.ReadDir(RunDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(RunDir, e.Name(), "state.json")); err == nil && !Stale(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// Only returns the name of the one lab that is up, or an error saying
// there is none or several.
func Only() (string, error) {
	names, err := Labs()
	if err != nil {
		return "", err
	}
	switch len(names) {
	case 0:
		return "", fmt.Errorf("%w: start one with msr lab up FILE.yaml", ErrNotUp)
	case 1:
		return names[0], nil
	}
	return "", fmt.Errorf("%d labs are up (%s): name one with --lab", len(names), strings.Join(names, ", "))
}

// namespacesOf lists the namespaces of lab name. Node names cannot hold a
// dot, so the prefix "msr.NAME." matches this lab's and no other's.
func namespacesOf(name string) ([]string, error) {
	entries, err := os.ReadDir(netns.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	prefix := Namespace(name, "")
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// Down stops every process in the lab's namespaces, deletes the
// namespaces (and with them their veths and bridges), and removes the
// run directory. It removes nothing that belongs to another lab.
func Down(name string) error {
	if !labNameRE.MatchString(name) {
		return fmt.Errorf("%q is not a lab name", name)
	}
	nss, err := namespacesOf(name)
	if err != nil {
		return err
	}
	dir := filepath.Join(RunDir, name)
	if _, err := os.Stat(dir); len(nss) == 0 && err != nil {
		return fmt.Errorf("%w: %s", ErrNotUp, name)
	}
	var errs []error
	killAll(nss...)
	var batch strings.Builder
	for _, ns := range nss {
		fmt.Fprintf(&batch, "netns del %s\n", ns)
	}
	if len(nss) > 0 {
		del := exec.Command("ip", "-force", "-batch", "-")
		del.Stdin = strings.NewReader(batch.String())
		if out, err := del.CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ip netns del: %v: %s", err, out))
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(pinDir(name)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// killAll ends every process in the namespaces: SIGTERM, then SIGKILL
// after two seconds for those still there. All the lab's at once: one
// namespace after the other took a second and a half to take the default
// lab down.
func killAll(nss ...string) {
	pids := PIDsIn(nss...)
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(2 * time.Second)
	for len(pids) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		pids = PIDsIn(nss...)
	}
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	for i := 0; i < 100 && len(PIDsIn(nss...)) > 0; i++ {
		time.Sleep(20 * time.Millisecond)
	}
}

// NetnsID is a network namespace's identity as /proc/PID/ns/net links to
// it ("net:[INODE]"), for the named namespace (/run/netns/NAME); "" if
// there is none.
func NetnsID(ns string) string {
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join("/run/netns", ns), &st); err != nil {
		return ""
	}
	return fmt.Sprintf("net:[%d]", st.Ino)
}

// ProcNetns is the network namespace the process pid (as /proc names it)
// runs in, as NetnsID says it ("" if the process is gone).
func ProcNetns(pid string) string {
	link, _ := os.Readlink(filepath.Join("/proc", pid, "ns", "net"))
	return link
}

// PIDsIn are the processes (but this one) in the named network
// namespaces, found by their /proc/PID/ns/net, sorted.
func PIDsIn(nss ...string) []int {
	ids := map[string]bool{}
	for _, ns := range nss {
		if id := NetnsID(ns); id != "" {
			ids[id] = true
		}
	}
	if len(ids) == 0 {
		return nil
	}
	procs, _ := os.ReadDir("/proc")
	var pids []int
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if ids[ProcNetns(p.Name())] {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	return pids
}

// procStartTime returns field 22 of /proc/PID/stat, the process's start
// time in clock ticks since boot, or 0 if it is gone.
func procStartTime(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: count from its ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0
	}
	v, _ := strconv.ParseUint(f[19], 10, 64)
	return v
}

// Running says whether the process is still the one the lab started. A
// zombie is gone once it is its last thread: a multi-threaded program's
// main thread turns zombie as soon as it exits, while its other threads
// may still be tearing its memory down and holding its files (a restart
// that took that for gone started an agent whose API address was still
// in use: the soak).
func (p *ProcState) Running() bool {
	if err := syscall.Kill(p.PID, 0); err != nil {
		return false
	}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.PID))
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 {
		if f := strings.Fields(string(b[i+1:])); len(f) > 0 && f[0] == "Z" && threads(p.PID) <= 1 {
			return false
		}
	}
	return procStartTime(p.PID) == p.StartTime
}

// threads counts the threads of process pid still in /proc (0: gone).
func threads(pid int) int {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	return len(tasks)
}

func detached() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

// Restart ends a process of a lab with sig (SIGKILL: a crash) and, once it
// is gone, starts its command again in its host, recording the new
// process in the lab's state. A process that ignores sig for
// restartTimeout is an error, and is left running. It returns when the
// new process exists, and the time the old one took to go.
func Restart(labName, host, name string, sig syscall.Signal) (*ProcState, time.Duration, error) {
	unlock, err := lockState(labName)
	if err != nil {
		return nil, 0, err
	}
	defer unlock()
	st, err := ReadState(labName)
	if err != nil {
		return nil, 0, err
	}
	i := slices.IndexFunc(st.Processes, func(p ProcState) bool { return p.Host == host && p.Name == name })
	if i < 0 {
		return nil, 0, fmt.Errorf("lab %s has no process %s on %s", labName, name, host)
	}
	old := st.Processes[i]
	start := time.Now()
	if old.Running() {
		if err := syscall.Kill(old.PID, sig); err != nil {
			return nil, 0, fmt.Errorf("process %s on %s: %w", name, host, err)
		}
		for old.Running() {
			if time.Since(start) > restartTimeout {
				return nil, 0, fmt.Errorf("process %s on %s: still running %v after %v", name, host, restartTimeout, sig)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	gone := time.Since(start)
	ps, err := Start(labName, host, name, old.Command)
	if err != nil {
		return nil, gone, err
	}
	st.Processes[i] = *ps
	return ps, gone, st.save()
}

// restartTimeout bounds how long Restart waits for a process to end. A
// killed process's threads may stand in the kernel for seconds on their
// way out: closing a TAP device, as a VCP's mirrors are, waits for the
// kernel's RTNL lock (CI's TestSoak, twice: a VCP killed with SIGKILL was
// still there 5 s later, the machine standing still).
const restartTimeout = 15 * time.Second
