// Package lbapi is the load balancer's API: the paths its agent answers
// (internal/api carries them, on the agent's Unix socket and on the
// management network), their answers' types, and a typed client. `msr lb`,
// the VCP's console, the demo and the tests use the client; only package lb
// serves it.
package lbapi

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/msr-router/msr/internal/api"
	"github.com/msr-router/msr/internal/sflow"
)

// The paths.
const (
	PathStatus = "/status" // GET: Status
	PathTable  = "/table"  // GET: SlotTable, the installed table slot by slot
	// PathSFlow: GET the SFlowExport in force; PUT one, the router's from
	// the VCP, in place of the LB file's; DELETE it, the file's again.
	PathSFlow = "/sflow"
)

// Status is what the local API reports.
type Status struct {
	Name   string `json:"name"`
	ID     uint64 `json:"id"`
	VCPMAC string `json:"vcp_mac,omitempty"`
	// CapacityPPS is the LB's cap on the frames it balances a second
	// (capacity_pps; 0: none), CapDrop the frames its caps and its
	// ports' dropped (drops "cap" and "port_cap" summed over its ports).
	CapacityPPS uint64 `json:"capacity_pps,omitempty"`
	CapDrop     uint64 `json:"cap_drop"`
	// Infrastructure is the router's inside as this LB holds it (its
	// host's prefixes and the file's); InfraDropped the frames from
	// outside to or from it that it dropped (drop "infra" summed
	// over its ports).
	Infrastructure []string        `json:"infrastructure"`
	InfraDropped   uint64          `json:"infra_dropped"`
	Ports          []PortStatus    `json:"ports"`
	Backends       []BackendStatus `json:"backends"`
	Table          TableStatus     `json:"table"`
	// SFlow is the sFlow export (absent: none configured).
	SFlow *SFlowStatus                 `json:"sflow,omitempty"`
	DIST  map[string]map[string]uint64 `json:"dist"`
	// DISTRoleRefused counts DIST frames that asked to configure this LB
	// without the VCP's key (dist reason "role_refused", every port).
	DISTRoleRefused uint64 `json:"dist_role_refused"`
	// FlowletGapUs is flowlet mode's gap in lb_cfg now; FlowletGapAuto
	// says it follows the paths' measured spread (flowlet_gap auto).
	FlowletGapUs   int64         `json:"flowlet_gap_us"`
	FlowletGapAuto bool          `json:"flowlet_gap_auto"`
	Paths          *BackendPaths `json:"paths,omitempty"`
	// Police is control-plane policing, per class of traffic to the
	// router (lb/police.go): its rates and what it passed and dropped.
	Police []PoliceClass `json:"police"`
	// Peers are the router's peers on this LB's ports (the VCP's PEERS):
	// each policed in a bucket of its own, its BGP with GTSM where on.
	// PeersUnplaced counts those the VCP sent for a VLAN this LB has no
	// external port of; GTSMDropped the packets dropped for a TTL below
	// 255 (drop "gtsm" summed over the ports).
	Peers         []PeerStatus `json:"peers"`
	PeersUnplaced int          `json:"peers_unplaced"`
	GTSMDropped   uint64       `json:"gtsm_dropped"`
	// AllBackendsSilent counts the times every back-end's hellos stopped
	// at once and the LB kept them all in its table rather than none.
	AllBackendsSilent uint64 `json:"all_backends_silent"`
}

// PeerStatus is one peer: where it is heard, whether its BGP must come
// with TTL 255, and what its bucket passed and dropped.
type PeerStatus struct {
	Addr        string `json:"addr"`
	Port        string `json:"port"`
	GTSM        bool   `json:"gtsm"`
	Passed      uint64 `json:"passed"`
	Dropped     uint64 `json:"dropped"`
	GTSMDropped uint64 `json:"gtsm_dropped"`
}

// PoliceClass is one class of control-plane policing: packets a second
// for the class and for each source in it (0: no limit), the burst, and
// the packets it passed and dropped (for the source's rate, or the
// class's).
type PoliceClass struct {
	Class         string `json:"class"`
	PPS           uint64 `json:"pps"`
	PerSourcePPS  uint64 `json:"per_source_pps"`
	Burst         uint64 `json:"burst"`
	Passed        uint64 `json:"passed"`
	DroppedSource uint64 `json:"dropped_source"`
	DroppedClass  uint64 `json:"dropped_class"`
}

// BackendPaths is the LB's paths through the back-ends as its PROBEs time
// them (lb/pathprobe.go): probes sent, returned and lost, and the spread
// of each round's round trips (longest less shortest) over the rounds
// kept.
type BackendPaths struct {
	Sent        uint64        `json:"sent"`
	Returned    uint64        `json:"returned"`
	Lost        uint64        `json:"lost"`
	Rounds      int           `json:"rounds"`
	SpreadP50Us int64         `json:"spread_p50_us"`
	SpreadP99Us int64         `json:"spread_p99_us"`
	SpreadMaxUs int64         `json:"spread_max_us"`
	Paths       []BackendPath `json:"paths"`
}

// BackendPath is one back-end through one internal port: its round trips.
type BackendPath struct {
	Backend   string `json:"backend"` // MAC
	PortIndex uint8  `json:"port_index"`
	Samples   int    `json:"samples"`
	Lost      uint64 `json:"lost"`
	RTTP50Us  int64  `json:"rtt_p50_us"`
	RTTP99Us  int64  `json:"rtt_p99_us"`
}

// PortStatus is one port and its counters.
type PortStatus struct {
	Name      string `json:"name"`      // the router's name for it, LB/INTERFACE (dist.PortName)
	Interface string `json:"interface"` // its interface on the LB
	Ifindex   int    `json:"ifindex"`
	Index     uint8  `json:"index"`
	Role      string `json:"role"`
	MAC       string `json:"mac"`
	VLAN      uint16 `json:"vlan,omitempty"`
	Address   string `json:"address,omitempty"`
	Address6  string `json:"address6,omitempty"`
	LinkLocal string `json:"link_local,omitempty"` // external ports: the IPv6 link-local address Ext NDP answers for
	Default   bool   `json:"default,omitempty"`
	// URPF: an external port whose frames are balanced tagged with its
	// VLAN, for the back-ends' unicast RPF.
	URPF bool `json:"urpf,omitempty"`
	// CapacityPPS caps what an internal port sends a second (DTX-n).
	CapacityPPS uint64     `json:"capacity_pps,omitempty"`
	Link        Link       `json:"link"`
	Stats       *PortStats `json:"stats"`
}

// Link is a port's state as the LB's kernel reports it.
type Link struct {
	Up         bool   `json:"up"` // operational: administratively up with carrier
	AdminUp    bool   `json:"admin_up"`
	Carrier    bool   `json:"carrier"`
	OperState  string `json:"oper_state"`
	MTU        int    `json:"mtu"`
	SpeedMbps  uint32 `json:"speed_mbps"` // 0: the driver does not say
	FullDuplex bool   `json:"full_duplex"`
	// Changes counts the operational changes since the agent started,
	// the last SinceS seconds ago (0: none seen).
	Changes uint64  `json:"changes"`
	SinceS  float64 `json:"since_s,omitempty"`
}

// BackendStatus is a back-end the LB has heard from.
type BackendStatus struct {
	MAC         string `json:"mac"`
	Name        string `json:"name"`
	Alive       bool   `json:"alive"`
	Draining    bool   `json:"draining"`
	Capacity    uint32 `json:"capacity"`
	LastHelloMs int64  `json:"last_hello_ms"`
	// LeftTableAgoMs and LeftAfterHelloMs are set while a back-end that
	// was in the installed table is out of it: how long ago the first
	// table without it was installed, and how long that was after its
	// last hello arrived (both by the LB's clock, the hello's arrival
	// stamped by the kernel).
	LeftTableAgoMs   int64   `json:"left_table_ago_ms,omitempty"`
	LeftAfterHelloMs float64 `json:"left_after_hello_ms,omitempty"`
	// LeftDecidedAfterHelloMs is when, after its last hello, the LB
	// found it silent and began the table without it (the rest of
	// LeftAfterHelloMs is building and installing that table).
	LeftDecidedAfterHelloMs float64 `json:"left_decided_after_hello_ms,omitempty"`
	// LeftHeardLagMs is how far behind the agent had read its DIST
	// sockets then: its own process's delay (its receive loop not run),
	// by which the silence was found later than the hold (0: caught up).
	LeftHeardLagMs float64 `json:"left_heard_lag_ms,omitempty"`
}

// TableStatus is the installed balancing table, summarized.
type TableStatus struct {
	Mode       string         `json:"mode"`
	Generation uint32         `json:"generation"`
	Slots      int            `json:"slots"`
	Shares     map[string]int `json:"shares"` // slots per back-end MAC
}

// SlotTable is the installed balancing table slot by slot: which
// back-end (by MAC) each slot sends to. A flow's slot is its hash modulo
// the number of slots, so comparing two tables slot by slot shows which
// flows a change moved.
type SlotTable struct {
	Mode       string   `json:"mode"`
	Generation uint32   `json:"generation"`
	Slots      []string `json:"slots"`
}

// PortStats is one port's counters, summed over CPUs.
type PortStats struct {
	RxPackets uint64            `json:"rx_packets"`
	RxBytes   uint64            `json:"rx_bytes"`
	TxPackets uint64            `json:"tx_packets"`
	TxBytes   uint64            `json:"tx_bytes"`
	Modules   map[string]uint64 `json:"modules"`
	Drops     map[string]uint64 `json:"drops"`
	// RxPerCPU is the frames each CPU received on the port: how its
	// queues (RSS) spread the load over the cores.
	RxPerCPU []uint64 `json:"rx_per_cpu"`
}

// SFlowStatus is the LB's sFlow export: samples read from the data path,
// those the perf buffer lost and those it could not read, datagrams sent
// (to each collector) and failed.
type SFlowStatus struct {
	Export     *SFlowExport `json:"export"`
	Samples    uint64       `json:"samples"`
	Lost       uint64       `json:"lost"`
	Malformed  uint64       `json:"malformed"`
	Datagrams  uint64       `json:"datagrams"`
	SendErrors uint64       `json:"send_errors"`
	// Refused counts the exports PUT at PathSFlow that did not check.
	Refused uint64 `json:"refused"`
	// IPFIX is the flows' export (absent: none).
	IPFIX *IPFIXStatus `json:"ipfix,omitempty"`
	// Routes are the lookups of the samples' routes at the back-ends.
	Routes RouteLookups `json:"routes"`
	// Top are the top talkers of the samples over the last minute.
	Top []Talker `json:"top"`
}

// SFlowExport is an LB's sFlow export: the collectors, the router's agent
// address and the LB's sub-agent id in it (0: the LB's id), how often
// each external port's counters go (seconds), and each external port's
// sampling rate, 1 in N, by its MAC (absent: none). From says whose it
// is: "file" (the LB's config) or "vcp" (the router's, which the VCP
// sets); it is not part of a PUT.
type SFlowExport struct {
	From            string            `json:"from,omitempty"`
	Collectors      []netip.AddrPort  `json:"collectors"`
	AgentAddress    netip.Addr        `json:"agent_address"`
	SubAgent        uint32            `json:"sub_agent"`
	CounterInterval uint32            `json:"counter_interval_s"`
	Rates           map[string]uint32 `json:"rates"`
	// IPFIX, if set, sends the samples summed into flows as IPFIX too.
	IPFIX *IPFIXExport `json:"ipfix,omitempty"`
}

// IPFIXExport is where the LB sends the flows of its samples as IPFIX,
// and after how long (seconds) a flow is reported while it lasts (active)
// and once it goes unsampled (idle).
type IPFIXExport struct {
	Collectors    []netip.AddrPort `json:"collectors"`
	ActiveTimeout uint32           `json:"active_timeout_s"`
	IdleTimeout   uint32           `json:"idle_timeout_s"`
}

// Export's sources.
const (
	SFlowFromFile = "file"
	SFlowFromVCP  = "vcp"
)

// Same says whether x and y export the same, whoever set them.
func (x *SFlowExport) Same(y *SFlowExport) bool {
	if x == nil || y == nil {
		return x == y
	}
	return slices.Equal(x.Collectors, y.Collectors) && x.AgentAddress == y.AgentAddress && x.SubAgent == y.SubAgent &&
		x.CounterInterval == y.CounterInterval && maps.Equal(x.Rates, y.Rates) &&
		(x.IPFIX == nil) == (y.IPFIX == nil) && (x.IPFIX == nil || slices.Equal(x.IPFIX.Collectors, y.IPFIX.Collectors) &&
		x.IPFIX.ActiveTimeout == y.IPFIX.ActiveTimeout && x.IPFIX.IdleTimeout == y.IPFIX.IdleTimeout)
}

// RouteLookups count the samples' routes asked of the back-ends (the
// extended router data's): asked, failed, and the answers held.
type RouteLookups struct {
	Lookups  uint64 `json:"lookups"`
	Failures uint64 `json:"failures"`
	Cached   int    `json:"cached"`
}

// IPFIXOf is a config file's IPFIX export as the API has it (nil: none).
func IPFIXOf(c *sflow.IPFIXConfig) *IPFIXExport {
	if c == nil {
		return nil
	}
	return &IPFIXExport{Collectors: c.Collectors, ActiveTimeout: uint32(c.ActiveTimeout / time.Second), IdleTimeout: uint32(c.IdleTimeout / time.Second)}
}

// IPFIXStatus is the IPFIX export of the samples' flows: the flows being
// summed, the records and messages sent, the messages that failed, and
// the samples of new flows past the most the LB sums at once (not
// reported).
type IPFIXStatus struct {
	Flows      int    `json:"flows"`
	Records    uint64 `json:"records"`
	Messages   uint64 `json:"messages"`
	SendErrors uint64 `json:"send_errors"`
	Overflow   uint64 `json:"overflow"`
}

// A Talker is the sampled traffic from Src to Dst of Proto, scaled by the
// sampling rate: Bytes (of frames, without the FCS) and Frames over
// Seconds.
type Talker struct {
	Src     string  `json:"src"`
	Dst     string  `json:"dst"`
	Proto   string  `json:"proto"`
	Bytes   uint64  `json:"bytes"`
	Frames  uint64  `json:"frames"`
	Seconds float64 `json:"seconds"`
}

// SortTalkers orders talkers the most bytes first, then by source,
// destination and protocol.
func SortTalkers(ts []Talker) {
	slices.SortFunc(ts, func(a, b Talker) int {
		return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), cmp.Compare(a.Src, b.Src), cmp.Compare(a.Dst, b.Dst), cmp.Compare(a.Proto, b.Proto))
	})
}

// Client is a client of one LB agent's API.
type Client struct{ c *api.Client }

// New is a client over c (a Unix socket's, or the management network's).
func New(c *api.Client) *Client { return &Client{c} }

// Local is the client of the LB named name on this host (its socket
// path is socket, or the default one when socket is "").
func Local(name, socket string) *Client { return New(api.Local("lb", name, socket)) }

// Status asks for the LB's ports, counters, back-ends and table.
func (c *Client) Status() (*Status, error) {
	s := &Status{}
	return s, c.c.Do("GET", PathStatus, nil, s)
}

// Table asks for the installed table, slot by slot.
func (c *Client) Table() (*SlotTable, error) {
	t := &SlotTable{}
	return t, c.c.Do("GET", PathTable, nil, t)
}
