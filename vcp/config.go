// Package vcp is msr's virtual control plane: the element that makes the
// cluster one router. This part discovers the elements from their DIST
// hellos, keeps the topology, announces itself, and computes and pushes
// every LB's port configuration and balancing table.
package vcp

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/acl"
	"github.com/msr-router/msr/internal/api"
	"github.com/msr-router/msr/internal/config"
	elementcfg "github.com/msr-router/msr/internal/element"
	"github.com/msr-router/msr/internal/sflow"
)

// FileConfig is `msr vcp --config FILE.yaml`: the router as a whole.
type FileConfig struct {
	elementcfg.Config `yaml:",inline"`
	Interface         string `yaml:"interface" msr:"required"` // on the interconnect
	// Mode is the balancing mode of every LB not named in LBs.
	Mode          string               `yaml:"mode"`
	LBs           map[string]*LBConfig `yaml:"lbs"`
	ExternalPorts []ExternalPortConfig `yaml:"external_ports"`
	// ExternalPortRanges write many external ports each (portrange.go).
	ExternalPortRanges []ExternalPortRange       `yaml:"external_port_ranges"`
	Backends           map[string]*BackendConfig `yaml:"backends"`
	// ACL is the router's: every back-end applies it alike (backends.go);
	// absent, a back-end keeps its own file's.
	ACL []acl.Config `yaml:"acl"`
	// Routing configures the routing suite that terminates the router's
	// protocols on the mirrors (none: no suite runs).
	Routing *RoutingConfig `yaml:"routing"`
	// Standby makes this VCP one of two, the active one elected by VRRP
	// (election.go). None: this VCP is always active.
	Standby *StandbyConfig `yaml:"standby"`
	// SNMP makes the router answer SNMP (snmp.go); none: it does not.
	SNMP *SNMPConfig `yaml:"snmp"`
	// SFlow has the LBs export sFlow v5 from the router's external ports
	// as one agent (sflow.go); none: each LB's own file says.
	SFlow *sflow.FileConfig `yaml:"sflow"`
	// AsStandby is `msr vcp --standby`: the lower VRRP priority, so the
	// other VCP wins when both start together.
	AsStandby bool            `yaml:"-"`
	Warnings  config.Warnings `yaml:"-"`
	Pos       config.Pos      `yaml:"-"`
}

// Config is a VCP's configuration as the agent runs it: its file,
// checked and with its defaults filled (FileConfig.Parse), and what the
// checks parsed from it.
type Config struct {
	*FileConfig
	// DefaultMode is the balancing mode of every LB not in LBModes.
	DefaultMode dist.BalanceMode
	LBModes     map[string]dist.BalanceMode
	// ACLRules is the router's ACL; HasACL says the file has the key (an
	// empty list: no ACL on any back-end).
	ACLRules []dist.ACLRule
	HasACL   bool
}

// RoutingConfig is the routing suite and its protocols.
type RoutingConfig struct {
	// Suite is bird (BIRD 2, the default) or frr (FRR's zebra, bgpd,
	// staticd and ospfd).
	Suite    string     `yaml:"suite"`
	ASN      uint32     `yaml:"asn" msr:"required"`
	RouterID netip.Addr `yaml:"router_id"` // default: the first external port's address
	BGP      []BGPPeer  `yaml:"bgp"`
	// Static routes of the router, via gateways on the external ports.
	Static []StaticRoute `yaml:"static"`
	// StaticFiles load many static routes: every prefix of a pyasn-format
	// file (such as a RouteViews snapshot) via one gateway.
	StaticFiles []StaticFile `yaml:"static_files"`
	// OSPF runs on the mirrors of the ports with these VLANs, area 0.
	OSPF []OSPFPort `yaml:"ospf"`
	// OSPFv3 (RFC 5340, IPv6) runs on the mirrors of the ports with these
	// VLANs, area 0; each port needs an address6. Its routes' next hops
	// are the neighbours' link-local addresses, which reach the back-ends
	// with their port's VLAN: in the RIB feed with BIRD, in LINK_ROUTES
	// with FRR (docs/vcp.md).
	OSPFv3 []OSPFPort `yaml:"ospfv3"`
	// OSPFExport is what else OSPF announces, as AS-external routes:
	// connected (the external ports' networks), static, bgp. Absent:
	// nothing but the OSPF ports' own networks.
	OSPFExport []string `yaml:"ospf_export"`
	// BFDInterval and BFDMultiplier are BFD's timers with every peer that
	// has bfd: a packet every interval (default 300ms, 10ms to 10s), down
	// after multiplier (default 3) missed.
	BFDInterval   time.Duration `yaml:"bfd_interval"`
	BFDMultiplier uint8         `yaml:"bfd_multiplier"`
	// BFDAuth signs and checks the BFD sessions (RFC 5880 §6.7):
	// algorithm meticulous-keyed-sha1 (the default), keyed-sha1,
	// meticulous-keyed-md5 or keyed-md5. BIRD only: FRR 8's bfdd has no
	// authentication.
	BFDAuth *Auth `yaml:"bfd_auth"`
	// RIP runs RIPv2 on the mirrors of the ports with these VLANs.
	RIP []RIPPort `yaml:"rip"`
	// RIPng (RFC 2080, IPv6) runs on the mirrors of the ports with these
	// VLANs, each with an address6; it exports what rip_export says, and
	// its routes' link-local next hops reach the back-ends as OSPFv3's do.
	RIPng []RIPPort `yaml:"ripng"`
	// RIPExport is what RIP announces besides what it learned: connected
	// (the external ports' networks), static, bgp, ospf. Absent:
	// connected.
	RIPExport []string `yaml:"rip_export"`
	// Backends is where the RIB goes: iBGP, the suite the route reflector
	// of every back-end whose address is in Range.
	Backends *RIBDistribution `yaml:"backends"`
	RunDir   string           `yaml:"run_dir"` // default /run/msr/vcp-NAME
	// Ports are the external ports as the suite's config describes them
	// (their mirrors xVLAN, the router's names for them); the agent sets
	// them before it starts or reconfigures the suite.
	Ports []SuitePort `yaml:"-"`
	// AgentX is snmpd's AgentX socket when the router answers SNMP: FRR's
	// bgpd serves BGP4-MIB through it (snmp.go).
	AgentX string     `yaml:"-"`
	Pos    config.Pos `yaml:"-"`
}

// SuitePort is an external port, for the suite's config.
type SuitePort struct {
	VLAN     uint16
	Address  netip.Prefix
	Address6 netip.Prefix // none: IPv4 only
	Name     string       // lb1/e0
	// RA: the suite advertises the router on the port
	// (ExternalPortConfig.RouterAdvertisements).
	RA bool
}

// PortName is the router's name of the port with the VLAN, for the
// suite's interface descriptions.
func (c *RoutingConfig) PortName(vlan uint16) string {
	for _, p := range c.Ports {
		if p.VLAN == vlan {
			return p.Name
		}
	}
	return fmt.Sprintf("VLAN %d", vlan)
}

// PeerPort is the router's name of the port a neighbour is on.
func (c *RoutingConfig) PeerPort(a netip.Addr) string {
	for _, p := range c.Ports {
		if p.Address.Masked().Contains(a) || p.Address6.IsValid() && p.Address6.Masked().Contains(a) {
			return p.Name
		}
	}
	return "no port"
}

// PeerChannels are a peer's BGP channels (BGPPeer.Channels) with the
// router's IPv6 address on its port.
func (c *RoutingConfig) PeerChannels(b BGPPeer) []BGPChannel {
	var port6 netip.Addr
	for _, p := range c.Ports {
		if p.Address.Masked().Contains(b.Neighbor) && p.Address6.IsValid() {
			port6 = p.Address6.Addr()
		}
	}
	chans := b.Channels(port6)
	if c.DefaultPolicy(b) {
		for i := range chans {
			chans[i].Import = c.birdPolicyImport(b, chans[i].Family == "ipv6")
		}
	}
	return chans
}

// Static4 and Static6 are the static routes of each family.
func (c *RoutingConfig) Static4() []StaticRoute { return c.staticOf(false) }
func (c *RoutingConfig) Static6() []StaticRoute { return c.staticOf(true) }

// StaticFiles4 and StaticFiles6 are the static files of each family (their
// gateway's), each with its place among all of them (static{I}.conf).
func (c *RoutingConfig) StaticFiles4() []IndexedStaticFile { return c.staticFilesOf(false) }
func (c *RoutingConfig) StaticFiles6() []IndexedStaticFile { return c.staticFilesOf(true) }

// IndexedStaticFile is a static file and its index in StaticFiles.
type IndexedStaticFile struct {
	I int
	StaticFile
}

func (c *RoutingConfig) staticFilesOf(v6 bool) []IndexedStaticFile {
	var out []IndexedStaticFile
	for i, f := range c.StaticFiles {
		if f.Via.Is6() == v6 {
			out = append(out, IndexedStaticFile{i, f})
		}
	}
	return out
}

func (c *RoutingConfig) staticOf(v6 bool) []StaticRoute {
	var out []StaticRoute
	for _, r := range c.Static {
		if r.To.Addr().Is6() == v6 {
			out = append(out, r)
		}
	}
	return out
}

// RAPorts are the ports the suite sends router advertisements on.
func (c *RoutingConfig) RAPorts() []SuitePort {
	var ps []SuitePort
	for _, p := range c.Ports {
		if p.RA {
			ps = append(ps, p)
		}
	}
	return ps
}

// HasIPv6 says whether any external port has an IPv6 address: the suite
// then runs IPv6 channels too.
func (c *RoutingConfig) HasIPv6() bool {
	for _, p := range c.Ports {
		if p.Address6.IsValid() {
			return true
		}
	}
	return false
}

// StaticRoute is a static route of the router.
type StaticRoute struct {
	To  netip.Prefix `yaml:"to" msr:"required"`
	Via netip.Addr   `yaml:"via" msr:"required"`
	Pos config.Pos   `yaml:"-"`
}

// StaticFile is a file of prefixes routed via one gateway: the file's
// prefixes of the gateway's family (a pyasn file holds both).
type StaticFile struct {
	File string     `yaml:"file" msr:"required"`
	Via  netip.Addr `yaml:"via" msr:"required"`
	Pos  config.Pos `yaml:"-"`
}

// OSPFPort runs OSPF on one external port's mirror.
type OSPFPort struct {
	VLAN uint16 `yaml:"vlan" msr:"required"`
	Cost uint32 `yaml:"cost"`
	Auth *Auth  `yaml:"auth"` // none: the port's neighbours are not authenticated
	// Passive announces the port's network and takes no neighbour on it:
	// no hellos sent, none heard (BIRD's stub interface, FRR's passive).
	Passive bool       `yaml:"passive"`
	Pos     config.Pos `yaml:"-"`
}

// RIPPort is RIPv2 on one external port's mirror.
type RIPPort struct {
	VLAN uint16     `yaml:"vlan" msr:"required"`
	Auth *Auth      `yaml:"auth"` // RIPv2 only: neither suite authenticates RIPng
	Pos  config.Pos `yaml:"-"`
}

// Auth authenticates a routing protocol on one port: every message is
// signed with the secret under the key id, and one that is not, or
// whose signature fails, is dropped by the suite (OSPFv2's cryptographic
// authentication, RFC 2328 D.3 and RFC 5709; OSPFv3's trailer, RFC 7166;
// RIPv2's, RFC 4822). docs/vcp.md has which suite takes which algorithm.
type Auth struct {
	// Algorithm: hmac-sha256 (the default), hmac-sha1, hmac-sha384,
	// hmac-sha512, or md5 (keyed MD5, OSPFv2 and RIPv2 only).
	Algorithm  string     `yaml:"algorithm"`
	KeyID      uint8      `yaml:"key_id"` // 1 to 255; 1 if absent
	Secret     string     `yaml:"secret"`
	SecretFile string     `yaml:"secret_file"` // its first line, instead of secret
	Pos        config.Pos `yaml:"-"`
}

// authAlgorithms are Auth's algorithms, as BIRD and FRR's ospf6d name
// them.
var authAlgorithms = map[string]struct{ bird, frr6 string }{
	"hmac-sha1": {"hmac sha1", "hmac-sha-1"}, "hmac-sha256": {"hmac sha256", "hmac-sha-256"},
	"hmac-sha384": {"hmac sha384", "hmac-sha-384"}, "hmac-sha512": {"hmac sha512", "hmac-sha-512"},
	"md5": {"keyed md5", ""},
}

// bfdAlgorithms are BFD's (RFC 5880 §6.7), as BIRD names them.
var bfdAlgorithms = map[string]string{
	"keyed-md5": "keyed md5", "meticulous-keyed-md5": "meticulous keyed md5",
	"keyed-sha1": "keyed sha1", "meticulous-keyed-sha1": "meticulous keyed sha1",
}

// BIRDBFDAlgorithm is a BFD authentication's algorithm as BIRD's
// authentication option names it.
func (a *Auth) BIRDBFDAlgorithm() string { return bfdAlgorithms[a.Algorithm] }

// BIRDAlgorithm is the algorithm as BIRD's password block names it.
func (a *Auth) BIRDAlgorithm() string { return authAlgorithms[a.Algorithm].bird }

// FRRHashAlgo is the algorithm as ospf6d's authentication trailer names it.
func (a *Auth) FRRHashAlgo() string { return authAlgorithms[a.Algorithm].frr6 }

// complete checks an authentication of proto (OSPF, OSPFv3, RIP) for
// the suite and reads its secret file.
func (a *Auth) complete(proto, suite string, vlan uint16) error {
	where := fmt.Sprintf("%s on VLAN %d: auth", proto, vlan)
	if a.Algorithm == "" {
		a.Algorithm = "hmac-sha256"
	}
	if _, ok := authAlgorithms[a.Algorithm]; !ok {
		return a.Pos.Errorf("%s algorithm %q: hmac-sha256, hmac-sha1, hmac-sha384, hmac-sha512 or md5", where, a.Algorithm)
	}
	if err := a.completeKey(where); err != nil {
		return err
	}
	switch {
	case a.Algorithm == "md5" && proto == "OSPFv3":
		return a.Pos.Errorf("%s algorithm md5: OSPFv3's trailer is HMAC-SHA only (RFC 7166)", where)
	case a.Algorithm == "md5" && len(a.Secret) > 16:
		return a.Pos.Errorf("%s secret: %d characters; keyed MD5 takes at most 16", where, len(a.Secret))
	case suite == "frr" && proto == "OSPFv3":
		// Measured: FRR 8.4's trailer and BIRD 2.0.12's do not verify
		// each other ("auth digest miss-match"), so an FRR router would
		// lose its BIRD neighbours (docs/vcp.md).
		return a.Pos.Errorf("%s: FRR 8.4's OSPFv3 authentication trailer does not verify against BIRD's; suite: bird", where)
	case suite == "frr" && proto != "OSPFv3" && a.Algorithm != "md5":
		return a.Pos.Errorf("%s algorithm %s: FRR 8's %s signs with md5 only; algorithm: md5, or suite: bird", where, a.Algorithm, map[string]string{"OSPF": "ospfd", "RIP": "ripd"}[proto])
	}
	return nil
}

// completeKey gives the key its default id (1) and its secret, from
// secret_file if it names one, and checks the secret; errors say where.
func (a *Auth) completeKey(where string) error {
	if a.KeyID == 0 {
		a.KeyID = 1
	}
	if (a.Secret == "") == (a.SecretFile == "") {
		return a.Pos.Errorf("%s: secret or secret_file, one of them", where)
	}
	if a.SecretFile != "" {
		b, err := os.ReadFile(a.SecretFile)
		if err != nil {
			return a.Pos.Errorf("%s secret_file: %v", where, err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		a.Secret = strings.TrimSpace(line)
	}
	if err := checkPassword(a.Secret); err != nil {
		return a.Pos.Errorf("%s secret: %v", where, err)
	}
	return nil
}

// completeBFD checks bfd_auth and reads its secret file.
func (a *Auth) completeBFD(suite string) error {
	const where = "bfd_auth"
	if suite == "frr" {
		return a.Pos.Errorf("%s: FRR 8's bfdd has no authentication; suite: bird", where)
	}
	if a.Algorithm == "" {
		a.Algorithm = "meticulous-keyed-sha1"
	}
	if _, ok := bfdAlgorithms[a.Algorithm]; !ok {
		return a.Pos.Errorf("%s algorithm %q: meticulous-keyed-sha1, keyed-sha1, meticulous-keyed-md5 or keyed-md5", where, a.Algorithm)
	}
	if err := a.completeKey(where); err != nil {
		return err
	}
	// RFC 5880 §4.3, §4.4: a key of at most 16 bytes for MD5, 20 for SHA1.
	if most := map[bool]int{true: 16, false: 20}[strings.HasSuffix(a.Algorithm, "md5")]; len(a.Secret) > most {
		return a.Pos.Errorf("%s secret: %d characters; %s takes at most %d", where, len(a.Secret), a.Algorithm, most)
	}
	return nil
}

// RIBDistribution is the VCP's side of the back-ends' RIB feed.
type RIBDistribution struct {
	Listen netip.Addr   `yaml:"listen" msr:"required"` // the VCP's address on the interconnect
	Range  netip.Prefix `yaml:"range" msr:"required"`  // the back-ends' addresses
	// Password is the sessions' TCP-MD5 key, derived from the deployment
	// key (dist.Key.RIBPassword); the agent sets it.
	Password string     `yaml:"-"`
	Pos      config.Pos `yaml:"-"`
}

// BGPPeer is an external BGP neighbour, reached through a mirror.
type BGPPeer struct {
	Neighbor netip.Addr `yaml:"neighbor" msr:"required"`
	ASN      uint32     `yaml:"asn" msr:"required"`
	// HoldTime in seconds (BIRD's default: 240). A short one makes the
	// peer notice a VCP takeover sooner.
	HoldTime uint16 `yaml:"hold_time"`
	// Export is what the router announces to this peer: connected (the
	// external ports' networks), static, bgp (what other peers announced:
	// transit), ospf. Absent: connected and static, as an edge router
	// announces what it originates; [] announces nothing. The next hop is
	// the router's address on the peer's port.
	Export []string `yaml:"export"`
	// ImportPrefixes and ExportPrefixes filter what the router takes
	// from the peer and announces to it, as BIRD writes prefix patterns:
	// 10.0.0.0/8 (that prefix), 10.0.0.0/8+ (it and every longer one),
	// 10.0.0.0/8{16,24} (the prefixes of lengths 16 to 24 inside it).
	// Absent: every prefix but, from an eBGP peer, the default policy's
	// refusals (importpolicy.go: martians, the router's own networks, the
	// default route); given, the list alone decides what comes in.
	ImportPrefixes []PrefixPattern `yaml:"import_prefixes"`
	// AllowDefault takes the default route (0.0.0.0/0, ::/0) from this
	// eBGP peer, which the default import policy refuses.
	AllowDefault   bool            `yaml:"allow_default"`
	ExportPrefixes []PrefixPattern `yaml:"export_prefixes"`
	// MaxPrefixes shuts the session when the peer's accepted routes of
	// one family exceed it (absent or 0: DefaultMaxPrefixes; there is no
	// "no limit"), logged by the suite and counted; after
	// MaxPrefixesRestart (whole minutes, FRR's unit) the session opens
	// again, and without one it stays down until the config is reloaded.
	MaxPrefixes        uint32        `yaml:"max_prefixes"`
	MaxPrefixesRestart time.Duration `yaml:"max_prefixes_restart"`
	// Password is the session's TCP-MD5 key (RFC 2385), as the peer has
	// it; PasswordFile reads it from a file instead (its first line), so
	// that the config can be shown without it.
	Password     string `yaml:"password"`
	PasswordFile string `yaml:"password_file"`
	// IPv6 carries IPv6 unicast routes too on a session over IPv4
	// (MP-BGP, RFC 4760), with the router's IPv6 address on the peer's
	// port as their next hop; a session over IPv6 carries IPv6 only.
	IPv6 bool `yaml:"ipv6"`
	// BFD runs BFD (RFC 5880/5881) with the peer at the routing
	// section's bfd_interval and bfd_multiplier: a link that dies takes
	// the session, and the peer's routes, down in interval x multiplier,
	// not the hold time. The peer must run BFD too.
	BFD bool `yaml:"bfd"`
	// TTLSecurity is GTSM (RFC 5082): the session's packets are sent
	// with TTL (hop limit) 255 and only those that arrive with 255 are
	// taken, so that no host beyond the peer's segment can reach the
	// session; the peer must have it on too (FRR's ttl-security hops 1,
	// BIRD's ttl security on, Junos' ttl 255). Absent: on, every peer
	// being on an external port's subnet; but off for a BFD peer of the
	// frr suite, which runs such a peer's BFD as multihop.
	TTLSecurity *bool      `yaml:"ttl_security"`
	Pos         config.Pos `yaml:"-"`
}

// GTSM says whether the session runs GTSM (TTLSecurity).
func (b BGPPeer) GTSM() bool { return b.TTLSecurity == nil || *b.TTLSecurity }

// checkPassword says what is wrong with a TCP-MD5 password: the kernel
// takes 80 bytes at most, and BIRD's quoted string and FRR's word no
// blank, quote or backslash.
func checkPassword(p string) error {
	if len(p) == 0 || len(p) > 80 {
		return fmt.Errorf("%d characters: 1 to 80", len(p))
	}
	for _, c := range p {
		if c <= ' ' || c > '~' || c == '"' || c == '\\' {
			return fmt.Errorf("%q is not allowed: printable ASCII without blanks, quotes or backslashes", c)
		}
	}
	return nil
}

// PrefixPattern is one entry of a prefix list: the prefixes inside
// Prefix whose lengths are Min to Max.
type PrefixPattern struct {
	Prefix   netip.Prefix
	Min, Max int
}

// UnmarshalText reads 10.0.0.0/8, 10.0.0.0/8+ or 10.0.0.0/8{16,24}.
func (p *PrefixPattern) UnmarshalText(b []byte) error {
	s := string(b)
	text, lengths, ranged := strings.Cut(s, "{")
	plus := strings.HasSuffix(text, "+") && !ranged
	pfx, err := netip.ParsePrefix(strings.TrimSuffix(text, "+"))
	if err != nil || pfx.Addr().Is4In6() || pfx != pfx.Masked() {
		return fmt.Errorf("prefix %q: an IPv4 or IPv6 prefix (its host bits zero), then nothing, + or {MIN,MAX}", s)
	}
	*p = PrefixPattern{Prefix: pfx, Min: pfx.Bits(), Max: pfx.Bits()}
	most := pfx.Addr().BitLen()
	switch {
	case plus:
		p.Max = most
	case ranged:
		if _, err := fmt.Sscanf(lengths, "%d,%d}", &p.Min, &p.Max); err != nil || !strings.HasSuffix(lengths, "}") ||
			p.Min < pfx.Bits() || p.Min > p.Max || p.Max > most {
			return fmt.Errorf("prefix %q: lengths {MIN,MAX} with %d <= MIN <= MAX <= %d", s, pfx.Bits(), most)
		}
	}
	return nil
}

// String is the pattern as BIRD writes it.
func (p PrefixPattern) String() string {
	switch {
	case p.Min == p.Prefix.Bits() && p.Max == p.Min:
		return p.Prefix.String()
	case p.Min == p.Prefix.Bits() && p.Max == p.Prefix.Addr().BitLen():
		return p.Prefix.String() + "+"
	}
	return fmt.Sprintf("%s{%d,%d}", p.Prefix, p.Min, p.Max)
}

// FRR is the pattern as an FRR prefix-list entry writes it (FRR wants
// the prefix's length < ge <= le).
func (p PrefixPattern) FRR() string {
	switch {
	case p.Min == p.Prefix.Bits() && p.Max == p.Min:
		return p.Prefix.String()
	case p.Min == p.Prefix.Bits():
		return fmt.Sprintf("%s le %d", p.Prefix, p.Max)
	}
	return fmt.Sprintf("%s ge %d le %d", p.Prefix, p.Min, p.Max)
}

// birdPrefixSet is patterns as a BIRD prefix set.
func birdPrefixSet(ps []PrefixPattern) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.String())
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// ofFamily are the patterns of one family (nil stays nil: no list).
func ofFamily(ps []PrefixPattern, v6 bool) []PrefixPattern {
	if ps == nil {
		return nil
	}
	out := []PrefixPattern{}
	for _, p := range ps {
		if p.Prefix.Addr().Is6() == v6 {
			out = append(out, p)
		}
	}
	return out
}

// BGPChannel is one address family of a BGP session, as BIRD's config
// writes it: its import and export clauses and its next hop setting.
type BGPChannel struct {
	Family, Import, Export, NextHop string
}

// Channels are the session's address families: its transport's, and
// IPv6 too on an IPv4 session with ipv6. Each family's import and export
// lists are the patterns of that family (a list that has none of them
// passes nothing of it). port6 is the router's IPv6 address on the peer's
// port, the next hop of IPv6 routes over an IPv4 session.
func (b BGPPeer) Channels(port6 netip.Addr) []BGPChannel {
	chans := []BGPChannel{b.channel(b.Neighbor.Is6(), "next hop self;")}
	if b.Neighbor.Is4() && b.IPv6 {
		chans = append(chans, b.channel(true, fmt.Sprintf("next hop address %s;", port6)))
	}
	return chans
}

func (b BGPPeer) channel(v6 bool, nextHop string) BGPChannel {
	f := b
	f.ImportPrefixes, f.ExportPrefixes = ofFamily(b.ImportPrefixes, v6), ofFamily(b.ExportPrefixes, v6)
	c := BGPChannel{Family: "ipv4", Import: f.BIRDImport(), Export: f.BIRDExport(), NextHop: nextHop}
	if v6 {
		c.Family = "ipv6"
	}
	return c
}

// ImportsNothing and ExportsNothing say that a prefix list is given and
// empty (import_prefixes: []): nothing passes.
func (b BGPPeer) ImportsNothing() bool { return b.ImportPrefixes != nil && len(b.ImportPrefixes) == 0 }
func (b BGPPeer) ExportsNothing() bool { return b.ExportPrefixes != nil && len(b.ExportPrefixes) == 0 }

// BIRDImport is the peer's import clause in BIRD's terms.
func (b BGPPeer) BIRDImport() string {
	if b.ImportsNothing() {
		return "none"
	}
	if b.ImportPrefixes == nil {
		return "all"
	}
	return "where net ~ " + birdPrefixSet(b.ImportPrefixes)
}

// DefaultMaxPrefixes is a peer's max_prefixes unless it says: a full
// table of either family and room to grow (about 1.0M IPv4 and 0.2M IPv6
// routes in 2026), not a leak of every more-specific there is, which
// would fill the back-ends' FIBs.
const DefaultMaxPrefixes = 2_000_000

// RestartSeconds is MaxPrefixesRestart in seconds.
func (b BGPPeer) RestartSeconds() int { return int(b.MaxPrefixesRestart / time.Second) }

// BIRDLimit is the peer's import limit in BIRD's terms ("" for none);
// the restart's delay is the protocol's error wait time.
func (b BGPPeer) BIRDLimit() string {
	if b.MaxPrefixes == 0 {
		return ""
	}
	action := "disable"
	if b.MaxPrefixesRestart > 0 {
		action = "restart"
	}
	return fmt.Sprintf("import limit %d action %s;", b.MaxPrefixes, action)
}

// exportKinds are what a BGP peer's export may name.
var exportKinds = []string{"connected", "static", "bgp", "ospf", "rip"}

// Exports is what the router announces to the peer (Export, or the
// default).
func (b BGPPeer) Exports() []string {
	if b.Export == nil {
		return []string{"connected", "static"}
	}
	return b.Export
}

// Exporting says whether the peer gets routes of kind.
func (b BGPPeer) Exporting(kind string) bool { return slices.Contains(b.Exports(), kind) }

// BIRDExport is the peer's export clause in BIRD's terms.
func (b BGPPeer) BIRDExport() string {
	src := birdSourcesOf(b.Exports())
	if len(src) == 0 || b.ExportsNothing() {
		return "none"
	}
	w := "where source ~ [" + strings.Join(src, ", ") + "]"
	if b.ExportPrefixes != nil {
		w += " && net ~ " + birdPrefixSet(b.ExportPrefixes)
	}
	return w
}

// BFD's defaults: 300 ms x 3.
const (
	DefaultBFDInterval   = 300 * time.Millisecond
	DefaultBFDMultiplier = 3
)

// BFDPeers says whether any BGP peer runs BFD.
func (c *RoutingConfig) BFDPeers() bool {
	return slices.ContainsFunc(c.BGP, func(b BGPPeer) bool { return b.BFD })
}

// BFDIntervalMs is bfd_interval in BIRD's and FRR's unit.
func (c *RoutingConfig) BFDIntervalMs() int64 { return c.BFDInterval.Milliseconds() }

// ripExportKinds are what rip_export may name.
var ripExportKinds = []string{"connected", "static", "bgp", "ospf"}

// RIPExports is what RIP announces besides what it learned.
func (c *RoutingConfig) RIPExports() []string {
	if c.RIPExport == nil {
		return []string{"connected"}
	}
	return c.RIPExport
}

// RIPExporting says whether RIP announces routes of kind.
func (c *RoutingConfig) RIPExporting(kind string) bool { return slices.Contains(c.RIPExports(), kind) }

// BIRDRIPExport is RIP's export clause in BIRD's terms: what it learned
// by RIP (a RIP router passes on its neighbours' routes), and the kinds
// rip_export names.
func (c *RoutingConfig) BIRDRIPExport() string {
	src := append([]string{"RTS_RIP"}, birdSourcesOf(c.RIPExports())...)
	return "where source ~ [" + strings.Join(src, ", ") + "]"
}

// birdSources are BIRD's route sources of each kind an export names.
var birdSources = map[string][]string{"connected": {"RTS_DEVICE"}, "static": {"RTS_STATIC"}, "bgp": {"RTS_BGP"},
	"ospf": {"RTS_OSPF", "RTS_OSPF_IA", "RTS_OSPF_EXT1", "RTS_OSPF_EXT2"}, "rip": {"RTS_RIP"}}

// birdSourcesOf are BIRD's route sources of the kinds.
func birdSourcesOf(kinds []string) []string {
	var src []string
	for _, k := range kinds {
		src = append(src, birdSources[k]...)
	}
	return src
}

// checkKinds says which of got (an export list named what) is not one of
// allowed.
func checkKinds(what string, got, allowed []string) error {
	for _, k := range got {
		if !slices.Contains(allowed, k) {
			return fmt.Errorf("%s %q: %s", what, k, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// ospfExportKinds are what ospf_export may name.
var ospfExportKinds = []string{"connected", "static", "bgp"}

// OSPFExporting says whether OSPF announces routes of kind.
func (c *RoutingConfig) OSPFExporting(kind string) bool { return slices.Contains(c.OSPFExport, kind) }

// BIRDOSPFExport is OSPF's export clause in BIRD's terms.
func (c *RoutingConfig) BIRDOSPFExport() string {
	src := birdSourcesOf(c.OSPFExport)
	if len(src) == 0 {
		return "none"
	}
	return "where source ~ [" + strings.Join(src, ", ") + "]"
}

// LBConfig is what is particular to one LB.
type LBConfig struct {
	Mode string `yaml:"mode"`
	// API is the LB agent's management API (its api_listen), where the
	// console relays commands for it.
	API netip.AddrPort `yaml:"api"`
	Pos config.Pos     `yaml:"-"`
}

// ExternalPortConfig makes one port of one LB an external port of the
// router. The port is named by its MAC (`msr lb status` shows them).
type ExternalPortConfig struct {
	LB      string       `yaml:"lb" msr:"required"`
	MAC     string       `yaml:"mac" msr:"required"`
	Address netip.Prefix `yaml:"address" msr:"required"`
	// Address6 is the router's IPv6 address and subnet on the port (dual
	// stack; none: IPv4 only). Its link-local address is always the
	// port MAC's EUI-64.
	Address6 netip.Prefix `yaml:"address6"`
	VLAN     uint16       `yaml:"vlan" msr:"required"`
	MTU      uint16       `yaml:"mtu"`
	// RouterAdvertisements has the suite advertise the router on the port
	// (RFC 4861 §6): answering router solicitations, and every 10-30 s,
	// with the port's IPv6 prefix (for SLAAC where it is a /64) and the
	// router as a default router. Off by default: the port's neighbours
	// are routers and servers configured by hand. Needs an address6 and a
	// routing section (the suite sends them).
	RouterAdvertisements bool `yaml:"router_advertisements"`
	// Description is the operator's words for the port (SNMP's ifAlias).
	Description string `yaml:"description"`
	// Neighbors are static neighbours on the port: the back-ends hold
	// them as they learn none, and no claim of a neighbour changes them
	// (docs/operations.md, "Hardening").
	Neighbors []StaticNeighborConfig `yaml:"neighbors"`
	// URPF is the port's unicast RPF (RFC 3704): off, loose (a route to
	// the source) or strict (a route to it through this port). Absent:
	// loose on a port with a routing protocol (a BGP peer on it, OSPF or
	// RIP of either family), off on the others (docs/operations.md,
	// "Hardening").
	URPF string `yaml:"urpf"`
	// SFlowRate samples 1 in N of the port's frames in for sFlow (0: none)
	// instead of the sflow section's sampling_rate.
	SFlowRate *uint32          `yaml:"sflow_rate"`
	Pos       config.Pos       `yaml:"-"`
	mac       net.HardwareAddr // MAC, parsed by complete
}

// StaticNeighborConfig is one static neighbour of an external port: an
// address on the port's subnet (or link-local, IPv6) and its MAC.
type StaticNeighborConfig struct {
	Address netip.Addr       `yaml:"address" msr:"required"`
	MAC     string           `yaml:"mac" msr:"required"`
	Pos     config.Pos       `yaml:"-"`
	mac     net.HardwareAddr // MAC, parsed by complete
}

// DefaultMTU is an external port's MTU where the config gives none.
const DefaultMTU = 1500

// mtu is the port's MTU, or the default.
func (p ExternalPortConfig) mtu() uint16 { return cmp.Or(p.MTU, DefaultMTU) }

// BackendConfig overrides what a back-end says of itself.
type BackendConfig struct {
	// CapacityMbps replaces the capacity in its hellos (0: keep it).
	CapacityMbps uint32 `yaml:"capacity_mbps"`
	// API is the back-end agent's management API (its api_listen).
	API netip.AddrPort `yaml:"api"`
	Pos config.Pos     `yaml:"-"`
}

// LoadConfig reads, checks and parses a VCP config file.
func LoadConfig(path string) (*Config, error) {
	return config.Load[Config, FileConfig](path)
}

// ParseConfig parses data, the contents of the config file path.
func ParseConfig(path string, data []byte) (*Config, error) {
	return config.Parse[Config, FileConfig](path, data)
}

// neighborOn is a neighbour's address on the port of a VLAN (a
// link-local one may be on several).
type neighborOn struct {
	addr netip.Addr
	vlan uint16
}

// completeNeighbors checks external port i's static neighbours: each on
// the port's subnet (IPv6: or link-local), at a unicast MAC, once in the
// whole router (seen), and all of them within one STATIC_NEIGHBORS.
func (c *FileConfig) completeNeighbors(i int, seen *map[neighborOn]config.Pos) error {
	p := &c.ExternalPorts[i]
	for j := range p.Neighbors {
		n := &p.Neighbors[j]
		mac, err := net.ParseMAC(n.MAC)
		if err != nil || len(mac) != 6 || mac[0]&1 != 0 || [6]byte(mac) == [6]byte{} {
			return n.Pos.Errorf("neighbor %s: MAC %q is no unicast Ethernet MAC", n.Address, n.MAC)
		}
		n.mac = mac
		a := n.Address
		on := a.Is4() && p.Address.Masked().Contains(a) && a != p.Address.Addr() ||
			a.Is6() && !a.Is4In6() && (a.IsLinkLocalUnicast() || p.Address6.IsValid() && p.Address6.Masked().Contains(a) && a != p.Address6.Addr())
		if !on {
			return n.Pos.Errorf("neighbor %s: not a host of port %s's subnets (%s %s)", a, p.mac, p.Address, p.Address6)
		}
		key := neighborOn{a, p.VLAN}
		if prev, dup := (*seen)[key]; dup {
			return n.Pos.Errorf("neighbor %s is already configured at %s", a, prev)
		}
		(*seen)[key] = n.Pos
		if len(*seen) > dist.MaxStaticNeighbors {
			return n.Pos.Errorf("neighbor %s: more than %d static neighbours in the router", a, dist.MaxStaticNeighbors)
		}
	}
	return nil
}

// Parse checks the file, fills its defaults, and returns the
// configuration the agent runs.
func (c *FileConfig) Parse() (*Config, error) {
	if err := c.Config.Complete("vcp", c.Pos); err != nil {
		return nil, err
	}
	cfg := &Config{FileConfig: c, LBModes: map[string]dist.BalanceMode{}}
	for _, step := range []func() error{func() error { return c.parseModes(cfg) }, c.expandPortRanges, c.completePorts, c.completeSNMP, c.completeSFlow, c.completeStandby, c.completeRouting} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// parseModes parses the balancing modes and the ACL into cfg.
func (c *FileConfig) parseModes(cfg *Config) error {
	if c.Mode == "" {
		c.Mode = "hash"
	}
	var err error
	if cfg.DefaultMode, err = dist.ParseBalanceMode(c.Mode); err != nil {
		return c.Pos.Errorf("mode %q: wrr, hash, maglev or flowlet", c.Mode)
	}
	for name, l := range c.LBs {
		if l.Mode == "" {
			continue
		}
		if cfg.LBModes[name], err = dist.ParseBalanceMode(l.Mode); err != nil {
			return l.Pos.Errorf("lb %s: mode %q: wrr, hash, maglev or flowlet", name, l.Mode)
		}
	}
	if cfg.HasACL = c.ACL != nil; cfg.HasACL {
		if cfg.ACLRules, err = acl.Parse(c.ACL, dist.MaxACLRules, c.Pos); err != nil {
			return err
		}
	}
	return nil
}

// completePorts checks the external ports: each MAC and VLAN once, its
// addresses, MTU and neighbours.
func (c *FileConfig) completePorts() error {
	if len(c.ExternalPorts) > dist.MaxRouterPorts {
		// At the first port past the limit: a range's line, or a port's.
		return c.ExternalPorts[dist.MaxRouterPorts].Pos.Errorf("%d external ports: the router has at most %d, one per VLAN id", len(c.ExternalPorts), dist.MaxRouterPorts)
	}
	vlans := map[uint16]config.Pos{}
	macs := map[string]config.Pos{}
	statics := map[neighborOn]config.Pos{}
	onLB := map[string]int{}
	for i, p := range c.ExternalPorts {
		// An LB's ports fit its hello and PORT_CONFIG, one at least
		// internal: the router grows by LBs, not by ports on one.
		if onLB[p.LB]++; onLB[p.LB] > dist.MaxPorts-1 {
			return p.Pos.Errorf("more than %d external ports on %s: an LB holds %d ports, one at least internal", dist.MaxPorts-1, p.LB, dist.MaxPorts)
		}
		mac, err := net.ParseMAC(p.MAC)
		if err != nil {
			return p.Pos.Errorf("port MAC %q: %v", p.MAC, err)
		}
		c.ExternalPorts[i].mac = mac
		if _, err := dist.ParseURPF(p.URPF); err != nil {
			return p.Pos.Errorf("external port %s: %v", mac, err)
		}
		if prev, dup := macs[mac.String()]; dup {
			return p.Pos.Errorf("port %s is already configured at %s", mac, prev)
		}
		macs[mac.String()] = p.Pos
		if p.VLAN == 0 || p.VLAN > 4094 || !p.Address.Addr().Is4() {
			return p.Pos.Errorf("external port %s: VLAN 1-4094 and an IPv4 address", mac)
		}
		if a := p.Address6.Addr(); p.Address6.IsValid() && (!a.Is6() || a.Is4In6() || !a.IsGlobalUnicast() || p.Address6.Bits() > 127) {
			return p.Pos.Errorf("external port %s: address6 %s is not a global IPv6 address and subnet", mac, p.Address6)
		}
		if p.Address6.IsValid() && p.MTU != 0 && p.MTU < 1280 {
			return p.Pos.Errorf("external port %s: MTU %d below IPv6's 1280 (RFC 8200 §5)", mac, p.MTU)
		}
		if p.RouterAdvertisements && (!p.Address6.IsValid() || c.Routing == nil) {
			return p.Pos.Errorf("external port %s: router_advertisements needs an address6 and a routing section (the suite sends them)", mac)
		}
		// A VLAN names one external port of the whole router: two
		// LBs cannot share one.
		if prev, dup := vlans[p.VLAN]; dup {
			return p.Pos.Errorf("VLAN %d is already the port at %s", p.VLAN, prev)
		}
		vlans[p.VLAN] = p.Pos
		if err := c.completeNeighbors(i, &statics); err != nil {
			return err
		}
	}
	return nil
}

// completeSNMP completes the snmp section, its sources by default the
// management network where the file says it.
func (c *FileConfig) completeSNMP() error {
	if c.SNMP != nil {
		var mgmt []netip.Prefix // the management network, if the file says it
		if c.Standby != nil {
			mgmt = append(mgmt, c.Standby.Address.Masked())
		}
		if r := c.Routing; r != nil && r.Backends != nil && !slices.Contains(mgmt, r.Backends.Range.Masked()) {
			mgmt = append(mgmt, r.Backends.Range.Masked())
		}
		if err := c.SNMP.complete(c.Name, mgmt); err != nil {
			return err
		}
	}
	return nil
}

// completeSFlow checks the sflow section and the ports' rates, and gives
// the export the first external port's address as its agent's if it
// names none.
func (c *FileConfig) completeSFlow() error {
	s := c.SFlow
	for _, p := range c.ExternalPorts {
		switch {
		case p.SFlowRate != nil && s == nil:
			return p.Pos.Errorf("sflow_rate without an sflow section: no collector to send to")
		case p.SFlowRate != nil && *p.SFlowRate > sflow.MaxRate:
			return p.Pos.Errorf("sflow_rate %d: at most %d", *p.SFlowRate, sflow.MaxRate)
		}
	}
	if s == nil {
		return nil
	}
	if s.SubAgent != 0 {
		return s.Pos.Errorf("sflow sub_agent: each LB is a sub-agent of its own id")
	}
	if err := s.Check(); err != nil {
		return err
	}
	if !s.AgentAddress.IsValid() {
		if len(c.ExternalPorts) == 0 {
			return s.Pos.Errorf("sflow: no agent_address and no external port to take one from")
		}
		s.AgentAddress = c.ExternalPorts[0].Address.Addr()
	}
	return nil
}

// completeStandby completes the standby section: VRRP's address, peers
// and timers.
func (c *FileConfig) completeStandby() error {
	if sb := c.Standby; sb != nil {
		if !sb.Address.Addr().Is4() {
			return sb.Pos.Errorf("standby address: the VCP's virtual IPv4 address on the interconnect, such as 10.0.0.1/24")
		}
		if sb.VRID == 0 {
			sb.VRID = 51
		}
		if sb.Priority == 0 {
			sb.Priority = 150
		}
		if sb.AdvertInterval == 0 {
			sb.AdvertInterval = 100 * time.Millisecond
		}
		if sb.AdvertInterval < 10*time.Millisecond || sb.AdvertInterval > 40*time.Second {
			return sb.Pos.Errorf("standby advert_interval %v: 10ms to 40s", sb.AdvertInterval)
		}
		if len(sb.Peers) < 2 || slices.ContainsFunc(sb.Peers, func(a netip.Addr) bool { return !a.Is4() || !sb.Address.Contains(a) || a == sb.Address.Addr() }) {
			return sb.Pos.Errorf("standby peers %v: every VCP's own IPv4 address on the interconnect (%s), this one's too", sb.Peers, sb.Address.Masked())
		}
		if r := c.Routing; r != nil && r.Backends != nil && r.Backends.Listen != sb.Address.Addr() {
			return r.Backends.Pos.Errorf("backends listen %s: with a standby VCP the back-ends must reach the VCP at its virtual address %s", r.Backends.Listen, sb.Address.Addr())
		}
	}
	return nil
}

// completeRouting completes the routing section: the suite, its BGP
// peers, static routes and IGPs.
func (c *FileConfig) completeRouting() error {
	r := c.Routing
	if r == nil {
		return nil
	}
	if !r.RouterID.IsValid() && len(c.ExternalPorts) > 0 {
		r.RouterID = c.ExternalPorts[0].Address.Addr()
	}
	if !r.RouterID.Is4() {
		return r.Pos.Errorf("routing needs a router_id (or an external port)")
	}
	if r.RunDir == "" {
		r.RunDir = c.defaultRunDir()
	}
	switch r.Suite {
	case "":
		r.Suite = "bird"
	case "bird", "frr":
	default:
		return r.Pos.Errorf("routing suite %q: bird or frr", r.Suite)
	}
	for _, step := range []func(*RoutingConfig) error{c.completeBGP, c.completeStatic, c.completeIGPs} {
		if err := step(r); err != nil {
			return err
		}
	}
	return nil
}

// completeBGP checks the BGP peers: each on a port's subnet, within the
// peers an LB carries, its GTSM, limits and password.
func (c *FileConfig) completeBGP(r *RoutingConfig) error {
	perLB := map[string]int{}
	for i := range r.BGP {
		b := &r.BGP[i]
		if b.Neighbor.Is4In6() || !c.onPort(b.Neighbor) {
			return b.Pos.Errorf("BGP neighbour %s: an address on an external port's subnet", b.Neighbor)
		}
		// FRR runs the BFD of a peer with ttl-security as multihop
		// (bgpd takes its TTL of 255 for hops), which a peer's
		// single-hop BFD never answers: with FRR, a BFD peer is
		// without GTSM unless the file asks, which is refused.
		if r.Suite == "frr" && b.BFD {
			if b.TTLSecurity != nil && *b.TTLSecurity {
				return b.Pos.Errorf("BGP neighbour %s: ttl_security with bfd: FRR runs that BFD as multihop; use the bird suite, or one of the two", b.Neighbor)
			}
			b.TTLSecurity = new(bool)
		}
		lb := c.portOf(b.Neighbor).LB
		if perLB[lb]++; perLB[lb] > dist.MaxPeers {
			return b.Pos.Errorf("BGP neighbour %s: more than %d peers on %s's ports", b.Neighbor, dist.MaxPeers, lb)
		}
		if b.IPv6 && b.Neighbor.Is4() && !c.port6Of(b.Neighbor).IsValid() {
			return b.Pos.Errorf("BGP neighbour %s: ipv6 needs an address6 on its port (the IPv6 routes' next hop)", b.Neighbor)
		}
		if err := checkKinds("export", b.Export, exportKinds); err != nil {
			return b.Pos.Errorf("BGP neighbour %s: %v", b.Neighbor, err)
		}
		if b.MaxPrefixesRestart < 0 || b.MaxPrefixesRestart%time.Minute != 0 || b.MaxPrefixesRestart > 24*time.Hour {
			return b.Pos.Errorf("BGP neighbour %s: max_prefixes_restart %v: whole minutes, at most 24h", b.Neighbor, b.MaxPrefixesRestart)
		}
		if b.MaxPrefixes == 0 {
			b.MaxPrefixes = DefaultMaxPrefixes
		}
		if b.PasswordFile != "" {
			if b.Password != "" {
				return b.Pos.Errorf("BGP neighbour %s: password and password_file: one of them", b.Neighbor)
			}
			f, err := os.ReadFile(b.PasswordFile)
			if err != nil {
				return b.Pos.Errorf("BGP neighbour %s: password_file: %v", b.Neighbor, err)
			}
			line, _, _ := strings.Cut(string(f), "\n")
			b.Password = strings.TrimSpace(line)
		}
		if b.Password != "" || b.PasswordFile != "" {
			if err := checkPassword(b.Password); err != nil {
				return b.Pos.Errorf("BGP neighbour %s: password: %v", b.Neighbor, err)
			}
		}
	}
	return nil
}

// completeStatic checks that static routes go via a port's subnet.
func (c *FileConfig) completeStatic(r *RoutingConfig) error {
	for _, st := range r.Static {
		if st.To.Addr().Is4In6() || st.To.Addr().Is6() != st.Via.Is6() || !c.onPort(st.Via) {
			return st.Pos.Errorf("static route %s via %s: a prefix via an address of its family on an external port's subnet", st.To, st.Via)
		}
	}
	for _, f := range r.StaticFiles {
		if f.Via.Is4In6() || !c.onPort(f.Via) {
			return f.Pos.Errorf("static file %s via %s: an address on an external port's subnet", f.File, f.Via)
		}
	}
	return nil
}

// completeIGPs checks OSPF, OSPFv3, RIP and RIPng and BFD: their ports,
// exports, timers and authentication.
func (c *FileConfig) completeIGPs(r *RoutingConfig) error {
	if err := checkKinds("ospf_export", r.OSPFExport, ospfExportKinds); err != nil {
		return r.Pos.Errorf("%v", err)
	}
	if len(r.OSPFExport) > 0 && len(r.OSPF) == 0 {
		return r.Pos.Errorf("ospf_export without ospf ports")
	}
	if r.BFDInterval == 0 {
		r.BFDInterval = DefaultBFDInterval
	}
	if r.BFDMultiplier == 0 {
		r.BFDMultiplier = DefaultBFDMultiplier
	}
	if r.BFDInterval < 10*time.Millisecond || r.BFDInterval > 10*time.Second || r.BFDInterval%time.Millisecond != 0 {
		return r.Pos.Errorf("bfd_interval %v: whole milliseconds, 10ms to 10s", r.BFDInterval)
	}
	if r.BFDAuth != nil {
		if err := r.BFDAuth.completeBFD(r.Suite); err != nil {
			return err
		}
	}
	if err := checkKinds("rip_export", r.RIPExport, ripExportKinds); err != nil {
		return r.Pos.Errorf("%v", err)
	}
	if r.RIPExport != nil && len(r.RIP) == 0 && len(r.RIPng) == 0 {
		return r.Pos.Errorf("rip_export without rip or ripng ports")
	}
	for _, p := range r.RIP {
		if !c.hasVLAN(p.VLAN) {
			return p.Pos.Errorf("RIP on VLAN %d: no external port has it", p.VLAN)
		}
		if p.Auth != nil {
			if err := p.Auth.complete("RIP", r.Suite, p.VLAN); err != nil {
				return err
			}
		}
	}
	for _, o := range r.OSPF {
		if !c.hasVLAN(o.VLAN) {
			return o.Pos.Errorf("OSPF on VLAN %d: no external port has it", o.VLAN)
		}
		if o.Auth != nil {
			if err := o.Auth.complete("OSPF", r.Suite, o.VLAN); err != nil {
				return err
			}
		}
	}
	for _, p := range r.RIPng {
		if !c.hasVLAN6(p.VLAN) {
			return p.Pos.Errorf("RIPng on VLAN %d: no external port with an address6 has it", p.VLAN)
		}
		if p.Auth != nil {
			return p.Auth.Pos.Errorf("RIPng on VLAN %d: auth: neither BIRD nor FRR authenticates RIPng (RFC 2080 has none; its IPsec is not theirs)", p.VLAN)
		}
	}
	for _, o := range r.OSPFv3 {
		if !c.hasVLAN6(o.VLAN) {
			return o.Pos.Errorf("OSPFv3 on VLAN %d: no external port with an address6 has it", o.VLAN)
		}
		if o.Auth != nil {
			if err := o.Auth.complete("OSPFv3", r.Suite, o.VLAN); err != nil {
				return err
			}
		}
	}
	return nil
}

// hasVLAN6 says whether an external port with an IPv6 address has the
// VLAN.
func (c *FileConfig) hasVLAN6(v uint16) bool {
	for _, p := range c.ExternalPorts {
		if p.VLAN == v && p.Address6.IsValid() {
			return true
		}
	}
	return false
}

// hasVLAN says whether an external port has the VLAN.
func (c *FileConfig) hasVLAN(v uint16) bool {
	for _, p := range c.ExternalPorts {
		if p.VLAN == v {
			return true
		}
	}
	return false
}

// onPort says whether a is on an external port's subnet (of a's family).
func (c *FileConfig) onPort(a netip.Addr) bool { return c.portOf(a).VLAN != 0 }

// urpfOf is an external port's unicast RPF: its own, or loose where a
// routing protocol runs on it.
func (c *FileConfig) urpfOf(ep ExternalPortConfig) dist.URPFMode {
	if m, _ := dist.ParseURPF(ep.URPF); ep.URPF != "" {
		return m
	}
	r := c.Routing
	if r == nil {
		return dist.URPFOff
	}
	routed := slices.ContainsFunc(r.BGP, func(b BGPPeer) bool { return c.portOf(b.Neighbor).VLAN == ep.VLAN }) ||
		slices.ContainsFunc(append(slices.Clone(r.OSPF), r.OSPFv3...), func(o OSPFPort) bool { return o.VLAN == ep.VLAN }) ||
		slices.ContainsFunc(append(slices.Clone(r.RIP), r.RIPng...), func(o RIPPort) bool { return o.VLAN == ep.VLAN })
	if routed {
		return dist.URPFLoose
	}
	return dist.URPFOff
}

// portOf is the external port whose subnet (of a's family) holds a;
// the zero port if none does.
func (c *FileConfig) portOf(a netip.Addr) ExternalPortConfig {
	for _, p := range c.ExternalPorts {
		if p.Address.Masked().Contains(a) || p.Address6.IsValid() && p.Address6.Masked().Contains(a) {
			return p
		}
	}
	return ExternalPortConfig{}
}

// port6Of is the router's IPv6 address on the port whose IPv4 subnet
// holds a (none: the port has none).
func (c *FileConfig) port6Of(a netip.Addr) netip.Addr {
	for _, p := range c.ExternalPorts {
		if p.Address.Masked().Contains(a) && p.Address6.IsValid() {
			return p.Address6.Addr()
		}
	}
	return netip.Addr{}
}

// runDir is where the VCP keeps its suite's and election's files.
func (c *FileConfig) runDir() string {
	if c.Routing != nil {
		return c.Routing.RunDir
	}
	return c.defaultRunDir()
}

// defaultRunDir is where the VCP keeps its suite's and keepalived's
// files unless the routing section says: /run/msr/vcp-NAME.
func (c *FileConfig) defaultRunDir() string { return filepath.Join(api.RunDir, "vcp-"+c.Name) }

// apiOf is the management API of the element named name, if configured.
func (c *FileConfig) apiOf(name string) (netip.AddrPort, bool) {
	if l := c.LBs[name]; l != nil && l.API.IsValid() {
		return l.API, true
	}
	if b := c.Backends[name]; b != nil && b.API.IsValid() {
		return b.API, true
	}
	return netip.AddrPort{}, false
}

// modeOf is the balancing mode of an LB.
func (c *Config) modeOf(lb string) dist.BalanceMode {
	if m, ok := c.LBModes[lb]; ok {
		return m
	}
	return c.DefaultMode
}
