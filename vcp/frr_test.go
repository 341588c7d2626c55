package vcp

import (
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFRRConfParses renders every daemon's configuration, dual stack, and
// has each daemon check its own (--dryrun).
func TestFRRConfParses(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	cfg := &RoutingConfig{Suite: "frr", ASN: 65000, RouterID: netip.MustParseAddr("192.0.2.1"), RunDir: dir,
		BGP: []BGPPeer{{Neighbor: netip.MustParseAddr("192.0.2.10"), ASN: 65010, HoldTime: 6, Password: "pw&-0"},
			{Neighbor: netip.MustParseAddr("192.0.2.11"), ASN: 65011, Export: []string{}, BFD: true},
			{Neighbor: netip.MustParseAddr("192.0.2.12"), ASN: 65012, Export: []string{"bgp", "ospf"}, AllowDefault: true},
			{Neighbor: netip.MustParseAddr("192.0.2.13"), ASN: 65013, MaxPrefixes: 1000, MaxPrefixesRestart: 2 * time.Minute,
				ImportPrefixes: []PrefixPattern{mustPattern("10.0.0.0/8+"), mustPattern("172.16.0.0/12{16,24}")}, ExportPrefixes: []PrefixPattern{mustPattern("192.0.2.0/24")}},
			{Neighbor: netip.MustParseAddr("192.0.2.14"), ASN: 65014, MaxPrefixes: 50, ImportPrefixes: []PrefixPattern{}, TTLSecurity: new(bool)},
			{Neighbor: netip.MustParseAddr("192.0.2.15"), ASN: 65000},
			{Neighbor: netip.MustParseAddr("2001:db8:10::10"), ASN: 65016, MaxPrefixes: 10, ImportPrefixes: []PrefixPattern{mustPattern("2001:db8::/32+")}},
			{Neighbor: netip.MustParseAddr("192.0.2.17"), ASN: 65017, IPv6: true, ImportPrefixes: []PrefixPattern{mustPattern("10.0.0.0/8+")}}},
		Static: []StaticRoute{{To: netip.MustParsePrefix("203.0.113.0/24"), Via: netip.MustParseAddr("192.0.2.254")},
			{To: netip.MustParsePrefix("2001:db8:99::/48"), Via: netip.MustParseAddr("2001:db8:10::254")}},
		OSPF: []OSPFPort{{VLAN: 10}, {VLAN: 11, Cost: 5, Passive: true, Auth: &Auth{Algorithm: "md5", KeyID: 2, Secret: "ospf-k3y"}}}, OSPFExport: []string{"connected", "bgp"},
		RIP: []RIPPort{{VLAN: 11, Auth: &Auth{Algorithm: "md5", KeyID: 4, Secret: "rip-k3y"}}}, RIPExport: []string{"connected", "static"},
		OSPFv3: []OSPFPort{{VLAN: 10, Cost: 7, Auth: &Auth{Algorithm: "hmac-sha256", KeyID: 6, Secret: "v3-k3y"}}}, RIPng: []RIPPort{{VLAN: 10}}, // rendered, though the file refuses it today
		BFDInterval: 300 * time.Millisecond, BFDMultiplier: 3,
		Backends: &RIBDistribution{Listen: netip.MustParseAddr("10.0.0.1"), Range: netip.MustParsePrefix("10.0.0.0/24"), Password: "0123abcd"},
		Ports: []SuitePort{{VLAN: 10, Address: netip.MustParsePrefix("192.0.2.1/24"), Address6: netip.MustParsePrefix("2001:db8:10::1/64"), Name: "lb1/e0", RA: true},
			{VLAN: 11, Address: netip.MustParsePrefix("198.51.100.1/24"), Name: "lb2/e3"}}}
	f := &FRR{cfg: cfg, dir: filepath.Join(dir, "frr"), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := f.writeConfig(); err != nil {
		t.Fatal(err)
	}
	// Secrets (TCP-MD5, OSPF's and RIP's keys) in files FRR's user alone
	// reads, in a directory of its own.
	frr := daemonUser("frr")
	for _, p := range []string{f.dir, filepath.Join(f.dir, "bgpd.conf"), filepath.Join(f.dir, "ospfd.conf"), filepath.Join(f.dir, "ripd.conf")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		want := os.FileMode(0o600)
		if fi.IsDir() {
			want = 0o700
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != want || frr != nil && int(st.Uid) != frr.uid {
			t.Errorf("%s: mode %v uid %d, want %v owned by frr", p, fi.Mode().Perm(), st.Uid, want)
		}
	}
	for d, wants := range map[string][]string{
		"bgpd": {"neighbor 192.0.2.10 remote-as 65010", "neighbor 192.0.2.10 timers 2 6", "bgp listen range 10.0.0.0/24 peer-group BACKENDS",
			"neighbor BACKENDS shutdown", "neighbor 192.0.2.11 bfd profile msr", "neighbor BACKENDS password 0123abcd", "neighbor 192.0.2.10 password pw&-0", "neighbor BACKENDS addpath-tx-all-paths", "bgp graceful-restart", "redistribute ospf",
			"neighbor 192.0.2.10 description lb1/e0",
			// Exports: connected (the ports' networks, tag 1) and static
			// (tag 2) by default; none; transit (a learned AS path) and OSPF.
			"redistribute connected route-map MSR-CONNECTED", "route-map MSR-CONNECTED permit 20\n match interface x11\n set tag 1",
			"neighbor 192.0.2.10 route-map MSR-EXPORT-0 out\n  neighbor 192.0.2.10 next-hop-self", "route-map MSR-EXPORT-0 permit 10\n match tag 1\nroute-map MSR-EXPORT-0 permit 20\n match tag 2\n",
			"route-map MSR-EXPORT-1 deny 10", "route-map MSR-EXPORT-2 permit 10\n match as-path MSR-LEARNED\nroute-map MSR-EXPORT-2 permit 20\n match tag 3",
			"route-map MSR-BACKENDS deny 5\n match tag 1",
			// OSPFv3's and RIPng's routes go to BGP peers that export
			// ospf or rip, never to the back-ends (LINK_ROUTES has them).
			"  redistribute ospf6 route-map MSR-OSPF6\n", "route-map MSR-OSPF6 permit 10\n set tag 5\n", "route-map MSR-RIPNG permit 10\n set tag 6\n",
			"route-map MSR-EXPORT-2 permit 20\n match tag 3\nroute-map MSR-EXPORT-2 permit 25\n match tag 5\n",
			"route-map MSR-BACKENDS deny 6\n match tag 5\nroute-map MSR-BACKENDS deny 7\n match tag 6\n",
			// Origins and distances to the back-ends: static, OSPF, an
			// iBGP peer, eBGP.
			"bgp route-reflector allow-outbound-policy", "route-map MSR-BACKENDS permit 10\n match tag 2\n set large-community 65000:1:2 65000:3:1\n",
			"route-map MSR-BACKENDS permit 20\n match tag 3\n set large-community 65000:1:3 65000:3:110\n",
			"redistribute rip route-map MSR-RIP", "route-map MSR-BACKENDS permit 30\n match tag 4\n set large-community 65000:1:8 65000:3:120\n",
			"route-map MSR-BACKENDS permit 150\n match peer 192.0.2.15\n set large-community 65000:1:7 65000:3:200\n",
			"route-map MSR-BACKENDS permit 1000\n set large-community 65000:1:7 65000:3:20\n",
			// The default import policy: an eBGP peer without a list of
			// its own; with allow_default; none for an iBGP peer.
			"  neighbor 192.0.2.10 next-hop-self\n  neighbor 192.0.2.10 route-map MSR-IN in\n",
			"  neighbor 192.0.2.12 next-hop-self\n  neighbor 192.0.2.12 route-map MSR-IN-DEFAULT in\n",
			"  neighbor 192.0.2.15 next-hop-self\n  no neighbor 2001:db8:10::10 activate\n",
			"ip prefix-list MSR-MARTIANS seq 10 permit 10.0.0.0/8 le 32\n", "ip prefix-list MSR-MARTIANS seq 75 permit 0.0.0.0/0 ge 25 le 32\n",
			"ipv6 prefix-list MSR-MARTIANS6 seq 30 permit 2002::/16 ge 17 le 128\n", "ip prefix-list MSR-OWN seq 5 permit 192.0.2.0/24 le 32\n",
			"ipv6 prefix-list MSR-OWN6 seq 5 permit 2001:db8:10::/64 le 128\n",
			"route-map MSR-IN deny 10\n match ip address prefix-list MSR-MARTIANS\nroute-map MSR-IN deny 11\n match ipv6 address prefix-list MSR-MARTIANS6\n" +
				"route-map MSR-IN deny 20\n match ip address prefix-list MSR-OWN\nroute-map MSR-IN deny 21\n match ipv6 address prefix-list MSR-OWN6\n" +
				"route-map MSR-IN deny 30\n match ip address prefix-list MSR-DEFAULT\nroute-map MSR-IN deny 31\n match ipv6 address prefix-list MSR-DEFAULT6\nroute-map MSR-IN permit 100\n",
			"route-map MSR-IN-DEFAULT deny 21\n match ipv6 address prefix-list MSR-OWN6\nroute-map MSR-IN-DEFAULT permit 100\n",
			// Prefix lists and limits.
			"neighbor 192.0.2.13 prefix-list MSR-IMPORT-3 in\n  neighbor 192.0.2.13 prefix-list MSR-EXPORT-3 out\n  neighbor 192.0.2.13 maximum-prefix 1000 restart 2\n",
			"ip prefix-list MSR-IMPORT-3 seq 5 permit 10.0.0.0/8 le 32\nip prefix-list MSR-IMPORT-3 seq 10 permit 172.16.0.0/12 ge 16 le 24\nip prefix-list MSR-EXPORT-3 seq 5 permit 192.0.2.0/24\n",
			"neighbor 192.0.2.14 prefix-list MSR-NOTHING in\n  neighbor 192.0.2.14 maximum-prefix 50\n", "ip prefix-list MSR-NOTHING seq 5 deny any",
			// IPv6: a session over IPv6 carries IPv6 only; an IPv4 one with
			// ipv6 both, each family with its own prefix lists (the IPv4
			// session's has none of IPv6: nothing of it taken); the
			// back-ends get both.
			"  no neighbor 2001:db8:10::10 activate\n", " address-family ipv6 unicast\n  redistribute connected route-map MSR-CONNECTED\n  redistribute static route-map MSR-STATIC\n  redistribute ospf6 route-map MSR-OSPF6\n  neighbor BACKENDS activate\n",
			"  neighbor 2001:db8:10::10 activate\n  neighbor 2001:db8:10::10 route-map MSR-EXPORT-6 out\n  neighbor 2001:db8:10::10 next-hop-self\n  neighbor 2001:db8:10::10 prefix-list MSR-IMPORT6-6 in\n  neighbor 2001:db8:10::10 maximum-prefix 10\n",
			"ipv6 prefix-list MSR-IMPORT6-6 seq 5 permit 2001:db8::/32 le 128\n",
			"  neighbor 192.0.2.17 prefix-list MSR-IMPORT-7 in\n", "  neighbor 192.0.2.17 activate\n  neighbor 192.0.2.17 route-map MSR-EXPORT-7 out\n  neighbor 192.0.2.17 next-hop-self\n  neighbor 192.0.2.17 prefix-list MSR-NOTHING6 in\n",
			"ipv6 prefix-list MSR-NOTHING6 seq 5 deny any"},
		"ripd":    {"key chain msr-x11\n key 4\n  key-string rip-k3y\n exit\nexit\ninterface x11\n ip rip authentication mode md5\n ip rip authentication key-chain msr-x11\nexit\nrouter rip\n version 2\n network x11\n redistribute connected route-map MSR-RIP-CONNECTED\n redistribute static\n!", "route-map MSR-RIP-CONNECTED permit 10\n match interface x10\n"},
		"bfdd":    {"bfd\n profile msr\n  receive-interval 300\n  transmit-interval 300\n  detect-multiplier 3\n"},
		"staticd": {"ip route 203.0.113.0/24 192.0.2.254", "ipv6 route 2001:db8:99::/48 2001:db8:10::254"},
		"zebra":   {"interface x10\n description lb1/e0\n no ipv6 nd suppress-ra\n ipv6 nd ra-interval 30\n ipv6 nd ra-lifetime 90\n ipv6 nd prefix 2001:db8:10::/64\n"},
		"ospf6d":  {"interface x10\n description lb1/e0\n ipv6 ospf6 area 0.0.0.0\n ipv6 ospf6 cost 7\n ipv6 ospf6 hello-interval 1\n ipv6 ospf6 dead-interval 4\n ipv6 ospf6 authentication key-id 6 hash-algo hmac-sha-256 key v3-k3y\n!", "router ospf6\n ospf6 router-id 192.0.2.1\n redistribute connected route-map MSR-OSPF-CONNECTED\n redistribute bgp\n"},
		"ripngd":  {"router ripng\n network x10\n redistribute connected route-map MSR-RIP-CONNECTED\n redistribute static\n!"},
		"ospfd": {" redistribute connected route-map MSR-OSPF-CONNECTED\n redistribute bgp\n!", "route-map MSR-OSPF-CONNECTED permit 20\n match interface x11\n", "interface x11\n description lb2/e3", "ip ospf cost 5", "ip ospf area 0",
			" ip ospf dead-interval 4\n ip ospf passive\n ip ospf authentication message-digest\n ip ospf message-digest-key 2 md5 ospf-k3y\n!"},
	} {
		path := filepath.Join(f.dir, d+".conf")
		b, _ := os.ReadFile(path)
		for _, w := range wants {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s lacks %q:\n%s", d, w, b)
			}
		}
		// GTSM on every peer but the one that turned it off.
		if n := strings.Count(string(b), " ttl-security hops 1\n"); d == "bgpd" && (n != 7 || strings.Contains(string(b), "192.0.2.14 ttl-security")) {
			t.Errorf("bgpd: ttl-security on %d peers, want 7 (not 192.0.2.14):\n%s", n, b)
		}
		out, err := exec.Command("/usr/lib/frr/"+d, "--dryrun", "-f", path, "-i", filepath.Join(f.dir, d+".pid"),
			"--vty_socket", f.dir).CombinedOutput()
		if err != nil || strings.Contains(string(out), "rror") || strings.Contains(string(out), "No such command") || strings.Contains(string(out), "Unknown command") {
			t.Errorf("%s refuses its configuration: %v: %s\n%s", d, err, out, b)
		}
	}
}
