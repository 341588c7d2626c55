package dist

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
)

// LINK_ROUTES carries the suite's IPv6 routes whose next hops are
// link-local (OSPFv3's, RIPng's: RFC 5340 §4.8.1, RFC 2080 §2.1.1) to a
// back-end, when the suite's own feed cannot: FRR's bgpd puts its own
// address in place of a link-local next hop on every route it sends
// (docs/vcp.md). The VCP reads them from the kernel table the suite's
// zebra writes (vcp/linkroutes.go); the back-end ranks them with the
// feed's paths (router/rib.go). docs/dist.md gives the layout.

// Limits of LINK_ROUTES.
const (
	linkHdrLen   = 16
	linkRouteLen = 38
	// LinkRoutesPerPage is how many routes one frame holds.
	LinkRoutesPerPage = (MaxBodyLen - linkHdrLen) / linkRouteLen
	// MaxLinkRoutePages bounds a set: 255 pages, 9,435 routes.
	MaxLinkRoutePages = 255
	// MaxLinkRoutes is the most routes a set holds.
	MaxLinkRoutes = LinkRoutesPerPage * MaxLinkRoutePages
)

// LinkRoute is one path of a prefix via a neighbour's link-local address
// on an external port: Prefix (IPv6), Via (fe80::/10), the port's VLAN,
// where the suite learned it (Origin: the codes of router/origin.go, 3
// OSPF, 8 RIP) and the suite's administrative distance (lower wins).
type LinkRoute struct {
	Prefix   netip.Prefix `json:"prefix"`
	Via      netip.Addr   `json:"via"`
	VLAN     uint16       `json:"vlan"`
	Origin   uint8        `json:"origin"`
	Distance uint8        `json:"distance"`
}

// Check says whether r is a route LINK_ROUTES can carry.
func (r LinkRoute) Check() error {
	switch {
	case !r.Prefix.IsValid() || !r.Prefix.Addr().Is6() || r.Prefix.Addr().Is4In6() || r.Prefix.Addr().Zone() != "":
		return fmt.Errorf("prefix %v: an IPv6 prefix", r.Prefix)
	case r.Prefix != r.Prefix.Masked():
		return fmt.Errorf("prefix %v: host bits set", r.Prefix)
	case !r.Via.Is6() || !r.Via.IsLinkLocalUnicast() || r.Via.Zone() != "":
		return fmt.Errorf("%v via %v: a link-local address without zone", r.Prefix, r.Via)
	case r.VLAN == 0 || r.VLAN > 4094:
		return fmt.Errorf("%v via %v: VLAN %d", r.Prefix, r.Via, r.VLAN)
	}
	return nil
}

// LinkRoutes is one page of the set of link-local routes the active VCP
// sends one back-end (Target). The set is the whole of them (none: an
// empty page 0 of 1); Generation names it, and a back-end applies a set
// once it holds every page of one generation from one VCP.
type LinkRoutes struct {
	Target     uint64      `json:"target"`
	Generation uint32      `json:"generation"`
	Page       uint8       `json:"page"`
	Pages      uint8       `json:"pages"`
	Routes     []LinkRoute `json:"routes"`
}

func (*LinkRoutes) Type() MsgType { return TypeLinkRoutes }

// LinkRoutePages splits a set into its pages, in order.
func LinkRoutePages(target uint64, generation uint32, routes []LinkRoute) ([]*LinkRoutes, error) {
	if len(routes) > MaxLinkRoutes {
		return nil, fmt.Errorf("%d link-local routes, at most %d", len(routes), MaxLinkRoutes)
	}
	n := max(1, (len(routes)+LinkRoutesPerPage-1)/LinkRoutesPerPage)
	pages := make([]*LinkRoutes, n)
	for i := range pages {
		chunk := routes[min(i*LinkRoutesPerPage, len(routes)):min((i+1)*LinkRoutesPerPage, len(routes))]
		pages[i] = &LinkRoutes{Target: target, Generation: generation, Page: uint8(i), Pages: uint8(n), Routes: slices.Clone(chunk)}
	}
	return pages, nil
}

func (m *LinkRoutes) appendBody(b []byte) ([]byte, error) {
	switch {
	case len(m.Routes) > LinkRoutesPerPage:
		return nil, fmt.Errorf("%d routes in a page, at most %d", len(m.Routes), LinkRoutesPerPage)
	case m.Pages == 0 || m.Page >= m.Pages:
		return nil, fmt.Errorf("page %d of %d", m.Page, m.Pages)
	}
	b = binary.BigEndian.AppendUint64(b, m.Target)
	b = binary.BigEndian.AppendUint32(b, m.Generation)
	b = append(b, m.Page, m.Pages, uint8(len(m.Routes)), 0)
	for _, r := range m.Routes {
		if err := r.Check(); err != nil {
			return nil, err
		}
		a := r.Prefix.Addr().As16()
		b = append(b, a[:]...)
		b = append(b, uint8(r.Prefix.Bits()), r.Origin)
		b = binary.BigEndian.AppendUint16(b, r.VLAN)
		b = append(b, r.Distance, 0)
		v := r.Via.As16()
		b = append(b, v[:]...)
	}
	return b, nil
}

func (m *LinkRoutes) decodeBody(b []byte) error {
	if len(b) < linkHdrLen {
		return errShort
	}
	n := int(b[14])
	switch {
	case n > LinkRoutesPerPage || len(b) != linkHdrLen+n*linkRouteLen:
		return fmt.Errorf("%d link-local routes in %d bytes", n, len(b))
	case b[13] == 0 || b[12] >= b[13]:
		return fmt.Errorf("page %d of %d", b[12], b[13])
	case b[15] != 0:
		return errReserved
	}
	*m = LinkRoutes{Target: binary.BigEndian.Uint64(b[0:8]), Generation: binary.BigEndian.Uint32(b[8:12]), Page: b[12], Pages: b[13],
		Routes: make([]LinkRoute, 0, n)}
	for i := range n {
		e := b[linkHdrLen+i*linkRouteLen:][:linkRouteLen]
		if e[21] != 0 {
			return fmt.Errorf("route %d: %w", i, errReserved)
		}
		if e[16] > 128 {
			return fmt.Errorf("route %d: prefix length %d", i, e[16])
		}
		r := LinkRoute{Prefix: netip.PrefixFrom(netip.AddrFrom16([16]byte(e[0:16])), int(e[16])), Origin: e[17],
			VLAN: binary.BigEndian.Uint16(e[18:20]), Distance: e[20], Via: netip.AddrFrom16([16]byte(e[22:38]))}
		if err := r.Check(); err != nil {
			return fmt.Errorf("route %d: %w", i, err)
		}
		m.Routes = append(m.Routes, r)
	}
	return nil
}

// LinkRouteSet gathers the pages of LINK_ROUTES into sets: a set is whole
// when it holds every page of one generation from one sender. A page of
// another sender or generation starts a new set.
type LinkRouteSet struct {
	sender     uint64
	generation uint32
	pages      [][]LinkRoute
	have       int
}

// Add takes one page; it returns the whole set when this page completes
// it (an empty, non-nil slice: a set of none), else nil.
func (s *LinkRouteSet) Add(sender uint64, m *LinkRoutes) []LinkRoute {
	if s.pages == nil || sender != s.sender || m.Generation != s.generation || len(s.pages) != int(m.Pages) {
		*s = LinkRouteSet{sender: sender, generation: m.Generation, pages: make([][]LinkRoute, m.Pages)}
	}
	if s.pages[m.Page] == nil {
		s.have++
	}
	s.pages[m.Page] = append(make([]LinkRoute, 0, len(m.Routes)), m.Routes...)
	if s.have < len(s.pages) {
		return nil
	}
	all := make([]LinkRoute, 0, s.have*LinkRoutesPerPage)
	for _, p := range s.pages {
		all = append(all, p...)
	}
	*s = LinkRouteSet{}
	return all
}
