package soak

import (
	"encoding/xml"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The plot is well-formed SVG with a bar a step (and one more where a step
// lost frames), a dashed line a fault with its kind, and nothing drawn
// outside the picture.
func TestSoakPlot(t *testing.T) {
	r := &Report{DurationS: 16, Seed: 1, Sent: 320_000, Steps: []Step{
		{AtS: 0, Family: "ipv4", Sent: 80_000, Received: 80_000},
		{AtS: 4, Family: "ipv4", Sent: 80_000, Received: 78_000, Lost: 2000, Fault: "backend-links"},
		{AtS: 8, Family: "ipv6", Sent: 80_000, Received: 80_000},
		{AtS: 12, Family: "ipv6", Sent: 80_000, Received: 80_000, Fault: "lb-agent"}},
		Faults: []FaultReport{{Kind: "backend-links", AtS: 5}, {Kind: "lb-agent", AtS: 13}}}
	var b strings.Builder
	if err := r.WritePlot(&b); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	d := xml.NewDecoder(strings.NewReader(svg))
	rects, lines, kinds := 0, 0, 0
	for {
		tok, err := d.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("not well-formed: %v\n%s", err, svg)
			}
			break
		}
		switch e := tok.(type) {
		case xml.StartElement:
			switch e.Name.Local {
			case "rect":
				rects++
			case "line":
				lines++
			}
		case xml.CharData:
			if s := string(e); s == "backend-links" || s == "lb-agent" {
				kinds++
			}
		}
	}
	// The background, two panels, four steps' bars, one loss bar.
	if rects != 1+2+4+1 || lines != 2 || kinds != 2 {
		t.Errorf("%d rects, %d lines, %d kinds named; want 8, 2, 2:\n%s", rects, lines, kinds, svg)
	}
}

// A fault step's goal: none lost, but a back-end host down may lose its
// share and bgp1's link its flows (none of h3's); overlapping faults add
// their allowances.
func TestStepGoal(t *testing.T) {
	links := &soakFault{fault: &hostDown{host: "r1"}}
	ext := &soakFault{fault: linkFlap{}}
	lb := &soakFault{fault: &agentCrash{what: "lb-agent", host: "lb1", name: "lb"}}
	// bgp1 with a table of routes (2,000: TestSoak's; 600,000: a full
	// one, 12 s more to leave or reach the back-ends).
	downWith := func(routes int, withdrawn, restored time.Duration) *soakFault {
		now := time.Now()
		d := &linkDown{downAt: now, bgp1Routes: routes}
		d.upAt = now.Add(d.downFor())
		if withdrawn > 0 {
			d.withdrawn = now.Add(withdrawn)
		}
		if restored > 0 {
			d.restored = d.upAt.Add(restored)
		}
		return &soakFault{fault: d}
	}
	down := func(withdrawn, restored time.Duration) *soakFault { return downWith(2000, withdrawn, restored) }
	for _, c := range []struct {
		name   string
		faults []*soakFault
		st     Step
		span   time.Duration
		want   bool
	}{
		{"an agent, nothing lost", []*soakFault{lb}, Step{Sent: 90_000}, 0, true},
		{"an agent, a frame lost", []*soakFault{lb}, Step{Sent: 90_000, Lost: 1, LostToBGP1: 1}, time.Millisecond, false},
		{"a host down, its share", []*soakFault{links}, Step{Sent: 90_000, Lost: 2500, LostToH3: 1250, LostToBGP1: 1250}, 300 * time.Millisecond, true},
		{"a host down, too long", []*soakFault{links}, Step{Sent: 90_000, Lost: 2500}, 500 * time.Millisecond, false},
		{"a host down, more than its share", []*soakFault{links}, Step{Sent: 90_000, Lost: 40_000}, 300 * time.Millisecond, false},
		{"bgp1's link, its flows", []*soakFault{ext}, Step{Sent: 90_000, Lost: 10_000, LostToBGP1: 10_000}, time.Second, true},
		{"bgp1's link, h3's flows too", []*soakFault{ext}, Step{Sent: 90_000, Lost: 10_001, LostToH3: 1, LostToBGP1: 10_000}, time.Second, false},
		{"bgp1's link and an agent together", []*soakFault{ext, lb}, Step{Sent: 90_000, Lost: 10_000, LostToBGP1: 10_000}, time.Second, true},
		{"a host down and bgp1's link together", []*soakFault{links, ext}, Step{Sent: 90_000, Lost: 12_000, LostToH3: 1000, LostToBGP1: 11_000}, time.Second, true},
		{"bgp1's link down, routes withdrawn and back in time", []*soakFault{down(14*time.Second, 7*time.Second)}, Step{Sent: 600_000, Lost: 250_000, LostToBGP1: 250_000}, 23 * time.Second, true},
		{"bgp1's link down, routes never withdrawn", []*soakFault{down(0, 7*time.Second)}, Step{Sent: 600_000, Lost: 250_000, LostToBGP1: 250_000}, 23 * time.Second, false},
		{"bgp1's link down, routes withdrawn late", []*soakFault{down(17*time.Second, 7*time.Second)}, Step{Sent: 600_000, Lost: 250_000, LostToBGP1: 250_000}, 23 * time.Second, false},
		{"bgp1's full table withdrawn and back in time", []*soakFault{downWith(600_000, 27*time.Second, 31*time.Second)}, Step{Sent: 900_000, Lost: 400_000, LostToBGP1: 400_000}, 58 * time.Second, true},
		{"bgp1's full table withdrawn late", []*soakFault{downWith(600_000, 29*time.Second, 31*time.Second)}, Step{Sent: 900_000, Lost: 400_000, LostToBGP1: 400_000}, 58 * time.Second, false},
		{"bgp1's full table back late", []*soakFault{downWith(600_000, 27*time.Second, 33*time.Second)}, Step{Sent: 900_000, Lost: 400_000, LostToBGP1: 400_000}, 58 * time.Second, false},
		{"bgp1's link down, routes not back", []*soakFault{down(14*time.Second, 0)}, Step{Sent: 600_000, Lost: 290_000, LostToBGP1: 290_000}, 29 * time.Second, false},
		{"bgp1's link down and the VCP killed: routes kept, back in time", []*soakFault{down(0, 7*time.Second), {fault: vcpCrash{}}}, Step{Sent: 600_000, Lost: 250_000, LostToBGP1: 250_000}, 23 * time.Second, true},
		{"bgp1's link down and the VCP killed: routes not back", []*soakFault{down(0, 0), {fault: vcpCrash{}}}, Step{Sent: 600_000, Lost: 250_000, LostToBGP1: 250_000}, 23 * time.Second, false},
		{"a flood, every DIST frame counted", []*soakFault{{fault: &flood{dist: 4000, junk: 20000, counted: 4100}}}, Step{Sent: 80_000}, 0, true},
		{"a flood, a DIST frame not counted", []*soakFault{{fault: &flood{dist: 4000, counted: 3999}}}, Step{Sent: 80_000}, 0, false},
		{"a flood that changed something", []*soakFault{{fault: &flood{dist: 4000, counted: 4000, changed: "lb1 installed the forged table"}}}, Step{Sent: 80_000}, 0, false},
		{"a flood, a SYN to the inside not counted", []*soakFault{{fault: &flood{dist: 4000, counted: 4000, inside: 500, insideCounted: 499}}}, Step{Sent: 80_000}, 0, false},
		{"a flood, a BFD packet below TTL 255 not counted", []*soakFault{{fault: &flood{dist: 4000, counted: 4000, inside: 500, insideCounted: 500, gtsm: 60, gtsmCounted: 59}}}, Step{Sent: 80_000}, 0, false},
		{"a flood, a back-end took h2's MAC", []*soakFault{{fault: &flood{dist: 4000, counted: 4000, inside: 500, insideCounted: 500, changed: "r1 took h2's MAC for 198.51.100.20 vlan 11"}}}, Step{Sent: 80_000}, 0, false},
		{"a flood, a frame lost", []*soakFault{{fault: &flood{dist: 4000, counted: 4000}}}, Step{Sent: 80_000, Lost: 1, LostToH3: 1}, time.Millisecond, false},
		{"bgp1's link down, h3's flows too", []*soakFault{down(14*time.Second, 7*time.Second)}, Step{Sent: 600_000, Lost: 250_001, LostToH3: 1, LostToBGP1: 250_000}, 23 * time.Second, false},
	} {
		if _, got := stepGoal(c.faults, c.st, c.span); got != c.want {
			t.Errorf("%s: met %v, want %v", c.name, got, c.want)
		}
	}
}

// Overlapping faults are judged against the union of their outage goals'
// windows, each from when its fault came: a flow may lose frames through
// one and then the other. Faults apart are judged each by its own.
func TestStepGoalUnion(t *testing.T) {
	at := time.Now()
	links := &soakFault{fault: &hostDown{host: "r1"}, at: at}
	extAt := func(after time.Duration) *soakFault {
		return &soakFault{fault: linkFlap{}, at: at.Add(after)}
	}
	// r4 joining (allowed nothing) and, 600 ms later, bgp1's link down
	// past its hold time with bgp1's full table (seed 1 draws the pair).
	join := &soakFault{fault: (&backendJoin{}).turn(), at: at}
	d := &linkDown{downAt: at.Add(600 * time.Millisecond), bgp1Routes: 850_000}
	d.upAt = d.downAt.Add(d.downFor())
	d.withdrawn, d.restored = d.downAt.Add(22400*time.Millisecond), d.upAt.Add(14800*time.Millisecond)
	linkDown := &soakFault{fault: d, at: d.downAt}
	downGoal := linkDown.outage()
	for _, c := range []struct {
		name   string
		faults []*soakFault
		union  time.Duration
		span   time.Duration
		want   bool
	}{
		{"a host down, bgp1's link 300 ms later", []*soakFault{links, extAt(300 * time.Millisecond)}, 300*time.Millisecond + extLinkGoal, 1500 * time.Millisecond, true},
		{"a host down, bgp1's link 300 ms later, past both", []*soakFault{links, extAt(300 * time.Millisecond)}, 300*time.Millisecond + extLinkGoal, 1700 * time.Millisecond, false},
		{"bgp1's link first, a host down 1 s later", []*soakFault{extAt(0), {fault: &hostDown{host: "r2"}, at: at.Add(time.Second)}}, time.Second + backendDownGoal, 1350 * time.Millisecond, true},
		{"a host down, bgp1's link 2 s later: apart", []*soakFault{links, extAt(2 * time.Second)}, extLinkGoal, 1500 * time.Millisecond, false},
		{"r4 joining, bgp1's link down 600 ms later", []*soakFault{join, linkDown}, downGoal, downGoal - time.Second, true},
		{"r4 joining, bgp1's link down 600 ms later, past its goal", []*soakFault{join, linkDown}, downGoal, downGoal + time.Second, false},
	} {
		if got := outageUnion(c.faults); got != c.union {
			t.Errorf("%s: union %v, want %v", c.name, got, c.union)
		}
		st := Step{Sent: 900_000, Lost: 10_000, LostToBGP1: 10_000}
		if goal, got := stepGoal(c.faults, st, c.span); got != c.want {
			t.Errorf("%s: outage %v met %v, want %v (%s)", c.name, c.span, got, c.want, goal)
		}
	}
}

// The seconds an iperf3 UDP server counted losses in, from its text (the
// end's summary left out).
func TestLostSeconds(t *testing.T) {
	server := `[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams
[  5]   0.00-1.00   sec  61.0 KBytes   500 Kbits/sec  0.045 ms  0/125 (0%)  
[SUM]   0.00-1.00   sec   244 KBytes  2.00 Mbits/sec  0.039 ms  0/500 (0%)  
[SUM]   1.00-2.00   sec   230 KBytes  1.90 Mbits/sec  0.033 ms  28/500 (5.6%)  
[SUM]   2.00-3.00   sec   244 KBytes  2.00 Mbits/sec  0.033 ms  0/500 (0%)  
[SUM]   3.00-4.00   sec   240 KBytes  1.97 Mbits/sec  0.033 ms  7/500 (1.4%)  
[SUM]   0.00-4.00   sec   958 KBytes  1.96 Mbits/sec  0.048 ms  35/2000 (1.8%)  receiver
`
	if got, want := lostSeconds(server), "28 in second 1, 7 in second 3"; got != want {
		t.Errorf("lostSeconds: %q, want %q", got, want)
	}
}

// The ledger's growth: what grew, a counter that restarted (its agent
// did) taken from zero, the largest first.
func TestDropLedgerGrown(t *testing.T) {
	before := dropLedger{"r1 no_route (slow path)": 10, "r2 agent held_dropped": 50, "lb1/e1 dist_external": 7}
	after := dropLedger{"r1 no_route (slow path)": 1034, "r2 agent held_dropped": 16, "lb1/e1 dist_external": 7, "r3 bad_checksum": 2}
	g := before.grown(after)
	if want := (map[string]uint64{"r1 no_route (slow path)": 1024, "r2 agent held_dropped": 16, "r3 bad_checksum": 2}); !maps.Equal(g, want) {
		t.Errorf("grown %v, want %v", g, want)
	}
	if got, want := dropsText(g), "r1 no_route (slow path) +1024, r2 agent held_dropped +16, r3 bad_checksum +2"; got != want {
		t.Errorf("dropsText %q, want %q", got, want)
	}
}

// The kernel's drop counters: every interface's from `ip -s -s -j link`
// (the noise of bytes and packets left out), the CPUs' backlog drops.
func TestKernelDrops(t *testing.T) {
	js := []byte(`[{"ifindex":1,"ifname":"lo","stats64":{"rx":{"bytes":100,"packets":2,"errors":0,"dropped":0,"over_errors":0,"multicast":0},"tx":{"bytes":100,"packets":2,"errors":0,"dropped":0,"carrier_errors":0,"collisions":0}}},
	{"ifindex":2,"ifname":"e0","stats64":{"rx":{"bytes":9000,"packets":90,"errors":0,"dropped":23,"over_errors":0,"multicast":5,"missed_errors":1},"tx":{"bytes":10,"packets":1,"errors":0,"dropped":4,"carrier_changes":2}}}]`)
	got, err := linkDrops(js)
	if err != nil {
		t.Fatal(err)
	}
	if want := (map[string]uint64{"e0 kernel rx_dropped": 23, "e0 kernel rx_missed_errors": 1, "e0 kernel tx_dropped": 4}); !maps.Equal(got, want) {
		t.Errorf("linkDrops %v, want %v", got, want)
	}
	if _, err := linkDrops([]byte("Cannot find device")); err == nil {
		t.Error("ip's error text taken for counters")
	}
	softnet := "0000a1b2 00000003 00000010 00000000\n00001000 0000000a 00000000 00000000\n"
	if got := softnetDropped(softnet); got != 13 {
		t.Errorf("softnet dropped %d, want 13", got)
	}
	if got := softnetSqueezed(softnet); !slices.Equal(got, []uint64{16, 0}) {
		t.Errorf("softnet time_squeeze %v, want [16 0]", got)
	}
	if ran, waited, ok := schedstatMs("629685135289 1791836545826 1376194\n"); !ok || ran != 629685 || waited != 1791836 {
		t.Errorf("schedstat: ran %d ms, waited %d ms, %v; want 629685 and 1791836", ran, waited, ok)
	}
	if _, _, ok := schedstatMs(""); ok {
		t.Error("an empty schedstat read")
	}
	stat := "cpu  1923236 841 2731558 10087958 12190 0 712792 6137 0 0\n" +
		"cpu0 863012 430 1952916 4523365 3199 0 464091 2789 0 0\n" +
		"cpu1 1060224 411 778641 5564592 8991 0 248701 3348 0 0\nintr 1 2 3\n"
	if got, want := stealMs(stat), map[string]uint64{"cpu0": 27890, "cpu1": 33480}; !maps.Equal(got, want) {
		t.Errorf("steal %v, want %v", got, want)
	}
	// This machine's own: every CPU's squeezes, steal and ksoftirqd.
	look := softirqLook()
	for _, k := range []string{"cpu0 time_squeeze", "cpu0 steal_ms", "ksoftirqd/0 ran_ms", "ksoftirqd/0 waited_ms"} {
		if _, ok := look[k]; !ok {
			t.Errorf("softirqLook %v lacks %q", look, k)
		}
	}
}

// The soak keeps what the VCPs' suite logs gained while it ran: the part
// after their sizes before it, the whole of one that started again
// shorter, nothing of one that does not exist.
func TestKeepSuiteLogs(t *testing.T) {
	run, dir := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(run, "vcp1"), 0o755)
	os.MkdirAll(filepath.Join(run, "vcp2"), 0o755)
	os.WriteFile(filepath.Join(run, "vcp1/bird.log"), []byte("yesterday's run\n"), 0o644)
	os.WriteFile(filepath.Join(run, "vcp2/keepalived.log"), []byte("an old and long log\n"), 0o644)
	was := suiteLogSizes(run)
	f, _ := os.OpenFile(filepath.Join(run, "vcp1/bird.log"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("dynbgp3: Error: Hold timer expired\n")
	f.Close()
	os.WriteFile(filepath.Join(run, "vcp2/keepalived.log"), []byte("new\n"), 0o644)
	if err := keepSuiteLogs(dir, run, was); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{"vcp1.bird.log": "dynbgp3: Error: Hold timer expired\n", "vcp2.keepalived.log": "new\n"} {
		if b, err := os.ReadFile(filepath.Join(dir, file)); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", file, b, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "vcp2.bird.log")); err == nil {
		t.Error("a log that never was, kept")
	}
}

// The count's watch times a change to the read before it: a count that
// changes on its fourth read (about 400 ms in) is timed after the third;
// one that never changes leaves changedAfter zero.
func TestWatchCount(t *testing.T) {
	start := time.Now()
	reads := 0
	w := watchCount(func() (int, error) {
		reads++
		if reads >= 4 {
			return 601009, nil
		}
		return 601007, nil
	}, 601007, start)
	time.Sleep(650 * time.Millisecond)
	w.end()
	if w.last != 601009 || w.changedAfter.Sub(start) < 250*time.Millisecond || w.changedAfter.Sub(start) > 450*time.Millisecond || !w.lastAt.After(w.changedAfter) {
		t.Errorf("count %d, changed after %v, last read at %v (from the start); want 601009, after the third read (~300 ms)", w.last, w.changedAfter.Sub(start), w.lastAt.Sub(start))
	}
	still := watchCount(func() (int, error) { return 5, nil }, 5, start)
	time.Sleep(250 * time.Millisecond)
	still.end()
	if !still.changedAfter.IsZero() || still.last != 5 || !still.lastAt.After(start) {
		t.Errorf("an unchanged count: %+v", still)
	}
}
