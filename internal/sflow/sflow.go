// Package sflow writes sFlow version 5 datagrams (sFlow.org, "sFlow
// Version 5", 2004): the router as one sFlow agent, its flow samples (a
// sampled frame's header, where it came in and went out, the next hop)
// and its ports' counters, for collectors such as sfacctd (pmacct) or
// sfcapd (nfdump). The encoding is XDR: big-endian 32-bit words, opaque
// data padded to a word.
package sflow

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// Port is the collectors' UDP port for sFlow (IANA: 6343).
const Port = 6343

// MaxHeader is the most of a sampled frame a flow sample carries: the
// specification's default header size.
const MaxHeader = 128

// Datagram is one sFlow v5 datagram: the agent (the router's address,
// the sub-agent that sent it: one per LB), its sequence and uptime, and
// its samples.
type Datagram struct {
	Agent    netip.Addr
	SubAgent uint32
	Sequence uint32
	UptimeMs uint32
	Flows    []FlowSample
	Counters []CounterSample
}

// FlowSample is one sampled frame: 1 in Rate of the frames into the port
// Input (an ifIndex, the one SNMP shows), Pool the frames the sampler saw
// so far, Drops the samples it lost; its first bytes (Header, at most
// MaxHeader) and length with FCS (FrameLength); Output, if known (0:
// unknown), and the next hop with the prefixes' lengths (Router: nil if
// none); the VLANs in and out (Switch: nil if none).
type FlowSample struct {
	Sequence    uint32
	SourceIndex uint32 // the data source: the ifIndex of the sampling port
	Rate        uint32
	Pool        uint32
	Drops       uint32
	Input       uint32
	Output      uint32
	FrameLength uint32
	Stripped    uint32 // bytes not in the frame the sampler saw: the FCS, 4
	Header      []byte
	Router      *RouterData
	Switch      *SwitchData
}

// RouterData is sFlow's extended router data: the next hop and the
// lengths of the source's and the destination's routes.
type RouterData struct {
	NextHop          netip.Addr
	SrcMask, DstMask uint32
}

// SwitchData is sFlow's extended switch data: the frame's VLAN in and
// out (priorities 0).
type SwitchData struct {
	SrcVLAN, DstVLAN uint32
}

// CounterSample is one port's generic interface counters (RFC 2233's
// ifTable, as sFlow's if_counters has them).
type CounterSample struct {
	Sequence uint32
	IfIndex  uint32
	IfType   uint32 // 6: ethernetCsmacd
	Speed    uint64 // bit/s
	// Direction: 1 full duplex, 2 half, 0 unknown. Status: bit 0 admin
	// up, bit 1 operationally up.
	Direction, Status                                         uint32
	InOctets                                                  uint64
	InUcast, InMulticast, InBroadcast, InDiscards, InErrors   uint32
	InUnknownProtos                                           uint32
	OutOctets                                                 uint64
	OutUcast, OutMulticast, OutBroadcast, OutDiscards, OutErr uint32
	Promiscuous                                               uint32
}

// Sample and record formats (enterprise 0).
const (
	formatFlowSample    = 1
	formatCounterSample = 2
	recordRawHeader     = 1
	recordSwitch        = 1001
	recordRouter        = 1002
	recordIfCounters    = 1
	headerEthernet      = 1 // header_protocol ETHERNET-ISO88023
)

// ErrAgent refuses a datagram without an agent address.
var ErrAgent = errors.New("sflow: the agent needs an address")

// Marshal encodes d.
func (d *Datagram) Marshal() ([]byte, error) {
	if !d.Agent.IsValid() {
		return nil, ErrAgent
	}
	var w writer
	w.u32(5)
	w.addr(d.Agent)
	w.u32(d.SubAgent)
	w.u32(d.Sequence)
	w.u32(d.UptimeMs)
	w.u32(uint32(len(d.Flows) + len(d.Counters)))
	for _, f := range d.Flows {
		w.record(formatFlowSample, func(w *writer) { f.write(w) })
	}
	for _, c := range d.Counters {
		w.record(formatCounterSample, func(w *writer) { c.write(w) })
	}
	return w.b, nil
}

func (f *FlowSample) write(w *writer) {
	w.u32(f.Sequence)
	w.u32(f.SourceIndex) // source id type 0: an ifIndex
	w.u32(f.Rate)
	w.u32(f.Pool)
	w.u32(f.Drops)
	w.u32(f.Input)
	w.u32(f.Output)
	n := uint32(1)
	if f.Router != nil {
		n++
	}
	if f.Switch != nil {
		n++
	}
	w.u32(n)
	header := f.Header[:min(len(f.Header), MaxHeader)]
	w.record(recordRawHeader, func(w *writer) {
		w.u32(headerEthernet)
		w.u32(f.FrameLength)
		w.u32(f.Stripped)
		w.opaque(header)
	})
	if s := f.Switch; s != nil {
		w.record(recordSwitch, func(w *writer) {
			w.u32(s.SrcVLAN)
			w.u32(0)
			w.u32(s.DstVLAN)
			w.u32(0)
		})
	}
	if r := f.Router; r != nil {
		w.record(recordRouter, func(w *writer) {
			w.addr(r.NextHop)
			w.u32(r.SrcMask)
			w.u32(r.DstMask)
		})
	}
}

func (c *CounterSample) write(w *writer) {
	w.u32(c.Sequence)
	w.u32(c.IfIndex)
	w.u32(1) // one record
	w.record(recordIfCounters, func(w *writer) {
		w.u32(c.IfIndex)
		w.u32(c.IfType)
		w.u64(c.Speed)
		w.u32(c.Direction)
		w.u32(c.Status)
		w.u64(c.InOctets)
		for _, v := range []uint32{c.InUcast, c.InMulticast, c.InBroadcast, c.InDiscards, c.InErrors, c.InUnknownProtos} {
			w.u32(v)
		}
		w.u64(c.OutOctets)
		for _, v := range []uint32{c.OutUcast, c.OutMulticast, c.OutBroadcast, c.OutDiscards, c.OutErr, c.Promiscuous} {
			w.u32(v)
		}
	})
}

// writer appends XDR.
type writer struct{ b []byte }

func (w *writer) u32(v uint32) { w.b = binary.BigEndian.AppendUint32(w.b, v) }
func (w *writer) u64(v uint64) { w.b = binary.BigEndian.AppendUint64(w.b, v) }

// addr writes an sFlow address: its type (1 IPv4, 2 IPv6; 0 unknown,
// no address) and its bytes.
func (w *writer) addr(a netip.Addr) {
	switch {
	case a.Is4():
		w.u32(1)
		w.b = append(w.b, a.AsSlice()...)
	case a.Is6():
		w.u32(2)
		w.b = append(w.b, a.AsSlice()...)
	default:
		w.u32(0)
	}
}

// opaque writes variable-length opaque data: its length, its bytes,
// zeros to the next word.
func (w *writer) opaque(b []byte) {
	w.u32(uint32(len(b)))
	w.b = append(w.b, b...)
	for len(w.b)%4 != 0 {
		w.b = append(w.b, 0)
	}
}

// record writes a sample or a record: its format (enterprise 0), its
// length in bytes, then what body writes.
func (w *writer) record(format uint32, body func(*writer)) {
	w.u32(format)
	at := len(w.b)
	w.u32(0)
	body(w)
	binary.BigEndian.PutUint32(w.b[at:], uint32(len(w.b)-at-4))
}
