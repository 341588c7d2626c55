package soak

import (
	"net/netip"
	"time"

	"github.com/msr-router/msr/bench"
	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/lab"
)

// sinkOnHosts puts the sink on bgp1's interface too, so that frames to
// the addresses behind bgp1's prefixes are counted with h3's: the soak's
// traffic crosses routes the suite learned, not only a connected subnet.
// h3 and bgp1 share a segment, and each counts only the frames addressed
// to its own MAC: the switch floods a frame for bgp1 to h3 while bgp1's
// port is down, which is not delivering it.
func sinkOnHosts(r *bench.RouterLab) error {
	return r.SinkAlsoOn(lab.Endpoint{Node: "bgp1", Iface: "eth0"})
}

// soakFamily gives the soak's flows their family and destinations: half
// to h3 (a connected subnet), half spread over bgp1's prefixes (BGP
// routes: the sink on bgp1's interface counts them whatever their
// address), of IPv6's family or IPv4's. A route to bgp1 that flaps on a
// back-end loses the flows through it.
func soakFamily(r *bench.RouterLab, ipv6 bool) {
	r.SetDestinations(ipv6, soakDsts(r, ipv6))
}

// soakDsts are the soak's flows' destinations in a family: h3 for every
// other flow (flowToH3), one of bgp1's prefixes for the others, spread
// over them.
func soakDsts(r *bench.RouterLab, ipv6 bool) []netip.Addr {
	h3, prefixes := netip.MustParseAddr(demo.H3), r.Plan().Prefixes
	if ipv6 {
		h3, prefixes = netip.MustParseAddr(demo.H3v6), r.Plan().Prefixes6
	}
	n := max(r.Flows()/2, 1)
	dsts := make([]netip.Addr, 2*n)
	for i := range dsts {
		if flowToH3(i) {
			dsts[i] = h3
		} else {
			dsts[i] = prefixes[i/2*len(prefixes)/n].Addr().Next()
		}
	}
	return dsts
}

// flowToH3 says whether the soak's flow i goes to h3 (else to one of
// bgp1's prefixes): every other one.
func flowToH3(i int) bool { return i%2 == 0 }

// lostByDestination splits the frames a step lost between the flows to
// h3 and those to bgp1's prefixes (flowToH3).
func lostByDestination(r *bench.RouterLab, sent uint64) (toH3, toBGP1 uint64) {
	counts, err := r.FlowCounts()
	if err != nil {
		return 0, 0
	}
	for i, lost := range flowLoss(counts, sent) {
		if flowToH3(i) {
			toH3 += lost
		} else {
			toBGP1 += lost
		}
	}
	return toH3, toBGP1
}

// flowLoss is what each flow lost of sent frames, its count given: the
// generator sends its flows round-robin, so flow i was sent sent/flows
// frames, one more for the first sent%flows.
func flowLoss(counts []uint64, sent uint64) []uint64 {
	lost := make([]uint64, len(counts))
	flows := uint64(len(counts))
	for i, got := range counts {
		want := sent / flows
		if uint64(i) < sent%flows {
			want++
		}
		if got < want {
			lost[i] = want - got
		}
	}
	return lost
}

// ms is d in milliseconds, as the report gives times.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func familyName(ipv6 bool) string {
	if ipv6 {
		return "ipv6"
	}
	return "ipv4"
}
