package router

import (
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/element"
	"github.com/msr-router/msr/internal/iflink"
)

// TestHelloWhileLinkReadsStall: a back-end's hellos keep their interval
// while reading its interface from the kernel takes seconds (the RTNL lock
// held elsewhere): reading it in the hello loop silenced every back-end at
// once (docs/reliability.md, finding 20).
func TestHelloWhileLinkReadsStall(t *testing.T) {
	cfg, _, conn := identityBackend(t, "t-hellostall", "msr-test-hellostall")
	a, stop := startRouter(t, cfg)
	defer func() { stop(); a.Remove() }()
	// From now on every read of the link takes 2 s.
	var firstRead atomic.Int64 // unix ns
	a.linkMu.Lock()
	a.readLinkState = func(name string) (iflink.State, error) {
		firstRead.CompareAndSwap(0, time.Now().UnixNano())
		time.Sleep(2 * time.Second)
		return iflink.Read(name)
	}
	a.linkMu.Unlock()
	var last time.Time
	var heard int
	var gap time.Duration
	end := time.Now().Add(3 * time.Second)
	for time.Now().Before(end) {
		f, err := conn.Recv(200 * time.Millisecond)
		if err != nil {
			continue
		}
		if _, ok := f.Msg.(*dist.Hello); !ok || f.Header.Sender != cfg.ID {
			continue
		}
		now := time.Now()
		if !last.IsZero() {
			gap = max(gap, now.Sub(last))
		}
		last, heard = now, heard+1
	}
	// The follower reads every second: a read stalled through the last
	// second of the 3 at least.
	if r := firstRead.Load(); r == 0 || time.Unix(0, r).After(end.Add(-time.Second)) {
		t.Fatalf("no read of the link stalled through the last second heard (first read at %v, end %v)", time.Unix(0, r), end)
	}
	hold := cfg.HelloInterval * time.Duration(cfg.HoldMultiplier)
	if heard < 15 || gap >= hold {
		t.Errorf("while reading the link took 2 s: %d hellos in 3 s, the longest gap %v (a gap of the hold, %v, is a dead back-end)", heard, gap, hold)
	}
	// The agent's own record of its hellos agrees. A hello is counted
	// just after it leaves, so the last one heard may not be counted yet
	// (CI on 33e907f read 30 of the 31 heard): wait a hello interval for it.
	h := a.Status().Hellos
	for wait := time.Now().Add(cfg.HelloInterval); h.Sent < uint64(heard) && time.Now().Before(wait); h = a.Status().Hellos {
		time.Sleep(5 * time.Millisecond)
	}
	if h.Sent < uint64(heard) || h.LongestGapMs <= 0 || h.LongestGapMs >= float64(hold.Milliseconds()) {
		t.Errorf("the agent's hello timing %+v: want at least the %d heard, the longest gap under the hold", h, heard)
	}
}

// A back-end's hellos keep their interval while the agent's lock is held
// for a second (route work, a state save copying a full table): the soak's
// back-ends sent hellos 310-790 ms apart, up to 500 ms of it spent
// building the hello, behind the lock. The hello says what it said last.
func TestHelloWhileAgentLocked(t *testing.T) {
	cfg, _, conn := identityBackend(t, "t-hellolock", "msr-test-hellolock")
	a, stop := startRouter(t, cfg)
	defer func() { stop(); a.Remove() }()
	time.Sleep(300 * time.Millisecond) // a hello or more said
	locked := make(chan struct{})
	go func() {
		a.mu.Lock()
		close(locked)
		time.Sleep(1200 * time.Millisecond)
		a.mu.Unlock()
	}()
	<-locked
	var last time.Time
	var heard int
	var gap time.Duration
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); {
		f, err := conn.Recv(200 * time.Millisecond)
		if err != nil {
			continue
		}
		if _, ok := f.Msg.(*dist.Hello); !ok || f.Header.Sender != cfg.ID {
			continue
		}
		if !last.IsZero() {
			gap = max(gap, f.Received.Sub(last))
		}
		last, heard = f.Received, heard+1
	}
	if hold := cfg.Hold(); heard < 8 || gap >= hold {
		t.Errorf("while the agent's lock was held 1.2 s: %d hellos in 1.5 s, the longest gap %v (a gap of the hold, %v, is a dead back-end)", heard, gap, hold)
	}
}

// timeHello counts a hello two intervals after the one before as late,
// keeps the longest gap with its parts, and logs one a hold late.
func TestTimeHello(t *testing.T) {
	var log strings.Builder
	a := &Agent{cfg: &AgentConfig{Config: element.Config{HelloInterval: 100 * time.Millisecond, HoldMultiplier: 3}},
		log: slog.New(slog.NewTextHandler(&log, nil))}
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	a.timeHello(at(0), at(0), at(1))
	a.timeHello(at(100), at(100), at(101)) // on time
	a.timeHello(at(200), at(290), at(301)) // 200 ms: late, not logged
	a.timeHello(at(400), at(620), at(701)) // 400 ms: woke 220 ms late, 81 ms to send
	a.timeHello(at(800), at(800), at(801)) // on time again
	h := a.hellos
	if h.Sent != 5 || h.Late != 2 || h.LongestGapMs != 400 || h.WokeLateMs != 220 || h.SendMs != 81 {
		t.Errorf("hello timing %+v", h)
	}
	if n := strings.Count(log.String(), "hello late"); n != 1 || !strings.Contains(log.String(), "woke_late=220ms") {
		t.Errorf("want one late hello logged, with its parts:\n%s", log.String())
	}
}
