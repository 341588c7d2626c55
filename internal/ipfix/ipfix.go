// Package ipfix writes IPFIX messages (RFC 7011) of flow records: the
// router's flows as an LB's agent sums them from its sampled frames, for
// collectors such as nfacctd (pmacct) or nfcapd (nfdump). Each message
// carries the two templates (IPv4, IPv6) before its records: over UDP a
// collector learns them from any message, as RFC 7011 §10.3 asks an
// exporter to resend them.
package ipfix

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"time"
)

// Port is the collectors' UDP port for IPFIX (IANA: 4739).
const Port = 4739

// The templates' ids: set ids 256 and up are data sets of that template.
const (
	Template4 = 256
	Template6 = 257
)

// Information elements (IANA's registry, RFC 7012) of the templates.
const (
	ieOctetDeltaCount          = 1
	iePacketDeltaCount         = 2
	ieProtocolIdentifier       = 4
	ieSourceTransportPort      = 7
	ieSourceIPv4Address        = 8
	ieSourceIPv4PrefixLength   = 9
	ieIngressInterface         = 10
	ieDestinationTransportPort = 11
	ieDestinationIPv4Address   = 12
	ieDestinationIPv4PrefixLen = 13
	ieEgressInterface          = 14
	ieIPNextHopIPv4Address     = 15
	ieSourceIPv6Address        = 27
	ieDestinationIPv6Address   = 28
	ieSourceIPv6PrefixLength   = 29
	ieDestinationIPv6PrefixLen = 30
	ieIPNextHopIPv6Address     = 62
	ieFlowStartMilliseconds    = 152
	ieFlowEndMilliseconds      = 153
)

type field struct{ ie, length uint16 }

// fields are a template's elements in the order a record writes them; the
// addresses' length is the family's.
func fields(addrLen uint16) []field {
	src, dst, nh := uint16(ieSourceIPv4Address), uint16(ieDestinationIPv4Address), uint16(ieIPNextHopIPv4Address)
	srcLen, dstLen := uint16(ieSourceIPv4PrefixLength), uint16(ieDestinationIPv4PrefixLen)
	if addrLen == 16 {
		src, dst, nh = ieSourceIPv6Address, ieDestinationIPv6Address, ieIPNextHopIPv6Address
		srcLen, dstLen = ieSourceIPv6PrefixLength, ieDestinationIPv6PrefixLen
	}
	return []field{{ieFlowStartMilliseconds, 8}, {ieFlowEndMilliseconds, 8}, {ieOctetDeltaCount, 8}, {iePacketDeltaCount, 8},
		{ieIngressInterface, 4}, {ieEgressInterface, 4}, {src, addrLen}, {dst, addrLen}, {nh, addrLen},
		{ieSourceTransportPort, 2}, {ieDestinationTransportPort, 2}, {ieProtocolIdentifier, 1}, {srcLen, 1}, {dstLen, 1}}
}

// Record is one flow's report: its packets and octets (IP headers and
// payload) since its last report, between Start and End; where it came
// in and went out (ifIndexes; 0: unknown), its next hop (invalid:
// unknown, written as zeros) and the lengths of its source's and
// destination's routes (0: unknown).
type Record struct {
	Start, End       time.Time
	Octets, Packets  uint64
	Ingress, Egress  uint32
	Src, Dst         netip.Addr
	NextHop          netip.Addr
	SPort, DPort     uint16
	Proto            uint8
	SrcMask, DstMask uint8
}

// Message is one IPFIX message: when it was sent, the number of data
// records the observation domain sent before it (Sequence), the domain.
type Message struct {
	ExportTime time.Time
	Sequence   uint32
	Domain     uint32
	Records    []Record
}

// MaxRecords is the most records a message of up to about 1,400 bytes
// carries (IPv6 records are 95 bytes, after 140 of header and templates).
const MaxRecords = 13

// Marshal encodes m: the header, the template set, a data set per family.
func (m *Message) Marshal() ([]byte, error) {
	if len(m.Records) > MaxRecords {
		return nil, errors.New("ipfix: too many records for a message")
	}
	for _, r := range m.Records {
		if !r.Src.IsValid() || r.Src.Is6() != r.Dst.Is6() || r.NextHop.IsValid() && r.NextHop.Is6() != r.Src.Is6() {
			return nil, errors.New("ipfix: a record's addresses of two families")
		}
	}
	b := make([]byte, 16, 1500)
	binary.BigEndian.PutUint16(b[0:], 10)
	binary.BigEndian.PutUint32(b[4:], uint32(m.ExportTime.Unix()))
	binary.BigEndian.PutUint32(b[8:], m.Sequence)
	binary.BigEndian.PutUint32(b[12:], m.Domain)
	// The template set.
	set := len(b)
	b = append(b, 0, 2, 0, 0)
	for _, t := range []struct {
		id      uint16
		addrLen uint16
	}{{Template4, 4}, {Template6, 16}} {
		fs := fields(t.addrLen)
		b = binary.BigEndian.AppendUint16(b, t.id)
		b = binary.BigEndian.AppendUint16(b, uint16(len(fs)))
		for _, f := range fs {
			b = binary.BigEndian.AppendUint16(b, f.ie)
			b = binary.BigEndian.AppendUint16(b, f.length)
		}
	}
	binary.BigEndian.PutUint16(b[set+2:], uint16(len(b)-set))
	for _, v6 := range []bool{false, true} {
		set := len(b)
		id := uint16(Template4)
		if v6 {
			id = Template6
		}
		b = binary.BigEndian.AppendUint16(b, id)
		b = append(b, 0, 0)
		for _, r := range m.Records {
			if r.Src.Is6() != v6 {
				continue
			}
			b = r.append(b, v6)
		}
		if len(b) == set+4 {
			b = b[:set] // no records of the family
			continue
		}
		binary.BigEndian.PutUint16(b[set+2:], uint16(len(b)-set))
	}
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	return b, nil
}

func (r *Record) append(b []byte, v6 bool) []byte {
	addr := func(a netip.Addr) {
		switch {
		case !a.IsValid() && v6:
			b = append(b, make([]byte, 16)...)
		case !a.IsValid():
			b = append(b, 0, 0, 0, 0)
		default:
			b = append(b, a.AsSlice()...)
		}
	}
	b = binary.BigEndian.AppendUint64(b, uint64(r.Start.UnixMilli()))
	b = binary.BigEndian.AppendUint64(b, uint64(r.End.UnixMilli()))
	b = binary.BigEndian.AppendUint64(b, r.Octets)
	b = binary.BigEndian.AppendUint64(b, r.Packets)
	b = binary.BigEndian.AppendUint32(b, r.Ingress)
	b = binary.BigEndian.AppendUint32(b, r.Egress)
	addr(r.Src)
	addr(r.Dst)
	addr(r.NextHop)
	b = binary.BigEndian.AppendUint16(b, r.SPort)
	b = binary.BigEndian.AppendUint16(b, r.DPort)
	return append(b, r.Proto, r.SrcMask, r.DstMask)
}
