package router

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"time"

	"github.com/msr-router/msr/internal/inet"
)

// The slow path's IPv6: what route6 in bpf/router.bpf.c hands to the
// agent, answered as slowpath.go answers IPv4 — ICMPv6 errors (RFC 4443)
// from the router's address on the port towards the source, echo,
// Neighbor Discovery (RFC 4861) towards next hops with the first packets
// held, and Hop-by-Hop packets forwarded in software.

// handleSlow6 handles one event's IPv6 packet. Call with a.mu held.
func (a *Agent) handleSlow6(reason, nexthop uint32, pkt []byte) {
	end := 40 + int(binary.BigEndian.Uint16(pkt[4:]))
	if end > len(pkt) {
		return // cut by the snapshot length: nothing to answer with
	}
	pkt = pkt[:end]
	switch reason {
	case uint32(rtxdpRtSlowRT_SLOW_TTL):
		a.icmp6Error(pkt, icmp6TimeExceeded, 0, 0) // hop limit exceeded in transit
	case uint32(rtxdpRtSlowRT_SLOW_NO_ROUTE):
		a.icmp6Error(pkt, icmp6Unreachable, 0, 0) // no route to destination
	case uint32(rtxdpRtSlowRT_SLOW_FRAG_NEEDED):
		a.icmp6Error(pkt, icmp6PacketTooBig, 0, uint32(a.mtuOf(nexthop)))
	case uint32(rtxdpRtSlowRT_SLOW_LOCAL):
		a.local6(pkt)
	case uint32(rtxdpRtSlowRT_SLOW_OPTIONS):
		a.forwardHopByHop(pkt)
	case uint32(rtxdpRtSlowRT_SLOW_UNRESOLVED):
		a.send(decHopLimit(pkt))
	case uint32(rtxdpRtSlowRT_SLOW_ACL):
		a.icmp6Error(pkt, icmp6Unreachable, 1, 0) // administratively prohibited (RFC 4443 §3.1)
	}
}

// forwardHopByHop forwards a packet with Hop-by-Hop Options (RFC 8200
// §4.3): its header must lie within the packet (else Parameter Problem
// pointing at its length), and it goes on as any other: without a route,
// Destination Unreachable; larger than the way out, Packet Too Big.
func (a *Agent) forwardHopByHop(pkt []byte) {
	if len(pkt) < 48 || 40+(int(pkt[41])+1)*8 > len(pkt) {
		a.counters["bad_extension"]++
		a.icmp6Error(pkt, icmp6ParamProblem, 0, 41)
		return
	}
	if pkt[7] <= 1 {
		a.icmp6Error(pkt, icmp6TimeExceeded, 0, 0)
		return
	}
	dst := netip.AddrFrom16([16]byte(pkt[24:40]))
	k, ok := a.routeTo(dst)
	if !ok {
		a.icmp6Error(pkt, icmp6Unreachable, 0, 0) // no route to destination
		return
	}
	if mtu := a.ports[k.port].MTU; len(pkt) > int(mtu) {
		a.icmp6Error(pkt, icmp6PacketTooBig, 0, uint32(mtu))
		return
	}
	a.sendVia(k, dst, 0x86dd, decHopLimit(pkt))
}

// local6 answers what is addressed to the router itself: echo, and UDP
// with Port Unreachable (so traceroute6 to the router ends); the rest is
// dropped (routing and management went to the VCP at the LB).
func (a *Agent) local6(pkt []byte) {
	proto, off, ok := transport6(pkt)
	switch {
	case !ok:
		a.counters["bad_extension"]++
	case proto == 58 && off+8 <= len(pkt) && pkt[off] == icmp6EchoRequest:
		msg := pkt[off:]
		src, dst := netip.AddrFrom16([16]byte(pkt[8:24])), netip.AddrFrom16([16]byte(pkt[24:40]))
		if inet.PseudoChecksum6(src, dst, 58, msg) != 0 {
			a.counters["bad_checksum"]++
			return
		}
		a.counters["echo_replies"]++
		a.send(echoReply6(pkt, msg))
	case proto == 17:
		// Port unreachable, from the address it was sent to (RFC 4443
		// §2.2): traceroute6 to any of the router's addresses ends there.
		a.icmp6ErrorFrom(pkt, netip.AddrFrom16([16]byte(pkt[24:40])), icmp6Unreachable, 4, 0)
	default:
		a.counters["local_dropped"]++
	}
}

// icmp6Error sends an ICMPv6 error about pkt: rate-limited with the IPv4
// errors, from the router's IPv6 address on the port towards the source.
func (a *Agent) icmp6Error(pkt []byte, typ, code uint8, param uint32) {
	from, ok := a.addressTowards(netip.AddrFrom16([16]byte(pkt[8:24])))
	if !ok {
		a.counters["icmp6_no_address"]++
		return
	}
	a.icmp6ErrorFrom(pkt, from, typ, code, param)
}

// icmp6ErrorFrom sends an ICMPv6 error about pkt from the address given.
func (a *Agent) icmp6ErrorFrom(pkt []byte, from netip.Addr, typ, code uint8, param uint32) {
	if !icmp6ErrorAllowed(pkt) {
		return
	}
	if k := icmpKindOf(true, typ, code); !a.icmp.take(k, time.Now()) {
		a.counters["icmp_rate_limited"]++
		a.counters["icmp_rate_limited_"+icmpKindNames[k]]++
		return
	}
	a.counters["icmp6_errors"]++
	a.send(icmp6ErrorPacket(pkt, from, typ, code, param))
}

// solicit asks for a neighbour on its port's VLAN: ARP for IPv4, a
// Neighbor Solicitation for IPv6 (from the port's IPv6 address: a port
// without one has no IPv6 neighbours).
func (a *Agent) solicit(k NeighborKey, port Port) {
	if !k.IP.Is6() {
		a.arpRequest(k, port)
		return
	}
	if !port.Addr6.IsValid() {
		a.neighCounters["ndp_no_address"]++
		return
	}
	a.neighCounters["ndp_solicitations"]++
	a.askedFor(k, time.Now())
	_, group := inet.SolicitedNode(k.IP)
	a.transmit(group, k.VLAN, 0x86dd, neighborSolicitation(a.mac, port.Addr6.Addr(), k.IP))
}

// learnNDP takes a (tagged) NDP frame the LBs relay to the back-ends, or
// another back-end's solicitation seen on the interconnect: a
// solicitation the router sent is remembered as asked, an
// advertisement is a claim (neighbors.go) for its target, with its
// Override flag, if that is on the port of the frame's VLAN. An
// advertisement without the target's link-layer address (allowed in
// answer to a unicast solicitation) is taken from the frame's source,
// which the LB keeps.
func (a *Agent) learnNDP(f []byte) {
	if len(f) < 18+40 || binary.BigEndian.Uint16(f[12:]) != 0x8100 || binary.BigEndian.Uint16(f[16:]) != 0x86dd {
		return
	}
	vlan := binary.BigEndian.Uint16(f[14:]) & 0xfff
	pkt := f[18:]
	msg, ok := ndpMessage(pkt)
	if !ok {
		a.count("bad_ndp", 1)
		return
	}
	src, target := netip.AddrFrom16([16]byte(pkt[8:24])), netip.AddrFrom16([16]byte(msg[8:24]))
	now := time.Now()
	switch msg[0] {
	case icmp6NeighborSol:
		a.neighMu.Lock()
		if port, ok := a.portOfAddr(target, vlan); ok && src == port.Addr6.Addr() {
			a.askedFor(NeighborKey{target, vlan}, now)
		}
		a.neighMu.Unlock()
	case icmp6NeighborAdv:
		mac, ok := ndpOption(msg[24:], 2)
		if !ok {
			mac = net.HardwareAddr(bytes.Clone(f[6:12]))
		}
		if target.IsUnspecified() || target.IsMulticast() || mac[0]&1 != 0 {
			return
		}
		a.neighMu.Lock()
		port, ok := a.portOfAddr(target, vlan)
		if !ok || target == port.Addr6.Addr() {
			a.neighMu.Unlock()
			return
		}
		send := a.hear(claim{key: NeighborKey{target, vlan}, mac: mac, override: msg[4]&0x20 != 0}, 0x86dd, now)
		a.neighMu.Unlock()
		send()
	}
}
