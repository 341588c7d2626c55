package demo

import (
	"net/netip"
	"strings"
	"text/template"
)

// A PeerBGP is an external BGP peer of the router as the labs run it:
// FRR's bgpd with a session to the router's address on its segment
// (Router, and Router6 for IPv6's family), GTSM on as the router has it,
// and the prefixes it announces. The demo's bgp1, the tests' peers and
// the RIB benchmark's are all written from it.
type PeerBGP struct {
	Hostname        string // "": none said
	ASN             uint32
	RouterID        string
	Router, Router6 string // the router's addresses it peers with ("": no IPv6 session)
	RouterASN       uint32
	Password        string // the session's TCP-MD5 key ("": none)
	GracefulRestart bool
	RestartTime     int // seconds the router keeps its routes after the session is lost (0: FRR's 120)
	Prefixes        []netip.Prefix
	Prefixes6       []netip.Prefix
}

var peerBGP = template.Must(template.New("bgpd.conf").Parse(`frr defaults traditional
{{- with .Hostname}}
hostname {{.}}
{{- end}}
router bgp {{.ASN}}
 bgp router-id {{.RouterID}}
{{- if .GracefulRestart}}
 bgp graceful-restart
{{- end}}
{{- with .RestartTime}}
 ! The time the router keeps this peer's routes after its session is
 ! lost (RFC 4724), FRR's 120 s by default.
 bgp graceful-restart restart-time {{.}}
{{- end}}
 no bgp ebgp-requires-policy
 no bgp network import-check
{{- if .Router6}}
 no bgp default ipv4-unicast
{{- end}}
 neighbor {{.Router}} remote-as {{.RouterASN}}
{{- with .Password}}
 neighbor {{$.Router}} password {{.}}
{{- end}}
{{- with .Router6}}
 neighbor {{.}} remote-as {{$.RouterASN}}
{{- end}}
 ! GTSM (RFC 5082), as the router has it on by default.
 neighbor {{.Router}} ttl-security hops 1
{{- with .Router6}}
 neighbor {{.}} ttl-security hops 1
{{- end}}
 address-family ipv4 unicast
{{- if .Router6}}
  neighbor {{.Router}} activate
{{- end}}
{{- range .Prefixes}}
  network {{.}}
{{- end}}
 exit-address-family
{{- if .Router6}}
 address-family ipv6 unicast
  neighbor {{.Router6}} activate
{{- range .Prefixes6}}
  network {{.}}
{{- end}}
 exit-address-family
{{- end}}
`))

// Config is the peer's bgpd.conf.
func (p PeerBGP) Config() string {
	var b strings.Builder
	if err := peerBGP.Execute(&b, p); err != nil {
		panic(err) // the template and its data are this file's
	}
	return b.String()
}

// BGP1 is the demo's bgp1: IPv4 and IPv6 sessions with lb2's port,
// announcing the plan's prefixes; the router keeps its routes 5 s after
// its session is lost, so that bgp1's link down past its hold time (9 s)
// withdraws them within 14 s (msr soak, external-link-down).
func BGP1(p *Plan) PeerBGP {
	return PeerBGP{Hostname: "bgp1", ASN: 65020, RouterID: BGPPeer, Router: "203.0.113.1", Router6: "2001:db8:12::1", RouterASN: 65000,
		GracefulRestart: true, RestartTime: 5, Prefixes: p.Prefixes, Prefixes6: p.Prefixes6}
}
