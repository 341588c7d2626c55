// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/*
 * router: the back-end router's data path, attached with XDP to its port
 * on the interconnect (DESIGN.md §2 step 3; seed 000 §5).
 *
 * A data frame balanced to this back-end (destination MAC its own) is
 * checked as RFC 1812 §5.2.2 and §5.3.7 ask (version, IHL, lengths, header
 * checksum, source and destination sanity), filtered by the ordered ACL,
 * looked up in the DIR-24-8 FIB (router.h), given an ECMP next hop by flow
 * hash, and sent back into the interconnect (XDP_TX) tagged with the VLAN
 * of the egress external port, to the next hop's MAC, its TTL decremented
 * and its checksum updated incrementally (RFC 1624). IPv6 (route6) takes
 * the same steps with RFC 8200's rules and the IPv6 trie.
 *
 * What the fast path cannot finish goes to the agent (enum rt_slow) as a
 * perf event with the frame attached, and is dropped here: the agent
 * answers it (ICMP errors, echo), resolves the next hop and sends what it
 * held, or forwards it itself (options, fragmentation). DIST, untagged ARP
 * and traffic for this host's own addresses go to the kernel stack
 * (XDP_PASS), except an LB's DIST PROBE, sent back to it (XDP_TX).
 *
 * A back-end given a capacity (rt_cap, cap.h; off by default) drops the
 * frames to route beyond it, counted as cap.
 *
 * Verdicts: XDP_TX, XDP_PASS, XDP_DROP. Counters: rt_stats (per CPU).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>

#include "cap.h"
#include "common.h"
#include "fib.h"
#include "infra.h"
#include "ipv6.h"
#include "router.h"
#include "trace.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* Keep the enums in BTF for bpf2go. */
const enum rt_slow *unused_rt_slow __attribute__((unused));
const enum dist_wire *unused_dist_wire __attribute__((unused));
const enum rt_drop *unused_rt_drop __attribute__((unused));
const enum rt_urpf *unused_rt_urpf __attribute__((unused));
const struct rt_slow_meta *unused_rt_slow_meta __attribute__((unused));
const struct rt_nhgroup *unused_rt_nhgroup __attribute__((unused));
const struct rt_tbl24_chunk *unused_rt_tbl24_chunk __attribute__((unused));
const enum rt_limit *unused_rt_limit __attribute__((unused));
const enum rt_local_kind *unused_rt_local_kind __attribute__((unused));
const enum rt_acl_action *unused_rt_acl_action __attribute__((unused));
const struct rt_neigh6_key *unused_rt_neigh6_key __attribute__((unused));
const struct msr_infra *unused_msr_infra __attribute__((unused));
const struct msr_trace_event *unused_msr_trace_event __attribute__((unused));
const enum msr_trace_verdict *unused_msr_trace_verdict __attribute__((unused));
const enum msr_trace_limit *unused_msr_trace_limit __attribute__((unused));
const enum msr_infra_limit *unused_msr_infra_limit __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, RT_MAX_NEIGHBORS6);
	__type(key, struct rt_neigh6_key);
	__type(value, struct rt_neigh);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rt_neighbors6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, RT_MAX_LOCAL6);
	__type(key, struct in6_addr);
	__type(value, __u32); /* enum rt_local_kind */
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rt_local6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RT_MAX_NHGROUPS);
	__type(key, __u32);
	__type(value, struct rt_nhgroup);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rt_nhgroups SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RT_MAX_NEXTHOPS);
	__type(key, __u32);
	__type(value, struct rt_nexthop);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rt_nexthops SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RT_PORTS);
	__type(key, __u32);
	__type(value, struct rt_port);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rt_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, RT_MAX_NEIGHBORS);
	__type(key, struct rt_neigh_key);
	__type(value, struct rt_neigh);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rt_neighbors SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, RT_MAX_LOCAL);
	__type(key, __be32);
	__type(value, __u32); /* enum rt_local_kind */
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rt_local SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RT_MAX_ACL);
	__type(key, __u32);
	__type(value, struct rt_acl_rule);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rt_acl SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rt_config);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rt_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4096);
	__type(key, __u32); /* VLAN id */
	__type(value, struct rt_vlan);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rt_vlans SEC(".maps");

/* The router's inside (infra.h): the only sources this host's own
 * addresses take. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct msr_infra);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rt_infra SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rt_stats);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rt_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct msr_cap);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rt_cap SEC(".maps");

/* Each slow-path reason's rate and burst (cap.h's bucket; 0: none),
 * checked before a frame is queued to the agent: a flood of one reason
 * (TTL 1, no route, unresolved destinations) spends its own bucket, not
 * the others' room in the channel (ARP and NDP learning, PMTUD's
 * Fragmentation Needed). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RT_SLOW_MAX);
	__type(key, __u32); /* enum rt_slow */
	__type(value, struct msr_cap);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rt_slow_caps SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} rt_slowpath SEC(".maps");

/* msr trace's match (trace.h), set by the agent, and its reports. Not
 * pinned: a trace lasts seconds, and an agent started again has none. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct msr_trace);
} rt_trace SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} rt_trace_events SEC(".maps");

/* A frame being routed: its context and counters, and for data from an
 * external port with unicast RPF the port's VLAN (in_vlan) and check
 * (urpf). Such a frame keeps the tag its LB gave it (tagged): forwarding
 * rewrites the VLAN id in place, cheaper than a pop and a push; a frame
 * for the agent or the kernel loses it first. */
struct pkt {
	struct xdp_md *ctx;
	struct rt_stats *st;
	__u16 in_vlan;
	__u8 urpf;
	__u8 tagged;
	__u32 trace; /* the id of the trace it matched, 0: none (trace.h) */
	__u32 nhid;  /* its next hop's id, once chosen */
};

/* rt_trace_report reports a traced frame's verdict (trace.h): out is the
 * egress VLAN. */
static __noinline void rt_trace_report(struct pkt *p, __u16 verdict, __u16 reason, __u32 out)
{
	struct msr_trace_event ev = {.id = p->trace, .verdict = verdict, .reason = reason, .in_port = p->in_vlan,
				     .out_port = out, .detail = {p->nhid}};
	trace_emit(p->ctx, &rt_trace_events, &ev);
}

static __always_inline int drop(struct pkt *p, enum rt_drop why)
{
	if (why < RT_DROP_MAX)
		p->st->drop[why]++;
	if (p->trace)
		rt_trace_report(p, MSR_TRACE_DROPPED, why, 0);
	return XDP_DROP;
}

/* untag takes off the tag a data frame kept (struct pkt) before the agent
 * or the kernel sees it: they read routed frames untagged. */
static __always_inline int untag(struct pkt *p)
{
	if (!p->tagged)
		return 0;
	p->tagged = 0;
	return pop_vlan(p->ctx);
}

/* slow hands the frame to the agent with its reason, within the reason's
 * rate (rt_slow_caps; over it: dropped, counted slow_drop). */
static __always_inline int slow(struct pkt *p, enum rt_slow why, __u32 nexthop)
{
	__u32 key = why;

	if (p->trace) {
		p->nhid = nexthop;
		rt_trace_report(p, MSR_TRACE_SLOW, why, 0);
		p->trace = 0; /* reported: not again as a drop */
	}

	/* Each index checked where it is used: the verifier loses a bound
	 * kept across the helper calls. */
	if (!cap_admit(bpf_map_lookup_elem(&rt_slow_caps, &key))) {
		if (why < RT_SLOW_MAX)
			p->st->slow_drop[why]++;
		return XDP_DROP;
	}
	if (untag(p))
		return drop(p, RT_DROP_RUNT);
	__u64 len = p->ctx->data_end - p->ctx->data;
	struct rt_slow_meta meta = {.reason = why, .ifindex = p->ctx->ingress_ifindex, .nexthop = nexthop, .len = len};
	if (len > RT_SLOW_SNAPLEN)
		len = RT_SLOW_SNAPLEN;
	if (why < RT_SLOW_MAX)
		p->st->slow[why]++;
	bpf_perf_event_output(p->ctx, &rt_slowpath, BPF_F_CURRENT_CPU | (len << 32), &meta, sizeof(meta));
	return XDP_DROP;
}

/* deny drops a frame the ACL denied, counted as that drop, and hands it
 * to the slow path, which answers Destination Unreachable,
 * administratively prohibited (rate-limited as every ICMP error). */
static __always_inline int deny(struct pkt *p)
{
	p->st->drop[RT_DROP_ACL]++;
	if (p->trace) {
		rt_trace_report(p, MSR_TRACE_DROPPED, RT_DROP_ACL, 0);
		p->trace = 0; /* its answer from the slow path is no verdict */
	}
	return slow(p, RT_SLOW_ACL, 0);
}

/* ipv4_csum_ok verifies the checksum of a 20-byte header (the caller has
 * checked its bounds). Headers with options go to the slow path, which
 * checks theirs. */
static __always_inline int ipv4_csum_ok(struct iphdr *ip)
{
	__u16 *w = (void *)ip;
	__u32 sum = 0;

#pragma unroll
	for (int i = 0; i < 10; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return sum == 0xffff;
}

static __always_inline int martian_src(__u32 s)
{
	return (s >> 24) == 0 || (s >> 24) == 127 || (s >> 28) == 0xe || (s >> 28) == 0xf;
}

static __always_inline int martian_dst(__u32 d)
{
	return (d >> 24) == 0 || (d >> 24) == 127 || (d >> 28) == 0xe || (d >> 28) == 0xf;
}

/* The ACL walk runs in a bpf_loop callback, which cannot read the packet:
 * the fields it matches are copied here first. */
struct acl_ctx {
	__be32 saddr, daddr;
	__be32 saddr6[4], daddr6[4];
	__u8 family; /* 4 or 6 */
	__u8 proto;
	__u16 sport, dport;
	__u32 n;
	int verdict; /* 0: no rule matched */
	__u32 rule;
};

static __always_inline int masked6_ne(const __be32 *a, const __be32 *mask, const __be32 *want)
{
	return ((a[0] & mask[0]) != want[0]) | ((a[1] & mask[1]) != want[1]) | ((a[2] & mask[2]) != want[2]) |
	       ((a[3] & mask[3]) != want[3]);
}

static long acl_match(__u64 i, void *data)
{
	struct acl_ctx *c = data;
	__u32 k = i;

	if (k >= c->n)
		return 1;
	struct rt_acl_rule *r = bpf_map_lookup_elem(&rt_acl, &k);
	if (!r)
		return 1;
	if (r->family && r->family != c->family)
		return 0;
	if (c->family == 4) {
		if ((c->saddr & r->src_mask) != r->src || (c->daddr & r->dst_mask) != r->dst)
			return 0;
	} else if (masked6_ne(c->saddr6, r->src6_mask, r->src6) || masked6_ne(c->daddr6, r->dst6_mask, r->dst6)) {
		return 0;
	}
	if (r->proto && r->proto != c->proto)
		return 0;
	if (c->sport < r->sport_lo || c->sport > r->sport_hi || c->dport < r->dport_lo || c->dport > r->dport_hi)
		return 0;
	c->verdict = r->action;
	c->rule = k;
	return 1;
}

/* acl_run runs the ordered rules over c; the first that matches decides.
 * No match permits. Returns 1 to drop. */
static __always_inline int acl_run(struct pkt *p, struct acl_ctx *c)
{
	bpf_loop(RT_MAX_ACL, acl_match, c, 0);
	if (c->rule >= RT_MAX_ACL)
		return 0;
	if (c->verdict == RT_ACL_DENY) {
		p->st->acl_deny[c->rule]++;
		return 1;
	}
	if (c->verdict == RT_ACL_PERMIT)
		p->st->acl_permit[c->rule]++;
	return 0;
}

/* acl filters an IPv4 packet. */
static __always_inline int acl(struct pkt *p, struct iphdr *ip, void *end, __u32 ihl, __u16 n)
{
	struct acl_ctx c = {.saddr = ip->saddr, .daddr = ip->daddr, .family = 4, .proto = ip->protocol, .n = n, .rule = RT_MAX_ACL};

	if (!n)
		return 0;
	if (!(ip->frag_off & bpf_htons(0x1fff)) && (ip->protocol == IPPROTO_TCP || ip->protocol == IPPROTO_UDP)) {
		__be16 *l4 = (void *)ip + (ihl & 0xf) * 4;
		if ((void *)(l4 + 2) <= end) {
			c.sport = bpf_ntohs(l4[0]);
			c.dport = bpf_ntohs(l4[1]);
		}
	}
	return acl_run(p, &c);
}

/* acl6 filters an IPv6 packet: its protocol and ports are the transport
 * header's, found past the extension headers (ip6_walk); a fragment after
 * the first, or a chain longer than the walk reads, has no ports (as an
 * IPv4 fragment has none), and the protocol is the chain's last Next
 * Header the walk reached. A chain that runs past the packet: dropped as
 * bad_length. */
static __always_inline int acl6(struct pkt *p, struct ipv6hdr *ip, void *end, __u32 tot, __u16 n)
{
	struct acl_ctx c = {.family = 6, .n = n, .rule = RT_MAX_ACL};
	struct ip6_walk w;

	if (!n)
		return 0;
	__builtin_memcpy(c.saddr6, &ip->saddr, 16);
	__builtin_memcpy(c.daddr6, &ip->daddr, 16);
	if (ip6_walk(ip, end, tot, &w))
		return -1;
	c.proto = w.proto;
	if (!w.deep && !w.frag && (w.proto == IPPROTO_TCP || w.proto == IPPROTO_UDP)) {
		__u32 off = w.off;
		if (off > IP6_EXT_BYTES)
			return -1;
		__u8 *l4 = (void *)ip + off;
		if ((void *)(l4 + 4) <= end && off + 4 <= tot) {
			c.sport = (__u16)l4[0] << 8 | l4[1];
			c.dport = (__u16)l4[2] << 8 | l4[3];
		}
	}
	return acl_run(p, &c);
}

/* ipv4_ports is what the flow hash takes of the transport header: source
 * << 16 | destination for TCP and UDP, 0 for fragments (all of a
 * datagram's fragments take one path) and other protocols. */
static __always_inline __u32 ipv4_ports(struct iphdr *ip, void *end, __u32 ihl)
{
	if ((ip->frag_off & bpf_htons(0x3fff)) || (ip->protocol != IPPROTO_TCP && ip->protocol != IPPROTO_UDP))
		return 0;
	__be16 *l4 = (void *)ip + (ihl & 0xf) * 4;
	if ((void *)(l4 + 2) > end)
		return 0;
	return (__u32)bpf_ntohs(l4[0]) << 16 | bpf_ntohs(l4[1]);
}

/* to_local is the verdict for a packet to a local address of kind (enum
 * rt_local_kind): this host's to the kernel if it comes from the
 * router's inside (inside: whether its source is), else it came by an
 * LB's balance path from outside and is dropped (infra_dropped); the
 * router's to the slow path. */
static __always_inline int to_local(struct pkt *p, __u32 kind, int inside)
{
	if (kind & RT_LOCAL_HOST) {
		if (!inside)
			return drop(p, RT_DROP_INFRA);
		if (untag(p))
			return drop(p, RT_DROP_RUNT);
		p->st->passed++;
		if (p->trace)
			rt_trace_report(p, MSR_TRACE_PASSED, 0, 0);
		return XDP_PASS;
	}
	return slow(p, RT_SLOW_LOCAL, 0);
}

/* inside4 and inside6 say whether a source is inside the router
 * (rt_infra). */
static __always_inline int inside4(__be32 saddr)
{
	__u32 zero = 0;
	struct msr_infra *in = bpf_map_lookup_elem(&rt_infra, &zero);

	return in && infra_has4(in, saddr);
}

static __always_inline int inside6(const struct in6_addr *saddr)
{
	__u32 zero = 0;
	struct msr_infra *in = bpf_map_lookup_elem(&rt_infra, &zero);

	return in && infra_has6(in, saddr->in6_u.u6_addr32);
}

/* nhgroup is next-hop group g of a FIB entry, or NULL if it is not a
 * group of 1 to RT_ECMP_MAX next hops (bad_nexthop). */
static __always_inline struct rt_nhgroup *nhgroup(__u32 g)
{
	struct rt_nhgroup *grp = bpf_map_lookup_elem(&rt_nhgroups, &g);

	if (!grp || grp->count == 0 || grp->count > RT_ECMP_MAX)
		return NULL;
	return grp;
}

/* next_hop is the port of the group's next hop pick (< its count), with
 * the next hop and its id; NULL if the next hop or its port is not there
 * (bad_nexthop). Both families' routes share next hops and ports. */
static __always_inline struct rt_port *next_hop(struct rt_nhgroup *grp, __u32 pick, __u32 *nhid, struct rt_nexthop **nh)
{
	/* pick < count <= RT_ECMP_MAX, a power of two: the mask changes
	 * nothing but shows the verifier the bound. In asm, or clang, which
	 * knows it changes nothing, drops it. */
	asm volatile("%0 &= %1" : "+r"(pick) : "i"(RT_ECMP_MAX - 1));
	*nhid = grp->nh[pick];
	*nh = bpf_map_lookup_elem(&rt_nexthops, nhid);
	if (!*nh)
		return NULL;
	__u32 pi = (*nh)->port;
	struct rt_port *port = bpf_map_lookup_elem(&rt_ports, &pi);
	if (!port || port->vlan == 0)
		return NULL;
	return port;
}

/* egress sends a rewritten packet of len bytes (its IP packet's, with the
 * Ethernet header but no tag): an 802.1Q tag for the egress port's VLAN,
 * the kept one's id rewritten or a new one pushed, the next hop's MAC,
 * ours. */
static __always_inline int egress(struct pkt *p, struct rt_port *port, struct rt_neigh *nb, struct rt_config *cfg, __u64 len)
{
	if (p->tagged) {
		struct vlan_hdr *vh = (void *)(long)p->ctx->data + sizeof(struct ethhdr);
		if ((void *)(vh + 1) > (void *)(long)p->ctx->data_end)
			return drop(p, RT_DROP_RUNT);
		vh->tci = bpf_htons(port->vlan & 0x0fff);
	} else if (push_vlan(p->ctx, port->vlan)) {
		return drop(p, RT_DROP_RUNT);
	}
	struct ethhdr *eth = (void *)(long)p->ctx->data;
	if ((void *)(eth + 1) > (void *)(long)p->ctx->data_end)
		return drop(p, RT_DROP_RUNT);
	__builtin_memcpy(eth->h_dest, nb->mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, cfg->mac, ETH_ALEN);
	p->st->forwarded++;
	p->st->forwarded_bytes += len;
	if (p->trace)
		rt_trace_report(p, MSR_TRACE_SENT, 0, port->vlan);
	return XDP_TX;
}

/* forward rewrites and sends: TTL-1 (RFC 1624 incremental checksum), an
 * 802.1Q tag for the egress port's VLAN, next hop's MAC. */
static __always_inline int forward(struct pkt *p, struct iphdr *ip, struct rt_port *port, struct rt_neigh *nb,
				   struct rt_config *cfg)
{
	void *end = (void *)(long)p->ctx->data_end;

	if ((void *)(ip + 1) > end)
		return drop(p, RT_DROP_RUNT);
	ttl_down(ip);
	return egress(p, port, nb, cfg, end - (void *)ip + sizeof(struct ethhdr));
}

/* forward6 rewrites and sends an IPv6 packet: Hop Limit - 1 (no header
 * checksum to mend), the rest as forward. */
static __always_inline int forward6(struct pkt *p, struct ipv6hdr *ip, struct rt_port *port, struct rt_neigh *nb,
				    struct rt_config *cfg)
{
	void *end = (void *)(long)p->ctx->data_end;

	if ((void *)(ip + 1) > end)
		return drop(p, RT_DROP_RUNT);
	ip->hop_limit--;
	return egress(p, port, nb, cfg, end - (void *)ip + sizeof(struct ethhdr));
}

/* dist hands DIST frames to the agent, except a PROBE for this back-end:
 * sent straight back to the LB that sent it (MACs swapped, XDP_TX), so the
 * LB times its path through this back-end's queues (lb/pathprobe.go). It
 * is not checked here: the HMAC covers the swapped MACs, so only its
 * sender can check it, and reflecting a frame gives a forger nothing he
 * could not send himself. */
static __always_inline int dist(struct pkt *p, struct ethhdr *eth, void *end, struct rt_config *cfg)
{
	__u8 *type = (__u8 *)(eth + 1) + DIST_TYPE_OFF;

	if ((void *)(type + 1) > end || *type != DIST_TYPE_PROBE || !same_mac(eth->h_dest, cfg->mac) ||
	    is_multicast(eth->h_source)) {
		p->st->passed++;
		return XDP_PASS;
	}
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, cfg->mac, ETH_ALEN);
	p->st->probes++;
	return XDP_TX;
}

/* urpf_ok says whether a source whose FIB entry is next-hop group g may
 * come in by the port of VLAN vlan (RFC 3704): loose, a route to it;
 * strict, one of that route's next hops on the same port. */
static __always_inline int urpf_ok(__u32 g, __u16 vlan, __u8 mode)
{
	if (!g)
		return 0;
	if (mode != RT_URPF_STRICT)
		return 1;
	struct rt_nhgroup *grp = nhgroup(g);
	if (!grp)
		return 0;
	for (__u32 i = 0; i < RT_ECMP_MAX; i++) {
		if (i >= grp->count)
			break;
		__u32 nhid;
		struct rt_nexthop *nh;
		struct rt_port *port = next_hop(grp, i, &nhid, &nh);
		if (port && port->vlan == vlan)
			return 1;
	}
	return 0;
}

/* route forwards the IPv4 packet at ip (past the frame's tag, if it
 * kept one). */
static __always_inline int route(struct pkt *p, struct iphdr *ip, void *end, struct rt_config *cfg)
{
	__u32 zero = 0;

	if (!cap_admit(bpf_map_lookup_elem(&rt_cap, &zero)))
		return drop(p, RT_DROP_CAP);
	if ((void *)(ip + 1) > end)
		return drop(p, RT_DROP_RUNT);
	if (ip->version != 4)
		return drop(p, RT_DROP_BAD_VERSION);
	__u32 ihl = ip->ihl;
	if (ihl < 5)
		return drop(p, RT_DROP_BAD_IHL);
	__u32 tot = bpf_ntohs(ip->tot_len);
	if (tot < ihl * 4 || (void *)ip + tot > end)
		return drop(p, RT_DROP_BAD_LENGTH);
	if (ihl == 5 && !ipv4_csum_ok(ip))
		return drop(p, RT_DROP_BAD_CHECKSUM);
	__u32 s = bpf_ntohl(ip->saddr), d = bpf_ntohl(ip->daddr);
	if (martian_src(s))
		return drop(p, RT_DROP_MARTIAN_SRC);
	if (p->urpf && !urpf_ok(fib_lookup(ip->saddr), p->in_vlan, p->urpf))
		return drop(p, RT_DROP_URPF);

	__u32 *local = bpf_map_lookup_elem(&rt_local, &ip->daddr);
	if (local)
		return to_local(p, *local, inside4(ip->saddr));
	if (martian_dst(d))
		return drop(p, RT_DROP_MARTIAN_DST);
	if (ihl > 5)
		return slow(p, RT_SLOW_OPTIONS, 0);
	if (ip->ttl <= 1)
		return slow(p, RT_SLOW_TTL, 0);
	if (acl(p, ip, end, ihl, cfg->acl_rules))
		return deny(p);

	__u32 g = fib_lookup(ip->daddr);
	if (!g)
		return slow(p, RT_SLOW_NO_ROUTE, 0);
	struct rt_nhgroup *grp = nhgroup(g);
	if (!grp)
		return drop(p, RT_DROP_BAD_NEXTHOP);
	__u32 pick = 0;
	if (grp->count > 1)
		pick = flow_hash(ip->saddr, ip->daddr, ipv4_ports(ip, end, ihl), ip->protocol, FLOW_SEED_RT) % grp->count;
	__u32 nhid;
	struct rt_nexthop *nh;
	struct rt_port *port = next_hop(grp, pick, &nhid, &nh);
	if (!port)
		return drop(p, RT_DROP_BAD_NEXTHOP);
	if (tot > port->mtu)
		return slow(p, (ip->frag_off & bpf_htons(0x4000)) ? RT_SLOW_FRAG_NEEDED : RT_SLOW_FRAGMENT, nhid);
	p->nhid = nhid;
	struct rt_neigh_key k = {.ip = nh->gw ? nh->gw : ip->daddr, .vlan = port->vlan};
	struct rt_neigh *nb = bpf_map_lookup_elem(&rt_neighbors, &k);
	if (!nb)
		return slow(p, RT_SLOW_UNRESOLVED, nhid);
	return forward(p, ip, port, nb, cfg);
}

/* ip6_martian_src: RFC 4291 §2.5: the unspecified and loopback addresses
 * and multicast are never a packet's source on the wire. */
static __always_inline int ip6_martian_src(const struct in6_addr *a)
{
	__u32 w0 = bpf_ntohl(a->in6_u.u6_addr32[0]);

	if ((w0 >> 24) == 0xff)
		return 1;
	return a->in6_u.u6_addr32[0] == 0 && a->in6_u.u6_addr32[1] == 0 && a->in6_u.u6_addr32[2] == 0 &&
	       (bpf_ntohl(a->in6_u.u6_addr32[3]) <= 1);
}

/* ip6_not_routed: what a router never forwards (RFC 4291): the unspecified
 * and loopback addresses, multicast (not routed here), link-local
 * (fe80::/10) and IPv4-mapped (::ffff:0:0/96) addresses. */
static __always_inline int ip6_not_routed(const struct in6_addr *a)
{
	__u32 w0 = bpf_ntohl(a->in6_u.u6_addr32[0]);

	if ((w0 >> 24) == 0xff || (w0 >> 22) == (0xfe80 >> 6))
		return 1;
	if (w0 != 0 || a->in6_u.u6_addr32[1] != 0)
		return 0;
	__u32 w2 = bpf_ntohl(a->in6_u.u6_addr32[2]);
	return w2 == 0xffff || (w2 == 0 && bpf_ntohl(a->in6_u.u6_addr32[3]) <= 1);
}

/* ipv6_ports is what the ECMP hash takes of an IPv6 packet's transport
 * header: the ports of TCP and UDP right after the fixed header, else 0
 * (extension headers are not walked here: a flow's packets carry the same
 * chain, so they still take one path, fragments included). */
static __always_inline __u32 ipv6_ports(struct ipv6hdr *ip, void *end)
{
	if (ip->nexthdr != IPPROTO_TCP && ip->nexthdr != IPPROTO_UDP)
		return 0;
	__be16 *l4 = (void *)(ip + 1);
	if ((void *)(l4 + 2) > end)
		return 0;
	return (__u32)bpf_ntohs(l4[0]) << 16 | bpf_ntohs(l4[1]);
}

/* route6 is route for IPv6 (RFC 8200; RFC 4291's addresses): no header
 * checksum, no fragmentation by a router (too big: Packet Too Big from
 * the agent), Hop-by-Hop Options to the agent. */
static __always_inline int route6(struct pkt *p, struct ipv6hdr *ip, void *end, struct rt_config *cfg)
{
	__u32 zero = 0;

	if (!cap_admit(bpf_map_lookup_elem(&rt_cap, &zero)))
		return drop(p, RT_DROP_CAP);
	if ((void *)(ip + 1) > end)
		return drop(p, RT_DROP_RUNT);
	if (ip->version != 6)
		return drop(p, RT_DROP_BAD_VERSION);
	__u32 tot = sizeof(*ip) + bpf_ntohs(ip->payload_len);
	if ((void *)ip + tot > end)
		return drop(p, RT_DROP_BAD_LENGTH);
	if (ip6_martian_src(&ip->saddr))
		return drop(p, RT_DROP_MARTIAN_SRC);
	if (p->urpf && !urpf_ok(fib6_lookup(&ip->saddr), p->in_vlan, p->urpf))
		return drop(p, RT_DROP_URPF);

	__u32 *local = bpf_map_lookup_elem(&rt_local6, &ip->daddr);
	if (local)
		return to_local(p, *local, inside6(&ip->saddr));
	if (ip6_not_routed(&ip->daddr))
		return drop(p, RT_DROP_MARTIAN_DST);
	if (ip6_not_routed(&ip->saddr))
		return drop(p, RT_DROP_MARTIAN_SRC); /* link-local or mapped: not beyond its link */
	if (ip->nexthdr == IP6_NH_HOP)
		return slow(p, RT_SLOW_OPTIONS, 0);
	if (ip->hop_limit <= 1)
		return slow(p, RT_SLOW_TTL, 0);
	int denied = acl6(p, ip, end, tot, cfg->acl_rules);
	if (denied < 0)
		return drop(p, RT_DROP_BAD_LENGTH);
	if (denied)
		return deny(p);

	__u32 g = fib6_lookup(&ip->daddr);
	if (!g)
		return slow(p, RT_SLOW_NO_ROUTE, 0);
	struct rt_nhgroup *grp = nhgroup(g);
	if (!grp)
		return drop(p, RT_DROP_BAD_NEXTHOP);
	__u32 pick = 0;
	if (grp->count > 1)
		pick = flow_hash(ip6_fold(&ip->saddr), ip6_fold(&ip->daddr), ipv6_ports(ip, end), ip->nexthdr,
				 FLOW_SEED_RT) % grp->count;
	__u32 nhid;
	struct rt_nexthop *nh;
	struct rt_port *port = next_hop(grp, pick, &nhid, &nh);
	if (!port)
		return drop(p, RT_DROP_BAD_NEXTHOP);
	if (tot > port->mtu)
		return slow(p, RT_SLOW_FRAG_NEEDED, nhid);
	p->nhid = nhid;
	struct rt_neigh6_key k = {.vlan = port->vlan};
	if (ip6_is_zero((struct in6_addr *)nh->gw6))
		__builtin_memcpy(k.ip, &ip->daddr, 16);
	else
		__builtin_memcpy(k.ip, nh->gw6, 16);
	struct rt_neigh *nb = bpf_map_lookup_elem(&rt_neighbors6, &k);
	if (!nb)
		return slow(p, RT_SLOW_UNRESOLVED, nhid);
	return forward6(p, ip, port, nb, cfg);
}

SEC("xdp")
int router(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 zero = 0;
	struct pkt p = {.ctx = ctx};

	p.st = bpf_map_lookup_elem(&rt_counters, &zero);
	struct rt_config *cfg = bpf_map_lookup_elem(&rt_cfg, &zero);
	if (!p.st || !cfg)
		return XDP_ABORTED;
	p.st->rx_packets++;
	p.st->rx_bytes += end - data;

	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return drop(&p, RT_DROP_RUNT);
	if (eth->h_proto == bpf_htons(ETH_P_DIST))
		return dist(&p, eth, end, cfg);
	/* Untagged ARP belongs to the interconnect itself (this host's own
	 * address, e.g. for iBGP with the VCP): the kernel answers it. */
	if (eth->h_proto == bpf_htons(ETH_P_ARP)) {
		p.st->passed++;
		return XDP_PASS;
	}
	p.trace = trace_frame(&rt_trace, data, end, 0);
	__be16 proto = eth->h_proto;
	void *l3 = eth + 1;
	if (proto == bpf_htons(ETH_P_8021Q)) {
		struct vlan_hdr *vh = (void *)(eth + 1);
		if ((void *)(vh + 1) > end)
			return drop(&p, RT_DROP_RUNT);
		proto = vh->proto;
		if (proto == bpf_htons(ETH_P_IPV6)) {
			/* NDP of an external port, relayed by an LB: the agent
			 * reads the advertisement. */
			struct ipv6hdr *ip6 = (void *)(vh + 1);
			__u8 *icmp = (void *)(ip6 + 1);
			if ((void *)(icmp + 1) > end)
				return drop(&p, RT_DROP_TAGGED);
			if (ip6->nexthdr == IP6_NH_ICMP && *icmp >= ICMP6_RS && *icmp <= ICMP6_REDIRECT)
				return slow(&p, RT_SLOW_NDP, 0);
		} else if (proto == bpf_htons(ETH_P_ARP)) {
			/* ARP of an external port, relayed by an LB. */
			return slow(&p, RT_SLOW_ARP, 0);
		} else if (proto != bpf_htons(ETH_P_IP)) {
			return drop(&p, RT_DROP_TAGGED);
		}
		/* Data from an external port with unicast RPF, tagged by its
		 * LB with the port's VLAN: checked by it, then routed as any
		 * (unchecked while this back-end has not heard the port has
		 * it, which its LB may have heard first). */
		__u32 vid = bpf_ntohs(vh->tci) & 0xfff;
		struct rt_vlan *v = bpf_map_lookup_elem(&rt_vlans, &vid);
		if (!v || !v->external)
			return drop(&p, RT_DROP_TAGGED);
		p.in_vlan = vid;
		p.urpf = v->urpf;
		p.tagged = 1;
		l3 = vh + 1;
	}
	if (!is_multicast(eth->h_dest) && !same_mac(eth->h_dest, cfg->mac))
		return drop(&p, RT_DROP_NOT_OURS);
	if (proto != bpf_htons(ETH_P_IP) && proto != bpf_htons(ETH_P_IPV6))
		return drop(&p, RT_DROP_NOT_IP);
	if (is_multicast(eth->h_dest))
		return drop(&p, RT_DROP_MARTIAN_DST); /* link broadcast/multicast IP: not routed */
	if (proto == bpf_htons(ETH_P_IPV6))
		return route6(&p, l3, end, cfg);
	return route(&p, l3, end, cfg);
}
