package lb

import (
	"encoding/binary"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/cilium/ebpf"

	"github.com/msr-router/msr/internal/config"
	"github.com/msr-router/msr/internal/element"
	"github.com/msr-router/msr/internal/flow"
)

// Control-plane policing (bpf/lb.bpf.c's police): traffic from outside to
// the router itself passes only within its class's rate and, before that,
// within the rate of its own source's bucket in the class, so that a flood
// aimed at the router cannot take its sessions down nor starve the
// answers to other hosts. docs/lb.md gives the classes and the defaults.

// PoliceClass is a class of traffic to the router (enum lb_police_class).
type PoliceClass uint32

// The classes, in lb_police_rates' order.
const (
	PoliceBGP   = PoliceClass(lbxdpLbPoliceClassLB_POLICE_BGP)
	PoliceIGP   = PoliceClass(lbxdpLbPoliceClassLB_POLICE_IGP)
	PoliceBFD   = PoliceClass(lbxdpLbPoliceClassLB_POLICE_BFD)
	PoliceMgmt  = PoliceClass(lbxdpLbPoliceClassLB_POLICE_MGMT)
	PoliceICMP  = PoliceClass(lbxdpLbPoliceClassLB_POLICE_ICMP)
	PoliceLocal = PoliceClass(lbxdpLbPoliceClassLB_POLICE_LOCAL)
	// PoliceClasses is how many there are; PoliceNone is transit.
	PoliceClasses = int(lbxdpLbPoliceClassLB_POLICE_CLASSES)
	PoliceNone    = PoliceClass(lbxdpLbPoliceClassLB_POLICE_NONE)
	// policeSources is the number of source buckets per class.
	policeSources = uint32(lbxdpLbLimitLB_POLICE_SOURCES)
	// policeSalt is mixed into the source buckets' hash beside the data
	// path's own seed (bpf/common.h).
	policeSalt = uint32(lbxdpFlowSeedFLOW_SEED_POLICE)
)

// PoliceClassNames name the classes in the config, the status and the docs.
var PoliceClassNames = [...]string{"bgp", "igp", "bfd", "mgmt", "icmp", "local"}

func (c PoliceClass) String() string {
	if int(c) < len(PoliceClassNames) {
		return PoliceClassNames[c]
	}
	return "none"
}

// PoliceRate is one class's limits: packets a second for the class as a
// whole and for each source in it, and how many packets beyond the rate
// a burst may bring (for both). A zero rate is no limit.
type PoliceRate struct {
	PPS          uint64     `yaml:"pps" json:"pps"`
	PerSourcePPS uint64     `yaml:"per_source_pps" json:"per_source_pps"`
	Burst        uint64     `yaml:"burst" json:"burst"`
	Pos          config.Pos `yaml:"-" json:"-"`
}

// DefaultPolice are the rates an LB polices with unless its config says
// otherwise: far above what the router's sessions need (a BGP peer's full
// table arrives at a few thousand segments a second; OSPF, BFD and
// management at tens), far below what a flood brings. Per source, one host
// gets a fraction of its class, so a flood from it leaves room for the
// others.
var DefaultPolice = [PoliceClasses]PoliceRate{
	PoliceBGP:   {PPS: 20000, PerSourcePPS: 5000, Burst: 2000},
	PoliceIGP:   {PPS: 5000, PerSourcePPS: 1000, Burst: 500},
	PoliceBFD:   {PPS: 5000, PerSourcePPS: 1000, Burst: 100},
	PoliceMgmt:  {PPS: 5000, PerSourcePPS: 2000, Burst: 500},
	PoliceICMP:  {PPS: 2000, PerSourcePPS: 500, Burst: 100},
	PoliceLocal: {PPS: 2000, PerSourcePPS: 500, Burst: 100},
}

// maxPolicePPS bounds a rate: its interval (1e9 / pps) stays at least a
// nanosecond.
const maxPolicePPS = 1_000_000_000

// parsePolice merges the file's police section over the defaults,
// refusing an unknown class or a rate out of bounds at its line (at pos,
// the file's, for a class given no value).
func parsePolice(file map[string]*PoliceRate, pos config.Pos) ([PoliceClasses]PoliceRate, error) {
	rates := DefaultPolice
	for _, name := range slices.Sorted(maps.Keys(file)) {
		r := file[name]
		c, ok := policeClassNamed(name)
		if !ok {
			if r != nil {
				pos = r.Pos
			}
			return rates, pos.Errorf("police: unknown class %q (use %v)", name, PoliceClassNames)
		}
		if r == nil {
			continue
		}
		if r.PPS > maxPolicePPS || r.PerSourcePPS > maxPolicePPS {
			return rates, r.Pos.Errorf("police %s: at most %d packets a second (0: no limit)", name, maxPolicePPS)
		}
		if r.PPS != 0 && r.PerSourcePPS > r.PPS {
			return rates, r.Pos.Errorf("police %s: per_source_pps %d above the class's pps %d", name, r.PerSourcePPS, r.PPS)
		}
		if r.Burst == 0 {
			r.Burst = DefaultPolice[c].Burst
		}
		rates[c] = *r
	}
	return rates, nil
}

func policeClassNamed(name string) (PoliceClass, bool) {
	for i, n := range PoliceClassNames {
		if n == name {
			return PoliceClass(i), true
		}
	}
	return PoliceNone, false
}

// SetPolice sets class c's rates and empties its buckets' history.
func (d *Dataplane) SetPolice(c PoliceClass, r PoliceRate) error {
	var v lbxdpLbPoliceRate
	v.IntervalNs, v.ToleranceNs = element.GCRATiming(r.PPS, r.Burst)
	v.SrcIntervalNs, v.SrcToleranceNs = element.GCRATiming(r.PerSourcePPS, r.Burst)
	if err := d.objs.LbPoliceRates.Put(uint32(c), &v); err != nil {
		return fmt.Errorf("set police %s: %w", c, err)
	}
	n := policeSources + 1
	keys := make([]uint32, n)
	vals := make([]lbxdpLbPoliceBucket, n)
	for i := range keys {
		keys[i] = uint32(c)*n + uint32(i)
	}
	if _, err := d.objs.LbPoliceBuckets.BatchUpdate(keys, vals, &ebpf.BatchOptions{}); err != nil {
		return fmt.Errorf("reset police %s buckets: %w", c, err)
	}
	return nil
}

// PoliceCounts is what a class let through and dropped, summed over CPUs.
type PoliceCounts struct {
	Passed        uint64 `json:"passed"`
	DroppedSource uint64 `json:"dropped_source"`
	DroppedClass  uint64 `json:"dropped_class"`
}

// PoliceStats reads every class's counters.
func (d *Dataplane) PoliceStats() ([PoliceClasses]PoliceCounts, error) {
	var all [PoliceClasses]PoliceCounts
	for c := range all {
		var per []lbxdpLbPoliceCounts
		if err := d.objs.LbPoliceStats.Lookup(uint32(c), &per); err != nil {
			return all, fmt.Errorf("police stats %s: %w", PoliceClass(c), err)
		}
		for _, p := range per {
			all[c].Passed += p.Passed
			all[c].DroppedSource += p.DroppedSource
			all[c].DroppedClass += p.DroppedClass
		}
	}
	return all, nil
}

// policeClass is lb.bpf.c's police_class, in the model.
func (p *modelPkt) policeClass(proto uint8, daddr netip.Addr, sport, dport uint16, hasPorts bool) PoliceClass {
	f := p.m.RouterAddrs[daddr]
	d := binary.BigEndian.Uint32(daddr.AsSlice())
	switch {
	case f&AddrMgmt != 0:
		return PoliceMgmt
	case proto == 89:
		if f != 0 || d == 0xe0000005 || d == 0xe0000006 {
			return PoliceIGP
		}
		return PoliceNone
	case hasPorts && proto == 17 && dport == 520 && (f != 0 || d == 0xe0000009 || d == 0xffffffff):
		return PoliceIGP
	case f == 0:
		return PoliceNone
	}
	return routerClass(proto, 1, sport, dport, hasPorts)
}

// routerClass is lb.bpf.c's router_class: the class of a packet to the
// router that no IGP rule took.
func routerClass(proto, icmpProto uint8, sport, dport uint16, hasPorts bool) PoliceClass {
	switch {
	case hasPorts && proto == 17 && (dport == 161 || dport == 162):
		return PoliceMgmt
	case hasPorts && proto == 17 && (dport == 3784 || dport == 4784):
		return PoliceBFD
	case hasPorts && proto == 6 && (dport == 179 || sport == 179):
		return PoliceBGP
	case proto == icmpProto:
		return PoliceICMP
	}
	return PoliceLocal
}

// ModelPolice is the model's policing state: the rates as lb_police_rates
// holds them, and each bucket's theoretical arrival time.
type ModelPolice struct {
	Rates  [PoliceClasses]PoliceRate
	Counts [PoliceClasses]PoliceCounts
	tat    map[uint32]*time.Time
	// Peers are lb_peers, by address (IPv4 unmapped) and port index.
	Peers map[PeerKey]*ModelPeer
}

// ModelPeer is a configured neighbour in the model: lb_peer.
type ModelPeer struct {
	GTSM   bool
	tat    time.Time
	Counts PeerCounts
}

// routingPeer is lb.bpf.c's routing_peer.
func (p *modelPkt) routingPeer(c PoliceClass, src netip.Addr) *ModelPeer {
	if c > PoliceBFD {
		return nil
	}
	return p.m.Police.Peers[PeerKey{Addr: src, Port: p.port.Index}]
}

// gtsmRefused is lb.bpf.c's gtsm_refused.
func (p *modelPkt) gtsmRefused(peer *ModelPeer, c PoliceClass, dport uint16, ttl uint8) bool {
	switch {
	case ttl == 255:
		return false
	case c == PoliceBFD && dport == 3784:
		return true
	case c != PoliceBGP || peer == nil || !peer.GTSM:
		return false
	}
	peer.Counts.GTSMDropped++
	return true
}

// policeHash is lb.bpf.c's police_hash: src is the source address as it
// lies in the packet (4 or 16 bytes).
func policeHash(src []byte, port uint8, c PoliceClass, seed uint32) uint32 {
	var w [4]uint32
	for i := 0; i < len(src)/4; i++ {
		w[i] = binary.LittleEndian.Uint32(src[4*i:])
	}
	h := flow.Hash(w[0], w[1], w[2], uint32(c), seed)
	return flow.Hash(h, w[3], uint32(port), uint32(c), seed^policeSalt)
}

// police is lb.bpf.c's police, on the model's clock; src is the source
// address as it lies in the packet, peer its configured neighbour or nil.
func (p *modelPkt) police(c PoliceClass, src []byte, peer *ModelPeer) bool {
	mp := &p.m.Police
	if mp.tat == nil {
		mp.tat = map[uint32]*time.Time{}
	}
	r := mp.Rates[c]
	now := time.Now()
	gcra := func(tat *time.Time, pps uint64) bool {
		interval, tolerance := element.GCRATiming(pps, r.Burst)
		t := *tat
		if t.Before(now) {
			t = now
		}
		if t.Sub(now) > time.Duration(tolerance) {
			return false
		}
		*tat = t.Add(time.Duration(interval))
		return true
	}
	bucket := func(i uint32) *time.Time {
		if mp.tat[i] == nil {
			mp.tat[i] = new(time.Time)
		}
		return mp.tat[i]
	}
	if peer != nil {
		if r.PerSourcePPS != 0 && !gcra(&peer.tat, r.PerSourcePPS) {
			peer.Counts.Dropped++
			mp.Counts[c].DroppedSource++
			return false
		}
		peer.Counts.Passed++
		mp.Counts[c].Passed++
		return true
	}
	base := uint32(c) * (policeSources + 1)
	if r.PerSourcePPS != 0 {
		h := policeHash(src, p.port.Index, c, p.m.Config.PoliceSeed)
		if !gcra(bucket(base+1+h&(policeSources-1)), r.PerSourcePPS) {
			mp.Counts[c].DroppedSource++
			return false
		}
	}
	if r.PPS != 0 && !gcra(bucket(base), r.PPS) {
		mp.Counts[c].DroppedClass++
		return false
	}
	mp.Counts[c].Passed++
	return true
}
