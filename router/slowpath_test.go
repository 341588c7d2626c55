package router

import (
	"net/netip"
	"testing"
	"time"

	"github.com/msr-router/msr/internal/inet"
)

// TestTokenBucket: ICMP errors (RFC 1812 §4.3.2.8) go out at most at the
// rate, after a burst, and the bucket refills with time.
func TestTokenBucket(t *testing.T) {
	b := tokenBucket{rate: 10, burst: 5, tokens: 5}
	now := time.Unix(1000, 0)
	sent := 0
	for i := 0; i < 100; i++ {
		if b.take(now) {
			sent++
		}
	}
	if sent != 5 {
		t.Errorf("burst: %d sent at one instant, want 5", sent)
	}
	sent = 0
	for i := 0; i < 1000; i++ { // one second in 1 ms steps
		now = now.Add(time.Millisecond)
		if b.take(now) {
			sent++
		}
	}
	if sent < 9 || sent > 11 {
		t.Errorf("%d sent in one second at 10/s", sent)
	}
}

// TestDecTTL checks the slow path's TTL decrement keeps the header valid.
func TestDecTTL(t *testing.T) {
	p := inet.IPv4(netipMust("198.18.0.1"), netipMust("192.0.2.10"), 17, make([]byte, 12))
	p = decTTL(p)
	if p[8] != 63 || !checksumOK(p[:20]) {
		t.Errorf("TTL %d, header %x", p[8], p[:20])
	}
}

func netipMust(s string) netip.Addr { return netip.MustParseAddr(s) }

func checksumOK(h []byte) bool { return inet.Checksum(h) == 0 }
