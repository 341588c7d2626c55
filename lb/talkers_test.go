package lb

import (
	"net/netip"
	"testing"
	"time"
)

// TestTalkers: samples scaled by their rate, summed by source,
// destination and protocol, the most bytes first; a sample older than
// the window is forgotten; a header that is not IP counts for nothing.
func TestTalkers(t *testing.T) {
	a, b, c := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("203.0.113.10"), netip.MustParseAddr("198.51.100.10")
	frame := func(src, dst netip.Addr) []byte {
		return eth(macExt0, macHost, etherTypeIPv4, udp(src, dst, 1, 2))
	}
	t0 := time.Unix(1_800_000_000, 0)
	var tk talkers
	tk.add(t0, frame(c, b), 1000, 100) // forgotten by the end
	tk.add(t0.Add(40*time.Second), frame(a, b), 1500, 100)
	tk.add(t0.Add(50*time.Second), frame(a, b), 1500, 100)
	tk.add(t0.Add(70*time.Second), frame(b, a), 100, 1000)
	tk.add(t0.Add(70*time.Second), []byte{1, 2, 3}, 100, 1000)
	top := tk.top(t0.Add(80 * time.Second))
	if len(top) != 2 || top[0].Src != a.String() || top[0].Dst != b.String() || top[0].Bytes != 300_000 || top[0].Frames != 200 ||
		top[1].Src != b.String() || top[1].Bytes != 100_000 || top[0].Proto != "udp" {
		t.Fatalf("top: %+v", top)
	}
	if s := top[0].Seconds; s != 50 {
		t.Errorf("counted over %.0f s, want 50 (the older half from 30 s, the newer from 60 s)", s)
	}
	if top := tk.top(t0.Add(200 * time.Second)); len(top) != 0 {
		t.Errorf("two minutes later: %+v", top)
	}
}
