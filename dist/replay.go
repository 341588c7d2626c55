package dist

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
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
	// path, if set, is where the guard keeps its state across restarts
	// (Persist); saved is when it last wrote it.
	path  string
	saved time.Time
	// SaveErrors counts writes of path that failed.
	SaveErrors uint64
}

// SaveInterval is the longest a persisted guard goes without writing a
// sender's newest sequence number down; a new epoch is written at once.
const SaveInterval = time.Second

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
		g.save(true)
		return nil
	}
	defer g.save(false)
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

// Persist loads the state a guard of an earlier run saved at path, if
// any, and keeps saving it there: after a restart, a captured stream of an
// older epoch is refused, and of the current one only what came after the
// last save (at most SaveInterval of frames) is taken again
// (docs/dist.md, "Replay"). Call it before the first Check.
func (g *ReplayGuard) Persist(path string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.path = path
	if g.senders == nil {
		g.senders = make(map[uint64]*replayState)
	}
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("replay state: %w", err)
	}
	var saved map[string]savedState
	if err := json.Unmarshal(raw, &saved); err != nil {
		return fmt.Errorf("replay state %s: %w", path, err)
	}
	for id, st := range saved {
		sender, err := strconv.ParseUint(id, 16, 64)
		if err != nil {
			return fmt.Errorf("replay state %s: sender %q: %w", path, id, err)
		}
		// Everything up to the saved top counts as seen.
		g.senders[sender] = &replayState{epoch: st.Epoch, top: st.Top, seen: ^uint64(0)}
	}
	return nil
}

type savedState struct {
	Epoch uint64 `json:"epoch"`
	Top   uint64 `json:"top"`
}

// save writes the guard's state to its path: now if urgent, else when
// SaveInterval has passed since the last write. g.mu is held.
func (g *ReplayGuard) save(urgent bool) {
	if g.path == "" || !urgent && time.Since(g.saved) < SaveInterval {
		return
	}
	g.saved = time.Now()
	out := make(map[string]savedState, len(g.senders))
	for id, s := range g.senders {
		out[strconv.FormatUint(id, 16)] = savedState{Epoch: s.epoch, Top: s.top}
	}
	raw, _ := json.Marshal(out)
	tmp := g.path + ".new"
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		g.SaveErrors++
		return
	}
	if err := os.Rename(tmp, g.path); err != nil {
		g.SaveErrors++
	}
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
	// rekeyed, once set, replaces Key (Rekey).
	rekeyed atomic.Pointer[Key]
}

// Rekey makes s seal its next frames with k: a key rollover's step.
func (s *Sender) Rekey(k Key) error {
	if err := k.Validate(); err != nil {
		return err
	}
	s.rekeyed.Store(&k)
	return nil
}

func (s *Sender) key() Key {
	if k := s.rekeyed.Load(); k != nil {
		return *k
	}
	return s.Key
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
	}, s.key())
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
