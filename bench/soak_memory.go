package bench

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/lab"
)

// The soak's agent_memory invariant: no agent's resident memory grows by
// a tenth from its second minute to the end (issue 17). A back-end agent
// holding a full table moves by tens of megabytes within a minute (the
// GC's cycle under the churn, a state save's buffer, the table sent again
// after a takeover and the release that follows it), so one sample at
// each end compares whatever phases they fell on: run 24 failed on r3
// "331,596 → 384,688 kB", its first look just after a release. The watch
// samples every few seconds and compares peaks: the highest resident
// memory in the process's first watched minute against the highest in
// its last, which is also what an operator must provision for.

// memEvery is how often the watch samples.
const memEvery = 3 * time.Second

// memGrowth is the growth that breaks the invariant.
const memGrowth = 0.10

// rssSample is one process's resident memory at one time.
type rssSample struct {
	kB int64
	at time.Time
}

// memWatch follows the resident memory of every msr process of the
// default lab once it is a minute old.
type memWatch struct {
	mu      sync.Mutex
	samples map[string][]rssSample // by "host pid N"
	done    chan struct{}
}

// watchMemory samples until ctx ends.
func watchMemory(ctx context.Context) *memWatch {
	w := &memWatch{samples: map[string][]rssSample{}, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(memEvery)
		defer t.Stop()
		for {
			w.sample(agentRSS(), time.Now())
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return w
}

func (w *memWatch) sample(rss map[string]int64, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for proc, kB := range rss {
		w.samples[proc] = append(w.samples[proc], rssSample{kB, now})
	}
}

// grown is, for each process watched for a minute or more, a line when
// its peak over its last minute passed its peak over its first by more
// than memGrowth (a process watched under two minutes: the halves of its
// watch); and how many processes were compared.
func (w *memWatch) grown() (broken []string, compared int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for proc, ss := range w.samples {
		first, last := ss[0].at, ss[len(ss)-1].at
		span := last.Sub(first)
		if span < time.Minute {
			continue // restarted late, or the soak was short
		}
		compared++
		win := min(time.Minute, span/2)
		var early, late int64
		for _, s := range ss {
			if s.at.Sub(first) <= win {
				early = max(early, s.kB)
			}
			if last.Sub(s.at) <= win {
				late = max(late, s.kB)
			}
		}
		if float64(late) > (1+memGrowth)*float64(early) {
			broken = append(broken, fmt.Sprintf("%s peak %d kB in its first watched %v → %d kB in its last (%v watched, %d samples)",
				proc, early, win.Round(time.Second), late, span.Round(time.Second), len(ss)))
		}
	}
	sort.Strings(broken)
	return broken, compared
}

// agentRSS is the resident memory (kB) of each msr process in the default
// lab that has run for a minute at least (one younger is still filling its
// heap and touching its maps' pages), by host and pid. It reads /proc
// once, telling each process's host by its network namespace's inode, so
// that sampling every few seconds costs the loaded machine little.
func agentRSS() map[string]int64 {
	rss := map[string]int64{}
	st, err := lab.ReadState(demo.LabName)
	if err != nil {
		return rss
	}
	hosts := map[string]string{} // "net:[inode]" -> host
	for _, n := range st.Nodes {
		var s syscall.Stat_t
		if syscall.Stat("/var/run/netns/"+n.Namespace, &s) == nil {
			hosts[fmt.Sprintf("net:[%d]", s.Ino)] = n.Name
		}
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return rss
	}
	for _, e := range entries {
		pid := e.Name()
		if pid[0] < '0' || pid[0] > '9' {
			continue
		}
		if comm, _ := os.ReadFile("/proc/" + pid + "/comm"); strings.TrimSpace(string(comm)) != "msr" {
			continue
		}
		ns, _ := os.Readlink("/proc/" + pid + "/ns/net")
		h, ok := hosts[ns]
		if !ok || processAge(pid) < time.Minute {
			continue
		}
		status, _ := os.ReadFile("/proc/" + pid + "/status")
		for _, l := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				rss[h+" pid "+pid] = n
			}
		}
	}
	return rss
}
