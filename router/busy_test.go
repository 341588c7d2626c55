package router

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"
	"time"
)

// The busy meter reads the program's run time over its window: idle, it
// measures nothing (and reports it measured); with one thread running the
// program back to back for the whole window, a share of one core, at most
// one.
func TestBusyMeter(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s := newRouterState(t, nil, rand.New(rand.NewPCG(1, 1)))
	m := NewBusyMeter(s.dp.Program())
	m.Window = 300 * time.Millisecond
	if _, ok := m.Permyriad(); ok {
		t.Fatal("a meter that never sampled says it measured")
	}
	if err := m.sample(context.Background()); err != nil {
		t.Fatal(err)
	}
	idle, ok := m.Permyriad()
	if !ok || idle > 10 {
		t.Errorf("idle: %d ten-thousandths of a core (measured %v), want about 0", idle, ok)
	}
	frame := data(netip.MustParseAddr("192.0.2.10"), 64)
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if _, _, err := s.run(frame); err != nil {
				done <- err
				return
			}
		}
	}()
	err := m.sample(context.Background())
	close(stop)
	if err2 := <-done; err2 != nil {
		t.Fatal(err2)
	}
	if err != nil {
		t.Fatal(err)
	}
	busy, _ := m.Permyriad()
	t.Logf("busy %.3f cores with one thread running the program back to back", float64(busy)/10000)
	// Test runs spend most of their time outside the program (the
	// syscall, copying the frame): a few percent of a core at least, and
	// never more than one.
	if busy < 100 || busy > 10000 {
		t.Errorf("busy %d ten-thousandths of a core, want 100-10000", busy)
	}
}
