package dist

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// PEERS carries the router's configured neighbours on one LB's external
// ports (its BGP and BFD peers) to that LB, which gives each a policing
// bucket of its own and, where asked, checks GTSM (RFC 5082) on its BGP
// (docs/operations.md, "Hardening"). docs/dist.md gives the layout.

// Limits of PEERS.
const (
	peersHdrLen = 16
	peerLen     = 24
	// MaxPeers is how many one frame holds: the whole set of one LB.
	MaxPeers = (MaxBodyLen - peersHdrLen) / peerLen
)

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
	if len(m.Peers) > MaxPeers {
		return nil, fmt.Errorf("%d peers, at most %d", len(m.Peers), MaxPeers)
	}
	b = binary.BigEndian.AppendUint64(b, m.Target)
	b = append(b, uint8(len(m.Peers)), 0, 0, 0, 0, 0, 0, 0)
	for _, p := range m.Peers {
		if err := p.Check(); err != nil {
			return nil, err
		}
		a := p.Addr.As16() // IPv4: its IPv4-mapped address
		b = append(b, a[:]...)
		b = binary.BigEndian.AppendUint16(b, p.VLAN)
		b = append(b, uint8(p.Flags), 0, 0, 0, 0, 0)
	}
	return b, nil
}

func (m *Peers) decodeBody(b []byte) error {
	if len(b) < peersHdrLen {
		return errShort
	}
	n := int(b[8])
	switch {
	case n > MaxPeers || len(b) != peersHdrLen+n*peerLen:
		return fmt.Errorf("%d peers in %d bytes", n, len(b))
	case [7]byte(b[9:16]) != [7]byte{}:
		return errReserved
	}
	*m = Peers{Target: binary.BigEndian.Uint64(b[0:8]), Peers: make([]Peer, 0, n)}
	for i := range n {
		e := b[peersHdrLen+i*peerLen:][:peerLen]
		if [5]byte(e[19:24]) != [5]byte{} {
			return errReserved
		}
		p := Peer{Addr: netip.AddrFrom16([16]byte(e[0:16])).Unmap(), VLAN: binary.BigEndian.Uint16(e[16:18]), Flags: PeerFlags(e[18])}
		if err := p.Check(); err != nil {
			return fmt.Errorf("peer %d: %w", i, err)
		}
		m.Peers = append(m.Peers, p)
	}
	return nil
}
