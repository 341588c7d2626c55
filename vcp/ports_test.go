package vcp

import (
	"net"
	"testing"

	"github.com/msr-router/msr/dist"
)

// An external port an LB announces that the config does not have (lb1's
// VLAN 99, or lb2 claiming lb1's VLAN 10) is no port of the router: it
// takes no configured port's state or name, and each is counted once.
func TestUnknownPortsRefused(t *testing.T) {
	c, err := load(t, goodVCP)
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{cfg: c, elements: topology{}, log: quiet()}
	port := func(vlan uint16, name string, up bool) dist.PortStatus {
		p := dist.PortStatus{Role: dist.PortExternal, VLAN: vlan, MAC: net.HardwareAddr{2, 0, 0, 0, byte(vlan), 0}, Name: name}
		if up {
			p.Flags = dist.PortFlagUp
		}
		return p
	}
	a.elements[1] = &element{alive: true, hello: &dist.Hello{Role: dist.RoleLB, Name: "lb1", Ports: []dist.PortStatus{port(10, "e0", true), port(99, "e7", true)}}}
	a.elements[2] = &element{alive: true, hello: &dist.Hello{Role: dist.RoleLB, Name: "lb2", Ports: []dist.PortStatus{port(11, "e0", true)}}}
	a.elements[3] = &element{alive: true, hello: &dist.Hello{Role: dist.RoleLB, Name: "lb9", Ports: []dist.PortStatus{port(10, "e0", false)}}}
	for range 3 { // every tick looks; each is counted once
		live := a.liveExternalPorts()
		if len(live) != 2 || live[10].lb != "lb1" || !live[10].Up() || live[11].lb != "lb2" {
			t.Fatalf("live ports %+v, want lb1's VLAN 10 (up) and lb2's 11", live)
		}
		if names := a.externalPortNames(); len(names) != 2 || names[10] != "lb1/e0" {
			t.Errorf("port names %v", names)
		}
	}
	if n := len(a.unknownPorts); n != 2 {
		t.Errorf("unknown ports counted %d (%v), want 2: lb1/e7 VLAN 99, lb9/e0 VLAN 10", n, a.unknownPorts)
	}
}
