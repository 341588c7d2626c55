/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * router.h: the back-end router's maps, shared by router.bpf.c and Go
 * (bpf2go generates the Go types).
 *
 * The FIB is DIR-24-8 (Gupta, Lin, McKeown, INFOCOM 1998): rt_tbl24 has
 * one entry per /24, rt_tbl8 one group of 256 entries for each /24 that
 * holds longer prefixes. An entry is 0 (no route), a next-hop group id, or
 * RT_TBL8_FLAG | group. A lookup reads at most two array entries whatever
 * the table holds. Both arrays are mmapped by the agent, which writes one
 * aligned u32 per entry: a packet sees an entry's old or new value, never
 * half of one.
 *
 * The IPv6 FIB (router/fib6.go) is a multibit trie of the same kind: rt6_tbl16
 * has one entry per /16, and below it groups of 256 entries each take 8
 * more bits, as deep as the longest prefix: a /48 is five reads, a /64
 * seven, whatever the table holds. The groups are compressed, as
 * Poptrie's leaves are (Asai and Ohara, SIGCOMM 2015): in rt6_pool, a
 * group's first line holds a bitmap of where each run of equal entries
 * begins (RT6_BITMAP_WORDS) and the runs before each of its 64-bit words
 * (one byte each, in word RT6_COUNTS), and the runs' values follow from
 * word RT6_HEADER_WORDS on, into the lines after it: a group of a few
 * prefixes is one 64-byte line (docs/router.md, "The IPv6 FIB"). Entries
 * are next-hop groups, shared with IPv4, or RT_TBL8_FLAG | the group's
 * first line.
 */
#ifndef MSR_ROUTER_H
#define MSR_ROUTER_H

#include <linux/types.h>

/* The limits. Constants shared with Go are enums, never #defines: bpf2go
 * generates the Go side of an enum, so a limit is written once. */
enum rt_limit {
	RT_TBL24_ENTRIES = 1 << 24,
	/* An mmapable array stores each element at a multiple of 8 bytes, so
	 * the u32 entries are grouped into large elements that are
	 * contiguous: 32 chunks of 2^19 entries for tbl24, one 256-entry
	 * group per tbl8 element. */
	RT_TBL24_CHUNK_BITS = 19,
	RT_TBL24_CHUNKS = RT_TBL24_ENTRIES >> RT_TBL24_CHUNK_BITS,
	RT_TBL8_GROUPS = 8192,
	RT_TBL8_FLAG_BIT = 31, /* a tbl24 entry with it set names a tbl8 group */
	RT_MAX_NHGROUPS = 65536,
	RT_MAX_NEXTHOPS = 65536,
	RT_ECMP_MAX = 8, /* a power of two (router.bpf.c masks with it) */
	/* The router's external ports: one per VLAN id inside (1-4094,
	 * dist.MaxRouterPorts). rt_ports is sized at load from the agent's
	 * max_ports, RT_PORTS by default. */
	RT_MAX_PORTS = 4094,
	RT_PORTS = 1024,
	RT_MAX_ACL = 64,
	RT_MAX_NEIGHBORS = 65536,
	RT_MAX_LOCAL = 1024,
	RT_SLOW_SNAPLEN = 1518,
	RT6_TBL16_ENTRIES = 1 << 16,
	/* The pool's lines when the agent does not set it (fib6_lines in its
	 * config: 16 MiB; docs/router.md says what a full table needs). */
	RT6_LINES = 262144,
	RT6_LEVELS = 14, /* groups below rt6_tbl16: (128 - 16) / 8 */
	RT6_LINE_WORDS = 16,
	RT6_BITMAP_WORDS = 8,
	RT6_COUNTS = 8,
	RT6_HEADER_WORDS = 9,
	RT_MAX_NEIGHBORS6 = 65536,
	RT_MAX_LOCAL6 = 1024,
};
#define RT_TBL8_FLAG (1u << RT_TBL8_FLAG_BIT)

/* Why the fast path handed a frame to the agent. */
enum rt_slow {
	RT_SLOW_ARP = 0,          /* ARP (the LBs broadcast replies to back-ends) */
	RT_SLOW_TTL = 1,          /* TTL would expire: Time Exceeded */
	RT_SLOW_NO_ROUTE = 2,     /* Destination Unreachable */
	RT_SLOW_FRAG_NEEDED = 3,  /* DF (any IPv6) and larger than the egress MTU */
	RT_SLOW_FRAGMENT = 4,     /* larger than the egress MTU, may fragment */
	RT_SLOW_LOCAL = 5,        /* for one of the router's addresses */
	RT_SLOW_OPTIONS = 6,      /* IP options; IPv6 Hop-by-Hop Options */
	RT_SLOW_UNRESOLVED = 7,   /* next hop's MAC unknown: held while ARP (NDP) runs */
	RT_SLOW_NDP = 8,          /* ICMPv6 of an external port (NDP), relayed by an LB */
	RT_SLOW_ACL = 9,          /* denied by the ACL (also counted as that drop): administratively prohibited */
	RT_SLOW_MAX = 10,
};

/* Why a frame was dropped. */
enum rt_drop {
	RT_DROP_RUNT = 0,
	RT_DROP_NOT_OURS = 1,     /* unicast to another MAC (a flooding switch) */
	RT_DROP_BAD_VERSION = 2,
	RT_DROP_BAD_IHL = 3,
	RT_DROP_BAD_LENGTH = 4,
	RT_DROP_BAD_CHECKSUM = 5,
	RT_DROP_MARTIAN_SRC = 6,  /* RFC 1812 §5.3.7, RFC 4291 §2.5: bad source address */
	RT_DROP_MARTIAN_DST = 7,  /* 0/8, 127/8, multicast, broadcast; ::, ::1, ff00::/8, fe80::/10, ::ffff:0:0/96 */
	RT_DROP_ACL = 8,
	RT_DROP_TAGGED = 9,       /* a tagged frame that is not ARP or ICMPv6 */
	RT_DROP_NOT_IP = 10,
	RT_DROP_BAD_NEXTHOP = 11, /* FIB points at a next hop that is not there */
	RT_DROP_CAP = 12,         /* over the back-end's capacity (cap.h) */
	RT_DROP_INFRA = 13,       /* to this host from outside its inside: the balance path (infra.h) */
	RT_DROP_URPF = 14,        /* its source fails its ingress port's unicast RPF (RFC 3704) */
	RT_DROP_MAX = 15,
};

/* An external port's unicast RPF (rt_vlans, by VLAN): what its LB
 * balances from it arrives tagged with its VLAN, and passes only if the
 * FIB has a route to its source (loose) through this same port (strict). */
enum rt_urpf {
	RT_URPF_OFF = 0,
	RT_URPF_LOOSE = 1,
	RT_URPF_STRICT = 2,
};

struct rt_vlan {
	__u8 urpf;     /* enum rt_urpf */
	__u8 external; /* one of the router's external ports */
	__u8 pad[2];
};

struct rt_tbl24_chunk {
	__u32 e[1 << RT_TBL24_CHUNK_BITS];
};

struct rt_tbl8_group {
	__u32 e[256];
};

/* A line of rt6_pool: words, or a group's bitmap as 64-bit words. */
struct rt6_line {
	union {
		__u32 w[RT6_LINE_WORDS];
		__u64 bm[RT6_LINE_WORDS / 2];
	};
};

struct rt6_tbl16 {
	__u32 e[RT6_TBL16_ENTRIES];
};

struct rt_nhgroup {
	__u32 count; /* 1..RT_ECMP_MAX */
	__u32 nh[RT_ECMP_MAX];
};

struct rt_nexthop {
	__be32 gw;   /* 0: connected, the destination is the neighbour */
	__u16 port;  /* index into rt_ports */
	__u16 pad;
	__u8 gw6[16]; /* an IPv6 route's gateway; all zero: connected */
};

/* An external port of the router, as every back-end mirrors it. */
struct rt_port {
	__u16 vlan;
	__u16 mtu;
	__be32 addr;
};

struct rt_neigh_key {
	__be32 ip;
	__u16 vlan;
	__u16 pad;
};

struct rt_neigh6_key {
	__u8 ip[16];
	__u16 vlan;
	__u16 pad;
};

struct rt_neigh {
	__u8 mac[6];
	__u16 pad;
};

/* Local addresses (rt_local values). */
enum rt_local_kind {
	RT_LOCAL_ROUTER = 1, /* an address of the router: the slow path answers */
	RT_LOCAL_HOST = 2,   /* this host's own: the kernel stack */
};

/* One ACL rule, of one family or both: a rule with IPv4 prefixes matches
 * IPv4 only, one with IPv6 prefixes IPv6 only, one with none either. */
struct rt_acl_rule {
	__be32 src;
	__be32 src_mask;
	__be32 dst;
	__be32 dst_mask;
	__u8 proto; /* 0: any */
	__u8 action; /* RT_ACL_PERMIT or RT_ACL_DENY */
	__u8 family; /* 0: both, 4: IPv4, 6: IPv6 */
	__u8 pad;
	__u16 sport_lo, sport_hi; /* host order; 0-65535: any */
	__u16 dport_lo, dport_hi;
	__be32 src6[4];
	__be32 src6_mask[4];
	__be32 dst6[4];
	__be32 dst6_mask[4];
};

enum rt_acl_action {
	RT_ACL_PERMIT = 1,
	RT_ACL_DENY = 2,
};

struct rt_config {
	__u8 mac[6];  /* this back-end's MAC on the interconnect */
	__u16 acl_rules;
};

/* Metadata in front of a frame sent to the agent. */
struct rt_slow_meta {
	__u32 reason;  /* enum rt_slow */
	__u32 ifindex; /* where it arrived */
	__u32 nexthop; /* RT_SLOW_UNRESOLVED, FRAG_*: the chosen next hop */
	__u32 len;     /* frame length; the event holds min(len, RT_SLOW_SNAPLEN) */
};

struct rt_stats {
	__u64 rx_packets;
	__u64 rx_bytes;
	__u64 forwarded;
	__u64 forwarded_bytes;
	__u64 passed; /* to this host's stack (DIST, its own addresses) */
	__u64 probes; /* DIST PROBEs reflected to the LB that sent them */
	__u64 slow[RT_SLOW_MAX];
	__u64 slow_drop[RT_SLOW_MAX]; /* over the reason's rate (rt_slow_caps) */
	__u64 drop[RT_DROP_MAX];
	__u64 acl_permit[RT_MAX_ACL];
	__u64 acl_deny[RT_MAX_ACL];
};

#endif
