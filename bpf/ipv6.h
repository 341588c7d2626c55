/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * ipv6.h: what the data paths read of IPv6 (RFC 8200): the extension
 * header chain walked to the transport header (ip6_walk), the address
 * helpers, and the ICMPv6 checksum over its pseudo-header (RFC 4443 §2.3)
 * that Neighbor Discovery (RFC 4861) needs when a data path writes a
 * message. lb/model.go's walkIPv6 is ip6_walk in Go.
 */
#ifndef MSR_IPV6_H
#define MSR_IPV6_H

#include <linux/bpf.h>
#include <linux/ipv6.h>
#include <bpf/bpf_endian.h>

/* Next Header values (IANA's "Protocol Numbers"; the IPv6 extension
 * headers are those RFC 8200 §4 and RFC 7045 list). */
enum ip6_nexthdr {
	IP6_NH_HOP = 0,        /* Hop-by-Hop Options */
	IP6_NH_TCP = 6,
	IP6_NH_UDP = 17,
	IP6_NH_ROUTING = 43,
	IP6_NH_FRAGMENT = 44,
	IP6_NH_ESP = 50,       /* ends the walk: what follows is encrypted */
	IP6_NH_AH = 51,        /* length in 4-byte units, less 2 */
	IP6_NH_ICMP = 58,
	IP6_NH_NONE = 59,
	IP6_NH_DSTOPTS = 60,
	IP6_NH_OSPF = 89,
	IP6_NH_MOBILITY = 135,
	IP6_NH_HIP = 139,
	IP6_NH_SHIM6 = 140,
};

/* Neighbor Discovery's ICMPv6 types (RFC 4861). */
#define ICMP6_RS 133 /* router solicitation */
#define ICMP6_RA 134
#define ICMP6_NS 135
#define ICMP6_NA 136
#define ICMP6_REDIRECT 137

/* How far a walk goes: at most IP6_EXT_MAX extension headers, and the
 * transport header no further than IP6_EXT_BYTES into the packet. A chain
 * longer than either is not malformed, only more than a balancer reads:
 * the packet is balanced on its addresses (w.deep). */
enum ip6_limit {
	IP6_EXT_MAX = 6,
	IP6_EXT_BYTES = 512,
};

/* Keep the enums in BTF, so that bpf2go generates their Go names. */
const enum ip6_nexthdr *unused_ip6_nexthdr __attribute__((unused));
const enum ip6_limit *unused_ip6_limit __attribute__((unused));

/* Where a walk ended. */
struct ip6_walk {
	__u32 off;  /* the transport header's offset from the IPv6 header */
	__u8 proto; /* its protocol: the chain's last Next Header */
	__u8 frag;  /* a Fragment header says it is a fragment: no ports */
	__u8 deep;  /* the chain went past IP6_EXT_MAX or IP6_EXT_BYTES */
};

static __always_inline int ip6_is_ext(__u8 nh)
{
	return nh == IP6_NH_HOP || nh == IP6_NH_ROUTING || nh == IP6_NH_FRAGMENT || nh == IP6_NH_AH ||
	       nh == IP6_NH_DSTOPTS || nh == IP6_NH_MOBILITY || nh == IP6_NH_HIP || nh == IP6_NH_SHIM6;
}

/* ip6_walk follows ip's chain of extension headers to the transport
 * header. plen_end is where the packet ends by its Payload Length (the
 * frame may be padded past it), end is the frame's end: every header must
 * lie before both. Returns 0, or -1 for a chain that runs past the
 * packet (malformed). */
static __always_inline int ip6_walk(struct ipv6hdr *ip, void *end, __u32 plen_end, struct ip6_walk *w)
{
	__u8 nh = ip->nexthdr;
	__u32 off = sizeof(*ip);

	w->frag = 0;
	w->deep = 0;
#pragma unroll
	for (int i = 0; i < IP6_EXT_MAX; i++) {
		if (!ip6_is_ext(nh))
			break;
		if (off > IP6_EXT_BYTES) {
			w->deep = 1;
			break;
		}
		__u8 *h = (void *)ip + off;
		if ((void *)(h + 8) > end || off + 8 > plen_end)
			return -1;
		__u32 len;
		if (nh == IP6_NH_FRAGMENT) {
			/* offset (13 bits) and M: either set, a fragment */
			if ((h[2] << 8 | h[3]) & 0xfff9)
				w->frag = 1;
			len = 8;
		} else if (nh == IP6_NH_AH) {
			len = ((__u32)h[1] + 2) * 4;
		} else {
			len = ((__u32)h[1] + 1) * 8;
		}
		nh = h[0];
		off += len;
	}
	if (ip6_is_ext(nh) || off > IP6_EXT_BYTES)
		w->deep = 1;
	w->off = off;
	w->proto = nh;
	return 0;
}

static __always_inline int ip6_equal(const struct in6_addr *a, const struct in6_addr *b)
{
	return a->in6_u.u6_addr32[0] == b->in6_u.u6_addr32[0] && a->in6_u.u6_addr32[1] == b->in6_u.u6_addr32[1] &&
	       a->in6_u.u6_addr32[2] == b->in6_u.u6_addr32[2] && a->in6_u.u6_addr32[3] == b->in6_u.u6_addr32[3];
}

static __always_inline int ip6_is_zero(const struct in6_addr *a)
{
	return (a->in6_u.u6_addr32[0] | a->in6_u.u6_addr32[1] | a->in6_u.u6_addr32[2] | a->in6_u.u6_addr32[3]) == 0;
}

/* ip6_fold is an address's four words XORed: the flow hash's 32 bits of
 * it. */
static __always_inline __u32 ip6_fold(const struct in6_addr *a)
{
	return a->in6_u.u6_addr32[0] ^ a->in6_u.u6_addr32[1] ^ a->in6_u.u6_addr32[2] ^ a->in6_u.u6_addr32[3];
}

/* csum_words adds n 16-bit words at p (in network order) to sum. */
static __always_inline __u32 csum_words(const __be16 *p, int n, __u32 sum)
{
#pragma unroll
	for (int i = 0; i < n; i++)
		sum += bpf_ntohs(p[i]);
	return sum;
}

static __always_inline __be16 csum_fold(__u32 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return bpf_htons(~sum & 0xffff);
}

/* csum_replace6 updates checksum *csum for six bytes (three aligned
 * words) that change from old to new (RFC 1624, eqn. 3). */
static __always_inline void csum_replace6(__be16 *csum, const __u8 *old, const __u8 *new)
{
	__u32 sum = ~bpf_ntohs(*csum) & 0xffff;

#pragma unroll
	for (int i = 0; i < 6; i += 2) {
		sum += ~((__u32)old[i] << 8 | old[i + 1]) & 0xffff;
		sum += (__u32)new[i] << 8 | new[i + 1];
	}
	*csum = csum_fold(sum);
}

#endif /* MSR_IPV6_H */
