package dist

import (
	"fmt"
	"net"
	"net/netip"
)

// STATIC_NEIGHBORS carries the operator's static neighbours of the
// router's external ports (the VCP's `neighbors:` per port: a BGP peer's
// MAC, say) to a back-end, which holds them as it learns none: no claim
// of a neighbour changes them (docs/operations.md, "Hardening").
// docs/dist.md gives the layout.

// MaxStaticNeighbors is how many one frame holds: the whole set.
const MaxStaticNeighbors = maxSetEntries

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
	return appendSet(b, "static neighbours", m.Target, len(m.Neighbors), func(i int) (netip.Addr, uint16, [6]byte, error) {
		n := m.Neighbors[i]
		if err := n.Check(); err != nil {
			return netip.Addr{}, 0, [6]byte{}, err
		}
		return n.Addr, n.VLAN, [6]byte(n.MAC), nil
	})
}

func (m *StaticNeighbors) decodeBody(b []byte) error {
	var ns []StaticNeighbor
	target, err := decodeSet(b, "static neighbours", func(i int, a netip.Addr, vlan uint16, mac [6]byte) error {
		s := StaticNeighbor{Addr: a, VLAN: vlan, MAC: net.HardwareAddr(mac[:])}
		if err := s.Check(); err != nil {
			return fmt.Errorf("neighbour %d: %w", i, err)
		}
		ns = append(ns, s)
		return nil
	})
	if err != nil {
		return err
	}
	*m = StaticNeighbors{Target: target, Neighbors: append([]StaticNeighbor{}, ns...)}
	return nil
}
