/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * bench.h: the layouts shared by the traffic generator, the sink, and Go
 * (bpf2go generates the Go types from these; never mirror them by hand).
 *
 * A test frame is Ethernet + IPv4 (no options) + UDP + struct
 * bench_payload. The payload fits a 64-byte frame: 60 bytes without FCS
 * leave 18 bytes after the UDP header. An IPv6 test frame (RFC 5180) is
 * Ethernet + IPv6 (no extension headers) + UDP + the same payload: 78
 * bytes without FCS, so 82 at least (RFC 5180 §5.1.1's smallest, 78,
 * leaves 12 bytes of UDP payload: too few for this signature).
 */
#ifndef MSR_BENCH_H
#define MSR_BENCH_H

#include <linux/types.h>

/* "MS" in network byte order marks a frame as one of ours. */
#define BENCH_MAGIC 0x4d53
/* Flow ids are 16 bits in the payload. */
#define BENCH_MAX_FLOWS 65536
/*
 * Latency histogram: log-linear, 8 sub-buckets per power of two of
 * nanoseconds (error under 12.5%), values below 8 ns exact. 256 buckets
 * reach 2^34 ns (17 s); larger values land in the last bucket.
 */
#define BENCH_HIST_SUB_BITS 3
#define BENCH_HIST_BUCKETS 256

struct bench_payload {
	__be16 magic;
	__u16 flow;
	__u32 seq;
	__u64 tx_ns; /* bpf_ktime_get_ns() at the generator */
} __attribute__((packed));

/* One flow of the generator: its addresses, ports and running sequence
 * number. The IPv4 header checksum is precomputed by user space for the
 * frame size of the run (every other header field is constant per flow).
 * A flow with an ifindex leaves by that interface (a redirect), with its
 * own MACs; one without, by the run's interface with the configuration's.
 * A flow's proto is UDP (the test frame, 0 is UDP too), or TCP or ICMP for
 * a flood aimed at a router (`msr bench police`): a SYN, or an echo
 * request, whose checksum user space precomputed (l4_check), with the
 * rest of the frame Ethernet padding.
 * A flow with a vlan carries an 802.1Q tag with that VLAN id, 4 bytes
 * more than an untagged flow's frame of the same size: a back-end's
 * routed frame on an LB's internal port, as seed 000's "64 (68)".
 */
struct gen_flow {
	__be32 saddr;
	__be32 daddr;
	__be16 sport;
	__be16 dport;
	__u16 ip_check; /* network order, as stored in the header */
	__u16 vlan;     /* 0: untagged */
	__u32 seq;
	__u32 ifindex;
	__u8 src_mac[6];
	__u8 dst_mac[6];
	__u8 proto;     /* IPPROTO_UDP (or 0), IPPROTO_TCP, IPPROTO_ICMP */
	__u8 ipv6;      /* an IPv6/UDP test frame (untagged) */
	__u16 l4_check; /* TCP, ICMP: the header's checksum, network order */
	/* IPv6: the addresses, and the UDP checksum's sum (RFC 1071, of
	 * 16-bit words as they lie in memory, unfolded) over the
	 * pseudo-header, the UDP header and the payload with seq and tx_ns
	 * zero: the generator adds those two per frame (RFC 8200 §8.1: UDP
	 * over IPv6 always has a checksum). */
	__u8 saddr6[16];
	__u8 daddr6[16];
	__u32 csum6;
};

/* The IPv4 total length of a TCP SYN and an ICMP echo request of the
 * generator: headers only. */
enum gen_len {
	GEN_SYN_LEN = 40,
	GEN_ECHO_LEN = 28,
	/* A SYN's constant sequence number and window. */
	GEN_SYN_SEQ = 0x4d535359,
	GEN_SYN_WINDOW = 64240,
};

/* Load-time constants of the generator. */
struct gen_config {
	__u8 dst_mac[6];
	__u8 src_mac[6];
	__u32 flows;
	/* Paced: frames per batch (BPF_PROG_RUN's batch_size), which leave
	 * together at the batch's departure time. */
	__u32 batch;
	/* Some flows are tagged: a run's frames are 4 bytes longer than an
	 * untagged frame, and untagged flows give those 4 bytes back. */
	__u32 tag_room;
	/* More destinations than flow ids: each frame goes to the next of
	 * gen_dsts' dsts entries, whatever its flow (0: each flow's own). */
	__u32 dsts;
	/* The first flow's id: generators on several CPUs send flows of
	 * their own, each flow's frames in order from one CPU. */
	__u32 first_flow;
};

/* The most destinations a generator walks: a million and more, so that
 * a router's lookups miss its caches as an edge router's do. */
#define BENCH_MAX_DSTS (1 << 20)

/* A walked destination: its IPv4 address, or its IPv6 one (the flows'
 * family says which). A walking flow's checksums are precomputed with
 * the destination zero; the generator adds each frame's. */
struct gen_dst {
	__be32 daddr;
	__u8 daddr6[16];
};

/* A flow's window of recent sequence numbers: the sink remembers which of
 * the SINK_WINDOW numbers below the one it expects next arrived, so a
 * frame older than the newest tells a late frame (first arrival) from a
 * duplicate (a second one). */
#define SINK_WINDOW_WORDS 4 /* window_advance names each */
#define SINK_WINDOW (SINK_WINDOW_WORDS * 64)

/* Per-flow state of the sink. */
struct sink_flow {
	__u32 next_seq; /* sequence number expected next */
	__u32 seen;     /* 0 until the first frame of the flow */
	__u64 received; /* distinct frames: duplicates not counted */
	__u64 reordered; /* arrived after a later frame of the same flow */
	__u64 last_tx_ns; /* the generator's timestamp of the latest frame */
	/* Bit k (word k / 64, bit k % 64) set: sequence number
	 * next_seq - 1 - k arrived. */
	__u64 window[SINK_WINDOW_WORDS];
};

/* Per-CPU counters of the sink. */
struct sink_stats {
	__u64 rx_packets; /* test frames counted */
	__u64 rx_bytes;
	__u64 reordered;
	__u64 bad_flow; /* test frames with a flow id out of range */
	__u64 passed;   /* everything else, passed to the stack */
	/* Frames missing where a flow's sequence jumped ahead (lost, or
	 * late and then counted reordered), and when the first and the last
	 * of them were sent, estimated from the generator's timestamps on
	 * each side of the jump (0: none since the window was cleared). */
	__u64 skipped;
	__u64 loss_first_ns;
	__u64 loss_last_ns;
	/* The longest of the jumps, first missing frame to last: an outage
	 * apart from the odd frame lost before or after it. */
	__u64 loss_span_ns;
	/* The lowest and highest IPv4 TTL or IPv6 hop limit of the test
	 * frames: how many routers decremented it (the generator sends 64);
	 * 0: none yet. */
	__u64 ttl_min;
	__u64 ttl_max;
	/* Frames whose sequence number had arrived already in their flow's
	 * window: duplicates, counted in rx_packets too, not in reordered. */
	__u64 duplicated;
	/* Late frames older than their flow's window: counted reordered,
	 * though the sink cannot tell whether they were duplicates. */
	__u64 beyond_window;
};

#endif
