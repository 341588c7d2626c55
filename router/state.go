package router

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/msr-router/msr/router/routerapi"
)

// savedState is what the agent writes after changes (batched every hello
// interval), so that a
// restarted agent can adopt the data path it left (pinned maps) instead of
// rebuilding it: the FIB's routes, and the ids it gave next hops and groups.
type savedState struct {
	// Routes are the FIB's routes packed, 9 bytes each: address (4),
	// length (1), next-hop group (4, big-endian). A full table is 9 MB,
	// copied under the agent's lock in tens of milliseconds; as a JSON map
	// of strings it took seconds.
	Routes   []byte              `json:"routes"`
	NextHops []savedNextHop      `json:"nexthops"`
	Groups   map[uint32][]uint32 `json:"groups"`
}

const savedRouteLen = 9

type savedNextHop struct {
	ID   uint32     `json:"id"`
	GW   netip.Addr `json:"gw"`
	Port uint16     `json:"port"`
}

// statePath is where the agent keeps its state.
func (a *Agent) statePath() string {
	return routerapi.StatePath(a.cfg.Name)
}

// snapshot copies what save writes; call it with a.mu held.
func (a *Agent) snapshot() *savedState {
	routes := a.dp.FIB.Routes()
	s := &savedState{Routes: make([]byte, 0, len(routes)*savedRouteLen), Groups: make(map[uint32][]uint32, len(a.nh.groups))}
	for p, g := range routes {
		a4 := p.Addr().As4()
		s.Routes = append(s.Routes, a4[:]...)
		s.Routes = append(s.Routes, uint8(p.Bits()))
		s.Routes = binary.BigEndian.AppendUint32(s.Routes, g)
	}
	for g, ids := range a.nh.groups {
		s.Groups[g] = ids
	}
	for k, id := range a.nh.ids {
		s.NextHops = append(s.NextHops, savedNextHop{ID: id, GW: k.gw, Port: k.port})
	}
	return s
}

// save writes the state (with a.mu held, or before Run). A restart within
// saveQuiet of a change finds the state behind the FIB: Adopt then refuses
// it and the FIB is rebuilt.
func (a *Agent) save() error { return a.write(a.snapshot()) }

// write puts a snapshot on disk; it needs no lock.
func (a *Agent) write(s *savedState) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	path := a.statePath()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
		return fmt.Errorf("save router state: %w", err)
	}
	return os.Rename(path+".tmp", path)
}

// adopt restores the saved state over a reused data path: ids, routes, and
// the FIB's bookkeeping (Adopt checks the arrays hold those routes). It
// returns false, having changed nothing, when it cannot.
func (a *Agent) adopt() bool {
	b, err := os.ReadFile(a.statePath())
	if err != nil {
		return false
	}
	var s savedState
	if err := json.Unmarshal(b, &s); err != nil {
		a.log.Warn("saved state unreadable: rebuilding the FIB", "err", err)
		return false
	}
	keys := map[uint32]nhKey{}
	for _, n := range s.NextHops {
		keys[n.ID] = nhKey{gw: n.GW, port: n.Port}
	}
	if len(s.Routes)%savedRouteLen != 0 {
		a.log.Warn("saved state: routes truncated: rebuilding the FIB")
		return false
	}
	fib := make(map[netip.Prefix]uint32, len(s.Routes)/savedRouteLen)
	for b := s.Routes; len(b) > 0; b = b[savedRouteLen:] {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte(b[0:4])), int(b[4]))
		g := binary.BigEndian.Uint32(b[5:9])
		if b[4] > 32 || p != p.Masked() || s.Groups[g] == nil {
			return false
		}
		fib[p] = g
	}
	if err := a.dp.FIB.Adopt(fib); err != nil {
		a.log.Warn("rebuilding the FIB", "err", err)
		return false
	}
	a.nh.restore(keys, s.Groups, fib)
	a.log.Info("adopted the running data path", "routes", len(fib))
	return true
}
