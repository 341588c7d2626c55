package vcp

import (
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/router/routerapi"
)

// What the VCP gives every back-end: the router's external ports in the
// config's order, named as their LB names them once heard (LB/vlanN
// before), the RIB feed, and the router's ACL; an absent acl: leaves the
// back-ends theirs.
func TestBackendSettings(t *testing.T) {
	c, err := load(t, goodVCP+`routing:
  asn: 65000
  backends: {listen: 10.0.0.1, range: 10.0.0.0/24}
acl:
  - {action: deny, proto: tcp, dst: 192.0.2.0/24, dport: 23}
  - {action: permit}
`)
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{cfg: c, elements: topology{}}
	m, acl := a.backendSettings()
	want := []dist.BackendPort{
		{Name: "lb1/vlan10", VLAN: 10, Prefix: netip.MustParsePrefix("192.0.2.1/24"), MTU: 1500},
		{Name: "lb2/vlan11", VLAN: 11, Prefix: netip.MustParsePrefix("198.51.100.1/24"), MTU: 1500},
	}
	if len(m.Ports) != 2 || m.Ports[0] != want[0] || m.Ports[1] != want[1] || m.RIBNeighbor != netip.MustParseAddr("10.0.0.1") || m.RIBASN != 65000 {
		t.Errorf("BACKEND_CONFIG %+v", m)
	}
	if acl == nil || len(acl.Rules) != 2 || !acl.Rules[0].Deny || acl.Rules[1].Deny || acl.Rules[0].DportLo != 23 {
		t.Errorf("ACL_CONFIG %+v", acl)
	}
	// lb1 heard, naming its port e0.
	a.elements[1] = &element{hello: &dist.Hello{Role: dist.RoleLB, Name: "lb1", Ports: []dist.PortStatus{
		{Role: dist.PortExternal, VLAN: 10, MAC: net.HardwareAddr{2, 0, 0, 0, 0xe0, 0}, Name: "e0"}}}}
	if m, _ := a.backendSettings(); m.Ports[0].Name != "lb1/e0" {
		t.Errorf("port named %q once lb1 is heard, want lb1/e0", m.Ports[0].Name)
	}
	// A port the VCP has down is sent down (its connected routes go);
	// one not heard of yet is not (a VCP just started withdraws nothing).
	a.ports = map[uint16]*PortState{10: {VLAN: 10, Up: false}}
	if m, _ := a.backendSettings(); !m.Ports[0].Down || m.Ports[1].Down {
		t.Errorf("lb1's port down, lb2's not heard: sent down %v, %v", m.Ports[0].Down, m.Ports[1].Down)
	}
	a.ports[10].Up = true
	if m, _ := a.backendSettings(); m.Ports[0].Down {
		t.Error("lb1's port up, sent down")
	}
	down := slices.Clone(m.Ports)
	down[0].Down = true
	if dist.PortsDigest(down) == dist.PortsDigest(m.Ports) {
		t.Error("a port's state is not in the ports' digest")
	}
	// A back-end's hello shows whether it serves them.
	h := &dist.Hello{Role: dist.RoleRouter, Ports: []dist.PortStatus{{Role: dist.PortInternal, Prefix: netip.MustParsePrefix("10.0.0.14/24")}}}
	if backendPortsApplied(h, m.Ports, dist.PortsDigest(m.Ports)) {
		t.Error("a back-end without ports serves the router's")
	}
	for _, p := range m.Ports {
		h.Ports = append(h.Ports, dist.PortStatus{Role: dist.PortExternal, VLAN: p.VLAN, Prefix: p.Prefix, MTU: p.MTU})
	}
	if !backendPortsApplied(h, m.Ports, dist.PortsDigest(m.Ports)) {
		t.Error("a back-end serving the router's ports does not")
	}
	// A back-end's digest of its ports stands for the list: of the ports
	// sent, applied; of others (one port's uRPF changed), not.
	h.PortsDigest = dist.PortsDigest(m.Ports)
	if !backendPortsApplied(h, m.Ports, dist.PortsDigest(m.Ports)) {
		t.Error("a back-end with the ports' digest does not serve them")
	}
	other := slices.Clone(m.Ports)
	other[1].URPF = dist.URPFStrict
	if backendPortsApplied(h, other, dist.PortsDigest(other)) {
		t.Error("a back-end with another digest serves the ports")
	}
	if api, ok := routerapi.APIOf(h); !ok || api.String() != "10.0.0.14:8180" {
		t.Errorf("the back-end's API: %v %v", api, ok)
	}
	without, _ := load(t, goodVCP)
	if _, acl := (&Agent{cfg: without, elements: topology{}}).backendSettings(); acl != nil {
		t.Errorf("no acl: in the config, yet ACL_CONFIG %+v", acl)
	}
	// A bad rule is refused at its line.
	if _, err := load(t, goodVCP+"acl:\n  - {action: deny, proto: gre, dport: 5}\n"); err == nil || !strings.Contains(err.Error(), ":13:5: ACL rule: proto \"gre\"") {
		t.Errorf("bad ACL rule: %v", err)
	}
}
