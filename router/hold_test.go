package router

import (
	"io"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Packets to an unresolved neighbour wait while it is asked for: as many
// as holdBytes of them (Linux's unres_qlen_bytes), not 16 packets as
// before; beyond, and beyond holdTotalBytes for every neighbour together,
// counted held_dropped; given up after arpTries, the bytes are given back.
func TestHoldQueueBytes(t *testing.T) {
	a := &Agent{raw: -1, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		neigh: map[NeighborKey]*neighbor{}, pending: map[NeighborKey]*pendingARP{}, asked: map[NeighborKey]time.Time{}, neighCount: map[portFamily]int{}, counters: map[string]uint64{}, neighCounters: map[string]uint64{},
		ports:      []Port{{Index: 0, VLAN: 10, Addr: netip.MustParsePrefix("192.0.2.1/24")}},
		neighPorts: []Port{{Index: 0, VLAN: 10, Addr: netip.MustParsePrefix("192.0.2.1/24")}}}
	pkt := make([]byte, 500)
	h1 := netip.MustParseAddr("192.0.2.10")
	for range 500 {
		a.sendVia(nhKey{port: 0}, h1, 0x0800, pkt)
	}
	p := a.pending[NeighborKey{h1, 10}]
	if p == nil || len(p.packets) != holdBytes/500 || a.neighCounters["held_dropped"] != uint64(500-holdBytes/500) {
		t.Fatalf("500 packets of 500 bytes to one neighbour: %d held, %d dropped; want %d held", len(p.packets), a.neighCounters["held_dropped"], holdBytes/500)
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

// TestHeldReleaseWaitsForRoom: the packets held for a neighbour go out
// when it answers, in a burst the interface cannot take at once (ENOBUFS
// from a veth whose peer's XDP ring is full: the soak's r4 lost 1,207 so).
// Each waits for room, the neighbours' lock free meanwhile; once one has
// waited in vain the rest of the burst is not held up; a lone frame (an
// ARP request) does not wait.
func TestHeldReleaseWaitsForRoom(t *testing.T) {
	sent, room := 0, 0
	full := false // the queue taking nothing at all
	var a *Agent
	lockedWaits := 0 // waits with the neighbours' lock held
	defer func(f func(int, []byte) error) { sendFrame = f }(sendFrame)
	sendFrame = func(_ int, f []byte) error {
		if f[16] != 0x08 || f[17] != 0x00 {
			return nil // the ARP requests
		}
		if full || room == 0 {
			if !a.neighMu.TryLock() {
				lockedWaits++
			} else {
				a.neighMu.Unlock()
			}
			room = 64 // the consumer frees 64 places while the sender waits
			if full {
				room = 0
			}
			return unix.ENOBUFS
		}
		room--
		sent++
		return nil
	}
	a = &Agent{raw: -1, log: slog.New(slog.NewTextHandler(io.Discard, nil)), mac: net.HardwareAddr{2, 0, 0, 0, 0xb0, 4},
		neigh: map[NeighborKey]*neighbor{}, pending: map[NeighborKey]*pendingARP{}, asked: map[NeighborKey]time.Time{}, neighCount: map[portFamily]int{}, counters: map[string]uint64{}, neighCounters: map[string]uint64{},
		ports:      []Port{{Index: 0, VLAN: 10, Addr: netip.MustParsePrefix("192.0.2.1/24")}},
		neighPorts: []Port{{Index: 0, VLAN: 10, Addr: netip.MustParsePrefix("192.0.2.1/24")}}}
	h3 := netip.MustParseAddr("192.0.2.10")
	pkt := make([]byte, 46)
	for range 3000 {
		a.sendVia(nhKey{port: 0}, h3, 0x0800, pkt)
	}
	held := len(a.pending[NeighborKey{h3, 10}].packets)
	a.neighMu.Lock()
	send := a.releaseHeld(NeighborKey{h3, 10}, net.HardwareAddr{2, 0, 0, 0, 0, 3}, 0x0800)
	a.neighMu.Unlock()
	send()
	if lockedWaits > 0 {
		t.Errorf("%d waits for room with the neighbours' lock held", lockedWaits)
	}
	if sent != held || a.neighCounters["send_errors"] != 0 {
		t.Fatalf("%d held, %d sent, %d send errors: want every one sent", held, sent, a.neighCounters["send_errors"])
	}
	if a.neighCounters["send_waits"] == 0 {
		t.Fatal("the fake queue's room never ran out: the test tests nothing")
	}
	// A queue that never frees room: the first frame waits sendRetries
	// times, the rest of the burst fails at once.
	full, sent = true, 0
	for range 100 {
		a.sendVia(nhKey{port: 0}, h3, 0x0800, pkt)
	}
	start := time.Now()
	a.releaseHeld(NeighborKey{h3, 10}, net.HardwareAddr{2, 0, 0, 0, 0, 3}, 0x0800)()
	// The first frame's waits, each up to about a millisecond with Go's
	// timers; waiting for every frame would take 100 times that.
	if took := time.Since(start); took > time.Duration(sendRetries)*5*time.Millisecond {
		t.Errorf("a stuck queue held the release %v", took)
	}
	if a.neighCounters["send_errors"] != 100 {
		t.Errorf("a stuck queue: %d send errors, want 100", a.neighCounters["send_errors"])
	}
}

// The slow path's channel holds what the agent would hold for one
// neighbour, so a burst to a neighbour asked for is cut by the agent's
// limit (held_dropped) and not lost on its way (slow_lost).
func TestSlowBufferHoldsAHold(t *testing.T) {
	if slowBufferBytes < holdBytes {
		t.Errorf("a CPU's slow-path buffer of %d bytes is smaller than one neighbour's hold, %d", slowBufferBytes, holdBytes)
	}
}
