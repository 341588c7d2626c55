package vcp

import (
	"net"

	"github.com/msr-router/msr/dist"
)

// The balancing tables the VCP gives the LBs: which back-ends may carry
// traffic, with what weight, and the frames that carry a table.

// everyBackendSilent says whether no back-end that may carry traffic (not
// drained, nor draining by its last hello) is heard while some such were
// heard before. The VCP's own deafness is then more likely than every
// back-end dead at once: its hello reader held up, or every back-end's hellos
// held up together by the kernel's RTNL lock (docs/reliability.md,
// finding 20). The LBs do the same with their
// own view (finding 16). Call with a.mu held.
func (a *Agent) everyBackendSilent() bool {
	known := false
	for _, r := range a.elements {
		if r.hello.Role != dist.RoleRouter || !a.mayCarry(r) {
			continue
		}
		if r.alive {
			return false
		}
		known = true
	}
	return known
}

// mayCarry says whether a back-end may be in the tables when heard: not
// drained by the operator, nor draining by its last hello.
func (a *Agent) mayCarry(r *element) bool {
	return !a.op.drained[r.hello.Name] && r.hello.Flags&dist.HelloFlagDraining == 0
}

// table computes an LB's balancing table from the router as the VCP
// sees it (balanceTable): the back-ends in their order, with what the
// operator said of them and their load factors.
func (a *Agent) table(lb *element) (dist.BalanceMode, []dist.TableEntry) {
	var ports []uint8
	for _, hp := range lb.hello.Ports {
		if hp.Role == dist.PortInternal {
			ports = append(ports, hp.Index)
		}
	}
	var backends []tableBackend
	for _, r := range a.elements.sorted(dist.RoleRouter) {
		backends = append(backends, tableBackend{mac: r.mac, alive: r.alive, mayCarry: a.mayCarry(r), capacity: a.effectiveCapacity(r)})
	}
	return a.cfg.modeOf(lb.hello.Name), balanceTable(ports, backends, a.allSilent)
}

// A tableBackend is what an LB's table needs of a back-end: its MAC,
// whether it is heard and may carry traffic (not drained, nor draining),
// and its capacity (effectiveCapacity).
type tableBackend struct {
	mac             net.HardwareAddr
	alive, mayCarry bool
	capacity        uint64
}

// balanceTable is an LB's table through its internal ports: every live
// back-end that may carry traffic, weighted by capacity, the largest 100.
// When every back-end is silent at once (allSilent: everyBackendSilent),
// every one that may carry: an empty table drops everything, and the data
// path of a back-end whose hellos are late still forwards.
func balanceTable(ports []uint8, backends []tableBackend, allSilent bool) []dist.TableEntry {
	var carry []tableBackend
	var maxCap uint64
	for _, b := range backends {
		if (b.alive || allSilent) && b.mayCarry {
			carry = append(carry, b)
			maxCap = max(maxCap, b.capacity)
		}
	}
	var entries []dist.TableEntry
	for _, port := range ports {
		for _, b := range carry {
			w := uint16(max(1, (b.capacity*100+maxCap/2)/max(maxCap, 1)))
			entries = append(entries, dist.TableEntry{MAC: b.mac, Port: port, Weight: w})
		}
	}
	return entries
}

// effectiveCapacity is a back-end's capacity times its load factor, in
// thousandths of a Mbit/s (so that a small factor keeps its resolution;
// a u64, as a capacity of up to 2^32 Mbit/s times 1000 needs).
func (a *Agent) effectiveCapacity(r *element) uint64 {
	return uint64(max(1, float64(a.capacity(r))*1000*a.loadFactor(r.hello.Name)))
}

func (a *Agent) capacity(r *element) uint32 {
	if c := a.op.capacities[r.hello.Name]; c > 0 {
		return c
	}
	if b := a.cfg.Backends[r.hello.Name]; b != nil && b.CapacityMbps > 0 {
		return b.CapacityMbps
	}
	return max(r.hello.Capacity, 1)
}

// sendTable sends a table in as many frames as it takes: FLUSH on the
// first, LAST on the last (docs/dist.md).
func (a *Agent) sendTable(lb *element, gen uint32, mode dist.BalanceMode, entries []dist.TableEntry) (frames int, err error) {
	for start := 0; ; start += dist.MaxTableEntries {
		end := min(start+dist.MaxTableEntries, len(entries))
		m := &dist.TableUpdate{Target: lb.id, Generation: gen, Mode: mode, Entries: entries[start:end]}
		if start == 0 {
			m.Flags |= dist.TableFlush
		}
		if end == len(entries) {
			m.Flags |= dist.TableLast
		}
		if err := a.send(lb.mac, m); err != nil {
			return frames, err
		}
		frames++
		if end == len(entries) {
			return frames, nil
		}
	}
}
