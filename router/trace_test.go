package router

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/cilium/ebpf/perf"

	"github.com/msr-router/msr/internal/trace"
)

// TestRouterTrace: a traced frame is reported once, by what the back-end
// did: forwarded (out on its next hop's VLAN, the next hop's id, TTL
// down by one in the frame reported), denied by the ACL (a drop, not a
// slow-path report too), TTL 1 and an unresolved neighbour (the slow
// path, with the next hop), a frame to another address not at all.
func TestRouterTrace(t *testing.T) {
	runtime.LockOSThread() // the program writes to this CPU's buffer
	defer runtime.UnlockOSThread()
	s := newRouterState(t, nil, rand.New(rand.NewPCG(1, 1)))
	rd, err := perf.NewReader(s.dp.objs.RtTraceEvents, 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	src := netip.MustParseAddr("198.18.0.7")
	for _, c := range []struct {
		name, dst    string
		ttl          uint8
		dport        uint16
		verdict, why string
		ttlOut, vlan int
		nexthop      bool
	}{
		{name: "forwarded", dst: "192.0.2.10", ttl: 64, dport: 5000, verdict: "sent", ttlOut: 63, vlan: 10, nexthop: true},
		{name: "ACL", dst: "203.0.113.10", ttl: 64, dport: 53, verdict: "dropped", why: "acl", ttlOut: 64},
		{name: "TTL 1", dst: "192.0.2.10", ttl: 1, dport: 5000, verdict: "slow_path", why: "ttl", ttlOut: 1},
		{name: "unresolved", dst: "203.0.113.77", ttl: 64, dport: 5000, verdict: "slow_path", why: "unresolved", ttlOut: 64, nexthop: true},
	} {
		dst := netip.MustParseAddr(c.dst)
		frame := ethFrame(macSelf, macLB, 0x0800, ipPacket(src, dst, 17, c.ttl, 0, udpPayload(999, c.dport, 20)))
		spec := trace.Spec{ID: 9, Src: src, Dst: dst, Proto: 17, Count: 1, Hold: true}
		if err := s.dp.SetTrace(&spec); err != nil {
			t.Fatal(err)
		}
		other := ethFrame(macSelf, macLB, 0x0800, ipPacket(src, netip.MustParseAddr("192.0.2.11"), 17, 64, 0, udpPayload(999, 5000, 20)))
		for _, f := range [][]byte{other, frame} {
			if _, _, err := s.run(f); err != nil {
				t.Fatal(err)
			}
		}
		var got []trace.Raw
		rd.SetDeadline(time.Now().Add(50 * time.Millisecond))
		for {
			rec, err := rd.Read()
			if errors.Is(err, perf.ErrFlushed) {
				continue
			}
			if err != nil {
				break
			}
			r, err := trace.ParseRaw(rec.RawSample)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, r)
		}
		if len(got) != 1 {
			t.Errorf("%s: %d reports, want 1: %+v", c.name, len(got), got)
			continue
		}
		r := got[0]
		p, err := trace.ParsePacket(r.Frame)
		why := ""
		switch r.Verdict {
		case 2:
			why = DropNames[r.Reason]
		case 3:
			why = SlowNames[r.Reason]
		}
		if err != nil || r.VerdictName() != c.verdict || why != c.why || p.TTL != c.ttlOut || p.Dst != dst || (r.Detail[0] != 0) != c.nexthop {
			t.Errorf("%s: %+v %s (%v): packet %+v", c.name, r, why, err, p)
		}
		if c.vlan != 0 && (r.OutPort != uint32(c.vlan) || p.VLAN != c.vlan) {
			t.Errorf("%s: out on vlan %d (frame's tag %d), want %d", c.name, r.OutPort, p.VLAN, c.vlan)
		}
	}
}
