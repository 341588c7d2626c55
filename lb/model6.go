package lb

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"

	"github.com/msr-router/msr/internal/flow"
	"github.com/msr-router/msr/internal/inet"
)

// This file is the reference model's IPv6: bpf/lb.bpf.c's classify_ipv6,
// classify_ndp, ext_ndp and int_ndp_out, and bpf/ipv6.h's ip6_walk,
// written as plainly as model.go's IPv4.

const (
	etherTypeIPv6 = 0x86DD
	ndOptsMax     = 4   // ND_OPTS_MAX
	ndOptsBytes   = 256 // ND_OPTS_BYTES
)

// fold6 is ip6_fold: an address's four words XORed, as the bytes the
// data path reads them as.
func fold6(a []byte) [4]byte {
	var f [4]byte
	for i := range 16 {
		f[i%4] ^= a[i]
	}
	return f
}

func (p *modelPkt) ipv6() Result {
	if len(p.b) < 14+40 {
		return p.drop(lbxdpLbDropLB_DROP_RUNT)
	}
	ip := p.b[14:]
	plenEnd := 40 + int(binary.BigEndian.Uint16(ip[4:]))
	if ip[0]>>4 != 6 || plenEnd > len(ip) {
		return p.drop(lbxdpLbDropLB_DROP_BAD_IP)
	}
	w, ok := inet.WalkIPv6(ip, plenEnd)
	if !ok {
		return p.drop(lbxdpLbDropLB_DROP_BAD_IP)
	}
	var sport, dport uint16
	hasPorts := false
	if !w.Deep && !w.Frag {
		if w.Proto == 6 || w.Proto == 17 || w.Proto == 58 {
			if w.Off+4 > len(ip) || w.Off+4 > plenEnd {
				return p.drop(lbxdpLbDropLB_DROP_BAD_IP)
			}
		}
		switch {
		case w.Proto == 6 || w.Proto == 17:
			sport = binary.BigEndian.Uint16(ip[w.Off:])
			dport = binary.BigEndian.Uint16(ip[w.Off+2:])
			hasPorts = true
		case w.Proto == 58 && w.Off == 40 && ip[40] >= 133 && ip[40] <= 137:
			return p.ndp(ip, plenEnd)
		}
	}
	daddr := netip.AddrFrom16([16]byte(ip[24:40]))
	if p.m.infra(netip.AddrFrom16([16]byte(ip[8:24])), daddr) {
		return p.drop(lbxdpLbDropLB_DROP_INFRA)
	}
	c := p.policeClass6(w.Proto, daddr, sport, dport, hasPorts)
	peer := p.routingPeer(c, netip.AddrFrom16([16]byte(ip[8:24])))
	if p.gtsmRefused(peer, c, dport, ip[7]) {
		return p.drop(lbxdpLbDropLB_DROP_GTSM)
	}
	if c != PoliceNone && !p.police(c, ip[8:24], peer) {
		return p.drop(lbxdpLbDropLB_DROP_POLICED)
	}
	if c <= PoliceICMP || w.Frag && p.m.RouterAddrs[daddr] != 0 {
		return p.toVCP()
	}
	if p.b[0]&1 != 0 || ip[24] == 0xff {
		return p.drop(lbxdpLbDropLB_DROP_MCAST_EXTERNAL)
	}
	var ports uint32
	if hasPorts {
		ports = uint32(sport)<<16 | uint32(dport)
	}
	proto := uint32(w.Proto)
	if w.Deep {
		proto = 0
	}
	if label := binary.BigEndian.Uint32(ip[0:4]) & 0xfffff; p.m.Config.FlowLabel && label != 0 {
		ports = label
	}
	s, d := fold6(ip[8:24]), fold6(ip[24:40])
	return p.balance(flow.Hash(binary.LittleEndian.Uint32(s[:]), binary.LittleEndian.Uint32(d[:]), ports, proto, FlowSeed))
}

// isLLGroup says whether a is ff02::n.
func isLLGroup(a netip.Addr, n byte) bool {
	return a == netip.AddrFrom16([16]byte{0xff, 0x02, 15: n})
}

// policeClass6 is police_class6.
func (p *modelPkt) policeClass6(proto uint8, daddr netip.Addr, sport, dport uint16, hasPorts bool) PoliceClass {
	f := p.m.RouterAddrs[daddr]
	switch {
	case f&AddrMgmt != 0:
		return PoliceMgmt
	case proto == 89:
		if f != 0 || isLLGroup(daddr, 5) || isLLGroup(daddr, 6) {
			return PoliceIGP
		}
		return PoliceNone
	case hasPorts && proto == 17 && dport == 521 && (f != 0 || isLLGroup(daddr, 9)):
		return PoliceIGP
	case f == 0:
		return PoliceNone
	}
	return routerClass(proto, 58, sport, dport, hasPorts)
}

// ndp is classify_ndp: ip's ICMPv6 message, right after its header, is
// Neighbor Discovery (types 133-137).
func (p *modelPkt) ndp(ip []byte, plenEnd int) Result {
	nd := ip[40:]
	if ip[7] != 255 || nd[1] != 0 {
		return p.drop(lbxdpLbDropLB_DROP_BAD_NDP)
	}
	if nd[0] == 135 || nd[0] == 136 {
		if 40+24 > len(ip) || 40+24 > plenEnd {
			return p.drop(lbxdpLbDropLB_DROP_BAD_NDP)
		}
		if nd[0] == 136 {
			p.module(lbxdpLbModuleLB_MOD_INT_NDP_IN)
			return p.toInside(net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
		}
		target := netip.AddrFrom16([16]byte(nd[8:24]))
		own := p.port.Addr6.Is6() && !p.port.Addr6.IsUnspecified() && target == p.port.Addr6
		if !own && target != inet.LinkLocal(p.port.MAC) {
			return p.drop(lbxdpLbDropLB_DROP_NDP_NOT_OURS)
		}
		return p.extNDP(ip, target)
	}
	if !p.police(PoliceIGP, ip[8:24], p.routingPeer(PoliceIGP, netip.AddrFrom16([16]byte(ip[8:24])))) {
		return p.drop(lbxdpLbDropLB_DROP_POLICED)
	}
	return p.toVCP()
}

// extNDP is ext_ndp: the advertisement that answers ip's solicitation
// for target.
func (p *modelPkt) extNDP(ip []byte, target netip.Addr) Result {
	dst := netip.AddrFrom16([16]byte(ip[8:24]))
	dmac := bytes.Clone(p.b[6:12])
	flags := byte(0xa0) // router, override
	if dst.IsUnspecified() {
		dst, dmac = netip.MustParseAddr("ff02::1"), net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}
	} else {
		flags |= 0x40 // solicited
	}
	msg := make([]byte, 32)
	msg[0], msg[4] = 136, flags
	t := target.As16()
	copy(msg[8:], t[:])
	msg[24], msg[25] = 2, 1
	copy(msg[26:], p.port.MAC)
	frame := append(append(append([]byte(nil), dmac...), p.port.MAC...), 0x86, 0xdd)
	p.b = append(frame, inet.ICMPv6(target, dst, 255, msg)...)
	p.module(lbxdpLbModuleLB_MOD_EXT_NDP)
	return p.send(p.ifindex, p.port.Index)
}

// intNDPOut is int_ndp_out on the frame already untagged and sent as
// out's: its link-layer address options rewritten to out's MAC.
func (p *modelPkt) intNDPOut(out Port) Result {
	if len(p.b) < 54+4 {
		return p.drop(lbxdpLbDropLB_DROP_BAD_NDP)
	}
	nd := p.b[54:]
	plen := int(binary.BigEndian.Uint16(p.b[18:20]))
	off := 24
	switch nd[0] {
	case 133:
		off = 8
	case 134:
		off = 16
	case 137:
		off = 40
	}
	for range ndOptsMax {
		if off > ndOptsBytes || off+8 > plen || off+8 > len(nd) || nd[off+1] == 0 {
			break
		}
		o := nd[off:]
		if (o[0] == 1 || o[0] == 2) && o[1] == 1 {
			csumReplace6(nd[2:4], o[2:8], out.MAC)
			copy(o[2:8], out.MAC)
		}
		off += int(o[1]) * 8
	}
	p.module(lbxdpLbModuleLB_MOD_INT_NDP_OUT)
	return p.send(out.Ifindex, out.Index)
}

// csumReplace6 is ipv6.h's csum_replace6: RFC 1624's update of the
// checksum at csum for six bytes that change from old to new.
func csumReplace6(csum, old, new []byte) {
	sum := uint32(^binary.BigEndian.Uint16(csum))
	for i := 0; i < 6; i += 2 {
		sum += uint32(^binary.BigEndian.Uint16(old[i:]))
		sum += uint32(binary.BigEndian.Uint16(new[i:]))
	}
	sum = sum&0xffff + sum>>16
	sum = sum&0xffff + sum>>16
	binary.BigEndian.PutUint16(csum, ^uint16(sum))
}
