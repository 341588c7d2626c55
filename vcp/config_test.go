package vcp

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/msrtest"
)

var goodVCP = msrtest.Testdata("vcp1.yaml")

func load(t *testing.T, text string) (*Config, error) {
	path := filepath.Join(t.TempDir(), "vcp.yaml")
	os.WriteFile(path, []byte(text), 0o644)
	return LoadConfig(path)
}

func TestLoadConfig(t *testing.T) {
	c, err := load(t, goodVCP)
	if err != nil {
		t.Fatal(err)
	}
	if c.modeOf("lb1") != dist.ModeHash || c.modeOf("lb2") != dist.ModeMaglev || c.ID == 0 || c.HelloInterval == 0 {
		t.Errorf("%+v", c)
	}
	cases := []struct{ edit, want string }{
		{"vlan: 11", "vlan: 10"},                             // two ports, one VLAN
		{`"02:00:00:00:e2:00"`, `"02:00:00:00:e0:00"`},       // one port twice
		{"mode: hash", "mode: random"},                       // bad mode
		{"{mode: maglev}", "{mode: fast}"},                   // bad LB mode
		{"vlan: 10}", "vlan: 5000}"},                         // VLAN range
		{"capacity_mbps: 500", "capacity: 500"},              // unknown key
		{"interface: eth0\n", ""},                            // missing key
		{"address: 192.0.2.1/24", "address: 2001:db8::1/64"}, // not IPv4
	}
	msgs := []string{"VLAN 10 is already", "is already configured", "mode \"random\"", "mode \"fast\"", "VLAN 1-4094",
		"unknown key \"capacity\"", "missing required key \"interface\"", "VLAN 1-4094 and an IPv4"}
	for i, c := range cases {
		text := strings.Replace(goodVCP, c.edit, c.want, 1)
		_, err := load(t, text)
		if err == nil || !strings.Contains(err.Error(), msgs[i]) || !strings.Contains(err.Error(), "vcp.yaml:") {
			t.Errorf("case %d: %v, want %q with a position", i, err, msgs[i])
		}
	}
}

// FuzzLoadConfig: no file makes the loader panic; refusals say where.
func FuzzLoadConfig(f *testing.F) {
	f.Add([]byte(goodVCP))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "f.yaml")
		os.WriteFile(path, data, 0o644)
		if _, err := LoadConfig(path); err != nil && !strings.Contains(err.Error(), "f.yaml:") {
			t.Fatalf("error without a position: %v", err)
		}
	})
}

// A BGP peer's export names what it may: a wrong kind is refused where it
// is written; absent, the peer gets connected and static.
func TestBGPExportConfig(t *testing.T) {
	routing := goodVCP + "routing:\n  asn: 65000\n  bgp:\n    - {neighbor: 192.0.2.10, asn: 65010}\n    - {neighbor: 192.0.2.11, asn: 65011, export: [bgp, ospf]}\n    - {neighbor: 192.0.2.12, asn: 65012, export: []}\n"
	c, err := load(t, routing)
	if err != nil {
		t.Fatal(err)
	}
	bgp := c.Routing.BGP
	if got := bgp[0].Exports(); !slices.Equal(got, []string{"connected", "static"}) || !bgp[1].Exporting("bgp") || bgp[1].Exporting("static") || len(bgp[2].Exports()) != 0 {
		t.Errorf("exports %v, %v, %v", bgp[0].Exports(), bgp[1].Exports(), bgp[2].Exports())
	}
	_, err = load(t, strings.Replace(routing, "export: [bgp, ospf]", "export: [bgp, everything]", 1))
	if err == nil || !strings.Contains(err.Error(), `export "everything"`) || !strings.Contains(err.Error(), "vcp.yaml:16:") {
		t.Errorf("%v, want the refusal of \"everything\" at its line, 16", err)
	}
}

// The peers an LB is sent: each BGP peer on its ports, with its port's
// VLAN and GTSM unless turned off; more than a PEERS frame holds on one
// LB's ports is refused at the peer's line.
func TestPeersConfig(t *testing.T) {
	routing := goodVCP + "routing:\n  asn: 65000\n  bgp:\n    - {neighbor: 192.0.2.10, asn: 65010}\n    - {neighbor: 198.51.100.11, asn: 65011, ttl_security: false}\n"
	c, err := load(t, routing)
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{cfg: c}
	if got := a.peersOf("lb1"); len(got) != 1 || got[0] != (dist.Peer{Addr: netip.MustParseAddr("192.0.2.10"), VLAN: 10, Flags: dist.PeerGTSM}) {
		t.Errorf("lb1's peers %+v", got)
	}
	if got := a.peersOf("lb2"); len(got) != 1 || got[0] != (dist.Peer{Addr: netip.MustParseAddr("198.51.100.11"), VLAN: 11}) {
		t.Errorf("lb2's peers %+v", got)
	}
	// FRR runs a GTSM peer's BFD as multihop: a BFD peer is without GTSM
	// there, and asking for both is refused.
	frr := goodVCP + "routing:\n  suite: frr\n  asn: 65000\n  bgp:\n    - {neighbor: 192.0.2.10, asn: 65010, bfd: true}\n"
	if c, err := load(t, frr); err != nil || c.Routing.BGP[0].GTSM() {
		t.Errorf("frr, bfd: %v, GTSM %v; want off", err, err == nil && c.Routing.BGP[0].GTSM())
	}
	_, err = load(t, strings.Replace(frr, "bfd: true", "bfd: true, ttl_security: true", 1))
	if err == nil || !strings.Contains(err.Error(), "ttl_security with bfd") || !strings.Contains(err.Error(), "vcp.yaml:16:") {
		t.Errorf("frr, bfd and ttl_security: %v, want refused at line 16", err)
	}
	many := goodVCP + "routing:\n  asn: 65000\n  bgp:\n"
	for i := range dist.MaxPeers + 1 {
		many += fmt.Sprintf("    - {neighbor: 192.0.2.%d, asn: 65010}\n", 10+i)
	}
	_, err = load(t, many)
	if want := fmt.Sprintf("vcp.yaml:%d:", 15+dist.MaxPeers); err == nil || !strings.Contains(err.Error(), "more than 57 peers on lb1's ports") || !strings.Contains(err.Error(), want) {
		t.Errorf("%v, want the peer past the limit refused at %s", err, want)
	}
}

// A port's unicast RPF: its own where written; absent, loose where a
// routing protocol runs on it and off elsewhere; sent to the back-ends
// in their ports and to the LBs as the URPF flag; a wrong mode refused at
// its line.
func TestURPFConfig(t *testing.T) {
	text := strings.Replace(goodVCP, `address: 192.0.2.1/24, vlan: 10}`, `address: 192.0.2.1/24, vlan: 10, urpf: strict}`, 1) +
		"routing:\n  asn: 65000\n  bgp:\n    - {neighbor: 198.51.100.11, asn: 65011}\n"
	c, err := load(t, text)
	if err != nil {
		t.Fatal(err)
	}
	if got := []dist.URPFMode{c.urpfOf(c.ExternalPorts[0]), c.urpfOf(c.ExternalPorts[1])}; got[0] != dist.URPFStrict || got[1] != dist.URPFLoose {
		t.Errorf("urpf %v, want strict (written), loose (a BGP peer)", got)
	}
	a := &Agent{cfg: c}
	m, _ := a.backendSettings()
	if m.Ports[0].URPF != dist.URPFStrict || m.Ports[1].URPF != dist.URPFLoose {
		t.Errorf("BACKEND_CONFIG ports %+v", m.Ports)
	}
	if c, err := load(t, goodVCP); err != nil || c.urpfOf(c.ExternalPorts[0]) != dist.URPFOff {
		t.Errorf("a port with no routing protocol: %v (%v), want off", c.urpfOf(c.ExternalPorts[0]), err)
	}
	_, err = load(t, strings.Replace(text, "urpf: strict", "urpf: paranoid", 1))
	if err == nil || !strings.Contains(err.Error(), `urpf "paranoid": off, loose or strict`) || !strings.Contains(err.Error(), "vcp.yaml:8:") {
		t.Errorf("%v, want urpf \"paranoid\" refused at line 8", err)
	}
}

// Per-peer prefix lists and the prefix limit: parsed into patterns as BIRD
// and FRR write them; a wrong pattern or restart refused at its line.
func TestBGPPrefixPolicy(t *testing.T) {
	routing := goodVCP + "routing:\n  asn: 65000\n  bgp:\n" +
		"    - {neighbor: 192.0.2.10, asn: 65010, import_prefixes: [10.0.0.0/8+, \"172.16.0.0/12{16,24}\", 192.168.1.0/24], export_prefixes: [], max_prefixes: 100, max_prefixes_restart: 2m}\n" +
		"    - {neighbor: 192.0.2.11, asn: 65011}\n"
	c, err := load(t, routing)
	if err != nil {
		t.Fatal(err)
	}
	p, q := c.Routing.BGP[0], c.Routing.BGP[1]
	var birds, frrs []string
	for _, x := range p.ImportPrefixes {
		birds, frrs = append(birds, x.String()), append(frrs, x.FRR())
	}
	if want := []string{"10.0.0.0/8+", "172.16.0.0/12{16,24}", "192.168.1.0/24"}; !slices.Equal(birds, want) {
		t.Errorf("BIRD patterns %q, want %q", birds, want)
	}
	if want := []string{"10.0.0.0/8 le 32", "172.16.0.0/12 ge 16 le 24", "192.168.1.0/24"}; !slices.Equal(frrs, want) {
		t.Errorf("FRR entries %q, want %q", frrs, want)
	}
	if !p.ExportsNothing() || p.BIRDExport() != "none" || p.BIRDLimit() != "import limit 100 action restart;" || p.RestartSeconds() != 120 {
		t.Errorf("peer 0: export %q limit %q restart %d s", p.BIRDExport(), p.BIRDLimit(), p.RestartSeconds())
	}
	if q.ImportsNothing() || q.BIRDImport() != "all" || q.BIRDLimit() != "import limit 2000000 action disable;" {
		t.Errorf("peer 1 (no lists, the default limit): import %q limit %q", q.BIRDImport(), q.BIRDLimit())
	}
	line := strings.Count(routing[:strings.Index(routing, "- {neighbor: 192.0.2.10")], "\n") + 1
	for _, c := range []struct{ from, to, want string }{
		{"10.0.0.0/8+", "10.0.0.1/8+", `prefix "10.0.0.1/8+": an IPv4 or IPv6 prefix (its host bits zero)`},
		{"172.16.0.0/12{16,24}", "172.16.0.0/12{8,24}", `prefix "172.16.0.0/12{8,24}": lengths {MIN,MAX} with 12 <= MIN`},
		{"192.168.1.0/24]", "2001:db8::1/32]", `prefix "2001:db8::1/32"`},
		{"192.168.1.0/24]", `"2001:db8::/32{48,129}"]`, `lengths {MIN,MAX} with 32 <= MIN <= MAX <= 128`},
		{"192.168.1.0/24]", "\"::ffff:0.0.0.0/96\"]", `prefix "::ffff:0.0.0.0/96"`},
		{"max_prefixes_restart: 2m", "max_prefixes_restart: 90s", "max_prefixes_restart 1m30s: whole minutes"},
	} {
		_, err := load(t, strings.Replace(routing, c.from, c.to, 1))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), fmt.Sprintf("vcp.yaml:%d:", line)) {
			t.Errorf("%s -> %s: %v, want %q at line %d", c.from, c.to, err, c.want, line)
		}
	}
}

// TCP-MD5 passwords per peer: written in the config or read from a file's
// first line; one of the two, 1 to 80 characters BIRD and FRR can both
// take, else refused at the peer's line.
func TestBGPPassword(t *testing.T) {
	file := filepath.Join(t.TempDir(), "peer.pw")
	os.WriteFile(file, []byte("s3cret-from-file\nignored\n"), 0o600)
	routing := goodVCP + "routing:\n  asn: 65000\n  bgp:\n" +
		"    - {neighbor: 192.0.2.10, asn: 65010, password: \"Tr0ub4dor&3\"}\n" +
		"    - {neighbor: 192.0.2.11, asn: 65011, password_file: " + file + "}\n"
	c, err := load(t, routing)
	if err != nil {
		t.Fatal(err)
	}
	if p, q := c.Routing.BGP[0].Password, c.Routing.BGP[1].Password; p != "Tr0ub4dor&3" || q != "s3cret-from-file" {
		t.Errorf("passwords %q and %q", p, q)
	}
	line := strings.Count(routing[:strings.Index(routing, "- {neighbor: 192.0.2.11")], "\n") + 1
	for _, c := range []struct{ from, to, want string }{
		{"password_file: " + file, "password_file: /nonexistent/pw", "password_file: open /nonexistent/pw"},
		{"password_file: " + file, "password_file: " + file + ", password: x", "password and password_file: one of them"},
		{"password_file: " + file, `password: "two words"`, `password: ' ' is not allowed`},
		{"password_file: " + file, `password: "quo\"te"`, `password: '"' is not allowed`},
		{"password_file: " + file, "password: " + strings.Repeat("x", 81), "password: 81 characters: 1 to 80"},
	} {
		_, err := load(t, strings.Replace(routing, c.from, c.to, 1))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), fmt.Sprintf("vcp.yaml:%d:", line)) {
			t.Errorf("%s -> %s: %v, want %q at line %d", c.from, c.to, err, c.want, line)
		}
	}
}

// ospf_export names what OSPF announces as external routes; a kind it
// cannot, or an export without OSPF ports, is refused at the routing
// section's line.
func TestOSPFExport(t *testing.T) {
	routing := goodVCP + "routing:\n  asn: 65000\n  ospf:\n    - {vlan: 11}\n  ospf_export: [connected, bgp]\n"
	c, err := load(t, routing)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Routing.BIRDOSPFExport(); got != "where source ~ [RTS_DEVICE, RTS_BGP]" || c.Routing.OSPFExporting("static") {
		t.Errorf("BIRD's OSPF export %q, static %v", got, c.Routing.OSPFExporting("static"))
	}
	line := strings.Count(routing[:strings.Index(routing, "  asn: 65000")], "\n") + 1 // the section's first key
	for _, c := range []struct{ from, to, want string }{
		{"[connected, bgp]", "[connected, ospf]", `ospf_export "ospf": connected, static, bgp`},
		{"  ospf:\n    - {vlan: 11}\n", "", "ospf_export without ospf ports"},
	} {
		_, err := load(t, strings.Replace(routing, c.from, c.to, 1))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), fmt.Sprintf("vcp.yaml:%d:", line)) {
			t.Errorf("%s -> %s: %v, want %q at line %d", c.from, c.to, err, c.want, line)
		}
	}
}

// RIP on external ports: announcing what it learned and rip_export
// (connected by default); a port no external port has, a kind RIP cannot
// announce, or an export without RIP ports refused at its line.
func TestRIPConfig(t *testing.T) {
	routing := goodVCP + "routing:\n  asn: 65000\n  rip:\n    - {vlan: 11}\n"
	c, err := load(t, routing)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Routing.BIRDRIPExport(); got != "where source ~ [RTS_RIP, RTS_DEVICE]" {
		t.Errorf("BIRD's RIP export by default: %q", got)
	}
	c, err = load(t, routing+"  rip_export: [static, ospf]\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Routing.BIRDRIPExport(); got != "where source ~ [RTS_RIP, RTS_STATIC, RTS_OSPF, RTS_OSPF_IA, RTS_OSPF_EXT1, RTS_OSPF_EXT2]" || c.Routing.RIPExporting("connected") {
		t.Errorf("BIRD's RIP export of static and ospf: %q", got)
	}
	first := strings.Count(routing[:strings.Index(routing, "  asn: 65000")], "\n") + 1
	vlanLine := strings.Count(routing[:strings.Index(routing, "- {vlan: 11}")], "\n") + 1
	for _, c := range []struct {
		text, want string
		line       int
	}{
		{strings.Replace(routing, "{vlan: 11}", "{vlan: 99}", 1), "RIP on VLAN 99: no external port has it", vlanLine},
		{routing + "  rip_export: [bgp, rip]\n", `rip_export "rip": connected, static, bgp, ospf`, first},
		{strings.Replace(routing, "  rip:\n    - {vlan: 11}\n", "  rip_export: [connected]\n", 1), "rip_export without rip or ripng ports", first},
	} {
		_, err := load(t, c.text)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), fmt.Sprintf("vcp.yaml:%d:", c.line)) {
			t.Errorf("%v, want %q at line %d", err, c.want, c.line)
		}
	}
}

// TestRoutingAuthConfig: a port's routing authentication, its defaults,
// its secret from a file, and refusals at their lines: what a suite
// cannot sign, RIPng (no suite authenticates it), a secret that would
// break out of the suite's config.
func TestRoutingAuthConfig(t *testing.T) {
	dual := strings.Replace(goodVCP, "vlan: 11, mtu: 1500}", `vlan: 11, mtu: 1500, address6: "2001:db8:11::1/64"}`, 1)
	secret := filepath.Join(t.TempDir(), "ospf.key")
	os.WriteFile(secret, []byte("from-a-file\n"), 0o600)
	routing := dual + "routing:\n  asn: 65000\n  ospf:\n    - {vlan: 11, auth: {secret: s3cret}}\n  ospfv3:\n    - {vlan: 11, auth: {secret_file: " + secret + ", key_id: 9}}\n  rip:\n    - {vlan: 11, auth: {algorithm: md5, secret: rip-s3cret}}\n"
	c, err := load(t, routing)
	if err != nil {
		t.Fatal(err)
	}
	if a := c.Routing.OSPF[0].Auth; a.Algorithm != "hmac-sha256" || a.KeyID != 1 || a.BIRDAlgorithm() != "hmac sha256" {
		t.Errorf("OSPF auth's defaults: %+v", a)
	}
	if a := c.Routing.OSPFv3[0].Auth; a.Secret != "from-a-file" || a.KeyID != 9 || a.FRRHashAlgo() != "hmac-sha-256" {
		t.Errorf("OSPFv3 auth from a file: %+v", a)
	}
	authLine := func(text, of string) int { return strings.Count(text[:strings.Index(text, of)], "\n") + 1 }
	frr := strings.Replace(routing, "asn: 65000", "asn: 65000\n  suite: frr", 1)
	for _, c := range []struct {
		text, at, want string
	}{
		{strings.Replace(routing, "auth: {secret: s3cret}", "auth: {secret: s3cret, algorithm: sha3}", 1), "auth: {secret: s3cret", `algorithm "sha3": hmac-sha256`},
		{strings.Replace(routing, "auth: {secret: s3cret}", "auth: {}", 1), "auth: {}", "secret or secret_file, one of them"},
		{strings.Replace(routing, "auth: {secret: s3cret}", `auth: {secret: 's3"; import all; #'}`, 1), "auth: {secret: 's3", "secret: '\"' is not allowed"},
		{strings.Replace(routing, "auth: {secret: s3cret}", "auth: {secret: s3cret, algorithm: md5}", 1) + "", "", ""},
		{strings.Replace(routing, "key_id: 9}", "key_id: 9, algorithm: md5}", 1), "auth: {secret_file", "OSPFv3's trailer is HMAC-SHA only"},
		{strings.Replace(routing, "rip-s3cret}", "rip-s3cret-longer-than-16}", 1), "auth: {algorithm: md5", "keyed MD5 takes at most 16"},
		{frr, "auth: {secret: s3cret}", "FRR 8's ospfd signs with md5 only"},
		{strings.Replace(frr, "algorithm: md5, ", "", 1), "auth: {secret: rip", "FRR 8's ripd signs with md5 only"},
		{routing + "  ripng:\n    - {vlan: 11, auth: {secret: x}}\n", "auth: {secret: x}", "neither BIRD nor FRR authenticates RIPng"},
		// BFD: BIRD's algorithms, its key lengths, and not with FRR.
		{routing + "  bfd_auth: {secret: bfd-s3cret, key_id: 5}\n", "", ""},
		{routing + "  bfd_auth: {secret: bfd, algorithm: hmac-sha256}\n", "bfd_auth", `bfd_auth algorithm "hmac-sha256": meticulous-keyed-sha1`},
		{routing + "  bfd_auth: {secret: longer-than-twenty-chars}\n", "bfd_auth", "meticulous-keyed-sha1 takes at most 20"},
		{routing + "  bfd_auth: {secret: seventeen-chars-x, algorithm: keyed-md5}\n", "bfd_auth", "keyed-md5 takes at most 16"},
		{strings.Replace(strings.Replace(frr, "auth: {secret: s3cret}", "auth: {algorithm: md5, secret: s3cret}", 1), "  ospfv3:\n    - {vlan: 11, auth: {secret_file: "+secret+", key_id: 9}}\n", "", 1) + "  bfd_auth: {secret: bfd}\n", "bfd_auth", "FRR 8's bfdd has no authentication"},
		{strings.Replace(strings.Replace(frr, "auth: {secret: s3cret}", "auth: {algorithm: md5, secret: s3cret}", 1), "algorithm: md5, secret: rip", "algorithm: md5, secret: rip", 1), "auth: {secret_file", "FRR 8.4's OSPFv3 authentication trailer does not verify"},
	} {
		_, err := load(t, c.text)
		if c.want == "" {
			if err != nil {
				t.Errorf("%q: %v", c.text, err)
			}
			continue
		}
		line := authLine(c.text, c.at)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), fmt.Sprintf("vcp.yaml:%d:", line)) {
			t.Errorf("%v, want %q at line %d", err, c.want, line)
		}
	}
}

// TestSNMPConfig: the snmp: section's defaults, what snmpd is told, and
// refusals at their lines.
func TestSNMPConfig(t *testing.T) {
	good := goodVCP + `snmp:
  community: public
  sources: [10.0.0.0/24, "2001:db8:ff::/48"]
  users:
    - {name: ops, auth_password: auth-secret, priv_password: priv-secret}
  traps:
    - {host: "192.0.2.10:162"}
`
	c, err := load(t, good)
	if err != nil {
		t.Fatal(err)
	}
	s := c.SNMP
	if s.SysName != "vcp1" || s.Listen != "udp:161" || s.Users[0].Auth != "SHA-256" || s.Users[0].Priv != "AES" || s.Traps[0].Community != "public" {
		t.Errorf("defaults: %+v", s)
	}
	var b strings.Builder
	if err := snmpdConf.Execute(&b, struct {
		*SNMPConfig
		Dir, Socket, Owner, Group string
	}{s, "/run/x", "/run/x/agentx.sock", "Debian-snmp", "frr"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"rocommunity public 10.0.0.0/24 -V routerView\nrocommunity6 public 2001:db8:ff::/48 -V routerView\n", `createUser ops SHA-256 "auth-secret" AES "priv-secret"`,
		"rouser ops priv -V routerView", "trap2sink 192.0.2.10:162 public", "agentXSocket /run/x/agentx.sock", "master agentx", "agentXPerms 0660 0755 Debian-snmp frr"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("snmpd.conf lacks %q:\n%s", want, b.String())
		}
	}
	for _, c := range []struct{ edit, want, msg string }{
		{"auth_password: auth-secret", "auth_password: short", "passwords of at least 8 characters"},
		{"priv_password: priv-secret}", "priv_password: priv-secret, priv: 3DES}", `priv "3DES": AES (DES with weak: true)`},
		{"priv_password: priv-secret}", "priv_password: priv-secret, priv: DES}", "priv DES is weak"},
		{"priv_password: priv-secret}", "priv_password: priv-secret, auth: SHA}", "auth SHA is weak"},
		{"priv_password: priv-secret}", "priv_password: priv-secret, auth: MD5, weak: true, priv: DES}", ""},
		{"  sources: [10.0.0.0/24, \"2001:db8:ff::/48\"]\n", "", "snmp community: sources, the prefixes that may read it"},
		{"community: public", `community: "two words"`, "community: no spaces"},
		{"community: public\n  sources: [10.0.0.0/24, \"2001:db8:ff::/48\"]\n  users:\n    - {name: ops, auth_password: auth-secret, priv_password: priv-secret}\n", "", "a community, users, or both"},
		{`host: "192.0.2.10:162"`, `host: "192.0.2.10"`, "snmp.traps[0].host: not an ip:port"},
	} {
		text := strings.Replace(good, c.edit, c.want, 1)
		if _, err := load(t, text); c.msg == "" {
			if err != nil {
				t.Errorf("%s -> %s: %v", c.edit, c.want, err)
			}
		} else if err == nil || !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), "vcp.yaml:") {
			t.Errorf("%s -> %s: %v, want %q at a line", c.edit, c.want, err, c.msg)
		}
	}
}

// TestIPv6Config: a port's address6, BGP over IPv6 and IPv6 over an IPv4
// session, IPv6 static routes; each misuse refused at its line.
func TestIPv6Config(t *testing.T) {
	dual := strings.Replace(goodVCP, "address: 192.0.2.1/24, vlan: 10", `address: 192.0.2.1/24, address6: "2001:db8:10::1/64", vlan: 10`, 1) +
		"routing:\n  asn: 65000\n  bgp:\n" +
		"    - {neighbor: \"2001:db8:10::20\", asn: 65020}\n" +
		"    - {neighbor: 192.0.2.21, asn: 65021, ipv6: true}\n" +
		"  static:\n    - {to: \"2001:db8:99::/48\", via: \"2001:db8:10::254\"}\n"
	c, err := load(t, dual)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ExternalPorts[0].Address6.String(); got != "2001:db8:10::1/64" {
		t.Errorf("address6 %s", got)
	}
	ch := c.Routing.BGP[1].Channels(c.port6Of(c.Routing.BGP[1].Neighbor))
	if len(ch) != 2 || ch[1].Family != "ipv6" || ch[1].NextHop != "next hop address 2001:db8:10::1;" {
		t.Errorf("IPv4 session with ipv6: channels %+v", ch)
	}
	line := func(s string) int { return strings.Count(dual[:strings.Index(dual, s)], "\n") + 1 }
	for _, c := range []struct{ from, to, want, at string }{
		{`address6: "2001:db8:10::1/64"`, `address6: "fe80::1/64"`, "address6 fe80::1/64 is not a global IPv6 address", "- {lb: lb1"},
		{`neighbor: "2001:db8:10::20"`, `neighbor: "2001:db8:11::20"`, "BGP neighbour 2001:db8:11::20: an address on an external port's subnet", `- {neighbor: "2001`},
		{"neighbor: 192.0.2.21, asn: 65021", "neighbor: 198.51.100.21, asn: 65021", "BGP neighbour 198.51.100.21: ipv6 needs an address6 on its port", "- {neighbor: 192.0.2.21"},
		{`via: "2001:db8:10::254"`, "via: 192.0.2.254", "static route 2001:db8:99::/48 via 192.0.2.254: a prefix via an address of its family", `- {to: "2001`},
	} {
		_, err := load(t, strings.Replace(dual, c.from, c.to, 1))
		at := line(c.at)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), fmt.Sprintf("vcp.yaml:%d:", at)) {
			t.Errorf("%s -> %s: %v, want %q at line %d", c.from, c.to, err, c.want, at)
		}
	}
	// Router advertisements: on a port with an address6, to the suite;
	// refused at the port's line without one, or without a routing
	// section.
	ra := strings.Replace(dual, `address6: "2001:db8:10::1/64", vlan: 10`, `address6: "2001:db8:10::1/64", vlan: 10, router_advertisements: true`, 1)
	if c, err := load(t, ra); err != nil || !c.ExternalPorts[0].RouterAdvertisements || c.ExternalPorts[1].RouterAdvertisements {
		t.Errorf("router_advertisements on VLAN 10: %v", err)
	}
	for name, text := range map[string]string{
		"without an address6": strings.Replace(ra, "vlan: 11, mtu: 1500", "vlan: 11, mtu: 1500, router_advertisements: true", 1),
		"without routing":     ra[:strings.Index(ra, "routing:")],
	} {
		port := "lb1, mac"
		if name == "without an address6" {
			port = "lb2, mac"
		}
		want := fmt.Sprintf("vcp.yaml:%d:", strings.Count(text[:strings.Index(text, port)], "\n")+1)
		if _, err := load(t, text); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "router_advertisements needs an address6 and a routing section") {
			t.Errorf("router_advertisements %s: %v, want it refused at %s", name, err, want)
		}
	}
	// OSPFv3 and RIPng need a port with an IPv6 address on their VLAN.
	for _, proto := range []string{"OSPFv3", "RIPng"} {
		v6 := strings.Replace(dual, "  static:\n", "  "+strings.ToLower(proto)+":\n    - {vlan: 10}\n  static:\n", 1)
		if c, err := load(t, v6); err != nil || len(c.Routing.OSPFv3)+len(c.Routing.RIPng) != 1 {
			t.Errorf("%s on VLAN 10: %v", proto, err)
		}
		if _, err := load(t, strings.Replace(v6, "- {vlan: 10}", "- {vlan: 11}", 1)); err == nil || !strings.Contains(err.Error(), proto+" on VLAN 11: no external port with an address6 has it") {
			t.Errorf("%s on a port without address6: %v", proto, err)
		}
	}
	// A static file via an IPv6 gateway on a port's IPv6 subnet (its
	// IPv6 prefixes), with either suite; one off every port's subnets is
	// refused at its line.
	files := dual + "  static_files:\n    - {file: /dev/null, via: \"2001:db8:10::253\"}\n"
	if c, err := load(t, files); err != nil || len(c.Routing.StaticFiles6()) != 1 || c.Routing.StaticFiles6()[0].I != 0 {
		t.Errorf("an IPv6 static file: %v", err)
	}
	last := strings.Count(files, "\n")
	frr := strings.Replace(files, "asn: 65000\n", "asn: 65000\n  suite: frr\n", 1)
	if c, err := load(t, frr); err != nil || len(c.Routing.StaticFiles6()) != 1 || len(c.Routing.Static6()) != 1 {
		t.Errorf("IPv6 BGP, static routes and files with FRR: %v", err)
	}
	want := fmt.Sprintf("vcp.yaml:%d:7: static file /dev/null via 2001:db8:11::253: an address on an external port's subnet", last)
	if _, err := load(t, strings.Replace(files, "via: \"2001:db8:10::253\"", "via: \"2001:db8:11::253\"", 1)); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%v, want %q", err, want)
	}
}

// Static neighbours: each on its port's subnet (IPv6: or link-local) at
// a unicast MAC, once a port; the back-ends get the whole set. A bad one
// is refused at its line.
func TestStaticNeighborsConfig(t *testing.T) {
	good := strings.Replace(goodVCP, `address: 192.0.2.1/24, vlan: 10}`, `address: 192.0.2.1/24, address6: "2001:db8:10::1/64", vlan: 10,
      neighbors: [{address: 192.0.2.20, mac: "02:00:00:00:20:20"}, {address: "fe80::20", mac: "02:00:00:00:20:20"}]}`, 1)
	c, err := load(t, good)
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{cfg: c}
	got := a.staticNeighbors().Neighbors
	if len(got) != 2 || got[0].Addr != netip.MustParseAddr("192.0.2.20") || got[0].VLAN != 10 || got[0].MAC.String() != "02:00:00:00:20:20" ||
		got[1].Addr != netip.MustParseAddr("fe80::20") {
		t.Errorf("static neighbours sent: %+v", got)
	}
	for _, c := range []struct{ from, to, want string }{
		{"address: 192.0.2.20,", "address: 198.51.100.20,", "neighbor 198.51.100.20: not a host of port"},
		{"address: 192.0.2.20,", "address: 192.0.2.1,", "neighbor 192.0.2.1: not a host of port"},
		{`address: 192.0.2.20, mac: "02:00:00:00:20:20"`, `address: 192.0.2.20, mac: "01:00:5e:00:00:05"`, `neighbor 192.0.2.20: MAC "01:00:5e:00:00:05" is no unicast`},
		{`{address: "fe80::20"`, `{address: 192.0.2.20`, "neighbor 192.0.2.20 is already configured at"},
	} {
		text := strings.Replace(good, c.from, c.to, 1)
		_, err := load(t, text)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "vcp.yaml:9:") {
			t.Errorf("%s -> %s: %v, want %q at line 9", c.from, c.to, err, c.want)
		}
	}
}

// TestMaxPrefixesDefault: a peer that names no max_prefixes gets the
// default limit, shutting its session at a leak, not none.
func TestMaxPrefixesDefault(t *testing.T) {
	c, err := load(t, goodVCP+"routing:\n  asn: 65000\n  bgp:\n    - {neighbor: 192.0.2.10, asn: 65010}\n    - {neighbor: 192.0.2.11, asn: 65011, max_prefixes: 100}\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Routing.BGP[0].BIRDLimit(); got != "import limit 2000000 action disable;" {
		t.Errorf("a peer without max_prefixes: %q", got)
	}
	if got := c.Routing.BGP[1].BIRDLimit(); got != "import limit 100 action disable;" {
		t.Errorf("a peer with max_prefixes 100: %q", got)
	}
}

// A range of external ports: every LB of its range, the ports numbered
// in each, MACs, addresses and descriptions from their templates, VLANs
// one each from the first; checked as written ports are, at its line.
func TestExternalPortRanges(t *testing.T) {
	head := "name: vcp1\nkey_file: /etc/msr/key\ninterface: eth0\nexternal_ports:\n  - {lb: lb1, mac: \"02:00:00:00:e0:00\", address: 192.0.2.1/24, vlan: 10}\nexternal_port_ranges:\n"
	rng := `  - {lbs: "lb[2-3]", ports: "[0-1]", mac: "02:00:00:{lb:02x}:e{port}:00", address: "10.{lb}.{port}.1/24", address6: "2001:db8:{lb}:{port}::1/64", vlan: 100, description: "lb{lb} port {port}", mtu: 1500}` + "\n"
	c, err := load(t, head+rng)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range c.ExternalPorts {
		got = append(got, fmt.Sprintf("%s %s %s %s %d %d %q", p.LB, p.MAC, p.Address, p.Address6, p.VLAN, p.MTU, p.Description))
	}
	want := []string{
		`lb1 02:00:00:00:e0:00 192.0.2.1/24 invalid Prefix 10 0 ""`,
		`lb2 02:00:00:02:e0:00 10.2.0.1/24 2001:db8:2::1/64 100 1500 "lb2 port 0"`,
		`lb2 02:00:00:02:e1:00 10.2.1.1/24 2001:db8:2:1::1/64 101 1500 "lb2 port 1"`,
		`lb3 02:00:00:03:e0:00 10.3.0.1/24 2001:db8:3::1/64 102 1500 "lb3 port 0"`,
		`lb3 02:00:00:03:e1:00 10.3.1.1/24 2001:db8:3:1::1/64 103 1500 "lb3 port 1"`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("ports:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Each refused at the range's line, 7.
	for _, c := range []struct{ from, to, want string }{
		{`lbs: "lb[2-3]"`, `lbs: "lb2-3"`, `is not NAME[FIRST-LAST]`},
		{`lbs: "lb[2-3]"`, `lbs: "lb[3-2]"`, `FIRST no more than LAST`},
		{`ports: "[0-1]"`, `ports: "e[0-1]"`, `a range of numbers alone`},
		{`vlan: 100`, `vlan: 4093`, `VLANs 4093 to 4096: VLAN ids are 1-4094`},
		{`vlan: 100`, `vlan: 9`, `VLAN 10 is already the port at`},     // the written port's VLAN
		{`{lb:02x}:e{port}`, `01:e{port}`, `is already configured at`}, // lb2's and lb3's MACs the same
		{`{lb:02x}:e{port}`, `{rack}:e{port}`, `{rack}: the placeholders are {lb} and {port}`},
		{`address: "10.{lb}.{port}.1/24"`, `address: "10.{lb}.{port}.300/24"`, `lb2 port 0: address "10.2.0.300/24"`},
		{`ports: "[0-1]", mac: "02:00:00:{lb:02x}:e{port}:00"`, `ports: "[0-15]", mac: "02:00:00:{lb:02x}:{port:02x}:00"`, `more than 15 external ports on lb2: an LB holds 16 ports`},
	} {
		_, err := load(t, head+strings.Replace(rng, c.from, c.to, 1))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "vcp.yaml:7:") {
			t.Errorf("%s -> %s: %v, want %q at line 7", c.from, c.to, err, c.want)
		}
	}
}
