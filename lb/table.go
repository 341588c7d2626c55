package lb

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"slices"

	"github.com/msr-router/msr/dist"
)

// Mode is how an LB spreads data packets over back-ends.
type Mode uint32

const (
	ModeWRR    = Mode(lbxdpLbModeLB_MODE_WRR)
	ModeHash   = Mode(lbxdpLbModeLB_MODE_HASH)
	ModeMaglev = Mode(lbxdpLbModeLB_MODE_MAGLEV)
	// ModeFlowlet's table is WRR's: a new flowlet takes the next slot.
	ModeFlowlet = Mode(lbxdpLbModeLB_MODE_FLOWLET)
)

// TableSlots is LB_TABLE_SLOTS (enum lb_limit), the most slots a table
// can have.
const TableSlots = int(lbxdpLbLimitLB_TABLE_SLOTS)

// MinWRRSlots is the smallest WRR (and hash) table: more slots give finer
// weights.
const MinWRRSlots = 1024

// ParseMode reads a mode's name (DIST names them: dist.BalanceMode).
func ParseMode(s string) (Mode, error) {
	m, err := dist.ParseBalanceMode(s)
	return Mode(m), err
}

func (m Mode) String() string { return dist.BalanceMode(m).String() }

// Backend is one entry of a balancing table before expansion: a back-end
// reached through one LB port, with its weight.
type Backend struct {
	MAC       net.HardwareAddr
	Ifindex   int
	PortIndex uint8
	Weight    uint16
}

// Slot is one slot of an expanded table.
type Slot struct {
	MAC       net.HardwareAddr
	Ifindex   int
	PortIndex uint8
}

// Table is an expanded balancing table, as the data path reads it.
type Table struct {
	Mode  Mode
	Slots []Slot
}

// ErrNoBackends is returned for a table with no back-end of weight > 0.
var ErrNoBackends = errors.New("no back-end with a weight above 0")

// BuildTable expands backends into a table for mode. An empty list gives
// an empty table (every data packet is dropped as no_backend).
func BuildTable(mode Mode, backends []Backend) (*Table, error) {
	var live []Backend
	for _, b := range backends {
		if b.Weight > 0 {
			live = append(live, b)
		}
	}
	t := &Table{Mode: mode}
	if len(live) == 0 {
		return t, nil
	}
	var err error
	switch mode {
	case ModeWRR, ModeHash, ModeFlowlet:
		t.Slots, err = spread(live)
	case ModeMaglev:
		t.Slots, err = maglev(live)
	default:
		err = fmt.Errorf("unknown balancing mode %d", mode)
	}
	return t, err
}

// RebuildTable builds the table for backends given the table prev built
// from prevBackends. When the change only removes back-ends from a Maglev
// table, every slot of a remaining back-end keeps its owner and only the
// removed back-ends' slots are refilled (from a fresh Maglev table of the
// same size): no flow of a remaining back-end moves. Plain Maglev moves a
// few (measured: 5 of 1000 flows when one of three back-ends left).
func RebuildTable(prev *Table, prevBackends []Backend, mode Mode, backends []Backend) (*Table, error) {
	if prev == nil || mode != ModeMaglev || prev.Mode != ModeMaglev || !removalOnly(prevBackends, backends) {
		return BuildTable(mode, backends)
	}
	var live []Backend
	keep := map[string]bool{}
	for _, b := range backends {
		if b.Weight > 0 {
			live = append(live, b)
			keep[slotKey(slotOf(b))] = true
		}
	}
	if len(live) == 0 {
		return &Table{Mode: mode}, nil
	}
	fresh, err := maglevOfSize(live, len(prev.Slots))
	if err != nil {
		return nil, err
	}
	t := &Table{Mode: mode, Slots: make([]Slot, len(prev.Slots))}
	for i, s := range prev.Slots {
		if keep[slotKey(s)] {
			t.Slots[i] = s
		} else {
			t.Slots[i] = fresh[i]
		}
	}
	return t, nil
}

// removalOnly says whether next is prev less some back-ends, the others
// unchanged.
func removalOnly(prev, next []Backend) bool {
	was := map[string]uint16{}
	for _, b := range prev {
		was[slotKey(slotOf(b))] = b.Weight
	}
	for _, b := range next {
		if w, ok := was[slotKey(slotOf(b))]; !ok || w != b.Weight {
			return false
		}
	}
	return true
}

func slotKey(s Slot) string { return fmt.Sprintf("%s/%d/%d", s.MAC, s.Ifindex, s.PortIndex) }

// spread lays weights out with smooth weighted round-robin (each pick goes
// to the back-end furthest behind its share), so a back-end's slots are
// evenly spaced and bursts do not land on one back-end. The pattern of sum(weights) picks repeats to fill at
// least MinWRRSlots, so every back-end's share of slots is exactly its
// weight's share.
func spread(bs []Backend) ([]Slot, error) {
	total := 0
	for _, b := range bs {
		total += int(b.Weight)
	}
	if total > TableSlots {
		return nil, fmt.Errorf("weights sum to %d, at most %d", total, TableSlots)
	}
	reps := (MinWRRSlots + total - 1) / total
	if total*reps > TableSlots {
		reps = TableSlots / total
	}
	pattern := make([]Slot, 0, total)
	current := make([]int, len(bs))
	for len(pattern) < total {
		best := 0
		for i, b := range bs {
			current[i] += int(b.Weight)
			if current[i] > current[best] {
				best = i
			}
		}
		current[best] -= total
		pattern = append(pattern, slotOf(bs[best]))
	}
	slots := make([]Slot, 0, total*reps)
	for r := 0; r < reps; r++ {
		slots = append(slots, pattern...)
	}
	return slots, nil
}

// BackendsOf is the back-ends a table spreads over, in the order of
// their first slot, each weighted by its share of the slots
// (CapacityWeights of the slot counts): what a restarted agent knows of
// the table a previous run left in the maps.
func BackendsOf(t *Table) []Backend {
	var bs []Backend
	var counts []uint64
	at := map[string]int{}
	for _, s := range t.Slots {
		k := slotKey(s)
		i, ok := at[k]
		if !ok {
			i = len(bs)
			at[k] = i
			bs = append(bs, Backend{MAC: s.MAC, Ifindex: s.Ifindex, PortIndex: s.PortIndex})
			counts = append(counts, 0)
		}
		counts[i]++
	}
	for i, w := range CapacityWeights(counts) {
		bs[i].Weight = w
	}
	return bs
}

// CapacityWeights are WRR weights proportional to capacities: divided by
// their greatest common divisor and scaled down to at most 1,000, 1 each
// where any capacity is unknown (0). `msr bench scale` weights its capped
// back-ends so, and `msr sim` models the lab with the same weights.
func CapacityWeights(caps []uint64) []uint16 {
	var g uint64
	for _, c := range caps {
		if c == 0 {
			g = 0
			break
		}
		g = gcd(g, c)
	}
	w := make([]uint16, len(caps))
	if g == 0 {
		for j := range w {
			w[j] = 1
		}
		return w
	}
	top := slices.Max(caps) / g
	for j, c := range caps {
		v := c / g
		if top > 1000 {
			v = max(1, (c/g*1000+top/2)/top)
		}
		w[j] = uint16(v)
	}
	return w
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func slotOf(b Backend) Slot { return Slot{MAC: b.MAC, Ifindex: b.Ifindex, PortIndex: b.PortIndex} }

// maglev builds a Maglev lookup table (Eisenbud et al., NSDI 2016, §3.4)
// of a prime size at least 100 × back-ends: each back-end fills slots in
// the order of its own permutation, in turns proportional to its weight.
// Removing a back-end changes (almost) only the slots it held, so only its
// flows move.
func maglev(bs []Backend) ([]Slot, error) {
	m := nextPrime(max(100*len(bs), 1021))
	if m > TableSlots {
		return nil, fmt.Errorf("%d back-ends need a Maglev table of %d slots, at most %d", len(bs), m, TableSlots)
	}
	return maglevOfSize(bs, m)
}

// maglevOfSize fills a Maglev table of m slots (m prime).
func maglevOfSize(bs []Backend, m int) ([]Slot, error) {
	offset := make([]int, len(bs))
	skip := make([]int, len(bs))
	maxW := 0
	for i, b := range bs {
		key := append(append([]byte{}, b.MAC...), b.PortIndex)
		offset[i] = int(hash64(key, 0x5bd1e995) % uint64(m))
		skip[i] = int(hash64(key, 0x27d4eb2f)%uint64(m-1)) + 1
		maxW = max(maxW, int(b.Weight))
	}
	entry := make([]int, m)
	for i := range entry {
		entry[i] = -1
	}
	next := make([]int, len(bs))
	credit := make([]int, len(bs))
	filled := 0
	for filled < m {
		for i, b := range bs {
			// Weighted turns: a back-end of weight w places w/maxW slots
			// per round on average.
			credit[i] += int(b.Weight)
			for credit[i] >= maxW && filled < m {
				credit[i] -= maxW
				c := (offset[i] + next[i]*skip[i]) % m
				for entry[c] >= 0 {
					next[i]++
					c = (offset[i] + next[i]*skip[i]) % m
				}
				entry[c] = i
				next[i]++
				filled++
			}
		}
	}
	slots := make([]Slot, m)
	for i, e := range entry {
		slots[i] = slotOf(bs[e])
	}
	return slots, nil
}

func hash64(b []byte, seed uint32) uint64 {
	h := fnv.New64a()
	h.Write([]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24)})
	h.Write(b)
	return h.Sum64()
}

func nextPrime(n int) int {
	for ; ; n++ {
		prime := n > 1
		for d := 2; d*d <= n; d++ {
			if n%d == 0 {
				prime = false
				break
			}
		}
		if prime {
			return n
		}
	}
}
