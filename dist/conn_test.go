package dist

import (
	"bytes"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"github.com/msr-router/msr/internal/msrtest"
	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/lab/labtest"
)

var connLab = msrtest.Testdata("t-dist.yaml")

// listenIn opens a DIST socket on eth0 of a lab host.
func listenIn(t *testing.T, host string, keys Keyring) *Conn {
	t.Helper()
	var c *Conn
	if err := netns.Do(lab.Namespace("t-dist", host), func() (err error) {
		c, err = Listen("eth0", keys)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestConnAcrossBridge sends DIST frames between two lab hosts through a
// Linux bridge: authentic frames arrive, and frames that are forged,
// corrupted or replayed are refused and counted by reason.
func TestConnAcrossBridge(t *testing.T) {
	labtest.Up(t, connLab)

	keys := testRing
	a := listenIn(t, "a", keys)
	b := listenIn(t, "b", keys)
	sender, err := NewSender(0xa, testKey)
	if err != nil {
		t.Fatal(err)
	}
	hello := &Hello{Role: RoleRouter, HelloIntervalMs: 100, HoldMultiplier: 3, Capacity: 1000, Name: "r1"}

	send := func(frame []byte) {
		t.Helper()
		if err := a.Send(frame); err != nil {
			t.Fatal(err)
		}
	}
	good, err := sender.Seal(GroupMAC, a.MAC(), hello)
	if err != nil {
		t.Fatal(err)
	}
	send(good)
	f, err := b.Recv(2 * time.Second)
	if err != nil {
		t.Fatalf("valid hello did not arrive: %v (counters %v)", err, b.Counters())
	}
	if f.Header.Sender != 0xa || f.Header.Seq != 1 || !bytes.Equal(f.Src, a.MAC()) {
		t.Errorf("received %+v from %s", f.Header, f.Src)
	}
	if got := f.Msg.(*Hello); got.Name != "r1" || got.Capacity != 1000 {
		t.Errorf("received hello %+v", got)
	}

	forger, _ := NewSender(0xa, Key{ID: testKey.ID, Secret: bytes.Repeat([]byte{7}, 32)})
	forged, _ := forger.Seal(GroupMAC, a.MAC(), hello)
	flipped, _ := sender.Seal(GroupMAC, a.MAC(), hello)
	flipped[EthHeaderLen+HeaderLen+10] ^= 0x04
	send(forged)
	send(flipped)
	send(good) // replayed
	announce := &VCPAnnounce{State: VCPActive, APIAddr: netip.MustParseAddr("10.0.0.1"), APIPort: 7700}
	posing, _ := sender.Seal(b.MAC(), a.MAC(), announce) // an element key: not the VCP's
	send(posing)
	vcp, _ := NewSender(0xc, testVCPKey)
	unicast, _ := vcp.Seal(b.MAC(), a.MAC(), announce)
	send(unicast)

	f, err = b.Recv(2 * time.Second)
	if err != nil {
		t.Fatalf("valid frame after the bad ones did not arrive: %v", err)
	}
	if f.Header.Type != TypeVCPAnnounce {
		t.Errorf("got %s, want the VCP_ANNOUNCE: a bad frame got through", f.Header.Type)
	}
	if _, err := b.Recv(300 * time.Millisecond); err != ErrTimeout {
		t.Errorf("extra frame accepted: %v", err)
	}
	c := b.Counters()
	want := map[string]uint64{"accepted": 2, "auth": 2, "replay": 1, "role_refused": 1, "malformed": 0, "sent": 0}
	for k, v := range want {
		if c[k] != v {
			t.Errorf("counter %s = %d, want %d (all: %v)", k, c[k], v, c)
		}
	}
	if a.Counters()["sent"] != 6 {
		t.Errorf("sender counted %d frames sent, want 6", a.Counters()["sent"])
	}
}

// TestConnSendRetriesWhenFull: a frame the interface refuses for want of
// room (ENOBUFS: here a token bucket of 2 Mbit/s holding 200 bytes on a's
// port, as a veth's ring full of data refuses it) is sent again, not
// lost: 40 hellos sent back to back all arrive, and the retries are
// counted.
func TestConnSendRetriesWhenFull(t *testing.T) {
	labtest.Up(t, connLab)
	ns := lab.Namespace("t-dist", "a")
	if out, err := exec.Command("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "2mbit", "burst", "1600", "limit", "200").CombinedOutput(); err != nil {
		t.Fatalf("tc: %v %s", err, out)
	}
	keys := testRing
	a := listenIn(t, "a", keys)
	b := listenIn(t, "b", keys)
	sender, err := NewSender(0xa, testKey)
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	for i := 0; i < n; i++ {
		frame, err := sender.Seal(GroupMAC, a.MAC(), &Hello{Role: RoleRouter, HelloIntervalMs: 100, HoldMultiplier: 3, Name: "r1"})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Send(frame); err != nil {
			t.Fatalf("hello %d: %v (counters %v)", i, err, a.Counters())
		}
	}
	for i := 0; i < n; i++ {
		if _, err := b.Recv(2 * time.Second); err != nil {
			t.Fatalf("%d of %d hellos arrived: %v", i, n, err)
		}
	}
	if c := a.Counters(); c["sent"] != n || c["send_retried"] == 0 {
		t.Errorf("sender's counters %v: want %d sent, some after a retry", c, n)
	}
}

// TestConnCaughtUp: CaughtUp says up to when every frame that arrived has
// been read. Frames queued while nobody reads keep it before their
// arrival, until the reader has taken the last of them and comes back for
// more; a reader waiting on an empty queue is caught up now.
func TestConnCaughtUp(t *testing.T) {
	labtest.Up(t, connLab)
	keys := testRing
	a := listenIn(t, "a", keys)
	b := listenIn(t, "b", keys)
	sender, err := NewSender(0xa, testKey)
	if err != nil {
		t.Fatal(err)
	}
	if !b.CaughtUp().IsZero() {
		t.Errorf("CaughtUp before any Recv: %v, want zero", b.CaughtUp())
	}
	if _, err := b.Recv(50 * time.Millisecond); err != ErrTimeout {
		t.Fatalf("Recv on a quiet link: %v", err)
	}
	// Nobody reads b while three hellos arrive.
	before := time.Now()
	for i := 0; i < 3; i++ {
		frame, _ := sender.Seal(GroupMAC, a.MAC(), &Hello{Role: RoleRouter, HelloIntervalMs: 100, HoldMultiplier: 3, Name: "r1"})
		if err := a.Send(frame); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if c := b.CaughtUp(); !c.Before(before) {
		t.Errorf("three hellos queued: CaughtUp %v, want before the first was sent (%v)", c, before)
	}
	for i := 0; i < 3; i++ {
		f, err := b.Recv(time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !f.Received.After(before) || f.Received.After(time.Now()) {
			t.Errorf("hello %d: received at %v, sent after %v", i, f.Received, before)
		}
		if c := b.CaughtUp(); !c.Before(before) {
			t.Errorf("hello %d of 3 read: CaughtUp %v, want still before the first was sent: the caller has not handled it", i+1, c)
		}
	}
	// A reader woken by a frame but not running yet (a busy machine):
	// waiting, with the frame queued. Not caught up.
	b.waiting.Store(true)
	before = time.Now()
	frame, _ := sender.Seal(GroupMAC, a.MAC(), &Hello{Role: RoleRouter, HelloIntervalMs: 100, HoldMultiplier: 3, Name: "r1"})
	if err := a.Send(frame); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if c := b.CaughtUp(); !c.Before(before) {
		t.Errorf("a hello queued while the reader waits, not yet woken: CaughtUp %v, want before it was sent (%v)", c, before)
	}
	b.waiting.Store(false)
	if _, err := b.Recv(time.Second); err != nil {
		t.Fatal(err)
	}
	// The reader comes back and waits on the empty queue: caught up now.
	done := make(chan error)
	go func() { _, err := b.Recv(400 * time.Millisecond); done <- err }()
	time.Sleep(200 * time.Millisecond)
	if c := b.CaughtUp(); time.Since(c) > 10*time.Millisecond {
		t.Errorf("reader waiting on an empty queue: CaughtUp %v ago, want now", time.Since(c))
	}
	if err := <-done; err != ErrTimeout {
		t.Errorf("extra frame: %v", err)
	}
	// Seen caught up at a time, a reader stays caught up to it when a
	// frame is queued next: it never goes back to when Recv began to
	// wait.
	b.waiting.Store(true)
	seen := b.CaughtUp()
	frame, _ = sender.Seal(GroupMAC, a.MAC(), &Hello{Role: RoleRouter, HelloIntervalMs: 100, HoldMultiplier: 3, Name: "r1"})
	if err := a.Send(frame); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if c := b.CaughtUp(); c.Before(seen) {
		t.Errorf("a hello queued after CaughtUp said %v: CaughtUp went back to %v", seen, c)
	}
	b.waiting.Store(false)
	if _, err := b.Recv(time.Second); err != nil {
		t.Fatal(err)
	}
}
