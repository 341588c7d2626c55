package lb

import (
	"net/netip"
	"time"

	"github.com/msr-router/msr/internal/ipfix"
	"github.com/msr-router/msr/internal/trace"
	"github.com/msr-router/msr/lb/lbapi"
)

// IPFIX: the agent sums its sFlow samples into flows (addresses,
// protocol, ports, the port they came in by), each sample counted as
// rate packets of its IP length, and reports each flow as an IPFIX
// record every active timeout while it lasts and once it has gone idle.
// The counts are estimates, as sFlow's scaled ones are.

// maxFlows bounds the flows summed at once: a scan of many addresses
// would fill the table; a sample of a new flow past it is counted, not
// summed.
const maxFlows = 65536

type flowKey struct {
	src, dst     netip.Addr
	sport, dport uint16
	proto        uint8
	ingress      uint16 // the port's ifIndex: its VLAN
}

type flowCount struct {
	last            time.Time // the flow's last sample
	since           time.Time // the start of the count not yet reported
	octets, packets uint64
}

// flows is the IPFIX export's table and counters. Guarded by exporter.mu.
type flows struct {
	table  map[flowKey]*flowCount
	seq    uint32 // data records sent
	status lbapi.IPFIXStatus
}

// addFlow sums a sampled packet into its flow. Call with e.mu.
func (e *exporter) addFlow(now time.Time, p trace.Packet, vlan uint16, rate uint32) {
	if e.export == nil || e.export.IPFIX == nil {
		return
	}
	f := &e.flows
	if f.table == nil {
		f.table = map[flowKey]*flowCount{}
	}
	k := flowKey{src: p.Src, dst: p.Dst, sport: p.SPort, dport: p.DPort, proto: p.Proto, ingress: vlan}
	c := f.table[k]
	if c == nil {
		if len(f.table) >= maxFlows {
			f.status.Overflow++
			return
		}
		c = &flowCount{since: now}
		f.table[k] = c
	}
	c.last = now
	c.octets += uint64(p.Len) * uint64(rate)
	c.packets += uint64(rate)
}

// reportFlows sends the records of the flows due at now: idle ones for
// the last time, the active ones whose count is active timeout old.
func (e *exporter) reportFlows(now time.Time) {
	e.mu.Lock()
	x := e.export
	if x == nil || x.IPFIX == nil {
		clear(e.flows.table)
		e.mu.Unlock()
		return
	}
	active, idle := time.Duration(x.IPFIX.ActiveTimeout)*time.Second, time.Duration(x.IPFIX.IdleTimeout)*time.Second
	var due []ipfix.Record
	for k, c := range e.flows.table {
		ended := now.Sub(c.last) >= idle
		if !ended && now.Sub(c.since) < active {
			continue
		}
		if c.packets > 0 {
			due = append(due, ipfix.Record{Start: c.since, End: c.last, Octets: c.octets, Packets: c.packets,
				Ingress: uint32(k.ingress), Src: k.src, Dst: k.dst, SPort: k.sport, DPort: k.dport, Proto: k.proto})
		}
		if ended {
			delete(e.flows.table, k)
		} else {
			c.since, c.octets, c.packets = now, 0, 0
		}
	}
	e.flows.status.Flows = len(e.flows.table)
	collectors, domain := x.IPFIX.Collectors, e.cfg.SubAgent // the sub-agent id, defaulted
	e.mu.Unlock()
	for i := range due {
		if r, ok := e.a.routes.get(due[i].Dst, now); ok && r.bits >= 0 {
			due[i].Egress, due[i].NextHop, due[i].DstMask = uint32(r.vlan), r.nextHop, uint8(r.bits)
			if src, ok := e.a.routes.get(due[i].Src, now); ok && src.bits >= 0 {
				due[i].SrcMask = uint8(src.bits)
			}
		}
	}
	for len(due) > 0 {
		n := min(len(due), ipfix.MaxRecords)
		e.sendRecords(collectors, domain, now, due[:n])
		due = due[n:]
	}
}

// sendRecords sends one message of records to every collector.
func (e *exporter) sendRecords(collectors []netip.AddrPort, domain uint32, now time.Time, records []ipfix.Record) {
	e.mu.Lock()
	m := ipfix.Message{ExportTime: now, Sequence: e.flows.seq, Domain: domain, Records: records}
	e.flows.seq += uint32(len(records))
	e.mu.Unlock()
	b, err := m.Marshal()
	if err != nil {
		return
	}
	sent, failed := e.writeTo(collectors, b)
	e.mu.Lock()
	e.flows.status.Messages += sent
	e.flows.status.Records += sent * uint64(len(records))
	e.flows.status.SendErrors += failed
	e.mu.Unlock()
}
