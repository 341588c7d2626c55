package dist

import (
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"
)

// ReplayWindow is how far behind the newest sequence number of a sender a
// frame may arrive and still be accepted once, as IPsec's anti-replay
// window does (RFC 4303 §3.4.3). Frames on one Ethernet segment are not
// reordered, but a window costs nothing and tolerates a multi-queue NIC.
const ReplayWindow = 64

// ReplayGuard remembers, per sender id, the newest epoch and sequence
// number it accepted. A frame is accepted when its epoch is newer (the
// sender restarted), or its epoch is the same and its seq is new and
// within the window. Call Check only with authenticated frames, so that a
// forger cannot advance a sender's state.
type ReplayGuard struct {
	mu      sync.Mutex
	senders map[uint64]*replayState
}

type replayState struct {
	epoch uint64
	top   uint64 // newest seq accepted
	seen  uint64 // bit i: top-i was accepted
}

// Check accepts (nil) or refuses (ErrReplay) a frame's (sender, epoch, seq)
// and records it when accepted.
func (g *ReplayGuard) Check(h Header) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.senders == nil {
		g.senders = make(map[uint64]*replayState)
	}
	s, ok := g.senders[h.Sender]
	if !ok || h.Epoch > s.epoch {
		g.senders[h.Sender] = &replayState{epoch: h.Epoch, top: h.Seq, seen: 1}
		return nil
	}
	if h.Epoch < s.epoch {
		return fmt.Errorf("%w: epoch %d older than %d", ErrReplay, h.Epoch, s.epoch)
	}
	switch {
	case h.Seq > s.top:
		shift := h.Seq - s.top
		if shift >= ReplayWindow {
			s.seen = 0
		} else {
			s.seen <<= shift
		}
		s.seen |= 1
		s.top = h.Seq
		return nil
	case s.top-h.Seq >= ReplayWindow:
		return fmt.Errorf("%w: seq %d behind the window of %d", ErrReplay, h.Seq, s.top)
	}
	bit := uint64(1) << (s.top - h.Seq)
	if s.seen&bit != 0 {
		return fmt.Errorf("%w: seq %d already seen", ErrReplay, h.Seq)
	}
	s.seen |= bit
	return nil
}

// Forget drops what the guard knows of a sender (an element that left).
func (g *ReplayGuard) Forget(sender uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.senders, sender)
}

// Sender stamps and seals the frames of one element: its id, an epoch
// taken at start, and a sequence number that only grows.
type Sender struct {
	ID    uint64
	Epoch uint64
	Key   Key
	seq   atomic.Uint64
}

// ElementID is the sender id an element takes when its config names none:
// FNV-1a of "kind/name" (kind lb, router or vcp), stable across restarts.
func ElementID(kind, name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(kind + "/" + name))
	return h.Sum64()
}

// NewSender returns a Sender whose epoch is the current time in
// nanoseconds: a restarted element always has a larger epoch than the run
// before it, with no state kept on disk, as long as the clock does not go
// back (docs/dist.md, "Replay").
func NewSender(id uint64, key Key) (*Sender, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	return &Sender{ID: id, Epoch: uint64(time.Now().UnixNano()), Key: key}, nil
}

// Seal builds the frame of msg from src to dst with the next sequence
// number.
func (s *Sender) Seal(dst, src []byte, msg Message) ([]byte, error) {
	return Marshal(&Frame{
		Dst: dst, Src: src,
		Header: Header{Sender: s.ID, Epoch: s.Epoch, Seq: s.seq.Add(1)},
		Msg:    msg,
	}, s.Key)
}

// SealProbe returns a PROBE from own (the sending port's MAC) to target,
// sent at sent. It is sealed as the target's reflection will carry it
// (from target to own): the HMAC covers the MACs, the reflection swaps
// them, and the sender alone can check what comes back. On its way out
// it is refused as "auth" by any element that tries to read it.
func (s *Sender) SealProbe(own, target []byte, sent time.Time) ([]byte, error) {
	b, err := s.Seal(own, target, &Probe{SentNs: uint64(sent.UnixNano())})
	if err != nil {
		return nil, err
	}
	var dst [6]byte
	copy(dst[:], b[0:6])
	copy(b[0:6], b[6:12])
	copy(b[6:12], dst[:])
	return b, nil
}
