package bench

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The soak's agent_memory invariant: no agent's resident memory grows by
// a tenth from its second minute to the end (issue 17). A back-end agent
// holding a full table moves by tens of megabytes within a minute (the
// GC's cycle under the churn, a state save's buffer, the table sent again
// after a takeover and the release that follows it), so one sample at
// each end compares whatever phases they fell on: run 24 failed on r3
// "331,596 → 384,688 kB", its first look just after a release. The watch
// samples every few seconds and judges floors: the lowest resident memory
// of each minute, the level memory comes back to, which a leak raises.
// Their trend, a least-squares line through the minutes' floors, gives
// the growth from the first watched minute to the last; one floor against
// another still moves by ±10% (run 26: r1's minutes 296-351 MB, no trend).
// Peaks are no measure of growth: a takeover's refresh in the last minute
// and none in the first made run 25's r1 peak 30% higher (402 → 524 MB),
// leak or not. Floors and peaks are reported, and every sample is written
// to the report's memory.csv.

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
// the trend of its floors grew by more than memGrowth from its first
// watched minute to its last (watched under three minutes: the halves of
// its watch, their floors); and how many processes were compared, and
// their floors and peaks.
func (w *memWatch) grown() (broken []string, compared int, levels []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for proc, ss := range w.samples {
		first, last := ss[0].at, ss[len(ss)-1].at
		span := last.Sub(first)
		if span < time.Minute {
			continue // restarted late, or the soak was short
		}
		compared++
		win := time.Minute
		if span < 3*time.Minute {
			win = span / 2
		}
		// The floor and peak of each window from the first sample on; the
		// last window ends with the last sample.
		n := int(span / win)
		lv := make([]memLevel, n)
		for i := range lv {
			lv[i].floor = math.MaxInt64
		}
		for _, s := range ss {
			lv[min(int(s.at.Sub(first)/win), n-1)].add(s.kB)
		}
		from, to := floorTrend(lv)
		text := fmt.Sprintf("%s floor %d → %d kB (trend %d → %d), peak %d → %d kB (%d windows of %v, %v watched, %d samples)",
			proc, lv[0].floor, lv[n-1].floor, int64(from), int64(to), lv[0].peak, lv[n-1].peak, n, win.Round(time.Second), span.Round(time.Second), len(ss))
		levels = append(levels, text)
		if to > (1+memGrowth)*from {
			broken = append(broken, text)
		}
	}
	sort.Strings(broken)
	sort.Strings(levels)
	return broken, compared, levels
}

// floorTrend is the least-squares line through the windows' floors, at
// the first window and at the last (two windows: their floors).
func floorTrend(lv []memLevel) (from, to float64) {
	n := float64(len(lv))
	var sx, sy, sxx, sxy float64
	for i, l := range lv {
		x, y := float64(i), float64(l.floor)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	slope := (n*sxy - sx*sy) / (n*sxx - sx*sx)
	at0 := (sy - slope*sx) / n
	return at0, at0 + slope*(n-1)
}

// memLevel is the lowest and highest of a window's samples.
type memLevel struct{ floor, peak int64 }

func (l *memLevel) add(kB int64) {
	l.floor, l.peak = min(l.floor, kB), max(l.peak, kB)
}

// writeCSV writes every sample: seconds since start, process, kB.
func (w *memWatch) writeCSV(path string, start time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	b.WriteString("at_s,process,rss_kb\n")
	procs := slices.Sorted(maps.Keys(w.samples))
	for _, proc := range procs {
		for _, s := range w.samples[proc] {
			fmt.Fprintf(&b, "%.1f,%s,%d\n", s.at.Sub(start).Seconds(), proc, s.kB)
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// agentRSS is the resident memory (kB) of each msr process in the default
// lab that has run for a minute at least (one younger is still filling its
// heap and touching its maps' pages), by host and pid. It reads /proc
// once, telling each process's host by its network namespace's inode, so
// that sampling every few seconds costs the loaded machine little.
func agentRSS() map[string]int64 {
	rss := map[string]int64{}
	hosts := labHosts()
	if len(hosts) == 0 {
		return rss
	}
	for _, pid := range pids() {
		if comm, _ := os.ReadFile("/proc/" + pid + "/comm"); strings.TrimSpace(string(comm)) != "msr" {
			continue
		}
		h, ok := hosts[netnsOf(pid)]
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
