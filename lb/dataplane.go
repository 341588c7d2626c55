// Package lb is msr's front-end load balancer: the XDP data path of
// bpf/lb.bpf.c (the packet processor's modules: classifier, Ext ARP, Int
// ARP, Virtual-CP, Int-to-ext, DIST, Balance), the balancing tables it reads
// (weighted round-robin, hash, Maglev), a plain-Go reference model of the
// data path used by the differential tests, and the agent `msr lb`.
package lb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/perf"

	"github.com/msr-router/msr/internal/element"
	"github.com/msr-router/msr/internal/inet"
	"github.com/msr-router/msr/internal/xdp"
	"github.com/msr-router/msr/lb/lbapi"
)

// Port roles, as lb.h numbers them.
const (
	RoleUnknown  = uint8(lbxdpLbPortRoleLB_PORT_UNKNOWN)
	RoleExternal = uint8(lbxdpLbPortRoleLB_PORT_EXTERNAL)
	RoleInternal = uint8(lbxdpLbPortRoleLB_PORT_INTERNAL)
)

// Router address flags (lb_router_addrs values, enum lb_addr_flag).
const (
	AddrRouter = uint32(lbxdpLbAddrFlagLB_ADDR_ROUTER)
	AddrMgmt   = uint32(lbxdpLbAddrFlagLB_ADDR_MGMT)
)

// Port is one port of the LB as the data path sees it.
type Port struct {
	Ifindex int
	Index   uint8 // 0..MaxPorts-1, unique per LB
	Role    uint8
	MAC     net.HardwareAddr
	VLAN    uint16     // external ports
	Addr    netip.Addr // external ports: the address Ext ARP answers for
	// Addr6 is an external port's global IPv6 address, which Ext NDP
	// answers for besides the port's link-local one (inet.LinkLocal of
	// its MAC); invalid: none.
	Addr6 netip.Addr
	// URPF: an external port whose frames are balanced tagged with its
	// VLAN, for the back-end's unicast RPF check.
	URPF bool
	// SampleRate: an external port's frames in, 1 in SampleRate sampled
	// for sFlow (0: none).
	SampleRate uint32
}

// MaxPorts is LB_MAX_PORTS (enum lb_limit).
const MaxPorts = int(lbxdpLbLimitLB_MAX_PORTS)

// Dataplane is the loaded LB program and its maps.
type Dataplane struct {
	objs lbxdpObjects
	// cfgMu serializes the read-modify-writes of lb_cfg (updateConfig).
	cfgMu sync.Mutex
	// installMu serializes InstallTable; flipped is when it last swapped
	// the tables.
	installMu sync.Mutex
	flipped   time.Time
	// Migrated are the pinned maps of an older layout the load migrated.
	Migrated []xdp.Migrated
}

// tableReuseDelay is how long a balancing table that was just swapped out
// is left alone before it is rewritten: an XDP program that read the old
// active_table finishes with it within microseconds. The next install
// waits it out before it writes, so that an install returns as soon as
// its table is the active one (the time a back-end left the table, which
// the agent reports).
const tableReuseDelay = 50 * time.Millisecond

// LayoutVersion is the layout of the LB's pinned maps: bumped with every
// change to one of them, so that an upgrade migrates them and a
// downgrade is refused (internal/xdp.Load). TestLayoutVersion holds it
// to the maps' layouts.
const LayoutVersion = 2

// LoadDataplane loads the program. With pinDir set, maps are pinned there
// and maps already pinned there are reused: a restarted agent adopts the
// running state (ports, tables, counters) instead of starting empty. A
// pinned map of an older layout is migrated; over a later build's maps
// the load is refused unless force.
func LoadDataplane(pinDir string, force bool) (*Dataplane, error) {
	spec, err := loadLbxdp()
	if err != nil {
		return nil, fmt.Errorf("load lb program: %w", err)
	}
	d := &Dataplane{}
	if d.Migrated, err = xdp.Load(spec, &d.objs, pinDir, xdp.LoadOptions{Layout: LayoutVersion, Force: force}); err != nil {
		return nil, fmt.Errorf("load lb program: %w", err)
	}
	if err := d.seedRoundRobin(); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// seedRoundRobin starts every CPU's round robin (lb_rr) at a random slot.
// Started at 0 on every LB and CPU, their first picks coincide: in flowlet
// mode, 64 LBs' long flows that never pause all start on the same few
// back-ends (msr sim: the busiest at 126 times the mean of 512 with 1,000
// heavy-tailed flows). Seeded, they spread as hash spreads them. A
// restarted agent seeds again: any point of the cycle is as good.
func (d *Dataplane) seedRoundRobin() error {
	n, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	start := make([]uint32, n)
	for i := range start {
		start[i] = rand.Uint32()
	}
	if err := d.objs.LbRr.Put(uint32(0), start); err != nil {
		return fmt.Errorf("seed the round robin: %w", err)
	}
	return nil
}

// Program is the XDP program, to attach to every port.
func (d *Dataplane) Program() *ebpf.Program { return d.objs.Lb }

// Attach attaches the program to an interface in native mode.
func (d *Dataplane) Attach(ifindex int) (link.Link, error) {
	return xdp.Attach(d.objs.Lb, ifindex)
}

// SetPort installs or updates a port: its role and addresses, its MAC as
// one of the LB's own, and for an external port its VLAN.
func (d *Dataplane) SetPort(p Port) error {
	if int(p.Index) >= MaxPorts || len(p.MAC) != 6 {
		return fmt.Errorf("port %d: index must be below %d and MAC 6 bytes", p.Ifindex, MaxPorts)
	}
	v := lbxdpLbPort{Role: p.Role, Index: p.Index, Vlan: p.VLAN}
	if p.URPF && p.Role == RoleExternal {
		v.Urpf = 1
	}
	copy(v.Mac[:], p.MAC)
	if p.Addr.Is4() {
		v.Ip = be32(p.Addr)
	}
	if p.Role == RoleExternal {
		if p.Addr6.Is6() {
			v.Ip6 = in6(p.Addr6)
		}
		v.Ll6 = in6(inet.LinkLocal(p.MAC))
		v.SampleRate = p.SampleRate
	}
	if err := d.objs.LbPorts.Put(uint32(p.Ifindex), &v); err != nil {
		return fmt.Errorf("set port %d: %w", p.Ifindex, err)
	}
	if err := d.objs.LbOwnMacs.Put(macKey(p.MAC), uint32(p.Ifindex)); err != nil {
		return fmt.Errorf("set port %d MAC: %w", p.Ifindex, err)
	}
	if p.Role == RoleExternal && p.VLAN != 0 {
		if err := d.objs.LbVlans.Put(uint32(p.VLAN), lbxdpLbEgress{Ifindex: uint32(p.Ifindex), Index: uint32(p.Index)}); err != nil {
			return fmt.Errorf("set VLAN %d: %w", p.VLAN, err)
		}
	}
	return nil
}

// ClearVLAN forgets which port owns a VLAN (after a port's VLAN changed).
func (d *Dataplane) ClearVLAN(vlan uint16) error {
	return d.objs.LbVlans.Put(uint32(vlan), lbxdpLbEgress{})
}

// SetRouterAddr marks an address as the router's (AddrRouter) or as its
// management address (AddrMgmt); 0 removes it.
func (d *Dataplane) SetRouterAddr(a netip.Addr, flags uint32) error {
	if a.Is6() && !a.Is4In6() {
		k := lbxdpLbAddr6{Addr: in6(a)}
		if flags == 0 {
			err := d.objs.LbRouterAddrs6.Delete(&k)
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				return nil
			}
			return err
		}
		return d.objs.LbRouterAddrs6.Put(&k, flags)
	}
	if !a.Is4() {
		return fmt.Errorf("router address %s is neither IPv4 nor IPv6", a)
	}
	if flags == 0 {
		err := d.objs.LbRouterAddrs.Delete(be32(a))
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		return err
	}
	return d.objs.LbRouterAddrs.Put(be32(a), flags)
}

// SetInfra writes the router's inside (lb_infra, bpf/infra.h).
func (d *Dataplane) SetInfra(ps []netip.Prefix) error {
	return d.objs.LbInfra.Put(uint32(0), xdp.Infra(ps))
}

// Config is the LB-wide part of the data path's configuration.
type Config struct {
	VCPMAC            net.HardwareAddr // nil: no VCP known
	DefaultIntIfindex int
	ManagementAddr    netip.Addr
	// FlowletGap ends a flowlet in flowlet mode (whole microseconds).
	FlowletGap time.Duration
	// FlowLabel hashes an IPv6 packet's flow label, where it is not
	// zero, in place of its ports (RFC 6438).
	FlowLabel bool
	// PoliceSeed keys the policing buckets' hash; 0 (the agent's): keep
	// the data path's own, drawn at random when it has none (the model
	// takes it from Dataplane.PoliceSeed).
	PoliceSeed uint32
}

// MaxFlowletGap is the longest flowlet gap lb_config holds (a u32 of
// microseconds).
const MaxFlowletGap = time.Duration(math.MaxUint32) * time.Microsecond

// flowletGapUs is a flowlet gap as lb_config holds it: whole
// microseconds, at most MaxFlowletGap.
func flowletGapUs(gap time.Duration) uint32 {
	return uint32(min(gap, MaxFlowletGap) / time.Microsecond)
}

// SetConfig writes the LB-wide configuration, keeping the active table.
func (d *Dataplane) SetConfig(c Config) error {
	return d.updateConfig(func(cur *lbxdpLbConfig) {
		cur.HasVcp = 0
		cur.VcpMac = [6]uint8{}
		if len(c.VCPMAC) == 6 {
			cur.HasVcp = 1
			copy(cur.VcpMac[:], c.VCPMAC)
		}
		cur.DefaultIntIfindex = uint32(c.DefaultIntIfindex)
		cur.FlowletGapUs = flowletGapUs(c.FlowletGap)
		cur.FlowLabel = 0
		if c.FlowLabel {
			cur.FlowLabel = 1
		}
		cur.MgmtIp = 0
		if c.ManagementAddr.Is4() {
			cur.MgmtIp = be32(c.ManagementAddr)
		}
		if c.PoliceSeed != 0 {
			cur.PoliceSeed = c.PoliceSeed
		}
		for cur.PoliceSeed == 0 {
			cur.PoliceSeed = rand.Uint32() // ChaCha8, seeded by the OS
		}
	})
}

// PoliceSeed is the policing buckets' hash key in lb_cfg (0 before the
// first SetConfig).
func (d *Dataplane) PoliceSeed() (uint32, error) {
	var cur lbxdpLbConfig
	err := d.objs.LbCfg.Lookup(uint32(0), &cur)
	return cur.PoliceSeed, err
}

// updateConfig changes lb_cfg with change, under cfgMu: the table's flip,
// the LB-wide config and the measured flowlet gap each write their own
// fields and keep the others'.
func (d *Dataplane) updateConfig(change func(*lbxdpLbConfig)) error {
	d.cfgMu.Lock()
	defer d.cfgMu.Unlock()
	var cur lbxdpLbConfig
	if err := d.objs.LbCfg.Lookup(uint32(0), &cur); err != nil {
		return err
	}
	change(&cur)
	return d.objs.LbCfg.Put(uint32(0), &cur)
}

// CapElement and CapPort name lb_caps's entries: the LB's own capacity, and
// port index i's at CapPort + i.
const (
	CapElement = uint32(lbxdpLbLimitLB_CAP_ELEMENT)
	CapPort    = uint32(lbxdpLbLimitLB_CAP_PORT)
)

// SetCap sets lb_caps[i] to pps frames a second (0: no cap), its bucket
// full.
func (d *Dataplane) SetCap(i uint32, pps uint64) error {
	var c lbxdpMsrCap
	c.IntervalNs, c.ToleranceNs = element.CapTiming(pps)
	if err := d.objs.LbCaps.Put(i, &c); err != nil {
		return fmt.Errorf("set capacity %d: %w", i, err)
	}
	return nil
}

// InstallTable writes a balancing table into the idle table map and makes
// it active with one write of lb_cfg.active_table: a packet sees either
// the whole old table or the whole new one.
func (d *Dataplane) InstallTable(t *Table) error {
	d.installMu.Lock()
	defer d.installMu.Unlock()
	// The idle table is the one swapped out last: a packet in flight may
	// still read it for a while after.
	if wait := tableReuseDelay - time.Since(d.flipped); wait > 0 {
		time.Sleep(wait)
	}
	d.cfgMu.Lock()
	var cfg lbxdpLbConfig
	err := d.objs.LbCfg.Lookup(uint32(0), &cfg)
	d.cfgMu.Unlock()
	if err != nil {
		return err
	}
	idle := uint32(cfg.ActiveTable^1) & 1
	m := d.objs.LbTable0
	if idle == 1 {
		m = d.objs.LbTable1
	}
	if len(t.Slots) > TableSlots {
		return fmt.Errorf("table of %d slots, at most %d", len(t.Slots), TableSlots)
	}
	keys := make([]uint32, len(t.Slots))
	vals := make([]lbxdpLbSlot, len(t.Slots))
	for i, s := range t.Slots {
		keys[i] = uint32(i)
		vals[i] = lbxdpLbSlot{Index: uint16(s.PortIndex), Ifindex: uint32(s.Ifindex)}
		copy(vals[i].Mac[:], s.MAC)
	}
	if len(keys) > 0 {
		if _, err := m.BatchUpdate(keys, vals, nil); err != nil {
			return fmt.Errorf("write balancing table: %w", err)
		}
	}
	if err := d.objs.LbTables.Put(idle, lbxdpLbTableMeta{Len: uint32(len(t.Slots)), Mode: uint32(t.Mode)}); err != nil {
		return err
	}
	if err := d.flipTable(uint8(idle)); err != nil {
		return err
	}
	d.flipped = time.Now()
	return nil
}

// ActiveTable reads back the table the data path is using: the one a
// previous run of the agent installed, when the maps were pinned.
func (d *Dataplane) ActiveTable() (*Table, error) {
	d.cfgMu.Lock()
	var cfg lbxdpLbConfig
	err := d.objs.LbCfg.Lookup(uint32(0), &cfg)
	d.cfgMu.Unlock()
	if err != nil {
		return nil, err
	}
	active := uint32(cfg.ActiveTable) & 1
	var meta lbxdpLbTableMeta
	if err := d.objs.LbTables.Lookup(active, &meta); err != nil {
		return nil, err
	}
	if int(meta.Len) > TableSlots {
		return nil, fmt.Errorf("active table of %d slots, at most %d", meta.Len, TableSlots)
	}
	m := d.objs.LbTable0
	if active == 1 {
		m = d.objs.LbTable1
	}
	t := &Table{Mode: Mode(meta.Mode), Slots: make([]Slot, meta.Len)}
	var v lbxdpLbSlot
	for i := range t.Slots {
		if err := m.Lookup(uint32(i), &v); err != nil {
			return nil, fmt.Errorf("slot %d: %w", i, err)
		}
		mac := make(net.HardwareAddr, 6)
		copy(mac, v.Mac[:])
		t.Slots[i] = Slot{MAC: mac, Ifindex: int(v.Ifindex), PortIndex: uint8(v.Index)}
	}
	return t, nil
}

func (d *Dataplane) flipTable(active uint8) error {
	return d.updateConfig(func(cur *lbxdpLbConfig) { cur.ActiveTable = active })
}

// SetFlowletGap writes flowlet mode's gap alone (the measured one).
func (d *Dataplane) SetFlowletGap(gap time.Duration) error {
	return d.updateConfig(func(cur *lbxdpLbConfig) { cur.FlowletGapUs = flowletGapUs(gap) })
}

// PortCounters are a port's counters, summed over the CPUs: its frames
// and bytes, what each module of Table 1 took, and the drops by reason;
// and the frames it received and sent by CPU.
type PortCounters struct {
	RxPackets, RxBytes, TxPackets, TxBytes uint64
	Modules, Drops                         map[string]uint64
	RxPerCPU, TxPerCPU                     []uint64
}

// Stats reads the counters of the port with the given index.
func (d *Dataplane) Stats(index uint8) (*PortCounters, error) {
	var per []lbxdpLbPortStats
	if err := d.objs.LbStats.Lookup(uint32(index), &per); err != nil {
		return nil, fmt.Errorf("read port %d counters: %w", index, err)
	}
	s := &PortCounters{Modules: map[string]uint64{}, Drops: map[string]uint64{}}
	for _, c := range per {
		s.RxPerCPU = append(s.RxPerCPU, c.RxPackets)
		s.TxPerCPU = append(s.TxPerCPU, c.TxPackets)
		s.RxPackets += c.RxPackets
		s.RxBytes += c.RxBytes
		s.TxPackets += c.TxPackets
		s.TxBytes += c.TxBytes
		xdp.AddByName(s.Modules, ModuleNames[:], c.Module[:])
		xdp.AddByName(s.Drops, DropNames[:], c.Drop[:])
	}
	return s, nil
}

// api is the counters as the LB's API gives them (nil: none read).
func (c *PortCounters) api() *lbapi.PortStats {
	if c == nil {
		return nil
	}
	return &lbapi.PortStats{RxPackets: c.RxPackets, RxBytes: c.RxBytes, TxPackets: c.TxPackets, TxBytes: c.TxBytes, Modules: c.Modules, Drops: c.Drops, RxPerCPU: c.RxPerCPU}
}

// Run processes one frame as if it arrived on the port ifindex
// (BPF_PROG_RUN: nothing is sent) and returns the verdict and the frame as
// it would leave.
func (d *Dataplane) Run(ifindex int, frame []byte) (int, []byte, error) {
	opts := &ebpf.RunOptions{
		Data: frame, DataOut: make([]byte, len(frame)+128),
		Context: lbxdpXdpMd{DataEnd: uint32(len(frame)), IngressIfindex: uint32(ifindex)},
	}
	ret, err := d.objs.Lb.Run(opts)
	return int(ret), opts.DataOut, err
}

// Close releases the program and maps (pinned maps stay pinned).
func (d *Dataplane) Close() error { return d.objs.Close() }

// SetSampleRate samples 1 in rate of the frames into the external port
// ifindex (0: none), the port otherwise as it is.
func (d *Dataplane) SetSampleRate(ifindex int, rate uint32) error {
	var v lbxdpLbPort
	if err := d.objs.LbPorts.Lookup(uint32(ifindex), &v); err != nil {
		return fmt.Errorf("port %d: %w", ifindex, err)
	}
	v.SampleRate = rate
	return d.objs.LbPorts.Put(uint32(ifindex), &v)
}

// SampleReader opens the stream of sFlow's sampled frames (lb_samples),
// sampleBufferBytes a CPU: each record the port and length (ParseSample)
// and the frame's first bytes. The data path wakes the reader every
// SampleWakeup samples, not at each: a wakeup is an interrupt the CPU
// sends itself, on these VMs an exit to the hypervisor, and at 1 in 1,000
// one a sample cost the LB 14 ns a frame (10%; 2 ns with a wakeup every
// 16). A reader that must not wait for the 16th calls Flush.
func (d *Dataplane) SampleReader() (*perf.Reader, error) {
	return perf.NewReaderWithOptions(d.objs.LbSamples, sampleBufferBytes, perf.ReaderOptions{WakeupEvents: SampleWakeup})
}

// SampleWakeup is how many samples a CPU gathers before it wakes the
// reader.
const SampleWakeup = 16

// sampleBufferBytes is each CPU's room for samples: at 1 in 1000 of a
// million frames a second, 1,000 samples of about 150 bytes a second,
// over a second's worth, which the agent reads in milliseconds.
const sampleBufferBytes = 256 << 10

// SampleHeader is the most of a sampled frame the data path sends.
const SampleHeader = int(lbxdpLbLimitLB_SAMPLE_HEADER)

// ParseSample reads a sampled frame's record: the port index it came in
// by, its length without the FCS, and its first bytes.
func ParseSample(raw []byte) (port uint8, frameLen uint32, header []byte, err error) {
	const meta = 8 // struct lb_sample
	if len(raw) < meta {
		return 0, 0, nil, fmt.Errorf("sample of %d bytes: shorter than its %d-byte head", len(raw), meta)
	}
	frameLen, port = binary.NativeEndian.Uint32(raw), raw[4]
	header = raw[meta:]
	return port, frameLen, header[:min(len(header), int(frameLen), SampleHeader)], nil
}

// SamplePool is port index's sampler: the frames it saw up to its last
// sample (sFlow's sample pool) and the samples
// lost for want of room, summed over the CPUs.
func (d *Dataplane) SamplePool(index uint8) (pool, drops uint64, err error) {
	var per []lbxdpLbSamplePool
	if err := d.objs.LbSamplePool.Lookup(uint32(index), &per); err != nil {
		return 0, 0, fmt.Errorf("read port %d sampler: %w", index, err)
	}
	for _, c := range per {
		pool += c.Pool
		drops += c.Drops
	}
	return pool, drops, nil
}

func be32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// in6 is an IPv6 address as the data path holds it.
func in6(a netip.Addr) lbxdpIn6Addr {
	var v lbxdpIn6Addr
	b := a.As16()
	copy(v.In6U.U6Addr8[:], b[:])
	return v
}

// macKey is lb_own_macs's key: the MAC's bytes in memory order in a u64.
func macKey(mac net.HardwareAddr) uint64 {
	var k uint64
	for i := 5; i >= 0; i-- {
		k = k<<8 | uint64(mac[i])
	}
	return k
}
