package router

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// What an UPDATE from the VCP says (decodeUpdate), and which of a
// prefix's paths are best (bestPaths): pure functions of the message and
// the paths, the feed's state apart (rib.go).

// ribUpdate is one UPDATE decoded: the paths it withdraws and announces,
// the attributes the announced paths share, and the family whose
// End-of-RIB it is (0 IPv4, 1 IPv6; -1 for none).
type ribUpdate struct {
	withdrawn []bgp.PathNLRI
	announced []ribAnnounce
	attr      ribPath
	eor       int
}

// ribAnnounce is an announced path and its next hop.
type ribAnnounce struct {
	nlri bgp.PathNLRI
	nh   netip.Addr
}

// decodeUpdate decodes u for the router's AS asn: IPv4 in the UPDATE
// itself or in MP_REACH_NLRI, IPv6 in MP_REACH_NLRI, each with its own
// next hop. An empty UPDATE is IPv4's End-of-RIB, one holding only an
// empty MP_UNREACH_NLRI its family's.
func decodeUpdate(u *bgp.BGPUpdate, asn uint32) ribUpdate {
	d := ribUpdate{withdrawn: u.WithdrawnRoutes, attr: ribPath{localPref: 100}, eor: -1}
	var nh4 netip.Addr
	for _, a := range u.PathAttributes {
		switch v := a.(type) {
		case *bgp.PathAttributeNextHop:
			nh4 = v.Value
		case *bgp.PathAttributeLocalPref:
			d.attr.localPref = v.Value
		case *bgp.PathAttributeMultiExitDisc:
			d.attr.med = v.Value
		case *bgp.PathAttributeOrigin:
			d.attr.origin = v.Value
		case *bgp.PathAttributeAsPath:
			for _, seg := range v.Value {
				d.attr.asLen += uint16(seg.ASLen())
			}
		case *bgp.PathAttributeLargeCommunities:
			d.attr.from = originOf(v, asn)
			d.attr.linkVLAN = linkVLANOf(v, asn)
		case *bgp.PathAttributeMpReachNLRI:
			if (v.AFI == bgp.AFI_IP || v.AFI == bgp.AFI_IP6) && v.SAFI == bgp.SAFI_UNICAST {
				nh := v.Nexthop
				if !nh.IsGlobalUnicast() && v.LinkLocalNexthop.IsLinkLocalUnicast() {
					nh = v.LinkLocalNexthop // RFC 2545: a neighbour known by its link-local address only
				}
				for _, n := range v.Value {
					d.announced = append(d.announced, ribAnnounce{n, nh})
				}
			}
		case *bgp.PathAttributeMpUnreachNLRI:
			if (v.AFI == bgp.AFI_IP || v.AFI == bgp.AFI_IP6) && v.SAFI == bgp.SAFI_UNICAST {
				d.withdrawn = append(d.withdrawn, v.Value...)
				if len(u.PathAttributes) == 1 && len(v.Value) == 0 {
					d.eor = 0
					if v.AFI == bgp.AFI_IP6 {
						d.eor = 1
					}
				}
			}
		}
	}
	for _, n := range u.NLRI {
		d.announced = append(d.announced, ribAnnounce{n, nh4})
	}
	if len(d.withdrawn) == 0 && len(d.announced) == 0 && len(u.PathAttributes) == 0 {
		d.eor = 0
	}
	return d
}

// prefixOf is a unicast NLRI's prefix, of either family.
func prefixOf(n bgp.NLRI) (netip.Prefix, bool) {
	p, ok := n.(*bgp.IPAddrPrefix)
	if !ok || p.Prefix.Addr().Is4In6() {
		return netip.Prefix{}, false
	}
	return p.Prefix.Masked(), true
}

// bestPaths are the paths as good as the best: the suite's preference or
// distance first (origin.go), then BGP's higher LOCAL_PREF, shorter
// AS_PATH, lower ORIGIN, lower MED.
func bestPaths(ps []ribPath) []ribPath {
	better := func(a, b ribPath) int { // < 0: a is better
		return cmp.Or(cmp.Compare(a.from.rank, b.from.rank), cmp.Compare(b.localPref, a.localPref), cmp.Compare(a.asLen, b.asLen),
			cmp.Compare(a.origin, b.origin), cmp.Compare(a.med, b.med))
	}
	var best []ribPath
	for _, p := range ps {
		switch {
		case len(best) == 0:
			best = append(best, p)
		case better(p, best[0]) < 0:
			best = append(best[:0], p)
		case better(p, best[0]) == 0:
			best = append(best, p)
		}
	}
	return best
}

// bestHops are the distinct next hops of the best paths, sorted, at most
// ECMPMax: BGP multipath.
func bestHops(ps []ribPath) []netip.Addr {
	var hops []netip.Addr
	for _, p := range bestPaths(ps) {
		if !slices.Contains(hops, p.nh) {
			hops = append(hops, p.nh)
		}
	}
	slices.SortFunc(hops, func(a, b netip.Addr) int { return a.Compare(b) })
	return hops[:min(len(hops), ECMPMax)]
}
