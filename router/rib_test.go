package router

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// fakeFIB records what the feed does to the FIB.
type fakeFIB struct {
	routes  map[netip.Prefix][]netip.Addr
	changes int
}

func newTestFeed() (*ribFeed, *fakeFIB) {
	fib := &fakeFIB{routes: map[netip.Prefix][]netip.Addr{}}
	f := &ribFeed{cfg: &RIBConfig{ASN: 65000}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), paths: newRIBStore(), refusedFor: map[string]bool{},
		add: func(p netip.Prefix, via []netip.Addr) error {
			if !reflect.DeepEqual(fib.routes[p], via) {
				fib.changes++
			}
			fib.routes[p] = via
			return nil
		},
		del: func(p netip.Prefix) error {
			fib.changes++
			delete(fib.routes, p)
			return nil
		}}
	return f, fib
}

// announce is an UPDATE of prefixes with path ids, via nh, with an
// AS_PATH of asLen and a LOCAL_PREF.
func announce(nh string, asLen int, localPref uint32, ids []uint32, prefixes ...string) *bgp.BGPUpdate {
	var nlri []bgp.PathNLRI
	for i, p := range prefixes {
		pfx, _ := bgp.NewIPAddrPrefix(netip.MustParsePrefix(p))
		nlri = append(nlri, bgp.PathNLRI{NLRI: pfx, ID: ids[i]})
	}
	asns := make([]uint32, asLen)
	for i := range asns {
		asns[i] = 65010 + uint32(i)
	}
	nhAttr, _ := bgp.NewPathAttributeNextHop(netip.MustParseAddr(nh))
	attrs := []bgp.PathAttributeInterface{
		bgp.NewPathAttributeOrigin(0),
		bgp.NewPathAttributeAsPath([]bgp.AsPathParamInterface{bgp.NewAs4PathParam(bgp.BGP_ASPATH_ATTR_TYPE_SEQ, asns)}),
		nhAttr,
		bgp.NewPathAttributeLocalPref(localPref),
	}
	return &bgp.BGPUpdate{PathAttributes: attrs, NLRI: nlri}
}

func withdraw(id uint32, prefixes ...string) *bgp.BGPUpdate {
	var w []bgp.PathNLRI
	for _, p := range prefixes {
		pfx, _ := bgp.NewIPAddrPrefix(netip.MustParsePrefix(p))
		w = append(w, bgp.PathNLRI{NLRI: pfx, ID: id})
	}
	return &bgp.BGPUpdate{WithdrawnRoutes: w}
}

func hops(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// Multipath: the paths as good as the best are the next hops; a better
// one replaces them; withdrawals leave the others.
func TestRIBFeedMultipath(t *testing.T) {
	f, fib := newTestFeed()
	p := netip.MustParsePrefix("100.64.0.0/10")
	f.update(announce("192.0.2.10", 1, 100, []uint32{1}, "100.64.0.0/10"))
	f.update(announce("192.0.2.11", 1, 100, []uint32{2}, "100.64.0.0/10"))
	f.update(announce("192.0.2.12", 2, 100, []uint32{3}, "100.64.0.0/10")) // longer AS path: not equal
	if got := fib.routes[p]; !reflect.DeepEqual(got, hops("192.0.2.10", "192.0.2.11")) {
		t.Fatalf("ECMP next hops %v", got)
	}
	f.update(announce("192.0.2.13", 3, 200, []uint32{4}, "100.64.0.0/10")) // higher LOCAL_PREF wins
	if got := fib.routes[p]; !reflect.DeepEqual(got, hops("192.0.2.13")) {
		t.Fatalf("after a better path: %v", got)
	}
	f.update(withdraw(4, "100.64.0.0/10"))
	if got := fib.routes[p]; !reflect.DeepEqual(got, hops("192.0.2.10", "192.0.2.11")) {
		t.Fatalf("after its withdrawal: %v", got)
	}
	f.update(announce("192.0.2.20", 1, 100, []uint32{1}, "100.64.0.0/10")) // path 1 replaced
	if got := fib.routes[p]; !reflect.DeepEqual(got, hops("192.0.2.11", "192.0.2.20")) {
		t.Fatalf("after path 1 changed: %v", got)
	}
	for _, id := range []uint32{1, 2, 3} {
		f.update(withdraw(id, "100.64.0.0/10"))
	}
	if _, ok := fib.routes[p]; ok || f.paths.len() != 0 {
		t.Fatalf("withdrawn everywhere, still %v, %v", fib.routes, f.paths)
	}
	f.update(withdraw(9, "10.0.0.0/8")) // unknown: nothing happens
	if len(fib.routes) != 0 {
		t.Fatal(fib.routes)
	}
}

// tagged is announce with large communities (ASN, kind, value) added.
func tagged(u *bgp.BGPUpdate, lcs ...[3]uint32) *bgp.BGPUpdate {
	var vs []*bgp.LargeCommunity
	for _, c := range lcs {
		vs = append(vs, bgp.NewLargeCommunity(c[0], c[1], c[2]))
	}
	u.PathAttributes = append(u.PathAttributes, bgp.NewPathAttributeLargeCommunities(vs))
	return u
}

// A route's origin and preference ride in large communities of the
// router's ASN (origin.go): the back-end ranks a prefix's paths by them
// first, as the suite did, and says where the winner came from; another
// AS's communities say nothing.
func TestRIBFeedOrigin(t *testing.T) {
	p := netip.MustParsePrefix("100.64.0.0/10")
	for _, c := range []struct {
		name      string
		ospf, bgp [][3]uint32
		want      string
		protocol  string
		pref      uint16
		distance  bool
	}{
		// BIRD: BGP at preference 170 beats OSPF at 150, though its AS
		// path is longer (BGP's own tie-breaks would pick OSPF's).
		{"bird", [][3]uint32{{65000, 1, 3}, {65000, 2, 150}}, [][3]uint32{{65000, 1, 7}, {65000, 2, 170}}, "192.0.2.20", "bgp", 170, false},
		// FRR: eBGP's distance 20 beats OSPF's 110.
		{"frr", [][3]uint32{{65000, 1, 3}, {65000, 3, 110}}, [][3]uint32{{65000, 1, 7}, {65000, 3, 20}}, "192.0.2.20", "bgp", 20, true},
		// BIRD's default preferences: OSPF's 150 beats BGP's 100.
		{"ospf wins", [][3]uint32{{65000, 1, 3}, {65000, 2, 150}}, [][3]uint32{{65000, 1, 7}, {65000, 2, 100}}, "192.0.2.10", "ospf", 150, false},
		// Another AS's communities are not ours: untagged, BGP's
		// tie-breaks decide (OSPF's empty AS path).
		{"forged", [][3]uint32{{65099, 1, 7}, {65099, 2, 1000}}, [][3]uint32{{65099, 1, 2}}, "192.0.2.10", "", 0, false},
	} {
		f, fib := newTestFeed()
		f.update(tagged(announce("192.0.2.10", 0, 100, []uint32{1}, p.String()), c.ospf...))
		f.update(tagged(announce("192.0.2.20", 2, 100, []uint32{2}, p.String()), c.bgp...))
		if got := fib.routes[p]; !reflect.DeepEqual(got, hops(c.want)) {
			t.Errorf("%s: next hops %v, want %s", c.name, got, c.want)
		}
		o, ok := f.bestOrigin(p)
		if !ok || originName(o.code) != c.protocol || o.preference() != c.pref || o.distance != c.distance {
			t.Errorf("%s: origin %q preference %d distance %v, want %q %d %v", c.name, originName(o.code), o.preference(), o.distance, c.protocol, c.pref, c.distance)
		}
	}
}

// Graceful restart: routes stay through a lost session; sent again,
// nothing changes; at End-of-RIB what was not sent again goes.
func TestRIBFeedGracefulRestart(t *testing.T) {
	f, fib := newTestFeed()
	f.st.GR = true
	f.update(announce("192.0.2.10", 1, 100, []uint32{1, 1, 1}, "10.1.0.0/16", "10.2.0.0/16", "10.3.0.0/16"))
	f.update(announce("192.0.2.11", 1, 100, []uint32{2}, "10.1.0.0/16"))
	before := fib.changes
	f.sessionLost()
	if fib.changes != before || len(fib.routes) != 3 || f.Status().Stale != 4 {
		t.Fatalf("a lost session changed the FIB: %d changes, %v, %+v", fib.changes-before, fib.routes, f.Status())
	}
	// The new session sends 10.1 (both paths, other ids) and 10.2 again.
	f.update(announce("192.0.2.10", 1, 100, []uint32{7, 7}, "10.1.0.0/16", "10.2.0.0/16"))
	f.update(announce("192.0.2.11", 1, 100, []uint32{8}, "10.1.0.0/16"))
	if fib.changes != before {
		t.Fatalf("the resync changed the FIB before End-of-RIB: %v", fib.routes)
	}
	// Each path sent again took the place of its stale twin (the same
	// next hop): only 10.3's is left stale, and no prefix holds more.
	if st := f.Status(); st.Stale != 1 || st.Paths != 4 || len(f.paths.shared(netip.MustParsePrefix("10.2.0.0/16"))) != 1 {
		t.Fatalf("after the resync: %d paths, %d stale, 10.2's %+v; want 4, 1 and one path", st.Paths, st.Stale, f.paths.shared(netip.MustParsePrefix("10.2.0.0/16")))
	}
	f.update(&bgp.BGPUpdate{}) // End-of-RIB
	want := map[netip.Prefix][]netip.Addr{
		netip.MustParsePrefix("10.1.0.0/16"): hops("192.0.2.10", "192.0.2.11"),
		netip.MustParsePrefix("10.2.0.0/16"): hops("192.0.2.10"),
	}
	if !reflect.DeepEqual(fib.routes, want) || fib.changes != before+1 || f.Status().Stale != 0 {
		t.Fatalf("after End-of-RIB: %v (%d changes), want %v and one change", fib.routes, fib.changes-before, want)
	}
	// Without graceful restart a lost session takes every route.
	f.st.GR = false
	f.sessionLost()
	if len(fib.routes) != 0 || f.paths.len() != 0 {
		t.Fatalf("without graceful restart: %v", fib.routes)
	}
}

// A feed started beside routes the FIB already holds (a previous run's,
// adopted) holds them as stale: what the suite sends again keeps its
// route (or moves it at once to a new next hop), and its End-of-RIB takes
// the rest: a route withdrawn while the agent was down.
func TestRIBFeedHoldsAdopted(t *testing.T) {
	f, fib := newTestFeed()
	held := map[netip.Prefix][]netip.Addr{
		netip.MustParsePrefix("10.1.0.0/16"):     hops("192.0.2.10"),
		netip.MustParsePrefix("10.2.0.0/16"):     hops("192.0.2.10"),
		netip.MustParsePrefix("10.3.0.0/16"):     hops("192.0.2.10", "192.0.2.11"),
		netip.MustParsePrefix("2001:db8:3::/48"): hops("2001:db8::10"),
	}
	for p, h := range held {
		fib.routes[p] = h
	}
	f.holdStale(held)
	if st := f.Status(); fib.changes != 0 || st.Stale != 5 || st.Paths != 5 {
		t.Fatalf("holding: %d FIB changes, %+v; want none, 5 paths stale", fib.changes, st)
	}
	f.update(announce("192.0.2.10", 1, 100, []uint32{1}, "10.1.0.0/16"))
	f.update(announce("192.0.2.12", 1, 100, []uint32{1}, "10.2.0.0/16"))
	if fib.changes != 1 || !slices.Equal(fib.routes[netip.MustParsePrefix("10.2.0.0/16")], hops("192.0.2.12")) {
		t.Fatalf("sent again: %d changes, 10.2 via %v; want one, via 192.0.2.12 at once", fib.changes, fib.routes[netip.MustParsePrefix("10.2.0.0/16")])
	}
	f.update(&bgp.BGPUpdate{}) // IPv4's End-of-RIB
	want := map[netip.Prefix][]netip.Addr{
		netip.MustParsePrefix("10.1.0.0/16"):     hops("192.0.2.10"),
		netip.MustParsePrefix("10.2.0.0/16"):     hops("192.0.2.12"),
		netip.MustParsePrefix("2001:db8:3::/48"): hops("2001:db8::10"),
	}
	if !reflect.DeepEqual(fib.routes, want) {
		t.Fatalf("after IPv4's End-of-RIB: %v, want %v", fib.routes, want)
	}
	if st := f.Status(); st.Stale != 1 || st.Paths != 3 {
		t.Fatalf("after IPv4's End-of-RIB: %+v, want 3 paths, IPv6's 1 stale", st)
	}
	f.sweepStale(true) // IPv6's End-of-RIB, or the restart time over
	if _, ok := fib.routes[netip.MustParsePrefix("2001:db8:3::/48")]; ok || f.Status().Stale != 0 || !f.staleUntil.IsZero() {
		t.Fatalf("after IPv6's sweep: %v, %+v", fib.routes, f.Status())
	}
}

// TestRIBFeedTableArrived: the session's table has arrived once the
// End-of-RIB of every family the suite's OPEN agreed to has come (RFC
// 4760: IPv4 alone without multiprotocol capabilities), and says when
// the last of them came; a new session's table is to arrive again.
func TestRIBFeedTableArrived(t *testing.T) {
	f, _ := newTestFeed()
	open := func(caps ...bgp.ParameterCapabilityInterface) {
		t.Helper()
		caps = append(caps, bgp.NewCapFourOctetASNumber(65000))
		m, err := bgp.NewBGPOpenMessage(bgp.AS_TRANS, 90, netip.MustParseAddr("10.0.0.1"),
			[]bgp.OptionParameterInterface{bgp.NewOptionParameterCapability(caps)})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := f.opened(m.Body.(*bgp.BGPOpen)); err != nil {
			t.Fatal(err)
		}
		f.setEstablished()
	}
	open(bgp.NewCapMultiProtocol(bgp.RF_IPv4_UC), bgp.NewCapMultiProtocol(bgp.RF_IPv6_UC))
	f.update(announce("192.0.2.10", 1, 100, []uint32{1}, "10.1.0.0/16"))
	f.update(&bgp.BGPUpdate{}) // IPv4's End-of-RIB
	if got := f.TableArrived(); got != "" {
		t.Fatalf("table arrived %s with IPv6's End-of-RIB still to come", got)
	}
	before := time.Now()
	f.update(endOfRIB6())
	got, err := time.Parse(time.RFC3339Nano, f.TableArrived())
	if err != nil || got.Before(before) || got.After(time.Now()) {
		t.Fatalf("table arrived %q (%v), want between %v and now", f.TableArrived(), err, before)
	}
	if s := f.Status().TableArrived; s != f.TableArrived() {
		t.Fatalf("status says %q, the feed %q", s, f.TableArrived())
	}
	f.update(&bgp.BGPUpdate{}) // an End-of-RIB again changes nothing
	if again, _ := time.Parse(time.RFC3339Nano, f.TableArrived()); !again.Equal(got) {
		t.Fatalf("a second End-of-RIB moved the table's arrival from %v to %v", got, again)
	}
	// A session of IPv4 alone: its End-of-RIB is the table's.
	open()
	if got := f.TableArrived(); got != "" {
		t.Fatalf("a new session's table arrived %s before any End-of-RIB", got)
	}
	f.update(&bgp.BGPUpdate{})
	if f.TableArrived() == "" {
		t.Fatal("an IPv4-only session's End-of-RIB did not bring its table")
	}
}

// The suite's OPEN: its AS must be ours (iBGP), the hold time is the
// smaller, ADD-PATH and graceful restart are used only if it offers them.
func TestRIBFeedOpen(t *testing.T) {
	f, _ := newTestFeed()
	f.cfg = &RIBConfig{ASN: 4200000001}
	open := func(as uint32, hold uint16, caps ...bgp.ParameterCapabilityInterface) *bgp.BGPOpen {
		caps = append(caps, bgp.NewCapFourOctetASNumber(as))
		m, err := bgp.NewBGPOpenMessage(bgp.AS_TRANS, hold, netip.MustParseAddr("10.0.0.1"),
			[]bgp.OptionParameterInterface{bgp.NewOptionParameterCapability(caps)})
		if err != nil {
			t.Fatal(err)
		}
		return m.Body.(*bgp.BGPOpen)
	}
	if _, _, err := f.opened(open(65000, 90)); err == nil {
		t.Error("an eBGP OPEN accepted")
	}
	hold, opt, err := f.opened(open(4200000001, 90))
	if err != nil || hold.Seconds() != ribHoldTime || opt != nil || f.st.AddPath || f.st.GR {
		t.Errorf("plain OPEN: hold %v, %v, %v, %+v", hold, opt, err, f.st)
	}
	hold, opt, err = f.opened(open(4200000001, 3,
		bgp.NewCapAddPath([]*bgp.CapAddPathTuple{bgp.NewCapAddPathTuple(bgp.RF_IPv4_UC, bgp.BGP_ADD_PATH_SEND)}),
		bgp.NewCapGracefulRestart(false, false, 120, []*bgp.CapGracefulRestartTuple{bgp.NewCapGracefulRestartTuple(bgp.RF_IPv4_UC, true)})))
	if err != nil || hold.Seconds() != 3 || opt == nil || !f.st.AddPath || !f.st.GR {
		t.Errorf("OPEN with ADD-PATH and GR: hold %v, %v, %v, %+v", hold, opt, err, f.st)
	}
}

// Whatever bytes the session brings, decodeUpdate neither panics nor
// invents a path or a family, and the feed puts nothing but IPv4 routes
// via IPv4 next hops in the FIB.
func FuzzRIBMessage(f *testing.F) {
	for _, u := range []*bgp.BGPUpdate{
		announce("192.0.2.10", 1, 100, []uint32{1, 2}, "10.1.0.0/16", "10.2.0.0/24"),
		withdraw(1, "10.1.0.0/16"),
		{},
	} {
		for _, addPath := range []bool{false, true} {
			opt := &bgp.MarshallingOption{}
			if addPath {
				opt.AddPath = map[bgp.Family]bgp.BGPAddPathMode{bgp.RF_IPv4_UC: bgp.BGP_ADD_PATH_SEND}
			}
			b, err := bgp.NewBGPUpdateMessage(u.WithdrawnRoutes, u.PathAttributes, u.NLRI).Serialize(opt)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b, addPath)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, addPath bool) {
		feed, fib := newTestFeed()
		var opt *bgp.MarshallingOption
		if addPath {
			opt = &bgp.MarshallingOption{AddPath: map[bgp.Family]bgp.BGPAddPathMode{bgp.RF_IPv4_UC: bgp.BGP_ADD_PATH_RECEIVE}}
		}
		for r := bytes.NewReader(b); ; {
			m, err := readBGP(r, opt)
			if err != nil {
				break
			}
			if u, ok := m.Body.(*bgp.BGPUpdate); ok {
				checkDecoded(t, u, decodeUpdate(u, 65000))
				feed.update(u)
			}
		}
		for p, via := range fib.routes {
			if !p.Addr().Is4() || len(via) == 0 || len(via) > ECMPMax {
				t.Fatalf("route %v via %v", p, via)
			}
			for _, a := range via {
				if !a.Is4() {
					t.Fatalf("route %v via %v", p, via)
				}
			}
		}
		if s := feed.Status(); s.Paths < s.Prefixes || s.Stale != 0 {
			t.Fatalf("status %+v", s)
		}
	})
}

// checkDecoded: d, u decoded, has a family's End-of-RIB or none, and
// every path u carries, announced or withdrawn, no more.
func checkDecoded(t *testing.T, u *bgp.BGPUpdate, d ribUpdate) {
	t.Helper()
	announced, withdrawn := len(u.NLRI), len(u.WithdrawnRoutes)
	for _, a := range u.PathAttributes {
		switch v := a.(type) {
		case *bgp.PathAttributeMpReachNLRI:
			if (v.AFI == bgp.AFI_IP || v.AFI == bgp.AFI_IP6) && v.SAFI == bgp.SAFI_UNICAST {
				announced += len(v.Value)
			}
		case *bgp.PathAttributeMpUnreachNLRI:
			if (v.AFI == bgp.AFI_IP || v.AFI == bgp.AFI_IP6) && v.SAFI == bgp.SAFI_UNICAST {
				withdrawn += len(v.Value)
			}
		}
	}
	if d.eor < -1 || d.eor > 1 || len(d.announced) != announced || len(d.withdrawn) != withdrawn {
		t.Fatalf("decoded %d announced, %d withdrawn, End-of-RIB %d; the UPDATE carries %d and %d",
			len(d.announced), len(d.withdrawn), d.eor, announced, withdrawn)
	}
}

// announce6 is an UPDATE of IPv6 prefixes in MP_REACH_NLRI (RFC 4760)
// via nh, as the suite sends them over the IPv4 session.
func announce6(nh string, ids []uint32, prefixes ...string) *bgp.BGPUpdate {
	var nlri []bgp.PathNLRI
	for i, p := range prefixes {
		pfx, _ := bgp.NewIPAddrPrefix(netip.MustParsePrefix(p))
		nlri = append(nlri, bgp.PathNLRI{NLRI: pfx, ID: ids[i]})
	}
	mp, _ := bgp.NewPathAttributeMpReachNLRI(bgp.RF_IPv6_UC, nlri, netip.MustParseAddr(nh))
	attrs := []bgp.PathAttributeInterface{
		bgp.NewPathAttributeOrigin(0),
		bgp.NewPathAttributeAsPath([]bgp.AsPathParamInterface{bgp.NewAs4PathParam(bgp.BGP_ASPATH_ATTR_TYPE_SEQ, []uint32{65020})}),
		mp,
		bgp.NewPathAttributeLocalPref(100),
	}
	return &bgp.BGPUpdate{PathAttributes: attrs}
}

// endOfRIB6 is IPv6 unicast's End-of-RIB: an empty MP_UNREACH_NLRI.
func endOfRIB6() *bgp.BGPUpdate {
	mp, _ := bgp.NewPathAttributeMpUnreachNLRI(bgp.RF_IPv6_UC, nil)
	return &bgp.BGPUpdate{PathAttributes: []bgp.PathAttributeInterface{mp}}
}

// TestRIBFeedIPv6: IPv6 routes in MP_REACH_NLRI reach the FIB with their
// IPv6 next hops (ECMP too), are withdrawn by MP_UNREACH_NLRI, and after a
// session loss each family's End-of-RIB sweeps that family's stale
// paths only. A link-local next hop is taken only with its port's VLAN.
func TestRIBFeedIPv6(t *testing.T) {
	f, fib := newTestFeed()
	f.st.GR = true
	p := netip.MustParsePrefix("2a00:1450::/32")
	f.update(announce6("2001:db8:12::20", []uint32{1, 1}, "2a00:1450::/32", "2a01:4f8::/32"))
	f.update(announce6("2001:db8:12::21", []uint32{2}, "2a00:1450::/32"))
	f.update(announce("203.0.113.20", 1, 100, []uint32{1}, "100.64.0.0/10"))
	if got := fib.routes[p]; !reflect.DeepEqual(got, hops("2001:db8:12::20", "2001:db8:12::21")) {
		t.Fatalf("IPv6 ECMP next hops %v", got)
	}
	f.update(announce6("fe80::1", []uint32{3}, "2a02::/32"))
	if _, ok := fib.routes[netip.MustParsePrefix("2a02::/32")]; ok {
		t.Errorf("a route via a link-local next hop was taken")
	}
	// With its port's VLAN, (ASN, 4, VLAN), it is a neighbour on that
	// link (OSPFv3's next hops): the VLAN rides as the address's zone.
	f.update(tagged(announce6("fe80::1", []uint32{4}, "2a03::/32"), [3]uint32{65000, lcLinkVLAN, 11}))
	if got := fib.routes[netip.MustParsePrefix("2a03::/32")]; len(got) != 1 || got[0] != netip.MustParseAddr("fe80::1%11") {
		t.Errorf("a link-local next hop with its VLAN: %v, want fe80::1%%11", got)
	}
	gone, _ := bgp.NewPathAttributeMpUnreachNLRI(bgp.RF_IPv6_UC, []bgp.PathNLRI{{NLRI: mustNLRI("2a03::/32"), ID: 4}})
	f.update(&bgp.BGPUpdate{PathAttributes: []bgp.PathAttributeInterface{gone}})
	f.update(tagged(announce6("fe80::1", []uint32{5}, "2a04::/32"), [3]uint32{65001, lcLinkVLAN, 11})) // another AS's tag
	if _, ok := fib.routes[netip.MustParsePrefix("2a04::/32")]; ok {
		t.Errorf("a link-local next hop tagged by another AS was taken")
	}
	mp, _ := bgp.NewPathAttributeMpUnreachNLRI(bgp.RF_IPv6_UC, []bgp.PathNLRI{{NLRI: mustNLRI("2a00:1450::/32"), ID: 2}})
	f.update(&bgp.BGPUpdate{PathAttributes: []bgp.PathAttributeInterface{mp}})
	if got := fib.routes[p]; !reflect.DeepEqual(got, hops("2001:db8:12::20")) {
		t.Fatalf("after withdrawing path 2: %v", got)
	}

	// The session goes; the suite sends IPv4 again and its End-of-RIB
	// first: the IPv6 routes stay until IPv6's own.
	f.sessionLost()
	checkStaleCounts(t, f)
	f.update(announce("203.0.113.20", 1, 100, []uint32{1}, "100.64.0.0/10"))
	checkStaleCounts(t, f)
	f.update(&bgp.BGPUpdate{})
	if len(fib.routes) != 3 || !f.synced.Load() {
		t.Fatalf("IPv4's End-of-RIB swept IPv6: %v", fib.routes)
	}
	f.update(announce6("2001:db8:12::20", []uint32{1}, "2a00:1450::/32"))
	checkStaleCounts(t, f)
	f.update(endOfRIB6())
	if _, ok := fib.routes[netip.MustParsePrefix("2a01:4f8::/32")]; ok || len(fib.routes) != 2 || f.nStale != 0 || f.nPaths != 2 {
		t.Fatalf("after IPv6's End-of-RIB: %v, %d paths, %d stale", fib.routes, f.nPaths, f.nStale)
	}
}

// checkStaleCounts holds the feed's counts of stale paths (all, and
// IPv6's, by which an End-of-RIB skips a family with none) to its paths.
func checkStaleCounts(t *testing.T, f *ribFeed) {
	t.Helper()
	all, v6 := 0, 0
	for p, ps := range f.paths.all() {
		for _, r := range ps {
			if r.stale {
				all++
				if family(p) {
					v6++
				}
			}
		}
	}
	if f.nStale != all || f.stale6 != v6 {
		t.Fatalf("counted %d stale paths (%d IPv6), hold %d (%d)", f.nStale, f.stale6, all, v6)
	}
}

func mustNLRI(p string) bgp.NLRI {
	n, _ := bgp.NewIPAddrPrefix(netip.MustParsePrefix(p))
	return n
}

// A route the FIB refuses is counted, and each cause logged once: a full
// IPv6 pool refuses every route after the first, and a log line each
// would cost more than the routes (250,000 of them: three agents busy).
func TestRIBFeedRefused(t *testing.T) {
	f, _ := newTestFeed()
	var log bytes.Buffer
	f.log = slog.New(slog.NewTextHandler(&log, nil))
	f.add = func(p netip.Prefix, via []netip.Addr) error {
		if p.Addr().Is6() {
			return fmt.Errorf("route %s: %w", p, ErrFIB6Full)
		}
		return fmt.Errorf("route %s via %s: %w", p, via[0], ErrNoPort)
	}
	for i := range 1000 {
		f.apply(netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, byte(i >> 8), byte(i)}), 32), []netip.Addr{netip.MustParseAddr("2001:db8:10::20")})
	}
	f.apply(netip.MustParsePrefix("198.51.100.0/24"), []netip.Addr{netip.MustParseAddr("192.0.2.99")})
	f.apply(netip.MustParsePrefix("198.51.101.0/24"), []netip.Addr{netip.MustParseAddr("192.0.2.98")}) // the same cause, other words
	if got := f.Status().Refused; got != 1002 {
		t.Errorf("refused %d, want 1002", got)
	}
	if n := strings.Count(log.String(), "RIB route refused"); n != 2 {
		t.Errorf("%d log lines for two causes, want 2:\n%s", n, log.String())
	}
}

// At the End-of-RIB that ends a table's arrival (nothing stale left, the
// table big enough) the feed gives the arrival's memory back, once for
// each session's arrival however soon after the last (docs/reliability.md,
// finding 22): not at an End-of-RIB of a graceful restart's
// refresh that leaves the other family's paths stale, nor for a small
// table, nor at a second End-of-RIB of the same session. A refresh with
// new path ids leaves each prefix's paths in an array of their own size.
func TestRIBFeedReleasesMemory(t *testing.T) {
	f, _ := newTestFeed()
	released := make(chan struct{}, 10)
	f.release, f.releaseMin = func() { released <- struct{}{} }, 3
	count := func() int {
		time.Sleep(50 * time.Millisecond) // release runs in its own goroutine
		return len(released)
	}
	f.st.GR = true
	f.setEstablished()
	f.update(announce("192.0.2.10", 1, 100, []uint32{1, 1}, "10.1.0.0/16", "10.2.0.0/16"))
	f.update(&bgp.BGPUpdate{}) // End-of-RIB, 2 paths
	if n := count(); n != 0 {
		t.Fatalf("a table under releaseMin: %d releases", n)
	}
	f.update(announce("192.0.2.10", 1, 100, []uint32{1}, "10.3.0.0/16"))
	f.update(&bgp.BGPUpdate{}) // 3 paths
	if n := count(); n != 1 {
		t.Fatalf("a table's arrival ended: %d releases, want 1", n)
	}
	f.update(&bgp.BGPUpdate{})
	if n := count(); n != 1 {
		t.Fatalf("a second End-of-RIB in the same session: %d releases, want still 1", n)
	}
	// A takeover: the paths stale, sent again under new ids (via the same
	// next hop, taking the stale paths' places; then via another, beside
	// them until the sweep); IPv6's End-of-RIB comes before 10.3's path
	// and leaves it stale.
	for i, want := range []int{2, 3} {
		f.sessionLost()
		f.setEstablished()
		id, nh := uint32(5+i), []string{"192.0.2.10", "192.0.2.11"}[i]
		f.update(announce(nh, 1, 100, []uint32{id, id}, "10.1.0.0/16", "10.2.0.0/16"))
		f.update(endOfRIB6())
		if n := count(); n != want-1 {
			t.Fatalf("refresh %d: IPv6's End-of-RIB with IPv4's paths stale: %d releases, want still %d", i+1, n, want-1)
		}
		f.update(announce(nh, 1, 100, []uint32{id}, "10.3.0.0/16"))
		f.update(&bgp.BGPUpdate{})
		if n := count(); n != want {
			t.Fatalf("refresh %d ended: %d releases, want %d", i+1, n, want)
		}
		for p, ps := range f.paths.all() {
			if len(ps) != 1 || ps[0].id != id {
				t.Errorf("refresh %d: %v's paths %+v", i+1, p, ps)
			}
		}
		if n := f.paths.sharedSets(); n != 1 {
			t.Errorf("refresh %d: the prefixes' paths in %d sets, want 1 (the same path each)", i+1, n)
		}
	}
}

// Holding a big table, the feed gives memory back every releaseEvery,
// counted from the last release whatever made it: an End-of-RIB's release
// between two looks does not push the next one to twice the period (it
// did when the feed looked once a period: a restarted agent's memory went
// back 60-120 s apart, and the soak's minute floors caught a collection's
// level; runs 34 and 36).
func TestRIBFeedKeepsReleased(t *testing.T) {
	// The fake release collects nothing, so the live heap it reports is
	// the last collection's: collect first, or an earlier test's garbage
	// counts (a FIB's 64 MB tbl24, allocated and never touched: live,
	// and not resident).
	runtime.GC()
	f, _ := newTestFeed()
	const every = 600 * time.Millisecond
	var mu sync.Mutex
	var at []time.Time
	f.release, f.releaseMin, f.releaseEvery = func() { mu.Lock(); at = append(at, time.Now()); mu.Unlock() }, 1, every
	f.update(announce("192.0.2.10", 1, 100, []uint32{1}, "10.1.0.0/16"))
	f.update(&bgp.BGPUpdate{}) // synced, nothing stale
	f.mu.Lock()
	f.arrived, f.lastRelease = false, time.Now()
	f.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.keepReleased(ctx)
	time.Sleep(every + every/2) // between two looks of a once-a-period ticker
	f.mu.Lock()
	eor := time.Now()
	f.lastRelease = eor // an End-of-RIB's release
	f.mu.Unlock()
	time.Sleep(3 * every)
	mu.Lock()
	defer mu.Unlock()
	i := slices.IndexFunc(at, func(t time.Time) bool { return t.After(eor) })
	if i < 0 {
		t.Fatalf("no release in %v after an End-of-RIB's (releases %v)", 3*every, at)
	}
	// Looked at every sixth of a period: the next within a sixth after
	// the period, a loaded machine's delay allowed; a look once a period
	// made it every*3/2 here.
	if gap := at[i].Sub(eor); gap < every || gap > every+every/3 {
		t.Errorf("the release after an End-of-RIB's came %v after it, want within %v-%v", gap, every, every+every/3)
	}
	for j := i + 1; j < len(at); j++ {
		if gap := at[j].Sub(at[j-1]); gap > every+every/3 {
			t.Errorf("releases %v apart, want at most %v", gap, every+every/3)
		}
	}
	// Each release's memory is in the status, counted.
	r := f.Status().Release
	if r == nil || r.Releases != uint64(len(at)) || r.PID != os.Getpid() || r.ResidentKB <= 0 || r.HeapLiveKB >= r.ResidentKB { // the fake release collects nothing: TestMeasureRelease
		t.Errorf("status's release %+v after %d releases", r, len(at))
	}
}

// TestMeasureRelease: just after a release (the agent's own, tableHeld),
// the live heap and the resident memory hold what is kept, and neither
// what was let go.
func TestMeasureRelease(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	const size = 64 << 20
	kept := make([]byte, size)
	for i := range kept {
		kept[i] = byte(i)
	}
	tableHeld()
	with := measureRelease()
	runtime.KeepAlive(kept)
	kept = nil
	tableHeld()
	without := measureRelease()
	t.Logf("with 64 MiB kept %+v, without %+v", with, without)
	if with.HeapLiveKB < size/1024 || with.ResidentKB < with.HeapLiveKB {
		t.Errorf("64 MiB kept: %+v", with)
	}
	if with.HeapLiveKB-without.HeapLiveKB < size/1024*9/10 || with.ResidentKB-without.ResidentKB < size/1024*9/10 ||
		with.GoKB-without.GoKB < size/1024*9/10 {
		t.Errorf("64 MiB let go: from %+v to %+v", with, without)
	}
	if without.GoKB < without.HeapLiveKB+without.HeapUnusedKB || without.GoKB > without.ResidentKB {
		t.Errorf("the runtime's memory %d kB: not its heap's (%d live, %d unused) and within the resident %d kB", without.GoKB, without.HeapLiveKB, without.HeapUnusedKB, without.ResidentKB)
	}
}

// TestRIBFeedLinkRoutes: the VCP's link-local routes (LINK_ROUTES, FRR's
// OSPFv3 and RIPng) join the session's paths of their prefix, ranked by
// distance; a session path with the same id leaves them; the session's
// loss, with or without graceful restart, and an End-of-RIB keep them;
// the next set replaces them, and an empty one takes them out.
func TestRIBFeedLinkRoutes(t *testing.T) {
	f, fib := newTestFeed()
	f.st.GR = true
	both, only := netip.MustParsePrefix("2001:db8:f0::/48"), netip.MustParsePrefix("2001:db8:f1::/48")
	ll := func(p netip.Prefix, via string, vlan uint16, origin, distance uint8) dist.LinkRoute {
		return dist.LinkRoute{Prefix: p, Via: netip.MustParseAddr(via), VLAN: vlan, Origin: origin, Distance: distance}
	}
	// An eBGP path (distance 20) to one of them: it wins over OSPF's 110.
	f.update(tagged(announce6("2001:db8:10::10", []uint32{0}, both.String()), [3]uint32{65000, lcOrigin, 7}, [3]uint32{65000, lcDistance, 20}))
	f.setLinkRoutes([]dist.LinkRoute{ll(both, "fe80::2", 11, 3, 110), ll(only, "fe80::2", 11, 3, 110), ll(only, "fe80::3", 11, 3, 110)})
	if got := fib.routes[both]; !reflect.DeepEqual(got, hops("2001:db8:10::10")) {
		t.Fatalf("eBGP (20) and OSPF (110) to %v: %v, want the eBGP path", both, got)
	}
	if got := fib.routes[only]; !reflect.DeepEqual(got, hops("fe80::2%11", "fe80::3%11")) {
		t.Fatalf("two OSPF paths to %v: %v", only, got)
	}
	if o, _ := f.bestOrigin(only); originName(o.code) != "ospf" || o.preference() != 110 || !o.distance {
		t.Errorf("origin of a link route: %+v", o)
	}
	// The eBGP path goes: OSPF's is next. A session path of id 0 (the
	// link path's own id) comes and goes without touching it.
	f.update(withdraw6(0, both.String()))
	if got := fib.routes[both]; !reflect.DeepEqual(got, hops("fe80::2%11")) {
		t.Fatalf("after the eBGP path's withdrawal: %v", got)
	}
	// The session lost (graceful restart) and back with nothing: its
	// End-of-RIB sweeps its stale paths, not the link routes.
	f.update(tagged(announce6("2001:db8:10::10", []uint32{0}, "2001:db8:a1::/48"), [3]uint32{65000, lcDistance, 20}))
	f.sessionLost()
	f.update(endOfRIB6())
	if _, ok := fib.routes[netip.MustParsePrefix("2001:db8:a1::/48")]; ok {
		t.Error("a stale session path outlived its End-of-RIB")
	}
	if len(fib.routes) != 2 || f.nPaths != 3 || f.nStale != 0 {
		t.Fatalf("after a graceful restart: %v, %d paths, %d stale", fib.routes, f.nPaths, f.nStale)
	}
	f.st.GR = false
	f.sessionLost()
	if len(fib.routes) != 2 {
		t.Fatalf("after a session's loss without graceful restart: %v", fib.routes)
	}
	// The next set: one path less, one prefix less.
	f.setLinkRoutes([]dist.LinkRoute{ll(only, "fe80::3", 11, 8, 120)})
	if _, ok := fib.routes[both]; ok || !reflect.DeepEqual(fib.routes[only], hops("fe80::3%11")) {
		t.Fatalf("after the next set: %v", fib.routes)
	}
	changes := fib.changes
	f.setLinkRoutes([]dist.LinkRoute{ll(only, "fe80::3", 11, 8, 120)})
	if fib.changes != changes {
		t.Error("the same set again changed the FIB")
	}
	f.setLinkRoutes([]dist.LinkRoute{})
	if len(fib.routes) != 0 || f.paths.len() != 0 || f.nPaths != 0 {
		t.Fatalf("after an empty set: %v, %d paths", fib.routes, f.nPaths)
	}
}

// withdraw6 is an MP_UNREACH_NLRI of IPv6 prefixes with a path id.
func withdraw6(id uint32, prefixes ...string) *bgp.BGPUpdate {
	var w []bgp.PathNLRI
	for _, p := range prefixes {
		w = append(w, bgp.PathNLRI{NLRI: mustNLRI(p), ID: id})
	}
	mp, _ := bgp.NewPathAttributeMpUnreachNLRI(bgp.RF_IPv6_UC, w)
	return &bgp.BGPUpdate{PathAttributes: []bgp.PathAttributeInterface{mp}}
}
