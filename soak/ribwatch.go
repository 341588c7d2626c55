package soak

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/msr-router/msr/bench"
	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/router/routerapi"
)

// ribSyncLimit is how long after a step, the router converged, the RIB
// may take to settle and the back-ends' FIBs to equal it: after a VCP
// takeover or a suite's restart the new suite's OSPF adjacency takes
// seconds (hello 1 s, dead 4 s) while the back-ends keep the routes they
// had (graceful restart), so the two agree only once OSPF has come back.
// ribQuietLimit is the goal for the back-ends themselves: every
// FIB equals the RIB within it of the RIB's last change.
const (
	ribSyncLimit  = 20 * time.Second
	ribQuietLimit = time.Second
)

// A ribSync is how a step's FIBs came to equal the RIB: Took from the
// step's end, Lag from quiet, AfterRIB from the RIB's last change (the
// look before the one that saw it changed: a bound, not a sample, at a
// look every 100-400 ms; the step's end if none did), each 0 if the FIBs
// were equal before.
//
// Quiet is the RIB's last change; in a step whose feeds start again (a
// takeover, a suite's or a back-end agent's restart) it is the later of
// that and the last back-end's table arriving whole on its new session
// (routerapi.RoutesDigest.TableArrived): until then routes are still on
// their way to the back-ends. BGP sends a new session the table whole,
// 600,000 routes to each of four back-ends on this 2-core machine, 4-7 s
// after the RIB's last change; AfterRIB is that.
//
// Looks is what the last looks saw, for a report of a lag over the goal.
type ribSync struct {
	Took, Lag, AfterRIB time.Duration
	Looks               string
}

// A ribWatch compares the back-ends' FIBs with the RIB after each step
// (until). Reading a full table's RIB takes a second (`birdc show route`,
// 56 MB for 600,000 routes), too long between looks to bound a 1 s lag,
// so it looks in two ways:
//   - a quick look every 100 ms or so: the RIB's count of networks
//     (`birdc show route count`, 0.1 s) and each back-end's digest (25
//     ms), which say when the RIB changed and when each back-end's count
//     stands where it stood against the RIB's when they were last equal
//     (offset);
//   - a full look when the counts say so, or 2 s after the last: the RIB
//     read whole and set against the digests, the FIBs equal to it or not.
//
// A full look that finds them equal, with the RIB's count and the digests
// the same again after it as at the quick look before it, says they were
// equal at that quick look, or from the FIBs' last change if that came
// before it (each back-end says when its FIB last changed: the digest's
// fib_changed). If they moved while it read, it looks again.
type ribWatch struct {
	offset map[string]int // by back-end: the RIB's networks less its routes, when last equal
}

// ribFullEvery is the longest between two full looks: a back-end whose
// count stands elsewhere against the RIB's (a connected subnet more or
// less) is compared all the same.
const ribFullEvery = 2 * time.Second

// until compares the back-ends' FIBs with the RIB until they are equal
// (with refresh, a step whose feeds start again: and every back-end's
// table has arrived on its session), and says how long that took from
// now, from quiet and from the RIB's last change; the last difference
// after limit, with the prefixes that differ.
func (w *ribWatch) until(limit time.Duration, backends []string, refresh bool) (ribSync, error) {
	start := time.Now()
	u := &ribUntil{w: w, backends: backends, refresh: refresh, start: start, lastChange: start, prevNetworks: -1}
	var lastErr error
	for {
		look := time.Now()
		if u.active == "" {
			u.active, _ = bench.ActiveVCP()
		}
		late := look.Sub(start) > limit
		networks, digests, err := quickLook(u.active, backends)
		if err != nil {
			u.saw(look, "quick look: %v", err)
			u.active, lastErr = "", err
			if late {
				return ribSync{Took: time.Since(start)}, lastErr
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if u.prevNetworks >= 0 && networks != u.prevNetworks {
			u.lastChange = u.prevLook
		}
		u.prevNetworks, u.prevLook = networks, look
		if refresh && !late {
			if _, err := tablesArrived(digests); err != nil {
				// Not quiet yet, and a full look (the RIB read whole, a
				// second of the suite's time with a full table) would
				// only slow the tables' arrival.
				u.saw(look, "quick look: %d networks; %v", networks, err)
				lastErr = err
				time.Sleep(100 * time.Millisecond)
				continue
			}
		}
		u.saw(look, "quick look: %d networks, %s", networks, digestsText(digests))
		if late || w.candidate(networks, digests) || look.Sub(u.lastFull) >= ribFullEvery {
			sync, err := u.fullLook(look, networks, digests, late)
			if err == nil {
				return sync, nil
			}
			lastErr = err
			if late {
				return ribSync{Took: time.Since(start)}, lastErr
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ribUntil is one until's looks: what the last looks saw, and when the
// RIB last changed as far as they can tell.
type ribUntil struct {
	w                      *ribWatch
	backends               []string
	refresh                bool
	start, lastChange      time.Time
	prevNetworks           int
	prevLook, prevFullLook time.Time
	prevRIB                *ribLook
	lastFull               time.Time
	active                 string   // found once, again after an error
	looks                  []string // the last ribLooksKept looks, as said
}

func (u *ribUntil) saw(at time.Time, format string, args ...any) {
	u.looks = append(u.looks, at.Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
	if len(u.looks) > ribLooksKept {
		u.looks = u.looks[1:]
	}
}

// fullLook reads the RIB whole and sets it against the back-ends'
// digests, after the quick look at look saw networks and digests: the
// sync when they were equal, else why not.
func (u *ribUntil) fullLook(look time.Time, networks int, digests map[string]*routerapi.RoutesDigest, late bool) (ribSync, error) {
	// While the full look reads the RIB whole (a second with a full
	// table), the count is still read every 100 ms: a change meanwhile is
	// timed to its read, not to the full look's start (a change during a
	// long look would be timed from before it).
	counts := watchCount(func() (int, error) { return ribCount(u.active) }, networks, look)
	rib, err := fibEqualsRIB(u.active, u.backends, late)
	counts.end()
	if counts.changedAfter.After(u.lastChange) {
		u.lastChange = counts.changedAfter
	}
	u.prevNetworks, u.prevLook = counts.last, counts.lastAt
	u.lastFull = time.Now()
	if rib == nil {
		u.active = ""
	} else {
		if u.prevRIB != nil && !rib.same(u.prevRIB) && u.prevFullLook.After(u.lastChange) {
			u.lastChange = u.prevFullLook // a change the count did not show
		}
		u.prevRIB, u.prevFullLook = rib, look
	}
	if err != nil {
		u.saw(u.lastFull, "full look: %v", err)
		return ribSync{}, err
	}
	// Equal as read. The quick look after says whether the RIB's count or
	// a back-end's digest moved meanwhile: then the look can say neither
	// when they were equal nor that they still are, and looks again.
	look2 := time.Now()
	n2, d2, err := quickLook(u.active, u.backends)
	switch {
	case err != nil:
		return ribSync{}, err
	case n2 != networks || !maps.EqualFunc(digests, d2, sameDigest):
		if n2 != u.prevNetworks && u.prevLook.After(u.lastChange) {
			// The RIB changed after the count's last read (one the
			// count's watch saw is in lastChange).
			u.lastChange = u.prevLook
		}
		// The next quick look's count is compared with this one's: a
		// change after it is a change after look2, not after look, a
		// second earlier, which would count the full look's time as lag.
		u.prevNetworks, u.prevLook = n2, look2
		u.saw(time.Now(), "full look: equal as read, then %d networks, %s: looking again", n2, digestsText(d2))
		return ribSync{}, errors.New("the RIB or a FIB changed while read")
	}
	u.w.calibrate(n2, d2)
	// Equal at the quick look before, or at the FIBs' last change if
	// earlier: they have not changed since (the RIB, which they equal,
	// may have changed after without them needing to: then the lag is
	// none).
	at, how := look, "as at the quick look before it"
	if changed, ok := fibsChanged(d2); ok && changed.Before(at) {
		at, how = changed, "since the FIBs' last change"
	}
	var arrived time.Time // the last back-end's table arrived
	if u.refresh {
		if arrived, err = tablesArrived(d2); err != nil {
			return ribSync{}, err
		}
	}
	u.saw(at, "full look: equal, %s; then %d networks, %s", how, n2, digestsText(d2))
	// lastChange is start if the RIB never changed while looked at: the
	// step's end.
	u.saw(u.lastChange, "the RIB's last change (the step's end if none)")
	return ribSync{Took: time.Since(u.start), Lag: sinceQuiet(at, u.lastChange, arrived), AfterRIB: max(0, at.Sub(u.lastChange)), Looks: strings.Join(u.looks, "; ")}, nil
}

// candidate says whether each back-end's count stands where it stood
// against the RIB's when they were last equal (a back-end never yet
// equal to it: yes).
func (w *ribWatch) candidate(networks int, digests map[string]*routerapi.RoutesDigest) bool {
	for b, d := range digests {
		if off, ok := w.offset[b]; ok && networks-d.Routes-len(d.Connected) != off {
			return false
		}
	}
	return true
}

// calibrate notes where each back-end's count stands against the RIB's
// once they are equal.
func (w *ribWatch) calibrate(networks int, digests map[string]*routerapi.RoutesDigest) {
	if w.offset == nil {
		w.offset = map[string]int{}
	}
	for b, d := range digests {
		w.offset[b] = networks - d.Routes - len(d.Connected)
	}
}

// sinceQuiet is how long after quiet, the later of the RIB's last change
// and the back-ends' tables' arrival (zero: none to wait for), the FIBs
// were seen equal to the RIB at at; 0 if they already were.
func sinceQuiet(at, lastChange, arrived time.Time) time.Duration {
	quiet := lastChange
	if arrived.After(quiet) {
		quiet = arrived
	}
	return max(0, at.Sub(quiet))
}

// ribLooksKept is how many of its last looks until keeps to say.
const ribLooksKept = 12

// digestsText says each back-end's count and table's arrival, for a look
// said.
func digestsText(digests map[string]*routerapi.RoutesDigest) string {
	var out []string
	for _, b := range slices.Sorted(maps.Keys(digests)) {
		d := digests[b]
		t := b + " " + strconv.Itoa(d.Routes)
		if a, err := time.Parse(time.RFC3339Nano, d.TableArrived); err == nil {
			t += " (table " + a.Local().Format("15:04:05.000") + ")"
		}
		out = append(out, t)
	}
	return strings.Join(out, ", ")
}

// latestStamp is the latest of the back-ends' times that stamp reads from
// their digests (routerapi.Stamp); lacking, a back-end whose digest has
// none; an error, one that is not a time.
func latestStamp(digests map[string]*routerapi.RoutesDigest, stamp func(*routerapi.RoutesDigest) string) (last time.Time, lacking string, err error) {
	for b, d := range digests {
		if stamp(d) == "" {
			return time.Time{}, b, nil
		}
		t, err := time.Parse(time.RFC3339Nano, stamp(d))
		if err != nil {
			return time.Time{}, "", fmt.Errorf("%s: %v", b, err)
		}
		if t.After(last) {
			last = t
		}
	}
	return last, "", nil
}

// fibsChanged is when the last of the back-ends' FIBs last changed, if
// every back-end says (one whose FIB never changed, adopted from its
// saved state, does not).
func fibsChanged(digests map[string]*routerapi.RoutesDigest) (time.Time, bool) {
	last, lacking, err := latestStamp(digests, func(d *routerapi.RoutesDigest) string { return d.FIBChanged })
	return last, lacking == "" && err == nil && len(digests) > 0
}

// tablesArrived is when the last of the back-ends' tables arrived whole
// on its feed's session; an error while one is still arriving.
func tablesArrived(digests map[string]*routerapi.RoutesDigest) (time.Time, error) {
	last, lacking, err := latestStamp(digests, func(d *routerapi.RoutesDigest) string { return d.TableArrived })
	switch {
	case lacking != "":
		return time.Time{}, fmt.Errorf("%s's table still arriving on its RIB feed", lacking)
	case err != nil:
		return time.Time{}, fmt.Errorf("table_arrived: %v", err)
	}
	return last, nil
}

func sameDigest(a, b *routerapi.RoutesDigest) bool {
	return a.Routes == b.Routes && a.Sum == b.Sum && slices.Equal(a.Connected, b.Connected)
}

// quickLook reads the active VCP's count of networks (both families) and
// each back-end's digest.
func quickLook(active string, backends []string) (int, map[string]*routerapi.RoutesDigest, error) {
	networks, err := ribCount(active)
	if err != nil {
		return 0, nil, err
	}
	digests := map[string]*routerapi.RoutesDigest{}
	for _, b := range backends {
		d, err := routerapi.Local(b, "").RoutesDigest()
		if err != nil {
			return 0, nil, fmt.Errorf("%s: %w", b, err)
		}
		slices.Sort(d.Connected)
		digests[b] = d
	}
	return networks, digests, nil
}

// ribCount is the networks in the active VCP's RIB (`birdc show route
// count`).
func ribCount(active string) (int, error) {
	if active == "" {
		return 0, errors.New("no VCP is active")
	}
	out, err := exec.Command("birdc", "-s", filepath.Join(demo.RunDir, active, "bird.ctl"), "show", "route", "count").Output()
	if err != nil {
		return 0, fmt.Errorf("birdc show route count on %s: %v", active, err)
	}
	networks, err := birdNetworks(string(out))
	if err != nil {
		return 0, fmt.Errorf("birdc show route count on %s: %v", active, err)
	}
	return networks, nil
}

// countWatch reads the RIB's count every 100 ms from its start until
// end: last is the last count read, lastAt when that read began, and
// changedAfter when the read before the last change began (zero: the
// count never changed). A change came after the RIB that read saw, so
// that is the earliest it can have been.
type countWatch struct {
	stop, done   chan struct{}
	last         int
	lastAt       time.Time
	changedAfter time.Time
}

// watchCount starts a countWatch from a count read at at; read is the
// count's reader (ribCount). A read that fails is skipped.
func watchCount(read func() (int, error), count int, at time.Time) *countWatch {
	w := &countWatch{stop: make(chan struct{}), done: make(chan struct{}), last: count, lastAt: at}
	go func() {
		defer close(w.done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
			began := time.Now()
			n, err := read()
			if err != nil {
				continue
			}
			if n != w.last {
				w.changedAfter = w.lastAt
			}
			w.last, w.lastAt = n, began
		}
	}()
	return w
}

// end stops the watch; its fields are then final.
func (w *countWatch) end() {
	close(w.stop)
	<-w.done
}

// birdNetworks reads `birdc show route count`: the networks of every
// table ("600005 of 600005 routes for 600004 networks in table master4").
func birdNetworks(out string) (int, error) {
	n, tables := 0, 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if i := slices.Index(f, "networks"); i >= 1 && i+2 < len(f) && f[i+1] == "in" && f[i+2] == "table" {
			v, err := strconv.Atoi(f[i-1])
			if err != nil {
				return 0, fmt.Errorf("%q: %v", line, err)
			}
			n += v
			tables++
		}
	}
	if tables == 0 {
		return 0, fmt.Errorf("no table's count in %q", out)
	}
	return n, nil
}

// A ribLook is the RIB as a look read it: its prefixes, and their count
// and sum of routerapi.PrefixHash, to set against a back-end's digest.
type ribLook struct {
	prefixes map[netip.Prefix]bool
	sum      uint64
}

func newRIBLook(prefixes map[netip.Prefix]bool) *ribLook {
	r := &ribLook{prefixes: prefixes}
	for p := range prefixes {
		r.sum += routerapi.PrefixHash(p)
	}
	return r
}

// same says whether two looks read the same prefixes.
func (r *ribLook) same(o *ribLook) bool {
	return len(r.prefixes) == len(o.prefixes) && r.sum == o.sum
}

// matches says whether a back-end's digest holds exactly the RIB's
// prefixes: the RIB's but the back-end's connected ones (a RIB may list
// a port's subnet from OSPF; the back-end's own route for it is the
// connected one).
func (r *ribLook) matches(d *routerapi.RoutesDigest) bool {
	n, sum := len(r.prefixes), r.sum
	for _, c := range d.Connected {
		if p, err := netip.ParsePrefix(c); err == nil && r.prefixes[p] {
			n--
			sum -= routerapi.PrefixHash(p)
		}
	}
	return d.Routes == n && d.Sum == routerapi.DigestSum(sum)
}

// fibEqualsRIB compares each of backends' FIB with the active VCP's RIB
// (BIRD's tables): the prefixes BIRD has a route for from any protocol but
// the ports' own (direct), against each back-end's routes but its
// connected ones. A back-end answers with its routes' digest (a full
// table's 600,000 routes would take seconds to list); with detail, one
// that differs is read whole to say which prefixes differ.
func fibEqualsRIB(active string, backends []string, detail bool) (*ribLook, error) {
	if active == "" {
		return nil, errors.New("no VCP is active")
	}
	prefixes, err := readBIRDPrefixes(filepath.Join(demo.RunDir, active, "bird.ctl"))
	if err != nil {
		return nil, fmt.Errorf("birdc show route on %s: %v", active, err)
	}
	rib := newRIBLook(prefixes)
	var errs []error
	for _, b := range backends {
		d, err := routerapi.Local(b, "").RoutesDigest()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", b, err))
			continue
		}
		if rib.matches(d) {
			continue
		}
		if !detail {
			errs = append(errs, fmt.Errorf("%s: %d routes (digest %s) where the RIB has %d", b, d.Routes, d.Sum, len(rib.prefixes)))
			continue
		}
		errs = append(errs, fibDiff(b, rib.prefixes))
	}
	return rib, errors.Join(errs...)
}

// fibDiff reads back-end b's routes whole and says which of the RIB's
// prefixes it misses and which it has that the RIB has not.
func fibDiff(b string, rib map[netip.Prefix]bool) error {
	routes, err := routerapi.Local(b, "").Routes()
	if err != nil {
		return fmt.Errorf("%s: %w", b, err)
	}
	fib, connected := map[netip.Prefix]bool{}, map[netip.Prefix]bool{}
	for _, r := range routes {
		p, err := netip.ParsePrefix(r.Prefix)
		if err != nil {
			continue
		}
		if r.Protocol == "connected" {
			connected[p] = true
		} else {
			fib[p] = true
		}
	}
	var missing, extra []string
	for p := range rib {
		if !fib[p] && !connected[p] {
			missing = append(missing, p.String())
		}
	}
	for p := range fib {
		if !rib[p] {
			extra = append(extra, p.String())
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	return fmt.Errorf("%s: %d of the RIB's %d prefixes missing %v, %d not in the RIB %v", b, len(missing), len(rib), head(missing), len(extra), head(extra))
}

// readBIRDPrefixes runs `birdc show route` on socket and reads its
// prefixes (birdPrefixes) as they come.
func readBIRDPrefixes(socket string) (map[netip.Prefix]bool, error) {
	cmd := exec.Command("birdc", "-s", socket, "show", "route")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ps, rerr := birdPrefixes(out)
	if err := cmd.Wait(); err != nil {
		return nil, err
	}
	return ps, rerr
}

// head is the first few of a list, for a message.
func head(s []string) []string { return s[:min(len(s), 5)] }

// birdPrefixes reads `birdc show route`: the prefixes with a route from
// a protocol other than direct. A prefix's line starts with it; the lines
// of its other routes start with blanks; each route names its protocol in
// brackets ("[peer0 12:00:01.123] * (100) [AS65020i]").
func birdPrefixes(out io.Reader) (map[netip.Prefix]bool, error) {
	ps := map[netip.Prefix]bool{}
	var cur netip.Prefix
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		if line[0] != ' ' && line[0] != '\t' {
			first, _, _ := strings.Cut(line, " ")
			if p, err := netip.ParsePrefix(first); err == nil {
				cur = p
			}
		}
		i := strings.Index(line, "[")
		if i < 0 || !cur.IsValid() {
			continue
		}
		proto, _, _ := strings.Cut(line[i+1:], " ")
		if strings.Contains(line[:i], "unicast") && !strings.HasPrefix(proto, "direct") {
			ps[cur] = true
		}
	}
	return ps, sc.Err()
}
