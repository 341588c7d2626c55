package vcp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/msr-router/msr/dist"
)

// TestBirdConfParses renders a configuration with every protocol and has
// BIRD itself check it (bird -p).
func TestBirdConfParses(t *testing.T) {
	cfg := &RoutingConfig{ASN: 65000, RouterID: netip.MustParseAddr("192.0.2.1"),
		BGP: []BGPPeer{{Neighbor: netip.MustParseAddr("192.0.2.10"), ASN: 65010, HoldTime: 6, Password: "pw&-0"},
			{Neighbor: netip.MustParseAddr("192.0.2.11"), ASN: 65011, Export: []string{}, BFD: true},
			{Neighbor: netip.MustParseAddr("192.0.2.12"), ASN: 65012, Export: []string{"bgp", "ospf"}, AllowDefault: true},
			{Neighbor: netip.MustParseAddr("192.0.2.13"), ASN: 65013, MaxPrefixes: 1000, MaxPrefixesRestart: 2 * time.Minute,
				ImportPrefixes: []PrefixPattern{mustPattern("10.0.0.0/8+"), mustPattern("172.16.0.0/12{16,24}")}, ExportPrefixes: []PrefixPattern{mustPattern("192.0.2.0/24")}},
			{Neighbor: netip.MustParseAddr("192.0.2.14"), ASN: 65014, MaxPrefixes: 50, ImportPrefixes: []PrefixPattern{}, TTLSecurity: new(bool)},
			{Neighbor: netip.MustParseAddr("192.0.2.15"), ASN: 65000, Export: []string{}}},
		Static: []StaticRoute{{To: netip.MustParsePrefix("203.0.113.0/24"), Via: netip.MustParseAddr("192.0.2.254")}},
		OSPF:   []OSPFPort{{VLAN: 10, Auth: &Auth{Algorithm: "hmac-sha256", KeyID: 3, Secret: "ospf-k3y"}}, {VLAN: 11, Cost: 5, Passive: true}}, OSPFExport: []string{"connected", "bgp"},
		RIP: []RIPPort{{VLAN: 11, Auth: &Auth{Algorithm: "md5", KeyID: 1, Secret: "rip-k3y"}}}, RIPExport: []string{"connected", "static"},
		BFDInterval: 300 * time.Millisecond, BFDMultiplier: 3, BFDAuth: &Auth{Algorithm: "meticulous-keyed-sha1", KeyID: 5, Secret: "bfd-k3y"},
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
	for _, want := range []string{"neighbor 192.0.2.10 as 65010", "route 203.0.113.0/24 via 192.0.2.254", `interface "x11" { cost 5`, "neighbor range 10.0.0.0/24 internal;\n\tpassword \"0123abcd\";", "graceful restart on;\n\tpassword \"pw&-0\";", "hold time 6", "connect retry time 5;", "error wait time 5, 300;", "protocol bfd {\n\tinterface \"x*\" { interval 300 ms; multiplier 3;\n\t\t# Signed and checked (bfd_auth), key 5.\n\t\tauthentication meticulous keyed sha1;\n\t\tpassword \"bfd-k3y\" { id 5; };\n\t };\n}", "graceful restart on;\n\tbfd on;", "protocol rip rip4 {", "ipv4 { import all; export where source ~ [RTS_RIP, RTS_DEVICE, RTS_STATIC]; };\n\tinterface \"x11\" { version 2;\n\t\t\t# Signed and checked (the port's auth), key 1.\n\t\t\tauthentication cryptographic;\n\t\t\tpassword \"rip-k3y\" { id 1; algorithm keyed md5; };\n\t\t };   # lb2/e3", "ipv4 { import all; export where source ~ [RTS_DEVICE, RTS_BGP]; };", "add paths tx", "graceful restart on", "rr client;\n\tgraceful restart on;\n\terror wait time 1, 10;", "disabled;",
		`description "lb1/e0"`, "# lb2/e3\n\t\tinterface \"x11\"",
		"interface \"x10\" { cost 10; hello 1; dead 4;\n\t\t\t# Signed and checked (the port's auth), key 3.\n\t\t\tauthentication cryptographic;\n\t\t\tpassword \"ospf-k3y\" { id 3; algorithm hmac sha256; };\n\t\t };",
		"interface \"x11\" { cost 5; hello 1; dead 4; stub yes; };",
		// Exports: connected and static by default; none; transit and OSPF.
		// Imports: the default policy (martians, the router's networks,
		// the default route unless allowed); all from an iBGP peer.
		"import where !(net ~ MSR_MARTIANS4) && !(net ~ MSR_OWN4) && net.len > 0;\n\t\texport where source ~ [RTS_DEVICE, RTS_STATIC];\n\t\tnext hop self;\n\t};",
		"import where !(net ~ MSR_MARTIANS4) && !(net ~ MSR_OWN4) && net.len > 0;\n\t\texport none;\n\t\tnext hop self;\n\t};",
		"import where !(net ~ MSR_MARTIANS4) && !(net ~ MSR_OWN4);\n\t\texport where source ~ [RTS_BGP, RTS_OSPF, RTS_OSPF_IA, RTS_OSPF_EXT1, RTS_OSPF_EXT2];\n\t\tnext hop self;\n\t};",
		"neighbor 192.0.2.15 as 65000;", "import all;\n\t\texport none;\n\t\tnext hop self;\n\t};",
		"define MSR_MARTIANS4 = [0.0.0.0/8+, 10.0.0.0/8+, 100.64.0.0/10+,", "0.0.0.0/0{25,32}];", "2002::/16{17,128}",
		"define MSR_OWN4 = [192.0.2.0/24+, 198.51.100.0/24+];",
		// Prefix lists, and the limit: restarted after 2 minutes, or not.
		"error wait time 120, 120;",
		"import where net ~ [10.0.0.0/8+, 172.16.0.0/12{16,24}];\n\t\texport where source ~ [RTS_DEVICE, RTS_STATIC] && net ~ [192.0.2.0/24];\n\t\tnext hop self;\n\t\timport limit 1000 action restart;",
		"import none;\n\t\texport where source ~ [RTS_DEVICE, RTS_STATIC];\n\t\tnext hop self;\n\t\timport limit 50 action disable;"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("configuration lacks %q:\n%s", want, b.String())
		}
	}
	// GTSM on every peer but the one that turned it off.
	if n := strings.Count(b.String(), "\tttl security on;"); n != 5 {
		t.Errorf("ttl security on %d peers, want 5:\n%s", n, b.String())
	}
}

func mustPattern(s string) PrefixPattern {
	var p PrefixPattern
	if err := p.UnmarshalText([]byte(s)); err != nil {
		panic(err)
	}
	return p
}

// TestBirdConfIPv6 renders a dual-stack configuration (ports with IPv6
// addresses, a peer over IPv6, a peer over IPv4 carrying IPv6 too, IPv6
// static routes, the back-ends' feed with both families) and has BIRD
// check it: each family's channel takes that family's prefix patterns.
func TestBirdConfIPv6(t *testing.T) {
	cfg := &RoutingConfig{ASN: 65000, RouterID: netip.MustParseAddr("192.0.2.1"),
		BGP: []BGPPeer{{Neighbor: netip.MustParseAddr("2001:db8:10::20"), ASN: 65020, ImportPrefixes: []PrefixPattern{mustPattern("2a00::/12{16,48}"), mustPattern("10.0.0.0/8+")}},
			{Neighbor: netip.MustParseAddr("192.0.2.21"), ASN: 65021, IPv6: true, ImportPrefixes: []PrefixPattern{mustPattern("10.0.0.0/8+")}}},
		Static: []StaticRoute{{To: netip.MustParsePrefix("203.0.113.0/24"), Via: netip.MustParseAddr("192.0.2.254")},
			{To: netip.MustParsePrefix("2001:db8:99::/48"), Via: netip.MustParseAddr("2001:db8:10::254")}},
		Backends: &RIBDistribution{Listen: netip.MustParseAddr("10.0.0.1"), Range: netip.MustParsePrefix("10.0.0.0/24")},
		Ports: []SuitePort{{VLAN: 10, Address: netip.MustParsePrefix("192.0.2.1/24"), Address6: netip.MustParsePrefix("2001:db8:10::1/64"), Name: "lb1/e0", RA: true},
			{VLAN: 11, Address: netip.MustParsePrefix("198.51.100.1/24"), Name: "lb2/e3"}}}
	// A pyasn file of both families, routed via each: each file's
	// prefixes of its gateway's family, in that family's protocol.
	dir := t.TempDir()
	cfg.RunDir = dir
	table := filepath.Join(dir, "table.dat")
	os.WriteFile(table, []byte("203.0.113.128/25\t1\n2001:db8:77::/48\t1\n"), 0o644)
	cfg.StaticFiles = []StaticFile{{File: table, Via: netip.MustParseAddr("192.0.2.253")}, {File: table, Via: netip.MustParseAddr("2001:db8:10::253")}}
	cfg.OSPFv3 = []OSPFPort{{VLAN: 10, Cost: 5, Auth: &Auth{Algorithm: "hmac-sha512", KeyID: 7, Secret: "v3-k3y"}}}
	cfg.RIPng = []RIPPort{{VLAN: 10}}
	for i, f := range cfg.StaticFiles {
		if err := writeStaticFile(filepath.Join(dir, fmt.Sprintf("static%d.conf", i)), f); err != nil {
			t.Fatal(err)
		}
	}
	for file, want := range map[string]string{"static0.conf": "\troute 203.0.113.128/25 via 192.0.2.253;\n", "static1.conf": "\troute 2001:db8:77::/48 via 2001:db8:10::253;\n"} {
		if got, _ := os.ReadFile(filepath.Join(dir, file)); string(got) != want {
			t.Errorf("%s: %q, want %q", file, got, want)
		}
	}
	var b bytes.Buffer
	if err := birdConf.Execute(&b, suiteConf{cfg, false}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "bird.conf")
	os.WriteFile(path, b.Bytes(), 0o644)
	if out, err := exec.Command("bird", "-p", "-c", path).CombinedOutput(); err != nil {
		t.Fatalf("bird -p: %v: %s\n%s", err, out, b.String())
	}
	for _, want := range []string{
		"protocol direct direct6 {\n\tipv6;",
		// Over IPv6: one ipv6 channel, its IPv6 patterns only.
		"neighbor 2001:db8:10::20 as 65020;",
		"\tipv6 {\n\t\timport where net ~ [2a00::/12{16,48}];\n\t\texport where source ~ [RTS_DEVICE, RTS_STATIC];\n\t\tnext hop self;\n\t};\n}",
		// Over IPv4 with ipv6: both, the IPv6 routes via the port's address6;
		// its list has no IPv6 pattern, so it takes no IPv6 route.
		"\tipv4 {\n\t\timport where net ~ [10.0.0.0/8+];\n\t\texport where source ~ [RTS_DEVICE, RTS_STATIC];\n\t\tnext hop self;\n\t};\n\tipv6 {\n\t\timport none;\n\t\texport where source ~ [RTS_DEVICE, RTS_STATIC];\n\t\tnext hop address 2001:db8:10::1;\n\t};",
		"protocol static static6 {\n\tipv6;\n\tcheck link yes;\n\troute 2001:db8:99::/48 via 2001:db8:10::254;\n\tinclude \"" + dir + "/static1.conf\";\n}",
		"protocol static {\n\tipv4;\n\tcheck link yes;   # routes via a port whose link is down are withdrawn\n\troute 203.0.113.0/24 via 192.0.2.254;\n\tinclude \"" + dir + "/static0.conf\";\n}",
		"\tipv6 {\n\t\timport none;\n\t\texport filter to_backends;\n\t\tnext hop keep;\n\t\tadd paths tx;\n\t};",
		"protocol rip ng ripng {\n\tipv6 { import all; export where source ~ [RTS_RIP, RTS_DEVICE]; };\n\tinterface \"x10\" {};   # lb1/e0\n}",
		// OSPFv3 on the port's mirror; its link-local next hops go to the
		// back-ends with the port's VLAN.
		"protocol ospf v3 ospf6 {\n\tipv6 { import all; export none; };\n\tarea 0 {\n\t\t# lb1/e0\n\t\tinterface \"x10\" { cost 5; hello 1; dead 4;\n\t\t\t# Signed and checked (the port's auth), key 7.\n\t\t\tauthentication cryptographic;\n\t\t\tpassword \"v3-k3y\" { id 7; algorithm hmac sha512; };\n\t\t };",
		// Router advertisements on the port that asks for them only.
		"protocol radv {\n\tinterface \"x10\" { min ra interval 10; max ra interval 30; };   # lb1/e0\n}",
		"\tif net.type = NET_IP6 then {\n\t\tif gw ~ fe80::/10 then {\n\t\t\tbgp_next_hop = gw;\n\t\t\tif ifname = \"x10\" then bgp_large_community.add((65000, 4, 10));\n\t\t\tif ifname = \"x11\" then bgp_large_community.add((65000, 4, 11));\n\t\t}\n\t}",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("configuration lacks %q:\n%s", want, b.String())
		}
	}
}

// A restart that comes as the suite is stopped (the supervisor restarting
// a BIRD that died a third time while the VCP stands down) ends the BIRD
// it started instead of leaving it running where Stop no longer looks:
// the soak found a third BIRD in the lab after such a hand-over.
func TestBIRDRestartAfterStop(t *testing.T) {
	cfg := &RoutingConfig{ASN: 65000, RouterID: netip.MustParseAddr("192.0.2.1"), RunDir: t.TempDir()}
	s, err := StartBIRD(cfg, false, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	running := func() bool {
		return exec.Command("pgrep", "-f", "^bird -f -c "+filepath.Join(cfg.RunDir, "bird.conf")).Run() == nil
	}
	if !running() {
		t.Fatal("BIRD not running after StartBIRD")
	}
	s.Stop()
	if proc, err := s.start(true); !errors.Is(err, errSuiteStopped) || proc != nil {
		t.Errorf("start after Stop: %v, %v; want errSuiteStopped", proc, err)
	}
	if running() {
		exec.Command("pkill", "-f", "^bird -f -c "+filepath.Join(cfg.RunDir, "bird.conf")).Run()
		t.Fatal("a BIRD started after Stop is still running")
	}
}

// TestBIRDAskRIP: AskRIP restarts BIRD's RIP and RIPng, so each sends
// its request and its table again; a birdc refusal (as `restart rip` was:
// a keyword) is a warning, and none is logged.
func TestBIRDAskRIP(t *testing.T) {
	cfg := &RoutingConfig{ASN: 65000, RouterID: netip.MustParseAddr("192.0.2.1"), RunDir: t.TempDir(),
		RIP: []RIPPort{{VLAN: 10}}, RIPng: []RIPPort{{VLAN: 10}}}
	var logged bytes.Buffer
	s, err := StartBIRD(cfg, false, slog.New(slog.NewTextHandler(&logged, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	since := func() map[string]string {
		m := map[string]string{}
		for _, p := range s.Protocols() {
			if p.Proto == "RIP" {
				m[p.Name] = p.Since
			}
		}
		return m
	}
	before := since()
	for deadline := time.Now().Add(5 * time.Second); len(before) != 2; before = since() {
		if time.Now().After(deadline) {
			t.Fatalf("RIP protocols %v, want rip4 and ripng", before)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // BIRD's times are to the millisecond
	s.AskRIP()
	after := since()
	for name, at := range before {
		if after[name] == at {
			t.Errorf("%s not restarted: since %s before and after", name, at)
		}
	}
	if strings.Contains(logged.String(), "asking the RIP neighbours again") {
		t.Errorf("AskRIP warned:\n%s", logged.String())
	}
}

// TestHostileNamesRender: port names as the LBs' hellos could carry them,
// hostile ones and random printable strings. Those the DIST decoder lets
// through (dist.CheckName) are rendered into BIRD's and FRR's configs as
// the ports' descriptions and comments, and each suite parses its config
// with exactly the protocols and interfaces of a benign one: nothing a
// name says becomes configuration.
func TestHostileNamesRender(t *testing.T) {
	names := []string{`e0"; protocol static { ipv4; route 0.0.0.0/0 blackhole; }; #`, "e0\nprotocol kernel {}", `e0\"`, "e0;}", "e0 #", "e0{", "e0!", "e0/..", "e0@x:y+z"}
	r := rand.New(rand.NewPCG(7, 7))
	for range 300 {
		b := make([]byte, 1+r.IntN(dist.NameLen-4))
		for i := range b {
			b[i] = byte(0x20 + r.IntN(0x5f))
		}
		names = append(names, string(b))
	}
	var passed []string
	for _, n := range names {
		if dist.CheckName("lb1/"+n) == nil {
			passed = append(passed, n)
		}
	}
	if len(passed) < 5 || len(passed) == len(names) {
		t.Fatalf("%d of %d names pass the decoder: the test tests nothing", len(passed), len(names))
	}
	render := func(names []string) (*RoutingConfig, string) {
		cfg := &RoutingConfig{Suite: "bird", ASN: 65000, RouterID: netip.MustParseAddr("192.0.2.1"), RunDir: t.TempDir()}
		for i, n := range names {
			vlan := uint16(10 + i)
			cfg.Ports = append(cfg.Ports, SuitePort{VLAN: vlan, Address: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 1}), 24), Name: "lb1/" + n})
			cfg.OSPF = append(cfg.OSPF, OSPFPort{VLAN: vlan})
			cfg.RIP = append(cfg.RIP, RIPPort{VLAN: vlan})
			cfg.BGP = append(cfg.BGP, BGPPeer{Neighbor: netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 2}), ASN: 65010})
		}
		var b bytes.Buffer
		if err := birdConf.Execute(&b, suiteConf{cfg, false}); err != nil {
			t.Fatal(err)
		}
		return cfg, b.String()
	}
	benign := make([]string, len(passed))
	for i := range benign {
		benign[i] = fmt.Sprintf("e%d", i)
	}
	_, want := render(benign)
	cfg, got := render(passed)
	path := filepath.Join(t.TempDir(), "bird.conf")
	os.WriteFile(path, []byte(got), 0o600)
	if out, err := exec.Command("bird", "-p", "-c", path).CombinedOutput(); err != nil {
		t.Fatalf("bird -p: %v: %s", err, out)
	}
	statements := func(conf string) (n [3]int) {
		for _, l := range strings.Split(conf, "\n") {
			l = strings.TrimSpace(l)
			n[0] += strings.Count(l, "protocol ")
			if !strings.HasPrefix(l, "#") && !strings.HasPrefix(l, "description") {
				n[1] += strings.Count(l, ";")
				n[2] += strings.Count(l, "{")
			}
		}
		return n
	}
	if statements(got) != statements(want) {
		t.Errorf("names changed BIRD's config: protocols, statements, blocks %v, with benign names %v", statements(got), statements(want))
	}
	// FRR: each daemon checks its own file.
	cfg.Suite = "frr"
	os.Chmod(cfg.RunDir, 0o755)
	f := &FRR{cfg: cfg, dir: filepath.Join(cfg.RunDir, "frr"), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := f.writeConfig(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"ospfd", "ripd", "bgpd", "zebra"} {
		p := filepath.Join(f.dir, d+".conf")
		out, err := exec.Command("/usr/lib/frr/"+d, "--dryrun", "-f", p, "-i", filepath.Join(f.dir, d+".pid"), "--vty_socket", f.dir).CombinedOutput()
		if err != nil || strings.Contains(string(out), "rror") || strings.Contains(string(out), "Unknown command") {
			b, _ := os.ReadFile(p)
			t.Errorf("%s refuses a config with the names: %v: %s\n%s", d, err, out, b)
		}
	}
	t.Logf("%d of %d names passed the decoder; BIRD and FRR took every one as a description", len(passed), len(names))
}

// TestBIRDCheck: a routing section BIRD would refuse (a hold time of 1 s:
// it takes 3 to 65,535) is refused by Check with BIRD's own error and
// line, and the running BIRD and its file are as they were; one it takes
// passes, and applies.
func TestBIRDCheck(t *testing.T) {
	cfg := &RoutingConfig{ASN: 65000, RouterID: netip.MustParseAddr("192.0.2.1"), RunDir: t.TempDir()}
	s, err := StartBIRD(cfg, false, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := s.Query("show status"); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("BIRD's socket: %v", err)
		}
	}
	conf := filepath.Join(cfg.RunDir, "bird.conf")
	before, _ := os.ReadFile(conf)
	bad := *cfg
	bad.BGP = []BGPPeer{{Neighbor: netip.MustParseAddr("192.0.2.10"), ASN: 65010, HoldTime: 1}}
	err = s.Check(&bad)
	if err == nil || !strings.Contains(err.Error(), "bird-check.conf:") || !strings.Contains(err.Error(), "nothing applied") {
		t.Fatalf("Check of a hold time of 1 s: %v", err)
	}
	t.Logf("refused: %v", err)
	if after, _ := os.ReadFile(conf); !bytes.Equal(before, after) {
		t.Error("a refused check changed bird.conf")
	}
	if _, err := os.Stat(filepath.Join(cfg.RunDir, "bird-check.conf")); !os.IsNotExist(err) {
		t.Errorf("the checked file was left behind: %v", err)
	}
	if out, err := s.Query("show protocols"); err != nil || strings.Contains(out, "bgp") {
		t.Errorf("BIRD after a refused check: %v %s", err, out)
	}
	good := *cfg
	good.BGP = []BGPPeer{{Neighbor: netip.MustParseAddr("192.0.2.10"), ASN: 65010, HoldTime: 6}}
	if err := s.Check(&good); err != nil {
		t.Fatalf("Check of a good section: %v", err)
	}
	if err := s.Reconfigure(&good); err != nil {
		t.Fatal(err)
	}
	if out, _ := s.Query("show protocols"); !strings.Contains(out, "BGP") {
		t.Errorf("the good section not applied: %s", out)
	}
}
