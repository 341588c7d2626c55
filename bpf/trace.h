/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * trace.h: `msr ctl trace`, one packet's walk through the stages. Each
 * data path (the LBs', the back-ends') holds a match (its trace map, one
 * entry, id 0 when no trace is on) that its agent sets: a source and a
 * destination address, optionally a protocol and a destination port.
 * A frame that matches is reported when the stage decides what to do
 * with it — sent (and where), dropped (and why), handed to the slow path
 * (and why) — as a perf event carrying the stage's facts (struct
 * msr_trace_event) and the frame's first bytes as they are then, from
 * which the agent reads the TTL and VLAN and the VCP knows the same
 * packet at every stage. Where a packet comes into the router (an LB's
 * external port) the trace follows `remaining` packets; after it (an
 * LB's internal port, a back-end) a stage reports every match up to its
 * `budget`, and the VCP keeps the walks of the packets followed from
 * their way in. With no trace on, a frame costs one array lookup and a
 * test.
 */
#ifndef MSR_TRACE_H
#define MSR_TRACE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "common.h"
#include "ipv6.h"

/* The most of a traced frame sent with its event. */
enum msr_trace_limit {
	MSR_TRACE_HEADER = 96,
};

/* What a stage did with a traced frame. */
enum msr_trace_verdict {
	MSR_TRACE_SENT = 1,    /* out of a port (out_port) */
	MSR_TRACE_DROPPED = 2, /* reason: the stage's drop reason */
	MSR_TRACE_SLOW = 3,    /* to the agent's slow path (reason: why) */
	MSR_TRACE_PASSED = 4,  /* to the host's stack */
};

/* A trace's match, the only entry of a stage's trace map. */
struct msr_trace {
	__u32 id;        /* 0: no trace on */
	__u32 remaining; /* packets still to follow in at an external port */
	__u32 budget;    /* reports left here, in or after the way in */
	__u8 family;     /* 4 or 6 */
	__u8 proto;      /* 0: any */
	__u16 dport;     /* 0: any */
	__u8 src[16];    /* IPv4: the first 4 bytes */
	__u8 dst[16];
};

/* A traced frame at one stage; its first bytes follow it. in_port and
 * out_port are the LB's port indexes (the back-end's: its VLANs);
 * detail is the stage's own: the LB's module, slot and table mode, the
 * back-end's next-hop id. */
struct msr_trace_event {
	__u64 ns; /* bpf_ktime_get_ns */
	__u32 id;
	__u16 verdict; /* enum msr_trace_verdict */
	__u16 reason;
	__u32 in_port;
	__u32 out_port;
	__u32 detail[3];
	__u32 frame_len;
};

/* trace_addr_eq compares n bytes of an address in the frame with one of
 * the match's. */
static __always_inline int trace_addr_eq(const __u8 *a, const __u8 *b, int n)
{
#pragma unroll
	for (int i = 0; i < 16; i++) {
		if (i < n && a[i] != b[i])
			return 0;
	}
	return 1;
}

/* trace_match says whether the frame (its L3 header at l3, of ethertype
 * proto, in network order) is one t asks for and, if it is, counts it
 * against t's budget and, coming in (ingress), its remaining. Ports are
 * read only from an unfragmented datagram's first bytes. */
static __always_inline __u32 trace_match(struct msr_trace *t, void *l3, void *end, __be16 proto, int ingress)
{
	__u8 l4proto;
	void *l4;
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = l3;
		if (t->family != 4 || (void *)(ip + 1) > end)
			return 0;
		if (!trace_addr_eq((__u8 *)&ip->saddr, t->src, 4) || !trace_addr_eq((__u8 *)&ip->daddr, t->dst, 4))
			return 0;
		l4proto = ip->protocol;
		l4 = (ip->frag_off & bpf_htons(0x1fff)) ? NULL : (void *)ip + ((ip->ihl * 4) & 0x3c);
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip = l3;
		if (t->family != 6 || (void *)(ip + 1) > end)
			return 0;
		if (!trace_addr_eq(ip->saddr.in6_u.u6_addr8, t->src, 16) || !trace_addr_eq(ip->daddr.in6_u.u6_addr8, t->dst, 16))
			return 0;
		l4proto = ip->nexthdr;
		l4 = ip + 1;
	} else {
		return 0;
	}
	if (t->proto && l4proto != t->proto)
		return 0;
	if (t->dport) {
		__be16 *ports = l4;
		if (!ports || (l4proto != IPPROTO_TCP && l4proto != IPPROTO_UDP) || (void *)(ports + 2) > end)
			return 0;
		if (bpf_ntohs(ports[1]) != t->dport)
			return 0;
	}
	if (t->budget == 0 || (ingress && t->remaining == 0))
		return 0;
	if (ingress)
		__sync_fetch_and_add(&t->remaining, -1);
	__sync_fetch_and_add(&t->budget, -1);
	return t->id;
}

/* trace_l3 finds the L3 header of a frame that may carry one 802.1Q tag,
 * and its ethertype. */
static __always_inline void *trace_l3(struct ethhdr *eth, void *end, __be16 *proto)
{
	*proto = eth->h_proto;
	if (*proto == bpf_htons(ETH_P_8021Q) || *proto == bpf_htons(ETH_P_8021AD)) {
		struct vlan_hdr *vh = (void *)(eth + 1);
		if ((void *)(vh + 1) > end)
			return NULL;
		*proto = vh->proto;
		return vh + 1;
	}
	return eth + 1;
}

/* trace_frame returns the trace id the frame matches in the stage's
 * trace map (0: none, or no trace on); ingress: it comes into the
 * router here. */
static __always_inline __u32 trace_frame(void *map, void *data, void *end, int ingress)
{
	__u32 zero = 0;
	struct msr_trace *t = bpf_map_lookup_elem(map, &zero);
	if (!t || !t->id)
		return 0;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return 0;
	__be16 proto;
	void *l3 = trace_l3(eth, end, &proto);
	if (!l3)
		return 0;
	return trace_match(t, l3, end, proto, ingress);
}

/* trace_emit reports a traced frame at this stage to the agent through
 * events, its first MSR_TRACE_HEADER bytes as they are now. */
static __always_inline void trace_emit(struct xdp_md *ctx, void *events, struct msr_trace_event *ev)
{
	__u64 len = ctx->data_end - ctx->data;
	__u64 cap = len < MSR_TRACE_HEADER ? len : MSR_TRACE_HEADER;
	ev->ns = bpf_ktime_get_ns();
	ev->frame_len = len;
	bpf_perf_event_output(ctx, events, BPF_F_CURRENT_CPU | (cap << 32), ev, sizeof(*ev));
}

#endif
