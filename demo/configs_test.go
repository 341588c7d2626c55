package demo

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteConfigsFullTable: asked for more prefixes than the RouteViews
// snapshot holds, bgp1 announces that many, grown from it: distinct, none
// on the lab's own networks, each a network line of bgp1's config.
func TestWriteConfigsFullTable(t *testing.T) {
	dir := t.TempDir()
	plan, err := WriteConfigs(dir, 600_000)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Prefixes) != 600_000 {
		t.Fatalf("%d prefixes, want 600,000", len(plan.Prefixes))
	}
	seen := map[netip.Prefix]bool{}
	for _, p := range plan.Prefixes {
		if seen[p] || labNet(p) || p.Bits() < 8 || p.Bits() > 24 {
			t.Fatalf("prefix %s: repeated, on the lab's networks, or outside /8-/24", p)
		}
		seen[p] = true
	}
	conf, err := os.ReadFile(filepath.Join(dir, "bgp1-bgpd.conf"))
	if err != nil {
		t.Fatal(err)
	}
	v4, v6, _ := strings.Cut(string(conf), "address-family ipv6 unicast")
	if n := strings.Count(v4, "\n  network "); n != 600_000 {
		t.Errorf("bgp1-bgpd.conf has %d IPv4 network lines, want 600,000", n)
	}
	if n := strings.Count(v6, "\n  network "); n != Prefixes6 {
		t.Errorf("bgp1-bgpd.conf has %d IPv6 network lines, want %d", n, Prefixes6)
	}
}
