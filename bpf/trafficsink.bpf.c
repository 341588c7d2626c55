// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/*
 * trafficsink: the receiving end of `msr bench`, attached with XDP to the
 * sink host's interface.
 *
 * A test frame (IPv4/UDP or IPv6/UDP, perhaps 802.1Q-tagged, with a
 * bench_payload whose magic matches) is
 * counted, checked for order against its flow's expected sequence number
 * (and, when late, against its flow's window of recent numbers: a late
 * frame, or a duplicate),
 * timed against the generator's timestamp (same host, same clock) into a
 * log-linear histogram, and dropped. A jump in a flow's sequence counts
 * the frames skipped and widens the loss window (when the first and the
 * last missing frame were sent): an outage's length, in the generator's
 * time. Everything else (ARP, ...) is passed
 * to the stack.
 *
 * An instance loaded with host_mac set counts only the test frames
 * addressed to that MAC, a host's interface's (the whole router's lab puts
 * the sink on h3 and on bgp1, one segment): a frame for another MAC is not
 * this host's, whatever its flow (a switch floods a frame whose
 * destination it has not learned, or has forgotten when that port went
 * down), and passes to the stack uncounted, which drops it as a NIC would.
 * An instance per host interface, sharing the maps: an ifindex names an
 * interface only within its namespace. Without host_mac every test frame
 * counts (the benchmark labs, where frames reach the sink by any MAC).
 *
 * Verdicts: XDP_DROP for test frames, XDP_PASS otherwise.
 * Maps: sink_flows (per flow), sink_counters and sink_hist (per CPU).
 * Configuration: flows, the number of flows of the run.
 *
 * A veth has one receive queue, so one CPU at a time runs this program for
 * a given interface; the per-flow state needs no atomics.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "bench.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* Number of flows of the run; frames with a larger flow id count as
 * bad_flow (set at load time). */
const volatile __u32 flows = BENCH_MAX_FLOWS;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, BENCH_MAX_FLOWS);
	__type(key, __u32);
	__type(value, struct sink_flow);
} sink_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sink_stats);
} sink_counters SEC(".maps");

/* The host's MAC, as 6 bytes; host_only 0: count every test frame (see
 * above). */
const volatile __u8 host_mac[ETH_ALEN] = {};
const volatile __u32 host_only = 0;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, BENCH_HIST_BUCKETS);
	__type(key, __u32);
	__type(value, __u64);
} sink_hist SEC(".maps");

/* Index of the highest set bit of v > 0, without loops. */
static __always_inline __u32 msb64(__u64 v)
{
	__u32 r = 0;

	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) r += 1;
	return r;
}

/* Bucket of a latency in ns; see BENCH_HIST_SUB_BITS. */
static __always_inline __u32 hist_bucket(__u64 ns)
{
	const __u32 sub = 1 << BENCH_HIST_SUB_BITS;

	if (ns < sub)
		return (__u32)ns;
	__u32 m = msb64(ns);
	__u32 b = (m - BENCH_HIST_SUB_BITS + 1) * sub + ((ns >> (m - BENCH_HIST_SUB_BITS)) & (sub - 1));
	return b < BENCH_HIST_BUCKETS ? b : BENCH_HIST_BUCKETS - 1;
}

/* parse_test_frame returns the payload of a test frame, or NULL, and its
 * TTL. A frame may carry one 802.1Q tag (a back-end router's output
 * does). */
static __always_inline struct bench_payload *parse_test_frame(void *data, void *end, __u8 *ttl)
{
	struct ethhdr *eth = data;
	void *l3 = eth + 1;

	if (l3 > end)
		return NULL;
	__be16 proto = eth->h_proto;
	if (proto == bpf_htons(ETH_P_8021Q)) {
		__be16 *inner = l3 + 2;
		if ((void *)(inner + 1) > end)
			return NULL;
		proto = *inner;
		l3 += 4;
	}
	if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = l3;
		struct bench_payload *pl = l3 + sizeof(*ip6) + sizeof(struct udphdr);

		if ((void *)(pl + 1) > end || ip6->nexthdr != IPPROTO_UDP || pl->magic != bpf_htons(BENCH_MAGIC))
			return NULL;
		*ttl = ip6->hop_limit;
		return pl;
	}
	struct iphdr *ip = l3;
	struct udphdr *udp = (void *)(ip + 1);
	struct bench_payload *pl = (void *)(udp + 1);

	if ((void *)(pl + 1) > end)
		return NULL;
	if (proto != bpf_htons(ETH_P_IP) || ip->ihl != 5 || ip->protocol != IPPROTO_UDP)
		return NULL;
	if (pl->magic != bpf_htons(BENCH_MAGIC))
		return NULL;
	*ttl = ip->ttl;
	return pl;
}

/* track_loss notes a jump of a flow's sequence from next_seq to seq: the
 * frames in between left evenly spaced between the flow's last frame and
 * this one, so the first left one spacing after the last and the last
 * one spacing before this one. */
static __always_inline void track_loss(struct sink_stats *st, struct sink_flow *f, __u32 seq, __u64 tx_ns)
{
	__u32 missing = seq - f->next_seq;
	__u64 span = tx_ns > f->last_tx_ns ? tx_ns - f->last_tx_ns : 0;
	__u64 spacing = span / ((__u64)missing + 1);
	__u64 first = f->last_tx_ns + spacing, last = tx_ns - spacing;

	st->skipped += missing;
	if (!st->loss_first_ns || first < st->loss_first_ns)
		st->loss_first_ns = first;
	if (last > st->loss_last_ns)
		st->loss_last_ns = last;
	if (last > first && last - first > st->loss_span_ns)
		st->loss_span_ns = last - first;
}

/* window_advance moves a flow's window on by d >= 1 sequence numbers
 * (the newest frame is d past the last newest) and marks the newest
 * arrived: the register shifts towards older by d bits, and the d - 1
 * numbers skipped enter it unmarked. The words are named, not indexed:
 * the verifier takes no variable offset into a map value's array. */
static __always_inline void window_advance(struct sink_flow *f, __u32 d)
{
	__u64 w0 = f->window[0], w1 = f->window[1], w2 = f->window[2], w3 = f->window[3];

	if (d >= SINK_WINDOW) {
		w0 = w1 = w2 = w3 = 0;
	} else {
		__u32 words = d >> 6, bits = d & 63;

		if (words >= 2) {
			w3 = w1;
			w2 = w0;
			w1 = w0 = 0;
			words -= 2;
		}
		if (words >= 1) {
			w3 = w2;
			w2 = w1;
			w1 = w0;
			w0 = 0;
		}
		if (bits) {
			w3 = w3 << bits | w2 >> (64 - bits);
			w2 = w2 << bits | w1 >> (64 - bits);
			w1 = w1 << bits | w0 >> (64 - bits);
			w0 <<= bits;
		}
	}
	f->window[0] = w0 | 1;
	f->window[1] = w1;
	f->window[2] = w2;
	f->window[3] = w3;
}

/* window_mark marks sequence number next_seq - 1 - k (k < SINK_WINDOW)
 * arrived; returns 1 if it had arrived already. */
static __always_inline int window_mark(struct sink_flow *f, __u32 k)
{
	__u64 bit = 1ULL << (k & 63);
	__u64 *w;

	switch (k >> 6) {
	case 0: w = &f->window[0]; break;
	case 1: w = &f->window[1]; break;
	case 2: w = &f->window[2]; break;
	default: w = &f->window[3]; break;
	}
	if (*w & bit)
		return 1;
	*w |= bit;
	return 0;
}

/* track_order counts a frame against its flow: in order, late (first
 * arrival after a later frame: reordered), or a duplicate of one that
 * arrived already. Sequence numbers compare as RFC 1982 serial numbers,
 * so wrapping is not reordering. */
static __always_inline void track_order(struct sink_stats *st, struct sink_flow *f, __u32 seq, __u64 tx_ns)
{
	if (f->seen && (__s32)(seq - f->next_seq) < 0) {
		__u32 k = f->next_seq - 1 - seq;

		if (k >= SINK_WINDOW) {
			f->received++;
			st->beyond_window++;
			st->reordered++;
			f->reordered++;
			return;
		}
		if (window_mark(f, k)) {
			st->duplicated++;
			return;
		}
		f->received++;
		st->reordered++;
		f->reordered++;
		return;
	}
	if (!f->seen) {
		window_advance(f, SINK_WINDOW);
	} else {
		if (seq != f->next_seq)
			track_loss(st, f, seq, tx_ns);
		window_advance(f, seq - f->next_seq + 1);
	}
	f->received++;
	f->seen = 1;
	f->next_seq = seq + 1;
	f->last_tx_ns = tx_ns;
}

SEC("xdp")
int trafficsink(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 zero = 0;
	struct sink_stats *st = bpf_map_lookup_elem(&sink_counters, &zero);

	if (!st)
		return XDP_PASS;
	__u8 ttl = 0;
	struct bench_payload *pl = parse_test_frame(data, end, &ttl);
	if (!pl) {
		st->passed++;
		return XDP_PASS;
	}
	if (host_only) {
		const struct ethhdr *eth = data; /* parse_test_frame checked it */
		if (eth + 1 > (struct ethhdr *)end)
			return XDP_PASS;
		int other = 0;
#pragma unroll
		for (int i = 0; i < ETH_ALEN; i++)
			other |= eth->h_dest[i] ^ host_mac[i];
		if (other) {
			st->passed++;
			return XDP_PASS;
		}
	}
	__u32 flow = pl->flow;
	struct sink_flow *f = flow < flows ? bpf_map_lookup_elem(&sink_flows, &flow) : NULL;
	if (!f) {
		st->bad_flow++;
		return XDP_DROP;
	}
	st->rx_packets++;
	st->rx_bytes += end - data;
	if (!st->ttl_min || ttl < st->ttl_min)
		st->ttl_min = ttl;
	if (ttl > st->ttl_max)
		st->ttl_max = ttl;
	track_order(st, f, pl->seq, pl->tx_ns);

	__u64 now = bpf_ktime_get_ns();
	__u32 b = hist_bucket(now > pl->tx_ns ? now - pl->tx_ns : 0);
	__u64 *cnt = bpf_map_lookup_elem(&sink_hist, &b);
	if (cnt)
		(*cnt)++;
	return XDP_DROP;
}
