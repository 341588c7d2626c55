package vcp

import (
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/netns"
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
	listen := func(host string) *dist.Conn {
		var c *dist.Conn
		if err := netns.Do(lab.Namespace("t-vcp", host), func() (err error) {
			c, err = dist.Listen("eth0", dist.Keyring{1: secret})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a := tableAgent(t, "") // a standby: tick judges, pushes nothing
	a.conn = listen("vcp")
	r1 := listen("r1")
	sender, _ := dist.NewSender(0xb1, dist.Key{ID: 1, Secret: secret})
	hello := func() {
		f, _ := sender.Seal(dist.GroupMAC, r1.MAC(), &dist.Hello{Role: dist.RoleRouter, HelloIntervalMs: 100, HoldMultiplier: 3, Name: "r1"})
		if err := r1.Send(f); err != nil {
			t.Fatal(err)
		}
	}
	// read handles what the VCP's socket holds, as receive does, and
	// returns on a wait of 50 ms.
	read := func() {
		for {
			f, err := a.conn.Recv(50 * time.Millisecond)
			if err == dist.ErrTimeout {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if h, ok := f.Msg.(*dist.Hello); ok {
				a.heard(f.Header.Sender, f.Src, h, f.Received)
			}
		}
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
