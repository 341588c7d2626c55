package acl

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/msr-router/msr/internal/config"
)

// TestRule: what each form of a rule becomes, and, said back by Text, how
// the console shows it.
func TestRule(t *testing.T) {
	p := netip.MustParsePrefix
	for _, c := range []struct {
		c    Config
		text string
	}{
		{Config{Action: "permit"}, "permit any any -> any"},
		{Config{Action: "deny", Proto: "tcp", Dst: p("192.0.2.0/24"), Dport: "23"}, "deny tcp any -> 192.0.2.0/24 dport 23"},
		{Config{Action: "deny", Proto: "udp", Src: p("10.0.0.0/8"), Sport: "1024-65535", Dport: "53"}, "deny udp 10.0.0.0/8 -> any sport 1024-65535 dport 53"},
		{Config{Action: "permit", Proto: "icmp", Src: p("198.51.100.0/24")}, "permit icmp 198.51.100.0/24 -> any"},
		{Config{Action: "deny", Proto: "icmpv6", Dst: p("2001:db8::/32")}, "deny icmpv6 any -> 2001:db8::/32"},
		{Config{Action: "deny", Proto: "47"}, "deny proto 47 any -> any"},
	} {
		r, err := c.c.Rule()
		if err != nil {
			t.Errorf("%+v: %v", c.c, err)
			continue
		}
		if got := Text(r); got != c.text {
			t.Errorf("%+v: %q, want %q", c.c, got, c.text)
		}
	}
}

// TestRuleRefused: a rule that cannot mean one thing is refused, saying
// why.
func TestRuleRefused(t *testing.T) {
	p := netip.MustParsePrefix
	for _, c := range []struct {
		c    Config
		want string
	}{
		{Config{Action: "allow"}, `action "allow"`},
		{Config{Action: "deny", Src: p("10.0.0.0/8"), Dst: p("2001:db8::/32")}, "two address families"},
		{Config{Action: "deny", Src: p("::ffff:10.0.0.0/104")}, "an IPv4 or IPv6 prefix"},
		{Config{Action: "deny", Proto: "icmp", Dst: p("2001:db8::/32")}, "icmpv6"},
		{Config{Action: "deny", Proto: "icmpv6", Dst: p("192.0.2.0/24")}, "proto icmpv6 with IPv4"},
		{Config{Action: "deny", Proto: "256"}, `proto "256"`},
		{Config{Action: "deny", Proto: "06"}, `proto "06"`},
		{Config{Action: "deny", Proto: "tcp", Dport: "80-20"}, `port "80-20"`},
		{Config{Action: "deny", Proto: "tcp", Dport: "65536"}, `port "65536"`},
		{Config{Action: "deny", Proto: "tcp", Sport: "1 "}, `port "1 "`},
		{Config{Action: "deny", Proto: "icmp", Dport: "7"}, "ports need proto tcp or udp"},
		{Config{Action: "deny", Dport: "7"}, "ports need proto tcp or udp"},
	} {
		if _, err := c.c.Rule(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error with %q", c.c, err, c.want)
		}
	}
}

// TestParse: rules keep their order; a bad one is refused at its line, and
// more than max at the list's.
func TestParse(t *testing.T) {
	list := config.Pos{File: "vcp.yaml", Line: 10, Column: 3}
	cs := []Config{
		{Action: "deny", Proto: "tcp", Dport: "23", Pos: config.Pos{File: "vcp.yaml", Line: 11, Column: 5}},
		{Action: "permit", Pos: config.Pos{File: "vcp.yaml", Line: 12, Column: 5}},
	}
	rs, err := Parse(cs, 2, list)
	if err != nil || len(rs) != 2 || !rs[0].Deny || rs[0].DportLo != 23 || rs[1].Deny {
		t.Fatalf("%+v, %v", rs, err)
	}
	if _, err := Parse(cs, 1, list); err == nil || !strings.Contains(err.Error(), "vcp.yaml:10:3: 2 ACL rules, at most 1") {
		t.Errorf("over max: %v", err)
	}
	cs[1].Action = "maybe"
	if _, err := Parse(cs, 2, list); err == nil || !strings.Contains(err.Error(), "vcp.yaml:12:5: ACL rule: action") {
		t.Errorf("a bad rule: %v", err)
	}
}
