package vcp

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/msr-router/msr/internal/acl"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// Reload: the router's config file read again, and the difference applied
// while the VCP runs. Everything but the VCP's own identity can change; a
// file that changes that is refused whole, with nothing applied, and says
// why. External ports may come and go (an LB joining with its ports):
// their mirrors are made or taken away, and the suite given them.

// Reload reads the config file the VCP started with and applies what
// differs. A bad file (with its line), a change that needs a restart or
// one the suite refuses leaves everything as it was. An applied change is
// kept in the history (confirm.go).
func (a *Agent) Reload(o ReloadOptions) (*vcpapi.ReloadResult, error) {
	return a.reload(o, nil)
}

// reload is Reload, of o.data if set; with p set (an unconfirmed change's
// timer), only if p is still the change pending.
func (a *Agent) reload(o ReloadOptions, p *pendingConfirm) (*vcpapi.ReloadResult, error) {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	if p != nil && a.pending != p {
		return &vcpapi.ReloadResult{Changes: []string{}}, nil
	}
	dryRun := o.DryRun
	a.mu.Lock()
	old := a.cfg
	a.mu.Unlock()
	data := o.data
	if data == nil {
		var err error
		if data, err = os.ReadFile(old.Pos.File); err != nil {
			return nil, err
		}
	}
	next, err := ParseConfig(old.Pos.File, data)
	if err != nil {
		return nil, err
	}
	// The DIST keys as their files hold them now (a rollover's step),
	// whatever else changed.
	if !dryRun {
		if err := old.Rekey(true, a.sender, a.conn); err != nil {
			return nil, err
		}
	}
	changes, err := diffConfig(old, next)
	if err != nil {
		return nil, err
	}
	res := &vcpapi.ReloadResult{Changes: changes, DryRun: dryRun}
	if len(changes) == 0 && o.data != nil && !dryRun {
		// A rollback to what runs: the file back, any wait ended.
		if err := writeConfigFile(old.Pos.File, data); err != nil {
			return nil, err
		}
		if a.pending != nil {
			if err := a.settlePending(func(e *vcpapi.ConfigEntry) { e.RolledBack = true }); err != nil {
				return nil, err
			}
		}
	}
	if len(changes) == 0 || dryRun {
		return res, nil
	}
	added, removed := portSetChange(old, next)
	// A suite that cannot take the change refuses it before anything else
	// changes.
	a.describePorts(next)
	a.mu.Lock()
	running, active := a.suite, a.active
	a.mu.Unlock()
	if running != nil && active && next.Routing != nil && (!sameRouting(old.Routing, next.Routing) || len(added)+len(removed) > 0) {
		if err := running.Check(next.Routing); err != nil {
			return nil, err
		}
	}
	if err := a.changePortSet(added, removed); err != nil {
		return nil, err
	}
	// The mirrors first: their addresses and MTUs.
	for _, np := range next.ExternalPorts {
		for _, op := range old.ExternalPorts {
			if op.VLAN == np.VLAN && (op.Address != np.Address || op.MTU != np.MTU) {
				if err := readdressMirror(np); err != nil {
					return nil, err
				}
			}
		}
	}
	a.mu.Lock()
	suite, active := a.suite, a.active
	a.mu.Unlock()
	switch {
	case !active: // a standby: the suite starts with the new config when it takes over
	case old.Routing != nil && next.Routing == nil:
		suite.Stop()
		suite = nil
	case old.Routing == nil && next.Routing != nil:
		if suite, err = StartSuite(next.Routing, false, a.log, a.suiteFailed); err != nil {
			return nil, err
		}
	case next.Routing != nil && (!sameRouting(old.Routing, next.Routing) || len(added)+len(removed) > 0):
		// FRR's zebra takes new interfaces from the kernel by itself;
		// BIRD's config names the ports.
		if _, frr := suite.(*FRR); frr && sameRouting(old.Routing, next.Routing) {
			break
		}
		if err := suite.Reconfigure(next.Routing); err != nil {
			return nil, err
		}
	}
	a.mu.Lock()
	a.cfg, a.suite = next, suite
	clear(a.op.capacities) // the file's capacities now
	a.mu.Unlock()
	a.kickSFlow()
	if o.data != nil {
		if err := writeConfigFile(old.Pos.File, data); err != nil {
			return nil, err
		}
	}
	if res.Entry, err = a.record(o, changes, data); err != nil {
		return nil, err
	}
	for _, c := range changes {
		a.log.Info("reloaded", "change", c, "by", o.Who)
	}
	a.mu.Lock()
	a.event("config reloaded: %d changes", len(changes))
	a.mu.Unlock()
	return res, nil
}

// diffConfig lists what differs between two configs, one change per line,
// sorted; or says what cannot change without a restart.
func diffConfig(old, next *Config) ([]string, error) {
	var restart []string
	same := func(what string, o, n any) {
		if fmt.Sprint(o) != fmt.Sprint(n) {
			restart = append(restart, fmt.Sprintf("%s %v -> %v", what, o, n))
		}
	}
	same("name", old.Name, next.Name)
	same("id", old.ID, next.ID)
	same("key_file", old.KeyFile, next.KeyFile)
	same("key_id", old.KeyID, next.KeyID)
	same("interface", old.Interface, next.Interface)
	same("hello_interval", old.HelloInterval, next.HelloInterval)
	same("hold_multiplier", old.HoldMultiplier, next.HoldMultiplier)
	same("socket", old.Socket, next.Socket)
	same("api_listen", old.APIListen, next.APIListen)
	same("api_insecure", old.APIInsecure, next.APIInsecure)
	same("vcp_key_file", old.VCPKeyFile, next.VCPKeyFile)
	same("state_dir", old.StateDir, next.StateDir)
	same("standby", standbyText(old.Standby), standbyText(next.Standby))
	same("snmp", snmpText(old.SNMP), snmpText(next.SNMP))
	if old.Routing != nil && next.Routing != nil {
		same("routing run_dir", old.Routing.RunDir, next.Routing.RunDir)
		same("routing suite", old.Routing.Suite, next.Routing.Suite)
	}
	if len(restart) > 0 {
		return nil, errors.New("nothing applied: these changes need a restart of msr vcp: " + strings.Join(restart, "; "))
	}
	var ch []string
	if old.Mode != next.Mode {
		ch = append(ch, fmt.Sprintf("mode %s -> %s", old.Mode, next.Mode))
	}
	ch = append(ch, diffKeyed("lb", lbLines(old), lbLines(next))...)
	ch = append(ch, diffKeyed("back-end", backendLines(old), backendLines(next))...)
	ch = append(ch, diffKeyed("external port", portLines(old), portLines(next))...)
	ch = append(ch, diffKeyed("routing", routingLines(old.Routing), routingLines(next.Routing))...)
	ch = append(ch, diffKeyed("acl", aclLines(old), aclLines(next))...)
	ch = append(ch, diffKeyed("sflow", sflowLines(old), sflowLines(next))...)
	sort.Strings(ch)
	return ch, nil
}

// diffKeyed compares two sets of keyed settings: added, removed, changed.
func diffKeyed(what string, old, next map[string]string) []string {
	var ch []string
	for k, o := range old {
		n, ok := next[k]
		switch {
		case !ok:
			ch = append(ch, fmt.Sprintf("%s %s removed (was %s)", what, k, o))
		case n != o:
			ch = append(ch, fmt.Sprintf("%s %s: %s -> %s", what, k, o, n))
		}
	}
	for k, n := range next {
		if _, ok := old[k]; !ok {
			ch = append(ch, fmt.Sprintf("%s %s added: %s", what, k, n))
		}
	}
	return ch
}

// sameRouting says whether two routing sections configure the same.
func sameRouting(a, b *RoutingConfig) bool {
	return len(diffKeyed("", routingLines(a), routingLines(b))) == 0
}

func standbyText(s *StandbyConfig) string {
	if s == nil {
		return "none"
	}
	return fmt.Sprintf("address %s vrid %d priority %d advert %v", s.Address, s.VRID, s.Priority, s.AdvertInterval)
}

// portSetChange is the external ports next has and old has not (by VLAN),
// and the VLANs old has and next has not.
func portSetChange(old, next *Config) (added []ExternalPortConfig, removed []uint16) {
	had := map[uint16]bool{}
	for _, p := range old.ExternalPorts {
		had[p.VLAN] = true
	}
	for _, p := range next.ExternalPorts {
		if !had[p.VLAN] {
			added = append(added, p)
		}
		delete(had, p.VLAN)
	}
	for v := range had {
		removed = append(removed, v)
	}
	slices.Sort(removed)
	return added, removed
}

// changePortSet makes the mirrors of added ports and takes away those of
// removed ones, forgets the removed ports' states, and marks the ifTable
// changed (ifTableLastChange). A port whose mirror cannot be made stops
// the reload there.
func (a *Agent) changePortSet(added []ExternalPortConfig, removed []uint16) error {
	if len(added)+len(removed) == 0 {
		return nil
	}
	for _, v := range removed {
		if err := a.mirrors.Remove(v); err != nil {
			a.log.Warn("mirror", "vlan", v, "err", err)
		}
		a.links.forget(v)
	}
	var err error
	for _, p := range added {
		if err = a.mirrors.Add(p); err != nil {
			break
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, v := range removed {
		delete(a.ports, v)
	}
	a.ifTableChanged = time.Now()
	return err
}

func lbLines(c *Config) map[string]string {
	m := map[string]string{}
	for name, l := range c.LBs {
		m[name] = "mode " + orDefault(l.Mode) + apiText(l.API)
	}
	return m
}

// aclLines are the router's ACL rules by position ("rule 1"), or the
// back-ends' own when the config has no acl:.
func aclLines(c *Config) map[string]string {
	if !c.HasACL {
		return map[string]string{"rules": "each back-end's own"}
	}
	m := map[string]string{"rules": fmt.Sprint(len(c.ACLRules))}
	for i, r := range c.ACLRules {
		m[fmt.Sprintf("rule %d", i)] = acl.Text(r)
	}
	return m
}

func backendLines(c *Config) map[string]string {
	m := map[string]string{}
	for name, b := range c.Backends {
		m[name] = fmt.Sprintf("capacity %d Mbit/s", b.CapacityMbps) + apiText(b.API)
	}
	return m
}

func orDefault(mode string) string {
	if mode == "" {
		return "default"
	}
	return mode
}

func apiText(a netip.AddrPort) string {
	if !a.IsValid() {
		return ""
	}
	return ", api " + a.String()
}

func portLines(c *Config) map[string]string {
	m := map[string]string{}
	for _, p := range c.ExternalPorts {
		line := fmt.Sprintf("lb %s mac %s address %s mtu %d", p.LB, p.MAC, p.Address, p.MTU)
		if p.Description != "" {
			line += fmt.Sprintf(" description %q", p.Description)
		}
		line += " urpf " + c.urpfOf(p).String()
		if p.SFlowRate != nil {
			line += fmt.Sprintf(" sflow_rate %d", *p.SFlowRate)
		}
		for _, n := range p.Neighbors {
			line += fmt.Sprintf(" neighbor %s %s", n.Address, n.mac)
		}
		m[fmt.Sprintf("VLAN %d", p.VLAN)] = line
	}
	return m
}

// sflowLines are the sflow section's settings (none: no section).
func sflowLines(c *Config) map[string]string {
	s := c.SFlow
	if s == nil {
		return map[string]string{}
	}
	m := map[string]string{"collectors": fmt.Sprint(s.Collectors), "agent_address": s.AgentAddress.String(),
		"sampling_rate": fmt.Sprint(s.SamplingRate), "counter_interval": s.CounterInterval.String()}
	if x := s.IPFIX; x != nil {
		m["ipfix"] = fmt.Sprintf("collectors %v active_timeout %v idle_timeout %v", x.Collectors, x.ActiveTimeout, x.IdleTimeout)
	}
	return m
}

func routingLines(r *RoutingConfig) map[string]string {
	m := map[string]string{}
	if r == nil {
		return m
	}
	m["AS"] = fmt.Sprint(r.ASN)
	m["router id"] = r.RouterID.String()
	for _, b := range r.BGP {
		m["BGP neighbour "+b.Neighbor.String()] = peerLine(b)
	}
	for _, s := range r.Static {
		m["static "+s.To.String()] = "via " + s.Via.String()
	}
	for _, f := range r.StaticFiles {
		m["static file "+f.File] = "via " + f.Via.String()
	}
	for _, o := range r.OSPF {
		m[fmt.Sprintf("OSPF on VLAN %d", o.VLAN)] = fmt.Sprintf("cost %d", o.Cost)
	}
	for _, o := range r.OSPFv3 {
		m[fmt.Sprintf("OSPFv3 on VLAN %d", o.VLAN)] = fmt.Sprintf("cost %d", o.Cost)
	}
	if r.OSPFExport != nil {
		m["OSPF export"] = "[" + strings.Join(r.OSPFExport, ",") + "]"
	}
	for _, p := range r.RIP {
		m[fmt.Sprintf("RIP on VLAN %d", p.VLAN)] = "on"
	}
	for _, p := range r.RIPng {
		m[fmt.Sprintf("RIPng on VLAN %d", p.VLAN)] = "on"
	}
	if r.BFDPeers() {
		m["BFD"] = fmt.Sprintf("%v x %d", r.BFDInterval, r.BFDMultiplier)
	}
	if r.RIPExport != nil {
		m["RIP export"] = "[" + strings.Join(r.RIPExport, ",") + "]"
	}
	if b := r.Backends; b != nil {
		m["RIB feed"] = fmt.Sprintf("listen %s range %s", b.Listen, b.Range)
	}
	return m
}

// peerLine is what a BGP peer's settings are, for a reload to compare and
// report: a changed export, prefix list, limit or password is a change
// (the password by a fingerprint, never itself).
func peerLine(b BGPPeer) string {
	s := fmt.Sprintf("AS %d", b.ASN)
	if b.HoldTime != 0 {
		s += fmt.Sprintf(" hold_time %d", b.HoldTime)
	}
	if b.Export != nil {
		s += " export [" + strings.Join(b.Export, ",") + "]"
	}
	for _, l := range []struct {
		name string
		ps   []PrefixPattern
	}{{"import_prefixes", b.ImportPrefixes}, {"export_prefixes", b.ExportPrefixes}} {
		if l.ps != nil {
			var ps []string
			for _, p := range l.ps {
				ps = append(ps, p.String())
			}
			s += " " + l.name + " [" + strings.Join(ps, ",") + "]"
		}
	}
	if b.MaxPrefixes != DefaultMaxPrefixes {
		s += fmt.Sprintf(" max_prefixes %d", b.MaxPrefixes)
	}
	if b.MaxPrefixesRestart != 0 {
		s += fmt.Sprintf(" max_prefixes_restart %v", b.MaxPrefixesRestart)
	}
	if b.BFD {
		s += " bfd"
	}
	if !b.GTSM() {
		s += " ttl_security off"
	}
	if b.Password != "" {
		sum := sha256.Sum256([]byte(b.Password))
		s += fmt.Sprintf(" password (sha256 %x)", sum[:4])
	}
	return s
}

// snmpText is the snmp: section, for diffConfig (snmpd is configured at
// start only); passwords are not shown.
func snmpText(s *SNMPConfig) string {
	if s == nil {
		return "none"
	}
	var users []string
	for _, u := range s.Users {
		users = append(users, u.Name+"/"+u.Auth+"/"+u.Priv+"/"+u.AuthPassword+u.PrivPassword)
	}
	// A trap's receiver by its address, its community with the secrets:
	// neither the file's line (a reload of a file with a line more is no
	// change) nor a community is said.
	var traps []string
	for _, t := range s.Traps {
		traps = append(traps, t.Host.String())
		users = append(users, "trap "+t.Community)
	}
	secrets := sha256.Sum256([]byte(s.Community + strings.Join(users, ",")))
	return fmt.Sprintf("{community set %v, users %d, traps %v, listen %s, sys %q %q %q, secrets %x}", s.Community != "", len(s.Users), traps, s.Listen,
		s.SysName, s.SysLocation, s.SysContact, secrets[:4])
}
