package vcp

import (
	"bytes"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBirdConfParses renders a configuration with every protocol and has
// BIRD itself check it (bird -p).
func TestBirdConfParses(t *testing.T) {
	cfg := &RoutingConfig{ASN: 65000, RouterID: netip.MustParseAddr("192.0.2.1"),
		BGP: []BGPPeer{{Neighbor: netip.MustParseAddr("192.0.2.10"), ASN: 65010, HoldTime: 6, Password: "pw&-0"},
			{Neighbor: netip.MustParseAddr("192.0.2.11"), ASN: 65011, Export: []string{}, BFD: true},
			{Neighbor: netip.MustParseAddr("192.0.2.12"), ASN: 65012, Export: []string{"bgp", "ospf"}},
			{Neighbor: netip.MustParseAddr("192.0.2.13"), ASN: 65013, MaxPrefixes: 1000, MaxPrefixesRestart: 2 * time.Minute,
				ImportPrefixes: []PrefixPattern{mustPattern("10.0.0.0/8+"), mustPattern("172.16.0.0/12{16,24}")}, ExportPrefixes: []PrefixPattern{mustPattern("192.0.2.0/24")}},
			{Neighbor: netip.MustParseAddr("192.0.2.14"), ASN: 65014, MaxPrefixes: 50, ImportPrefixes: []PrefixPattern{}}},
		Static: []StaticRoute{{To: netip.MustParsePrefix("203.0.113.0/24"), Via: netip.MustParseAddr("192.0.2.254")}},
		OSPF:   []OSPFPort{{VLAN: 10}, {VLAN: 11, Cost: 5}}, OSPFExport: []string{"connected", "bgp"},
		RIP: []RIPPort{{VLAN: 11}}, RIPExport: []string{"connected", "static"},
		BFDInterval: 300 * time.Millisecond, BFDMultiplier: 3,
		Backends: &RIBDistribution{Listen: netip.MustParseAddr("10.0.0.1"), Range: netip.MustParsePrefix("10.0.0.0/24"), Password: "0123abcd"},
		Ports: []SuitePort{{VLAN: 10, Address: netip.MustParsePrefix("192.0.2.1/24"), Name: "lb1/e0"},
			{VLAN: 11, Address: netip.MustParsePrefix("198.51.100.1/24"), Name: "lb2/e3"}}}
	var b bytes.Buffer
	if err := birdConf.Execute(&b, suiteConf{cfg, true}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bird.conf")
	os.WriteFile(path, b.Bytes(), 0o644)
	if out, err := exec.Command("bird", "-p", "-c", path).CombinedOutput(); err != nil {
		t.Fatalf("bird -p: %v: %s\n%s", err, out, b.String())
	}
	for _, want := range []string{"neighbor 192.0.2.10 as 65010", "route 203.0.113.0/24 via 192.0.2.254", `interface "x11" { cost 5`, "neighbor range 10.0.0.0/24 internal;\n\tpassword \"0123abcd\";", "graceful restart on;\n\tpassword \"pw&-0\";", "hold time 6", "protocol bfd {\n\tinterface \"x*\" { interval 300 ms; multiplier 3; };\n}", "graceful restart on;\n\tbfd on;", "protocol rip {", "ipv4 { import all; export where source ~ [RTS_RIP, RTS_DEVICE, RTS_STATIC]; };\n\tinterface \"x11\" { version 2; };   # lb2/e3", "ipv4 { import all; export where source ~ [RTS_DEVICE, RTS_BGP]; };", "add paths tx", "graceful restart on", "disabled;",
		`description "lb1/e0"`, "# lb2/e3\n\t\tinterface \"x11\"",
		// Exports: connected and static by default; none; transit and OSPF.
		"import all;\n\t\texport where source ~ [RTS_DEVICE, RTS_STATIC];\n\t\tnext hop self;\n\t};",
		"import all;\n\t\texport none;\n\t\tnext hop self;\n\t};",
		"import all;\n\t\texport where source ~ [RTS_BGP, RTS_OSPF, RTS_OSPF_IA, RTS_OSPF_EXT1, RTS_OSPF_EXT2];\n\t\tnext hop self;\n\t};",
		// Prefix lists, and the limit: restarted after 2 minutes, or not.
		"error wait time 120, 120;",
		"import where net ~ [10.0.0.0/8+, 172.16.0.0/12{16,24}];\n\t\texport where source ~ [RTS_DEVICE, RTS_STATIC] && net ~ [192.0.2.0/24];\n\t\tnext hop self;\n\t\timport limit 1000 action restart;",
		"import none;\n\t\texport where source ~ [RTS_DEVICE, RTS_STATIC];\n\t\tnext hop self;\n\t\timport limit 50 action disable;"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("configuration lacks %q:\n%s", want, b.String())
		}
	}
}

func mustPattern(s string) PrefixPattern {
	var p PrefixPattern
	if err := p.UnmarshalText([]byte(s)); err != nil {
		panic(err)
	}
	return p
}
