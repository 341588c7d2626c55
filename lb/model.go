package lb

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/flow"
)

// This file is the reference model of bpf/lb.bpf.c: the same rules written
// as plainly as possible in Go, over the same state. The differential tests
// run both on the same frames and require the same verdict, output bytes
// and counters. It is not used by the agent.

// XDP verdicts.
const (
	XDPAborted  = 0
	XDPDrop     = 1
	XDPPass     = 2
	XDPTx       = 3
	XDPRedirect = 4
)

// ModuleNames and DropNames name the counters, indexed by enum lb_module
// and enum lb_drop.
var (
	ModuleNames = [...]string{"ext_arp", "int_arp_out", "int_arp_in", "vcp", "balance", "int_to_ext", "dist",
		"ext_ndp", "int_ndp_out", "int_ndp_in"}
	DropNames = [...]string{"runt", "not_ours", "port_unknown", "dist_external", "tagged_external", "bad_arp",
		"arp_not_ours", "bad_ip", "mcast_external", "no_backend", "no_vcp", "no_rule", "own_frame",
		"untagged_internal", "vlan_not_ours", "vlan_in_vlan", "no_internal", "cap", "port_cap", "policed",
		"bad_ndp", "ndp_not_ours", "infra", "gtsm"}
)

// Model is the state the data path reads, held in plain Go.
type Model struct {
	Ports       map[int]Port // by ifindex
	RouterAddrs map[netip.Addr]uint32
	// Infra is the router's inside (lb_infra): nothing from outside
	// reaches it or comes from it.
	Infra  []netip.Prefix
	Config Config
	Table  Table
	RR     uint32
	// Flowlets are flowlet mode's flows by flow hash (lb_flowlets);
	// whoever changes Table clears them, as the kernel's flowlets of the
	// other table start anew.
	Flowlets map[uint32]ModelFlowlet
	Police   ModelPolice
	Stats    [MaxPorts]ModelStats
}

// ModelFlowlet is a flow's flowlet in the model.
type ModelFlowlet struct {
	Slot uint32
	Last time.Time
}

// ModelStats are one port's counters in the model.
type ModelStats struct {
	RxPackets, RxBytes, TxPackets, TxBytes uint64
	Module                                 [len(ModuleNames)]uint64
	Drop                                   [len(DropNames)]uint64
}

// Result is what the model does with a frame.
type Result struct {
	Verdict int
	Out     []byte // the frame as it leaves (TX, REDIRECT) or as passed
	Egress  int    // ifindex, for TX and REDIRECT
}

const (
	etherTypeIPv4 = 0x0800
	etherTypeARP  = 0x0806
	etherTypeDIST = dist.EtherType
	etherTypeQ    = 0x8100
	etherTypeQinQ = 0x88A8
)

type modelPkt struct {
	m       *Model
	ifindex int
	port    Port
	st      *ModelStats
	b       []byte
}

// Process runs one frame that arrived on ifindex through the model.
func (m *Model) Process(ifindex int, frame []byte) Result {
	port, ok := m.Ports[ifindex]
	if !ok {
		return Result{Verdict: XDPPass, Out: frame}
	}
	p := &modelPkt{m: m, ifindex: ifindex, port: port, st: &m.Stats[port.Index], b: bytes.Clone(frame)}
	p.st.RxPackets++
	p.st.RxBytes += uint64(len(frame))
	if len(p.b) < 14 {
		return p.drop(lbxdpLbDropLB_DROP_RUNT)
	}
	switch port.Role {
	case RoleExternal:
		return p.external()
	case RoleInternal:
		return p.internal()
	}
	if p.etherType() == etherTypeDIST {
		p.st.Module[6]++
		return Result{Verdict: XDPPass, Out: p.b}
	}
	return p.drop(lbxdpLbDropLB_DROP_PORT_UNKNOWN)
}

func (p *modelPkt) etherType() uint16 { return binary.BigEndian.Uint16(p.b[12:14]) }

func (p *modelPkt) drop(reason lbxdpLbDrop) Result {
	p.st.Drop[reason]++
	return Result{Verdict: XDPDrop}
}

func (p *modelPkt) module(m lbxdpLbModule) { p.st.Module[m]++ }

func (p *modelPkt) send(ifindex int, index uint8) Result {
	if int(index) < MaxPorts {
		st := &p.m.Stats[index]
		st.TxPackets++
		st.TxBytes += uint64(len(p.b))
	}
	if ifindex == p.ifindex {
		return Result{Verdict: XDPTx, Out: p.b, Egress: ifindex}
	}
	return Result{Verdict: XDPRedirect, Out: p.b, Egress: ifindex}
}

func (p *modelPkt) external() Result {
	dst := p.b[0:6]
	if dst[0]&1 == 0 && !bytes.Equal(dst, p.port.MAC) {
		return p.drop(lbxdpLbDropLB_DROP_NOT_OURS)
	}
	switch p.etherType() {
	case etherTypeARP:
		return p.arp()
	case etherTypeIPv4:
		return p.ipv4()
	case etherTypeIPv6:
		return p.ipv6()
	case etherTypeDIST:
		return p.drop(lbxdpLbDropLB_DROP_DIST_EXTERNAL)
	case etherTypeQ, etherTypeQinQ:
		return p.drop(lbxdpLbDropLB_DROP_TAGGED_EXTERNAL)
	}
	return p.drop(lbxdpLbDropLB_DROP_NO_RULE)
}

func (p *modelPkt) arp() Result {
	if len(p.b) < 14+28 {
		return p.drop(lbxdpLbDropLB_DROP_RUNT)
	}
	a := p.b[14:42]
	if binary.BigEndian.Uint16(a[0:]) != 1 || binary.BigEndian.Uint16(a[2:]) != etherTypeIPv4 || a[4] != 6 || a[5] != 4 {
		return p.drop(lbxdpLbDropLB_DROP_BAD_ARP)
	}
	switch binary.BigEndian.Uint16(a[6:]) {
	case 1:
		portIP := p.port.Addr
		tip := netip.AddrFrom4([4]byte(a[24:28]))
		if !portIP.Is4() || portIP.IsUnspecified() || tip != portIP {
			return p.drop(lbxdpLbDropLB_DROP_ARP_NOT_OURS)
		}
		copy(p.b[0:6], p.b[6:12])
		copy(p.b[6:12], p.port.MAC)
		binary.BigEndian.PutUint16(a[6:], 2)
		copy(a[18:24], a[8:14])
		copy(a[24:28], a[14:18])
		copy(a[8:14], p.port.MAC)
		ip := portIP.As4()
		copy(a[14:18], ip[:])
		p.module(lbxdpLbModuleLB_MOD_EXT_ARP)
		return p.send(p.ifindex, p.port.Index)
	case 2:
		p.module(lbxdpLbModuleLB_MOD_INT_ARP_IN)
		return p.toInside(net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	}
	return p.drop(lbxdpLbDropLB_DROP_BAD_ARP)
}

func (p *modelPkt) toInside(dst net.HardwareAddr) Result {
	cfg := p.m.Config
	in, ok := p.m.Ports[cfg.DefaultIntIfindex]
	if !ok {
		return p.drop(lbxdpLbDropLB_DROP_NO_INTERNAL)
	}
	copy(p.b[0:6], dst)
	p.tag()
	return p.send(cfg.DefaultIntIfindex, in.Index)
}

// tag is push_vlan with the ingress port's VLAN.
func (p *modelPkt) tag() {
	tagged := make([]byte, 0, len(p.b)+4)
	tagged = append(tagged, p.b[0:12]...)
	tagged = binary.BigEndian.AppendUint16(tagged, etherTypeQ)
	tagged = binary.BigEndian.AppendUint16(tagged, p.port.VLAN&0xfff)
	tagged = append(tagged, p.b[12:]...)
	p.b = tagged
}

func (p *modelPkt) ipv4() Result {
	if len(p.b) < 34 {
		return p.drop(lbxdpLbDropLB_DROP_RUNT)
	}
	ip := p.b[14:]
	ihl := int(ip[0]&0xf) * 4
	tot := int(binary.BigEndian.Uint16(ip[2:]))
	if ip[0]>>4 != 4 || ihl < 20 || tot < ihl || 14+tot > len(p.b) {
		return p.drop(lbxdpLbDropLB_DROP_BAD_IP)
	}
	proto := ip[9]
	frag := binary.BigEndian.Uint16(ip[6:])&0x3fff != 0
	var sport, dport uint16
	hasPorts := false
	if !frag && (proto == 6 || proto == 17) {
		if 14+ihl+4 > len(p.b) || ihl+4 > tot {
			return p.drop(lbxdpLbDropLB_DROP_BAD_IP)
		}
		sport = binary.BigEndian.Uint16(ip[ihl:])
		dport = binary.BigEndian.Uint16(ip[ihl+2:])
		hasPorts = true
	}
	daddr := netip.AddrFrom4([4]byte(ip[16:20]))
	if p.m.infra(netip.AddrFrom4([4]byte(ip[12:16])), daddr) {
		return p.drop(lbxdpLbDropLB_DROP_INFRA)
	}
	c := p.policeClass(proto, daddr, sport, dport, hasPorts)
	peer := p.routingPeer(c, netip.AddrFrom4([4]byte(ip[12:16])))
	if p.gtsmRefused(peer, c, dport, ip[8]) {
		return p.drop(lbxdpLbDropLB_DROP_GTSM)
	}
	if c != PoliceNone && !p.police(c, ip[12:16], peer) {
		return p.drop(lbxdpLbDropLB_DROP_POLICED)
	}
	if c <= PoliceMgmt || frag && p.m.RouterAddrs[daddr] != 0 {
		return p.toVCP()
	}
	d := binary.BigEndian.Uint32(ip[16:20])
	if p.b[0]&1 != 0 || d>>28 == 0xe || d == 0xffffffff {
		return p.drop(lbxdpLbDropLB_DROP_MCAST_EXTERNAL)
	}
	var ports uint32
	if hasPorts {
		ports = uint32(sport)<<16 | uint32(dport)
	}
	h := flow.Hash(binary.LittleEndian.Uint32(ip[12:16]), binary.LittleEndian.Uint32(ip[16:20]), ports, uint32(proto), FlowSeed)
	return p.balance(h)
}

// toVCP is lb.bpf.c's vcp.
func (p *modelPkt) toVCP() Result {
	if len(p.m.Config.VCPMAC) != 6 {
		return p.drop(lbxdpLbDropLB_DROP_NO_VCP)
	}
	p.module(lbxdpLbModuleLB_MOD_VCP)
	return p.toInside(p.m.Config.VCPMAC)
}

func (p *modelPkt) balance(hash uint32) Result {
	t := p.m.Table
	n := uint32(len(t.Slots))
	if n == 0 {
		return p.drop(lbxdpLbDropLB_DROP_NO_BACKEND)
	}
	s := t.Slots[p.m.Slot(hash, time.Now())]
	if s.Ifindex == 0 {
		return p.drop(lbxdpLbDropLB_DROP_NO_BACKEND)
	}
	via, ok := t.Via(p.b[6:12])
	if !ok || via.Ifindex == 0 {
		via = s
	}
	copy(p.b[0:6], s.MAC)
	if p.port.URPF {
		p.tag()
	}
	p.module(lbxdpLbModuleLB_MOD_BALANCE)
	return p.send(via.Ifindex, via.PortIndex)
}

// infra says whether a frame from outside from saddr to daddr touches
// the router's inside: its source there, or its destination unless that
// is an address of the router's (Table 1 takes those).
func (m *Model) infra(saddr, daddr netip.Addr) bool {
	in := func(a netip.Addr) bool {
		return slices.ContainsFunc(m.Infra, func(p netip.Prefix) bool { return p.Contains(a) })
	}
	return in(saddr) || m.RouterAddrs[daddr] == 0 && in(daddr)
}

// Slot is the slot of the table (not empty) that balance picks for a
// data frame of flow hash arriving at now: the round robin's next (WRR),
// the flow's flowlet's (flowlet), the hash's (hash, Maglev). `msr sim`
// places its packets with it, in its own clock.
func (m *Model) Slot(hash uint32, now time.Time) uint32 {
	n := uint32(len(m.Table.Slots))
	switch m.Table.Mode {
	case ModeWRR:
		return m.nextRR(n)
	case ModeFlowlet:
		return m.flowlet(hash, n, now)
	}
	return hash % n
}

func (m *Model) nextRR(n uint32) uint32 {
	idx := m.RR % n
	m.RR = idx + 1
	return idx
}

// flowlet is bpf/lb.bpf.c's flowlet: the flow's slot while it keeps
// within the gap, else the round-robin's next.
func (m *Model) flowlet(hash, n uint32, t time.Time) uint32 {
	gap := time.Duration(flowletGapUs(m.Config.FlowletGap)) * time.Microsecond
	if f, ok := m.Flowlets[hash]; ok && f.Slot < n && t.Sub(f.Last) <= gap {
		m.Flowlets[hash] = ModelFlowlet{Slot: f.Slot, Last: t}
		return f.Slot
	}
	idx := m.nextRR(n)
	if m.Flowlets == nil {
		m.Flowlets = map[uint32]ModelFlowlet{}
	}
	m.Flowlets[hash] = ModelFlowlet{Slot: idx, Last: t}
	return idx
}

// Via is the slot whose internal port the LB sends a frame from the
// source MAC src out of (bpf/lb.bpf.c, balance: one outside host's frames
// always enter the switch by the same port); false for an empty table.
func (t *Table) Via(src []byte) (Slot, bool) {
	if len(t.Slots) == 0 || len(src) < 6 {
		return Slot{}, false
	}
	return t.Slots[macHash(src)%uint32(len(t.Slots))], true
}

// EvenSources picks n source MACs, from the locally administered
// 02:00:0c:ID:x:y, that t sends evenly out of its ports internal ports
// (Via), in the order port 1, 2, ..., 1, 2, ...: a sender that gives its
// hosts flows in turn then gives the ports as many flows as the hosts
// allow. `msr bench scale` sends from them, and `msr sim` models that lab
// with them; random MACs spread by the hash's luck (16 of them once gave
// one of two ports 58%).
func (t *Table) EvenSources(id byte, ports, n int) []net.HardwareAddr {
	per := n / ports
	byPort := map[uint8][]net.HardwareAddr{}
	var order []uint8
	for c := 0; c < 1<<16 && len(byPort) <= ports; c++ {
		mac := net.HardwareAddr{0x02, 0x00, 0x0c, id, byte(c >> 8), byte(c)}
		via, ok := t.Via(mac)
		if !ok {
			return nil
		}
		if _, seen := byPort[via.PortIndex]; !seen {
			order = append(order, via.PortIndex)
		}
		if len(byPort[via.PortIndex]) < per {
			byPort[via.PortIndex] = append(byPort[via.PortIndex], mac)
		}
		full := len(byPort) == ports
		for _, macs := range byPort {
			full = full && len(macs) == per
		}
		if full {
			break
		}
	}
	var out []net.HardwareAddr
	for k := range per {
		for _, p := range order {
			if k < len(byPort[p]) {
				out = append(out, byPort[p][k])
			}
		}
	}
	return out
}

// macHash is bpf/lb.bpf.c's mac_hash.
func macHash(mac []byte) uint32 {
	h := (uint32(mac[2])<<24 | uint32(mac[3])<<16 | uint32(mac[4])<<8 | uint32(mac[5])) * 0x9e3779b1
	h ^= uint32(mac[0])<<8 | uint32(mac[1])
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	return h
}

func (p *modelPkt) internal() Result {
	if p.etherType() == etherTypeDIST {
		p.module(lbxdpLbModuleLB_MOD_DIST)
		return Result{Verdict: XDPPass, Out: p.b}
	}
	for _, port := range p.m.Ports {
		if bytes.Equal(port.MAC, p.b[6:12]) {
			return p.drop(lbxdpLbDropLB_DROP_OWN_FRAME)
		}
	}
	if et := p.etherType(); et != etherTypeQ && et != etherTypeQinQ {
		return p.drop(lbxdpLbDropLB_DROP_UNTAGGED_INTERNAL)
	}
	if len(p.b) < 18 {
		return p.drop(lbxdpLbDropLB_DROP_RUNT)
	}
	inner := binary.BigEndian.Uint16(p.b[16:18])
	if inner == etherTypeQ || inner == etherTypeQinQ {
		return p.drop(lbxdpLbDropLB_DROP_VLAN_IN_VLAN)
	}
	vid := binary.BigEndian.Uint16(p.b[14:16]) & 0xfff
	var out Port
	found := false
	for _, port := range p.m.Ports {
		if port.Role == RoleExternal && port.VLAN == vid && vid != 0 {
			out, found = port, true
		}
	}
	if !found {
		return p.drop(lbxdpLbDropLB_DROP_VLAN_NOT_OURS)
	}
	ndp := inner == etherTypeIPv6 && len(p.b) >= 18+41 && p.b[18+6] == 58 && p.b[18+40] >= 133 && p.b[18+40] <= 137
	p.b = append(bytes.Clone(p.b[0:12]), p.b[16:]...)
	copy(p.b[6:12], out.MAC)
	if ndp {
		return p.intNDPOut(out)
	}
	if inner == etherTypeARP {
		if len(p.b) < 14+28 {
			return p.drop(lbxdpLbDropLB_DROP_BAD_ARP)
		}
		copy(p.b[22:28], out.MAC)
		p.module(lbxdpLbModuleLB_MOD_INT_ARP_OUT)
	} else {
		p.module(lbxdpLbModuleLB_MOD_INT_TO_EXT)
	}
	return p.send(out.Ifindex, out.Index)
}

// FlowSeed is the LB's flow-hash seed (bpf/common.h).
const FlowSeed = uint32(lbxdpFlowSeedFLOW_SEED_LB)
