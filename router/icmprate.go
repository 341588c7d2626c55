package router

import (
	"net"
	"time"
)

// ICMP errors are rate-limited per kind, so that a flood of one (Time
// Exceeded from a TTL-1 flood, Destination Unreachable from a scan)
// cannot use up the errors path MTU discovery needs (Fragmentation
// Needed, Packet Too Big). The rate and burst are the router's, as
// Linux's icmp_msgs_per_sec and icmp_msgs_burst are a host's (1,000 and
// 50): each back-end takes its share, the rate divided by the back-ends
// it hears (its own hellos' peers, and itself), so that the router as a
// whole answers as one box would (RFC 1812 §4.3.2.8).

// The router's ICMP rate and burst unless the file says otherwise:
// Linux's.
const (
	DefaultICMPRate  = 1000
	DefaultICMPBurst = 50
)

// icmpKind is what an error is, for its bucket.
type icmpKind int

const (
	icmpTimeExceeded icmpKind = iota
	icmpUnreachable
	icmpTooBig // Fragmentation Needed, Packet Too Big
	icmpOther  // Parameter Problem
	icmpKinds
)

var icmpKindNames = [icmpKinds]string{"time_exceeded", "unreachable", "too_big", "other"}

// icmpKindOf is the kind of an ICMP (v4) or ICMPv6 error of typ and code.
func icmpKindOf(v6 bool, typ, code uint8) icmpKind {
	switch {
	case !v6 && typ == 11, v6 && typ == icmp6TimeExceeded:
		return icmpTimeExceeded
	case !v6 && typ == 3 && code == 4, v6 && typ == icmp6PacketTooBig:
		return icmpTooBig
	case !v6 && typ == 3, v6 && typ == icmp6Unreachable:
		return icmpUnreachable
	}
	return icmpOther
}

// icmpLimiter is the back-end's buckets and how it learns its share.
type icmpLimiter struct {
	rate, burst float64 // the router's
	buckets     [icmpKinds]tokenBucket
	peers       map[string]time.Time // other back-ends heard, by MAC: their last hello
	hold        time.Duration        // a peer not heard for this long is gone
}

func newICMPLimiter(rate, burst int, hold time.Duration) *icmpLimiter {
	l := &icmpLimiter{rate: float64(rate), burst: float64(burst), peers: map[string]time.Time{}, hold: hold}
	for i := range l.buckets {
		l.buckets[i] = tokenBucket{rate: l.rate, burst: l.burst, tokens: l.burst}
	}
	return l
}

// heard records another back-end's hello.
func (l *icmpLimiter) heard(mac net.HardwareAddr, now time.Time) {
	l.peers[mac.String()] = now
}

// share is how many back-ends the router's rate is divided among now.
func (l *icmpLimiter) share(now time.Time) int {
	n := 1
	for mac, t := range l.peers {
		if now.Sub(t) > l.hold {
			delete(l.peers, mac)
			continue
		}
		n++
	}
	return n
}

// take says whether an error of kind k may go now.
func (l *icmpLimiter) take(k icmpKind, now time.Time) bool {
	n := float64(l.share(now))
	b := &l.buckets[k]
	b.rate, b.burst = l.rate/n, max(l.burst/n, 1)
	return b.take(now)
}
