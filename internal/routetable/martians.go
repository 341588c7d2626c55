package routetable

import "net/netip"

// Range is a prefix and the lengths of the prefixes inside it it stands
// for, Min to Max (BIRD's P{Min,Max}).
type Range struct {
	Prefix   netip.Prefix
	Min, Max int
}

// Matches says whether q is one of the prefixes r stands for.
func (r Range) Matches(q netip.Prefix) bool {
	return r.Prefix.Addr().Is4() == q.Addr().Is4() && q.Bits() >= r.Min && q.Bits() <= r.Max && r.Prefix.Contains(q.Addr())
}

// Martians4 and Martians6 are the prefixes no route from another network
// may be: the special-purpose blocks of RFC 6890 that are not global (RFC
// 7454 §6.1.1, §6.1.2; 6to4's 2002::/16 itself is, its more-specifics are
// not), and anything longer than /24 or /48 (§6.1.3).
var (
	Martians4 = []Range{orLonger("0.0.0.0/8"), orLonger("10.0.0.0/8"), orLonger("100.64.0.0/10"), orLonger("127.0.0.0/8"),
		orLonger("169.254.0.0/16"), orLonger("172.16.0.0/12"), orLonger("192.0.0.0/24"), orLonger("192.0.2.0/24"),
		orLonger("192.168.0.0/16"), orLonger("198.18.0.0/15"), orLonger("198.51.100.0/24"), orLonger("203.0.113.0/24"),
		orLonger("224.0.0.0/4"), orLonger("240.0.0.0/4"), {netip.MustParsePrefix("0.0.0.0/0"), 25, 32}}
	Martians6 = []Range{orLonger("::/8"), orLonger("100::/64"), orLonger("2001:2::/48"), orLonger("2001:10::/28"),
		orLonger("2001:db8::/32"), {netip.MustParsePrefix("2002::/16"), 17, 128}, orLonger("3ffe::/16"), orLonger("fc00::/7"),
		orLonger("fe80::/10"), orLonger("fec0::/10"), orLonger("ff00::/8"), {netip.MustParsePrefix("::/0"), 49, 128}}
)

func orLonger(s string) Range {
	p := netip.MustParsePrefix(s)
	return Range{p, p.Bits(), p.Addr().BitLen()}
}

// Martian says whether q is a martian of its family.
func Martian(q netip.Prefix) bool {
	ranges := Martians4
	if q.Addr().Is6() {
		ranges = Martians6
	}
	for _, r := range ranges {
		if r.Matches(q) {
			return true
		}
	}
	return false
}
