package lb

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
)

// The router's configured neighbours (its BGP and BFD peers), as the VCP
// sends each LB those on its ports (dist's PEERS): their routing packets
// take a bucket of their own ahead of their class's shared one, so that a
// flood of the class from any other source cannot starve them, and their
// BGP must come with TTL 255 when GTSM is on (bpf/lb.bpf.c's police and
// gtsm_refused; docs/operations.md, "Hardening").

// MaxPeers is how many neighbours an LB holds (lb_peers).
const MaxPeers = int(lbxdpLbLimitLB_MAX_PEERS)

// PeerKey names a neighbour: its address (IPv4 or IPv6) and the index of
// the port it is heard on.
type PeerKey struct {
	Addr netip.Addr
	Port uint8
}

// Peer is a neighbour and whether its BGP must arrive with TTL 255.
type Peer struct {
	PeerKey
	GTSM bool
}

// PeerCounts are what a neighbour's bucket passed and dropped, and how
// many of its packets broke GTSM.
type PeerCounts struct {
	Passed      uint64 `json:"passed"`
	Dropped     uint64 `json:"dropped"`
	GTSMDropped uint64 `json:"gtsm_dropped"`
}

func (k PeerKey) bpf() lbxdpLbPeerKey {
	return lbxdpLbPeerKey{Addr: addrWords(k.Addr.As16()), Port: uint32(k.Port)}
}

// addrWords is an address's 16 bytes as the data path's four words.
func addrWords(a [16]byte) [4]uint32 {
	var w [4]uint32
	for i := range w {
		w[i] = uint32(a[4*i]) | uint32(a[4*i+1])<<8 | uint32(a[4*i+2])<<16 | uint32(a[4*i+3])<<24
	}
	return w
}

// SetPeers makes lb_peers hold exactly peers: a neighbour kept keeps its
// bucket and counters (only its flags change), a new one starts with a
// full bucket, one gone is deleted.
func (d *Dataplane) SetPeers(peers []Peer) error {
	if len(peers) > MaxPeers {
		return fmt.Errorf("%d peers, at most %d", len(peers), MaxPeers)
	}
	want := map[lbxdpLbPeerKey]uint32{}
	for _, p := range peers {
		var f uint32
		if p.GTSM {
			f = uint32(lbxdpLbPeerFlagsLB_PEER_GTSM)
		}
		want[p.bpf()] = f
	}
	var (
		k    lbxdpLbPeerKey
		v    lbxdpLbPeer
		gone []lbxdpLbPeerKey
	)
	have := map[lbxdpLbPeerKey]bool{}
	it := d.objs.LbPeers.Iterate()
	for it.Next(&k, &v) {
		f, ok := want[k]
		switch {
		case !ok:
			gone = append(gone, k)
		case f != v.Flags:
			// The flags alone: a racing update of the bucket's time
			// or counters by the data path is lost, nothing else.
			v.Flags = f
			if err := d.objs.LbPeers.Update(k, &v, ebpf.UpdateExist); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("peer flags: %w", err)
			}
			have[k] = true
		default:
			have[k] = true
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("read peers: %w", err)
	}
	for _, k := range gone {
		if err := d.objs.LbPeers.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("delete peer: %w", err)
		}
	}
	for k, f := range want {
		if have[k] {
			continue
		}
		if err := d.objs.LbPeers.Update(k, &lbxdpLbPeer{Flags: f}, ebpf.UpdateNoExist); err != nil && !errors.Is(err, ebpf.ErrKeyExist) {
			return fmt.Errorf("add peer: %w", err)
		}
	}
	return nil
}

// PeerStats reads every neighbour's counters and flags.
func (d *Dataplane) PeerStats() (map[PeerKey]PeerCounts, map[PeerKey]bool, error) {
	counts, gtsm := map[PeerKey]PeerCounts{}, map[PeerKey]bool{}
	var (
		k lbxdpLbPeerKey
		v lbxdpLbPeer
	)
	it := d.objs.LbPeers.Iterate()
	for it.Next(&k, &v) {
		var a [16]byte
		for i, w := range k.Addr {
			a[4*i], a[4*i+1], a[4*i+2], a[4*i+3] = byte(w), byte(w>>8), byte(w>>16), byte(w>>24)
		}
		pk := PeerKey{Addr: netip.AddrFrom16(a).Unmap(), Port: uint8(k.Port)}
		counts[pk] = PeerCounts{Passed: v.Passed, Dropped: v.Dropped, GTSMDropped: v.GtsmDropped}
		gtsm[pk] = v.Flags&uint32(lbxdpLbPeerFlagsLB_PEER_GTSM) != 0
	}
	if err := it.Err(); err != nil {
		return nil, nil, fmt.Errorf("read peers: %w", err)
	}
	return counts, gtsm, nil
}
