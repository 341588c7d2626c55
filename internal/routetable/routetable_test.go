package routetable

import (
	"net/netip"
	"strings"
	"testing"
)

// The IPv6 snapshot: 27,693 distinct IPv6 prefixes, none of the IPv4 table
// the same file holds; grown to a full table of today, 250,000 distinct
// prefixes with the snapshot's mix (mean length within half a bit, /48 the
// most common), the new ones in global unicast space, clustered as the
// snapshot's are (its /48s share their /32 with another prefix: 96% of
// them), where the worst case's (v6u) are spread.
func TestIPv6Table(t *testing.T) {
	base, err := Load6(PyASN6)
	if err != nil {
		t.Fatal(err)
	}
	if len(base) != 27_693 {
		t.Errorf("%d IPv6 prefixes in %s, want 27,693", len(base), PyASN6)
	}
	v4, err := Load(PyASN6)
	if err != nil {
		t.Fatal(err)
	}
	if len(v4) < 600_000 || !v4[0].Addr().Is4() {
		t.Errorf("the file's IPv4 half: %d prefixes", len(v4))
	}
	full, err := Named6("250000v6")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[netip.Prefix]bool{}
	lengths := map[int]int{}
	global := netip.MustParsePrefix("2000::/3")
	for i, p := range full {
		if !p.Addr().Is6() || p != p.Masked() || seen[p] {
			t.Fatalf("prefix %d, %v: not a distinct masked IPv6 prefix", i, p)
		}
		if i >= len(base) && !global.Contains(p.Addr()) {
			t.Fatalf("grown prefix %v outside 2000::/3", p)
		}
		seen[p] = true
		lengths[p.Bits()]++
	}
	mean := func(ps []netip.Prefix) float64 {
		s := 0
		for _, p := range ps {
			s += p.Bits()
		}
		return float64(s) / float64(len(ps))
	}
	if len(full) != 250_000 || mean(full)-mean(base) > 0.5 || mean(base)-mean(full) > 0.5 {
		t.Errorf("%d prefixes, mean length %.2f (the snapshot's %.2f)", len(full), mean(full), mean(base))
	}
	for l, n := range lengths {
		if n > lengths[48] {
			t.Errorf("/%d: %d prefixes, more than /48's %d", l, n, lengths[48])
		}
	}
	spread, err := Named6("250000v6u")
	if err != nil || len(spread) != 250_000 || mean(spread)-mean(base) > 0.5 || mean(base)-mean(spread) > 0.5 {
		t.Fatalf("250000v6u: %d prefixes, mean length %.2f, %v", len(spread), mean(spread), err)
	}
	for _, c := range []struct {
		name     string
		ps       []netip.Prefix
		min, max float64
	}{{"pyasn6", base, 0.9, 1}, {"250000v6", full, 0.9, 1}, {"250000v6u", spread, 0, 0.2}} {
		if f := sharingSlash32(c.ps); f < c.min || f > c.max {
			t.Errorf("%s: %.0f%% of the /48s share their /32, want %.0f%% to %.0f%%", c.name, 100*f, 100*c.min, 100*c.max)
		}
	}
	cut, err := Named6("1000v6")
	if err != nil || len(cut) != 1000 || cut[999] == base[999] {
		t.Errorf("a cut of 1000: %d, %v (spread over the table, not its first rows)", len(cut), err)
	}
	for _, name := range []string{"pyasn6", "250000v6"} {
		if _, err := Named(name); err == nil || !strings.Contains(err.Error(), "IPv6") {
			t.Errorf("Named(%q) (an IPv4 FIB's): %v, want refused as an IPv6 table", name, err)
		}
	}
	for _, name := range []string{"0v6", "xv6", "v6u", "/nonexistent"} {
		if _, err := Named6(name); err == nil {
			t.Errorf("Named6(%q): no error", name)
		}
	}
}

// sharingSlash32 is the fraction of a table's /48s whose /32 holds another
// of its prefixes.
func sharingSlash32(ps []netip.Prefix) float64 {
	per32 := map[netip.Prefix]int{}
	for _, p := range ps {
		q, _ := p.Addr().Prefix(32)
		per32[q]++
	}
	n, sharing := 0, 0
	for _, p := range ps {
		if p.Bits() == 48 {
			n++
			if q, _ := p.Addr().Prefix(32); per32[q] > 1 {
				sharing++
			}
		}
	}
	return float64(sharing) / float64(n)
}
