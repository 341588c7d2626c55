// Package acl reads the router's ACL as its config files write it: rules
// in order, the first a packet matches deciding. The VCP's router-wide
// `acl:` and a back-end's own (without a VCP) read alike, into the rules
// DIST carries (dist.ACLRule).
package acl

import (
	"fmt"
	"net/netip"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/config"
)

// Config is one rule as a file writes it.
type Config struct {
	Action string       `yaml:"action" msr:"required"` // permit or deny
	Src    netip.Prefix `yaml:"src"`
	Dst    netip.Prefix `yaml:"dst"`
	Proto  string       `yaml:"proto"` // tcp, udp, icmp, icmpv6, or a number
	Sport  string       `yaml:"sport"` // N or N-M
	Dport  string       `yaml:"dport"`
	Pos    config.Pos   `yaml:"-"`
}

// Parse checks rules, at most max of them, each refused at its line.
func Parse(cs []Config, max int, pos config.Pos) ([]dist.ACLRule, error) {
	if len(cs) > max {
		return nil, pos.Errorf("%d ACL rules, at most %d", len(cs), max)
	}
	var out []dist.ACLRule
	for _, c := range cs {
		r, err := c.Rule()
		if err != nil {
			return nil, c.Pos.Errorf("ACL rule: %v", err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Rule is the rule c says.
func (c Config) Rule() (dist.ACLRule, error) {
	r := dist.ACLRule{Src: c.Src, Dst: c.Dst, SportHi: 65535, DportHi: 65535}
	for _, p := range []netip.Prefix{c.Src, c.Dst} {
		if p.IsValid() && (p.Addr().Is4In6() || p.Addr().Zone() != "") {
			return r, fmt.Errorf("%s: an IPv4 or IPv6 prefix", p)
		}
	}
	if c.Src.IsValid() && c.Dst.IsValid() && c.Src.Addr().Is6() != c.Dst.Addr().Is6() {
		return r, fmt.Errorf("src %s and dst %s are of two address families", c.Src, c.Dst)
	}
	v6 := c.Src.Addr().Is6() || c.Dst.Addr().Is6()
	switch c.Action {
	case "deny":
		r.Deny = true
	case "permit":
	default:
		return r, fmt.Errorf("action %q: permit or deny", c.Action)
	}
	switch c.Proto {
	case "", "any":
	case "tcp":
		r.Proto = 6
	case "udp":
		r.Proto = 17
	case "icmp":
		if v6 {
			return r, fmt.Errorf("proto icmp with IPv6 prefixes: icmpv6")
		}
		r.Proto = 1
	case "icmpv6":
		if c.Src.Addr().Is4() || c.Dst.Addr().Is4() {
			return r, fmt.Errorf("proto icmpv6 with IPv4 prefixes: icmp")
		}
		r.Proto = 58
	default:
		var n int
		if _, err := fmt.Sscanf(c.Proto, "%d", &n); err != nil || n < 1 || n > 255 || fmt.Sprint(n) != c.Proto {
			return r, fmt.Errorf("proto %q: tcp, udp, icmp, icmpv6 or 1-255", c.Proto)
		}
		r.Proto = uint8(n)
	}
	var err error
	if r.SportLo, r.SportHi, err = portRange(c.Sport); err != nil {
		return r, err
	}
	if r.DportLo, r.DportHi, err = portRange(c.Dport); err != nil {
		return r, err
	}
	if (c.Sport != "" || c.Dport != "") && r.Proto != 6 && r.Proto != 17 {
		return r, fmt.Errorf("ports need proto tcp or udp")
	}
	return r, nil
}

func portRange(s string) (uint16, uint16, error) {
	if s == "" {
		return 0, 65535, nil
	}
	var lo, hi int
	if n, _ := fmt.Sscanf(s, "%d-%d", &lo, &hi); n == 2 && lo <= hi && hi <= 65535 && lo >= 0 && fmt.Sprintf("%d-%d", lo, hi) == s {
		return uint16(lo), uint16(hi), nil
	}
	if n, _ := fmt.Sscanf(s, "%d", &lo); n == 1 && lo >= 0 && lo <= 65535 && fmt.Sprint(lo) == s {
		return uint16(lo), uint16(lo), nil
	}
	return 0, 0, fmt.Errorf("port %q: N or N-M, 0-65535", s)
}

// Text is a rule as the console shows it: "deny tcp any -> 192.0.2.0/24
// dport 23".
func Text(r dist.ACLRule) string {
	s := "permit"
	if r.Deny {
		s = "deny"
	}
	switch r.Proto {
	case 0:
		s += " any"
	case 1:
		s += " icmp"
	case 6:
		s += " tcp"
	case 17:
		s += " udp"
	case 58:
		s += " icmpv6"
	default:
		s += fmt.Sprintf(" proto %d", r.Proto)
	}
	addr := func(p netip.Prefix) string {
		if !p.IsValid() || p.Bits() == 0 {
			return "any"
		}
		return p.String()
	}
	s += " " + addr(r.Src) + " -> " + addr(r.Dst)
	ports := func(name string, lo, hi uint16) string {
		switch {
		case lo == 0 && hi == 65535:
			return ""
		case lo == hi:
			return fmt.Sprintf(" %s %d", name, lo)
		}
		return fmt.Sprintf(" %s %d-%d", name, lo, hi)
	}
	return s + ports("sport", r.SportLo, r.SportHi) + ports("dport", r.DportLo, r.DportHi)
}
