// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/*
 * xdpfib: the peer msr's back-end is measured against (`msr bench fwd
 * --dut xdp-fib`): XDP forwarding by the kernel's own FIB through the
 * bpf_fib_lookup helper, as xdp-tools' xdp-forward and the kernel's xdp_fwd
 * sample forward, with the back-end's egress: the TTL or hop limit
 * decremented (RFC 1624's incremental checksum), an 802.1Q tag for the
 * egress port's VLAN, the neighbour's MAC, and back out of the port it
 * came in by (XDP_TX) or redirected to another.
 *
 * fib_vlans says which egress devices are tagged, with which VLAN id,
 * and the device to send by (the loader fills it): a VLAN device (eth0.10,
 * which bpf_fib_lookup names as the egress and XDP cannot send by) maps
 * to its lower device, or a port tagged as the back-end tags its ports
 * (the bench's eth0 on kernels without VLAN devices) to itself. A device
 * it lacks is sent to untagged. The lookup is BPF_FIB_LOOKUP_DIRECT: the
 * main table without the policy rules, the helper's cheapest full
 * lookup.
 *
 * Verdicts: XDP_TX or XDP_REDIRECT, forwarded; XDP_DROP, a blackhole,
 * unreachable or prohibited route (and a runt); XDP_PASS, what the
 * kernel must do (no neighbour yet, a TTL expiring, not forwarded, not
 * IP). Each is counted in fib_counts.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "common.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* An egress device's VLAN: the device to send by and the VLAN id. */
struct fib_vlan {
	__u32 lower;
	__u16 vid;
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32); /* the egress device's ifindex */
	__type(value, struct fib_vlan);
} fib_vlans SEC(".maps");

/* What became of the frames, per CPU. */
enum fib_outcome {
	FIB_FORWARDED,
	FIB_PASSED,
	FIB_DROPPED,
	FIB_OUTCOMES,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FIB_OUTCOMES);
	__type(key, __u32);
	__type(value, __u64);
} fib_counts SEC(".maps");

const enum fib_outcome *unused_fib_outcome __attribute__((unused));

static __always_inline int outcome(enum fib_outcome o, int verdict)
{
	__u32 k = o;
	__u64 *n = bpf_map_lookup_elem(&fib_counts, &k);

	if (n)
		(*n)++;
	return verdict;
}

SEC("xdp")
int xdpfib(struct xdp_md *ctx)
{
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = (void *)(long)ctx->data;
	struct bpf_fib_lookup fib = {};
	struct iphdr *ip = NULL;
	struct ipv6hdr *ip6 = NULL;

	if ((void *)(eth + 1) > end)
		return outcome(FIB_DROPPED, XDP_DROP);
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > end)
			return outcome(FIB_DROPPED, XDP_DROP);
		if (ip->ttl <= 1)
			return outcome(FIB_PASSED, XDP_PASS); /* the kernel's ICMP time exceeded */
		fib.family = FIB_AF_INET;
		fib.tos = ip->tos;
		fib.l4_protocol = ip->protocol;
		fib.tot_len = bpf_ntohs(ip->tot_len);
		fib.ipv4_src = ip->saddr;
		fib.ipv4_dst = ip->daddr;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > end)
			return outcome(FIB_DROPPED, XDP_DROP);
		if (ip6->hop_limit <= 1)
			return outcome(FIB_PASSED, XDP_PASS);
		fib.family = FIB_AF_INET6;
		fib.flowinfo = *(__be32 *)ip6 & bpf_htonl(0x0fffffff);
		fib.l4_protocol = ip6->nexthdr;
		fib.tot_len = bpf_ntohs(ip6->payload_len);
		__builtin_memcpy(fib.ipv6_src, &ip6->saddr, sizeof(fib.ipv6_src));
		__builtin_memcpy(fib.ipv6_dst, &ip6->daddr, sizeof(fib.ipv6_dst));
	} else {
		return outcome(FIB_PASSED, XDP_PASS);
	}
	fib.ifindex = ctx->ingress_ifindex;
	switch (bpf_fib_lookup(ctx, &fib, sizeof(fib), BPF_FIB_LOOKUP_DIRECT)) {
	case BPF_FIB_LKUP_RET_SUCCESS:
		break;
	case BPF_FIB_LKUP_RET_BLACKHOLE:
	case BPF_FIB_LKUP_RET_UNREACHABLE:
	case BPF_FIB_LKUP_RET_PROHIBIT:
		return outcome(FIB_DROPPED, XDP_DROP);
	default:
		return outcome(FIB_PASSED, XDP_PASS);
	}
	if (ip)
		ttl_down(ip);
	else if (ip6)
		ip6->hop_limit--;
	__u32 out = fib.ifindex;
	struct fib_vlan *v = bpf_map_lookup_elem(&fib_vlans, &out);
	if (v) {
		out = v->lower;
		if (push_vlan(ctx, v->vid))
			return outcome(FIB_DROPPED, XDP_DROP);
	}
	eth = (void *)(long)ctx->data;
	if ((void *)(eth + 1) > (void *)(long)ctx->data_end)
		return outcome(FIB_DROPPED, XDP_DROP);
	__builtin_memcpy(eth->h_dest, fib.dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, fib.smac, ETH_ALEN);
	if (out == ctx->ingress_ifindex)
		return outcome(FIB_FORWARDED, XDP_TX);
	return outcome(FIB_FORWARDED, bpf_redirect(out, 0));
}
