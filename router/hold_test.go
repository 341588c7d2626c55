package router

import (
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"
)

// Packets to an unresolved neighbour wait while it is asked for: as many
// as holdBytes of them (Linux's unres_qlen_bytes), not 16 packets as
// before; beyond, and beyond holdTotalBytes for every neighbour together,
// counted held_dropped; given up after arpTries, the bytes are given back.
func TestHoldQueueBytes(t *testing.T) {
	a := &Agent{raw: -1, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		neigh: map[NeighborKey]*neighbor{}, pending: map[NeighborKey]*pendingARP{}, counters: map[string]uint64{},
		ports: []Port{{Index: 0, VLAN: 10, Addr: netip.MustParsePrefix("192.0.2.1/24")}}}
	pkt := make([]byte, 500)
	h1 := netip.MustParseAddr("192.0.2.10")
	for range 500 {
		a.sendVia(nhKey{port: 0}, h1, 0x0800, pkt)
	}
	p := a.pending[NeighborKey{h1, 10}]
	if p == nil || len(p.packets) != holdBytes/500 || a.counters["held_dropped"] != uint64(500-holdBytes/500) {
		t.Fatalf("500 packets of 500 bytes to one neighbour: %d held, %d dropped; want %d held", len(p.packets), a.counters["held_dropped"], holdBytes/500)
	}
	// Many neighbours at once share holdTotalBytes.
	for i := range 200 {
		dst := netip.AddrFrom4([4]byte{192, 0, 2, byte(20 + i)})
		for range 200 {
			a.sendVia(nhKey{port: 0}, dst, 0x0800, pkt)
		}
	}
	if a.heldBytes > holdTotalBytes || a.heldBytes < holdTotalBytes-500 {
		t.Errorf("%d bytes held for 201 neighbours, want just under %d", a.heldBytes, holdTotalBytes)
	}
	// Unanswered, each is given up after arpTries, its bytes given back.
	now := time.Now()
	for range arpTries + 1 {
		now = now.Add(arpRetry)
		a.tickNeighbors(now)
	}
	if len(a.pending) != 0 || a.heldBytes != 0 {
		t.Errorf("after %d unanswered tries: %d pending, %d bytes held; want none", arpTries, len(a.pending), a.heldBytes)
	}
}
