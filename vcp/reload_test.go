package vcp

import (
	"reflect"
	"strings"
	"testing"
)

// diffConfig says every change in words, and refuses those that need a
// restart.
func TestDiffConfig(t *testing.T) {
	routing := "routing:\n  asn: 65000\n  bgp:\n    - {neighbor: 192.0.2.10, asn: 65010}\n"
	old, err := load(t, goodVCP+routing)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		from, to string
		want     []string
	}{
		{"", "", nil},
		{"mode: hash", "mode: wrr", []string{"mode hash -> wrr"}},
		{"lb2: {mode: maglev}", "lb2: {mode: wrr}\n  lb1: {mode: hash}", []string{
			"lb lb1 added: mode hash",
			"lb lb2: mode maglev -> mode wrr"}},
		{"r3: {capacity_mbps: 500}", "r3: {capacity_mbps: 1000, api: 10.1.0.13:8180}", []string{
			"back-end r3: capacity 500 Mbit/s -> capacity 1000 Mbit/s, api 10.1.0.13:8180"}},
		{"198.51.100.1/24, vlan: 11, mtu: 1500", "198.51.100.2/24, vlan: 11, mtu: 9000", []string{
			"external port VLAN 11: lb lb2 mac 02:00:00:00:e2:00 address 198.51.100.1/24 mtu 1500 urpf off -> lb lb2 mac 02:00:00:00:e2:00 address 198.51.100.2/24 mtu 9000 urpf off"}},
		// Unicast RPF and GTSM are changes too.
		{"address: 192.0.2.1/24, vlan: 10}", "address: 192.0.2.1/24, vlan: 10, urpf: strict}", []string{
			"external port VLAN 10: lb lb1 mac 02:00:00:00:e0:00 address 192.0.2.1/24 mtu 0 urpf loose -> lb lb1 mac 02:00:00:00:e0:00 address 192.0.2.1/24 mtu 0 urpf strict"}},
		{"asn: 65010}", "asn: 65010, ttl_security: false}", []string{
			"routing BGP neighbour 192.0.2.10: AS 65010 -> AS 65010 ttl_security off"}},
		{"asn: 65010}", "asn: 65011}\n    - {neighbor: 192.0.2.11, asn: 65012}", []string{
			"routing BGP neighbour 192.0.2.10: AS 65010 -> AS 65011",
			"routing BGP neighbour 192.0.2.11 added: AS 65012"}},
		// A peer's policy and password are changes too; the password
		// shows as a fingerprint only.
		{"asn: 65010}", "asn: 65010, export: [bgp], import_prefixes: [10.0.0.0/8+], max_prefixes: 50, max_prefixes_restart: 5m, password: hunter22}", []string{
			"routing BGP neighbour 192.0.2.10: AS 65010 -> AS 65010 export [bgp] import_prefixes [10.0.0.0/8+] max_prefixes 50 max_prefixes_restart 5m0s password (sha256 20d2fe5e)"}},
		// A port that comes and one that goes: the config of an LB
		// joining or leaving.
		{"vlan: 11", "vlan: 12", []string{
			"external port VLAN 11 removed (was lb lb2 mac 02:00:00:00:e2:00 address 198.51.100.1/24 mtu 1500 urpf off)",
			"external port VLAN 12 added: lb lb2 mac 02:00:00:00:e2:00 address 198.51.100.1/24 mtu 1500 urpf off"}},
		// The port loses its routing protocol, and so its default uRPF.
		{"  bgp:\n    - {neighbor: 192.0.2.10, asn: 65010}\n", "  static:\n    - {to: 10.0.0.0/8, via: 192.0.2.20}\n", []string{
			"external port VLAN 10: lb lb1 mac 02:00:00:00:e0:00 address 192.0.2.1/24 mtu 0 urpf loose -> lb lb1 mac 02:00:00:00:e0:00 address 192.0.2.1/24 mtu 0 urpf off",
			"routing BGP neighbour 192.0.2.10 removed (was AS 65010)",
			"routing static 10.0.0.0/8 added: via 192.0.2.20"}},
	} {
		next, err := load(t, strings.Replace(goodVCP+routing, c.from, c.to, 1))
		if err != nil {
			t.Fatal(err)
		}
		got, err := diffConfig(old, next)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q -> %q: %q %v, want %q", c.from, c.to, got, err, c.want)
		}
	}
	// The same file with its lines moved is no change: positions are not
	// settings.
	withSNMP := goodVCP + "snmp:\n  community: public\n  sources: [10.0.0.0/24]\n  traps:\n    - {host: \"192.0.2.10:162\"}\n" + routing
	a, errA := load(t, withSNMP)
	b, errB := load(t, "# a comment that moves every line\n"+withSNMP)
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	if got, err := diffConfig(a, b); err != nil || len(got) != 0 {
		t.Errorf("a file with its lines moved: %q %v, want no change", got, err)
	}
	c, _ := load(t, strings.Replace(withSNMP, "{host: \"192.0.2.10:162\"}", "{host: \"192.0.2.10:162\", community: s3cret}", 1))
	if _, err := diffConfig(a, c); err == nil || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "public") {
		t.Errorf("a trap's community changed: %v, want a refusal that does not say the community", err)
	}
	for _, c := range []struct{ from, to, want string }{
		{"name: vcp1", "name: vcp9", "name vcp1 -> vcp9"},
		{"interface: eth0", "interface: eth1", "interface eth0 -> eth1"},
		{"interface: eth0", "interface: eth0\napi_listen: 10.1.0.1:8179\napi_insecure: true", "api_listen"},
	} {
		next, err := load(t, strings.Replace(goodVCP+routing, c.from, c.to, 1))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := diffConfig(old, next); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "nothing applied") {
			t.Errorf("%q -> %q: %v, want a refusal naming %q", c.from, c.to, err, c.want)
		}
	}
}
