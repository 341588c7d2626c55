package demo

import (
	"net/netip"
	"strings"
	"testing"
)

// A peer's bgpd.conf: IPv4 alone keeps FRR's default family; with an
// IPv6 session each family activates its own neighbour; GTSM on both.
func TestPeerBGPConfig(t *testing.T) {
	v4 := PeerBGP{ASN: 65010, RouterID: "192.0.2.10", Router: "192.0.2.1", RouterASN: 65000, Password: "k",
		Prefixes: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}}.Config()
	for _, want := range []string{"router bgp 65010\n", " neighbor 192.0.2.1 remote-as 65000\n neighbor 192.0.2.1 password k\n",
		" neighbor 192.0.2.1 ttl-security hops 1\n", " address-family ipv4 unicast\n  network 203.0.113.0/24\n exit-address-family\n"} {
		if !strings.Contains(v4, want) {
			t.Errorf("IPv4 peer lacks %q:\n%s", want, v4)
		}
	}
	if strings.Contains(v4, "activate") || strings.Contains(v4, "ipv6") || strings.Contains(v4, "hostname") {
		t.Errorf("IPv4 peer:\n%s", v4)
	}
	dual := BGP1(&Plan{Prefixes: []netip.Prefix{netip.MustParsePrefix("1.0.0.0/24")}, Prefixes6: []netip.Prefix{netip.MustParsePrefix("2001:db8:1::/48")}}).Config()
	for _, want := range []string{"hostname bgp1\n", " bgp graceful-restart restart-time 5\n", " no bgp default ipv4-unicast\n",
		"  neighbor 203.0.113.1 activate\n  network 1.0.0.0/24\n", " address-family ipv6 unicast\n  neighbor 2001:db8:12::1 activate\n  network 2001:db8:1::/48\n",
		" neighbor 2001:db8:12::1 ttl-security hops 1\n"} {
		if !strings.Contains(dual, want) {
			t.Errorf("bgp1 lacks %q:\n%s", want, dual)
		}
	}
}
