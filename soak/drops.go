package soak

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/router/routerapi"
)

// The soak's drop ledger: every element's drop counters are read before
// and after each step, and a step that lost frames says which counters
// grew meanwhile, so that a loss is accounted for by the element and the
// reason that dropped it (or by none: then it was lost on a wire, in a
// host, or by an agent-less moment that no counter sees). A back-end's
// data-path counters outlive its agent (pinned maps); its agent's own
// (the slow path's) start again with it, so a counter that went down is
// taken as counted from zero.

// dropLedger is one look at every drop counter: "ELEMENT REASON" →
// count.
type dropLedger map[string]uint64

// lookDrops reads the drop counters of both LBs' ports and of backends:
// the data paths' drops, the frames they passed their slow path for no
// route, and what the agents' slow paths dropped; and the kernel's
// (lookKernelDrops).
func lookDrops(backends []string) dropLedger {
	l := dropLedger{}
	for _, b := range backends {
		st, err := routerapi.Local(b, "").Status()
		if err != nil || st.Stats == nil {
			continue
		}
		for k, v := range st.Stats.Drops {
			l[b+" "+k] = v
		}
		l[b+" no_route (slow path)"] = st.Stats.Slow["no_route"]
		for k, v := range st.SlowPath {
			if strings.Contains(k, "drop") || strings.Contains(k, "lost") || strings.HasPrefix(k, "no_route") || strings.HasSuffix(k, "errors") {
				l[b+" agent "+k] = v
			}
		}
	}
	for _, lb := range demo.LBs {
		st, err := demo.LBStatus(lb)
		if err != nil {
			continue
		}
		for _, p := range st.Ports {
			if p.Stats == nil {
				continue
			}
			for k, v := range p.Stats.Drops {
				l[p.Name+" "+k] = v
			}
		}
	}
	lookKernelDrops(l)
	return l
}

// lookKernelDrops adds the kernel's own drop counters to l, the ones no
// element of msr keeps: every interface's in every namespace of the lab
// (`ip -s -s -j link`: a veth's frames dropped for a full queue or an
// XDP redirect that failed, a bridge's, a host's), and the backlog
// drops of every CPU (/proc/net/softnet_stat's second column: frames a
// CPU had no room to queue, as when the machine stands still). Lost
// frames that no counter of msr saw are
// looked for here.
func lookKernelDrops(l dropLedger) {
	prefix := lab.Namespace(demo.LabName, "")
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		h, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		out, err := exec.Command("ip", "-n", lab.Namespace(demo.LabName, h), "-s", "-s", "-j", "link", "show").Output()
		if err != nil {
			continue
		}
		links, err := linkDrops(out)
		if err != nil {
			continue
		}
		for k, v := range links {
			l[h+"/"+k] = v
		}
	}
	if b, err := os.ReadFile("/proc/net/softnet_stat"); err == nil {
		l["kernel softnet backlog_dropped"] = softnetDropped(string(b))
	}
}

// linkDrops reads `ip -s -s -j link show`: "IFNAME rx_dropped" → count,
// and so for the other drop and error counters of each direction.
func linkDrops(js []byte) (map[string]uint64, error) {
	var links []struct {
		Name  string `json:"ifname"`
		Stats struct {
			RX map[string]json.Number `json:"rx"`
			TX map[string]json.Number `json:"tx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal(js, &links); err != nil {
		return nil, err
	}
	m := map[string]uint64{}
	for _, ln := range links {
		for dir, counters := range map[string]map[string]json.Number{"rx": ln.Stats.RX, "tx": ln.Stats.TX} {
			for k, v := range counters {
				if k == "bytes" || k == "packets" || k == "multicast" || k == "collisions" || k == "carrier_changes" {
					continue
				}
				if n, err := strconv.ParseUint(v.String(), 10, 64); err == nil && n > 0 {
					m[ln.Name+" kernel "+dir+"_"+k] = n
				}
			}
		}
	}
	return m, nil
}

// softnetDropped sums /proc/net/softnet_stat's second column (hex), the
// frames each CPU dropped for a full backlog.
func softnetDropped(s string) uint64 {
	var n uint64
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if v, err := strconv.ParseUint(f[1], 16, 64); err == nil {
			n += v
		}
	}
	return n
}

// grown is what grew from l to after (a counter that went down counted
// from zero), but for ignored reasons.
func (l dropLedger) grown(after dropLedger) map[string]uint64 {
	g := map[string]uint64{}
	for k, v := range after {
		if was := l[k]; v > was {
			g[k] = v - was
		} else if v < was && v > 0 {
			g[k] = v
		}
	}
	return g
}

// dropsText lists grown counters, the largest first.
func dropsText(g map[string]uint64) string {
	keys := make([]string, 0, len(g))
	for k := range g {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return g[keys[i]] > g[keys[j]] || g[keys[i]] == g[keys[j]] && keys[i] < keys[j] })
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s +%d", k, g[k]))
	}
	if len(parts) == 0 {
		return "no drop counter grew"
	}
	return strings.Join(parts, ", ")
}

// softirqLook is how the kernel's softirqs fared, per CPU: how often
// net_rx_action ran out of budget or time with NAPI work left
// (softnet_stat's time_squeeze: the rest goes to ksoftirqd), how long
// each CPU's ksoftirqd ran and waited for the CPU (schedstat, ms), and
// how long the hypervisor kept each virtual CPU from running (/proc/stat's
// steal, ms). Every step keeps its growth (Step.Softirq), so that a
// step that lost frames at a veth's full ring can be set beside the steps
// that lost none. Runs 30, 33 and 54 lost frames so (a NAPI not polled
// for 13 ms at 20,000 frames a second); finding 38 found the hypervisor
// taking a CPU for 8.4 ms now and then (DefaultRate).
func softirqLook() map[string]uint64 {
	m := map[string]uint64{}
	if b, err := os.ReadFile("/proc/net/softnet_stat"); err == nil {
		for cpu, n := range softnetSqueezed(string(b)) {
			m[fmt.Sprintf("cpu%d time_squeeze", cpu)] = n
		}
	}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		for cpu, ms := range stealMs(string(b)) {
			m[cpu+" steal_ms"] = ms
		}
	}
	for name, schedstat := range ksoftirqds() {
		b, err := os.ReadFile(schedstat)
		if err != nil {
			continue
		}
		if ran, waited, ok := schedstatMs(string(b)); ok {
			m[name+" ran_ms"], m[name+" waited_ms"] = ran, waited
		}
	}
	return m
}

// ksoftirqds finds each CPU's ksoftirqd once (kernel threads that last
// as long as their CPU): "ksoftirqd/N" → its /proc/PID/schedstat.
var ksoftirqds = sync.OnceValue(func() map[string]string {
	m := map[string]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		comm, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if name := strings.TrimSpace(string(comm)); err == nil && strings.HasPrefix(name, "ksoftirqd/") {
			m[name] = "/proc/" + e.Name() + "/schedstat"
		}
	}
	return m
})

// softnetSqueezed reads /proc/net/softnet_stat's third column (hex), each
// CPU's time_squeeze, by the CPU's line.
func softnetSqueezed(s string) []uint64 {
	var n []uint64
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		v, _ := strconv.ParseUint(f[2], 16, 64)
		n = append(n, v)
	}
	return n
}

// stealMs reads /proc/stat's per-CPU lines (parseCPUStat): the time
// each CPU was ready to run but the hypervisor ran something else, ms.
// The kernel counts it in USER_HZ ticks, 100 a second on Linux: 10 ms
// each.
func stealMs(s string) map[string]uint64 {
	m := map[string]uint64{}
	for cpu, t := range parseCPUStat(s) {
		m[cpu] = t[7] * 10
	}
	return m
}

// schedstatMs reads /proc/PID/schedstat: the time the task ran and the
// time it waited on a run queue, ns, as ms.
func schedstatMs(s string) (ran, waited uint64, ok bool) {
	f := strings.Fields(s)
	if len(f) < 2 {
		return 0, 0, false
	}
	r, err1 := strconv.ParseUint(f[0], 10, 64)
	w, err2 := strconv.ParseUint(f[1], 10, 64)
	return r / 1e6, w / 1e6, err1 == nil && err2 == nil
}
