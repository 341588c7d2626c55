package dist

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
)

// STATIC_NEIGHBORS carries the operator's static neighbours of the
// router's external ports (the VCP's `neighbors:` per port: a BGP peer's
// MAC, say) to a back-end, which holds them as it learns none: no claim
// of a neighbour changes them (docs/operations.md, "Hardening").
// docs/dist.md gives the layout.

// Limits of STATIC_NEIGHBORS.
const (
	neighborsHdrLen = 16
	neighborLen     = 24
	// MaxStaticNeighbors is how many one frame holds: the whole set.
	MaxStaticNeighbors = (MaxBodyLen - neighborsHdrLen) / neighborLen
)

// StaticNeighbor is one: an address (IPv4 or IPv6) on the external port
// of VLAN, at MAC.
type StaticNeighbor struct {
	Addr netip.Addr       `json:"addr"`
	VLAN uint16           `json:"vlan"`
	MAC  net.HardwareAddr `json:"mac"`
}

// Check says whether n is a neighbour STATIC_NEIGHBORS can carry.
func (n StaticNeighbor) Check() error {
	switch {
	case !n.Addr.IsValid() || n.Addr.Zone() != "" || n.Addr.Is4In6() || n.Addr.IsUnspecified() || n.Addr.IsMulticast():
		return fmt.Errorf("neighbour %v: a unicast address without zone", n.Addr)
	case n.VLAN == 0 || n.VLAN > 4094:
		return fmt.Errorf("neighbour %v: VLAN %d", n.Addr, n.VLAN)
	case len(n.MAC) != 6 || n.MAC[0]&1 != 0 || [6]byte(n.MAC) == [6]byte{}:
		return fmt.Errorf("neighbour %v: MAC %v is no unicast MAC", n.Addr, n.MAC)
	}
	return nil
}

// StaticNeighbors is the whole set of static neighbours the active VCP
// sends one back-end (Target); none: the back-end holds none.
type StaticNeighbors struct {
	Target    uint64           `json:"target"`
	Neighbors []StaticNeighbor `json:"neighbors"`
}

func (*StaticNeighbors) Type() MsgType { return TypeStaticNeighbors }

func (m *StaticNeighbors) appendBody(b []byte) ([]byte, error) {
	if len(m.Neighbors) > MaxStaticNeighbors {
		return nil, fmt.Errorf("%d static neighbours, at most %d", len(m.Neighbors), MaxStaticNeighbors)
	}
	b = binary.BigEndian.AppendUint64(b, m.Target)
	b = append(b, uint8(len(m.Neighbors)), 0, 0, 0, 0, 0, 0, 0)
	for _, n := range m.Neighbors {
		if err := n.Check(); err != nil {
			return nil, err
		}
		a := n.Addr.As16() // IPv4: its IPv4-mapped address
		b = append(b, a[:]...)
		b = binary.BigEndian.AppendUint16(b, n.VLAN)
		b = append(b, n.MAC...)
	}
	return b, nil
}

func (m *StaticNeighbors) decodeBody(b []byte) error {
	if len(b) < neighborsHdrLen {
		return errShort
	}
	n := int(b[8])
	switch {
	case n > MaxStaticNeighbors || len(b) != neighborsHdrLen+n*neighborLen:
		return fmt.Errorf("%d static neighbours in %d bytes", n, len(b))
	case [7]byte(b[9:16]) != [7]byte{}:
		return errReserved
	}
	*m = StaticNeighbors{Target: binary.BigEndian.Uint64(b[0:8]), Neighbors: make([]StaticNeighbor, 0, n)}
	for i := range n {
		e := b[neighborsHdrLen+i*neighborLen:][:neighborLen]
		s := StaticNeighbor{Addr: netip.AddrFrom16([16]byte(e[0:16])).Unmap(), VLAN: binary.BigEndian.Uint16(e[16:18]),
			MAC: net.HardwareAddr([]byte{e[18], e[19], e[20], e[21], e[22], e[23]})}
		if err := s.Check(); err != nil {
			return fmt.Errorf("neighbour %d: %w", i, err)
		}
		m.Neighbors = append(m.Neighbors, s)
	}
	return nil
}
