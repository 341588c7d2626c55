// Package trace is `msr ctl trace`: one packet's walk through the
// router's stages. The VCP gives every LB and back-end a match (Spec);
// each data path reports the frames that match it when it decides what
// to do with them (bpf/trace.h), with the frame's first bytes; each
// agent reads its reports, puts them in words (an Event: the stage's
// verdict and why), and the VCP joins the events of one packet, known by
// its Key at every stage, into a Walk.
package trace

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/msr-router/msr/internal/api"
)

// Path is the trace on every agent's API (and the VCP's): POST a Spec
// starts one, GET answers what it caught (a Capture), DELETE ends it.
const Path = "/trace"

// MaxCount bounds the packets a trace follows, and MaxWait how long the
// VCP waits for them: a trace is for a packet or a few, not a capture.
const (
	MaxCount = 100
	MaxWait  = time.Minute
)

// A Spec is what to trace: packets from Src to Dst, of Proto (0: any)
// to DPort (0: any; TCP or UDP only), Count of them from where they come
// in. Hold arms a stage for what comes from inside the router only: the
// VCP arms every stage so first, then has the LBs follow packets in, so
// that no packet it follows finds a later stage not yet armed.
type Spec struct {
	ID    uint32     `json:"id"`
	Src   netip.Addr `json:"src"`
	Dst   netip.Addr `json:"dst"`
	Proto uint8      `json:"proto,omitempty"`
	DPort uint16     `json:"dport,omitempty"`
	Count uint32     `json:"count"`
	Hold  bool       `json:"hold,omitempty"`
}

// Budget is how many reports a stage sends at most: a stage after the way
// in sees the packets followed and, matching too, a few that came in
// before the trace was armed, which the VCP leaves out.
func (s Spec) Budget() uint32 { return 4*s.Count + 16 }

// Check refuses a Spec a data path cannot match.
func (s Spec) Check() error {
	switch {
	case !s.Src.IsValid() || !s.Dst.IsValid():
		return errors.New("trace: a source and a destination address are needed")
	case s.Src.Unmap().Is4() != s.Dst.Unmap().Is4():
		return fmt.Errorf("trace: %s and %s are of different families", s.Src, s.Dst)
	case s.Count < 1 || s.Count > MaxCount:
		return fmt.Errorf("trace: count %d: 1 to %d packets", s.Count, MaxCount)
	case s.DPort != 0 && s.Proto != unix.IPPROTO_TCP && s.Proto != unix.IPPROTO_UDP:
		return errors.New("trace: a destination port needs --proto tcp or udp")
	case s.ID == 0:
		return errors.New("trace: id 0 is no trace")
	}
	return nil
}

// Family is 4 or 6, and Addrs the addresses as the data path's match
// holds them (IPv4's in the first 4 bytes).
func (s Spec) Family() uint8 {
	if s.Src.Unmap().Is4() {
		return 4
	}
	return 6
}

// Addrs are the match's source and destination, 16 bytes each.
func (s Spec) Addrs() (src, dst [16]byte) {
	if s.Family() == 4 {
		a, b := s.Src.Unmap().As4(), s.Dst.Unmap().As4()
		copy(src[:], a[:])
		copy(dst[:], b[:])
		return src, dst
	}
	return s.Src.As16(), s.Dst.As16()
}

// Verdicts, as struct msr_trace_event's verdict has them (1..4).
var verdicts = [...]string{1: "sent", 2: "dropped", 3: "slow_path", 4: "passed"}

// A Raw is a data path's report (struct msr_trace_event) and the frame's
// first bytes.
type Raw struct {
	NS              uint64
	ID              uint32
	Verdict, Reason uint16
	InPort, OutPort uint32
	Detail          [3]uint32
	FrameLen        uint32
	Frame           []byte
}

// rawLen is struct msr_trace_event's size.
const rawLen = 40

// ParseRaw reads a report as the perf buffer gives it.
func ParseRaw(b []byte) (Raw, error) {
	if len(b) < rawLen {
		return Raw{}, fmt.Errorf("trace event of %d bytes: shorter than its %d-byte head", len(b), rawLen)
	}
	e := binary.NativeEndian
	r := Raw{NS: e.Uint64(b), ID: e.Uint32(b[8:]), Verdict: e.Uint16(b[12:]), Reason: e.Uint16(b[14:]),
		InPort: e.Uint32(b[16:]), OutPort: e.Uint32(b[20:]), FrameLen: e.Uint32(b[36:])}
	for i := range r.Detail {
		r.Detail[i] = e.Uint32(b[24+4*i:])
	}
	r.Frame = b[rawLen:]
	r.Frame = r.Frame[:min(len(r.Frame), int(r.FrameLen))]
	if int(r.Verdict) >= len(verdicts) || verdicts[r.Verdict] == "" {
		return Raw{}, fmt.Errorf("trace event: verdict %d unknown", r.Verdict)
	}
	return r, nil
}

// VerdictName is the verdict in words.
func (r Raw) VerdictName() string { return verdicts[r.Verdict] }

// A Packet is what a traced frame's first bytes say: its addresses,
// protocol and ports, TTL (hop limit), the VLAN tag it carried, and its
// Key: what stays the same of it from stage to stage (the addresses,
// protocol, IPv4's id or IPv6's flow label, the length and the first 8
// bytes of its transport header), so that the VCP knows it everywhere.
type Packet struct {
	Src, Dst     netip.Addr
	Proto        uint8
	SPort, DPort uint16
	TTL          int
	VLAN         int
	Len          int
	Key          string
}

// ParsePacket reads a frame's first bytes.
func ParsePacket(f []byte) (Packet, error) {
	var p Packet
	if len(f) < 14 {
		return p, errors.New("trace: a frame shorter than its Ethernet header")
	}
	et, off := binary.BigEndian.Uint16(f[12:]), 14
	if et == 0x8100 || et == 0x88a8 {
		if len(f) < 18 {
			return p, errors.New("trace: a tagged frame cut short")
		}
		p.VLAN, et, off = int(binary.BigEndian.Uint16(f[14:])&0xfff), binary.BigEndian.Uint16(f[16:]), 18
	}
	ip := f[off:]
	var key []byte
	var l4 []byte
	switch et {
	case 0x0800:
		if len(ip) < 20 {
			return p, errors.New("trace: an IPv4 header cut short")
		}
		ihl := int(ip[0]&0xf) * 4
		p.Src, p.Dst = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
		p.Proto, p.TTL, p.Len = ip[9], int(ip[8]), int(binary.BigEndian.Uint16(ip[2:]))
		key = append(key, ip[2:6]...) // length, id
		key = append(key, ip[9])
		key = append(key, ip[12:20]...)
		if frag := binary.BigEndian.Uint16(ip[6:]) & 0x1fff; frag == 0 && ihl >= 20 && len(ip) >= ihl {
			l4 = ip[ihl:]
		}
	case 0x86dd:
		if len(ip) < 40 {
			return p, errors.New("trace: an IPv6 header cut short")
		}
		p.Src, p.Dst = netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40]))
		p.Proto, p.TTL, p.Len = ip[6], int(ip[7]), 40+int(binary.BigEndian.Uint16(ip[4:]))
		key = append(key, ip[1:7]...) // flow label, payload length, next header
		key = append(key, ip[8:40]...)
		l4 = ip[40:]
	default:
		return p, fmt.Errorf("trace: EtherType %#04x is not IP", et)
	}
	if len(l4) >= 8 {
		key = append(key, l4[:8]...)
		if p.Proto == unix.IPPROTO_TCP || p.Proto == unix.IPPROTO_UDP {
			p.SPort, p.DPort = binary.BigEndian.Uint16(l4), binary.BigEndian.Uint16(l4[2:])
		}
	}
	p.Key = hex.EncodeToString(key)
	return p, nil
}

// ProtoName is a protocol number in words.
func ProtoName(p uint8) string {
	switch p {
	case unix.IPPROTO_TCP:
		return "tcp"
	case unix.IPPROTO_UDP:
		return "udp"
	case unix.IPPROTO_ICMP:
		return "icmp"
	case unix.IPPROTO_ICMPV6:
		return "icmpv6"
	}
	return fmt.Sprint(p)
}

// String is the packet in one line.
func (p Packet) String() string {
	s := fmt.Sprintf("%s -> %s %s", p.Src, p.Dst, ProtoName(p.Proto))
	if p.SPort != 0 || p.DPort != 0 {
		s += fmt.Sprintf(" %d -> %d", p.SPort, p.DPort)
	}
	return s + fmt.Sprintf(", %d bytes", p.Len)
}

// An Event is one stage's report of a traced packet, in words: which
// element (kind lb or router), when, what it did (Verdict: sent,
// dropped, slow_path, passed) and why (Reason), by which ports, and the
// stage's Decision (the LB's rule of Table 1 and back-end; the
// back-end's route and next hop).
type Event struct {
	Element  string    `json:"element"`
	Kind     string    `json:"kind"`
	At       time.Time `json:"at"`
	Verdict  string    `json:"verdict"`
	Reason   string    `json:"reason,omitempty"`
	In       string    `json:"in,omitempty"`
	Out      string    `json:"out,omitempty"`
	Decision string    `json:"decision,omitempty"`
	TTL      int       `json:"ttl"`
	VLAN     int       `json:"vlan,omitempty"`
	Packet   string    `json:"packet"`
	Key      string    `json:"key"`
	// Ingress says the packet came into the router here (an LB's
	// external port), Leaves that it left here (an LB sent it out of
	// one).
	Ingress bool `json:"ingress,omitempty"`
	Leaves  bool `json:"leaves,omitempty"`
}

// Final says whether the walk ends at this stage.
func (e Event) Final() bool { return e.Verdict != "sent" || e.Leaves }

// A Capture is what an agent's trace caught so far.
type Capture struct {
	Spec   *Spec   `json:"spec"`
	Events []Event `json:"events"`
	// Malformed counts reports it could not read.
	Malformed uint64 `json:"malformed"`
}

// A Walk is one packet's events at every stage, in time order.
type Walk struct {
	Packet string  `json:"packet"`
	Stages []Event `json:"stages"`
	// Ends says where and how: "left by lb2 e0", "dropped by r1: acl".
	Ends string `json:"ends"`
}

// Join groups events by packet into walks, each in time order, the
// walks in the order of their first stage. A packet not seen coming in
// (it came in before the trace was armed) has no walk.
func Join(events []Event) []Walk {
	byKey := map[string][]Event{}
	for _, e := range events {
		byKey[e.Key] = append(byKey[e.Key], e)
	}
	var walks []Walk
	for _, es := range byKey {
		sort.SliceStable(es, func(i, j int) bool { return es[i].At.Before(es[j].At) })
		if !es[0].Ingress {
			continue
		}
		w := Walk{Packet: es[0].Packet, Stages: es}
		last := es[len(es)-1]
		switch {
		case last.Leaves:
			w.Ends = "left by " + last.Element + " " + last.Out
		case last.Final():
			w.Ends = strings.ReplaceAll(last.Verdict, "_", " ") + " by " + last.Element
			if last.Reason != "" {
				w.Ends += ": " + last.Reason
			}
		default:
			w.Ends = "not seen after " + last.Element
		}
		walks = append(walks, w)
	}
	sort.Slice(walks, func(i, j int) bool { return walks[i].Stages[0].At.Before(walks[j].Stages[0].At) })
	return walks
}

// Done says whether every one of count walks has ended.
func Done(walks []Walk, count int) bool {
	if len(walks) < count {
		return false
	}
	return !slices.ContainsFunc(walks, func(w Walk) bool { return !w.Stages[len(w.Stages)-1].Final() })
}

// A Recorder is an agent's side: the trace on, and its events, at most
// maxEvents (a trace follows MaxCount packets, each seen once here, but
// a frame seen again after a loop is one more).
type Recorder struct {
	mu        sync.Mutex
	spec      *Spec
	events    []Event
	malformed uint64
	mono      time.Duration // CLOCK_MONOTONIC at wall
	wall      time.Time
}

const maxEvents = 4 * MaxCount

// Start starts recording spec's events, forgetting the last trace's.
func (r *Recorder) Start(spec Spec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spec, r.events, r.malformed = &spec, nil, 0
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	r.mono, r.wall = time.Duration(ts.Nano()), time.Now()
}

// Stop ends the trace; what it caught is kept until the next.
func (r *Recorder) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spec = nil
}

// Active is the trace on, if any.
func (r *Recorder) Active() *Spec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.spec
}

// At turns a data path's bpf_ktime_get_ns into wall time.
func (r *Recorder) At(ns uint64) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wall.Add(time.Duration(ns) - r.mono)
}

// Add records an event of the trace on (of its id); an event of another,
// or past maxEvents, is not kept.
func (r *Recorder) Add(id uint32, e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.spec != nil && r.spec.ID == id && len(r.events) < maxEvents {
		r.events = append(r.events, e)
	}
}

// Malformed counts a report that could not be read.
func (r *Recorder) Malformed() {
	r.mu.Lock()
	r.malformed++
	r.mu.Unlock()
}

// Capture is what the recorder holds.
func (r *Recorder) Capture() Capture {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Capture{Spec: r.spec, Events: slices.Clone(r.events), Malformed: r.malformed}
}

// Register serves an agent's trace on mux: POST a Spec starts it (a
// change: the admin's), GET says what it caught, DELETE ends it. set
// writes the agent's data path's match (nil: none).
func Register(mux *http.ServeMux, rec *Recorder, set func(*Spec) error) {
	mux.HandleFunc("POST "+Path, func(w http.ResponseWriter, r *http.Request) {
		var spec Spec
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&spec); err != nil {
			api.Reply(w, nil, fmt.Errorf("trace: %w", err))
			return
		}
		if err := spec.Check(); err != nil {
			api.Reply(w, nil, err)
			return
		}
		rec.Start(spec)
		if err := set(&spec); err != nil {
			rec.Stop()
			api.Reply(w, nil, err)
			return
		}
		api.Reply(w, rec.Capture(), nil)
	})
	mux.HandleFunc("GET "+Path, func(w http.ResponseWriter, r *http.Request) { api.Reply(w, rec.Capture(), nil) })
	mux.HandleFunc("DELETE "+Path, func(w http.ResponseWriter, r *http.Request) {
		err := set(nil)
		rec.Stop()
		api.Reply(w, rec.Capture(), err)
	})
}
