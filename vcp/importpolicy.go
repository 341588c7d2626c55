package vcp

import (
	"fmt"
	"strings"

	"github.com/msr-router/msr/internal/routetable"
)

// The import policy of an eBGP session whose peer has no import_prefixes
// (RFC 7454 §6.1, "BGP Operations and Security"): no martian
// (routetable.Martians4 and Martians6), none of the router's own networks (its external ports'), no
// default route unless the peer's allow_default. A peer's own
// import_prefixes win: with them, the list alone decides. An iBGP peer
// (the router's own AS) takes everything, as before.

// martians4 and martians6 are routetable's martians as prefix patterns.
var martians4, martians6 = patternsOf(routetable.Martians4), patternsOf(routetable.Martians6)

func patternsOf(rs []routetable.Range) []PrefixPattern {
	out := make([]PrefixPattern, len(rs))
	for i, r := range rs {
		out[i] = PrefixPattern{Prefix: r.Prefix, Min: r.Min, Max: r.Max}
	}
	return out
}

// DefaultPolicy says whether peer b takes the default import policy: an
// eBGP peer without import_prefixes.
func (c *RoutingConfig) DefaultPolicy(b BGPPeer) bool {
	return b.ImportPrefixes == nil && b.ASN != c.ASN
}

// own are the router's own networks of a family, and every prefix inside
// them: no peer may announce them to the router.
func (c *RoutingConfig) own(v6 bool) []PrefixPattern {
	var out []PrefixPattern
	for _, p := range c.Ports {
		a := p.Address
		if v6 {
			a = p.Address6
		}
		if a.IsValid() {
			m := a.Masked()
			out = append(out, PrefixPattern{Prefix: m, Min: m.Bits(), Max: m.Addr().BitLen()})
		}
	}
	return out
}

// BIRDPolicySets defines the prefix sets the default policy's import
// clauses name.
func (c *RoutingConfig) BIRDPolicySets() string {
	var s strings.Builder
	fmt.Fprintf(&s, "define MSR_MARTIANS4 = %s;\ndefine MSR_MARTIANS6 = %s;\n", birdPrefixSet(martians4), birdPrefixSet(martians6))
	if own := c.own(false); own != nil {
		fmt.Fprintf(&s, "define MSR_OWN4 = %s;\n", birdPrefixSet(own))
	}
	if own := c.own(true); own != nil {
		fmt.Fprintf(&s, "define MSR_OWN6 = %s;\n", birdPrefixSet(own))
	}
	return s.String()
}

// birdPolicyImport is the import clause of the default policy for peer b
// in the family of v6.
func (c *RoutingConfig) birdPolicyImport(b BGPPeer, v6 bool) string {
	fam := "4"
	if v6 {
		fam = "6"
	}
	conds := []string{"!(net ~ MSR_MARTIANS" + fam + ")"}
	if c.own(v6) != nil {
		conds = append(conds, "!(net ~ MSR_OWN"+fam+")")
	}
	if !b.AllowDefault {
		conds = append(conds, "net.len > 0")
	}
	return "where " + strings.Join(conds, " && ")
}

// FRRImportPolicy is the default policy in bgpd's terms: prefix lists and
// the route-maps MSR-IN and MSR-IN-DEFAULT (allow_default), which match
// routes of either family.
func (c *RoutingConfig) FRRImportPolicy() string {
	var s strings.Builder
	list := func(name, ip string, ps []PrefixPattern) {
		for k, p := range ps {
			fmt.Fprintf(&s, "%s prefix-list %s seq %d permit %s\n", ip, name, 5*(k+1), p.FRR())
		}
	}
	list("MSR-MARTIANS", "ip", martians4)
	list("MSR-MARTIANS6", "ipv6", martians6)
	list("MSR-OWN", "ip", c.own(false))
	list("MSR-OWN6", "ipv6", c.own(true))
	s.WriteString("ip prefix-list MSR-DEFAULT seq 5 permit 0.0.0.0/0\nipv6 prefix-list MSR-DEFAULT6 seq 5 permit ::/0\n")
	for _, m := range []struct {
		name    string
		refuse0 bool
	}{{"MSR-IN", true}, {"MSR-IN-DEFAULT", false}} {
		deny := func(seq int, ip, list string) {
			fmt.Fprintf(&s, "route-map %s deny %d\n match %s address prefix-list %s\n", m.name, seq, ip, list)
		}
		deny(10, "ip", "MSR-MARTIANS")
		deny(11, "ipv6", "MSR-MARTIANS6")
		if c.own(false) != nil {
			deny(20, "ip", "MSR-OWN")
		}
		if c.own(true) != nil {
			deny(21, "ipv6", "MSR-OWN6")
		}
		if m.refuse0 {
			deny(30, "ip", "MSR-DEFAULT")
			deny(31, "ipv6", "MSR-DEFAULT6")
		}
		fmt.Fprintf(&s, "route-map %s permit 100\n", m.name)
	}
	return s.String()
}

// frrPolicyMap is the route-map peer b's routes come in through: MSR-IN
// or MSR-IN-DEFAULT, or "" when its own import_prefixes decide.
func (c *RoutingConfig) frrPolicyMap(b BGPPeer) string {
	switch {
	case !c.DefaultPolicy(b):
		return ""
	case b.AllowDefault:
		return "MSR-IN-DEFAULT"
	}
	return "MSR-IN"
}
