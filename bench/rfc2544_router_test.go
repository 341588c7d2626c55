package bench

import (
	"testing"
	"time"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/internal/msrtest"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/traffic"
)

// TestWholeRouter restarts each part of the whole router in the
// default lab under the instrument's traffic (h1 to h3, 1,000 flows):
// every trial forwards, the router converges again after each, and the
// back-end host whose links go down for a second loses frames (its
// flows, until the LBs drop it) for no longer than the LBs take to
// (three hello intervals: well under the second it is down). Then seed
// 002's single frames on the same lab. All of it with IPv4 frames, then
// with IPv6 ones (RFC 5180's, to h3's IPv6 address) on the same lab.
func TestWholeRouter(t *testing.T) {
	bin, remove, err := msrtest.Build("../cmd/msr")
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	o := RFC2544Options{Trial: time.Second, Flows: 1000, MSRBin: bin}
	router := &routerLab{msrBin: bin, flows: o.Flows}
	defer router.Close()
	for _, ipv6 := range []bool{false, true} {
		router.ipv6 = ipv6
		size, family := 64, "IPv4"
		if ipv6 {
			size, family = traffic.MinFrameSize6, "IPv6"
		}
		rows, err := resetRouter(o, router, size, 100_000, msrtest.Log{T: t})
		if err != nil {
			t.Fatalf("%s: %v", family, err)
		}
		byReset := map[string]RFC2544Row{}
		for _, r := range rows {
			byReset[r.Reset] = r
			if r.Lab != demo.LabName || r.DUT != "msr" || r.RatePPS <= 0 || len(r.SeriesPPS) == 0 || r.LossRatio >= 0.5 {
				t.Errorf("%s: reset %s: %+v", family, r.Reset, r)
			}
		}
		for _, a := range routerResets() {
			if _, ok := byReset[a.name]; !ok {
				t.Errorf("%s: no row for the reset of the %s", family, a.name)
			}
		}
		links := byReset["back-end host links"]
		detect := 0.7 * float64(HostDownHold/time.Millisecond)
		if links.Lost == 0 || links.LossSpanMS <= 0 || links.LossSpanMS > detect {
			t.Errorf("%s: r1's links down for %v: %d frames lost, longest outage %.1f ms; want some, under %.0f ms (the LBs drop it, the hold does not decide)",
				family, HostDownHold, links.Lost, links.LossSpanMS, detect)
		}

		// Single frames: the first after every back-end forgot its
		// neighbours is held while h3 is asked for (ARP, or NDP), not
		// dropped.
		rows, err = singleRouter(router, size, msrtest.Log{T: t})
		if err != nil {
			t.Fatalf("%s: %v", family, err)
		}
		if len(rows) != 2 {
			t.Fatalf("%s: %d single-frame rows, want unresolved and resolved", family, len(rows))
		}
		for _, r := range rows {
			if !r.Forwarded || r.LatencyUS == nil || r.Lab != demo.LabName {
				t.Errorf("%s: a single frame, next hop %s: %+v", family, r.Neighbor, r)
			}
		}
		if rows[0].Neighbor != "unresolved" || rows[1].LatencyUS != nil && rows[0].LatencyUS != nil && rows[0].LatencyUS.P50 <= rows[1].LatencyUS.P50 {
			t.Errorf("%s: the frame held for an address resolution (%+v) was not slower than one forwarded at once (%+v)", family, rows[0].LatencyUS, rows[1].LatencyUS)
		}
	}
	router.Close()
	if _, err := lab.ReadState(demo.LabName); err == nil {
		t.Error("the default lab is still up after the test")
	}
}
