package lb

import (
	"context"
	"crypto/tls"
	"errors"
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/msr-router/msr/internal/api"
	"github.com/msr-router/msr/lb/lbapi"
	"github.com/msr-router/msr/router/routerapi"
)

// The routes of sampled packets, for sFlow's extended router data and
// IPFIX's egress port and next hop: the back-ends route, not the LB, so
// the agent asks a live back-end's API for the route of each sampled
// destination and source (routerapi's Lookup: the prefix, the first next
// hop and the external port it leaves by) and keeps the answer a while.
// A sample whose route is not known yet goes without, and has it asked.

const (
	routeTTL     = 30 * time.Second
	routeEntries = 16384 // past it, new addresses are not asked
	routeAsks    = 50    // lookups a second at most
	routeWait    = time.Second
)

var errNoBackend = errors.New("no live back-end with an API to ask")

// route is what a back-end said of an address: its route's prefix length
// (-1: no route), the next hop (the address itself on a connected
// subnet) and the VLAN of the port it leaves by (0: unknown).
type route struct {
	bits    int
	nextHop netip.Addr
	vlan    uint16
	at      time.Time
}

// routeCache holds the answers and the addresses waiting for one.
type routeCache struct {
	token string
	tls   *tls.Config

	mu      sync.Mutex
	entries map[netip.Addr]route
	waiting map[netip.Addr]bool
	want    chan netip.Addr
	status  lbapi.RouteLookups
}

func newRouteCache(token string, tc *tls.Config) *routeCache {
	return &routeCache{token: token, tls: tc, entries: map[netip.Addr]route{}, waiting: map[netip.Addr]bool{}, want: make(chan netip.Addr, 256)}
}

// get is addr's route if known and fresh; else it has it asked.
func (c *routeCache) get(addr netip.Addr, now time.Time) (route, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.entries[addr]
	if ok && now.Sub(r.at) < routeTTL {
		return r, true
	}
	if !c.waiting[addr] && len(c.entries)+len(c.waiting) < routeEntries {
		select {
		case c.want <- addr:
			c.waiting[addr] = true
		default:
		}
	}
	return r, ok // a stale answer is better than none while asked again
}

// run asks the back-ends for the addresses wanted, at most routeAsks a
// second, and forgets stale answers, until ctx ends.
func (c *routeCache) run(ctx context.Context, backends func() []netip.AddrPort) {
	pace := time.NewTicker(time.Second / routeAsks)
	defer pace.Stop()
	sweep := time.NewTicker(routeTTL)
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-sweep.C:
			c.mu.Lock()
			for a, r := range c.entries {
				if now.Sub(r.at) >= 2*routeTTL {
					delete(c.entries, a)
				}
			}
			c.mu.Unlock()
			continue
		case addr := <-c.want:
			r, err := c.lookup(addr, backends())
			c.mu.Lock()
			delete(c.waiting, addr)
			c.status.Lookups++
			if err != nil {
				c.status.Failures++
			} else {
				c.entries[addr] = r
			}
			c.status.Cached = len(c.entries)
			c.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-pace.C:
		}
	}
}

// lookup asks the back-ends in turn until one answers.
func (c *routeCache) lookup(addr netip.Addr, backends []netip.AddrPort) (route, error) {
	err := error(errNoBackend)
	for _, b := range backends {
		var rs []routerapi.RouteInfo
		rs, err = routerapi.New(api.NewTCPClient(b.String(), c.token, "back-end "+b.String(), c.tls).WithTimeout(routeWait)).Lookup(addr)
		if err != nil {
			continue
		}
		return routeOf(addr, rs), nil
	}
	return route{}, err
}

// routeOf reads a back-end's answer: its first route, or none.
func routeOf(addr netip.Addr, rs []routerapi.RouteInfo) route {
	r := route{bits: -1, at: time.Now()}
	if len(rs) == 0 {
		return r
	}
	p, err := netip.ParsePrefix(rs[0].Prefix)
	if err != nil || p.Addr().Is4() != addr.Is4() {
		return r
	}
	r.bits, r.vlan, r.nextHop = p.Bits(), rs[0].VLAN, addr
	if len(rs[0].Via) > 0 {
		if nh, err := netip.ParseAddr(rs[0].Via[0]); err == nil && nh.Is4() == addr.Is4() {
			r.nextHop = nh
		} else {
			r.nextHop = netip.Addr{}
		}
	}
	return r
}

// lookups are the cache's counters.
func (c *routeCache) lookups() lbapi.RouteLookups {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status
}

// backendAPIs are the live back-ends' APIs, by MAC.
func (a *Agent) backendAPIs() []netip.AddrPort {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	var macs []string
	for mac, b := range a.backends {
		if b.api.IsValid() && a.alive(b.mac, now) {
			macs = append(macs, mac)
		}
	}
	sort.Strings(macs)
	out := make([]netip.AddrPort, len(macs))
	for i, mac := range macs {
		out[i] = a.backends[mac].api
	}
	return out
}
