package dist

import (
	"fmt"
	"net/netip"
)

// PEERS carries the router's configured neighbours on one LB's external
// ports (its BGP and BFD peers) to that LB, which gives each a policing
// bucket of its own and, where asked, checks GTSM (RFC 5082) on its BGP
// (docs/operations.md, "Hardening"). docs/dist.md gives the layout.

// MaxPeers is how many one frame holds: the whole set of one LB.
const MaxPeers = maxSetEntries

// PeerFlags say how an LB treats a peer's packets.
type PeerFlags uint8

// PeerGTSM: the peer's BGP must arrive with TTL (hop limit) 255.
const PeerGTSM PeerFlags = 1

// Peer is one: an address (IPv4 or IPv6) on the external port of VLAN.
type Peer struct {
	Addr  netip.Addr `json:"addr"`
	VLAN  uint16     `json:"vlan"`
	Flags PeerFlags  `json:"flags"`
}

// Check says whether p is a peer PEERS can carry.
func (p Peer) Check() error {
	switch {
	case !p.Addr.IsValid() || p.Addr.Zone() != "" || p.Addr.Is4In6() || p.Addr.IsUnspecified() || p.Addr.IsMulticast():
		return fmt.Errorf("peer %v: a unicast address without zone", p.Addr)
	case p.VLAN == 0 || p.VLAN > 4094:
		return fmt.Errorf("peer %v: VLAN %d", p.Addr, p.VLAN)
	case p.Flags&^PeerGTSM != 0:
		return fmt.Errorf("peer %v: unknown flags %#x", p.Addr, uint8(p.Flags))
	}
	return nil
}

// Peers is the whole set of peers the active VCP sends one LB (Target);
// none: the LB holds none.
type Peers struct {
	Target uint64 `json:"target"`
	Peers  []Peer `json:"peers"`
}

func (*Peers) Type() MsgType { return TypePeers }

func (m *Peers) appendBody(b []byte) ([]byte, error) {
	return appendSet(b, "peers", m.Target, len(m.Peers), func(i int) (netip.Addr, uint16, [6]byte, error) {
		p := m.Peers[i]
		if err := p.Check(); err != nil {
			return netip.Addr{}, 0, [6]byte{}, err
		}
		return p.Addr, p.VLAN, [6]byte{uint8(p.Flags)}, nil
	})
}

func (m *Peers) decodeBody(b []byte) error {
	var ps []Peer
	target, err := decodeSet(b, "peers", func(i int, a netip.Addr, vlan uint16, rest [6]byte) error {
		if [5]byte(rest[1:]) != [5]byte{} {
			return errReserved
		}
		p := Peer{Addr: a, VLAN: vlan, Flags: PeerFlags(rest[0])}
		if err := p.Check(); err != nil {
			return fmt.Errorf("peer %d: %w", i, err)
		}
		ps = append(ps, p)
		return nil
	})
	if err != nil {
		return err
	}
	*m = Peers{Target: target, Peers: append([]Peer{}, ps...)}
	return nil
}
