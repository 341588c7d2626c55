package router

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/msr-router/msr/internal/inet"
)

// The slow path: what the data path hands to the agent (enum rt_slow),
// each event a struct rt_slow_meta followed by the frame.

// slowQueueLen is how many events wait for routeSlow: the channel's
// burst, about 1.5 MB of frames at most.
const slowQueueLen = 1024

// dispatchSlow takes one event off the data path's channel. ARP and NDP
// are learned here and now, under the neighbours' lock only; the rest
// wait in queue for routeSlow, which needs the agent's lock, so that an
// ARP reply is never read after a packet waiting on route work (a whole
// table's snapshot). A full queue drops the event, counted
// slow_queue_full.
func (a *Agent) dispatchSlow(sample []byte, queue chan<- []byte) {
	var meta rtxdpRtSlowMeta
	if _, err := binary.Decode(sample, binary.NativeEndian, &meta); err != nil {
		return
	}
	if meta.Reason == uint32(rtxdpRtSlowRT_SLOW_ARP) || meta.Reason == uint32(rtxdpRtSlowRT_SLOW_NDP) {
		a.handleSlow(sample)
		return
	}
	select {
	case queue <- sample:
	default:
		a.count("slow_queue_full", 1)
	}
}

// routeSlow handles the queued events until ctx ends.
func (a *Agent) routeSlow(ctx context.Context, queue <-chan []byte) {
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-queue:
			a.handleSlow(s)
		}
	}
}

// handleSlow handles one slow-path event.
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
	case uint32(rtxdpRtSlowRT_SLOW_NDP):
		a.learnNDP(frame)
		return
	}
	if len(frame) >= 14+40 && binary.BigEndian.Uint16(frame[12:]) == 0x86dd {
		pkt := bytes.Clone(frame[14:])
		a.mu.Lock()
		defer a.mu.Unlock()
		a.handleSlow6(meta.Reason, meta.Nexthop, pkt)
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
		a.icmpError(pkt, 3, 4, a.mtuOf(meta.Nexthop))
	case uint32(rtxdpRtSlowRT_SLOW_FRAGMENT):
		a.forwardSlow(pkt, func(p []byte) {
			for _, f := range fragments(p, a.mtuOf(meta.Nexthop)) {
				a.counters["fragments"]++
				a.send(f)
			}
		})
	case uint32(rtxdpRtSlowRT_SLOW_LOCAL):
		a.local(pkt)
	case uint32(rtxdpRtSlowRT_SLOW_OPTIONS):
		a.forwardSlow(pkt, func(p []byte) { a.send(p) })
	case uint32(rtxdpRtSlowRT_SLOW_UNRESOLVED):
		a.send(decTTL(pkt))
	case uint32(rtxdpRtSlowRT_SLOW_ACL):
		a.icmpError(pkt, 3, 13, 0) // communication administratively prohibited (RFC 1812 §5.2.7.1)
	}
}

func (a *Agent) mtuOf(nh uint32) uint16 {
	if k, ok := a.nh.next(nh); ok && int(k.port) < len(a.ports) {
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
		a.counters["echo_replies"]++
		a.send(echoReply(pkt))
	case pkt[9] == 17:
		a.icmpError(pkt, 3, 3, 0)
	default:
		a.counters["local_dropped"]++
	}
}

// icmpError sends an ICMP error about pkt (packets.go says which may have
// one, and builds it): rate-limited, from the address of the router's port
// towards the source, as one box would answer.
func (a *Agent) icmpError(pkt []byte, typ, code uint8, mtu uint16) {
	if !icmpErrorAllowed(pkt) {
		return
	}
	if k := icmpKindOf(false, typ, code); !a.icmp.take(k, time.Now()) {
		a.counters["icmp_rate_limited"]++
		a.counters["icmp_rate_limited_"+icmpKindNames[k]]++
		return
	}
	from, ok := a.addressTowards(netip.AddrFrom4([4]byte(pkt[12:16])))
	if !ok {
		return
	}
	a.counters["icmp_errors"]++
	a.send(icmpErrorPacket(pkt, from, typ, code, mtu))
}

// routeTo is the next hop the slow path sends to dst by (either family):
// the first of its route's group.
func (a *Agent) routeTo(dst netip.Addr) (nhKey, bool) {
	nhs := a.nh.group(a.fib(dst).Lookup(dst))
	if len(nhs) == 0 {
		return nhKey{}, false
	}
	return a.nh.next(nhs[0])
}

// addressTowards is the address of the router's port on the route to dst,
// of dst's family.
func (a *Agent) addressTowards(dst netip.Addr) (netip.Addr, bool) {
	k, ok := a.routeTo(dst)
	if !ok {
		return netip.Addr{}, false
	}
	if dst.Is6() {
		return a.ports[k.port].Addr6.Addr(), a.ports[k.port].Addr6.IsValid()
	}
	return a.ports[k.port].Addr.Addr(), true
}

// send routes an IP packet of either version the agent made or forwards:
// lookup, next hop, neighbour (or hold and ask: ARP, NDP), tagged frame
// out of the interconnect port.
func (a *Agent) send(pkt []byte) {
	dst, etherType := netip.AddrFrom4([4]byte(pkt[16:20])), uint16(0x0800)
	if pkt[0]>>4 == 6 {
		dst, etherType = netip.AddrFrom16([16]byte(pkt[24:40])), 0x86dd
	}
	k, ok := a.routeTo(dst)
	if !ok {
		a.counters["no_route_slow"]++
		return
	}
	a.sendVia(k, dst, etherType, pkt)
}

// sendVia sends pkt (of etherType) to dst through next hop k, or holds it
// while its neighbour is asked for. Call with a.mu held (the port).
func (a *Agent) sendVia(k nhKey, dst netip.Addr, etherType uint16, pkt []byte) {
	port := a.ports[k.port]
	target := k.gw
	if !target.IsValid() {
		target = dst
	}
	key := NeighborKey{target, port.VLAN}
	a.neighMu.Lock()
	defer a.neighMu.Unlock()
	if n, ok := a.neigh[key]; ok {
		a.transmit(n.mac, port.VLAN, etherType, pkt)
		return
	}
	p := a.pending[key]
	if p == nil {
		p = &pendingARP{}
		a.pending[key] = p
	}
	if p.bytes+len(pkt) <= holdBytes && a.heldBytes+len(pkt) <= holdTotalBytes {
		p.packets = append(p.packets, pkt)
		p.bytes += len(pkt)
		a.heldBytes += len(pkt)
	} else {
		a.neighCounters["held_dropped"]++
	}
	if p.tries == 0 {
		a.solicit(key, port)
		p.tries, p.sent = 1, time.Now()
	}
}

// arpRequest asks for target on its port's VLAN; the LB owning the VLAN
// puts its own MAC in it and sends it out.
func (a *Agent) arpRequest(k NeighborKey, port Port) {
	a.neighCounters["arp_requests"]++
	a.askedFor(k, time.Now())
	a.transmit(net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, k.VLAN, 0x0806, arpRequest(a.mac, port.Addr.Addr(), k.IP))
}

// learnARP takes a (tagged) ARP frame the LBs relay to the back-ends, or
// another back-end's request seen on the interconnect: a request the
// router made is remembered as asked, a reply is a claim (neighbors.go)
// for its sender, if that is on the port of the frame's VLAN.
func (a *Agent) learnARP(f []byte) {
	if len(f) < 18+28 || binary.BigEndian.Uint16(f[12:]) != 0x8100 {
		return
	}
	vlan := binary.BigEndian.Uint16(f[14:]) & 0xfff
	arp := f[18:]
	if binary.BigEndian.Uint16(arp[0:]) != 1 || binary.BigEndian.Uint16(arp[2:]) != 0x0800 || arp[4] != 6 || arp[5] != 4 {
		return
	}
	op := binary.BigEndian.Uint16(arp[6:])
	mac := net.HardwareAddr(bytes.Clone(arp[8:14]))
	ip, target := netip.AddrFrom4([4]byte(arp[14:18])), netip.AddrFrom4([4]byte(arp[24:28]))
	now := time.Now()
	a.neighMu.Lock()
	port, ok := a.portOfAddr(ip, vlan)
	switch {
	case !ok:
	case op == 1 && ip == port.Addr.Addr():
		if port.Addr.Masked().Contains(target) {
			a.askedFor(NeighborKey{target, vlan}, now)
		}
	case op == 2 && ip != port.Addr.Addr() && mac[0]&1 == 0:
		send := a.hear(claim{key: NeighborKey{ip, vlan}, mac: mac, override: true}, 0x0800, now)
		a.neighMu.Unlock()
		send()
		return
	}
	a.neighMu.Unlock()
}

// learned records a neighbour's MAC in the data path and takes what was
// held for it (packets of etherType): the send it returns sends them.
// Call with a.neighMu held, and the send once it is released.
func (a *Agent) learned(key NeighborKey, mac net.HardwareAddr, etherType uint16) (send func()) {
	if err := a.neighbors.SetNeighbor(key.IP, key.VLAN, mac); err != nil {
		a.log.Error("set neighbour", "ip", key.IP, "err", err)
		return func() {}
	}
	a.setNeigh(key, &neighbor{mac: mac, updated: time.Now()})
	return a.releaseHeld(key, mac, etherType)
}

// releaseHeld takes what was held for a neighbour now resolved; the send
// it returns sends it. Call with a.neighMu held, and the send once it is
// released: up to holdBytes at once, thousands of frames, more than the
// interface takes in one go, so each waits for room (sendRetry) until
// one has waited in vain, and the agent's other work (the slow path, the
// RIB feed's routes, hellos) must not wait with them.
func (a *Agent) releaseHeld(key NeighborKey, mac net.HardwareAddr, etherType uint16) (send func()) {
	p := a.pending[key]
	if p == nil {
		return func() {}
	}
	delete(a.pending, key)
	a.heldBytes -= p.bytes
	return func() {
		waits, failed, retry := 0, 0, true
		for _, pkt := range p.packets {
			w, sent, next := a.sendRetry(a.frame(mac, key.VLAN, etherType, pkt), retry)
			waits, retry = waits+w, next
			if !sent {
				failed++
			}
		}
		a.neighMu.Lock()
		a.neighCounters["send_waits"] += uint64(waits)
		a.neighCounters["send_errors"] += uint64(failed)
		a.neighMu.Unlock()
	}
}

// FlushNeighbors forgets every neighbour learned (not the operator's
// static ones), in the agent and in the data path, which then passes
// packets to them to the slow path: held, while they are asked for
// again. It returns how many it forgot.
func (a *Agent) FlushNeighbors() (int, error) {
	a.neighMu.Lock()
	defer a.neighMu.Unlock()
	n := 0
	var errs []error
	for k, e := range a.neigh {
		if e.static {
			continue // the operator's: kept, as clear ip arp keeps static entries
		}
		if err := a.neighbors.SetNeighbor(k.IP, k.VLAN, nil); err != nil {
			errs = append(errs, fmt.Errorf("neighbour %s: %w", k.IP, err))
			continue
		}
		a.delNeigh(k)
		n++
	}
	a.neighCounters["neighbor_flushes"]++
	return n, errors.Join(errs...)
}

// tickNeighbors retries pending requests, gives up on dead ones, refreshes
// and expires entries.
func (a *Agent) tickNeighbors(now time.Time) {
	a.neighMu.Lock()
	sends := a.tickProbes(now)
	defer func() {
		a.neighMu.Unlock()
		for _, send := range sends {
			send()
		}
	}()
	for k, p := range a.pending {
		if now.Sub(p.sent) < arpRetry {
			continue
		}
		if p.tries >= arpTries {
			a.neighCounters["held_dropped"] += uint64(len(p.packets))
			a.heldBytes -= p.bytes
			delete(a.pending, k)
			continue
		}
		if port, ok := a.portOfVLAN(k.VLAN); ok {
			a.solicit(k, port)
		}
		p.tries++
		p.sent = now
	}
	for k, n := range a.neigh {
		age := now.Sub(n.updated)
		switch {
		case n.static:
		case age > neighExpire:
			a.delNeigh(k)
			a.neighbors.SetNeighbor(k.IP, k.VLAN, nil)
		case age > neighRefresh && a.pending[k] == nil:
			if port, ok := a.portOfVLAN(k.VLAN); ok {
				a.pending[k] = &pendingARP{tries: 1, sent: now}
				a.solicit(k, port)
			}
		}
	}
}

// portOfVLAN is the port of vlan, and false for none. Call with
// a.neighMu held.
func (a *Agent) portOfVLAN(vlan uint16) (Port, bool) {
	for _, p := range a.neighPorts {
		if p.VLAN == vlan {
			return p, true
		}
	}
	return Port{}, false
}

// transmit sends payload tagged with vlan to dst, from the back-end.
// Call with a.neighMu held (its counters).
func (a *Agent) transmit(dst net.HardwareAddr, vlan, etherType uint16, payload []byte) {
	if _, sent, _ := a.sendRetry(a.frame(dst, vlan, etherType, payload), false); !sent {
		a.neighCounters["send_errors"]++
	}
}

// sendFrame is the send of a frame on the agent's packet socket (a test
// replaces it).
var sendFrame = func(fd int, f []byte) error { return unix.Send(fd, f, 0) }

// An interface whose transmit queue is full refuses a frame at once:
// ENOBUFS from the packet socket (a veth without a qdisc when its peer's
// XDP ring of 256 frames is full, a qdisc at its limit). The held packets
// a resolved neighbour releases come in a burst of up to holdBytes, so
// their sends wait for room: up to sendRetries times sendBackoff a frame
// (a sleep that Go's timers may stretch to a millisecond), time for the
// queue's consumer to take hundreds of frames: a back-end that resolved
// a neighbour with many frames held lost them to send_errors
// (docs/reliability.md, finding 26).
const (
	sendBackoff = 200 * time.Microsecond
	sendRetries = 10
)

// frame is payload in a frame of etherType to dst, tagged with vlan,
// from this back-end, padded to Ethernet's minimum.
func (a *Agent) frame(dst net.HardwareAddr, vlan, etherType uint16, payload []byte) []byte {
	f := make([]byte, 0, 18+len(payload))
	f = append(f, dst...)
	f = append(f, a.mac...)
	f = append(f, 0x81, 0x00, byte(vlan>>8&0xf), byte(vlan), byte(etherType>>8), byte(etherType))
	f = append(f, payload...)
	for len(f) < 64 {
		f = append(f, 0)
	}
	return f
}

// sendRetry sends a frame on the agent's packet socket, waiting for room
// in the interface's queue when retry is set: how many times it waited,
// whether it went, and whether the next frame of a burst should wait too
// (not once one waited in vain: the queue is stuck, and the burst is not
// to hold the agent for long).
func (a *Agent) sendRetry(f []byte, retry bool) (waits int, sent, next bool) {
	for try := 0; ; try++ {
		err := sendFrame(a.raw, f)
		if err == nil {
			return waits, true, retry
		}
		if !retry || !errors.Is(err, unix.ENOBUFS) || try == sendRetries {
			return waits, false, false
		}
		waits++
		time.Sleep(sendBackoff)
	}
}
