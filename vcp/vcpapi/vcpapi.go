// Package vcpapi is the virtual control plane's API, the router's console:
// the paths the VCP answers (internal/api carries them, on its Unix socket
// and, with api_listen, on the management network), their answers' types,
// and a typed client. `msr vcp`, `msr ctl`, the demo and the tests use the
// client; only package vcp serves it.
package vcpapi

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"time"

	"github.com/msr-router/msr/internal/api"
	"github.com/msr-router/msr/internal/logging"
	"github.com/msr-router/msr/internal/trace"
	"github.com/msr-router/msr/lb/lbapi"
	"github.com/msr-router/msr/router/routerapi"
)

// The paths. Reading is open; a change (POST) over the management network
// needs the token of the router's key (internal/api/tcp.go).
const (
	PathStatus   = "/status"        // GET: Status, everything below at once
	PathElements = "/elements"      // GET: []ElementStatus
	PathPorts    = "/ports"         // GET: PortsView, the router's ports and counters
	PathTables   = "/tables"        // GET: []TableStatus, every LB's balancing table
	PathRoutes   = "/routes"        // GET: RoutesView, count, protocols, per back-end install state
	PathLookup   = "/routes/lookup" // GET ?addr=A: LookupView, the suite's and every back-end's routes for A
	PathDrain    = "/drain"         // POST ?name=B
	PathUndrain  = "/undrain"       // POST ?name=B
	PathWeight   = "/weight"        // POST ?name=B&capacity=MBPS (0: the configured or announced one again)
	PathView     = "/view"          // GET: View, for the web view at /
	PathReload   = "/reload"        // POST: ReloadResult, the config file read again, the difference applied (?dry_run=1: not applied; ?confirm=2m: rolled back unless confirmed)
	PathConfirm  = "/confirm"       // POST: HistoryView, the change waiting for its confirm kept
	PathRollback = "/rollback"      // POST ?n=N: ReloadResult, the config applied N changes ago applied again
	PathHistory  = "/history"       // GET: HistoryView
	PathACL      = "/acl"           // GET: ACLView, the router's ACL and its hits summed over the back-ends
	// PathTrace (POST a trace.Spec, ?wait=DURATION): TraceResult, the
	// walks of the packets that matched through every stage.
	PathTrace = trace.Path
	// PathRelay/ELEMENT/PATH (any method): the request, passed to
	// ELEMENT's own API (by name or id), its answer passed back as it is.
	PathRelay = "/relay"
)

// Status is the router as the VCP sees it.
type Status struct {
	Name     string          `json:"name"`
	Role     string          `json:"role"` // active, or standby (docs/vcp.md, hot standby)
	Elements []ElementStatus `json:"elements"`
	Tables   []TableStatus   `json:"tables"`
	// LastPush is the last pass that sent LBs new tables: how long
	// computing and sending them took.
	LastPush *PushStatus       `json:"last_push,omitempty"`
	Suite    *SuiteStatus      `json:"suite,omitempty"`
	Mirrors  map[string]uint64 `json:"mirrors"`
	// DIST counts control frames sent, accepted, and refused by reason
	// (a wrong key shows as "auth" or "unknown_key").
	DIST map[string]uint64 `json:"dist"`
	// DISTRoleRefused counts DIST frames that asked to configure without
	// the VCP's key (dist reason "role_refused").
	DISTRoleRefused uint64 `json:"dist_role_refused"`
	// PrefixLimitHits counts, by BGP peer address, the times the suite
	// shut the session because the peer sent more than max_prefixes.
	PrefixLimitHits map[string]uint64 `json:"prefix_limit_hits"`
	// AllBackendsSilent counts the times every back-end fell silent at
	// once to this VCP and the LBs' tables kept them all.
	AllBackendsSilent uint64 `json:"all_backends_silent"`
	// UnknownPorts counts the external ports LBs announced that the
	// config does not have: not ports of the router, never configured.
	UnknownPorts uint64 `json:"unknown_ports"`
}

// ElementStatus is one element.
type ElementStatus struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Role     string `json:"role"`
	MAC      string `json:"mac"`
	Alive    bool   `json:"alive"`
	Drained  bool   `json:"drained,omitempty"`
	Capacity uint32 `json:"capacity_mbps"`
	// LoadFactor scales a back-end's weight when it drops for want of
	// capacity (1: none; vcp/load.go).
	LoadFactor float64 `json:"load_factor,omitempty"`
	// Busy is a back-end's data path CPU time, in cores, as its hellos
	// report it (absent: not measured).
	Busy        float64 `json:"busy,omitempty"`
	LastHelloMs int64   `json:"last_hello_ms"`
	// Installed: an LB's table generation, a back-end's FIB routes.
	Installed uint32        `json:"installed"`
	Ports     []ElementPort `json:"ports"`
}

// An ElementPort is one of an element's ports as its hellos report it.
type ElementPort struct {
	// Name is the router's name for it, ELEMENT/INTERFACE (lb1/e0).
	Name      string       `json:"name"`
	Index     uint8        `json:"index"`
	Role      string       `json:"role"` // external, internal, or unknown
	VLAN      uint16       `json:"vlan"`
	MAC       string       `json:"mac"`
	Prefix    netip.Prefix `json:"prefix"`
	Up        bool         `json:"up"`
	AdminUp   bool         `json:"admin_up"`
	SpeedMbps uint32       `json:"speed_mbps"`
	MTU       uint16       `json:"mtu"`
	RxPackets uint64       `json:"rx_packets"`
	RxBytes   uint64       `json:"rx_bytes"`
	TxPackets uint64       `json:"tx_packets"`
	TxBytes   uint64       `json:"tx_bytes"`
	RxDropped uint64       `json:"rx_dropped"`
}

// PushStatus is one pass of the VCP over its LBs that sent new tables
// (after a back-end died, came, or changed weight).
type PushStatus struct {
	At      time.Time `json:"at"`
	LBs     int       `json:"lbs"`     // LBs sent a new table
	Entries int       `json:"entries"` // entries sent, all LBs
	Frames  int       `json:"frames"`
	// Ms is the pass's time: every LB's table computed and sent.
	Ms float64 `json:"ms"`
}

// TableStatus is the table the VCP computed for one LB.
type TableStatus struct {
	LB         string            `json:"lb"`
	Mode       string            `json:"mode"`
	Generation uint32            `json:"generation"`
	Applied    bool              `json:"applied"` // the LB reports this generation
	Weights    map[string]uint16 `json:"weights"` // back-end name -> weight (per port)
}

// PortView is one port of the router.
type PortView struct {
	Name       string `json:"name"` // the router's name for it, LB/INTERFACE, such as lb1/e0
	LB         string `json:"lb"`
	Index      uint8  `json:"index"`
	MAC        string `json:"mac"`
	Role       string `json:"role"` // external, internal, unknown
	VLAN       uint16 `json:"vlan,omitempty"`
	Address    string `json:"address,omitempty"`
	Up         bool   `json:"up"` // operational: administratively up with carrier, on the LB
	AdminUp    bool   `json:"admin_up"`
	SpeedMbps  uint32 `json:"speed_mbps"` // the link's, as the LB's driver reports it (0: unknown)
	FullDuplex bool   `json:"full_duplex"`
	MTU        uint16 `json:"mtu"`
	// An external port's operational changes since the VCP started, the
	// last LastChangeS seconds ago.
	Changes     uint64  `json:"changes,omitempty"`
	LastChangeS float64 `json:"last_change_s,omitempty"`
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

// Add adds o's counts to c's.
func (c *Counters) Add(o Counters) {
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

// LookupView is the routes for one address: the suite's, and what each
// back-end's FIB holds for it (asked through its API).
type LookupView struct {
	Addr     string          `json:"addr"`
	Suite    []SuiteRoute    `json:"suite"`
	Backends []BackendLookup `json:"backends"`
}

// BackendLookup is one back-end's longest match, or why it is unknown.
type BackendLookup struct {
	Name   string                `json:"name"`
	Routes []routerapi.RouteInfo `json:"routes"`
	Error  string                `json:"error,omitempty"`
}

// Protocol is one of the suite's protocols, as `show protocols all` says.
type Protocol struct {
	Name     string     `json:"name"`
	Proto    string     `json:"proto"` // BGP, OSPF, Static, Direct, Device
	State    string     `json:"state"` // up, start, down
	Since    string     `json:"since"`
	Info     string     `json:"info"` // Established, Active, Running ...
	Neighbor netip.Addr `json:"neighbor,omitzero"`
	Imported int        `json:"imported"`
	Exported int        `json:"exported"`
	// LimitHit: the suite shut this BGP session (or holds it down) because
	// the peer sent more prefixes than max_prefixes.
	LimitHit bool `json:"limit_hit,omitempty"`
}

// SuiteRoute is a route of the suite's table.
type SuiteRoute struct {
	Prefix   string   `json:"prefix"`
	Protocol string   `json:"protocol"` // where it came from: peer0, static1, ospf1 ...
	Best     bool     `json:"best"`
	Via      []string `json:"via,omitempty"`
	Dev      string   `json:"dev,omitempty"` // connected: the mirror
}

// SuiteStatus is the suite's protocols and route count, as text.
type SuiteStatus struct {
	Protocols string `json:"protocols"`
	Routes    string `json:"routes"`
}

// View is what the web view draws (GET /view): the router's elements
// with their rates and shares, its routes per protocol, its sessions and
// the recent events, newest first.
type View struct {
	Name     string         `json:"name"` // the VCP's
	Active   bool           `json:"active"`
	At       time.Time      `json:"at"`
	Elements []ViewElement  `json:"elements"`
	Routes   map[string]int `json:"routes"` // imported, by protocol (BGP, OSPF, Static, Direct, RIP)
	Sessions []ViewSession  `json:"sessions"`
	Events   []ViewEvent    `json:"events"`
	// Traces are the walks of the last packets traced (msr ctl trace),
	// newest first.
	Traces []trace.Walk `json:"traces"`
	// Talkers are the top talkers of the LBs' sFlow samples over the last
	// minute, summed over the LBs (none: no LB samples).
	Talkers []lbapi.Talker `json:"talkers"`
}

// ViewElement is an LB, a back-end or a VCP.
type ViewElement struct {
	Name      string     `json:"name"`
	Role      string     `json:"role"` // lb, router, vcp
	Alive     bool       `json:"alive"`
	Active    bool       `json:"active,omitempty"` // a VCP: the active one
	Drained   bool       `json:"drained,omitempty"`
	Installed uint32     `json:"installed"` // an LB's table generation, a back-end's FIB routes
	RxPPS     float64    `json:"rx_pps"`    // a back-end: what it receives from the LBs
	Share     float64    `json:"share"`     // a back-end: its part of what all receive
	Ports     []ViewPort `json:"ports,omitempty"`
}

// ViewPort is one port of an LB and its receive rate.
type ViewPort struct {
	Name  string  `json:"name"`
	Role  string  `json:"role"`
	Up    bool    `json:"up"`
	RxPPS float64 `json:"rx_pps"`
	RxBPS float64 `json:"rx_bps"`
}

// ViewSession is a session of the routing suite.
type ViewSession struct {
	Name   string `json:"name"`
	Proto  string `json:"proto"`
	State  string `json:"state"`
	Info   string `json:"info"`
	Routes int    `json:"routes"`
}

// ViewEvent is something that happened to the router.
type ViewEvent struct {
	At   time.Time `json:"at"`
	Text string    `json:"text"`
}

// ReloadResult says what a reload changed.
type ReloadResult struct {
	Changes []string `json:"changes"`
	// DryRun: the file was checked and compared, nothing applied.
	DryRun bool `json:"dry_run,omitempty"`
	// Entry is the applied config's place in the history (none for a
	// dry run or no change).
	Entry *ConfigEntry `json:"entry,omitempty"`
}

// ConfigEntry is a config the VCP applied, as its history keeps it: who
// applied it (a local user, or the management API's admin token from an
// address), when, how (start, reload, reload confirmed within a time,
// rollback, an unconfirmed change rolled back), what changed, the file's
// digest; Pending while a commit-confirmed change waits for `msr ctl
// confirm` (until ConfirmBy), and who confirmed it, or RolledBack if a
// rollback ended it unconfirmed.
type ConfigEntry struct {
	Seq         int       `json:"seq"`
	Time        time.Time `json:"time"`
	Who         string    `json:"who"`
	How         string    `json:"how"`
	Changes     []string  `json:"changes"`
	SHA256      string    `json:"sha256"`
	Pending     bool      `json:"pending,omitempty"`
	ConfirmBy   time.Time `json:"confirm_by,omitzero"`
	ConfirmedBy string    `json:"confirmed_by,omitempty"`
	RolledBack  bool      `json:"rolled_back,omitempty"`
}

// ParseConfirm reads `--confirm`'s time: from 10 s to 1 h (Junos takes
// 1 to 65,535 minutes; less than 10 s is too short to confirm over a slow
// link, more than an hour is a change left to chance).
func ParseConfirm(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < 10*time.Second || d > time.Hour {
		return 0, fmt.Errorf("confirm within %q: a time from 10s to 1h, such as 2m", s)
	}
	return d, nil
}

// HistoryView is the configs applied, newest first: `msr ctl rollback N`
// returns to Entries[N].
type HistoryView struct {
	Entries []ConfigEntry `json:"entries"`
}

// Client is a client of the VCP's API.
type Client struct{ c *api.Client }

// New is a client over c (a Unix socket's, or the management network's).
func New(c *api.Client) *Client { return &Client{c} }

// Local is the client of the VCP named name on this host (its socket path
// is socket, or the default one when socket is "").
func Local(name, socket string) *Client { return New(api.Local("vcp", name, socket)) }

// Status asks for the router as the VCP sees it.
func (c *Client) Status() (*Status, error) {
	s := &Status{}
	return s, c.c.Do("GET", PathStatus, nil, s)
}

// Elements lists every LB and back-end.
func (c *Client) Elements() ([]ElementStatus, error) {
	var es []ElementStatus
	return es, c.c.Do("GET", PathElements, nil, &es)
}

// Ports lists the router's ports and sums the external ones.
func (c *Client) Ports() (*PortsView, error) {
	v := &PortsView{}
	return v, c.c.Do("GET", PathPorts, nil, v)
}

// Tables lists every LB's balancing table.
func (c *Client) Tables() ([]TableStatus, error) {
	var ts []TableStatus
	return ts, c.c.Do("GET", PathTables, nil, &ts)
}

// Routes tells the route count, the suite's protocols and each back-end's
// install state.
func (c *Client) Routes() (*RoutesView, error) {
	v := &RoutesView{}
	return v, c.c.Do("GET", PathRoutes, nil, v)
}

// ACL reads the router's ACL with its hit counters summed over the
// back-ends.
func (c *Client) ACL() (*ACLView, error) {
	v := &ACLView{}
	return v, c.c.Do("GET", PathACL, nil, v)
}

// ACLView is the router's ACL (the VCP's acl:, which every back-end
// applies), each rule with the packets it matched on every back-end
// together, and what each back-end said.
type ACLView struct {
	// Configured: the router's config has an acl: (else each back-end
	// keeps its own file's, and Rules is empty).
	Configured bool           `json:"configured"`
	Rules      []ACLRuleView  `json:"rules"`
	Backends   []ACLOfBackend `json:"backends"`
}

// ACLRuleView is one rule and its hits: packets permitted or denied by it,
// summed over the back-ends that apply the router's ACL.
type ACLRuleView struct {
	Index int    `json:"index"`
	Rule  string `json:"rule"` // "deny tcp any -> 192.0.2.0/24 dport 23"
	Hits  uint64 `json:"hits"`
}

// ACLOfBackend is one back-end's part: its rules in force, and whether
// they are the router's (a back-end not yet configured, or unreachable,
// is not summed).
type ACLOfBackend struct {
	Name    string   `json:"name"`
	Rules   int      `json:"rules"`
	Applied bool     `json:"applied"`
	Hits    []uint64 `json:"hits,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// Lookup finds the routes for addr in the suite and in every back-end's
// FIB.
func (c *Client) Lookup(addr string) (*LookupView, error) {
	v := &LookupView{}
	return v, c.c.Do("GET", PathLookup+"?addr="+url.QueryEscape(addr), nil, v)
}

// Drain sends no new flows to the back-end named name; undrain again.
func (c *Client) Drain(name string, drain bool) error {
	path := PathUndrain
	if drain {
		path = PathDrain
	}
	var res map[string]string
	return c.c.Do("POST", path+"?name="+url.QueryEscape(name), nil, &res)
}

// Weight sets a back-end's capacity in Mbit/s (0: the configured one).
func (c *Client) Weight(name string, mbps uint32) error {
	var res map[string]any
	return c.c.Do("POST", PathWeight+"?name="+url.QueryEscape(name)+"&capacity="+strconv.FormatUint(uint64(mbps), 10), nil, &res)
}

// Reload has the VCP read its config again and apply the difference.
func (c *Client) Reload(dryRun bool) (*ReloadResult, error) {
	return c.ReloadConfirm(dryRun, 0)
}

// ReloadConfirm is Reload, rolled back unless Confirm comes within
// confirm (0: kept).
func (c *Client) ReloadConfirm(dryRun bool, confirm time.Duration) (*ReloadResult, error) {
	v := &ReloadResult{}
	q := url.Values{}
	if dryRun {
		q.Set("dry_run", "1")
	}
	if confirm > 0 {
		q.Set("confirm", confirm.String())
	}
	path := PathReload
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return v, c.c.Do("POST", path, nil, v)
}

// Confirm keeps the change waiting for its confirm.
func (c *Client) Confirm() (*HistoryView, error) {
	v := &HistoryView{}
	return v, c.c.Do("POST", PathConfirm, nil, v)
}

// Rollback applies the config applied n changes ago again.
func (c *Client) Rollback(n int) (*ReloadResult, error) {
	v := &ReloadResult{}
	return v, c.c.Do("POST", PathRollback+"?n="+strconv.Itoa(n), nil, v)
}

// History is the configs applied, newest first.
func (c *Client) History() (*HistoryView, error) {
	v := &HistoryView{}
	return v, c.c.Do("GET", PathHistory, nil, v)
}

// TraceResult is what a trace caught: one walk a packet, the elements
// that took the trace, and those that could not.
type TraceResult struct {
	Spec     trace.Spec   `json:"spec"`
	Walks    []trace.Walk `json:"walks"`
	Elements []string     `json:"elements"`
	Errors   []string     `json:"errors,omitempty"`
	// Reports are how many matches each element reported at the last
	// gathering, the packets not followed in too (absent: its API did
	// not answer).
	Reports map[string]int `json:"reports"`
}

// Trace follows spec's packets through the router for at most wait.
func (c *Client) Trace(spec trace.Spec, wait time.Duration) (*TraceResult, error) {
	v := &TraceResult{}
	return v, c.c.WithTimeout(wait+10*time.Second).Do("POST", PathTrace+"?wait="+url.QueryEscape(wait.String()), spec, v)
}

// Element is a client of one element's own API (by name or id) through
// the VCP's relay: lbapi.New(c.Element("lb1")) asks lb1.
func (c *Client) Element(element string) *api.Client {
	return c.c.Under(PathRelay + "/" + url.PathEscape(element))
}

// Raw sends a request to the VCP itself and returns its status and body
// as they are: a path of every agent's API, not the VCP's own.
func (c *Client) Raw(method, path string, body []byte) (int, []byte, error) {
	return c.c.Raw(method, path, body)
}

// Relay sends a request to one element's own API through the VCP, and
// returns its answer as it is.
func (c *Client) Relay(element, method, path string, body []byte) (int, []byte, error) {
	return c.c.Raw(method, PathRelay+"/"+url.PathEscape(element)+path, body)
}

// LogLevel is the log level of the VCP (element "") or of one element
// through the relay; with level set it is changed to it first.
func (c *Client) LogLevel(element, level string) (string, error) {
	target := c.c
	if element != "" {
		target = c.Element(element)
	}
	method, path := "GET", logging.PathLevel
	if level != "" {
		method, path = "PUT", path+"?level="+url.QueryEscape(level)
	}
	var v logging.LevelView
	err := target.Do(method, path, nil, &v)
	return v.Level, err
}
