package vcp

import (
	"bufio"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/api"
	"github.com/msr-router/msr/router/routerapi"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// The console: the router as one box, for `msr ctl` (api.go serves it on
// the management network). Ports and counters come from the elements'
// hellos, routes from the suite and the back-ends' own APIs.

// Ports lists the router's ports as the LBs' last hellos tell them.
func (a *Agent) Ports() *vcpapi.PortsView {
	a.mu.Lock()
	defer a.mu.Unlock()
	v := &vcpapi.PortsView{Ports: []vcpapi.PortView{}}
	for _, lb := range a.elements.sorted(dist.RoleLB) {
		if !lb.alive {
			continue
		}
		for _, p := range lb.hello.Ports {
			pv := vcpapi.PortView{Name: portName(lb.hello.Name, p), LB: lb.hello.Name, Index: p.Index,
				MAC: p.MAC.String(), Role: p.Role.String(), VLAN: p.VLAN,
				Up: p.Up(), AdminUp: p.AdminUp(), SpeedMbps: p.SpeedMbps,
				FullDuplex: p.FullDuplex(), MTU: p.MTU,
				Counters: vcpapi.Counters{RxPackets: p.RxPackets, RxBytes: p.RxBytes, TxPackets: p.TxPackets, TxBytes: p.TxBytes, RxDropped: p.RxDropped}}
			if st := a.ports[p.VLAN]; p.Role == dist.PortExternal && st != nil {
				pv.Changes, pv.LastChangeS = st.Changes, time.Since(st.Since).Seconds()
			}
			if p.Prefix.IsValid() && p.Prefix.Bits() > 0 {
				pv.Address = p.Prefix.String()
			}
			if p.Role == dist.PortExternal {
				v.External.Add(pv.Counters)
			}
			v.Ports = append(v.Ports, pv)
		}
	}
	return v
}

// portName is what the router calls an element's port: ELEMENT/NAME
// (dist.PortName), or ELEMENT/INDEX for an element too old to name its
// ports in its hellos.
func portName(element string, p dist.PortStatus) string {
	if p.Name == "" {
		return dist.PortName(element, strconv.Itoa(int(p.Index)))
	}
	return dist.PortName(element, p.Name)
}

// externalPortNames are the router's names of the external ports, by
// VLAN, as the LBs' hellos tell them; call it with a.mu held.
func (a *Agent) externalPortNames() map[uint16]string {
	names := map[uint16]string{}
	known := a.knownPorts()
	for _, lb := range a.elements.sorted(dist.RoleLB) {
		for _, p := range lb.hello.Ports {
			if p.Role == dist.PortExternal && p.VLAN != 0 && a.portKnown(known, lb.hello.Name, p) {
				names[p.VLAN] = portName(lb.hello.Name, p)
			}
		}
	}
	return names
}

// describePorts gives cfg's routing section the external ports, named as
// the LBs' hellos name them, for the suite's config to describe, and the
// RIB feed's TCP-MD5 key.
func (a *Agent) describePorts(cfg *Config) {
	if cfg.Routing == nil {
		return
	}
	if b := cfg.Routing.Backends; b != nil {
		b.Password = a.ribPassword
	}
	a.mu.Lock()
	names := a.externalPortNames()
	a.mu.Unlock()
	ports := []SuitePort{}
	for _, p := range cfg.ExternalPorts {
		name, ok := names[p.VLAN]
		if !ok {
			name = fmt.Sprintf("%s VLAN %d", p.LB, p.VLAN) // before the LB's first hello
		}
		ports = append(ports, SuitePort{VLAN: p.VLAN, Address: p.Address, Address6: p.Address6, Name: name, RA: p.RouterAdvertisements})
	}
	cfg.Routing.Ports = ports
	if cfg.SNMP != nil {
		cfg.Routing.AgentX = snmpSocket(cfg.runDir())
	}
}

// Routes reports the routes and each back-end's install state.
func (a *Agent) Routes() (*vcpapi.RoutesView, error) {
	v := &vcpapi.RoutesView{Protocols: []vcpapi.Protocol{}, Backends: []vcpapi.BackendRoutes{}}
	byMAC := map[string]vcpapi.Protocol{}
	if suite := a.currentSuite(); suite != nil {
		var err error
		if v.Networks, err = suite.Networks(); err != nil {
			return nil, err
		}
		if ps := suite.Protocols(); ps != nil {
			v.Protocols = ps
		}
		arp := neighborMACs()
		for _, p := range v.Protocols {
			if mac, ok := arp[p.Neighbor]; ok {
				byMAC[mac] = p
			}
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.elements.sorted(dist.RoleRouter) {
		b := vcpapi.BackendRoutes{Name: r.hello.Name, Alive: r.alive, Installed: r.hello.Installed}
		if p, ok := byMAC[r.mac.String()]; ok {
			b.Session, b.Neighbor, b.Exported = p.Info, p.Neighbor, p.Exported
		}
		v.Backends = append(v.Backends, b)
	}
	return v, nil
}

// neighborMACs reads the VCP namespace's ARP table: address -> MAC.
func neighborMACs() map[netip.Addr]string {
	out := map[netip.Addr]string{}
	f, err := os.Open("/proc/net/arp")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// IP address  HW type  Flags  HW address  Mask  Device
		fs := strings.Fields(sc.Text())
		if len(fs) < 4 {
			continue
		}
		if ip, err := netip.ParseAddr(fs[0]); err == nil && fs[3] != "00:00:00:00:00:00" {
			out[ip] = fs[3]
		}
	}
	return out
}

// Lookup finds the routes for addr in the suite and in every back-end.
func (a *Agent) Lookup(addr netip.Addr) *vcpapi.LookupView {
	v := &vcpapi.LookupView{Addr: addr.String(), Suite: []vcpapi.SuiteRoute{}, Backends: []vcpapi.BackendLookup{}}
	if suite := a.currentSuite(); suite != nil {
		if rs := suite.RoutesFor(addr); rs != nil {
			v.Suite = rs
		}
	}
	a.mu.Lock()
	var names []string
	for _, r := range a.elements.sorted(dist.RoleRouter) {
		names = append(names, r.hello.Name)
	}
	a.mu.Unlock()
	for _, name := range names {
		b := vcpapi.BackendLookup{Name: name, Routes: []routerapi.RouteInfo{}}
		c, err := a.elementClient(name)
		if err == nil {
			var rs []routerapi.RouteInfo
			if rs, err = routerapi.New(c).Lookup(addr); err == nil && rs != nil {
				b.Routes = rs
			}
		}
		if err != nil {
			b.Error = err.Error()
		}
		v.Backends = append(v.Backends, b)
	}
	return v
}

// Relay sends a request to the API of one element, named by name or id,
// and returns its answer as it is.
func (a *Agent) Relay(element, method, path string, body []byte) (int, []byte, error) {
	c, err := a.elementClient(element)
	if err != nil {
		return 0, nil, err
	}
	if !strings.HasPrefix(path, "/") {
		return 0, nil, fmt.Errorf("path %q: an API path such as /status", path)
	}
	return c.Raw(method, path, body)
}

// elementClient finds an element by name or by id (0x...) and its API.
func (a *Agent) elementClient(s string) (*api.Client, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	id, idErr := strconv.ParseUint(s, 0, 64)
	for _, e := range a.elements {
		if e.hello.Name == s || (idErr == nil && e.id == id) {
			name := e.hello.Name
			addr, ok := a.cfg.apiOf(name)
			if !ok && e.hello.Role == dist.RoleRouter {
				addr, ok = routerapi.APIOf(e.hello)
			}
			if !ok {
				return nil, fmt.Errorf("%s has no management API in the router's config (lbs or backends: %s: {api: ADDR:PORT})", name, name)
			}
			return api.NewTCPClient(addr.String(), a.token, "element "+name, a.apiTLS), nil
		}
	}
	return nil, fmt.Errorf("no element %q", s)
}

// errStandby refuses an operator's change on a standby VCP: the active one
// holds the router's state (its back-ends keep the drains and weights it
// sends them, which a standby takes from their hellos).
var errStandby = errors.New("this VCP is a standby: ask the active one (msr ctl --api)")
