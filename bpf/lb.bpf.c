// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/*
 * lb: the front-end load balancer's data path, attached with XDP to every
 * port of an LB. It is seed 000's packet processor (Fig. 3): a classifier
 * (classify_external, classify_internal) in front of one function per
 * module, with Table 1's rules, the most specific first:
 *
 *   from an external port          module        out
 *   ARP request for this port's IP ext_arp       the same port (answered here)
 *   ARP reply                      int_arp_in    default internal port, tagged
 *   NDP solicitation for its IPv6  ext_ndp       the same port (answered here)
 *   NDP advertisement              int_ndp_in    default internal port, tagged
 *   routing/management to router   vcp           default internal port, tagged
 *     (IPv6 also: ICMPv6 to it, router solicitations/advertisements)
 *   other IPv4/IPv6 unicast        balance       the table's internal port
 *   from an internal port
 *   DIST                           dist          the agent (XDP_PASS)
 *   tagged ARP                     int_arp_out   its VLAN's external port
 *   tagged NDP                     int_ndp_out   its VLAN's external port
 *   other tagged frame             int_to_ext    its VLAN's external port
 *
 * Frames going inside carry the VLAN tag of the external port they came in
 * by, so the VCP and the back-ends know it (DESIGN.md §2). Everything else
 * is dropped and counted by reason (enum lb_drop); every module counts what
 * it handled (enum lb_module) per ingress port, and frames sent are counted
 * per egress port. A port whose role is unknown passes only DIST (so the
 * agent can sense it) and drops the rest.
 *
 * Verdicts: XDP_TX (ext_arp), XDP_REDIRECT, XDP_PASS (DIST), XDP_DROP.
 * Maps: lb_ports (per ifindex), lb_vlans, lb_own_macs, lb_router_addrs(6),
 * lb_cfg, lb_tables (meta) + lb_table_0/1 (two balancing tables: the agent
 * fills the idle one, then flips lb_cfg.active_table), lb_rr, lb_stats,
 * lb_flowlets (flowlet mode), lb_caps (capacities, cap.h: the LB's own,
 * counted on the frames it balances, as seed 003 measures an
 * L2-balancer's rate from its front-NIC; and each internal port's,
 * counted on what it sends, DTX-n's back-NICs); lb_police_rates,
 * lb_police_buckets, lb_police_stats (control-plane policing, police()).
 *
 * Control-plane policing: a packet from outside addressed to the router
 * itself (enum lb_police_class: BGP, OSPF/RIP, BFD, management, ICMP,
 * anything else to its addresses) passes only within its class's rate
 * and, first, within the rate of its own source's bucket in that class
 * (by hash of source address and ingress port), so that a flood aimed at
 * the router takes neither its sessions nor its answers to other hosts'
 * pings down. What exceeds them is dropped (LB_DROP_POLICED) and counted
 * per class.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <linux/udp.h>

#include "cap.h"
#include "common.h"
#include "infra.h"
#include "ipv6.h"
#include "lb.h"
#include "trace.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* Keep the counter enums in BTF, so that bpf2go generates their Go names. */
const enum lb_module *unused_lb_module __attribute__((unused));
const enum lb_drop *unused_lb_drop __attribute__((unused));
const enum lb_port_role *unused_lb_port_role __attribute__((unused));
const enum lb_mode *unused_lb_mode __attribute__((unused));
const enum lb_limit *unused_lb_limit __attribute__((unused));
const enum lb_addr_flag *unused_lb_addr_flag __attribute__((unused));
const enum lb_police_class *unused_lb_police_class __attribute__((unused));
const struct lb_police_bucket *unused_lb_police_bucket __attribute__((unused));
const enum lb_peer_flags *unused_lb_peer_flags __attribute__((unused));
const struct msr_infra *unused_msr_infra __attribute__((unused));
const struct msr_trace_event *unused_msr_trace_event __attribute__((unused));
const enum msr_trace_verdict *unused_msr_trace_verdict __attribute__((unused));
const enum msr_trace_limit *unused_msr_trace_limit __attribute__((unused));
const enum msr_infra_limit *unused_msr_infra_limit __attribute__((unused));

#define ARPOP_REQUEST 1
#define ARPOP_REPLY 2
#define IPPROTO_OSPF 89
#define PORT_BGP 179
#define PORT_RIP 520
#define PORT_SNMP 161
#define PORT_SNMP_TRAP 162
#define PORT_BFD 3784          /* single-hop control (RFC 5881) */
#define PORT_BFD_MULTIHOP 4784 /* RFC 5883 */
#define PORT_RIPNG 521
#define ND_OPT_SLLA 1 /* source link-layer address */
#define ND_OPT_TLLA 2 /* target link-layer address */
#define ND_NA_ROUTER 0x80
#define ND_NA_SOLICITED 0x40
#define ND_NA_OVERRIDE 0x20
/* How many of an NDP message's options, and how far into it, Int NDP
 * reads for link-layer addresses to rewrite. */
#define ND_OPTS_MAX 4
#define ND_OPTS_BYTES 256

/* Ethernet/IPv4 ARP (RFC 826). */
struct arp_ipv4 {
	__be16 htype;
	__be16 ptype;
	__u8 hlen;
	__u8 plen;
	__be16 op;
	__u8 sha[ETH_ALEN];
	__be32 sip;
	__u8 tha[ETH_ALEN];
	__be32 tip;
} __attribute__((packed));

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LB_MAX_PORTS);
	__type(key, __u32); /* ifindex */
	__type(value, struct lb_port);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lb_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LB_VLANS);
	__type(key, __u32); /* VLAN id */
	__type(value, struct lb_egress); /* ifindex 0: not this LB's */
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lb_vlans SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LB_MAX_PORTS);
	__type(key, __u64); /* MAC in the low 48 bits, in frame byte order */
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lb_own_macs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LB_MAX_ROUTER_ADDRS);
	__type(key, __be32);
	__type(value, __u32); /* LB_ADDR_* */
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lb_router_addrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LB_MAX_ROUTER_ADDRS);
	__type(key, struct lb_addr6);
	__type(value, __u32); /* LB_ADDR_* */
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lb_router_addrs6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lb_config);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lb_cfg SEC(".maps");

/* The router's inside (infra.h): nothing from outside reaches it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct msr_infra);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lb_infra SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct lb_table_meta);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lb_tables SEC(".maps");

struct lb_table {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LB_TABLE_SLOTS);
	__type(key, __u32);
	__type(value, struct lb_slot);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
};
struct lb_table lb_table_0 SEC(".maps");
struct lb_table lb_table_1 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lb_rr SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, LB_FLOWLETS);
	__type(key, __u32); /* the flow hash */
	__type(value, struct lb_flowlet);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lb_flowlets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LB_MAX_PORTS);
	__type(key, __u32); /* port index */
	__type(value, struct lb_port_stats);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lb_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LB_CAPS);
	__type(key, __u32); /* LB_CAP_ELEMENT, or LB_CAP_PORT + port index */
	__type(value, struct msr_cap);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lb_caps SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LB_POLICE_CLASSES);
	__type(key, __u32); /* enum lb_police_class */
	__type(value, struct lb_police_rate);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lb_police_rates SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LB_POLICE_CLASSES * (LB_POLICE_SOURCES + 1));
	__type(key, __u32);
	__type(value, struct lb_police_bucket);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lb_police_buckets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LB_POLICE_CLASSES);
	__type(key, __u32); /* enum lb_police_class */
	__type(value, struct lb_police_counts);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lb_police_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LB_MAX_PEERS);
	__type(key, struct lb_peer_key);
	__type(value, struct lb_peer);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lb_peers SEC(".maps");

/* sFlow's samples to the agent, and each port's sampler (sample()). */
struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} lb_samples SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LB_MAX_PORTS);
	__type(key, __u32); /* port index */
	__type(value, struct lb_sample_pool);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lb_sample_pool SEC(".maps");

/* msr trace's match (trace.h), set by the agent, and its reports. Not
 * pinned: a trace lasts seconds, and an agent started again has none. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct msr_trace);
} lb_trace SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} lb_trace_events SEC(".maps");

static __always_inline struct msr_cap *lb_cap(__u32 i)
{
	return bpf_map_lookup_elem(&lb_caps, &i);
}

/* One frame being processed. */
/* A frame under way: its port, counters, and, if traced (trace: the
 * trace's id), what the modules decided for its report. */
struct pkt {
	struct xdp_md *ctx;
	struct lb_port *port;
	struct lb_port_stats *st;
	__u32 ifindex;
	__u32 trace;
	__u32 module; /* enum lb_module */
	__u32 slot;   /* balance: the table's slot */
	__u32 mode;   /* balance: the table's enum lb_mode */
};

/* lb_trace_report reports a traced frame's verdict (trace.h). */
static __noinline void lb_trace_report(struct pkt *p, __u16 verdict, __u16 reason, __u32 out)
{
	struct msr_trace_event ev = {.id = p->trace, .verdict = verdict, .reason = reason, .in_port = p->port->index,
				     .out_port = out, .detail = {p->slot, p->mode, p->module}};
	trace_emit(p->ctx, &lb_trace_events, &ev);
}

static __always_inline int drop(struct pkt *p, enum lb_drop why)
{
	if (why < LB_DROP_MAX)
		p->st->drop[why]++;
	if (p->trace)
		lb_trace_report(p, MSR_TRACE_DROPPED, why, 0);
	return XDP_DROP;
}

static __always_inline void count_module(struct pkt *p, enum lb_module m)
{
	if (m < LB_MOD_MAX)
		p->st->module[m]++;
	p->module = m;
}

/* send counts a frame against its egress port and sends it there. */
static __always_inline int send(struct pkt *p, __u32 ifindex, __u32 index)
{
	if (p->trace)
		lb_trace_report(p, MSR_TRACE_SENT, p->module, index);
	struct lb_port_stats *st = bpf_map_lookup_elem(&lb_stats, &index);

	if (st) {
		st->tx_packets++;
		st->tx_bytes += p->ctx->data_end - p->ctx->data;
	}
	if (ifindex == p->ifindex)
		return XDP_TX;
	return bpf_redirect(ifindex, 0);
}

/* A Neighbor Solicitation's or Advertisement's fixed part (RFC 4861 §4.3,
 * §4.4): type, code, checksum, flags (NA) or reserved (NS), target. */
struct nd_msg {
	__u8 type;
	__u8 code;
	__be16 csum;
	__u8 flags[4];
	struct in6_addr target;
};

/* A link-layer address option (RFC 4861 §4.6.1) for Ethernet. */
struct nd_lla {
	__u8 type;
	__u8 len; /* in units of 8 bytes: 1 */
	__u8 mac[ETH_ALEN];
};

#define ND_NA_LEN (sizeof(struct nd_msg) + sizeof(struct nd_lla))
#define ND_NA_FRAME (sizeof(struct ethhdr) + sizeof(struct ipv6hdr) + ND_NA_LEN)

/* ---- modules ---------------------------------------------------------- */

/* ext_arp answers an ARP request for the ingress port's address, in place
 * (seed 000 §4.2: no request reaches the back-ends, so no reply storm). */
static __always_inline int ext_arp(struct pkt *p, struct ethhdr *eth, struct arp_ipv4 *arp)
{
	struct lb_port *port = p->port;

	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, port->mac, ETH_ALEN);
	arp->op = bpf_htons(ARPOP_REPLY);
	__builtin_memcpy(arp->tha, arp->sha, ETH_ALEN);
	arp->tip = arp->sip;
	__builtin_memcpy(arp->sha, port->mac, ETH_ALEN);
	arp->sip = port->ip;
	count_module(p, LB_MOD_EXT_ARP);
	return send(p, p->ifindex, port->index);
}

/* ext_ndp answers a Neighbor Solicitation for one of the ingress port's
 * addresses with a Neighbor Advertisement from that address, in place:
 * IPv6's counterpart of ext_arp (the port's MAC as target link-layer
 * address, router flag set). A solicitation from the unspecified address
 * (duplicate address detection) is answered to all nodes, unsolicited
 * (RFC 4861 §7.2.4). The frame is cut or grown to the advertisement's
 * 86 bytes. */
static __always_inline int ext_ndp(struct pkt *p, const struct in6_addr *asked)
{
	static const __u8 all_nodes_mac[ETH_ALEN] = {0x33, 0x33, 0, 0, 0, 1};
	struct xdp_md *ctx = p->ctx;
	struct ethhdr *eth = (void *)(long)ctx->data;
	struct ipv6hdr *ip = (void *)(eth + 1);

	if ((void *)(ip + 1) > (void *)(long)ctx->data_end)
		return drop(p, LB_DROP_RUNT);
	struct in6_addr target = *asked, dst = ip->saddr;
	__u8 dmac[ETH_ALEN];
	int solicited = !ip6_is_zero(&ip->saddr);
	if (solicited) {
		__builtin_memcpy(dmac, eth->h_source, ETH_ALEN);
	} else {
		__builtin_memcpy(dmac, all_nodes_mac, ETH_ALEN);
		dst.in6_u.u6_addr32[0] = bpf_htonl(0xff020000);
		dst.in6_u.u6_addr32[3] = bpf_htonl(1);
	}
	int delta = (int)ND_NA_FRAME - (int)(ctx->data_end - ctx->data);
	if (delta && bpf_xdp_adjust_tail(ctx, delta))
		return drop(p, LB_DROP_RUNT);
	eth = (void *)(long)ctx->data;
	ip = (void *)(eth + 1);
	struct nd_msg *na = (void *)(ip + 1);
	struct nd_lla *opt = (void *)(na + 1);
	if ((void *)(opt + 1) > (void *)(long)ctx->data_end)
		return drop(p, LB_DROP_RUNT);
	__builtin_memcpy(eth->h_dest, dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, p->port->mac, ETH_ALEN);
	eth->h_proto = bpf_htons(ETH_P_IPV6);
	*(__be32 *)ip = bpf_htonl(0x60000000); /* version 6, class and label 0 */
	ip->payload_len = bpf_htons(ND_NA_LEN);
	ip->nexthdr = IP6_NH_ICMP;
	ip->hop_limit = 255;
	ip->saddr = target;
	ip->daddr = dst;
	na->type = ICMP6_NA;
	na->code = 0;
	na->csum = 0;
	na->flags[0] = ND_NA_ROUTER | ND_NA_OVERRIDE | (solicited ? ND_NA_SOLICITED : 0);
	na->flags[1] = na->flags[2] = na->flags[3] = 0;
	na->target = target;
	opt->type = ND_OPT_TLLA;
	opt->len = 1;
	__builtin_memcpy(opt->mac, p->port->mac, ETH_ALEN);
	/* pseudo-header: the addresses, the length and Next Header */
	__u32 sum = csum_words((void *)&ip->saddr, 16, ND_NA_LEN + IP6_NH_ICMP);
	na->csum = csum_fold(csum_words((void *)na, ND_NA_LEN / 2, sum));
	count_module(p, LB_MOD_EXT_NDP);
	return send(p, p->ifindex, p->port->index);
}

/* to_inside tags a frame with the ingress port's VLAN and sends it out the
 * default internal port to dst. */
static __always_inline int to_inside(struct pkt *p, const __u8 *dst, struct lb_config *cfg)
{
	struct lb_port *ing = bpf_map_lookup_elem(&lb_ports, &cfg->default_int_ifindex);

	if (!ing)
		return drop(p, LB_DROP_NO_INTERNAL);
	__u8 mac[ETH_ALEN];
	__builtin_memcpy(mac, dst, ETH_ALEN);
	if (push_vlan(p->ctx, p->port->vlan))
		return drop(p, LB_DROP_RUNT);
	struct ethhdr *eth = (void *)(long)p->ctx->data;
	if ((void *)(eth + 1) > (void *)(long)p->ctx->data_end)
		return drop(p, LB_DROP_RUNT);
	__builtin_memcpy(eth->h_dest, mac, ETH_ALEN);
	return send(p, cfg->default_int_ifindex, ing->index);
}

/* int_arp_in broadcasts an ARP reply from outside to every back-end,
 * tagged with its port's VLAN: the reply names no back-end (seed 000
 * §4.3), and the tag tells them which external port it belongs to. */
static __always_inline int int_arp_in(struct pkt *p, struct lb_config *cfg)
{
	static const __u8 bcast[ETH_ALEN] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

	count_module(p, LB_MOD_INT_ARP_IN);
	return to_inside(p, bcast, cfg);
}

/* int_ndp_in sends a Neighbor Advertisement from outside to every
 * back-end, tagged, as int_arp_in does ARP replies. */
static __always_inline int int_ndp_in(struct pkt *p, struct lb_config *cfg)
{
	static const __u8 bcast[ETH_ALEN] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

	count_module(p, LB_MOD_INT_NDP_IN);
	return to_inside(p, bcast, cfg);
}

/* vcp hands a routing or management packet to the virtual control plane,
 * tagged with its port's VLAN so that the VCP sees it on that port's
 * mirror (OSPF is per interface). */
static __always_inline int vcp(struct pkt *p, struct lb_config *cfg)
{
	if (!cfg->has_vcp)
		return drop(p, LB_DROP_NO_VCP);
	count_module(p, LB_MOD_VCP);
	return to_inside(p, cfg->vcp_mac, cfg);
}

/* mac_hash mixes a MAC address; lb/model.go's macHash is the same. */
static __always_inline __u32 mac_hash(const __u8 *mac)
{
	__u32 h = ((__u32)mac[2] << 24 | (__u32)mac[3] << 16 | (__u32)mac[4] << 8 | mac[5]) * 0x9e3779b1u;

	h ^= (__u32)mac[0] << 8 | mac[1];
	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	return h;
}

/* next_rr is the weighted round-robin's next slot of a table of len
 * slots (the table repeats the weighted pattern, so the slots in turn
 * follow the weights); per CPU. Non-zero when the counter is missing. */
static __always_inline int next_rr(__u32 len, __u32 *idx)
{
	__u32 zero = 0;
	__u32 *rr = bpf_map_lookup_elem(&lb_rr, &zero);

	if (!rr)
		return -1;
	*idx = *rr % len;
	*rr = *idx + 1;
	return 0;
}

/* flowlet picks a flow's slot in flowlet mode: the slot of its flowlet
 * while its packets keep coming within the gap (so a burst stays on one
 * back-end, in order), else the round-robin's next (so the flowlets,
 * hence the load, follow the weights). A flowlet of the other table
 * starts anew: its slot means another back-end there. */
static __always_inline int flowlet(__u32 hash, __u32 len, __u32 t, struct lb_config *cfg, __u32 *idx)
{
	__u64 now = bpf_ktime_get_ns();
	struct lb_flowlet *f = bpf_map_lookup_elem(&lb_flowlets, &hash);

	if (f && f->table == t && f->slot < len && now - f->last_ns <= (__u64)cfg->flowlet_gap_us * 1000) {
		f->last_ns = now;
		*idx = f->slot;
		return 0;
	}
	if (next_rr(len, idx))
		return -1;
	if (f) { /* a known flow's new flowlet: in place, no new LRU entry */
		f->slot = *idx;
		f->table = t;
		f->last_ns = now;
		return 0;
	}
	struct lb_flowlet nf = {.slot = *idx, .table = t, .last_ns = now};
	bpf_map_update_elem(&lb_flowlets, &hash, &nf, BPF_ANY);
	return 0;
}

/* balance sends a data frame to the back-end the active table picks: the
 * flow's slot names the back-end. The internal port is the one of the slot
 * the frame's source MAC picks, so that one outside host's frames always
 * enter the switch by the same port: with two internal ports (DTX-2) the
 * switch would otherwise learn the host's MAC on one port, then the other,
 * and the back-ends' frames to it would alternate between the two paths
 * and arrive out of order (measured: TCP reordering and retransmits). Every
 * back-end is in the table through every internal port, so the ports share
 * the hosts as the back-ends share the flows. */
static __always_inline int balance(struct pkt *p, struct ethhdr *eth, __u32 hash, struct lb_config *cfg)
{
	__u32 t = cfg->active_table & 1;
	struct lb_table_meta *meta = bpf_map_lookup_elem(&lb_tables, &t);

	if (!meta || meta->len == 0 || meta->len > LB_TABLE_SLOTS)
		return drop(p, LB_DROP_NO_BACKEND);
	__u32 idx;
	if (meta->mode == LB_MODE_WRR) {
		if (next_rr(meta->len, &idx))
			return drop(p, LB_DROP_NO_BACKEND);
	} else if (meta->mode == LB_MODE_FLOWLET) {
		if (flowlet(hash, meta->len, t, cfg, &idx))
			return drop(p, LB_DROP_NO_BACKEND);
	} else {
		idx = hash % meta->len;
	}
	struct lb_slot *slot = t ? bpf_map_lookup_elem(&lb_table_1, &idx) : bpf_map_lookup_elem(&lb_table_0, &idx);
	if (!slot || slot->ifindex == 0)
		return drop(p, LB_DROP_NO_BACKEND);
	__u32 pidx = mac_hash(eth->h_source) % meta->len;
	struct lb_slot *via = t ? bpf_map_lookup_elem(&lb_table_1, &pidx) : bpf_map_lookup_elem(&lb_table_0, &pidx);
	if (!via || via->ifindex == 0)
		via = slot;
	if (!cap_admit(lb_cap(LB_CAP_ELEMENT)))
		return drop(p, LB_DROP_CAP);
	if (!cap_admit(lb_cap(LB_CAP_PORT + (via->index & (LB_MAX_PORTS - 1)))))
		return drop(p, LB_DROP_PORT_CAP);
	__builtin_memcpy(eth->h_dest, slot->mac, ETH_ALEN);
	p->slot = idx;
	p->mode = meta->mode;
	/* A port with unicast RPF: the back-end learns from the tag where
	 * the frame came in. */
	if (p->port->urpf && push_vlan(p->ctx, p->port->vlan))
		return drop(p, LB_DROP_RUNT);
	count_module(p, LB_MOD_BALANCE);
	return send(p, via->ifindex, via->index);
}

/* to_outside sends a tagged frame from inside out of its VLAN's external
 * port: tag popped, source MAC that port's (seed 000 §4.5). Returns the
 * Ethernet header, or NULL (the frame is dropped: *verdict says so). */
static __always_inline struct ethhdr *to_outside(struct pkt *p, struct lb_egress *eg, struct lb_port **out, int *verdict)
{
	*out = bpf_map_lookup_elem(&lb_ports, &eg->ifindex);
	if (!*out) {
		*verdict = drop(p, LB_DROP_VLAN_NOT_OURS);
		return NULL;
	}
	if (pop_vlan(p->ctx)) {
		*verdict = drop(p, LB_DROP_RUNT);
		return NULL;
	}
	struct ethhdr *eth = (void *)(long)p->ctx->data;
	if ((void *)(eth + 1) > (void *)(long)p->ctx->data_end) {
		*verdict = drop(p, LB_DROP_RUNT);
		return NULL;
	}
	__builtin_memcpy(eth->h_source, (*out)->mac, ETH_ALEN);
	return eth;
}

/* int_to_ext sends a back-end's routed frame out of its VLAN's external
 * port (seed 000 §4.5). */
static __always_inline int int_to_ext(struct pkt *p, struct lb_egress *eg)
{
	struct lb_port *out;
	int verdict;

	if (!to_outside(p, eg, &out, &verdict))
		return verdict;
	count_module(p, LB_MOD_INT_TO_EXT);
	return send(p, eg->ifindex, eg->index);
}

/* int_arp_out sends a back-end's ARP request for a next hop out of its
 * VLAN's external port, its sender hardware address rewritten too, so the
 * neighbour learns the LB's MAC, not the back-end's (seed 000 §4.3). */
static __always_inline int int_arp_out(struct pkt *p, struct lb_egress *eg)
{
	struct lb_port *out;
	int verdict;
	struct ethhdr *eth = to_outside(p, eg, &out, &verdict);

	if (!eth)
		return verdict;
	struct arp_ipv4 *arp = (void *)(eth + 1);
	if ((void *)(arp + 1) > (void *)(long)p->ctx->data_end)
		return drop(p, LB_DROP_BAD_ARP);
	__builtin_memcpy(arp->sha, out->mac, ETH_ALEN);
	count_module(p, LB_MOD_INT_ARP_OUT);
	return send(p, eg->ifindex, eg->index);
}

/* int_ndp_out sends a back-end's or the VCP's Neighbor Discovery message
 * out of its VLAN's external port with its link-layer address options
 * (source or target, the first ND_OPTS_MAX) rewritten to the port's MAC
 * and the checksum mended, so that neighbours learn the LB's MAC, as
 * int_arp_out does for ARP. */
static __always_inline int int_ndp_out(struct pkt *p, struct lb_egress *eg)
{
	struct lb_port *out;
	int verdict;
	struct ethhdr *eth = to_outside(p, eg, &out, &verdict);

	if (!eth)
		return verdict;
	void *end = (void *)(long)p->ctx->data_end;
	struct ipv6hdr *ip = (void *)(eth + 1);
	__u8 *nd = (void *)(ip + 1);
	if ((void *)(nd + 4) > end)
		return drop(p, LB_DROP_BAD_NDP);
	__u32 plen = bpf_ntohs(ip->payload_len);
	__u32 off = nd[0] == ICMP6_RS ? 8 : nd[0] == ICMP6_RA ? 16 : nd[0] == ICMP6_REDIRECT ? 40 : 24;
#pragma unroll
	for (int i = 0; i < ND_OPTS_MAX; i++) {
		if (off > ND_OPTS_BYTES || off + 8 > plen)
			break;
		__u8 *o = nd + off;
		if ((void *)(o + 8) > end || o[1] == 0)
			break;
		if ((o[0] == ND_OPT_SLLA || o[0] == ND_OPT_TLLA) && o[1] == 1) {
			csum_replace6((__be16 *)(nd + 2), o + 2, out->mac);
			__builtin_memcpy(o + 2, out->mac, ETH_ALEN);
		}
		off += (__u32)o[1] * 8;
	}
	count_module(p, LB_MOD_INT_NDP_OUT);
	return send(p, eg->ifindex, eg->index);
}

/* dist hands a DIST frame to the LB's agent (XDP_PASS to its packet
 * socket): the agent checks its MAC and freshness (dist/). */
static __always_inline int dist(struct pkt *p)
{
	count_module(p, LB_MOD_DIST);
	return XDP_PASS;
}

/* ---- classifiers ------------------------------------------------------ */

static __always_inline int valid_arp(struct arp_ipv4 *arp)
{
	return arp->htype == bpf_htons(1) && arp->ptype == bpf_htons(ETH_P_IP) &&
	       arp->hlen == ETH_ALEN && arp->plen == 4;
}

static __always_inline int classify_arp(struct pkt *p, struct ethhdr *eth, void *end, struct lb_config *cfg)
{
	struct arp_ipv4 *arp = (void *)(eth + 1);

	if ((void *)(arp + 1) > end)
		return drop(p, LB_DROP_RUNT);
	if (!valid_arp(arp))
		return drop(p, LB_DROP_BAD_ARP);
	if (arp->op == bpf_htons(ARPOP_REQUEST)) {
		if (arp->tip != p->port->ip || p->port->ip == 0)
			return drop(p, LB_DROP_ARP_NOT_OURS);
		return ext_arp(p, eth, arp);
	}
	if (arp->op == bpf_htons(ARPOP_REPLY))
		return int_arp_in(p, cfg);
	return drop(p, LB_DROP_BAD_ARP);
}

/* router_class is the class of a packet addressed to the router that no
 * IGP rule took: SNMP, BFD, BGP, ICMP (icmp_proto: IPv4's or IPv6's), or
 * anything else. */
static __always_inline __u32 router_class(__u8 proto, __u8 icmp_proto, __u16 sport, __u16 dport, int has_ports)
{
	if (has_ports && proto == IPPROTO_UDP) {
		if (dport == PORT_SNMP || dport == PORT_SNMP_TRAP)
			return LB_POLICE_MGMT;
		if (dport == PORT_BFD || dport == PORT_BFD_MULTIHOP)
			return LB_POLICE_BFD;
	}
	if (has_ports && proto == IPPROTO_TCP && (dport == PORT_BGP || sport == PORT_BGP))
		return LB_POLICE_BGP;
	if (proto == icmp_proto)
		return LB_POLICE_ICMP;
	return LB_POLICE_LOCAL;
}

/* police_class says what an IPv4 packet from outside is to the router
 * (enum lb_police_class; f: its destination's lb_router_addrs flags), or
 * LB_POLICE_NONE for transit. The classes up to
 * LB_POLICE_MGMT are Table 1's traffic for the VCP: routing (OSPF, RIP,
 * BGP, BFD) or management (SNMP, anything to the management address)
 * addressed to the router; the same protocols between two other hosts are
 * data. Non-first fragments carry no ports, so only the address rules
 * apply to them. */
static __always_inline __u32 police_class(struct iphdr *ip, __u32 f, __u16 sport, __u16 dport, int has_ports)
{
	__u32 d = bpf_ntohl(ip->daddr);

	if (f & LB_ADDR_MGMT)
		return LB_POLICE_MGMT;
	if (ip->protocol == IPPROTO_OSPF) {
		if (f || d == 0xe0000005 || d == 0xe0000006) /* AllSPFRouters, AllDRouters */
			return LB_POLICE_IGP;
		return LB_POLICE_NONE;
	}
	if (has_ports && ip->protocol == IPPROTO_UDP && dport == PORT_RIP &&
	    (f || d == 0xe0000009 || d == 0xffffffff)) /* RIPv2 group, RIPv1 broadcast */
		return LB_POLICE_IGP;
	if (!f)
		return LB_POLICE_NONE;
	return router_class(ip->protocol, IPPROTO_ICMP, sport, dport, has_ports);
}

/* police_hash is a source's bucket key: its whole address (four words;
 * IPv4's in the first, the rest zero), its ingress port and the class,
 * keyed with the data path's secret seed. */
static __always_inline __u32 police_hash(const __u32 *src, __u32 port, __u32 cls, __u32 seed)
{
	__u32 h = flow_hash(src[0], src[1], src[2], cls, seed);

	return flow_hash(h, src[3], port, cls, seed ^ FLOW_SEED_POLICE);
}

/* routing_peer is the configured neighbour a routing packet (class BGP,
 * IGP or BFD) comes from, by its source (IPv6, or IPv4-mapped) and
 * ingress port, or NULL. */
static __always_inline struct lb_peer *routing_peer(struct pkt *p, __u32 cls, const __u32 *src6)
{
	if (cls > LB_POLICE_BFD)
		return NULL;
	struct lb_peer_key k = {.addr = {src6[0], src6[1], src6[2], src6[3]}, .port = p->port->index};
	return bpf_map_lookup_elem(&lb_peers, &k);
}

/* gtsm_refused says whether a packet breaks the TTL rule of RFC 5082 and
 * RFC 5881: single-hop BFD (to port 3784) always, and BGP from a peer
 * that has GTSM on, must arrive with TTL (hop limit) 255, which only a
 * host on the port's own segment can send it with. */
static __always_inline int gtsm_refused(struct lb_peer *peer, __u32 cls, __u16 dport, __u8 ttl)
{
	if (ttl == 255)
		return 0;
	if (cls == LB_POLICE_BFD && dport == PORT_BFD)
		return 1;
	if (cls != LB_POLICE_BGP || !peer || !(peer->flags & LB_PEER_GTSM))
		return 0;
	__sync_fetch_and_add(&peer->gtsm_dropped, 1);
	return 1;
}

/* police says whether a packet of class cls from src (police_hash's
 * words) may pass. From a configured peer: its own bucket alone. From
 * any other source: its source's bucket first (so a flood spends only its
 * own), then the class's. Counted per class. */
static __always_inline int police(struct pkt *p, struct lb_config *cfg, __u32 cls, const __u32 *src,
				  struct lb_peer *peer)
{
	struct lb_police_rate *r = bpf_map_lookup_elem(&lb_police_rates, &cls);
	struct lb_police_counts *st = bpf_map_lookup_elem(&lb_police_stats, &cls);
	if (!r || !st)
		return 1;
	if (peer) {
		if (r->src_interval_ns && !gcra_admit(&peer->lock, &peer->tat, r->src_interval_ns, r->src_tolerance_ns)) {
			__sync_fetch_and_add(&peer->dropped, 1);
			st->dropped_source++;
			return 0;
		}
		__sync_fetch_and_add(&peer->passed, 1);
		st->passed++;
		return 1;
	}
	__u32 base = cls * (LB_POLICE_SOURCES + 1);
	if (r->src_interval_ns) {
		__u32 i = base + 1 + (police_hash(src, p->port->index, cls, cfg->police_seed) & (LB_POLICE_SOURCES - 1));
		struct lb_police_bucket *b = bpf_map_lookup_elem(&lb_police_buckets, &i);
		if (b && !gcra_admit(&b->lock, &b->tat, r->src_interval_ns, r->src_tolerance_ns)) {
			st->dropped_source++;
			return 0;
		}
	}
	if (r->interval_ns) {
		struct lb_police_bucket *b = bpf_map_lookup_elem(&lb_police_buckets, &base);
		if (b && !gcra_admit(&b->lock, &b->tat, r->interval_ns, r->tolerance_ns)) {
			st->dropped_class++;
			return 0;
		}
	}
	st->passed++;
	return 1;
}

static __always_inline int classify_ipv4(struct pkt *p, struct ethhdr *eth, void *end, struct lb_config *cfg)
{
	struct iphdr *ip = (void *)(eth + 1);

	if ((void *)(ip + 1) > end)
		return drop(p, LB_DROP_RUNT);
	__u32 ihl = ip->ihl * 4;
	__u32 tot = bpf_ntohs(ip->tot_len);
	if (ip->version != 4 || ihl < sizeof(*ip) || tot < ihl || (void *)ip + tot > end)
		return drop(p, LB_DROP_BAD_IP);

	__u16 sport = 0, dport = 0;
	int frag = ip->frag_off & bpf_htons(0x3fff); /* MF or an offset */
	int has_ports = 0;
	if (!frag && (ip->protocol == IPPROTO_TCP || ip->protocol == IPPROTO_UDP)) {
		__be16 *l4 = (void *)ip + (ihl & 0x3c);
		if ((void *)(l4 + 2) > end || (void *)(l4 + 2) > (void *)ip + tot)
			return drop(p, LB_DROP_BAD_IP);
		sport = bpf_ntohs(l4[0]);
		dport = bpf_ntohs(l4[1]);
		has_ports = 1;
	}
	__u32 zero = 0;
	__u32 *flags = bpf_map_lookup_elem(&lb_router_addrs, &ip->daddr);
	__u32 f = flags ? *flags : 0;
	struct msr_infra *in = bpf_map_lookup_elem(&lb_infra, &zero);
	if (in && (infra_has4(in, ip->saddr) || (!f && infra_has4(in, ip->daddr))))
		return drop(p, LB_DROP_INFRA);
	__u32 cls = police_class(ip, f, sport, dport, has_ports);
	__u32 src[4] = {ip->saddr};
	__u32 src6[4] = {0, 0, bpf_htonl(0xffff), ip->saddr};
	struct lb_peer *peer = routing_peer(p, cls, src6);
	if (gtsm_refused(peer, cls, dport, ip->ttl))
		return drop(p, LB_DROP_GTSM);
	if (cls != LB_POLICE_NONE && !police(p, cfg, cls, src, peer))
		return drop(p, LB_DROP_POLICED);
	/* A fragment to the router is the VCP's, whose kernel reassembles
	 * it: a back-end can answer no part of a datagram it sees a piece of
	 * (and the pieces after the first name no port to tell a BGP
	 * segment by). */
	if (cls <= LB_POLICE_MGMT || (frag && f))
		return vcp(p, cfg);
	__u32 d = bpf_ntohl(ip->daddr);
	if (is_multicast(eth->h_dest) || (d >> 28) == 0xe || d == 0xffffffff)
		return drop(p, LB_DROP_MCAST_EXTERNAL);
	/* 5-tuple for TCP/UDP, 3-tuple for fragments and other protocols, so
	 * all fragments of a datagram take one path. */
	__u32 ports = has_ports ? ((__u32)sport << 16 | dport) : 0;
	return balance(p, eth, flow_hash(ip->saddr, ip->daddr, ports, ip->protocol, FLOW_SEED_LB), cfg);
}

/* ip6_is_ll_group says whether a is ff02::n, a link-scope group. */
static __always_inline int ip6_is_ll_group(const struct in6_addr *a, __u32 n)
{
	return a->in6_u.u6_addr32[0] == bpf_htonl(0xff020000) && a->in6_u.u6_addr32[1] == 0 &&
	       a->in6_u.u6_addr32[2] == 0 && a->in6_u.u6_addr32[3] == bpf_htonl(n);
}

/* police_class6 is police_class for IPv6: f is the destination's
 * lb_router_addrs6 flags, proto the chain's last Next Header. OSPFv3 to
 * AllSPFRouters (ff02::5) or AllDRouters (ff02::6), RIPng to ff02::9. */
static __always_inline __u32 police_class6(struct ipv6hdr *ip, __u32 f, __u8 proto, __u16 sport, __u16 dport,
					   int has_ports)
{
	if (f & LB_ADDR_MGMT)
		return LB_POLICE_MGMT;
	if (proto == IP6_NH_OSPF) {
		if (f || ip6_is_ll_group(&ip->daddr, 5) || ip6_is_ll_group(&ip->daddr, 6))
			return LB_POLICE_IGP;
		return LB_POLICE_NONE;
	}
	if (has_ports && proto == IP6_NH_UDP && dport == PORT_RIPNG && (f || ip6_is_ll_group(&ip->daddr, 9)))
		return LB_POLICE_IGP;
	if (!f)
		return LB_POLICE_NONE;
	return router_class(proto, IP6_NH_ICMP, sport, dport, has_ports);
}

/* classify_ndp applies Table 1's NDP rules to a Neighbor Discovery message
 * from outside (nd: its ICMPv6 header, right after the IPv6 header): a
 * solicitation for the port's address is answered (ext_ndp), an
 * advertisement goes to every back-end (int_ndp_in), router solicitations,
 * advertisements and redirects go to the VCP. RFC 4861 drops any with a
 * hop limit other than 255 (it crossed a router) or a code. */
static __always_inline int classify_ndp(struct pkt *p, struct ipv6hdr *ip, __u8 *nd, void *end, __u32 plen_end,
					struct lb_config *cfg)
{
	if (ip->hop_limit != 255 || nd[1] != 0)
		return drop(p, LB_DROP_BAD_NDP);
	if (nd[0] == ICMP6_NS || nd[0] == ICMP6_NA) {
		struct nd_msg *m = (void *)nd;
		if ((void *)(m + 1) > end || sizeof(*ip) + sizeof(*m) > plen_end)
			return drop(p, LB_DROP_BAD_NDP);
		if (nd[0] == ICMP6_NA)
			return int_ndp_in(p, cfg);
		struct lb_port *port = p->port;
		if ((ip6_is_zero(&port->ip6) || !ip6_equal(&m->target, &port->ip6)) &&
		    (ip6_is_zero(&port->ll6) || !ip6_equal(&m->target, &port->ll6)))
			return drop(p, LB_DROP_NDP_NOT_OURS);
		return ext_ndp(p, &m->target);
	}
	const __u32 *src = ip->saddr.in6_u.u6_addr32;
	if (!police(p, cfg, LB_POLICE_IGP, src, routing_peer(p, LB_POLICE_IGP, src)))
		return drop(p, LB_DROP_POLICED);
	return vcp(p, cfg);
}

/* lb_ip6_walk is ip6_walk for the IPv6 header l3 bytes into ctx's frame,
 * as a global function: the verifier checks it once, on its own. Inlined,
 * each of the walk's ways through its six headers went on through the
 * rest of classify_ipv6: 728,062 instructions processed, 73% of the
 * verifier's limit, and a second to load. Its caller learns only what it
 * returns and what it wrote to w, and bounds w->off again itself. -1 as
 * ip6_walk's, or for a header not in the frame. */
__noinline int lb_ip6_walk(struct xdp_md *ctx, __u32 l3, __u32 plen_end, struct ip6_walk *w)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	if (!w || l3 > 64)
		return -1;
	struct ipv6hdr *ip = data + l3;
	if ((void *)(ip + 1) > end)
		return -1;
	return ip6_walk(ip, end, plen_end, w);
}

/* classify_ipv6 is Table 1 for IPv6 from outside: NDP as above; BGP,
 * OSPFv3, RIPng, BFD, SNMP and ICMPv6 to the router's addresses (and
 * anything to its management address) to the VCP, policed by class; the
 * rest of what is addressed to the router (policed) and all transit data
 * balanced on the 5-tuple found past the extension headers, or on the
 * addresses and the flow label where the config says so. A chain longer
 * than ip6_walk reads is balanced on the addresses alone. */
static __always_inline int classify_ipv6(struct pkt *p, struct ethhdr *eth, void *end, struct lb_config *cfg)
{
	struct ipv6hdr *ip = (void *)(eth + 1);

	if ((void *)(ip + 1) > end)
		return drop(p, LB_DROP_RUNT);
	__u32 plen_end = sizeof(*ip) + bpf_ntohs(ip->payload_len);
	if (ip->version != 6 || plen_end > (__u32)(end - (void *)ip))
		return drop(p, LB_DROP_BAD_IP);
	/* Most packets have no extension header: their walk ends at once,
	 * without the call. */
	struct ip6_walk w = {.off = sizeof(*ip), .proto = ip->nexthdr};
	if (ip6_is_ext(ip->nexthdr) && lb_ip6_walk(p->ctx, sizeof(*eth), plen_end, &w))
		return drop(p, LB_DROP_BAD_IP);

	__u16 sport = 0, dport = 0;
	int has_ports = 0;
	if (!w.deep && !w.frag) {
		__u32 off = w.off;
		if (off > IP6_EXT_BYTES)
			return drop(p, LB_DROP_BAD_IP); /* not reached: the walk said so */
		__u8 *l4 = (void *)ip + off;
		if (w.proto == IP6_NH_TCP || w.proto == IP6_NH_UDP) {
			if ((void *)(l4 + 4) > end || off + 4 > plen_end)
				return drop(p, LB_DROP_BAD_IP);
			sport = (__u16)l4[0] << 8 | l4[1];
			dport = (__u16)l4[2] << 8 | l4[3];
			has_ports = 1;
		} else if (w.proto == IP6_NH_ICMP) {
			if ((void *)(l4 + 4) > end || off + 4 > plen_end)
				return drop(p, LB_DROP_BAD_IP);
			if (off == sizeof(*ip) && l4[0] >= ICMP6_RS && l4[0] <= ICMP6_REDIRECT)
				return classify_ndp(p, ip, l4, end, plen_end, cfg);
		}
	}
	__u32 zero = 0;
	__u32 *flags = bpf_map_lookup_elem(&lb_router_addrs6, &ip->daddr);
	__u32 f = flags ? *flags : 0;
	struct msr_infra *in = bpf_map_lookup_elem(&lb_infra, &zero);
	if (in && (infra_has6(in, ip->saddr.in6_u.u6_addr32) || (!f && infra_has6(in, ip->daddr.in6_u.u6_addr32))))
		return drop(p, LB_DROP_INFRA);
	__u32 cls = police_class6(ip, f, w.proto, sport, dport, has_ports);
	const __u32 *src = ip->saddr.in6_u.u6_addr32;
	struct lb_peer *peer = routing_peer(p, cls, src);
	if (gtsm_refused(peer, cls, dport, ip->hop_limit))
		return drop(p, LB_DROP_GTSM);
	if (cls != LB_POLICE_NONE && !police(p, cfg, cls, src, peer))
		return drop(p, LB_DROP_POLICED);
	/* ICMPv6 to the router: the VCP answers it; a fragment to it, as
	 * IPv4's, is the VCP's to reassemble. */
	if (cls <= LB_POLICE_ICMP || (w.frag && f))
		return vcp(p, cfg);
	if (is_multicast(eth->h_dest) || ip->daddr.in6_u.u6_addr8[0] == 0xff)
		return drop(p, LB_DROP_MCAST_EXTERNAL);
	__u32 ports = has_ports ? ((__u32)sport << 16 | dport) : 0;
	__u32 proto = w.deep ? 0 : w.proto;
	__u32 label = bpf_ntohl(*(__be32 *)ip) & 0xfffff;
	if (cfg->flow_label && label) /* RFC 6438: the label stands for the ports */
		ports = label;
	return balance(p, eth, flow_hash(ip6_fold(&ip->saddr), ip6_fold(&ip->daddr), ports, proto, FLOW_SEED_LB), cfg);
}

static __always_inline int classify_external(struct pkt *p, struct ethhdr *eth, void *end, struct lb_config *cfg)
{
	if (!is_multicast(eth->h_dest) && !same_mac(eth->h_dest, p->port->mac))
		return drop(p, LB_DROP_NOT_OURS);
	switch (eth->h_proto) {
	case bpf_htons(ETH_P_ARP):
		return classify_arp(p, eth, end, cfg);
	case bpf_htons(ETH_P_IP):
		return classify_ipv4(p, eth, end, cfg);
	case bpf_htons(ETH_P_IPV6):
		return classify_ipv6(p, eth, end, cfg);
	case bpf_htons(ETH_P_DIST):
		return drop(p, LB_DROP_DIST_EXTERNAL);
	case bpf_htons(ETH_P_8021Q):
	case bpf_htons(ETH_P_8021AD):
		return drop(p, LB_DROP_TAGGED_EXTERNAL);
	}
	return drop(p, LB_DROP_NO_RULE);
}

static __always_inline int classify_internal(struct pkt *p, struct ethhdr *eth, void *end)
{
	if (eth->h_proto == bpf_htons(ETH_P_DIST))
		return dist(p);
	__u64 src = mac_key(eth->h_source);
	if (bpf_map_lookup_elem(&lb_own_macs, &src))
		return drop(p, LB_DROP_OWN_FRAME);
	if (eth->h_proto != bpf_htons(ETH_P_8021Q) && eth->h_proto != bpf_htons(ETH_P_8021AD))
		return drop(p, LB_DROP_UNTAGGED_INTERNAL);
	struct vlan_hdr *vh = (void *)(eth + 1);
	if ((void *)(vh + 1) > end)
		return drop(p, LB_DROP_RUNT);
	if (vh->proto == bpf_htons(ETH_P_8021Q) || vh->proto == bpf_htons(ETH_P_8021AD))
		return drop(p, LB_DROP_VLAN_IN_VLAN);
	__u32 vid = bpf_ntohs(vh->tci) & 0x0fff;
	struct lb_egress *eg = bpf_map_lookup_elem(&lb_vlans, &vid);
	if (!eg || eg->ifindex == 0)
		return drop(p, LB_DROP_VLAN_NOT_OURS);
	if (vh->proto == bpf_htons(ETH_P_ARP))
		return int_arp_out(p, eg);
	if (vh->proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip = (void *)(vh + 1);
		__u8 *nd = (void *)(ip + 1);
		if ((void *)(nd + 1) <= end && ip->nexthdr == IP6_NH_ICMP && nd[0] >= ICMP6_RS && nd[0] <= ICMP6_REDIRECT)
			return int_ndp_out(p, eg);
	}
	return int_to_ext(p, eg);
}

/* sample is sFlow's random sampling of what comes in by an external port
 * (sample_rate set): 1 in sample_rate frames on average goes to the agent
 * with its first LB_SAMPLE_HEADER bytes. As sFlow agents do, the gap to
 * the next sample is drawn at random (1 to 2 x rate - 1) when one is
 * taken, and counted down frame by frame: a frame not sampled costs a
 * decrement, not a random draw and a division (measured: 28 ns a frame
 * with a draw each). The pool grows by each gap when it ends. A sample
 * the perf buffer has no room for is counted, not retried: the frame
 * goes on. */
static __always_inline void sample(struct pkt *p, __u64 len)
{
	__u32 index = p->port->index;
	struct lb_sample_pool *sp = bpf_map_lookup_elem(&lb_sample_pool, &index);
	if (!sp)
		return;
	if (sp->countdown > 1) {
		sp->countdown--;
		return;
	}
	sp->pool += sp->interval ? sp->interval : 1;
	__u32 rate = p->port->sample_rate;
	sp->interval = rate > 1 ? 1 + bpf_get_prandom_u32() % (2 * rate - 1) : 1;
	sp->countdown = sp->interval;
	struct lb_sample s = {.frame_len = len, .port = index};
	__u64 caplen = len < LB_SAMPLE_HEADER ? len : LB_SAMPLE_HEADER;
	if (bpf_perf_event_output(p->ctx, &lb_samples, BPF_F_CURRENT_CPU | (caplen << 32), &s, sizeof(s)))
		sp->drops++;
}

SEC("xdp")
int lb(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct pkt p = {.ctx = ctx, .ifindex = ctx->ingress_ifindex};
	__u32 zero = 0;

	p.port = bpf_map_lookup_elem(&lb_ports, &p.ifindex);
	if (!p.port)
		return XDP_PASS; /* not a port of this LB: leave it to the stack */
	__u32 index = p.port->index;
	p.st = bpf_map_lookup_elem(&lb_stats, &index);
	struct lb_config *cfg = bpf_map_lookup_elem(&lb_cfg, &zero);
	if (!p.st || !cfg)
		return XDP_ABORTED;
	p.st->rx_packets++;
	p.st->rx_bytes += end - data;

	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return drop(&p, LB_DROP_RUNT);
	p.trace = trace_frame(&lb_trace, data, end, p.port->role == LB_PORT_EXTERNAL);
	switch (p.port->role) {
	case LB_PORT_EXTERNAL:
		if (p.port->sample_rate)
			sample(&p, end - data);
		return classify_external(&p, eth, end, cfg);
	case LB_PORT_INTERNAL:
		return classify_internal(&p, eth, end);
	}
	if (eth->h_proto == bpf_htons(ETH_P_DIST))
		return dist(&p); /* so that the agent can sense the port's role */
	return drop(&p, LB_DROP_PORT_UNKNOWN);
}
