package router

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/msrtest"
)

var goodRouter = msrtest.Testdata("r1.yaml")

func loadRouter(t *testing.T, text string) (*AgentConfig, error) {
	path := filepath.Join(t.TempDir(), "router.yaml")
	os.WriteFile(path, []byte(text), 0o644)
	return LoadConfig(path)
}

func TestLoadConfig(t *testing.T) {
	c, err := loadRouter(t, goodRouter)
	if err != nil {
		t.Fatal(err)
	}
	if c.ID == 0 || c.CapacityMbps != 500 || c.Ports[0].Name != "x" || c.Ports[0].MTU != 1500 || c.Ports[1].MTU != 9000 || len(c.Routes[0].Via) != 2 ||
		c.RIB.ASN != 65000 || c.Socket != "/run/msr/router-r1.sock" || c.HoldMultiplier != 3 || len(c.Warnings) != 0 {
		t.Errorf("%+v", c)
	}
	if c.Ports[1].Address6.String() != "2001:db8:11::2/64" || c.Ports[0].Address6.IsValid() || c.FIB6Lines != 4096 {
		t.Errorf("IPv6: ports %+v, fib6_lines %d", c.Ports, c.FIB6Lines)
	}
	if strict, err := loadRouter(t, strings.Replace(goodRouter, "mtu: 9000}", "mtu: 9000, urpf: strict}", 1)); err != nil || strict.Ports[1].URPF != dist.URPFStrict || c.Ports[1].URPF != dist.URPFOff {
		t.Errorf("urpf strict: %v, %+v (absent: %v)", err, strict, c.Ports[1].URPF)
	}
	if c.CapacityPPS != 0 {
		t.Errorf("capacity_pps %d by default, want 0 (no cap)", c.CapacityPPS)
	}
	if capped, err := loadRouter(t, goodRouter+"capacity_pps: 50000\n"); err != nil || capped.CapacityPPS != 50000 {
		t.Errorf("capacity_pps 50000: %v, %+v", err, capped)
	}
	if r := c.ACL[0]; !r.Deny || r.Proto != 17 || r.DportLo != 5000 || r.DportHi != 5009 || r.SportHi != 65535 {
		t.Errorf("ACL rule 0: %+v", r)
	}
	if r := c.ACL[2]; !r.Deny || r.Proto != 58 || r.Family() != 6 || c.ACL[0].Family() != 0 || c.ACL[1].Family() != 4 {
		t.Errorf("ACL rule 2 (IPv6): %+v; families %d %d", r, c.ACL[0].Family(), c.ACL[1].Family())
	}
	// The key the interface had before it was "interface" works for one
	// release, with a warning.
	old, err := loadRouter(t, strings.Replace(goodRouter, "interface: eth0", "internal: eth0", 1))
	if err != nil || old.Interface != "eth0" || len(old.Warnings) != 1 || !strings.Contains(old.Warnings[0], `router.yaml:3:1: key "internal"`) ||
		!strings.Contains(old.Warnings[0], `now "interface"`) {
		t.Errorf("the old key: %v, warnings %q", err, old.Warnings)
	}
	// Each edit of the good file must be refused at its line.
	cases := []struct{ edit, want, msg string }{
		{"vlan: 11", "vlan: 10", ":7:6: port y: VLAN 10 is already port x's"},
		{"vlan: 11", "vlan: 4095", ":7:6: port y needs a VLAN id 1-4094"},
		{"address: 198.51.100.2/24", "address: 2001:db8::2/64", ":7:6: port y needs a VLAN id 1-4094 and an IPv4 address"},
		{"mtu: 9000", "mtu: 9000, urpf: paranoid", `:7:6: port y: urpf "paranoid": off, loose or strict`},
		{"mtu: 9000", "mtu: 500", ":7:6: port y: MTU 500 below"},
		{"mtu: 9000", "mtu: 1000", ":7:6: port y: MTU 1000 below IPv6's 1280"},
		{`address6: "2001:db8:11::2/64"`, `address6: "fe80::2/64"`, ":7:6: port y: address6 fe80::2/64 is not a global IPv6 address"},
		{`address6: "2001:db8:11::2/64"`, `address6: "192.0.2.9/24"`, ":7:6: port y: address6 192.0.2.9/24 is not a global IPv6 address"},
		{`via: ["2001:db8:11::10"]`, `via: [192.0.2.10]`, ":10:5: route to 2001:db8:99::/48: gateway 192.0.2.10 is of the other address family"},
		{`via: ["2001:db8:11::10"]`, `via: ["2001:db8:12::10"]`, ":10:5: route to 2001:db8:99::/48: gateway 2001:db8:12::10 is on no port's subnet"},
		{"fib6_lines: 4096", "fib6_lines: 8", ":1:1: fib6_lines 8: 1024 to"},
		{"via: [192.0.2.10, 198.51.100.10]", "via: [203.0.113.9]", ":9:5: route to 203.0.113.0/24: gateway 203.0.113.9 is on no port's subnet"},
		{"via: [192.0.2.10, 198.51.100.10]", "via: []", ":9:5: route to 203.0.113.0/24: 1 to"},
		{"action: deny", "action: drop", ":12:5: ACL rule: action \"drop\""},
		{"proto: udp", "proto: 17x", ":12:5: ACL rule: proto \"17x\""},
		{"dport: 5000-5009", "dport: 5000-5009x", ":12:5: ACL rule: port \"5000-5009x\""},
		{"dport: 5000-5009", "dport: 5009-5000", ":12:5: ACL rule: port \"5009-5000\""},
		{"src: 10.0.0.0/8", "src: 10.0.0.0/8, dport: 80", ":13:5: ACL rule: ports need proto tcp or udp"},
		{`proto: icmpv6, dst: "2001:db8:11::/64"`, `proto: icmp, dst: "2001:db8:11::/64"`, ":14:5: ACL rule: proto icmp with IPv6 prefixes: icmpv6"},
		{`proto: icmpv6, dst: "2001:db8:11::/64"`, `src: 10.0.0.0/8, dst: "2001:db8:11::/64"`, ":14:5: ACL rule: src 10.0.0.0/8 and dst 2001:db8:11::/64 are of two address families"},
		{"asn: 65000", "asn: 0", ":1:1: rib: asn 0 is reserved"},
		{"capacity_mbps: 500", "capacity: 500", ":4:1: unknown key \"capacity\""},
		{"capacity_mbps: 500", "capacity_mbps: 500\ncapacity_pps: 100000001", ":1:1: capacity_pps 100000001: at most 100000000"},
		{"interface: eth0\n", "", ":1:1: missing required key \"interface\""},
		{"address: 192.0.2.2/24", "address: 192.0.2.300/24", ":6:26: ports.x.address"},
		{"capacity_mbps: 500", "capacity_mbps: 500\nslow_path:\n  ttl: {pps: 0, burst: 10}", ":6:8: slow_path ttl: a rate and a burst of at least 1"},
		{"capacity_mbps: 500", "capacity_mbps: 500\nslow_path:\n  ttl: {pps: 100}", ":6:8: slow_path ttl: a rate and a burst of at least 1"},
		{"capacity_mbps: 500", "capacity_mbps: 500\nslow_path:\n  tll: {pps: 100, burst: 10}", ":1:1: slow_path: no reason \"tll\""},
		{"capacity_mbps: 500", "capacity_mbps: 500\ninfrastructure: [10.0.0.5/24]", ":5:18: infrastructure[0]: 10.0.0.5/24 has host bits set"},
	}
	for i, c := range cases {
		if !strings.Contains(goodRouter, c.edit) {
			t.Fatalf("case %d: %q is not in the good file", i, c.edit)
		}
		_, err := loadRouter(t, strings.Replace(goodRouter, c.edit, c.want, 1))
		if err == nil || !strings.Contains(err.Error(), "router.yaml"+c.msg) {
			t.Errorf("case %d (%s → %s): %v, want %q", i, c.edit, c.want, err, c.msg)
		}
	}
}

// FuzzLoadConfig: no file makes the loader panic; refusals say where.
func FuzzLoadConfig(f *testing.F) {
	f.Add([]byte(goodRouter))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "f.yaml")
		os.WriteFile(path, data, 0o644)
		if _, err := LoadConfig(path); err != nil && !strings.Contains(err.Error(), "f.yaml:") {
			t.Fatalf("error without a position: %v", err)
		}
	})
}
