package soak

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/lab"
)

// The soak's CPU watch: where the machine's CPUs went, a second at a
// time, and which of the lab's processes waited for one. In the
// link-down + hostile steps the active VCP's processes stood still
// together, runnable with almost no CPU time, BIRD's keepalives to the
// back-ends late past their hold time (docs/reliability.md); a loop
// reading the clocks every 50 ms saw no gap, so
// the machine did not stop. What held the CPU was not seen: that watcher
// counted processes, not the CPUs' softirq time. This one writes both to
// the report: cpu.csv, each CPU's time by kind every second (ticks of
// 1/100 s), and procs.csv, every second, each process in a lab host's
// namespace or kernel thread that ran for a fifth of a second or more, or
// was seen runnable or in uninterruptible sleep in most of five looks,
// with its ticks and the CPU it last ran on.

// cpuLooks is how many looks at the processes each second takes.
const cpuLooks = 5

// cpuWatch holds what the watch saw.
type cpuWatch struct {
	mu          sync.Mutex
	cpus, procs []string // csv rows, without the header
	done        chan struct{}
}

// cpuTimes is one CPU's line of /proc/stat: user, nice, system, idle,
// iowait, irq, softirq, steal (ticks).
type cpuTimes [8]uint64

// parseCPUStat reads each CPU's times from /proc/stat's text (cpu0,
// cpu1, ...; not the total).
func parseCPUStat(text string) map[string]cpuTimes {
	out := map[string]cpuTimes{}
	for _, l := range strings.Split(text, "\n") {
		f := strings.Fields(l)
		if len(f) < 9 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		var t cpuTimes
		for i := range t {
			t[i], _ = strconv.ParseUint(f[i+1], 10, 64)
		}
		out[f[0]] = t
	}
	return out
}

// procLook is what /proc/PID/stat says of a process.
type procLook struct {
	name    string
	state   byte
	ticks   uint64 // utime + stime
	start   uint64 // starttime: ticks since boot
	lastCPU int
}

// parseProcStat reads /proc/PID/stat's text; the name may hold spaces
// and parentheses, so the fields are counted from its last ')'.
func parseProcStat(text string) (procLook, bool) {
	open, end := strings.IndexByte(text, '('), strings.LastIndexByte(text, ')')
	if open < 0 || end < open || end+2 > len(text) {
		return procLook{}, false
	}
	f := strings.Fields(text[end+2:]) // from field 3, state
	if len(f) < 37 {
		return procLook{}, false
	}
	utime, _ := strconv.ParseUint(f[11], 10, 64)
	stime, _ := strconv.ParseUint(f[12], 10, 64)
	start, _ := strconv.ParseUint(f[19], 10, 64)
	cpu, _ := strconv.Atoi(f[36])
	return procLook{name: text[open+1 : end], state: f[0][0], ticks: utime + stime, start: start, lastCPU: cpu}, true
}

// procStates counts a process's states over a second's looks.
type procStates struct{ running, uninterruptible, looks int }

// watchCPU looks every second until ctx ends; start is the soak's.
func watchCPU(ctx context.Context, start time.Time) *cpuWatch {
	w := &cpuWatch{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		prevCPU := map[string]cpuTimes{}
		prevTicks := map[string]uint64{}
		for ctx.Err() == nil {
			states := map[string]*procStates{}
			last := map[string]procLook{}
			for range cpuLooks {
				for pid, p := range lookProcs() {
					c := states[pid]
					if c == nil {
						c = &procStates{}
						states[pid] = c
					}
					switch p.state {
					case 'R':
						c.running++
					case 'D':
						c.uninterruptible++
					}
					c.looks++
					last[pid] = p
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second / cpuLooks):
				}
			}
			at, hosts := time.Since(start).Seconds(), labHosts()
			b, _ := os.ReadFile("/proc/stat")
			now := parseCPUStat(string(b))
			var cpus, procs []string
			for cpu, t := range now {
				if p, ok := prevCPU[cpu]; ok {
					cpus = append(cpus, fmt.Sprintf("%.0f,%s,%d,%d,%d,%d,%d,%d", at, cpu,
						t[0]+t[1]-p[0]-p[1], t[2]-p[2], t[5]-p[5], t[6]-p[6], t[3]+t[4]-p[3]-p[4], t[7]-p[7]))
				}
			}
			prevCPU = now
			for pid, p := range last {
				host := hosts[lab.ProcNetns(pid)]
				d := p.ticks - min(prevTicks[pid], p.ticks)
				if _, seen := prevTicks[pid]; !seen {
					d = 0
				}
				prevTicks[pid] = p.ticks
				c := states[pid]
				kernel := host == "" && (strings.HasPrefix(p.name, "ksoftirqd") || strings.HasPrefix(p.name, "kworker"))
				if host == "" && !kernel {
					continue
				}
				if d >= 20 || 2*(c.running+c.uninterruptible) > c.looks {
					procs = append(procs, fmt.Sprintf("%.0f,%s,%s,%s,%d,%d,%d,%d,%d", at, cmp.Or(host, "-"), pid, p.name, c.running, c.uninterruptible, c.looks, d, p.lastCPU))
				}
			}
			w.mu.Lock()
			w.cpus = append(w.cpus, cpus...)
			w.procs = append(w.procs, procs...)
			w.mu.Unlock()
		}
	}()
	return w
}

// pids are the processes running now, as /proc names them.
func pids() []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		if pid := e.Name(); pid[0] >= '0' && pid[0] <= '9' {
			out = append(out, pid)
		}
	}
	return out
}

// lookProcs reads every process's stat once.
func lookProcs() map[string]procLook {
	out := map[string]procLook{}
	for _, pid := range pids() {
		b, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			continue
		}
		if p, ok := parseProcStat(string(b)); ok {
			out[pid] = p
		}
	}
	return out
}

// labHosts are the default lab's hosts by their namespace's inode
// ("net:[N]", as /proc/PID/ns/net reads).
func labHosts() map[string]string {
	hosts := map[string]string{}
	st, err := lab.ReadState(demo.LabName)
	if err != nil {
		return hosts
	}
	for _, n := range st.Nodes {
		if id := lab.NetnsID(n.Namespace); id != "" {
			hosts[id] = n.Name
		}
	}
	return hosts
}

// writeCSVs writes cpu.csv and procs.csv into dir.
func (w *cpuWatch) writeCSVs(dir string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	cpus := "at_s,cpu,user,system,irq,softirq,idle,steal\n" + strings.Join(w.cpus, "\n") + "\n"
	procs := "at_s,host,pid,name,running_looks,uninterruptible_looks,looks,ticks,last_cpu\n" + strings.Join(w.procs, "\n") + "\n"
	if err := os.WriteFile(dir+"/cpu.csv", []byte(cpus), 0o644); err != nil {
		return err
	}
	return os.WriteFile(dir+"/procs.csv", []byte(procs), 0o644)
}
