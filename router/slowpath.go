package router

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/msr-router/msr/internal/inet"
)

// The slow path: what the data path hands to the agent (enum rt_slow),
// each event a struct rt_slow_meta followed by the frame.

// handleSlow dispatches one slow-path event.
func (a *Agent) handleSlow(sample []byte) {
	var meta rtxdpRtSlowMeta // its layout is router.h's, generated
	n, err := binary.Decode(sample, binary.NativeEndian, &meta)
	if err != nil {
		return
	}
	frame := sample[n:]
	if int(meta.Len) < len(frame) {
		frame = frame[:meta.Len]
	}
	if int(meta.Reason) < len(SlowNames) {
		a.count(SlowNames[meta.Reason], 1)
	}
	switch meta.Reason {
	case uint32(rtxdpRtSlowRT_SLOW_ARP):
		a.learnARP(frame)
		return
	}
	if len(frame) < 34 {
		return
	}
	pkt := bytes.Clone(frame[14:])
	a.mu.Lock()
	defer a.mu.Unlock()
	switch meta.Reason {
	case uint32(rtxdpRtSlowRT_SLOW_TTL):
		a.icmpError(pkt, 11, 0, 0)
	case uint32(rtxdpRtSlowRT_SLOW_NO_ROUTE):
		a.icmpError(pkt, 3, 0, 0) // network unreachable
	case uint32(rtxdpRtSlowRT_SLOW_FRAG_NEEDED):
		a.icmpError(pkt, 3, 4, uint32(a.mtuOf(meta.Nexthop)))
	case uint32(rtxdpRtSlowRT_SLOW_FRAGMENT):
		a.forwardSlow(pkt, func(p []byte) { a.fragment(p, a.mtuOf(meta.Nexthop)) })
	case uint32(rtxdpRtSlowRT_SLOW_LOCAL):
		a.local(pkt)
	case uint32(rtxdpRtSlowRT_SLOW_OPTIONS):
		a.forwardSlow(pkt, func(p []byte) { a.send(p) })
	case uint32(rtxdpRtSlowRT_SLOW_UNRESOLVED):
		a.send(decTTL(pkt))
	}
}

func (a *Agent) mtuOf(nh uint32) uint16 {
	if k, ok := a.nhs[nh]; ok && int(k.port) < len(a.ports) {
		return a.ports[k.port].MTU
	}
	return 576
}

// forwardSlow forwards a packet the fast path left to software: options
// (whose header checksum only the slow path checks) and fragmentation.
func (a *Agent) forwardSlow(pkt []byte, out func([]byte)) {
	ihl := int(pkt[0]&0xf) * 4
	if ihl < 20 || len(pkt) < ihl || inet.Checksum(pkt[:ihl]) != 0 {
		a.counters["bad_checksum"]++
		return
	}
	if pkt[8] <= 1 {
		a.icmpError(pkt, 11, 0, 0)
		return
	}
	out(decTTL(pkt))
}

// decTTL decrements the TTL and recomputes the header checksum.
func decTTL(pkt []byte) []byte {
	ihl := int(pkt[0]&0xf) * 4
	pkt[8]--
	binary.BigEndian.PutUint16(pkt[10:], 0)
	binary.BigEndian.PutUint16(pkt[10:], inet.Checksum(pkt[:ihl]))
	return pkt
}

// local answers what is addressed to the router itself: ICMP echo, and UDP
// with Port Unreachable (so traceroute to the router ends); the rest is
// dropped (routing and management went to the VCP at the LB).
func (a *Agent) local(pkt []byte) {
	ihl := int(pkt[0]&0xf) * 4
	tot := int(binary.BigEndian.Uint16(pkt[2:]))
	if ihl < 20 || tot > len(pkt) || tot < ihl {
		return
	}
	pkt = pkt[:tot]
	switch {
	case pkt[9] == 1 && len(pkt) >= ihl+8 && pkt[ihl] == 8 && binary.BigEndian.Uint16(pkt[6:])&0x3fff == 0:
		reply := inet.IPv4(netip.AddrFrom4([4]byte(pkt[16:20])), netip.AddrFrom4([4]byte(pkt[12:16])), 1, bytes.Clone(pkt[ihl:]))
		icmp := reply[20:]
		icmp[0] = 0
		binary.BigEndian.PutUint16(icmp[2:], 0)
		binary.BigEndian.PutUint16(icmp[2:], inet.Checksum(icmp))
		a.counters["echo_replies"]++
		a.send(reply)
	case pkt[9] == 17:
		a.icmpError(pkt, 3, 3, 0)
	default:
		a.counters["local_dropped"]++
	}
}

// icmpError sends an ICMP error about pkt (RFC 1812 §4.3.2): rate-limited,
// never about an ICMP error, a broadcast or multicast, or a non-first
// fragment; quoting as much of pkt as fits in 576 bytes; from the address
// of the router's port towards the source, as one box would answer.
func (a *Agent) icmpError(pkt []byte, typ, code uint8, mtu uint32) {
	if len(pkt) < 20 {
		return
	}
	ihl := int(pkt[0]&0xf) * 4
	src := netip.AddrFrom4([4]byte(pkt[12:16]))
	dst := binary.BigEndian.Uint32(pkt[16:])
	if binary.BigEndian.Uint16(pkt[6:])&0x1fff != 0 || dst>>28 == 0xe || dst == 0xffffffff || martian(u32(src)) {
		return
	}
	if pkt[9] == 1 && len(pkt) > ihl && pkt[ihl] != 0 && pkt[ihl] != 8 && pkt[ihl] != 13 && pkt[ihl] != 15 {
		return // an ICMP error itself
	}
	if !a.icmp.take(time.Now()) {
		a.counters["icmp_rate_limited"]++
		return
	}
	from, ok := a.addressTowards(src)
	if !ok {
		return
	}
	quote := pkt[:min(len(pkt), 576-28)]
	body := make([]byte, 8, 8+len(quote))
	body[0], body[1] = typ, code
	binary.BigEndian.PutUint32(body[4:], mtu&0xffff)
	body = append(body, quote...)
	binary.BigEndian.PutUint16(body[2:], inet.Checksum(body))
	a.counters["icmp_errors"]++
	a.send(inet.IPv4(from, src, 1, body))
}

// addressTowards is the address of the router's port on the route to dst.
func (a *Agent) addressTowards(dst netip.Addr) (netip.Addr, bool) {
	g := a.dp.FIB.Lookup(dst)
	nhs := a.groups[g]
	if len(nhs) == 0 {
		return netip.Addr{}, false
	}
	k := a.nhs[nhs[0]]
	return a.ports[k.port].Addr.Addr(), true
}

// send routes an IP packet the agent made or forwards: lookup, next hop,
// neighbour (or hold and ARP), tagged frame out of the interconnect port.
func (a *Agent) send(pkt []byte) {
	dst := netip.AddrFrom4([4]byte(pkt[16:20]))
	nhs := a.groups[a.dp.FIB.Lookup(dst)]
	if len(nhs) == 0 {
		a.counters["no_route_slow"]++
		return
	}
	k := a.nhs[nhs[0]]
	port := a.ports[k.port]
	target := k.gw
	if !target.IsValid() {
		target = dst
	}
	key := NeighborKey{target, port.VLAN}
	if n, ok := a.neigh[key]; ok {
		a.transmit(n.mac, port.VLAN, 0x0800, pkt)
		return
	}
	p := a.pending[key]
	if p == nil {
		p = &pendingARP{}
		a.pending[key] = p
	}
	if len(p.packets) < holdMax {
		p.packets = append(p.packets, pkt)
	} else {
		a.counters["held_dropped"]++
	}
	if p.tries == 0 {
		a.arpRequest(key, port)
		p.tries, p.sent = 1, time.Now()
	}
}

// arpRequest asks for target on its port's VLAN; the LB owning the VLAN
// puts its own MAC in it and sends it out (seed 000 §4.3).
func (a *Agent) arpRequest(k NeighborKey, port Port) {
	b := make([]byte, 28)
	binary.BigEndian.PutUint16(b[0:], 1)
	binary.BigEndian.PutUint16(b[2:], 0x0800)
	b[4], b[5] = 6, 4
	binary.BigEndian.PutUint16(b[6:], 1)
	copy(b[8:], a.mac)
	copy(b[14:], port.Addr.Addr().AsSlice())
	copy(b[24:], k.IP.AsSlice())
	a.counters["arp_requests"]++
	a.transmit(net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, k.VLAN, 0x0806, b)
}

// learnARP takes a (tagged) ARP frame the LBs broadcast to the back-ends
// and records the sender, if it belongs to the port of that VLAN.
func (a *Agent) learnARP(f []byte) {
	if len(f) < 18+28 || binary.BigEndian.Uint16(f[12:]) != 0x8100 {
		return
	}
	vlan := binary.BigEndian.Uint16(f[14:]) & 0xfff
	arp := f[18:]
	if binary.BigEndian.Uint16(arp[0:]) != 1 || binary.BigEndian.Uint16(arp[2:]) != 0x0800 || arp[4] != 6 || arp[5] != 4 {
		return
	}
	mac := net.HardwareAddr(bytes.Clone(arp[8:14]))
	ip := netip.AddrFrom4([4]byte(arp[14:18]))
	a.mu.Lock()
	defer a.mu.Unlock()
	var port *Port
	for i := range a.ports {
		if a.ports[i].VLAN == vlan && a.ports[i].Addr.Masked().Contains(ip) {
			port = &a.ports[i]
		}
	}
	if port == nil || ip == port.Addr.Addr() || mac[0]&1 != 0 {
		return
	}
	key := NeighborKey{ip, vlan}
	if err := a.dp.SetNeighbor(ip, vlan, mac); err != nil {
		a.log.Error("set neighbour", "ip", ip, "err", err)
		return
	}
	a.neigh[key] = &neighbor{mac: mac, updated: time.Now()}
	if p := a.pending[key]; p != nil {
		delete(a.pending, key)
		for _, pkt := range p.packets {
			a.transmit(mac, vlan, 0x0800, pkt)
		}
	}
}

// tickNeighbors retries pending requests, gives up on dead ones, refreshes
// and expires entries.
func (a *Agent) tickNeighbors(now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, p := range a.pending {
		if now.Sub(p.sent) < arpRetry {
			continue
		}
		if p.tries >= arpTries {
			a.counters["held_dropped"] += uint64(len(p.packets))
			delete(a.pending, k)
			continue
		}
		if port, ok := a.portOfVLAN(k.VLAN); ok {
			a.arpRequest(k, port)
		}
		p.tries++
		p.sent = now
	}
	for k, n := range a.neigh {
		age := now.Sub(n.updated)
		switch {
		case age > neighExpire:
			delete(a.neigh, k)
			a.dp.SetNeighbor(k.IP, k.VLAN, nil)
		case age > neighRefresh && a.pending[k] == nil:
			if port, ok := a.portOfVLAN(k.VLAN); ok {
				a.pending[k] = &pendingARP{tries: 1, sent: now}
				a.arpRequest(k, port)
			}
		}
	}
}

func (a *Agent) portOfVLAN(vlan uint16) (Port, bool) {
	for _, p := range a.ports {
		if p.VLAN == vlan {
			return p, true
		}
	}
	return Port{}, false
}

// transmit sends payload tagged with vlan to dst, from the back-end.
func (a *Agent) transmit(dst net.HardwareAddr, vlan, etherType uint16, payload []byte) {
	f := make([]byte, 0, 18+len(payload))
	f = append(f, dst...)
	f = append(f, a.mac...)
	f = append(f, 0x81, 0x00, byte(vlan>>8&0xf), byte(vlan), byte(etherType>>8), byte(etherType))
	f = append(f, payload...)
	for len(f) < 64 {
		f = append(f, 0)
	}
	if err := unix.Send(a.raw, f, 0); err != nil {
		a.counters["send_errors"]++
	}
}

// fragment splits pkt into fragments that fit mtu (RFC 791 §3.2) and sends
// them.
func (a *Agent) fragment(pkt []byte, mtu uint16) {
	ihl := int(pkt[0]&0xf) * 4
	tot := int(binary.BigEndian.Uint16(pkt[2:]))
	if tot > len(pkt) || tot < ihl {
		return
	}
	data := pkt[ihl:tot]
	step := (int(mtu) - ihl) &^ 7
	if step <= 0 {
		return
	}
	flags := binary.BigEndian.Uint16(pkt[6:])
	baseOff := int(flags&0x1fff) * 8
	for off := 0; off < len(data); off += step {
		end := min(off+step, len(data))
		f := make([]byte, ihl, ihl+end-off)
		copy(f, pkt[:ihl])
		f = append(f, data[off:end]...)
		binary.BigEndian.PutUint16(f[2:], uint16(len(f)))
		fl := uint16((baseOff+off)/8) | flags&0x2000
		if end < len(data) {
			fl |= 0x2000
		}
		binary.BigEndian.PutUint16(f[6:], fl)
		binary.BigEndian.PutUint16(f[10:], 0)
		binary.BigEndian.PutUint16(f[10:], inet.Checksum(f[:ihl]))
		a.counters["fragments"]++
		a.send(f)
	}
}
