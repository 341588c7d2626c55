package dist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Conn sends and receives DIST frames on one interface through an
// AF_PACKET socket bound to the DIST EtherType. The socket belongs to the
// network namespace of the thread that opened it (see internal/netns).
//
// Every received frame is either returned authenticated and fresh, or
// refused and counted under its reason (Reason): a forged, corrupted or
// replayed frame never reaches the caller.
type Conn struct {
	fd     int
	ifname string
	mac    net.HardwareAddr
	keys   atomic.Pointer[Keyring]
	guard  ReplayGuard

	mu       sync.Mutex
	counters map[string]uint64

	// waiting: Recv is blocked on an empty queue. caughtUp: when Recv
	// last found the queue empty (Unix ns). See CaughtUp.
	waiting  atomic.Bool
	caughtUp atomic.Int64
}

// ErrTimeout is returned by Recv when no acceptable frame arrived in time.
var ErrTimeout = errors.New("no DIST frame before the deadline")

// Listen opens a DIST socket on ifname that accepts frames sealed with any
// key of keys.
func Listen(ifname string, keys Keyring) (*Conn, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("open DIST on %s: %w", ifname, err)
	}
	proto := int(htons(EtherType))
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return nil, fmt.Errorf("open DIST on %s: AF_PACKET socket: %w", ifname, err)
	}
	sa := &unix.SockaddrLinklayer{Protocol: htons(EtherType), Ifindex: ifi.Index}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("open DIST on %s: bind: %w", ifname, err)
	}
	// The kernel stamps each frame as it enters the stack: a PROBE's round
	// trip is timed without this process's scheduling in it.
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("open DIST on %s: SO_TIMESTAMPNS: %w", ifname, err)
	}
	mreq := &unix.PacketMreq{Ifindex: int32(ifi.Index), Type: unix.PACKET_MR_MULTICAST, Alen: 6}
	copy(mreq.Address[:], GroupMAC)
	if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, mreq); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("open DIST on %s: join %s: %w", ifname, GroupMAC, err)
	}
	c := &Conn{fd: fd, ifname: ifname, mac: ifi.HardwareAddr, counters: map[string]uint64{}}
	c.keys.Store(&keys)
	return c, nil
}

// Rekey makes c accept the keys of keys from now on: a key rollover's
// step, taken without closing the socket.
func (c *Conn) Rekey(keys Keyring) { c.keys.Store(&keys) }

// PersistReplay keeps c's replay state in path across restarts
// (ReplayGuard.Persist). Call it before the first Recv.
func (c *Conn) PersistReplay(path string) error { return c.guard.Persist(path) }

// MAC is the interface's hardware address, the source of frames sent.
func (c *Conn) MAC() net.HardwareAddr { return c.mac }

// sendTries and sendRetryWait: a frame refused with ENOBUFS (the
// interface's ring full of data, seen on the lab's veths under 16 TCP
// streams: a hello lost) is sent again, up to sendTries times over about
// two milliseconds, and counted as "send_retried".
const (
	sendTries     = 8
	sendRetryWait = 250 * time.Microsecond
)

// Send transmits one sealed frame, again if the interface has no room.
func (c *Conn) Send(frame []byte) error { return c.send(frame, sendTries) }

// SendNow transmits one sealed frame once: for a frame whose time of
// sending is what it measures (a PROBE), which is better lost than late.
func (c *Conn) SendNow(frame []byte) error { return c.send(frame, 1) }

func (c *Conn) send(frame []byte, tries int) error {
	var err error
	for try := 0; try < tries; try++ {
		if try > 0 {
			c.count("send_retried")
			time.Sleep(sendRetryWait)
		}
		if err = unix.Send(c.fd, frame, 0); !errors.Is(err, unix.ENOBUFS) && !errors.Is(err, unix.EAGAIN) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("send DIST on %s: %w", c.ifname, err)
	}
	c.count("sent")
	return nil
}

// Recv waits up to timeout for the next acceptable frame. Refused frames
// are counted and skipped.
func (c *Conn) Recv(timeout time.Duration) (*Frame, error) {
	deadline := time.Now().Add(timeout)
	buf := make([]byte, MaxFrameLen+1)
	oob := make([]byte, unix.CmsgSpace(16))
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return nil, ErrTimeout
		}
		tv := unix.NsecToTimeval(left.Nanoseconds())
		if err := unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return nil, fmt.Errorf("recv DIST on %s: %w", c.ifname, err)
		}
		// The caller has handled every frame Recv returned before: with
		// nothing queued, it has handled every frame that arrived.
		if !c.queued() {
			c.advance(time.Now().UnixNano())
			c.waiting.Store(true)
		}
		n, oobn, _, from, err := unix.Recvmsg(c.fd, buf, oob, 0)
		c.waiting.Store(false)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("recv DIST on %s: %w", c.ifname, err)
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		f, err := c.accept(buf[:n])
		if err != nil {
			c.count(Reason(err))
			continue
		}
		f.Received = received(oob[:oobn])
		c.count("accepted")
		return f, nil
	}
}

// CaughtUp is a time before which every frame the kernel received on this
// socket has been returned by Recv (and, Recv being called again, handled
// by its caller): now while Recv waits on an empty queue, else when Recv
// last found it empty. A receiver judges a sender silent against this
// time, not its own clock: a process that stood still for 300 ms on a
// busy machine finds its peers' hellos queued, and the ticker that
// judges them may run before the loop that reads them (the soak: some
// fifty "died" then "came back" within a second each run, six elements
// at once after one stall). Zero before Recv is first called.
func (c *Conn) CaughtUp() time.Time {
	// Waiting, and nothing queued: caught up. A frame queued while Recv
	// waits has woken its thread, which may not run for a while on a
	// busy machine (the soak: both VCPs took the same back-ends for dead
	// in the same millisecond, their hellos in the queue).
	// Kept: a frame queued next must not take it back to when Recv
	// began to wait, or a sender judged silent now would come alive
	// again until the frame is read (the LB put a back-end it had just
	// dropped back in its table for 50 ms).
	if c.waiting.Load() && !c.queued() {
		now := time.Now()
		c.advance(now.UnixNano())
		return now
	}
	if ns := c.caughtUp.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// advance moves caughtUp forward to ns, never back.
func (c *Conn) advance(ns int64) {
	for {
		cur := c.caughtUp.Load()
		if cur >= ns || c.caughtUp.CompareAndSwap(cur, ns) {
			return
		}
	}
}

// HeardUpTo is the time a receiver judges its senders' silence against:
// CaughtUp, or now if that is later or Recv was never called.
func (c *Conn) HeardUpTo(now time.Time) time.Time {
	if caught := c.CaughtUp(); !caught.IsZero() && caught.Before(now) {
		return caught
	}
	return now
}

// queued says whether a frame waits in the socket's queue (SIOCINQ: the
// next frame's length).
func (c *Conn) queued() bool {
	n, err := unix.IoctlGetInt(c.fd, unix.SIOCINQ)
	return err == nil && n > 0
}

// received is the kernel's receive time of a frame (SCM_TIMESTAMPNS), or
// now if the kernel gave none.
func received(oob []byte) time.Time {
	msgs, _ := unix.ParseSocketControlMessage(oob)
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
			sec, nsec := binary.NativeEndian.Uint64(m.Data[0:8]), binary.NativeEndian.Uint64(m.Data[8:16])
			return time.Unix(int64(sec), int64(nsec))
		}
	}
	return time.Now()
}

func (c *Conn) accept(b []byte) (*Frame, error) {
	f, err := Unmarshal(b, *c.keys.Load())
	if err != nil {
		return nil, err
	}
	if err := c.guard.Check(f.Header); err != nil {
		return nil, err
	}
	return f, nil
}

func (c *Conn) count(what string) {
	c.mu.Lock()
	c.counters[what]++
	c.mu.Unlock()
}

// Counters returns how many frames were sent (and sent again after
// ENOBUFS: send_retried), accepted, and refused by reason; every reason is
// present, zero or not.
func (c *Conn) Counters() map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]uint64{"sent": c.counters["sent"], "send_retried": c.counters["send_retried"], "accepted": c.counters["accepted"]}
	for _, r := range append(Reasons(), "other") {
		out[r] = c.counters[r]
	}
	c.guard.mu.Lock()
	out["replay_save_failed"] = c.guard.SaveErrors
	c.guard.mu.Unlock()
	return out
}

// Close releases the socket.
func (c *Conn) Close() error { return unix.Close(c.fd) }

func htons(v uint16) uint16 { return v<<8 | v>>8 }
