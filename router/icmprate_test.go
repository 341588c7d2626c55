package router

import (
	"net"
	"testing"
	"time"
)

// A flood of one kind of ICMP error spends its own bucket: Time Exceeded
// all used up, Packet Too Big still goes. The router's rate is shared
// among the back-ends heard: with two peers each takes a third; a peer
// silent past its hold gives its share back.
func TestICMPLimiter(t *testing.T) {
	l := newICMPLimiter(DefaultICMPRate, DefaultICMPBurst, 300*time.Millisecond)
	now := time.Now()
	sent := 0
	for range 1000 {
		if l.take(icmpTimeExceeded, now) {
			sent++
		}
	}
	if sent != DefaultICMPBurst {
		t.Errorf("a burst of 1,000 Time Exceeded: %d sent, want the burst, %d", sent, DefaultICMPBurst)
	}
	if !l.take(icmpTooBig, now) || !l.take(icmpUnreachable, now) {
		t.Error("a Time Exceeded flood took Packet Too Big's or Unreachable's bucket")
	}
	if k := icmpKindOf(false, 3, 4); k != icmpTooBig {
		t.Errorf("Fragmentation Needed is kind %d", k)
	}
	if k := icmpKindOf(true, icmp6TimeExceeded, 0); k != icmpTimeExceeded {
		t.Errorf("ICMPv6 Time Exceeded is kind %d", k)
	}

	// Shares: one second of Unreachable at the router's rate, three
	// back-ends.
	l = newICMPLimiter(900, 30, 300*time.Millisecond)
	l.heard(net.HardwareAddr{2, 0, 0, 0, 0xb0, 2}, now)
	l.heard(net.HardwareAddr{2, 0, 0, 0, 0xb0, 3}, now)
	if n := l.share(now); n != 3 {
		t.Fatalf("share among %d, want 3", n)
	}
	sent = 0
	for i := range 10000 {
		at := now.Add(time.Duration(i) * 100 * time.Microsecond) // 10,000 a second
		l.heard(net.HardwareAddr{2, 0, 0, 0, 0xb0, 2}, at)
		l.heard(net.HardwareAddr{2, 0, 0, 0, 0xb0, 3}, at)
		if l.take(icmpUnreachable, at) {
			sent++
		}
	}
	if sent < 300 || sent > 300+10+1 {
		t.Errorf("a third of 900 a second, burst 10: %d sent in a second, want 300 to 311", sent)
	}
	if n := l.share(now.Add(2 * time.Second)); n != 1 {
		t.Errorf("peers silent for 2 s: share among %d, want 1", n)
	}
}
