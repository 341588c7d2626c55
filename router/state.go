package router

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
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
	// Routes are the FIB's routes packed (packRoutes), 9 bytes each:
	// address (4), length (1), next-hop group (4, big-endian). A full
	// table is 9 MB, copied under the agent's lock in tens of
	// milliseconds; as a JSON map of strings it took seconds.
	Routes []byte `json:"routes"`
	// Routes6 are the IPv6 FIB's, 21 bytes each: address (16), length
	// (1), next-hop group (4).
	Routes6  []byte              `json:"routes6"`
	NextHops []savedNextHop      `json:"nexthops"`
	Groups   map[uint32][]uint32 `json:"groups"`
	// Operator are the routes the operator added through the API (msr
	// router route add): not the RIB feed's, so a new feed does not hold
	// them as stale (heldRoutes).
	Operator []netip.Prefix `json:"operator,omitempty"`
}

// packRoutes packs routes whose addresses are n bytes long (4 or 16), as
// savedState keeps them: address, length, group.
func packRoutes(routes *routeSet, n int) []byte {
	b := make([]byte, 0, routes.Len()*(n+5))
	for p, g := range routes.All() {
		if n == 4 { // the address's bytes without a slice made for each
			a := p.Addr().As4()
			b = append(b, a[:]...)
		} else {
			a := p.Addr().As16()
			b = append(b, a[:]...)
		}
		b = append(b, uint8(p.Bits()))
		b = binary.BigEndian.AppendUint32(b, g)
	}
	return b
}

// unpackRoutes reads what packRoutes wrote, each route's group one of
// groups; false for anything else.
func unpackRoutes(b []byte, n int, groups map[uint32][]uint32) (map[netip.Prefix]uint32, bool) {
	if len(b)%(n+5) != 0 {
		return nil, false
	}
	routes := make(map[netip.Prefix]uint32, len(b)/(n+5))
	for ; len(b) > 0; b = b[n+5:] {
		a, _ := netip.AddrFromSlice(b[:n])
		p, g := netip.PrefixFrom(a, int(b[n])), binary.BigEndian.Uint32(b[n+1:n+5])
		if int(b[n]) > n*8 || p != p.Masked() || p.Addr().Is4In6() || groups[g] == nil {
			return nil, false
		}
		routes[p] = g
	}
	return routes, true
}

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
	s := &savedState{Routes: packRoutes(a.dp.FIB.Routes(), 4), Routes6: packRoutes(a.dp.FIB6.Routes(), 16),
		Groups: make(map[uint32][]uint32, len(a.nh.groups))}
	for g, ids := range a.nh.groups {
		s.Groups[g] = ids
	}
	for k, id := range a.nh.ids {
		s.NextHops = append(s.NextHops, savedNextHop{ID: id, GW: k.gw, Port: k.port})
	}
	for p := range a.operator {
		s.Operator = append(s.Operator, p)
	}
	return s
}

// save writes the state (with a.mu held, or before Run). A restart within
// saveQuiet of a change finds the state behind the FIB: adopt then
// repairs the FIB in place to hold it.
func (a *Agent) save() error { return a.write(a.snapshot()) }

// write puts a snapshot on disk; it needs no lock.
func (a *Agent) write(s *savedState) error {
	path := a.statePath()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path+".tmp", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("save router state: %w", err)
	}
	err = s.encode(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("save router state: %w", err)
	}
	return os.Rename(path+".tmp", path)
}

// encode writes s as json.Marshal does, byte for byte, the packed routes
// streamed through base64 rather than built in memory: json.Marshal
// built a full table's 7 MB of base64 in a buffer that doubled as it
// grew, and kept the buffer in its pool for the next call. Under churn an
// agent saves every saveEvery, and one or two of those buffers (14 MB
// each) were alive at any moment: the live heap just after a release of
// memory stood at 171, 185 or 199 MB by how many (a soak's measurement).
func (s *savedState) encode(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	bytesField := func(name string, b []byte) {
		fmt.Fprintf(bw, "%q:", name)
		if b == nil {
			bw.WriteString("null")
			return
		}
		bw.WriteByte('"')
		enc := base64.NewEncoder(base64.StdEncoding, bw)
		enc.Write(b)
		enc.Close()
		bw.WriteByte('"')
	}
	bw.WriteByte('{')
	bytesField("routes", s.Routes)
	bw.WriteByte(',')
	bytesField("routes6", s.Routes6)
	rest, err := json.Marshal(struct {
		NextHops []savedNextHop      `json:"nexthops"`
		Groups   map[uint32][]uint32 `json:"groups"`
		Operator []netip.Prefix      `json:"operator,omitempty"`
	}{s.NextHops, s.Groups, s.Operator})
	if err != nil {
		return err
	}
	bw.WriteByte(',')
	bw.Write(rest[1:]) // its fields, and the closing brace
	return bw.Flush()
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
	fib, ok4 := unpackRoutes(s.Routes, 4, s.Groups)
	fib6, ok6 := unpackRoutes(s.Routes6, 16, s.Groups)
	if !ok4 || !ok6 {
		a.log.Warn("saved state: routes truncated or bad: rebuilding the FIB")
		return false
	}
	// Saved within saveQuiet of a change (under churn, up to saveEvery
	// before the kill), the state is behind the arrays: they are
	// repaired to hold it, in place, forwarding on, rather than rebuilt
	// from empty (finding 14); the RIB feed's resync brings them up to
	// date.
	repaired := 0
	for _, t := range []struct {
		fib interface {
			Adopt(map[netip.Prefix]uint32) error
			Repair(map[netip.Prefix]uint32) (int, error)
			Reset()
		}
		routes map[netip.Prefix]uint32
	}{{a.dp.FIB, fib}, {a.dp.FIB6, fib6}} {
		err := t.fib.Adopt(t.routes)
		if errors.Is(err, ErrAdopt) {
			var n int
			n, err = t.fib.Repair(t.routes)
			repaired += n
		}
		if err != nil { // the caller resets both: they start again together
			a.log.Warn("rebuilding the FIB", "err", err)
			return false
		}
	}
	all := maps.Clone(fib)
	maps.Copy(all, fib6)
	a.nh.restore(keys, s.Groups, all)
	for _, p := range s.Operator {
		if _, ok := all[p]; ok {
			a.operator[p] = true
		}
	}
	if repaired > 0 {
		if err := a.nh.rewrite(); err != nil {
			a.log.Warn("rebuilding the FIB", "err", err)
			return false
		}
		a.log.Info("adopted the running data path; the saved state was behind it: entries repaired in place", "routes", len(fib), "routes6", len(fib6), "entries_repaired", repaired)
		return true
	}
	a.log.Info("adopted the running data path", "routes", len(fib), "routes6", len(fib6))
	return true
}
