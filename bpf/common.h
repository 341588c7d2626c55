/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * common.h: what every msr data path shares — the interconnect's framing
 * (DIST's EtherType, the 802.1Q tag that names an external port), MAC
 * helpers, VLAN push and pop, and the flow hash.
 *
 * The flow hash is the same function at every stage, but each stage mixes
 * in its own seed (enum flow_seed). With one hash everywhere, the stages
 * would be correlated: behind an LB hashing flows over two back-ends, every
 * flow that reaches back-end A has the same hash parity, so A's 2-way ECMP
 * would send all of them to one next hop. The Go reference models use
 * internal/flow, the same function (a differential test holds them to it).
 */
#ifndef MSR_COMMON_H
#define MSR_COMMON_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* DIST, the internal control protocol (docs/dist.md): a local
 * experimental EtherType (IEEE 802 "Local Experimental Ethertype 1").
 * An enum, so that Go's side is generated (dist.EtherType is checked
 * against it). */
enum msr_ethertype {
	ETH_P_DIST = 0x88B5,
};

/* What a data path reads of a DIST frame: byte 1 of its header, the
 * message type, and the one type a data path acts on itself (a PROBE,
 * which a back-end reflects to the LB that timed it). */
enum dist_wire {
	DIST_TYPE_OFF = 1,
	DIST_TYPE_PROBE = 5,
};

/* The 802.1Q tag after the MAC addresses. */
struct vlan_hdr {
	__be16 tci;
	__be16 proto;
};

/* Each stage's flow-hash seed: independent hashes per stage (above). */
enum flow_seed {
	FLOW_SEED_LB = 0x5bd1e995,
	FLOW_SEED_RT = 0x27d4eb2f,
	FLOW_SEED_POLICE = 0x165667b1, /* the LB's policing buckets */
};

/* Address families, as linux/socket.h has them (not includable here):
 * bpf_fib_lookup's params.family. */
enum {
	FIB_AF_INET = 2,
	FIB_AF_INET6 = 10,
};

/* Keep the shared enums in BTF, so that bpf2go generates their Go names
 * for every program that includes this header. */
const enum flow_seed *unused_flow_seed __attribute__((unused));
const enum msr_ethertype *unused_msr_ethertype __attribute__((unused));

/* mac_key is a MAC's six bytes in memory order in the low bytes of a u64:
 * a map key, and a cheap comparison. */
static __always_inline __u64 mac_key(const __u8 *mac)
{
	__u64 k = 0;

	__builtin_memcpy(&k, mac, ETH_ALEN);
	return k;
}

static __always_inline int is_multicast(const __u8 *mac)
{
	return mac[0] & 1;
}

static __always_inline int same_mac(const __u8 *a, const __u8 *b)
{
	return mac_key(a) == mac_key(b);
}

/* push_vlan inserts an 802.1Q tag with vid after the MAC addresses. The
 * frame's pointers are invalid afterwards. The MACs go through the stack:
 * the old and new places overlap. */
static __always_inline int push_vlan(struct xdp_md *ctx, __u16 vid)
{
	struct ethhdr *eth = (void *)(long)ctx->data;
	__u8 macs[2 * ETH_ALEN];

	if ((void *)(eth + 1) > (void *)(long)ctx->data_end)
		return -1;
	__be16 proto = eth->h_proto;
	__builtin_memcpy(macs, eth, sizeof(macs));
	if (bpf_xdp_adjust_head(ctx, -(int)sizeof(struct vlan_hdr)))
		return -1;
	eth = (void *)(long)ctx->data;
	struct vlan_hdr *vh = (void *)(eth + 1);
	if ((void *)(vh + 1) > (void *)(long)ctx->data_end)
		return -1;
	__builtin_memcpy(eth, macs, sizeof(macs));
	eth->h_proto = bpf_htons(ETH_P_8021Q);
	vh->tci = bpf_htons(vid & 0x0fff);
	vh->proto = proto;
	return 0;
}

/* ttl_down decrements an IPv4 header's TTL and mends its checksum: RFC
 * 1624 eqn. 3, HC' = ~(~HC + ~m + m'), m the 16-bit word holding TTL and
 * protocol. */
static __always_inline void ttl_down(struct iphdr *ip)
{
	__u16 old = *(__u16 *)&ip->ttl;

	ip->ttl--;
	__u16 new = *(__u16 *)&ip->ttl;
	__u32 sum = (__u16)~ip->check + (__u16)~old + new;
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	ip->check = ~sum;
}

/* pop_vlan removes the outer tag. The frame's pointers are invalid
 * afterwards. */
static __always_inline int pop_vlan(struct xdp_md *ctx)
{
	struct ethhdr *eth = (void *)(long)ctx->data;
	struct vlan_hdr *vh = (void *)(eth + 1);
	__u8 macs[2 * ETH_ALEN];

	if ((void *)(vh + 1) > (void *)(long)ctx->data_end)
		return -1;
	__be16 inner = vh->proto;
	__builtin_memcpy(macs, eth, sizeof(macs));
	if (bpf_xdp_adjust_head(ctx, (int)sizeof(struct vlan_hdr)))
		return -1;
	eth = (void *)(long)ctx->data;
	if ((void *)(eth + 1) > (void *)(long)ctx->data_end)
		return -1;
	__builtin_memcpy(eth, macs, sizeof(macs));
	eth->h_proto = inner;
	return 0;
}

/* flow_hash mixes a flow's addresses (as they lie in the packet), its
 * ports (source << 16 | destination, host order; 0 for fragments and
 * protocols without ports) and protocol, with a stage's seed: murmur3's
 * finalizer steps. internal/flow's Hash is the same function. */
static __always_inline __u32 flow_hash(__u32 saddr, __u32 daddr, __u32 ports, __u32 proto, __u32 seed)
{
	__u32 h = (saddr ^ seed) * 0x9e3779b1u;

	h ^= daddr;
	h ^= h >> 15;
	h *= 0x85ebca6bu;
	h ^= ports;
	h ^= proto << 24;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	h ^= h >> 16;
	return h;
}

#endif /* MSR_COMMON_H */
