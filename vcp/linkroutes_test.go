package vcp

import (
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/netns"
)

// TestReadLinkRoutes puts routes in a namespace's table as zebra would
// (OSPFv3's as protocol ospf, RIPng's as 190, ECMP as one multipath
// route) and reads the link-local routes on the mirrors: one per next
// hop, with the mirror's VLAN, origin and distance; a route on another
// interface, of another protocol or via a global address is not one.
func TestReadLinkRoutes(t *testing.T) {
	const ns = "msr-test-linkroutes"
	exec.Command("ip", "netns", "del", ns).Run()
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	for _, cmd := range []string{
		"link add x10 type veth peer name p10", "link add x11 type veth peer name p11", "link add eth0 type veth peer name p0",
		"link set p10 up", "link set p11 up", "link set p0 up",
		"link set x10 up", "link set x11 up", "link set eth0 up",
		"-6 addr add 2001:db8:10::1/64 dev x10",
		"-6 route add 2001:db8:f0::/48 via fe80::1 dev x10 proto ospf",
		"-6 route add 2001:db8:f1::/48 proto 190 nexthop via fe80::2 dev x10 nexthop via fe80::3 dev x11",
		"-6 route add 2001:db8:f2::/48 via fe80::4 dev eth0 proto ospf",
		"-6 route add 2001:db8:f3::/48 via fe80::5 dev x10 proto static",
		"-6 route add 2001:db8:f4::/48 via 2001:db8:10::7 dev x10 proto ospf",
		"-6 route add ::/0 via fe80::6 dev x11 proto rip",
	} {
		if out, err := exec.Command("ip", append([]string{"-n", ns}, strings.Fields(cmd)...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v %s", cmd, err, out)
		}
	}
	var got []dist.LinkRoute
	err := netns.Do(ns, func() (err error) {
		got, err = readLinkRoutes(map[string]uint16{"x10": 10, "x11": 11})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	lr := func(p, via string, vlan uint16, origin, distance uint8) dist.LinkRoute {
		return dist.LinkRoute{Prefix: netip.MustParsePrefix(p), Via: netip.MustParseAddr(via), VLAN: vlan, Origin: origin, Distance: distance}
	}
	want := []dist.LinkRoute{
		lr("::/0", "fe80::6", 11, originRIP, ripDistance),
		lr("2001:db8:f0::/48", "fe80::1", 10, originOSPF, ospfDistance),
		lr("2001:db8:f1::/48", "fe80::2", 10, originRIP, ripDistance),
		lr("2001:db8:f1::/48", "fe80::3", 11, originRIP, ripDistance),
	}
	if !slices.Equal(got, want) {
		t.Errorf("link-local routes:\n got %v\nwant %v", got, want)
	}
}
