// Package router is msr's back-end router: the XDP data path of
// bpf/router.bpf.c (RFC 1812 checks, ACL, DIR-24-8 longest-prefix match,
// ECMP, VLAN-tagged egress), its FIB, a plain-Go reference model used by
// the differential tests, and the agent `msr router` with its slow path
// (ICMP, ARP, held packets).
package router

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/perf"
	"golang.org/x/sys/unix"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/element"
	"github.com/msr-router/msr/internal/xdp"
	"github.com/msr-router/msr/router/routerapi"
)

// Limits, generated from router.h's enum rt_limit.
const (
	MaxNextHops = int(rtxdpRtLimitRT_MAX_NEXTHOPS)
	MaxNHGroups = int(rtxdpRtLimitRT_MAX_NHGROUPS)
	// MaxPorts is the most external ports a back-end's maps are sized
	// for (max_ports): one per VLAN id inside, dist.MaxRouterPorts.
	MaxPorts = int(rtxdpRtLimitRT_MAX_PORTS)
	// DefaultPorts sizes them when the config does not.
	DefaultPorts = int(rtxdpRtLimitRT_PORTS)
	MaxACL       = int(rtxdpRtLimitRT_MAX_ACL)
	// MaxNeighbors is each family's neighbour table (rt_neighbors,
	// rt_neighbors6).
	MaxNeighbors = int(rtxdpRtLimitRT_MAX_NEIGHBORS)
	ECMPMax      = int(rtxdpRtLimitRT_ECMP_MAX)
)

// Dataplane is the loaded router program, its maps, and the FIB over its
// mmapped arrays.
type Dataplane struct {
	objs  rtxdpObjects
	FIB   *FIB
	FIB6  *FIB6
	mmaps [][]byte
	// Ports is how many external ports rt_ports holds (Sizes.Ports).
	Ports int
	// Reused says the maps were pinned already: the FIB arrays hold what a
	// previous agent left (see Agent.adopt); else they are empty.
	Reused bool
	// Migrated are the pinned maps of an older layout the load migrated.
	Migrated []xdp.Migrated
}

// DefaultFIB6Lines is the IPv6 FIB's pool of 64-byte lines when the
// config does not size it: 16 MiB (docs/router.md says what a table
// needs).
const DefaultFIB6Lines = int(rtxdpRtLimitRT6LINES)

// Sizes are the data path's maps sized at load, from the config; 0 takes
// the default.
type Sizes struct {
	// FIB6Lines is the IPv6 FIB's pool of 64-byte lines (allocated whole;
	// DefaultFIB6Lines).
	FIB6Lines int
	// Ports is how many external ports rt_ports holds (DefaultPorts, at
	// most MaxPorts).
	Ports int
}

// LayoutVersion is the layout of the back-end's pinned maps: bumped with
// every change to one of them (a field, a size), so that an upgrade
// migrates them and a downgrade is refused (internal/xdp.Load).
// TestLayoutVersion holds it to the maps' layouts.
const LayoutVersion = 1

// resizableMaps are the maps the config sizes.
var resizableMaps = []string{rtxdpMapRt6Pool, rtxdpMapRtPorts}

// nextLayout is 1 in a test build of the next layout (layout_next.go).
var nextLayout uint32

// MapLayout is this build's layout of the pinned maps: LayoutVersion,
// or the next one in a test build of it.
func MapLayout() uint32 { return LayoutVersion + nextLayout }

// LoadDataplane loads the program, its maps sized as sizes says; with
// pinDir, maps are pinned there and maps already pinned are reused (a
// restarted agent adopts the FIB the data path is using; its depths are
// rebuilt from the routes it reloads). A pinned map of an older layout
// is migrated; over a later build's maps the load is refused unless
// force. The maps the config sizes start empty if made smaller.
func LoadDataplane(pinDir string, sizes Sizes, force bool) (*Dataplane, error) {
	spec, err := loadRtxdp()
	if err != nil {
		return nil, fmt.Errorf("load router program: %w", err)
	}
	fib6Lines := cmp.Or(sizes.FIB6Lines, DefaultFIB6Lines)
	ports := cmp.Or(sizes.Ports, DefaultPorts)
	if fib6Lines < 2 || ports < 0 || ports > MaxPorts {
		return nil, fmt.Errorf("load router program: %d IPv6 FIB lines, %d ports (at most %d)", fib6Lines, ports, MaxPorts)
	}
	spec.Maps[rtxdpMapRt6Pool].MaxEntries = uint32(fib6Lines)
	spec.Maps[rtxdpMapRtPorts].MaxEntries = uint32(ports)
	d := &Dataplane{Ports: ports}
	if pinDir != "" {
		_, err := os.Stat(filepath.Join(pinDir, "rt_tbl24"))
		d.Reused = err == nil
	}
	if nextLayout > 0 {
		spec.Maps[rtxdpMapRtNeighbors].ValueSize += 8
	}
	o := xdp.LoadOptions{Layout: MapLayout(), Force: force, Resizable: resizableMaps}
	if d.Migrated, err = xdp.Load(spec, &d.objs, pinDir, o); err != nil {
		return nil, fmt.Errorf("load router program: %w", err)
	}
	t24, err := d.mmap(d.objs.RtTbl24, Tbl24Entries)
	if err != nil {
		d.Close()
		return nil, err
	}
	t8, err := d.mmap(d.objs.RtTbl8, Tbl8Groups*256)
	if err != nil {
		d.Close()
		return nil, err
	}
	if d.FIB, err = NewFIB(t24, t8); err != nil {
		d.Close()
		return nil, err
	}
	t16, err := d.mmap(d.objs.Rt6Tbl16, int(rtxdpRtLimitRT6TBL16ENTRIES))
	if err != nil {
		d.Close()
		return nil, err
	}
	g6, err := d.mmap(d.objs.Rt6Pool, fib6Lines*fib6LineWords)
	if err != nil {
		d.Close()
		return nil, err
	}
	if d.FIB6, err = NewFIB6(16, t16, g6); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// mmap maps an mmapable array of n u32 entries into this process.
func (d *Dataplane) mmap(m *ebpf.Map, n int) ([]uint32, error) {
	w, b, err := xdp.MmapWords(m, n)
	if err != nil {
		return nil, err
	}
	d.mmaps = append(d.mmaps, b)
	return w, nil
}

// Program is the XDP program.
func (d *Dataplane) Program() *ebpf.Program { return d.objs.Router }

// Attach attaches the program to the interconnect port in native mode.
func (d *Dataplane) Attach(ifindex int) (link.Link, error) {
	return xdp.Attach(d.objs.Router, ifindex)
}

// SetConfig sets the back-end's own MAC on the interconnect and the
// number of ACL rules in force.
func (d *Dataplane) SetConfig(mac net.HardwareAddr, nACL int) error {
	c := rtxdpRtConfig{AclRules: uint16(nACL)}
	copy(c.Mac[:], mac)
	return d.objs.RtCfg.Put(uint32(0), &c)
}

// SetCap sets the back-end's capacity to pps frames a second (0: no cap),
// its bucket full.
func (d *Dataplane) SetCap(pps uint64) error {
	var c rtxdpMsrCap
	c.IntervalNs, c.ToleranceNs = element.CapTiming(pps)
	if err := d.objs.RtCap.Put(uint32(0), &c); err != nil {
		return fmt.Errorf("set capacity: %w", err)
	}
	return nil
}

// Port is an external port of the router as a back-end sees it.
type Port struct {
	Index uint16
	VLAN  uint16
	MTU   uint16
	Addr  netip.Prefix
	Addr6 netip.Prefix // none: no global IPv6 address
}

// SetPort writes one external port.
func (d *Dataplane) SetPort(p Port) error {
	if int(p.Index) >= d.Ports {
		return fmt.Errorf("port index %d, at most %d (max_ports)", p.Index, d.Ports-1)
	}
	v := rtxdpRtPort{Vlan: p.VLAN, Mtu: p.MTU}
	if p.Addr.IsValid() {
		v.Addr = be32(p.Addr.Addr())
	}
	return d.objs.RtPorts.Put(uint32(p.Index), &v)
}

// SetURPFs sets every VLAN at once: those of ports external, each with
// its unicast RPF, every other not. Each entry is written once, from what
// it held to what it should: a frame tagged with a port's VLAN never finds
// it cleared on the way (an agent started again on a running data path,
// a change of ports).
func (d *Dataplane) SetURPFs(ports map[uint16]dist.URPFMode) error {
	keys := make([]uint32, 4096)
	vals := make([]rtxdpRtVlan, len(keys))
	for i := range keys {
		keys[i] = uint32(i)
		if m, ok := ports[uint16(i)]; ok && i > 0 && i < 4095 {
			if m > dist.URPFStrict {
				return fmt.Errorf("uRPF %v on VLAN %d", m, i)
			}
			vals[i] = rtxdpRtVlan{External: 1, Urpf: uint8(m)}
		}
	}
	_, err := d.objs.RtVlans.BatchUpdate(keys, vals, nil)
	return err
}

// SetNextHop writes next hop id: gateway (invalid Addr: connected) and
// port.
func (d *Dataplane) SetNextHop(id uint32, gw netip.Addr, port uint16) error {
	v := rtxdpRtNexthop{Port: port}
	switch {
	case gw.Is4():
		v.Gw = be32(gw)
	case gw.Is6():
		v.Gw6 = gw.As16()
	}
	return d.objs.RtNexthops.Put(id, &v)
}

// SetGroup writes next-hop group id: the next hops ECMP chooses among.
func (d *Dataplane) SetGroup(id uint32, nhs []uint32) error {
	if len(nhs) == 0 || len(nhs) > ECMPMax {
		return fmt.Errorf("group %d: %d next hops, 1 to %d", id, len(nhs), ECMPMax)
	}
	v := rtxdpRtNhgroup{Count: uint32(len(nhs))}
	copy(v.Nh[:], nhs)
	return d.objs.RtNhgroups.Put(id, &v)
}

// SetNeighbor records (or with a nil MAC removes) a neighbour's MAC.
func (d *Dataplane) SetNeighbor(ip netip.Addr, vlan uint16, mac net.HardwareAddr) error {
	var k any
	m := d.objs.RtNeighbors
	if ip.Is6() {
		k, m = &rtxdpRtNeigh6Key{Ip: ip.As16(), Vlan: vlan}, d.objs.RtNeighbors6
	} else {
		k = &rtxdpRtNeighKey{Ip: be32(ip), Vlan: vlan}
	}
	if mac == nil {
		err := m.Delete(k)
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		return err
	}
	// The MAC first, the rest of the layout's entry zero.
	v := make([]byte, m.ValueSize())
	copy(v, mac)
	return m.Put(k, v)
}

// Local address kinds (enum rt_local_kind).
const (
	LocalRouter = uint32(rtxdpRtLocalKindRT_LOCAL_ROUTER)
	LocalHost   = uint32(rtxdpRtLocalKindRT_LOCAL_HOST)
)

// SetInfra writes the router's inside (rt_infra, bpf/infra.h).
func (d *Dataplane) SetInfra(ps []netip.Prefix) error {
	return d.objs.RtInfra.Put(uint32(0), xdp.Infra(ps))
}

// SetLocal marks an address as the router's or this host's.
func (d *Dataplane) SetLocal(a netip.Addr, kind uint32) error {
	if a.Is6() {
		return d.objs.RtLocal6.Put(a.As16(), kind)
	}
	return d.objs.RtLocal.Put(be32(a), kind)
}

// ACLRule is one rule of the ordered ACL.
type ACLRule struct {
	Src, Dst         netip.Prefix // invalid: any
	Proto            uint8        // 0: any
	Deny             bool
	SportLo, SportHi uint16
	DportLo, DportHi uint16
}

// SetACL writes the rules in order and then the count in force. A rule's
// family is its prefixes': IPv4, IPv6, or with none both.
func (d *Dataplane) SetACL(mac net.HardwareAddr, rules []ACLRule) error {
	if len(rules) > MaxACL {
		return fmt.Errorf("%d ACL rules, at most %d", len(rules), MaxACL)
	}
	for i, r := range rules {
		v := rtxdpRtAclRule{Proto: r.Proto, Action: uint8(rtxdpRtAclActionRT_ACL_PERMIT), SportLo: r.SportLo, SportHi: r.SportHi, DportLo: r.DportLo, DportHi: r.DportHi}
		if r.Deny {
			v.Action = uint8(rtxdpRtAclActionRT_ACL_DENY)
		}
		v.Family = uint8(r.Family())
		if v.Family == 6 {
			v.Src6, v.Src6Mask = prefixMask6(r.Src)
			v.Dst6, v.Dst6Mask = prefixMask6(r.Dst)
		} else {
			v.Src, v.SrcMask = prefixMask(r.Src)
			v.Dst, v.DstMask = prefixMask(r.Dst)
		}
		if err := d.objs.RtAcl.Put(uint32(i), &v); err != nil {
			return err
		}
	}
	return d.SetConfig(mac, len(rules))
}

// Family is the rule's address family, 4 or 6, by its prefixes; 0 (both)
// without any.
func (r ACLRule) Family() int {
	for _, p := range []netip.Prefix{r.Src, r.Dst} {
		if p.IsValid() {
			if p.Addr().Is6() {
				return 6
			}
			return 4
		}
	}
	return 0
}

func prefixMask(p netip.Prefix) (uint32, uint32) {
	if !p.IsValid() || p.Bits() == 0 {
		return 0, 0
	}
	m := ^uint32(0) << (32 - p.Bits())
	mb := netip.AddrFrom4([4]byte{byte(m >> 24), byte(m >> 16), byte(m >> 8), byte(m)})
	return be32(p.Masked().Addr()), be32(mb)
}

// prefixMask6 is an IPv6 prefix and its mask as four words each, as the
// data path compares them (network-order bytes in host-order words).
func prefixMask6(p netip.Prefix) (addr, mask [4]uint32) {
	if !p.IsValid() || p.Bits() == 0 {
		return
	}
	a := p.Masked().Addr().As16()
	var m [16]byte
	for i := 0; i < p.Bits(); i++ {
		m[i/8] |= 0x80 >> (i % 8)
	}
	for i := range 4 {
		addr[i] = binary.LittleEndian.Uint32(a[4*i:])
		mask[i] = binary.LittleEndian.Uint32(m[4*i:])
	}
	return
}

// SlowNames and DropNames name the counters, by enum rt_slow and rt_drop.
var (
	SlowNames = [...]string{"arp", "ttl", "no_route", "frag_needed", "fragment", "local", "options", "unresolved", "ndp", "acl"}
	DropNames = [...]string{"runt", "not_ours", "bad_version", "bad_ihl", "bad_length", "bad_checksum",
		"martian_src", "martian_dst", "acl", "tagged", "not_ip", "bad_nexthop", "cap", "infra", "urpf"}
)

// Counters are the back-end's data path counters, summed over the CPUs:
// frames in, forwarded, passed to the agent and reflected; the slow
// path's reasons, and those over their rate; the drops by reason; each
// ACL rule's permits and denials. RxPerCPU and ForwardedPerCPU are the
// frames in and forwarded by CPU.
type Counters struct {
	RxPackets, RxBytes, Forwarded, ForwardedBytes, Passed, Probes uint64
	Slow, SlowDropped, Drops                                      map[string]uint64
	ACLPermit, ACLDeny, RxPerCPU, ForwardedPerCPU                 []uint64
}

// Stats reads the counters, of the first nACL ACL rules.
func (d *Dataplane) Stats(nACL int) (*Counters, error) {
	var per []rtxdpRtStats
	if err := d.objs.RtCounters.Lookup(uint32(0), &per); err != nil {
		return nil, err
	}
	s := &Counters{Slow: map[string]uint64{}, SlowDropped: map[string]uint64{}, Drops: map[string]uint64{}, ACLPermit: make([]uint64, nACL), ACLDeny: make([]uint64, nACL)}
	for _, c := range per {
		s.RxPerCPU = append(s.RxPerCPU, c.RxPackets)
		s.ForwardedPerCPU = append(s.ForwardedPerCPU, c.Forwarded)
		s.RxPackets += c.RxPackets
		s.RxBytes += c.RxBytes
		s.Forwarded += c.Forwarded
		s.ForwardedBytes += c.ForwardedBytes
		s.Passed += c.Passed
		s.Probes += c.Probes
		xdp.AddByName(s.Slow, SlowNames[:], c.Slow[:])
		xdp.AddByName(s.SlowDropped, SlowNames[:], c.SlowDrop[:])
		xdp.AddByName(s.Drops, DropNames[:], c.Drop[:])
		for i := 0; i < nACL; i++ {
			s.ACLPermit[i] += c.AclPermit[i]
			s.ACLDeny[i] += c.AclDeny[i]
		}
	}
	return s, nil
}

// api is the counters as the back-end's API gives them (nil: none read).
func (c *Counters) api() *routerapi.Stats {
	if c == nil {
		return nil
	}
	return &routerapi.Stats{RxPackets: c.RxPackets, RxBytes: c.RxBytes, Forwarded: c.Forwarded, ForwardedBytes: c.ForwardedBytes, Passed: c.Passed,
		Probes: c.Probes, Slow: c.Slow, SlowDropped: c.SlowDropped, Drops: c.Drops, ACLPermit: c.ACLPermit, ACLDeny: c.ACLDeny, RxPerCPU: c.RxPerCPU}
}

// SlowReader opens the slow-path event stream, slowBufferBytes a CPU.
func (d *Dataplane) SlowReader() (*perf.Reader, error) {
	return perf.NewReader(d.objs.RtSlowpath, slowBufferBytes)
}

// slowBufferBytes is each CPU's room for the slow path's frames: what the
// agent holds for one neighbour it asks for (holdBytes) fits in one CPU's
// buffer, so a burst to a neighbour not yet resolved meets the agent's
// own limit, counted held_dropped, before the channel's (slow_lost)
// (docs/reliability.md, finding 41).
const slowBufferBytes = 256 << 10

// Close unmaps the FIB and releases the program and maps.
func (d *Dataplane) Close() error {
	for _, b := range d.mmaps {
		unix.Munmap(b)
	}
	d.mmaps = nil
	return d.objs.Close()
}

// be32 is an address as the data path stores it: network order bytes in a
// host-order u32.
func be32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
