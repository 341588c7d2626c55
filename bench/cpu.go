package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/msr-router/msr/lab"
)

// genCPU is the core the generator's thread runs on. Everything else the
// benchmark starts (the DUT's and the sink's NAPI threads) is kept off it,
// so that on a 2-core machine the generator has one core and the device
// under test the other, run after run.
const genCPU = 0

// pinGenerator binds the calling (locked) thread to genCPU, and returns
// what puts the thread's CPUs back: call it before the thread is unlocked
// (netns.Do unlocks it when its function returns). A thread left pinned
// goes back to the Go runtime's pool, and every process a goroutine later
// starts from it inherits the one core: the soak's restarted agents,
// their BIRD and keepalived, its iperf3 clients all ran on the
// generator's core beside the data path's softirqs while the other core
// sat idle (finding 32).
func pinGenerator() (restore func(), err error) {
	if runtime.NumCPU() < 2 {
		return func() {}, nil
	}
	return pinCPU(genCPU)
}

// pinCPU binds the calling (locked) thread to cpu, and returns what puts
// its CPUs back (see pinGenerator).
func pinCPU(cpu int) (restore func(), err error) {
	var was, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		return nil, fmt.Errorf("read the generator thread's CPUs: %w", err)
	}
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("pin generator to CPU %d: %w", cpu, err)
	}
	return func() { unix.SchedSetaffinity(0, &was) }, nil
}

// pinSampler binds the calling (locked) thread to the generator's core at
// the lowest real-time priority, and returns what puts its CPUs and its
// scheduling back: call it before the thread is unlocked. The sampler
// wakes every few milliseconds for a map read, ahead of the generator's
// busy pacing and away from the DUT's core, whose SCHED_FIFO NAPI
// threads starve anything else there under overload. A thread left
// pinned goes back to the runtime's pool (finding 32); one that ends
// locked is not always ended either (the main thread is parked instead:
// CI's TestGeneratorRateAccuracy found a thread on CPU 0 alone). Best
// effort: a sampler left where it is still counts, only later.
func pinSampler() (restore func()) {
	if runtime.NumCPU() < 2 {
		return func() {}
	}
	var was unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		return func() {}
	}
	attr, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		return func() {}
	}
	var set unix.CPUSet
	set.Set(genCPU)
	unix.SchedSetaffinity(0, &set)
	unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 1}, 0)
	return func() {
		unix.SchedSetAttr(0, attr, 0)
		unix.SchedSetaffinity(0, &was)
	}
}

// onGenCPU runs an instrument's own command (ip: a reset's links, the
// DUT's routes) on the generator's core: a child process takes the CPUs of
// the thread that starts it. Off the DUT's core, whose NAPI threads run
// SCHED_FIFO (placeNAPI), it and the kernel work it queues where it runs
// (a link's return, IPv6's addresses and neighbours) do not wait behind
// the DUT's forwarding: started anywhere, the Linux DUT's IPv6 reset
// outlasted its trial in half the runs of TestRFC2544IPv6. (Until finding
// 32 the generator's thread, left pinned, started them there by chance.)
// There they can still wait for the generator's paced call to end, when
// the link's bounce needs that core's kernel threads (CI's machine: a
// Linux reset of 312 ms with 300 ms trials); a reset trial sends on until
// the part is back (blastPast).
func onGenCPU(cmd *exec.Cmd) ([]byte, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	unpin, err := pinGenerator()
	if err != nil {
		return nil, err
	}
	defer unpin()
	return cmd.CombinedOutput()
}

// unthreadNAPI turns threaded NAPI off on every interface of the lab
// whose file turned it on: over several queues, each queue's frames are
// then handled in the softirq of the CPU that sent them, as a NIC's RSS
// queues are each on their own core.
func unthreadNAPI(spec *lab.Spec) error {
	for node, names := range threadedIfaces(spec, true) {
		for _, name := range names {
			if err := lab.SetThreaded(lab.Namespace(spec.Name, node), name, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// threadedIfaces returns, by node, the interfaces of the lab's hosts and
// switches whose file asks for threaded NAPI; the generator's only if
// withGen.
func threadedIfaces(spec *lab.Spec, withGen bool) map[string][]string {
	nodes := map[string]map[string]*lab.IfaceSpec{}
	for name, h := range spec.Hosts {
		if withGen || name != "gen" {
			nodes[name] = h.Interfaces
		}
	}
	for name, sw := range spec.Switches {
		nodes[name] = sw.Interfaces
	}
	out := map[string][]string{}
	for node, ifaces := range nodes {
		for name, ifc := range ifaces {
			if ifc.Threaded != nil && *ifc.Threaded {
				out[node] = append(out[node], name)
			}
		}
	}
	return out
}

// placeNAPI turns threaded NAPI back on for every interface of the lab
// (every host's but the generator's, every switch's) whose file asks for it (attaching
// XDP dropped the threads), binds those threads to every CPU but genCPU,
// and returns them.
func placeNAPI(spec *lab.Spec) ([]int, error) {
	var devs []string
	for node, names := range threadedIfaces(spec, false) {
		for _, name := range names {
			if err := lab.SetThreaded(lab.Namespace(spec.Name, node), name, true); err != nil {
				return nil, err
			}
			devs = append(devs, name)
		}
	}
	byDev := napiThreads(devs)
	var threads []int
	for _, pids := range byDev {
		threads = append(threads, pids...)
	}
	if runtime.NumCPU() < 2 {
		return threads, nil
	}
	var set unix.CPUSet
	for c := 0; c < runtime.NumCPU(); c++ {
		if c != genCPU {
			set.Set(c)
		}
	}
	// SCHED_FIFO: a NAPI thread preempted by an ordinary process for a
	// few milliseconds overflows its 256-frame ring even at low rates.
	for _, d := range devs {
		// A pipeline of stages on one core (bench-msr: the LB's e0, the
		// back-end's r0, the LB's i0) runs later stages first: at equal
		// priority the first stage takes the core and the later stages'
		// rings overflow, throwing away work already done.
		fifo := &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 50 + uint32(stageOf(d))}
		for _, pid := range byDev[d] {
			if err := unix.SchedSetaffinity(pid, &set); err != nil {
				return nil, fmt.Errorf("place NAPI thread %d: %w", pid, err)
			}
			if err := unix.SchedSetAttr(pid, fifo, 0); err != nil {
				return nil, fmt.Errorf("raise NAPI thread %d to SCHED_FIFO: %w", pid, err)
			}
		}
	}
	return threads, nil
}

// stagePriority raises the NAPI threads of later pipeline stages above
// the first's (bench-msr's interface names; p1 to p3 are the switch's
// ports in bench-msr-switch and study-msr: p1 takes the LB's frames to
// the back-ends, p2 and p3 the back-ends' back).
var stagePriority = map[string]int{"p1": 5, "r0": 10, "p2": 15, "p3": 15, "i0": 20}

// stageOf is a device's stage priority: stagePriority's, or by the scale
// lab's names (bench/scale.go): the switch's LB-side ports lIpK carry
// the LBs' frames to the back-ends, its back-end ports bJ the back-ends'
// back, and an LB's internal ports iK take them out.
func stageOf(dev string) int {
	if p, ok := stagePriority[dev]; ok {
		return p
	}
	if len(dev) > 1 && dev[1] >= '0' && dev[1] <= '9' {
		switch dev[0] {
		case 'l':
			return 5
		case 'b':
			return 15
		case 'i':
			return 20
		}
	}
	return 0
}

// napiThreads finds the kernel threads "napi/DEV-ID" of the given
// devices, by device.
func napiThreads(devs []string) map[string][]int {
	comms, _ := filepath.Glob("/proc/[0-9]*/comm")
	pids := map[string][]int{}
	for _, c := range comms {
		b, err := os.ReadFile(c)
		if err != nil {
			continue
		}
		name := strings.TrimSpace(string(b))
		for _, d := range devs {
			if strings.HasPrefix(name, "napi/"+d+"-") {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(c)))
				pids[d] = append(pids[d], pid)
			}
		}
	}
	return pids
}

// cpuTime is the time the threads have run, from /proc/PID/schedstat (0
// for a thread that is gone).
func cpuTime(pids []int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			total += time.Duration(ns)
		}
	}
	return total
}

// The CPUs of these virtual machines halt when idle (the haltpoll cpuidle
// driver, with guest polling off), and a halted vCPU takes the hypervisor
// milliseconds, now and then, to wake: a NAPI thread woken for a frame
// starts late, and its 256-frame veth ring overflows even at 100 kpps.
// Measured with the instrument alone (`--dut none`, 64 B, 3 s trials):
// 423 frames lost at 100 kpps and 1,103 at 300 kpps while the CPUs may
// halt, none at either while they may not. A benchmark therefore asks the
// kernel, through the PM QoS interface, for a CPU wake-up latency of 0 for
// as long as a session is open, as tuned's latency-performance profile
// does: idle CPUs poll instead of halting.
var awake struct {
	sync.Mutex
	holders int
	f       *os.File
}

// keepCPUsAwake holds the request until the returned function is called;
// sessions open at once share one request.
func keepCPUsAwake() (release func(), err error) {
	awake.Lock()
	defer awake.Unlock()
	if awake.holders == 0 {
		f, err := os.OpenFile("/dev/cpu_dma_latency", os.O_WRONLY, 0)
		if err != nil {
			return nil, fmt.Errorf("keep CPUs from halting: %w", err)
		}
		var zero [4]byte // a 32-bit latency in microseconds
		if _, err := f.Write(zero[:]); err != nil {
			f.Close()
			return nil, fmt.Errorf("keep CPUs from halting: %w", err)
		}
		awake.f = f
	}
	awake.holders++
	return func() {
		awake.Lock()
		defer awake.Unlock()
		if awake.holders--; awake.holders == 0 {
			awake.f.Close()
			awake.f = nil
		}
	}, nil
}

// machine describes this machine for a report: kernel, CPU model and
// count, memory.
func machine() string {
	var u unix.Utsname
	unix.Uname(&u)
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	var si unix.Sysinfo_t
	unix.Sysinfo(&si)
	return fmt.Sprintf("Linux %s, %d × %s, %.1f GiB", unix.ByteSliceToString(u.Release[:]), runtime.NumCPU(), model,
		float64(si.Totalram)*float64(si.Unit)/(1<<30))
}
