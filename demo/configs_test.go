package demo

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/msr-router/msr/router/routerapi"
	"github.com/msr-router/msr/vcp"
)

// TestWriteConfigsFullTable: asked for more prefixes than the RouteViews
// snapshot holds, bgp1 announces that many, grown from it: distinct, none
// on the lab's own networks, each a network line of bgp1's config.
func TestWriteConfigsFullTable(t *testing.T) {
	dir := t.TempDir()
	plan, err := WriteConfigs(dir, Options{Prefixes: 600_000})
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

// TestWriteConfigsIPv6Table: asked for more IPv6 prefixes than the 2015
// snapshot holds, bgp1 announces that many, grown from it (distinct,
// /32 to /48, none in the lab's 2001:db8::/32), and every back-end's
// IPv6 pool is sized to hold them, with room; the default table leaves
// the pool at its default.
func TestWriteConfigsIPv6Table(t *testing.T) {
	dir := t.TempDir()
	plan, err := WriteConfigs(dir, Options{Prefixes: 3000, Prefixes6: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	doc := netip.MustParsePrefix("2001:db8::/32")
	seen := map[netip.Prefix]bool{}
	for _, p := range plan.Prefixes6 {
		if seen[p] || doc.Overlaps(p) || p.Bits() < 32 || p.Bits() > 48 {
			t.Fatalf("IPv6 prefix %s: repeated, on the lab's networks, or outside /32-/48", p)
		}
		seen[p] = true
	}
	if len(plan.Prefixes6) != 60_000 {
		t.Fatalf("%d IPv6 prefixes, want 60,000", len(plan.Prefixes6))
	}
	// 60,000 prefixes fit the default pool with room; 250,000 need more,
	// and the pool the config sets holds them.
	for _, n := range []int{60_000, 250_000} {
		if n != len(plan.Prefixes6) {
			if plan, err = WriteConfigs(dir, Options{Prefixes: 3000, Prefixes6: n}); err != nil {
				t.Fatal(err)
			}
		}
		conf, _ := os.ReadFile(filepath.Join(dir, "r1.yaml"))
		pool := routerapi.DefaultFIB6Lines
		if _, line, ok := strings.Cut(string(conf), "fib6_lines:"); ok {
			if _, err := fmt.Sscanf(line, "%d", &pool); err != nil {
				t.Fatalf("r1.yaml: bad fib6_lines:\n%s", conf)
			}
		}
		need := routerapi.FIB6LinesFor(plan.Prefixes6, 16)
		if pool < need*5/4 || (n == 60_000) != (pool == routerapi.DefaultFIB6Lines) {
			t.Errorf("%d prefixes: a pool of %d lines, the table needs %d", n, pool, need)
		}
	}
	if _, err := WriteConfigs(dir, Options{Prefixes: 3000}); err != nil {
		t.Fatal(err)
	}
	if conf, _ := os.ReadFile(filepath.Join(dir, "r1.yaml")); strings.Contains(string(conf), "fib6_lines") {
		t.Errorf("the default table sizes the pool:\n%s", conf)
	}
}

// TestWriteConfigsSFlow: with a collector, both VCPs' configs say sFlow
// to it from the router's one agent address (the LBs' files do not: the
// VCP gives them the router's export), and the configs load.
func TestWriteConfigsSFlow(t *testing.T) {
	dir := t.TempDir()
	if _, err := WriteConfigs(dir, Options{Prefixes: 3000, SFlow: netip.MustParseAddrPort("10.0.0.40:6343"), SFlowRate: 100}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"vcp1", "vcp2", "lb1", "lb2"} {
		b, _ := os.ReadFile(filepath.Join(dir, name+".yaml"))
		want := "sflow:\n  collectors: [\"10.0.0.40:6343\"]\n  agent_address: 192.0.2.1\n  sampling_rate: 100\n"
		if has := strings.Contains(string(b), want); has != strings.HasPrefix(name, "vcp") {
			t.Errorf("%s.yaml has the sflow section: %v:\n%s", name, has, b)
		}
	}
	c, err := vcp.LoadConfig(filepath.Join(dir, "vcp1.yaml"))
	if err != nil || c.SFlow == nil || c.SFlow.SamplingRate != 100 {
		t.Errorf("vcp1.yaml: %v", err)
	}
}
