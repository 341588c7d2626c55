package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/routetable"
	"github.com/msr-router/msr/internal/xdp"
)

// settings are what a back-end serves for the router: the router's
// external ports, its other own addresses, its ACL and the RIB feed to
// dial; and what the operator asked of it through the VCP (drained, a
// weight), which it reports in its hellos so that any VCP learns them. They come from the back-end's file (without a VCP) or from the
// active VCP (BACKEND_CONFIG and ACL_CONFIG, docs/dist.md), which a
// back-end whose file holds only its identity waits for (the virtual
// control plane coordinates the elements).
type settings struct {
	Ports []PortSpec   `json:"ports"`
	Addrs []netip.Addr `json:"addrs"`
	ACL   []ACLRule    `json:"acl"`
	RIB   *RIBConfig   `json:"rib"`
	// Drained: no new flows (`msr ctl drain`); CapacityMbps: the
	// operator's weight (`msr ctl weight`; 0: the file's capacity).
	Drained      bool   `json:"drained,omitempty"`
	CapacityMbps uint32 `json:"capacity_mbps,omitempty"`
	// OperatorVersion is the version of those two
	// (dist.BackendConfig.OperatorVersion): a VCP's older one does not
	// replace them (newerOperator).
	OperatorVersion uint64 `json:"operator_version,omitempty"`
	// LinkRoutes are the suite's routes via link-local next hops that its
	// feed cannot carry (LINK_ROUTES, dist/linkroutes.go): the RIB feed
	// ranks them with its own paths.
	LinkRoutes []dist.LinkRoute `json:"link_routes,omitempty"`
}

// fileSettings are the settings of the back-end's own file.
func fileSettings(c *AgentConfig) settings {
	return settings{Ports: c.Ports, Addrs: c.RouterAddresses, ACL: c.ACL, RIB: c.RIB}
}

// settingsPath is where the VCP's settings are kept, so that a restarted
// agent serves them (its data path never stopped) until the VCP speaks.
func (a *Agent) settingsPath() string { return a.statePath() + ".settings" }

// loadSettings reads the VCP's settings a previous run kept.
func (a *Agent) loadSettings() (settings, bool) {
	var s settings
	b, err := os.ReadFile(a.settingsPath())
	if err != nil {
		return s, false
	}
	if err := json.Unmarshal(b, &s); err != nil {
		a.log.Warn("kept settings unreadable: waiting for the VCP's", "err", err)
		return settings{}, false
	}
	return s, true
}

func (a *Agent) saveSettings(s settings) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := os.WriteFile(a.settingsPath()+".tmp", b, 0o600); err != nil {
		return err
	}
	return os.Rename(a.settingsPath()+".tmp", a.settingsPath())
}

// vcpSettings are a BACKEND_CONFIG and an ACL_CONFIG as the agent serves
// them.
func vcpSettings(m *dist.BackendConfig, acl []dist.ACLRule) settings {
	s := settings{Addrs: m.Addrs, Drained: m.Drained, CapacityMbps: m.Capacity, OperatorVersion: m.OperatorVersion}
	for _, p := range m.Ports {
		s.Ports = append(s.Ports, PortSpec{Name: p.Name, VLAN: p.VLAN, Address: p.Prefix, Address6: p.Prefix6, MTU: max(p.MTU, 576), URPF: p.URPF, Down: p.Down})
	}
	for _, r := range acl {
		s.ACL = append(s.ACL, aclRule(r))
	}
	if m.RIBNeighbor.IsValid() {
		s.RIB = &RIBConfig{Neighbor: m.RIBNeighbor, ASN: m.RIBASN}
	}
	return s
}

// receive takes the VCP's configuration from DIST until ctx ends:
// BACKEND_CONFIG and ACL_CONFIG addressed to this back-end, from any
// authentic sender (the deployment key is the trust; only the active VCP
// sends them).
func (a *Agent) receive(ctx context.Context) {
	var acl []dist.ACLRule
	var cfg *dist.BackendConfig
	var cfgFrom uint64 // the VCP that sent cfg
	var links dist.LinkRouteSet
	var pages dist.BackendConfigSet
	for ctx.Err() == nil {
		f, err := a.conn.Recv(200 * time.Millisecond)
		if errors.Is(err, dist.ErrTimeout) {
			continue
		}
		if err != nil {
			if ctx.Err() == nil {
				a.log.Error("receive DIST", "err", err)
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		switch m := f.Msg.(type) {
		case *dist.Hello:
			if m.Role == dist.RoleRouter && f.Header.Sender != a.cfg.ID {
				a.mu.Lock()
				a.icmp.heard(f.Src, f.Received)
				a.mu.Unlock()
			}
			continue
		case *dist.BackendConfig:
			if m.Target != a.cfg.ID {
				continue
			}
			whole := pages.Add(f.Header.Sender, m)
			if whole == nil {
				continue // more pages to come
			}
			if !a.portsFit(whole) {
				continue
			}
			cfg, cfgFrom = whole, f.Header.Sender
		case *dist.ACLConfig:
			if m.Target != a.cfg.ID {
				continue
			}
			acl = m.Rules
			a.mu.Lock()
			a.aclFromVCP = true
			a.mu.Unlock()
		case *dist.StaticNeighbors:
			if m.Target == a.cfg.ID {
				a.setStatic(m.Neighbors)
			}
			continue
		case *dist.LinkRoutes:
			if m.Target != a.cfg.ID {
				continue
			}
			if routes := links.Add(f.Header.Sender, m); routes != nil {
				a.setLinkRoutes(routes)
			}
			continue
		default:
			continue
		}
		if cfg == nil {
			continue // the ACL waits for the ports
		}
		s := vcpSettings(cfg, acl)
		a.mu.Lock()
		if !a.aclFromVCP {
			s.ACL = a.set.ACL
		}
		s.LinkRoutes = a.set.LinkRoutes
		s, superseded := newerOperator(a.set, s)
		a.mu.Unlock()
		if superseded {
			a.log.Info("the operator's state from a VCP behind ignored: this back-end keeps a newer one",
				"vcp", fmt.Sprintf("%#x", cfgFrom), "version", cfg.OperatorVersion, "kept_version", s.OperatorVersion,
				"drained", s.Drained, "capacity_mbps", s.CapacityMbps)
		}
		if err := a.apply(ctx, s); err != nil {
			a.log.Error("settings from the VCP", "err", err)
		}
	}
}

// backendPorts are ports as the VCP sent them, for their digest.
func backendPorts(ports []PortSpec) []dist.BackendPort {
	bp := make([]dist.BackendPort, len(ports))
	for i, p := range ports {
		bp[i] = dist.BackendPort{Name: p.Name, VLAN: p.VLAN, Prefix: p.Address, Prefix6: p.Address6, MTU: p.MTU, URPF: p.URPF, Down: p.Down}
	}
	return bp
}

// portsFit says whether the data path holds the ports of m, the VCP's
// whole config; one with more than max_ports is refused, counted, and
// logged once for each size refused.
func (a *Agent) portsFit(m *dist.BackendConfig) bool {
	if len(m.Ports) <= a.dp.Ports {
		return true
	}
	a.mu.Lock()
	a.configsRefused++
	logIt := a.refusedPorts != len(m.Ports)
	a.refusedPorts = len(m.Ports)
	a.mu.Unlock()
	if logIt {
		a.log.Error("BACKEND_CONFIG refused: more external ports than this back-end's maps hold", "ports", len(m.Ports), "max_ports", a.dp.Ports)
	}
	return false
}

// setLinkRoutes makes routes the link-local routes in force (the VCP's
// whole set): the RIB feed's, if one runs, and the kept settings', so that
// a restarted agent's feed has them from its start.
func (a *Agent) setLinkRoutes(routes []dist.LinkRoute) {
	a.mu.Lock()
	if slices.Equal(a.set.LinkRoutes, routes) {
		a.mu.Unlock()
		return
	}
	a.set.LinkRoutes = routes
	s, rib := a.set, a.rib
	a.mu.Unlock()
	a.log.Info("link-local routes from the VCP", "routes", len(routes))
	if rib != nil {
		rib.setLinkRoutes(routes)
	}
	if err := a.saveSettings(s); err != nil {
		a.log.Error("keep settings", "err", err)
	}
}

// newerOperator keeps the operator's drain and weight in force (old) when
// the VCP's settings (s) carry an older version of them: two VCPs active
// at once each push their own view, and the one behind must not undo the
// operator's last word (docs/reliability.md, finding 17). The rest of s
// (ports, addresses, ACL, RIB feed) stands. superseded says s's were
// older and differed.
func newerOperator(old, s settings) (_ settings, superseded bool) {
	if s.OperatorVersion >= old.OperatorVersion {
		return s, false
	}
	superseded = s.Drained != old.Drained || s.CapacityMbps != old.CapacityMbps
	s.Drained, s.CapacityMbps, s.OperatorVersion = old.Drained, old.CapacityMbps, old.OperatorVersion
	return s, superseded
}

// apply makes s the settings in force, changing only what differs: the
// ports (changePorts), the router's addresses, the ACL, the RIB feed.
func (a *Agent) apply(ctx context.Context, s settings) error {
	a.mu.Lock()
	old := a.set
	portsChanged := !slices.Equal(old.Ports, s.Ports) || !slices.Equal(old.Addrs, s.Addrs)
	aclChanged := !slices.Equal(old.ACL, s.ACL)
	ribChanged := !sameRIB(old.RIB, s.RIB)
	operatorChanged := old.Drained != s.Drained || old.CapacityMbps != s.CapacityMbps || old.OperatorVersion != s.OperatorVersion
	if !portsChanged && !aclChanged && !ribChanged && !operatorChanged {
		a.mu.Unlock()
		return nil
	}
	a.set = s
	if operatorChanged {
		a.log.Info("the operator's state from the VCP", "drained", s.Drained, "capacity_mbps", s.CapacityMbps, "version", s.OperatorVersion)
		if !portsChanged && !aclChanged && !ribChanged {
			a.mu.Unlock()
			return a.saveSettings(s)
		}
	}
	var err error
	if portsChanged {
		var restarted bool
		restarted, err = a.changePorts(old.Ports)
		if !restarted && err == nil {
			err = a.writePorts(len(old.Ports)) // new names, or the router's other addresses
		}
		ribChanged = ribChanged || (restarted && s.RIB != nil)
		a.log.Info("ports from the VCP", "ports", portsText(s.Ports), "addresses", s.Addrs, "fib_restarted", restarted)
	}
	if aclChanged {
		err = errors.Join(err, a.dp.SetACL(a.mac, s.ACL))
		a.log.Info("ACL from the VCP", "rules", len(s.ACL))
	}
	a.dirty, a.lastChange = true, time.Now()
	a.mu.Unlock()
	if ribChanged {
		err = errors.Join(err, a.startRIB(ctx, s.RIB))
	}
	return errors.Join(err, a.saveSettings(s))
}

func sameRIB(a, b *RIBConfig) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Neighbor == b.Neighbor && a.ASN == b.ASN && a.RouterID == b.RouterID
}

func portsText(ps []PortSpec) []string {
	var out []string
	for _, p := range ps {
		t := fmt.Sprintf("%s vlan %d %s", p.Name, p.VLAN, p.Address)
		if p.Address6.IsValid() {
			t += " " + p.Address6.String()
		}
		t += fmt.Sprintf(" mtu %d", p.MTU)
		if p.URPF != dist.URPFOff {
			t += " urpf " + p.URPF.String()
		}
		if p.Down {
			t += " down"
		}
		out = append(out, t)
	}
	return out
}

// writePorts writes the ports of a.set and the addresses the data path
// answers for (the router's, this host's). Call with a.mu held.
func (a *Agent) writePorts(previous int) error {
	a.ports = a.ports[:0]
	defer func() {
		a.neighMu.Lock()
		a.neighPorts = slices.Clone(a.ports)
		a.neighMu.Unlock()
	}()
	a.portsDigest = 0
	if len(a.set.Ports) > 0 {
		a.portsDigest = dist.PortsDigest(backendPorts(a.set.Ports))
	}
	local := map[netip.Addr]uint32{}
	for i, pc := range a.set.Ports {
		p := Port{Index: uint16(i), VLAN: pc.VLAN, MTU: pc.MTU, Addr: pc.Address, Addr6: pc.Address6}
		if err := a.dp.SetPort(p); err != nil {
			return err
		}
		a.ports = append(a.ports, p)
		local[p.Addr.Addr()] = LocalRouter
		if p.Addr6.IsValid() {
			local[p.Addr6.Addr()] = LocalRouter
		}
	}
	for i := len(a.set.Ports); i < previous; i++ {
		if err := a.dp.SetPort(Port{Index: uint16(i)}); err != nil {
			return err
		}
	}
	for _, addr := range a.set.Addrs {
		local[addr] = LocalRouter
	}
	for _, addr := range a.hostAddrs {
		local[addr] = LocalHost
	}
	keep, keep6 := map[uint32]bool{}, map[[16]byte]bool{}
	for addr, kind := range local {
		if err := a.dp.SetLocal(addr, kind); err != nil {
			return err
		}
		if addr.Is6() {
			keep6[addr.As16()] = true
		} else {
			keep[be32(addr)] = true
		}
	}
	xdp.DeleteStale(a.dp.objs.RtLocal, func(k uint32, _ uint32) bool { return keep[k] })
	xdp.DeleteStale(a.dp.objs.RtLocal6, func(k [16]byte, _ uint32) bool { return keep6[k] })
	return nil
}

// writeURPF sets rt_vlans to the unicast RPF of a.set's ports, every
// other VLAN not external (a previous run's, or a port gone). Call with
// a.mu held.
func (a *Agent) writeURPF() error {
	ports := map[uint16]dist.URPFMode{}
	for _, p := range a.set.Ports {
		ports[p.VLAN] = p.URPF
	}
	return a.dp.SetURPFs(ports)
}

// samePorts says whether two lists of ports are the same but for their
// names and states (a relabelling or a port going down changes no index
// in the data path).
func samePorts(a, b []PortSpec) bool {
	return slices.EqualFunc(a, b, func(x, y PortSpec) bool {
		return x.VLAN == y.VLAN && x.Address == y.Address && x.Address6 == y.Address6 && x.MTU == y.MTU
	})
}

// changePorts serves new ports at run time. Every next hop names a port by
// its index, so changed ports start the FIB again: every route goes, the
// new ports' connected routes and the file's static routes come, and the
// caller restarts the RIB feed, whose suite sends its table again (until
// its End-of-RIB the back-end is not ready, so the LBs send it nothing).
// Ports that differ only in their names are relabelled; ports added after
// the ones served (an LB that joined) keep every index and route, and
// only their connected routes come. Call with a.mu held; it says whether
// the FIB started again.
func (a *Agent) changePorts(old []PortSpec) (bool, error) {
	if err := a.writeURPF(); err != nil {
		return false, err
	}
	if samePorts(old, a.set.Ports) {
		return false, a.setConnected()
	}
	if n := len(old); len(a.set.Ports) > n && samePorts(old, a.set.Ports[:n]) {
		if err := a.writePorts(n); err != nil {
			return false, err
		}
		return false, a.setConnected()
	}
	for _, fib := range []table{a.dp.FIB, a.dp.FIB6} {
		for p, g := range fib.Routes().Map() {
			if err := fib.Delete(p); err != nil {
				return true, err
			}
			a.nh.release(g)
		}
	}
	if err := a.writePorts(len(old)); err != nil {
		return true, err
	}
	if err := a.setConnected(); err != nil {
		return true, err
	}
	for _, r := range a.cfg.Routes {
		if err := a.setRoute(r.To, r.Via); err != nil {
			a.log.Warn("static route on no port now", "to", r.To, "err", err)
		}
	}
	a.adopted = false
	return true, nil
}

// stopRIB ends the RIB feed, if one runs; the routes it gave stay in
// the FIB.
func (a *Agent) stopRIB() {
	a.mu.Lock()
	old := a.rib
	a.rib = nil
	a.mu.Unlock()
	if old != nil {
		old.Stop()
	}
}

// startRIB (re)starts the RIB feed with cfg (nil: none).
func (a *Agent) startRIB(ctx context.Context, cfg *RIBConfig) error {
	a.stopRIB()
	if cfg == nil {
		return nil
	}
	cfg.password = a.ribPassword
	id := cfg.RouterID
	if !id.IsValid() {
		id = a.hostIP
	}
	a.mu.Lock()
	held := a.heldRoutes()
	a.mu.Unlock()
	rib, err := startRIB(ctx, cfg, id, a.log, a.addLearned, a.deleteLearned, held)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.rib = rib
	links := a.set.LinkRoutes
	a.mu.Unlock()
	if len(links) > 0 {
		rib.setLinkRoutes(links)
	}
	return nil
}

// heldRoutes are the routes the FIB holds that neither the configuration
// nor the operator (msr router route add) set: a previous run's feed's,
// adopted, or the feed's that ended; with their gateways. A new feed holds them as stale (ribFeed's
// holdStale). Call with a.mu held.
func (a *Agent) heldRoutes() map[netip.Prefix][]netip.Addr {
	static := map[netip.Prefix]bool{}
	for _, r := range a.cfg.Routes {
		static[r.To.Masked()] = true
	}
	for _, f := range a.cfg.RouteFiles {
		ps, err := routetable.Load(f.File)
		if err != nil {
			a.log.Warn("route file unreadable: its routes are taken for the RIB feed's", "file", f.File, "err", err)
		}
		for _, p := range ps {
			static[p.Masked()] = true
		}
	}
	held := map[netip.Prefix][]netip.Addr{}
	for _, fib := range []table{a.dp.FIB, a.dp.FIB6} {
		for p, g := range fib.Routes().All() {
			if static[p] || a.operator[p] || a.isConnected(p) {
				continue
			}
			var gws []netip.Addr
			for _, id := range a.nh.groups[g] {
				if gw := a.nh.keys[id].gw; gw.IsValid() {
					gws = append(gws, gw)
				}
			}
			if len(gws) > 0 {
				held[p] = gws
			}
		}
	}
	return held
}

// HostIP is this host's address on the interconnect (invalid: none).
func (a *Agent) HostIP() netip.Addr { return a.hostIP }

// ready says whether the back-end can take traffic: it serves the
// router's ports, and its FIB holds the RIB feed's routes (the feed's
// End-of-RIB came, or the routes were adopted from a previous run). A
// back-end that is not ready asks for no flows (hello flag draining), so
// a back-end added at run time joins the tables only once it can route.
func (a *Agent) ready() bool {
	a.mu.Lock()
	rib, ports, adopted := a.rib, len(a.ports), a.adopted
	a.mu.Unlock()
	return isReady(ports, rib, adopted)
}

// isReady is ready's rule, for what was read under a.mu.
func isReady(ports int, rib *ribFeed, adopted bool) bool {
	return ports > 0 && (rib == nil || adopted || rib.Synced())
}
