package vcp

import (
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/dist/disttest"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/lab/labtest"
)

// A back-end whose hellos wait in the VCP's socket while the VCP stands
// still is alive when the VCP's ticker runs first; one the VCP hears
// nothing from while it waits on an empty queue dies after its hold, and
// says how long it was silent when it comes back. Judged against the
// VCP's own clock, the 600 ms stall here killed it (the soak: some fifty
// "died" then "came back" within a second a run, six elements in one
// millisecond after one stall).
func TestAliveWhileHellosQueued(t *testing.T) {
	labtest.Up(t, vcpLab)
	secret, _ := hex.DecodeString(keyHex)
	keys := dist.Keyring{1: {Secret: secret}}
	a := tableAgent(t, "") // a standby: tick judges, pushes nothing
	a.conn = disttest.Listen(t, lab.Namespace("t-vcp", "vcp"), "eth0", keys)
	hello := disttest.RouterHellos(t, disttest.Listen(t, lab.Namespace("t-vcp", "r1"), "eth0", keys), 0xb1, dist.Key{ID: 1, Secret: secret}, "r1")
	read := func() { // as receive does
		disttest.Drain(t, a.conn, func(f *dist.Frame) {
			if h, ok := f.Msg.(*dist.Hello); ok {
				a.heard(f.Header.Sender, f.Src, h, f.Received)
			}
		})
	}
	alive := func() bool {
		a.tick(time.Now())
		a.mu.Lock()
		defer a.mu.Unlock()
		e := a.elements[0xb1]
		return e != nil && e.alive
	}
	hello()
	read()
	if !alive() {
		t.Fatal("r1 not alive after its hello")
	}
	for i := 0; i < 6; i++ { // the VCP's receive loop still for 600 ms
		time.Sleep(100 * time.Millisecond)
		hello()
	}
	time.Sleep(20 * time.Millisecond)
	if !alive() {
		t.Errorf("r1 dead after a 600 ms stall of the VCP with its hellos queued (the VCP caught up %v ago)", time.Since(a.conn.CaughtUp()))
	}
	read()
	if !alive() {
		t.Error("r1 dead after the VCP read its queued hellos")
	}
	// r1 falls silent while the VCP waits on an empty queue.
	done := make(chan struct{})
	go func() { a.conn.Recv(600 * time.Millisecond); close(done) }()
	time.Sleep(150 * time.Millisecond)
	if !alive() {
		t.Error("r1 dead 150 ms into its silence")
	}
	time.Sleep(250 * time.Millisecond)
	if alive() {
		t.Error("r1 alive 400 ms into its silence, hold 300 ms")
	}
	<-done
	// Back after its silence: the event says how long, by the kernel's
	// clock.
	hello()
	read()
	if !alive() {
		t.Fatal("r1 not back after its hello")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ev := range a.events {
		if strings.Contains(ev.Text, "r1 came back (silent") {
			return
		}
	}
	t.Errorf("events %v: want r1 back with its silence", a.events)
}
