package router

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"

	"github.com/msr-router/msr/internal/msrtest"
	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/internal/xdp"
)

// TestUpgradeKeepsState: a build whose maps changed layout (a field added
// to the neighbour entries and to the counters) loads over the pinned
// data path of this one and keeps its state: the FIB's arrays adopted as
// they were, every neighbour and counter migrated into the new layout.
// Loading this build again over the later layout is a downgrade, refused
// unless forced; forced, the maps it cannot shrink back start empty and
// say so.
func TestUpgradeKeepsState(t *testing.T) {
	if err := netns.EnsureBPFFS(); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(netns.BPFFS, "msr-test-upgrade-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	dp, err := LoadDataplane(dir, Sizes{}, false)
	if err != nil {
		t.Fatal(err)
	}
	route := netip.MustParsePrefix("198.51.100.0/24")
	if err := dp.FIB.Set(route, 7); err != nil {
		t.Fatal(err)
	}
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 9}
	if err := dp.SetNeighbor(netip.MustParseAddr("192.0.2.9"), 10, mac); err != nil {
		t.Fatal(err)
	}
	dp.Close()

	// The next build: its rt_neighbors and rt_counters values 8 bytes
	// longer, its layout one later.
	spec, err := loadRtxdp()
	if err != nil {
		t.Fatal(err)
	}
	spec.Maps[rtxdpMapRtNeighbors].ValueSize += 8
	spec.Maps[rtxdpMapRtCounters].ValueSize += 8
	var next rtxdpObjects
	migrated, err := xdp.Load(spec, &next, dir, xdp.LoadOptions{Layout: LayoutVersion + 1})
	if err != nil {
		t.Fatalf("the next build's load: %v", err)
	}
	names := []string{}
	for _, m := range migrated {
		names = append(names, m.Map)
		if m.Empty {
			t.Errorf("%s started empty: %s", m.Map, m.Why)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{rtxdpMapRtCounters, rtxdpMapRtNeighbors}) {
		t.Errorf("migrated %v, want rt_counters and rt_neighbors", migrated)
	}
	got := make([]byte, 16)
	if err := next.RtNeighbors.Lookup(&rtxdpRtNeighKey{Ip: be32(netip.MustParseAddr("192.0.2.9")), Vlan: 10}, got); err != nil || !slices.Equal(got[:6], mac) || !slices.Equal(got[8:], make([]byte, 8)) {
		t.Errorf("the neighbour after the upgrade: %x %v", got, err)
	}
	next.Close()

	// Back to this build: a downgrade.
	if _, err := LoadDataplane(dir, Sizes{}, false); !errors.Is(err, xdp.ErrDowngrade) {
		t.Fatalf("a downgrade loaded: %v", err)
	}
	back, err := LoadDataplane(dir, Sizes{}, true)
	if err != nil {
		t.Fatalf("a forced downgrade: %v", err)
	}
	defer back.Close()
	empty := 0
	for _, m := range back.Migrated {
		if m.Empty {
			empty++
		}
	}
	if empty != 2 {
		t.Errorf("forced downgrade: %+v, want rt_neighbors and rt_counters started empty", back.Migrated)
	}
	// The FIB's arrays, unchanged, were adopted by both builds in turn.
	if got := back.FIB.Lookup(netip.MustParseAddr("198.51.100.1")); got != 7 || !back.Reused {
		t.Errorf("198.51.100.1 after an upgrade and a downgrade: group %d (reused %v), want 7", got, back.Reused)
	}
}

var updateLayout = flag.Bool("update-layout", false, "record the maps' layout as LayoutVersion's in testdata/layout.txt")

// TestLayoutVersion: the pinned maps' layout is the one recorded for
// LayoutVersion (msrtest.CheckLayout).
func TestLayoutVersion(t *testing.T) {
	spec, err := loadRtxdp()
	if err != nil {
		t.Fatal(err)
	}
	msrtest.CheckLayout(t, fmt.Sprintf("version %d\n%s", LayoutVersion, xdp.Layout(spec, resizableMaps...)), *updateLayout)
}

// TestVerifierHeadroom: the verifier checks the data path well within its
// limit (msrtest.CheckVerifierHeadroom).
func TestVerifierHeadroom(t *testing.T) {
	spec, err := loadRtxdp()
	if err != nil {
		t.Fatal(err)
	}
	msrtest.CheckVerifierHeadroom(t, spec)
}
