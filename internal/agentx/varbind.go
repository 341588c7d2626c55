package agentx

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"sort"
)

// Type is a variable's SNMP type as AgentX encodes it (§5.4).
type Type uint16

// Value types and the exceptions a response may carry instead of a value.
const (
	Integer          Type = 2
	OctetString      Type = 4
	Null             Type = 5
	ObjectIdentifier Type = 6
	IPAddress        Type = 64
	Counter32        Type = 65
	Gauge32          Type = 66
	TimeTicks        Type = 67
	Opaque           Type = 68
	Counter64        Type = 70
	NoSuchObject     Type = 128
	NoSuchInstance   Type = 129
	EndOfMIBView     Type = 130
)

// VarBind is a variable: its name, type and value. Value is an int32 for
// Integer, a uint32 for Counter32, Gauge32 and TimeTicks, a uint64 for
// Counter64, a string or []byte for OctetString and Opaque, a
// netip.Addr for IPAddress, an OID for ObjectIdentifier, and nil for the
// rest.
type VarBind struct {
	Name  OID
	Type  Type
	Value any
}

// appendVarBind encodes v; a value that does not fit its type is an error.
func appendVarBind(b []byte, v VarBind) ([]byte, error) {
	b = binary.BigEndian.AppendUint16(b, uint16(v.Type))
	b = append(b, 0, 0)
	b = appendOID(b, v.Name, false)
	bad := func() ([]byte, error) {
		return nil, fmt.Errorf("agentx: %s: a %T is not a value of type %d", v.Name, v.Value, v.Type)
	}
	switch v.Type {
	case Integer:
		i, ok := v.Value.(int32)
		if !ok {
			return bad()
		}
		b = binary.BigEndian.AppendUint32(b, uint32(i))
	case Counter32, Gauge32, TimeTicks:
		u, ok := v.Value.(uint32)
		if !ok {
			return bad()
		}
		b = binary.BigEndian.AppendUint32(b, u)
	case Counter64:
		u, ok := v.Value.(uint64)
		if !ok {
			return bad()
		}
		b = binary.BigEndian.AppendUint64(b, u)
	case OctetString, Opaque:
		switch s := v.Value.(type) {
		case string:
			b = appendOctets(b, []byte(s))
		case []byte:
			b = appendOctets(b, s)
		default:
			return bad()
		}
	case IPAddress:
		a, ok := v.Value.(netip.Addr)
		if !ok || !a.Is4() {
			return bad()
		}
		a4 := a.As4()
		b = appendOctets(b, a4[:])
	case ObjectIdentifier:
		o, ok := v.Value.(OID)
		if !ok {
			return bad()
		}
		b = appendOID(b, o, false)
	case Null, NoSuchObject, NoSuchInstance, EndOfMIBView:
	default:
		return nil, fmt.Errorf("agentx: %s: unknown type %d", v.Name, v.Type)
	}
	return b, nil
}

// varBind reads one variable binding.
func (r *reader) varBind() VarBind {
	t := Type(r.u16())
	r.take(2)
	name, _ := r.oid()
	v := VarBind{Name: name, Type: t}
	switch t {
	case Integer:
		v.Value = int32(r.u32())
	case Counter32, Gauge32, TimeTicks:
		v.Value = r.u32()
	case Counter64:
		v.Value = r.u64()
	case OctetString, Opaque:
		v.Value = r.octets()
	case IPAddress:
		s := r.octets()
		if a, ok := netip.AddrFromSlice(s); ok && len(s) == 4 {
			v.Value = a
		} else if r.err == nil {
			r.err = fmt.Errorf("agentx: IpAddress of %d bytes", len(s))
		}
	case ObjectIdentifier:
		v.Value, _ = r.oid()
	case Null, NoSuchObject, NoSuchInstance, EndOfMIBView:
	default:
		if r.err == nil {
			r.err = fmt.Errorf("agentx: unknown value type %d", t)
		}
	}
	return v
}

// A MIB view is a handler's variables sorted by name: what Get, GetNext
// and GetBulk search.
type view []VarBind

func newView(vs []VarBind) view {
	sort.Slice(vs, func(i, j int) bool { return vs[i].Name.Compare(vs[j].Name) < 0 })
	return view(vs)
}

// get is the variable named o, or the exception that says why not.
func (w view) get(o OID) VarBind {
	i := sort.Search(len(w), func(i int) bool { return w[i].Name.Compare(o) >= 0 })
	if i < len(w) && w[i].Name.Compare(o) == 0 {
		return w[i]
	}
	// noSuchInstance where the object (the OID less its last
	// sub-identifier, a column or a scalar) exists; noSuchObject if not.
	if len(o) > 1 {
		parent := o[:len(o)-1]
		for _, v := range w {
			if v.Name.HasPrefix(parent) && len(v.Name) == len(o) {
				return VarBind{Name: o, Type: NoSuchInstance}
			}
		}
	}
	return VarBind{Name: o, Type: NoSuchObject}
}

// next is the first variable in the search range, or endOfMibView.
func (w view) next(r searchRange) VarBind {
	i := sort.Search(len(w), func(i int) bool {
		c := w[i].Name.Compare(r.Start)
		return c > 0 || c == 0 && r.Include
	})
	if i < len(w) && (len(r.End) == 0 || w[i].Name.Compare(r.End) < 0) {
		return w[i]
	}
	return VarBind{Name: r.Start, Type: EndOfMIBView}
}

// bulk answers a GetBulk (RFC 3416 §4.2.3): the first nonRepeaters
// ranges once, then the rest maxRepetitions times, each from where it
// last stopped.
func (w view) bulk(nonRepeaters, maxRepetitions int, ranges []searchRange) []VarBind {
	var out []VarBind
	nonRepeaters = min(nonRepeaters, len(ranges))
	for _, r := range ranges[:nonRepeaters] {
		out = append(out, w.next(r))
	}
	rep := append([]searchRange(nil), ranges[nonRepeaters:]...)
	for range maxRepetitions {
		if len(rep) == 0 {
			break
		}
		allEnd := true
		for i, r := range rep {
			v := w.next(r)
			out = append(out, v)
			if v.Type != EndOfMIBView {
				allEnd = false
				rep[i] = searchRange{Start: v.Name, End: r.End}
			}
		}
		if allEnd {
			break
		}
	}
	return out
}
