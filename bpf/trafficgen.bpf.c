// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/*
 * trafficgen: the traffic generator of `msr bench`.
 *
 * Run with BPF_PROG_RUN in live-frames mode (BPF_F_TEST_XDP_LIVE_FRAMES):
 * each run turns one page into a test frame and returns XDP_TX, which the
 * kernel turns into a redirect out of ctx->ingress_ifindex. The kernel
 * reuses pages without resetting them (DESIGN.md §7), so every run writes
 * every header byte, never relying on the frame it was given.
 *
 * Flows are taken round-robin from gen_flows (cfg.flows entries); each
 * carries its own sequence number, and may name the interface it leaves
 * by (several sources from one generator: a redirect, which live-frames
 * mode supports). The frame length is the data length
 * the run was given (60..1514 bytes). With cfg.dsts, each frame goes to
 * the next of gen_dsts' destinations instead of its flow's own: more
 * destinations than the payload's 16-bit flow ids, each flow's sequence
 * counted as ever.
 *
 * With gap_ns set, frames are paced a batch at a time: the kernel
 * builds cfg.batch frames and transmits them together, so the first frame
 * of each batch waits (spinning in bpf_loop on the generator's own core)
 * until the batch's departure time, cfg.batch gaps after the previous
 * batch's on the schedule, and the rest are built at once behind it (their
 * timestamps are then a few hundred nanoseconds from the moment they
 * leave, not the batch's length). A generator that fell behind
 * catches up, a third faster than its rate at most; one that fell behind
 * by more than PACE_MAX_DEBT frames (between two BPF_PROG_RUN calls, or
 * its core taken for long) restarts its schedule (pace_restarts,
 * pace_skipped_ns).
 *
 * A flow may be IPv6's (RFC 5180: Ethernet, IPv6, UDP with its checksum,
 * the same payload), tagged as IPv4's may be.
 *
 * Verdicts: XDP_TX or XDP_REDIRECT, or XDP_ABORTED for a frame too short for the headers
 * or a missing flow entry. Counter: sent (frames built); first_tx_ns and
 * last_tx_ns bound the sending window.
 * xdp_pass is attached to the generator's interface so that it has an XDP
 * program, as the veth transmit path wants.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "bench.h"
#include "common.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

const volatile struct gen_config cfg = {.flows = 1};

__u64 sent = 0;
/* Time between frames for a set rate; 0 sends flat out. From frame
 * gap_next_at on (0: never), the gap is gap_next_ns: a rate that changes
 * within a run, without the pause between two runs. */
__u64 gap_ns = 0;
__u64 gap_next_ns = 0;
__u64 gap_next_at = 0;
__u64 gap_changed_ns = 0; /* when it did */
/* Paced: when the next frame is due (frame k of a run at first departure
 * plus k gaps), and when the last one left. */
__u64 schedule_ns = 0;
/* Frames built since user space cleared it before a run: a run's batches
 * start at multiples of cfg.batch. */
__u64 run_frames = 0;
__u64 last_departure_ns = 0;
/* When the first and the last frame since first_tx_ns was cleared left:
 * the sending window, over which the offered rate is exact (a run's setup,
 * tens of milliseconds, is outside it). */
__u64 first_tx_ns = 0;
__u64 last_tx_ns = 0;
/* Paced: how often the clock restarted, and the time it skipped. */
__u64 pace_restarts = 0;
__u64 pace_skipped_ns = 0;

/* A generator behind its schedule (its core taken for a while: a tick's
 * work, another task) catches up at most a third faster than its rate, so
 * that the rate offered over a trial is the rate asked; one behind by more
 * than PACE_MAX_DEBT frames (about a veth ring) restarts its schedule
 * instead, counting the time it skipped. */
#define PACE_MAX_DEBT 2048
#define PACE_CATCH_UP_DIV 4
/* bpf_loop's bound: at tens of ns an iteration, a fraction of a second. */
#define PACE_MAX_SPINS (1 << 23)

/* Keeps struct bench_payload in BTF so bpf2go generates its Go type. */
const struct bench_payload *unused_bench_payload __attribute__((unused));
const enum gen_len *unused_gen_len __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, BENCH_MAX_FLOWS);
	__type(key, __u32);
	__type(value, struct gen_flow);
} gen_flows SEC(".maps");

/* The destinations walked (cfg.dsts of them; the loader sizes it). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_dst);
} gen_dsts SEC(".maps");

static __always_inline void write_eth(struct ethhdr *eth, const struct gen_flow *f, int tagged)
{
	/* Byte by byte through the volatile cfg: a memcpy from a cast-away
	 * const would let clang fold in the all-zero initializer instead of
	 * the value user space sets at load time. */
#pragma unroll
	for (int i = 0; i < ETH_ALEN; i++) {
		eth->h_dest[i] = f->ifindex ? f->dst_mac[i] : cfg.dst_mac[i];
		eth->h_source[i] = f->ifindex ? f->src_mac[i] : cfg.src_mac[i];
	}
	if (tagged) {
		struct vlan_hdr *vh = (void *)(eth + 1);
		eth->h_proto = bpf_htons(ETH_P_8021Q);
		vh->tci = bpf_htons(f->vlan & 0x0fff);
		vh->proto = bpf_htons(ETH_P_IP);
	} else {
		eth->h_proto = bpf_htons(ETH_P_IP);
	}
}

static __always_inline void write_ip(struct iphdr *ip, const struct gen_flow *f, __u16 len, __u8 proto)
{
	ip->version = 4;
	ip->ihl = 5;
	ip->tos = 0;
	ip->tot_len = bpf_htons(len);
	ip->id = 0;
	ip->frag_off = 0;
	ip->ttl = 64;
	ip->protocol = proto;
	ip->check = f->ip_check;
	ip->saddr = f->saddr;
	ip->daddr = f->daddr;
}

static __always_inline void write_udp(struct udphdr *udp, const struct gen_flow *f, __u16 len)
{
	udp->source = f->sport;
	udp->dest = f->dport;
	udp->len = bpf_htons(len);
	/* RFC 768: zero means no checksum, allowed over IPv4. */
	udp->check = 0;
}

static long departure_reached(__u64 index, void *ctx)
{
	return bpf_ktime_get_ns() >= *(__u64 *)ctx;
}

/* pace waits until this run's batch is due; called at a batch's first
 * frame. */
static __always_inline void pace(void)
{
	if (gap_next_at && sent >= gap_next_at) {
		gap_ns = gap_next_ns;
		gap_next_at = 0;
		gap_changed_ns = bpf_ktime_get_ns();
	}
	__u64 period = gap_ns * cfg.batch;
	__u64 now = bpf_ktime_get_ns();

	if (!schedule_ns || schedule_ns + PACE_MAX_DEBT * gap_ns < now) {
		if (schedule_ns) {
			pace_restarts++;
			pace_skipped_ns += now - schedule_ns;
		}
		schedule_ns = now;
		last_departure_ns = 0;
	}
	/* On schedule, or catching up at most PACE_CATCH_UP_DIV/(DIV-1)
	 * times the rate. */
	__u64 departure = schedule_ns;
	__u64 earliest = last_departure_ns + period - period / PACE_CATCH_UP_DIV;
	if (last_departure_ns && departure < earliest)
		departure = earliest;
	if (now < departure) {
		__u64 deadline = departure; /* bpf_loop's ctx must be on the stack */
		bpf_loop(PACE_MAX_SPINS, departure_reached, &deadline, 0);
	} else {
		departure = now;
	}
	last_departure_ns = departure;
	schedule_ns += period;
}

/* An ICMP echo request's header (RFC 792); linux/icmp.h pulls in libc. */
struct echo_hdr {
	__u8 type;
	__u8 code;
	__u16 checksum;
	__be16 id;
	__be16 seq;
};

#define ICMP_ECHO 8

/* build_flood writes a TCP SYN or an ICMP echo request after the Ethernet
 * header (bounds checked by the caller for the longer test frame). */
static __always_inline int build_flood(struct iphdr *ip, struct gen_flow *f)
{
	if (f->proto == IPPROTO_TCP) {
		struct tcphdr *tcp = (void *)(ip + 1);
		write_ip(ip, f, GEN_SYN_LEN, IPPROTO_TCP);
		__builtin_memset(tcp, 0, sizeof(*tcp));
		tcp->source = f->sport;
		tcp->dest = f->dport;
		tcp->seq = bpf_htonl(GEN_SYN_SEQ);
		tcp->doff = 5;
		tcp->syn = 1;
		tcp->window = bpf_htons(GEN_SYN_WINDOW);
		tcp->check = f->l4_check;
	} else {
		struct echo_hdr *echo = (void *)(ip + 1);
		write_ip(ip, f, GEN_ECHO_LEN, IPPROTO_ICMP);
		echo->type = ICMP_ECHO;
		echo->code = 0;
		echo->checksum = f->l4_check;
		echo->id = f->sport;
		echo->seq = 0;
	}
	if (!first_tx_ns)
		first_tx_ns = bpf_ktime_get_ns();
	last_tx_ns = bpf_ktime_get_ns();
	return f->ifindex ? bpf_redirect(f->ifindex, 0) : XDP_TX;
}

/* fold16 folds a one's complement sum to 16 bits. */
static __always_inline __u16 fold16(__u64 sum)
{
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)((sum & 0xffff) + (sum >> 16));
}

/* build writes flow idx's frame, tagged or not (a constant in each
 * inlined copy, so that every offset is one the verifier knows), to the
 * walked destination d if there is one: its address, and its words added
 * to the checksum the flow's holds without it. */
static __always_inline int build(struct xdp_md *ctx, struct gen_flow *f, __u32 idx, const struct gen_dst *d, const int tagged)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1) + (tagged ? sizeof(struct vlan_hdr) : 0);
	struct udphdr *udp = (void *)(ip + 1);
	struct bench_payload *pl = (void *)(udp + 1);

	if ((void *)(pl + 1) > end)
		return XDP_ABORTED;
	__u16 len = (__u16)(end - (void *)ip);
	write_eth(eth, f, tagged);
	if (f->proto == IPPROTO_TCP || f->proto == IPPROTO_ICMP)
		return build_flood(ip, f);
	write_ip(ip, f, len, IPPROTO_UDP);
	if (d) {
		ip->daddr = d->daddr;
		ip->check = ~fold16((__u16)~f->ip_check + (d->daddr & 0xffff) + (d->daddr >> 16));
	}
	write_udp(udp, f, len - sizeof(*ip));
	pl->magic = bpf_htons(BENCH_MAGIC);
	pl->flow = (__u16)(cfg.first_flow + idx);
	/* One Run executes on one CPU; the atomic keeps two concurrent
	 * generators on one map honest. */
	pl->seq = __sync_fetch_and_add(&f->seq, 1);
	pl->tx_ns = bpf_ktime_get_ns();
	if (!first_tx_ns)
		first_tx_ns = pl->tx_ns;
	last_tx_ns = pl->tx_ns;
	return f->ifindex ? bpf_redirect(f->ifindex, 0) : XDP_TX;
}

/* build6 writes flow idx's IPv6/UDP test frame (RFC 5180), tagged or not: the
 * UDP checksum is the flow's sum of everything constant plus this frame's
 * seq and tx_ns, as they lie in memory. */
static __always_inline int build6(struct xdp_md *ctx, struct gen_flow *f, __u32 idx, const struct gen_dst *d, const int tagged)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6 = (void *)(eth + 1) + (tagged ? sizeof(struct vlan_hdr) : 0);
	struct udphdr *udp = (void *)(ip6 + 1);
	struct bench_payload *pl = (void *)(udp + 1);

	if ((void *)(pl + 1) > end)
		return XDP_ABORTED;
	__u16 len = (__u16)(end - (void *)udp);
	write_eth(eth, f, tagged);
	if (tagged)
		((struct vlan_hdr *)(eth + 1))->proto = bpf_htons(ETH_P_IPV6);
	else
		eth->h_proto = bpf_htons(ETH_P_IPV6);
	if (!tagged && cfg.tag_room) {
		/* A page that last carried a tagged frame holds 4 of its bytes
		 * past this frame's payload; the checksum counts them zero. */
		__u32 *pad = (void *)(pl + 1);
		if ((void *)(pad + 1) <= end)
			*pad = 0;
	}
	*(__be32 *)ip6 = bpf_htonl(6 << 28); /* version; no traffic class or flow label */
	ip6->payload_len = bpf_htons(len);
	ip6->nexthdr = IPPROTO_UDP;
	ip6->hop_limit = 64;
	__builtin_memcpy(&ip6->saddr, f->saddr6, 16);
	__u64 sum = f->csum6;
	if (d) {
		__builtin_memcpy(&ip6->daddr, d->daddr6, 16);
		const __u16 *w = (const __u16 *)d->daddr6;
#pragma unroll
		for (int i = 0; i < 8; i++)
			sum += w[i];
	} else {
		__builtin_memcpy(&ip6->daddr, f->daddr6, 16);
	}
	udp->source = f->sport;
	udp->dest = f->dport;
	udp->len = bpf_htons(len);
	pl->magic = bpf_htons(BENCH_MAGIC);
	pl->flow = (__u16)(cfg.first_flow + idx);
	__u32 seq = __sync_fetch_and_add(&f->seq, 1);
	__u64 tx = bpf_ktime_get_ns();
	pl->seq = seq;
	pl->tx_ns = tx;
	sum += (seq & 0xffff) + (seq >> 16) + (tx & 0xffff) + ((tx >> 16) & 0xffff) + ((tx >> 32) & 0xffff) + (tx >> 48);
	__u16 check = ~fold16(sum);
	udp->check = check ? check : 0xffff; /* RFC 768: zero is "none", not allowed over IPv6 */
	if (!first_tx_ns)
		first_tx_ns = tx;
	last_tx_ns = tx;
	return f->ifindex ? bpf_redirect(f->ifindex, 0) : XDP_TX;
}

SEC("xdp")
int trafficgen(struct xdp_md *ctx)
{
	/* A frame too short for an untagged test frame is refused before it
	 * is counted. */
	if ((void *)(long)ctx->data + sizeof(struct ethhdr) + sizeof(struct iphdr) + sizeof(struct udphdr) +
		    sizeof(struct bench_payload) >
	    (void *)(long)ctx->data_end)
		return XDP_ABORTED;
	__u32 n = cfg.flows ? cfg.flows : 1;
	__u32 idx = sent % n;
	struct gen_flow *f = bpf_map_lookup_elem(&gen_flows, &idx);
	if (!f)
		return XDP_ABORTED;
	struct gen_dst *d = NULL;
	if (cfg.dsts) {
		__u32 k = sent % cfg.dsts;
		d = bpf_map_lookup_elem(&gen_dsts, &k);
		if (!d)
			return XDP_ABORTED;
	}
	sent++;
	if (gap_ns && cfg.batch && run_frames++ % cfg.batch == 0)
		pace();

	if (f->vlan)
		return f->ipv6 ? build6(ctx, f, idx, d, 1) : build(ctx, f, idx, d, 1);
	if (cfg.tag_room && bpf_xdp_adjust_tail(ctx, -(int)sizeof(struct vlan_hdr)))
		return XDP_ABORTED;
	return f->ipv6 ? build6(ctx, f, idx, d, 0) : build(ctx, f, idx, d, 0);
}

SEC("xdp")
int xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}
