// Package routerapi is the back-end router's API: the paths its agent
// answers (internal/api carries them, on the agent's Unix socket and on the
// management network), their requests' and answers' types, and a typed
// client. `msr router`, the VCP's console, the demo, the benchmarks and the
// tests use the client; only package router serves it.
package routerapi

import (
	"fmt"
	"net/netip"
	"net/url"
	"path/filepath"
	"strconv"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/api"
)

// The paths.
const (
	PathStatus = "/status" // GET: Status
	// PathRoutes: GET []RouteInfo, a page of at most RoutesPageSize in
	// order (?limit=N fewer, ?after=P those after P; ?prefix=P: that
	// route only, or none); POST RouteRequest: add or replace; DELETE
	// ?prefix=P: remove.
	PathRoutes = "/routes"
	PathLookup = "/lookup" // GET ?addr=A: []RouteInfo, the FIB's longest match for A, or none
	// PathNeighbors: DELETE: forget every neighbour learned (an operator's
	// `clear ip arp`); the next packet to each is held while it is asked
	// for again. Answers {"flushed": N}.
	PathNeighbors = "/neighbors"
	// PathCapacity: PUT {"capacity_pps": N}: the data path's capacity now
	// (0: no cap). Answers the status's capacity fields.
	PathCapacity = "/capacity"
	// PathRoutesDigest: GET RoutesDigest: the FIB's routes in a figure.
	PathRoutesDigest = "/routes/digest"
)

// RoutesDigest is a FIB's routes in a figure, for a reader that holds a
// RIB and must know whether the FIB holds exactly its prefixes without
// reading each of a full table's: how many routes through a gateway and
// the sum of their PrefixHash (order does not count), and the connected
// prefixes (a port's own subnet: no gateway), which a RIB may or may not
// list.
type RoutesDigest struct {
	Routes    int      `json:"routes"`
	Sum       string   `json:"sum"` // 16 hex digits: the sum mod 2^64
	Connected []string `json:"connected"`
	// TableArrived is RIBStatus.TableArrived: when the RIB feed's session
	// brought the suite's table whole (absent: not yet, or no feed).
	TableArrived string `json:"table_arrived,omitempty"`
	// FIBChanged is when the FIB (either family's) last changed: a route
	// added, deleted or given other next hops (absent: never). The digest
	// has stood as it is since then at least.
	FIBChanged string `json:"fib_changed,omitempty"`
}

// PrefixHash is a prefix's 64-bit hash for RoutesDigest: its address's
// bytes (4 for IPv4, 16 for IPv6) and length through FNV-1a, then
// splitmix64's finalizer, so that sums of distinct sets collide only by
// chance (2^-64).
func PrefixHash(p netip.Prefix) uint64 {
	p = p.Masked()
	h := uint64(14695981039346656037)
	for _, b := range p.Addr().AsSlice() {
		h = (h ^ uint64(b)) * 1099511628211
	}
	h = (h ^ uint64(p.Bits())) * 1099511628211
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	return h ^ h>>31
}

// Stamp is a time as RoutesDigest and RIBStatus carry one (table_arrived,
// fib_changed): RFC 3339 with nanoseconds, in UTC; "" for the zero time,
// none.
func Stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// DigestSum formats a sum of PrefixHash as RoutesDigest.Sum does.
func DigestSum(sum uint64) string { return fmt.Sprintf("%016x", sum) }

// DefaultPort is the TCP port of a back-end's API on the management
// network when its file names no api_listen: it listens on its
// interconnect address there, where the VCP finds it from its hellos.
const DefaultPort = 8180

// Capacity is PathCapacity's request and answer.
type Capacity struct {
	CapacityPPS uint64 `json:"capacity_pps"`
}

// Status is what the local API reports.
type Status struct {
	Name     string `json:"name"`
	ID       uint64 `json:"id"`
	Routes   int    `json:"routes"` // IPv4
	Tbl8Used int    `json:"tbl8_groups_used"`
	// Routes6 are the IPv6 FIB's routes; FIB6Groups its trie's groups;
	// FIB6Lines its pool of 64-byte lines, and those the groups take.
	Routes6       int `json:"routes6"`
	FIB6Groups    int `json:"fib6_groups"`
	FIB6LinesUsed int `json:"fib6_lines_used"`
	FIB6Lines     int `json:"fib6_lines"`
	// FIBChanges counts routes added, changed and deleted since start.
	FIBChanges uint64 `json:"fib_changes"`
	// RIB is the RIB feed's session and paths, with a feed.
	RIB       *RIBStatus        `json:"rib,omitempty"`
	Neighbors map[string]string `json:"neighbors"`
	// StaticNeighbors are those of Neighbors the operator set (the VCP's
	// neighbors: per port): no claim changes them.
	StaticNeighbors []string          `json:"static_neighbors,omitempty"`
	Pending         []string          `json:"pending_arp"`
	Stats           *Stats            `json:"stats"`
	SlowPath        map[string]uint64 `json:"slow_path"`
	// CapacityPPS is the data path's cap on the frames it routes a second
	// (capacity_pps, or set at run time; 0: none), CapDrop the frames it
	// dropped (the drop "cap").
	CapacityPPS uint64 `json:"capacity_pps,omitempty"`
	CapDrop     uint64 `json:"cap_drop"`
	// Infrastructure is the router's inside as this back-end holds it
	// (its host's prefixes and the file's): the only sources its host's
	// own addresses take; InfraDropped counts the others (the drop
	// "infra": from outside, by an LB's balance path).
	Infrastructure []string `json:"infrastructure"`
	InfraDropped   uint64   `json:"infra_dropped"`
	// URPFDropped counts what failed its ingress port's unicast RPF
	// (the drop "urpf").
	URPFDropped uint64 `json:"urpf_dropped"`
	// DIST counts control frames sent, accepted, and refused by reason;
	// DISTRoleRefused the frames that asked to configure this back-end
	// without the VCP's key (reason "role_refused").
	DIST            map[string]uint64 `json:"dist"`
	DISTRoleRefused uint64            `json:"dist_role_refused"`
	// MaxPorts is how many external ports the data path's maps hold
	// (max_ports); a VCP's config with more is refused, and counted in DIST
	// ("config_too_many_ports").
	MaxPorts int `json:"max_ports"`
	// Memory is what the back-end holds, by part.
	Memory Memory `json:"memory"`
	// SlowRates are the slow path's rates, by reason: what passes to the
	// agent, on this back-end (Stats.SlowDropped counts the rest).
	SlowRates map[string]SlowRate `json:"slow_rates"`
	// Busy is the data path's CPU time per second, in cores (the router
	// program's run time, sampled 100 ms a second: router/busy.go);
	// absent until measured.
	Busy float64 `json:"busy,omitempty"`
	// ACL is the rules in force, in order, as the console writes them
	// (Stats.ACLPermit and ACLDeny count each); Ports the router's
	// external ports the back-end serves; Ready, whether it takes flows
	// (it serves ports and its FIB holds the RIB feed's table).
	ACL   []string `json:"acl"`
	Ports []string `json:"ports"`
	Ready bool     `json:"ready"`
	// Drained and CapacityMbps are what the operator asked of this
	// back-end through the VCP (`msr ctl drain`, `weight`; 0: none),
	// which it keeps and reports in its hellos.
	Drained      bool   `json:"drained,omitempty"`
	CapacityMbps uint32 `json:"operator_capacity_mbps,omitempty"`
	// Hellos is how the back-end's hellos kept their interval.
	Hellos HelloTiming `json:"hellos"`
}

// HelloTiming is how the back-end's hellos kept their interval: the LBs
// and VCPs take it for dead after a hold (3 intervals) without one.
type HelloTiming struct {
	Sent uint64 `json:"sent"`
	// Late counts hellos sent two intervals or more after the one before;
	// LongestGapMs is the longest such gap since start.
	Late         uint64  `json:"late"`
	LongestGapMs float64 `json:"longest_gap_ms"`
	// WokeLateMs and SendMs split the longest gap: how late the hello
	// loop woke after its tick was due (the process or its goroutine
	// waited for a CPU), and how long the hello took to build and send
	// (locks, the data path's counters, the socket).
	WokeLateMs float64 `json:"woke_late_ms"`
	SendMs     float64 `json:"send_ms"`
}

// APIOf is a back-end's management API when a config names none: its
// interconnect address (from its hellos) at the default port.
func APIOf(h *dist.Hello) (netip.AddrPort, bool) {
	for _, p := range h.Ports {
		if p.Role == dist.PortInternal && p.Prefix.IsValid() {
			return netip.AddrPortFrom(p.Prefix.Addr(), DefaultPort), true
		}
	}
	return netip.AddrPort{}, false
}

// RouteInfo is one route as the API lists it.
type RouteInfo struct {
	Prefix string   `json:"prefix"`
	Via    []string `json:"via,omitempty"`
	Port   string   `json:"port,omitempty"` // connected
	// VLAN is the external port the route's first next hop leaves by
	// (its VLAN, the router's ifIndex of it; 0: none).
	VLAN uint16 `json:"vlan,omitempty"`
	// Protocol is where the route came from: connected, static, ospf,
	// ospf-ia, ospf-e1, ospf-e2, bgp, rip (what the VCP's suite learned
	// it by, carried by the RIB feed), rib (the suite did not say), or api
	// (added through this back-end's API).
	Protocol string `json:"protocol"`
	// Preference is BIRD's preference for it (higher wins), Distance
	// FRR's administrative distance (lower wins): whichever the suite sent.
	Preference int `json:"preference,omitempty"`
	Distance   int `json:"distance,omitempty"`
}

// From says where a route came from, for people: "bgp, preference 100",
// "ospf, distance 110", "connected".
func (r RouteInfo) From() string {
	switch {
	case r.Preference != 0:
		return fmt.Sprintf("%s, preference %d", r.Protocol, r.Preference)
	case r.Distance != 0:
		return fmt.Sprintf("%s, distance %d", r.Protocol, r.Distance)
	}
	return r.Protocol
}

// Stats is the data path's counters, summed over CPUs.
type Stats struct {
	RxPackets      uint64            `json:"rx_packets"`
	RxBytes        uint64            `json:"rx_bytes"`
	Forwarded      uint64            `json:"forwarded"`
	ForwardedBytes uint64            `json:"forwarded_bytes"`
	Passed         uint64            `json:"passed"`
	Probes         uint64            `json:"probes"` // LBs' DIST PROBEs reflected
	Slow           map[string]uint64 `json:"slow"`
	SlowDropped    map[string]uint64 `json:"slow_dropped"` // over the reason's rate
	Drops          map[string]uint64 `json:"drops"`
	ACLPermit      []uint64          `json:"acl_permit"`
	ACLDeny        []uint64          `json:"acl_deny"`
	// RxPerCPU is the frames each CPU received: how the NIC's queues
	// (RSS) spread the load over the cores.
	RxPerCPU []uint64 `json:"rx_per_cpu"`
}

// SlowRate is a slow-path reason's rate, frames a second, and burst.
type SlowRate struct {
	PPS   uint64 `json:"pps"`
	Burst uint64 `json:"burst"`
}

// Memory is a back-end's memory by part: the RIB feed's paths
// (RIBBytes, reckoned from their counts and sizes, not walked), the data
// path's BPF maps as the kernel charges them (MapsBytes: the FIBs'
// arrays, mmapped into the agent, and every other map), the agent's Go
// heap in use (HeapBytes, the RIB among it), and the process's resident
// set (RSSBytes: the heap, the maps' pages it touched, its code).
type Memory struct {
	RIBBytes  uint64 `json:"rib_bytes"`
	MapsBytes uint64 `json:"maps_bytes"`
	HeapBytes uint64 `json:"heap_bytes"`
	RSSBytes  uint64 `json:"rss_bytes"`
}

// RIBStatus is the feed's state, for the agent's status.
type RIBStatus struct {
	Neighbor    string `json:"neighbor"`
	State       string `json:"state"` // connecting, open, established
	Established string `json:"established_since,omitempty"`
	Prefixes    int    `json:"prefixes"`
	Paths       int    `json:"paths"`
	Stale       int    `json:"stale"`
	Updates     uint64 `json:"updates"`
	Sessions    uint64 `json:"sessions"` // established so far
	LastError   string `json:"last_error,omitempty"`
	AddPath     bool   `json:"add_path"`
	GR          bool   `json:"graceful_restart"` // the suite keeps our routes, and we its
	// Refused counts the routes the FIB would not take (a full IPv6 pool:
	// raise fib6_lines; a gateway on no port), since the agent
	// started.
	Refused uint64 `json:"refused"`
	// TableArrived is when this session's table arrived whole: the
	// suite's End-of-RIB for every family the session carries (RFC 3339,
	// nanoseconds; absent until then). A session lost and established
	// again (the suite's restart, a takeover) brings the table again.
	TableArrived string `json:"table_arrived,omitempty"`
	// Release is the agent's memory just after the feed's last release
	// of memory (absent before the first).
	Release *MemoryRelease `json:"release,omitempty"`
}

// MemoryRelease is a back-end agent's memory just after the RIB feed
// returned the free heap to the system (a collection, then the free
// pages given back: at the End-of-RIB that ends a big table's arrival,
// and every minute while the agent holds it). At that moment the
// resident memory is the agent's level without the garbage of the
// moment, which moves its resident memory by a fifth between
// collections: the level a leak raises (the soak's agent_memory judges
// it).
type MemoryRelease struct {
	// PID is the agent's process: a restarted agent counts from 1 again.
	PID      int    `json:"pid"`
	At       string `json:"at"` // RFC 3339, milliseconds
	Releases uint64 `json:"releases"`
	// ResidentKB is the process's resident memory (VmRSS: its heap, the
	// BPF maps' pages it has mapped, its binary); HeapLiveKB, the heap
	// its objects held at that collection's end.
	ResidentKB int64 `json:"resident_kb"`
	HeapLiveKB int64 `json:"heap_live_kb"`
	// HeapUnusedKB is the room in the heap's spans that holds no object
	// (a span with one live object stays whole: fragmentation); GoKB all
	// the Go runtime holds from the system and has not given back (heap,
	// stacks, its own metadata): the resident memory less GoKB is the rest
	// (the BPF maps' pages, the binary).
	HeapUnusedKB int64 `json:"heap_unused_kb"`
	GoKB         int64 `json:"go_kb"`
}

// RouteRequest adds a route.
type RouteRequest struct {
	Prefix string   `json:"prefix"`
	Via    []string `json:"via"`
}

// Client is a client of one back-end agent's API.
type Client struct{ c *api.Client }

// New is a client over c (a Unix socket's, or the management network's).
func New(c *api.Client) *Client { return &Client{c} }

// Local is the client of the back-end named name on this host (its
// socket path is socket, or the default one when socket is "").
func Local(name, socket string) *Client { return New(api.Local("router", name, socket)) }

// StatePath is where the agent named name saves its FIB's state between
// runs (a fresh lab removes it, so that nothing is adopted).
func StatePath(name string) string {
	return filepath.Join(api.RunDir, "router-"+name+".state.json")
}

// Status asks for routes, neighbours and counters.
func (c *Client) Status() (*Status, error) {
	s := &Status{}
	return s, c.c.Do("GET", PathStatus, nil, s)
}

// RoutesPageSize is the most routes one answer of PathRoutes holds.
const RoutesPageSize = 10_000

// Routes lists the FIB's routes, a page at a time.
func (c *Client) Routes() ([]RouteInfo, error) {
	rs := []RouteInfo{}
	after := ""
	for {
		var page []RouteInfo
		path := PathRoutes + "?limit=" + strconv.Itoa(RoutesPageSize)
		if after != "" {
			path += "&after=" + url.QueryEscape(after)
		}
		if err := c.c.Do("GET", path, nil, &page); err != nil {
			return nil, err
		}
		rs = append(rs, page...)
		if len(page) < RoutesPageSize {
			return rs, nil
		}
		after = page[len(page)-1].Prefix
	}
}

// RoutesDigest is the FIB's routes in a figure (RoutesDigest).
func (c *Client) RoutesDigest() (*RoutesDigest, error) {
	d := &RoutesDigest{}
	return d, c.c.Do("GET", PathRoutesDigest, nil, d)
}

// Route is the route for exactly p: one, or none.
func (c *Client) Route(p string) ([]RouteInfo, error) {
	var rs []RouteInfo
	return rs, c.c.Do("GET", PathRoutes+"?prefix="+url.QueryEscape(p), nil, &rs)
}

// Lookup is the FIB's longest match for addr: one route, or none.
func (c *Client) Lookup(addr netip.Addr) ([]RouteInfo, error) {
	var rs []RouteInfo
	return rs, c.c.Do("GET", PathLookup+"?addr="+url.QueryEscape(addr.String()), nil, &rs)
}

// AddRoute adds or replaces a route.
func (c *Client) AddRoute(r RouteRequest) error {
	var res map[string]string
	return c.c.Do("POST", PathRoutes, r, &res)
}

// DeleteRoute removes the route for p.
func (c *Client) DeleteRoute(p string) error {
	var res map[string]string
	return c.c.Do("DELETE", PathRoutes+"?prefix="+url.QueryEscape(p), nil, &res)
}

// SetCapacity sets the back-end's capacity (0: no cap).
func (c *Client) SetCapacity(pps uint64) error {
	var res Capacity
	return c.c.Do("PUT", PathCapacity, Capacity{CapacityPPS: pps}, &res)
}

// FlushNeighbors forgets every neighbour the back-end has learned, and
// says how many there were.
func (c *Client) FlushNeighbors() (int, error) {
	var res map[string]int
	err := c.c.Do("DELETE", PathNeighbors, nil, &res)
	return res["flushed"], err
}
