package router

import (
	"fmt"
	"slices"
	"strings"

	"github.com/msr-router/msr/internal/config"
	"github.com/msr-router/msr/internal/element"
)

// The slow path's rates: each reason the data path hands a frame to the
// agent for (SlowNames) passes at most its rate, with its burst, on each
// back-end, checked in the data path before the frame is queued
// (rt_slow_caps); what exceeds them is dropped and counted by reason
// (slow_dropped). A flood of one reason (TTL 1, packets to no route or to
// a subnet's unused addresses) so spends its own bucket and leaves the
// channel to the others: ARP and NDP learning, PMTUD's Fragmentation
// Needed, the router's own traffic.

// SlowRate is one reason's rate, frames a second, and burst, frames.
type SlowRate struct {
	PPS   uint64     `yaml:"pps" json:"pps"`
	Burst uint64     `yaml:"burst" json:"burst"`
	Pos   config.Pos `yaml:"-" json:"-"`
}

// DefaultSlowRates are each reason's rate on a back-end unless its file
// says otherwise: far above what the router's own work brings (ARP and
// NDP answers, ICMP errors at icmp_rate), and unresolved's burst larger
// than what a back-end joining under load holds for a new neighbour
// (docs/reliability.md, finding 41).
var DefaultSlowRates = map[string]SlowRate{
	"arp":         {PPS: 2000, Burst: 200},
	"ndp":         {PPS: 2000, Burst: 200},
	"ttl":         {PPS: 1000, Burst: 100},
	"no_route":    {PPS: 1000, Burst: 100},
	"frag_needed": {PPS: 1000, Burst: 100},
	"fragment":    {PPS: 10000, Burst: 1000},
	"local":       {PPS: 2000, Burst: 200},
	"options":     {PPS: 1000, Burst: 100},
	"unresolved":  {PPS: 10000, Burst: 1000},
	"acl":         {PPS: 1000, Burst: 100},
}

// parseSlowRates is the file's slow_path over the defaults, by reason.
func parseSlowRates(file map[string]*SlowRate, pos config.Pos) ([len(SlowNames)]SlowRate, error) {
	var out [len(SlowNames)]SlowRate
	for i, name := range SlowNames {
		out[i] = DefaultSlowRates[name]
	}
	for name, r := range file {
		i := slices.Index(SlowNames[:], name)
		if i < 0 {
			return out, pos.Errorf("slow_path: no reason %q (reasons: %s)", name, strings.Join(SlowNames[:], ", "))
		}
		if r == nil || r.PPS == 0 || r.Burst == 0 {
			return out, slowPos(r, pos).Errorf("slow_path %s: a rate and a burst of at least 1 (a reason cannot be shut: its frames would be lost unanswered)", name)
		}
		if r.PPS > element.MaxCapacityPPS {
			return out, r.Pos.Errorf("slow_path %s: pps %d, at most %d", name, r.PPS, element.MaxCapacityPPS)
		}
		out[i] = SlowRate{PPS: r.PPS, Burst: r.Burst}
	}
	return out, nil
}

func slowPos(r *SlowRate, pos config.Pos) config.Pos {
	if r == nil {
		return pos
	}
	return r.Pos
}

// writeSlowRates puts rates into the data path.
func (d *Dataplane) writeSlowRates(rates [len(SlowNames)]SlowRate) error {
	for i, r := range rates {
		var c rtxdpMsrCap
		c.IntervalNs, c.ToleranceNs = element.GCRATiming(r.PPS, r.Burst)
		if err := d.objs.RtSlowCaps.Put(uint32(i), &c); err != nil {
			return fmt.Errorf("slow path rate %s: %w", SlowNames[i], err)
		}
	}
	return nil
}
