package vcp

import (
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// With FRR as the suite, OSPFv3's and RIPng's routes cannot reach the
// back-ends by the RIB feed: their next hops are the neighbours'
// link-local addresses (RFC 5340 §4.8.1, RFC 2080 §2.1.1), and bgpd puts
// its own address in place of a link-local next hop on every route it
// sends (subgroup_announce_check, bgpd/bgp_route.c), which no route-map
// undoes. So the VCP reads them where zebra puts them, the kernel table
// of its own namespace (protocol ospf or rip, via fe80::… on a mirror
// x<VLAN>), and sends the back-ends the set in LINK_ROUTES
// (dist/linkroutes.go); each back-end ranks them with the feed's paths by
// distance, as zebra did (router/rib.go). With BIRD they ride in the feed
// itself (bird.go, filter to_backends).

// linkRouteSettle is how long after the suite's start the set is held
// back: a suite starting (a takeover, a restart) has no OSPFv3 adjacency
// yet (the DR's wait is a dead interval, 4 s), and an empty or partial
// set would take from the back-ends the routes they hold.
const linkRouteSettle = 10 * time.Second

// linkRouteResync is how often the table is read whatever the kernel
// said: a notification lost to a full socket buffer is made good.
const linkRouteResync = 30 * time.Second

// FRR's administrative distances, which MSR-BACKENDS also states for
// the routes it sends (frr.go), and the origin codes of router/origin.go.
const (
	ospfDistance = 110
	ripDistance  = 120
	originOSPF   = 3
	originRIP    = 8
	// rtprotRIPng is zebra's kernel protocol for RIPng's routes (FRR's
	// RTPROT_RIPNG, zebra/rt_netlink.h); OSPFv3's are RTPROT_OSPF, as
	// OSPFv2's.
	rtprotRIPng = 190
)

// linkRouteWatch follows the link-local routes of the namespace's main
// table on the mirrors it knows (name x<VLAN> → VLAN).
type linkRouteWatch struct {
	vlans map[string]uint16
	log   *slog.Logger
	start time.Time

	mu         sync.Mutex
	routes     []dist.LinkRoute
	generation uint32
	err        error // the last read's
}

// startLinkRouteWatch follows the table until stop closes. Call it in
// the suite's namespace.
func startLinkRouteWatch(stop <-chan struct{}, vlans []uint16, log *slog.Logger) *linkRouteWatch {
	w := &linkRouteWatch{vlans: map[string]uint16{}, log: log, start: time.Now(), generation: uint32(time.Now().Unix())}
	for _, v := range vlans {
		w.vlans["x"+strconv.Itoa(int(v))] = v
	}
	changed := make(chan struct{}, 1)
	go w.listen(stop, changed)
	go w.follow(stop, changed)
	return w
}

// Routes is the set and its generation; ok is false while it is held
// back (linkRouteSettle) or the table could not be read.
func (w *linkRouteWatch) Routes() (routes []dist.LinkRoute, generation uint32, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if time.Since(w.start) < linkRouteSettle || w.err != nil {
		return nil, 0, false
	}
	return w.routes, w.generation, true
}

// listen signals changed when the kernel reports an IPv6 route of OSPF,
// RIP or RIPng added or removed, or when its notifications overflowed.
func (w *linkRouteWatch) listen(stop <-chan struct{}, changed chan<- struct{}) {
	signal := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	for !stopped(stop) {
		s, err := nl.Subscribe(unix.NETLINK_ROUTE, unix.RTNLGRP_IPV6_ROUTE)
		if err != nil {
			w.log.Error("link-local routes: netlink", "err", err)
			time.Sleep(time.Second)
			continue
		}
		s.SetReceiveTimeout(&unix.Timeval{Sec: 1})
		for !stopped(stop) {
			msgs, _, err := s.Receive()
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				signal() // ENOBUFS: notifications lost, read it all
				if !errors.Is(err, unix.ENOBUFS) {
					break
				}
				continue
			}
			for _, m := range msgs {
				// rtmsg: family, dst_len, src_len, tos, table, protocol, …
				if (m.Header.Type == unix.RTM_NEWROUTE || m.Header.Type == unix.RTM_DELROUTE) && len(m.Data) >= unix.SizeofRtMsg &&
					(m.Data[5] == unix.RTPROT_OSPF || m.Data[5] == unix.RTPROT_RIP || m.Data[5] == rtprotRIPng) {
					signal()
				}
			}
		}
		s.Close()
	}
}

// follow reads the table at start, when told of a change (after 100 ms,
// so that an SPF's burst is read once) and every linkRouteResync.
func (w *linkRouteWatch) follow(stop <-chan struct{}, changed <-chan struct{}) {
	t := time.NewTicker(linkRouteResync)
	defer t.Stop()
	for {
		w.read()
		select {
		case <-stop:
			return
		case <-t.C:
		case <-changed:
			time.Sleep(100 * time.Millisecond)
			select {
			case <-changed:
			default:
			}
		}
	}
}

// read takes the table's link-local routes as the set, a new generation
// when they changed.
func (w *linkRouteWatch) read() {
	routes, err := readLinkRoutes(w.vlans)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if w.err == nil {
			w.log.Error("link-local routes: reading the table", "err", err)
		}
		w.err = err
		return
	}
	w.err = nil
	if slices.Equal(routes, w.routes) {
		return
	}
	w.routes = routes
	w.generation++
	w.log.Info("link-local routes", "routes", len(routes), "generation", w.generation)
	if len(routes) == dist.MaxLinkRoutes {
		w.log.Warn("link-local routes: the set is full, the rest are not sent", "max", dist.MaxLinkRoutes)
	}
}

// readLinkRoutes is the main table's IPv6 routes of OSPF and RIP(ng) via
// link-local next hops on the mirrors, one per next hop, sorted.
func readLinkRoutes(vlans map[string]uint16) ([]dist.LinkRoute, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, err
	}
	vlanOf := map[int]uint16{}
	for _, l := range links {
		if v, ok := vlans[l.Attrs().Name]; ok {
			vlanOf[l.Attrs().Index] = v
		}
	}
	table, err := netlink.RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, err
	}
	routes := []dist.LinkRoute{}
	for _, r := range table {
		origin, distance := uint8(originOSPF), uint8(ospfDistance)
		switch r.Protocol {
		case unix.RTPROT_OSPF:
		case unix.RTPROT_RIP, rtprotRIPng:
			origin, distance = originRIP, ripDistance
		default:
			continue
		}
		prefix := netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		if r.Dst != nil {
			addr, ok := netip.AddrFromSlice(r.Dst.IP)
			bits, _ := r.Dst.Mask.Size()
			if !ok {
				continue
			}
			prefix = netip.PrefixFrom(addr, bits).Masked()
		}
		hops := []*netlink.NexthopInfo{{LinkIndex: r.LinkIndex, Gw: r.Gw}}
		if len(r.MultiPath) > 0 {
			hops = r.MultiPath
		}
		for _, h := range hops {
			via, ok := netip.AddrFromSlice(h.Gw)
			vlan, mirror := vlanOf[h.LinkIndex]
			if !ok || !mirror || !via.Is6() || !via.IsLinkLocalUnicast() {
				continue
			}
			lr := dist.LinkRoute{Prefix: prefix, Via: via, VLAN: vlan, Origin: origin, Distance: distance}
			if lr.Check() == nil && !slices.Contains(routes, lr) {
				routes = append(routes, lr)
			}
		}
	}
	slices.SortFunc(routes, func(a, b dist.LinkRoute) int {
		if c := a.Prefix.Addr().Compare(b.Prefix.Addr()); c != 0 {
			return c
		}
		if c := a.Prefix.Bits() - b.Prefix.Bits(); c != 0 {
			return c
		}
		return a.Via.Compare(b.Via)
	})
	if len(routes) > dist.MaxLinkRoutes {
		routes = routes[:dist.MaxLinkRoutes]
	}
	return routes, nil
}
