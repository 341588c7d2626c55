package router

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
)

// nextHops is the agent's next-hop and next-hop-group tables: the ids the
// data path's rt_nexthops and rt_nhgroups are indexed by, each counted by
// what uses it (a group by the routes that point at it, a next hop by the
// groups that hold it) and freed when nothing does. A freed id is reused
// only once the never-used ones run out, oldest freed first: a packet that
// read a route's old group just before the route moved has long left the
// program before that group's slot holds anything else.
type nextHops struct {
	w nextHopWriter

	// idsMu guards ids against the neighbour side (has), which does not
	// hold the agent's lock; the agent's lock guards the rest, and its
	// holder writes ids under idsMu too.
	idsMu  sync.RWMutex
	ids    map[nhKey]uint32
	keys   map[uint32]nhKey
	nhRefs map[uint32]int
	nhFree idPool

	groupIDs  map[string]uint32
	groups    map[uint32][]uint32
	groupRefs map[uint32]int
	groupFree idPool

	// lastKeys and lastGroup: the group last asked for. A table arrives
	// with long runs of routes via the same next hops.
	lastKeys  []nhKey
	lastGroup uint32
}

// nhKey is a next hop: a gateway on a port, or (no gateway) the port's
// connected subnet.
type nhKey struct {
	gw   netip.Addr // invalid: connected
	port uint16
}

// nextHopWriter writes the data path's tables (the Dataplane; a fake in
// unit tests).
type nextHopWriter interface {
	SetNextHop(id uint32, gw netip.Addr, port uint16) error
	SetGroup(id uint32, nhs []uint32) error
}

func newNextHops(w nextHopWriter) *nextHops {
	return &nextHops{w: w,
		ids: map[nhKey]uint32{}, keys: map[uint32]nhKey{}, nhRefs: map[uint32]int{},
		nhFree:   idPool{size: MaxNextHops, table: "next-hop table (rt_nexthops, RT_MAX_NEXTHOPS)", what: "next hops"},
		groupIDs: map[string]uint32{}, groups: map[uint32][]uint32{}, groupRefs: map[uint32]int{},
		groupFree: idPool{size: MaxNHGroups, table: "next-hop group table (rt_nhgroups, RT_MAX_NHGROUPS)", what: "next-hop sets"}}
}

// acquire finds or makes the group of keys (and their next hops) for one
// more route, and counts that route.
func (t *nextHops) acquire(keys []nhKey) (uint32, error) {
	if t.lastGroup != 0 && slices.Equal(keys, t.lastKeys) {
		t.groupRefs[t.lastGroup]++
		return t.lastGroup, nil
	}
	ids := make([]uint32, 0, len(keys))
	for _, k := range keys {
		id, err := t.nextHop(k)
		if err != nil {
			t.releaseNextHops(ids)
			return 0, err
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	name := fmt.Sprint(ids)
	g, ok := t.groupIDs[name]
	if ok {
		t.releaseNextHops(ids) // the group holds them already
	} else {
		var err error
		if g, err = t.groupFree.take(); err != nil {
			t.releaseNextHops(ids)
			return 0, err
		}
		if err := t.w.SetGroup(g, ids); err != nil {
			t.groupFree.put(g)
			t.releaseNextHops(ids)
			return 0, err
		}
		t.groupIDs[name], t.groups[g] = g, ids
	}
	t.groupRefs[g]++
	t.lastKeys, t.lastGroup = append(t.lastKeys[:0], keys...), g
	return g, nil
}

// nextHop finds or makes the next hop k and counts one more use of it.
func (t *nextHops) nextHop(k nhKey) (uint32, error) {
	id, ok := t.ids[k]
	if !ok {
		var err error
		if id, err = t.nhFree.take(); err != nil {
			return 0, err
		}
		if err := t.w.SetNextHop(id, k.gw, k.port); err != nil {
			t.nhFree.put(id)
			return 0, err
		}
		t.idsMu.Lock()
		t.ids[k], t.keys[id] = id, k
		t.idsMu.Unlock()
	}
	t.nhRefs[id]++
	return id, nil
}

// release drops one route's use of group g (0: none), freeing it and,
// with it, next hops nothing else holds.
func (t *nextHops) release(g uint32) {
	if g == 0 || t.groupRefs[g] == 0 {
		return
	}
	if t.groupRefs[g]--; t.groupRefs[g] > 0 {
		return
	}
	ids := t.groups[g]
	delete(t.groupRefs, g)
	delete(t.groups, g)
	delete(t.groupIDs, fmt.Sprint(ids))
	t.groupFree.put(g)
	if t.lastGroup == g {
		t.lastKeys, t.lastGroup = t.lastKeys[:0], 0
	}
	t.releaseNextHops(ids)
}

func (t *nextHops) releaseNextHops(ids []uint32) {
	for _, id := range ids {
		if t.nhRefs[id]--; t.nhRefs[id] > 0 {
			continue
		}
		delete(t.nhRefs, id)
		t.idsMu.Lock()
		delete(t.ids, t.keys[id])
		t.idsMu.Unlock()
		delete(t.keys, id)
		t.nhFree.put(id)
	}
}

// group is the next hops of group g.
func (t *nextHops) group(g uint32) []uint32 { return t.groups[g] }

// has says whether k is a next hop of some route. It may be called
// without the agent's lock.
func (t *nextHops) has(k nhKey) bool {
	t.idsMu.RLock()
	defer t.idsMu.RUnlock()
	_, ok := t.ids[k]
	return ok
}

// next is the next hop id is, if it is one.
func (t *nextHops) next(id uint32) (nhKey, bool) {
	k, ok := t.keys[id]
	return k, ok
}

// restore takes the tables a saved state had, with routes the FIB's:
// each group counted by its routes, each next hop by its groups; what
// nothing uses is freed.
func (t *nextHops) restore(keys map[uint32]nhKey, groups map[uint32][]uint32, routes map[netip.Prefix]uint32) {
	t.idsMu.Lock()
	defer t.idsMu.Unlock()
	n := newNextHops(t.w)
	t.ids, t.keys, t.nhRefs, t.nhFree = n.ids, n.keys, n.nhRefs, n.nhFree
	t.groupIDs, t.groups, t.groupRefs, t.groupFree = n.groupIDs, n.groups, n.groupRefs, n.groupFree
	t.lastKeys, t.lastGroup = nil, 0
	for id, k := range keys {
		t.ids[k], t.keys[id] = id, k
	}
	for _, g := range routes {
		t.groupRefs[g]++
	}
	for g, ids := range groups {
		if t.groupRefs[g] == 0 {
			continue
		}
		t.groups[g], t.groupIDs[fmt.Sprint(ids)] = ids, g
		for _, id := range ids {
			t.nhRefs[id]++
		}
	}
	for id, k := range keys {
		if t.nhRefs[id] == 0 {
			delete(t.ids, k)
			delete(t.keys, id)
		}
	}
	t.nhFree.restore(t.nhRefs)
	t.groupFree.restore(t.groupRefs)
}

// rewrite writes every next hop and group restore took into the data
// path again: after a repair (FIB.Repair) an id may have been given to
// another next hop or set since the state was saved, and the repaired
// routes must reach what the saved state says.
func (t *nextHops) rewrite() error {
	for id, k := range t.keys {
		if err := t.w.SetNextHop(id, k.gw, k.port); err != nil {
			return err
		}
	}
	for g, ids := range t.groups {
		if err := t.w.SetGroup(g, ids); err != nil {
			return err
		}
	}
	return nil
}

// idPool hands out the ids 1..size-1 (0 is "none" in the data path):
// never-used ones first, then freed ones, oldest first.
type idPool struct {
	size        int
	table, what string // for the error when every id is in use
	next        uint32 // the lowest never-used id, less one
	free        []uint32
}

func (p *idPool) take() (uint32, error) {
	if int(p.next)+1 < p.size {
		p.next++
		return p.next, nil
	}
	if len(p.free) == 0 {
		return 0, fmt.Errorf("%s full: all %d ids are in use by distinct %s; raise the limit in bpf/router.h and run make generate", p.table, p.size-1, p.what)
	}
	id := p.free[0]
	p.free = p.free[1:]
	return id, nil
}

func (p *idPool) put(id uint32) { p.free = append(p.free, id) }

// restore sets the pool to hand out what used does not hold.
func (p *idPool) restore(used map[uint32]int) {
	p.next, p.free = 0, nil
	for id := range used {
		p.next = max(p.next, id)
	}
	for id := uint32(1); id < p.next; id++ {
		if used[id] == 0 {
			p.free = append(p.free, id)
		}
	}
}
