package lb

import (
	"net/netip"
	"testing"
	"time"

	"github.com/msr-router/msr/router/routerapi"
)

// TestRouteOf: a back-end's answer read as a sample's route: the prefix
// length, the first next hop (the address itself when connected) and the
// port's VLAN; no route, a prefix of the other family or a next hop that
// does not parse give none.
func TestRouteOf(t *testing.T) {
	a := netip.MustParseAddr("203.0.113.10")
	for _, c := range []struct {
		rs   []routerapi.RouteInfo
		bits int
		nh   string
		vlan uint16
	}{
		{[]routerapi.RouteInfo{{Prefix: "203.0.113.0/24", Port: "vlan12", VLAN: 12}}, 24, "203.0.113.10", 12},
		{[]routerapi.RouteInfo{{Prefix: "203.0.0.0/16", Via: []string{"198.51.100.20", "198.51.100.21"}, VLAN: 11}}, 16, "198.51.100.20", 11},
		{[]routerapi.RouteInfo{{Prefix: "203.0.0.0/16", Via: []string{"nonsense"}, VLAN: 11}}, 16, "invalid IP", 11},
		{[]routerapi.RouteInfo{}, -1, "invalid IP", 0},
		{[]routerapi.RouteInfo{{Prefix: "2001:db8::/32"}}, -1, "invalid IP", 0},
		{[]routerapi.RouteInfo{{Prefix: "garbage"}}, -1, "invalid IP", 0},
	} {
		r := routeOf(a, c.rs)
		if r.bits != c.bits || r.nextHop.String() != c.nh || r.vlan != c.vlan {
			t.Errorf("%+v: %+v, want /%d via %s on %d", c.rs, r, c.bits, c.nh, c.vlan)
		}
	}
	// Asked once while waiting; past routeEntries not asked.
	rc := newRouteCache("", nil)
	now := time.Now()
	for range 3 {
		if _, ok := rc.get(a, now); ok {
			t.Fatal("a route known before any answer")
		}
	}
	if len(rc.want) != 1 {
		t.Errorf("%d asks queued for one address", len(rc.want))
	}
}
