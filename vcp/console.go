package vcp

import (
	"bufio"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/api"
	"github.com/msr-router/msr/router"
)

// The console: the router as one box, for `msr ctl` (api.go serves it on
// the management network). Ports and counters come from the elements'
// hellos, routes from the suite and the back-ends' own APIs.

// PortView is one port of the router.
type PortView struct {
	Name      string `json:"name"` // LB:index, such as lb1:1
	LB        string `json:"lb"`
	Index     uint8  `json:"index"`
	MAC       string `json:"mac"`
	Role      string `json:"role"` // external, internal, unknown
	VLAN      uint16 `json:"vlan,omitempty"`
	Address   string `json:"address,omitempty"`
	Up        bool   `json:"up"`
	SpeedMbps uint32 `json:"speed_mbps"`
	MTU       uint16 `json:"mtu"`
	Counters
}

// Counters are a port's, or the router's, packet and byte counts.
type Counters struct {
	RxPackets uint64 `json:"rx_packets"`
	RxBytes   uint64 `json:"rx_bytes"`
	TxPackets uint64 `json:"tx_packets"`
	TxBytes   uint64 `json:"tx_bytes"`
	RxDropped uint64 `json:"rx_dropped"`
}

func (c *Counters) add(o Counters) {
	c.RxPackets += o.RxPackets
	c.RxBytes += o.RxBytes
	c.TxPackets += o.TxPackets
	c.TxBytes += o.TxBytes
	c.RxDropped += o.RxDropped
}

// PortsView is every port of every live LB; External sums the external
// ports: what the router as a whole received and sent.
type PortsView struct {
	Ports    []PortView `json:"ports"`
	External Counters   `json:"external"`
}

// Ports lists the router's ports as the LBs' last hellos tell them.
func (a *Agent) Ports() *PortsView {
	a.mu.Lock()
	defer a.mu.Unlock()
	v := &PortsView{Ports: []PortView{}}
	for _, lb := range a.sorted(dist.RoleLB) {
		if !lb.alive {
			continue
		}
		for _, p := range lb.hello.Ports {
			pv := PortView{Name: fmt.Sprintf("%s:%d", lb.hello.Name, p.Index), LB: lb.hello.Name, Index: p.Index,
				MAC: p.MAC.String(), Role: [...]string{"unknown", "external", "internal"}[p.Role], VLAN: p.VLAN,
				Up: p.Flags&dist.PortFlagUp != 0, SpeedMbps: p.SpeedMbps, MTU: p.MTU,
				Counters: Counters{p.RxPackets, p.RxBytes, p.TxPackets, p.TxBytes, p.RxDropped}}
			if p.Prefix.IsValid() && p.Prefix.Bits() > 0 {
				pv.Address = p.Prefix.String()
			}
			if p.Role == dist.PortExternal {
				v.External.add(pv.Counters)
			}
			v.Ports = append(v.Ports, pv)
		}
	}
	return v
}

// RoutesView is the router's routes: how many the suite holds, its
// protocols, and what each back-end has.
type RoutesView struct {
	Networks  int             `json:"networks"` // prefixes in the suite's table
	Protocols []Protocol      `json:"protocols"`
	Backends  []BackendRoutes `json:"backends"`
}

// BackendRoutes is one back-end's install state.
type BackendRoutes struct {
	Name  string `json:"name"`
	Alive bool   `json:"alive"`
	// Installed is the routes in its FIB (its hellos), connected ones too.
	Installed uint32 `json:"installed"`
	// Session is its RIB feed's iBGP session in the suite, found by the
	// neighbour's MAC: its state and the routes the suite sent it.
	Session  string     `json:"session,omitempty"`
	Neighbor netip.Addr `json:"neighbor,omitzero"`
	Exported int        `json:"exported"`
}

// Routes reports the routes and each back-end's install state.
func (a *Agent) Routes() (*RoutesView, error) {
	v := &RoutesView{Protocols: []Protocol{}, Backends: []BackendRoutes{}}
	byMAC := map[string]Protocol{}
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
	for _, r := range a.sorted(dist.RoleRouter) {
		b := BackendRoutes{Name: r.hello.Name, Alive: r.alive, Installed: r.hello.Installed}
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

// LookupView is the routes for one address: the suite's, and what each
// back-end's FIB holds for it (asked through its API).
type LookupView struct {
	Addr     string          `json:"addr"`
	Suite    []SuiteRoute    `json:"suite"`
	Backends []BackendLookup `json:"backends"`
}

// BackendLookup is one back-end's longest match, or why it is unknown.
type BackendLookup struct {
	Name   string             `json:"name"`
	Routes []router.RouteInfo `json:"routes"`
	Error  string             `json:"error,omitempty"`
}

// Lookup finds the routes for addr in the suite and in every back-end.
func (a *Agent) Lookup(addr netip.Addr) *LookupView {
	v := &LookupView{Addr: addr.String(), Suite: []SuiteRoute{}, Backends: []BackendLookup{}}
	if suite := a.currentSuite(); suite != nil {
		if rs := suite.RoutesFor(addr); rs != nil {
			v.Suite = rs
		}
	}
	a.mu.Lock()
	var names []string
	for _, r := range a.sorted(dist.RoleRouter) {
		names = append(names, r.hello.Name)
	}
	a.mu.Unlock()
	for _, name := range names {
		b := BackendLookup{Name: name, Routes: []router.RouteInfo{}}
		if err := a.relayJSON(name, "GET", "/lookup?addr="+url.QueryEscape(addr.String()), &b.Routes); err != nil {
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

func (a *Agent) relayJSON(element, method, path string, out any) error {
	c, err := a.elementClient(element)
	if err != nil {
		return err
	}
	return c.Do(method, path, nil, out)
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
			if !ok {
				return nil, fmt.Errorf("%s has no management API in the router's config (lbs or backends: %s: {api: ADDR:PORT})", name, name)
			}
			return api.NewTCPClient(addr.String(), a.token, "element "+name), nil
		}
	}
	return nil, fmt.Errorf("no element %q", s)
}

// SetCapacity sets a back-end's capacity, so its weight, until the VCP
// restarts or the config is reloaded (0: back to the config's or its
// hellos').
func (a *Agent) SetCapacity(name string, mbps uint32) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range a.elements {
		if e.hello.Role == dist.RoleRouter && e.hello.Name == name {
			if mbps == 0 {
				delete(a.capacities, name)
			} else {
				a.capacities[name] = mbps
			}
			return nil
		}
	}
	return fmt.Errorf("no back-end %q", name)
}
