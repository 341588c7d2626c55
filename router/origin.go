package router

import "github.com/osrg/gobgp/v4/pkg/packet/bgp"

// A route's origin survives the RIB feed's trip as BGP large communities
// (RFC 8092) that the VCP's suite adds to what it sends the back-ends
// (vcp/bird.go, vcp/frr.go), with the router's ASN as global
// administrator:
//
//	(ASN, 1, origin)      where the suite learned it: originNames' codes
//	(ASN, 2, preference)  BIRD's preference (higher wins)
//	(ASN, 3, distance)    FRR's administrative distance (lower wins)
//
// The back-end shows them (`msr ctl route ADDR`) and ranks a prefix's
// paths by them first, as the suite chose: with OSPF and BGP paths to one
// prefix, the suite's winner by preference or distance, not BGP's
// tie-breaks between a redistributed route and a learned one.
const (
	lcOrigin     = 1
	lcPreference = 2
	lcDistance   = 3
	// lcLinkVLAN goes with a link-local next hop (OSPFv3's): the VLAN of
	// the port the neighbour is on, which the address alone does not say.
	lcLinkVLAN = 4
)

// linkVLANOf is the (ASN, 4, VLAN) community's VLAN, 0 if none.
func linkVLANOf(a *bgp.PathAttributeLargeCommunities, asn uint32) uint16 {
	for _, c := range a.Values {
		if c.ASN == asn && c.LocalData1 == lcLinkVLAN && c.LocalData2 > 0 && c.LocalData2 < 4095 {
			return uint16(c.LocalData2)
		}
	}
	return 0
}

// originNames are the origins by code; 0 is unknown (no community: a
// suite that does not tag).
var originNames = [...]string{"", "connected", "static", "ospf", "ospf-ia", "ospf-e1", "ospf-e2", "bgp", "rip"}

// originName names an origin code ("" unknown).
func originName(code uint8) string {
	if int(code) < len(originNames) {
		return originNames[code]
	}
	return ""
}

// routeOrigin is what the communities said of one path.
type routeOrigin struct {
	code     uint8
	distance bool // rank is FRR's distance, not BIRD's preference
	// rank orders the paths, lower first: 0xffff - preference (BIRD), or
	// the distance (FRR); 0 when untagged.
	rank uint16
}

// preference is the suite's own figure: BIRD's preference or FRR's
// distance (distance says which); 0 untagged.
func (o routeOrigin) preference() uint16 {
	if o.distance || o.rank == 0 {
		return o.rank
	}
	return 0xffff - o.rank
}

// originOf reads a path's origin from its large communities of asn; the
// others are ignored.
func originOf(a *bgp.PathAttributeLargeCommunities, asn uint32) routeOrigin {
	var o routeOrigin
	for _, c := range a.Values {
		if c.ASN != asn {
			continue
		}
		switch c.LocalData1 {
		case lcOrigin:
			o.code = uint8(min(c.LocalData2, 255))
		case lcPreference:
			o.rank, o.distance = 0xffff-uint16(min(c.LocalData2, 0xffff)), false
		case lcDistance:
			o.rank, o.distance = uint16(min(c.LocalData2, 0xffff)), true
		}
	}
	return o
}
