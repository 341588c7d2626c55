package soak

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

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/router/routerapi"
)

// The soak's agent_memory invariant: no agent's resident memory grows by
// a tenth from its second minute to the end. A back-end agent
// holding a full table moves by tens of megabytes within a minute (the
// GC's cycle under the churn, a state save's buffer, the table sent again
// after a takeover and the release that follows it), so one sample at
// each end compares whatever phases they fell on (a first look just
// after a release makes a leak of nothing). The watch
// samples every few seconds and judges floors: the lowest resident memory
// of each minute, the level memory comes back to, which a leak raises.
// Their trend, a least-squares line through the minutes' floors, gives
// the growth from the first watched minute to the last; one floor against
// another still moves by ±10% with no trend. Peaks are no measure of
// growth: a takeover's refresh in the last minute and none in the first
// makes the last peak some 30% higher, leak or not. Floors and peaks are reported, and every sample is written
// to the report's memory.csv.
//
// A sample's floor is still a matter of when it falls: the lowest of a
// minute's samples is taken anywhere from just after the agent's release
// of its free heap to 3 s of garbage later. A back-end agent's floors
// moved by ±10% with a live heap that did not grow (runs 33-38: r1's live
// heap 172-205 MB in its heap profiles, the floors 300-365 MB), and
// agents restarted late, judged on the halves of 2 minutes' watch, failed
// on it (runs 34, 36, 38: +10.6% to +13.9%). So a back-end agent is
// judged on its resident memory just after each of its releases (the RIB
// feed's, every minute while it holds a table: the agent measures it
// itself and reports it in its status, routerapi.MemoryRelease): the
// same moment of its collections every time, the level a leak raises.
// With two releases or more watched, their trend is judged; a back-end
// that releases, watched under two minutes with fewer, is not compared
// (said so); one watched longer without them, one that holds a table too
// small to release (TestSoak's 1,000 prefixes), and the LB agents (30
// MB, no table) are judged on their floors.

// memEvery is how often the watch samples.
const memEvery = 3 * time.Second

// memGrowth is the growth that breaks the invariant.
const memGrowth = 0.10

// rssSample is one process's resident memory at one time.
type rssSample struct {
	kB int64
	at time.Time
}

// releaseEvery is how often the watch asks the back-ends for their last
// release (they release every minute).
const releaseEvery = 10 * time.Second

// A releaseSample is a back-end agent's memory just after one of its
// releases.
type releaseSample struct {
	kB, heapKB     int64
	unusedKB, goKB int64
	n              uint64 // the agent's count of its releases
	at             time.Time
}

// memWatch follows the resident memory of every msr process of the
// default lab once it is a minute old, and the back-end agents' memory
// after their releases from then on.
type memWatch struct {
	mu       sync.Mutex
	samples  map[string][]rssSample     // by "host pid N"
	releases map[string][]releaseSample // by "host pid N"
	// releasing: the processes that reported a release, watched or not
	// (they hold a big table: a small one is not released).
	releasing map[string]bool
	// backends are the back-ends' hosts, asked for their releases.
	backends map[string]bool
	// young are the hosts whose agent was upgraded in place, until its
	// new program is a minute old (restarted).
	young map[string]time.Time
	done  chan struct{}
}

func newMemWatch(backends []string) *memWatch {
	w := &memWatch{samples: map[string][]rssSample{}, releases: map[string][]releaseSample{}, releasing: map[string]bool{},
		backends: map[string]bool{}, young: map[string]time.Time{}, done: make(chan struct{})}
	for _, b := range backends {
		w.backends[b] = true
	}
	return w
}

// watchMemory samples until ctx ends.
func watchMemory(ctx context.Context) *memWatch {
	w := newMemWatch(append(slices.Clone(demo.Backends), joinName))
	var asking sync.WaitGroup
	asking.Go(func() {
		t := time.NewTicker(releaseEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for b := range w.backends {
				if st, err := routerapi.Local(b, "").Status(); err == nil && st.RIB != nil && st.RIB.Release != nil {
					w.released(b, *st.RIB.Release)
				}
			}
		}
	})
	go func() {
		defer close(w.done)
		defer asking.Wait()
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

// released records a back-end's last release, if the watch follows its
// process (it is a minute old) and the release came since it did.
func (w *memWatch) released(host string, r routerapi.MemoryRelease) {
	at, err := time.Parse(time.RFC3339, r.At)
	if err != nil {
		return
	}
	proc := host + " pid " + strconv.Itoa(r.PID)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.releasing[proc] = true
	ss, rs := w.samples[proc], w.releases[proc]
	if len(ss) == 0 || at.Before(ss[0].at) || len(rs) > 0 && rs[len(rs)-1].n == r.Releases {
		return
	}
	w.releases[proc] = append(rs, releaseSample{kB: r.ResidentKB, heapKB: r.HeapLiveKB, unusedKB: r.HeapUnusedKB, goKB: r.GoKB, n: r.Releases, at: at})
}

func (w *memWatch) sample(rss map[string]int64, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for proc, kB := range rss {
		host, _, _ := strings.Cut(proc, " pid ")
		if now.Before(w.young[host]) {
			continue
		}
		w.samples[proc] = append(w.samples[proc], rssSample{kB, now})
	}
}

// restarted says host's agent was upgraded in place at: the same pid, a
// new program. What was watched of the old one is kept apart, judged on
// its own; the new one is watched once a minute old, as a new process.
func (w *memWatch) restarted(host string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.young[host] = at.Add(time.Minute)
	old := " (its program before " + at.Format(time.TimeOnly) + ")"
	for proc := range w.samples {
		if strings.HasPrefix(proc, host+" pid ") {
			w.samples[proc+old], w.releases[proc+old], w.releasing[proc+old] = w.samples[proc], w.releases[proc], w.releasing[proc]
			delete(w.samples, proc)
			delete(w.releases, proc)
			delete(w.releasing, proc)
		}
	}
}

// grown is, for each process watched for a minute or more, a line when
// its memory grew by more than memGrowth from its first watched minute to
// its last: for a back-end agent with two releases watched or more, the
// trend of its resident memory just after them; for the others, the
// trend of its floors (watched under three minutes: the halves of its
// watch, their floors). And how many processes were compared, and what
// was seen of each.
func (w *memWatch) grown() (broken []string, compared int, levels []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for proc, ss := range w.samples {
		first, last := ss[0].at, ss[len(ss)-1].at
		span := last.Sub(first)
		if span < time.Minute {
			continue // restarted late, or the soak was short
		}
		rs := w.releases[proc]
		if len(rs) >= 2 {
			compared++
			from, to := releaseTrend(rs)
			text := fmt.Sprintf("%s resident just after its releases %d → %d kB (trend %d → %d), live heap %d → %d kB (%d releases in %v watched; floors of its samples %d → %d kB)",
				proc, rs[0].kB, rs[len(rs)-1].kB, int64(from), int64(to), rs[0].heapKB, rs[len(rs)-1].heapKB, len(rs), span.Round(time.Second),
				lowest(ss, first, first.Add(time.Minute)), lowest(ss, last.Add(-time.Minute), last))
			levels = append(levels, text)
			if to > (1+memGrowth)*from {
				broken = append(broken, text)
			}
			continue
		}
		if w.releasing[proc] && span < 2*time.Minute {
			levels = append(levels, fmt.Sprintf("%s not compared: %d release watched in %v (a release a minute; restarted late)", proc, len(rs), span.Round(time.Second)))
			continue
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
// the first window and at the last (two windows: their floors). A window
// without a sample has no floor and is left out (its MaxInt64 would
// make a trend of 9e17 kB).
func floorTrend(lv []memLevel) (from, to float64) {
	var xs, ys []float64
	for i, l := range lv {
		if l.floor != math.MaxInt64 {
			xs, ys = append(xs, float64(i)), append(ys, float64(l.floor))
		}
	}
	at0, slope := leastSquares(xs, ys)
	return at0, at0 + slope*float64(len(lv)-1)
}

// releaseTrend is the least-squares line through the resident memory
// after each release, by its time, at the first release and at the last.
func releaseTrend(rs []releaseSample) (from, to float64) {
	xs, ys := make([]float64, len(rs)), make([]float64, len(rs))
	for i, r := range rs {
		xs[i], ys[i] = r.at.Sub(rs[0].at).Seconds(), float64(r.kB)
	}
	at0, slope := leastSquares(xs, ys)
	return at0, at0 + slope*xs[len(xs)-1]
}

// leastSquares is the line through the points (xs, ys): its value at x 0
// and its slope (0 where the xs do not differ).
func leastSquares(xs, ys []float64) (at0, slope float64) {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i, x := range xs {
		sx, sy, sxx, sxy = sx+x, sy+ys[i], sxx+x*x, sxy+x*ys[i]
	}
	if d := n*sxx - sx*sx; d > 0 {
		slope = (n*sxy - sx*sy) / d
	}
	return (sy - slope*sx) / n, slope
}

// lowest is the least of the samples from from to to.
func lowest(ss []rssSample, from, to time.Time) int64 {
	low := int64(math.MaxInt64)
	for _, s := range ss {
		if !s.at.Before(from) && !s.at.After(to) {
			low = min(low, s.kB)
		}
	}
	return low
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

// writeReleasesCSV writes the back-ends' memory after each release
// watched: seconds since start, process, the agent's count, and kB
// resident, of live heap, of the heap's unused room, and held by the Go
// runtime (routerapi.MemoryRelease).
func (w *memWatch) writeReleasesCSV(path string, start time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	b.WriteString("at_s,process,release,resident_kb,heap_live_kb,heap_unused_kb,go_kb\n")
	for _, proc := range slices.Sorted(maps.Keys(w.releases)) {
		for _, r := range w.releases[proc] {
			fmt.Fprintf(&b, "%.1f,%s,%d,%d,%d,%d,%d\n", r.at.Sub(start).Seconds(), proc, r.n, r.kB, r.heapKB, r.unusedKB, r.goKB)
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
	self := strconv.Itoa(os.Getpid())
	for _, pid := range pids() {
		// Not the soak itself, an msr too: its main thread, sending from
		// h1 inside netns.Do, shows h1's namespace as the process's now
		// and then (as "h1 pid N", the soak's 120-215 MB).
		if pid == self {
			continue
		}
		if comm, _ := os.ReadFile("/proc/" + pid + "/comm"); strings.TrimSpace(string(comm)) != "msr" {
			continue
		}
		h, ok := hosts[lab.ProcNetns(pid)]
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
