// Package agentx is an AgentX subagent (RFC 2741): it connects to a
// master agent (net-snmp's snmpd) over its Unix socket, registers
// subtrees, answers Get, GetNext and GetBulk from a Handler, refuses sets,
// and sends notifications (traps) through the master.
//
// This file is the wire format: the 20-byte header, object identifiers,
// search ranges, octet strings and variable bindings (RFC 2741 §5, §6),
// always sent in network byte order (the header's NETWORK_BYTE_ORDER flag)
// and read in either.
package agentx

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// PDU types (RFC 2741 §6.1).
const (
	typeOpen       = 1
	typeClose      = 2
	typeRegister   = 3
	typeUnregister = 4
	typeGet        = 5
	typeGetNext    = 6
	typeGetBulk    = 7
	typeTestSet    = 8
	typeCommitSet  = 9
	typeUndoSet    = 10
	typeCleanupSet = 11
	typeNotify     = 12
	typePing       = 13
	typeResponse   = 18
)

// Header flags.
const (
	flagInstanceRegistration = 0x01
	flagNonDefaultContext    = 0x08
	flagNetworkByteOrder     = 0x10
)

// Errors in a Response (res.error, RFC 2741 §6.2.16).
const (
	errNone          = 0
	errOpenFailed    = 256
	errNotOpen       = 257
	errParse         = 266
	errRequestDenied = 267
	errProcessing    = 268
	errNotWritable   = 17 // SNMP's notWritable, for TestSet
)

// Close reasons (§6.2.2).
const (
	closeShutdown = 5
)

const headerLen = 20

// maxPayload bounds a PDU's payload: a master's GetBulk of every column
// of a few thousand rows stays far below it.
const maxPayload = 1 << 20

// header is a PDU's header.
type header struct {
	Type          uint8
	Flags         uint8
	SessionID     uint32
	TransactionID uint32
	PacketID      uint32
	PayloadLen    uint32
}

var errShort = errors.New("agentx: truncated PDU")

func (h header) order() binary.ByteOrder {
	if h.Flags&flagNetworkByteOrder != 0 {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

func parseHeader(b []byte) (header, error) {
	if len(b) < headerLen {
		return header{}, errShort
	}
	if b[0] != 1 {
		return header{}, fmt.Errorf("agentx: version %d, want 1", b[0])
	}
	h := header{Type: b[1], Flags: b[2]}
	o := h.order()
	h.SessionID, h.TransactionID, h.PacketID, h.PayloadLen = o.Uint32(b[4:]), o.Uint32(b[8:]), o.Uint32(b[12:]), o.Uint32(b[16:])
	if h.PayloadLen%4 != 0 || h.PayloadLen > maxPayload {
		return header{}, fmt.Errorf("agentx: payload length %d", h.PayloadLen)
	}
	return h, nil
}

// appendPDU appends a PDU of the header's type with the payload.
func appendPDU(b []byte, h header, payload []byte) []byte {
	b = append(b, 1, h.Type, h.Flags|flagNetworkByteOrder, 0)
	for _, v := range []uint32{h.SessionID, h.TransactionID, h.PacketID, uint32(len(payload))} {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	return append(b, payload...)
}

// OID is an object identifier.
type OID []uint32

// ParseOID reads a dotted OID ("1.3.6.1.2.1.1.5.0", a leading dot allowed).
func ParseOID(s string) (OID, error) {
	s = strings.TrimPrefix(s, ".")
	if s == "" {
		return nil, errors.New("agentx: empty OID")
	}
	var o OID
	for _, f := range strings.Split(s, ".") {
		v, err := strconv.ParseUint(f, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("agentx: OID %q: %w", s, err)
		}
		o = append(o, uint32(v))
	}
	return o, nil
}

// MustOID is ParseOID for constants.
func MustOID(s string) OID {
	o, err := ParseOID(s)
	if err != nil {
		panic(err)
	}
	return o
}

func (o OID) String() string {
	parts := make([]string, len(o))
	for i, v := range o {
		parts[i] = strconv.FormatUint(uint64(v), 10)
	}
	return strings.Join(parts, ".")
}

// Append returns o followed by subs, in a new OID.
func (o OID) Append(subs ...uint32) OID {
	return append(append(OID(nil), o...), subs...)
}

// Compare orders OIDs lexicographically (-1, 0, 1).
func (o OID) Compare(p OID) int {
	for i := 0; i < len(o) && i < len(p); i++ {
		switch {
		case o[i] < p[i]:
			return -1
		case o[i] > p[i]:
			return 1
		}
	}
	switch {
	case len(o) < len(p):
		return -1
	case len(o) > len(p):
		return 1
	}
	return 0
}

// HasPrefix says whether o is within the subtree p.
func (o OID) HasPrefix(p OID) bool {
	return len(o) >= len(p) && o[:len(p)].Compare(p) == 0
}

// internetPrefix is 1.3.6.1, which the encoding abbreviates (§5.1).
var internetPrefix = OID{1, 3, 6, 1}

// appendOID encodes o with its include flag.
func appendOID(b []byte, o OID, include bool) []byte {
	prefix := uint8(0)
	subs := o
	if len(o) > 4 && o[:4].Compare(internetPrefix) == 0 && o[4] > 0 && o[4] < 256 {
		prefix, subs = uint8(o[4]), o[5:]
	}
	inc := uint8(0)
	if include {
		inc = 1
	}
	b = append(b, uint8(len(subs)), prefix, inc, 0)
	for _, v := range subs {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	return b
}

// reader reads a payload in the byte order its header says.
type reader struct {
	b   []byte
	o   binary.ByteOrder
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b) < n {
		r.err = errShort
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8() uint8 {
	if v := r.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if v := r.take(2); v != nil {
		return r.o.Uint16(v)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if v := r.take(4); v != nil {
		return r.o.Uint32(v)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if v := r.take(8); v != nil {
		return r.o.Uint64(v)
	}
	return 0
}

// maxSubIDs is SNMP's bound on an OID's length (RFC 2578 §3.5).
const maxSubIDs = 128

// oid reads an OID and its include flag.
func (r *reader) oid() (OID, bool) {
	n, prefix, include := r.u8(), r.u8(), r.u8()
	r.take(1)
	if r.err != nil {
		return nil, false
	}
	if n > maxSubIDs {
		r.err = fmt.Errorf("agentx: OID of %d sub-identifiers", n)
		return nil, false
	}
	var o OID
	if prefix != 0 {
		o = append(internetPrefix.Append(), uint32(prefix))
	}
	for range n {
		o = append(o, r.u32())
	}
	if r.err != nil {
		return nil, false
	}
	return o, include != 0
}

// octets reads an octet string (a length, the bytes, padding to 4).
func (r *reader) octets() []byte {
	n := r.u32()
	if n > maxPayload {
		r.err = errShort
		return nil
	}
	v := r.take(int(n))
	r.take(int((4 - n%4) % 4))
	return v
}

func appendOctets(b, s []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	b = append(b, s...)
	for len(s)%4 != 0 {
		b = append(b, 0)
		s = append(s, 0)
	}
	return b
}

// A search range (§5.2): from Start (itself included when Include), up
// to End (excluded; empty: no bound).
type searchRange struct {
	Start   OID
	Include bool
	End     OID
}

func (r *reader) searchRange() searchRange {
	start, include := r.oid()
	end, _ := r.oid()
	return searchRange{Start: start, Include: include, End: end}
}

// skipContext reads past a non-default context, which msr does not serve
// (it registers in the default context only).
func (r *reader) skipContext(h header) {
	if h.Flags&flagNonDefaultContext != 0 {
		r.octets()
	}
}
