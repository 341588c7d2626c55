/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * lb.h: the load balancer's maps and counters, shared by lb.bpf.c and Go
 * (bpf2go generates the Go types; never mirror them by hand).
 */
#ifndef MSR_LB_H
#define MSR_LB_H

#include <linux/bpf.h> /* struct bpf_spin_lock */
#include <linux/in6.h> /* struct in6_addr */
#include <linux/types.h>

/* The limits. Constants shared with Go are enums, never #defines: bpf2go
 * generates the Go side of an enum, so a limit is written once. */
enum lb_limit {
	LB_MAX_PORTS = 16,
	/* Slots of a balancing table: a prime, so it also serves Maglev's
	 * lookup table for up to 655 back-ends at 100 slots each. */
	LB_TABLE_SLOTS = 65537,
	LB_VLANS = 4096,
	LB_MAX_ROUTER_ADDRS = 1024,
	/* lb_caps: the LB's own capacity at LB_CAP_ELEMENT, each port's at
	 * LB_CAP_PORT + its index. */
	LB_CAP_ELEMENT = 0,
	LB_CAP_PORT = 1,
	LB_CAPS = LB_CAP_PORT + LB_MAX_PORTS,
	/* Flows lb_flowlets remembers; the least recently seen goes first. */
	LB_FLOWLETS = 65536,
	/* The most of a sampled frame sent to the agent: sFlow's default
	 * header size. */
	LB_SAMPLE_HEADER = 128,
	/* Control-plane policing: buckets per class for its sources (by
	 * hash of source address and ingress port), a power of two. */
	LB_POLICE_SOURCES = 1024,
	/* lb_peers: the router's configured neighbours an LB holds. */
	LB_MAX_PEERS = 1024,
};

enum lb_port_role {
	LB_PORT_UNKNOWN = 0,
	LB_PORT_EXTERNAL = 1,
	LB_PORT_INTERNAL = 2,
};

enum lb_mode {
	LB_MODE_WRR = 1,
	LB_MODE_HASH = 2,
	LB_MODE_MAGLEV = 3,
	/* Flowlets: a flow keeps its back-end while its packets come closer
	 * together than lb_config.flowlet_gap_us; after a longer gap the
	 * weighted schedule picks anew (lb_flowlets). */
	LB_MODE_FLOWLET = 4,
};

/* What each module of seed 000's Fig. 3 handled, per ingress port. */
enum lb_module {
	LB_MOD_EXT_ARP = 0,      /* ARP request from outside, answered */
	LB_MOD_INT_ARP_OUT = 1,  /* back-end ARP, out to its VLAN's port */
	LB_MOD_INT_ARP_IN = 2,   /* ARP reply from outside, to every back-end */
	LB_MOD_VCP = 3,          /* routing/management, to the VCP */
	LB_MOD_BALANCE = 4,      /* data from outside, to a back-end */
	LB_MOD_INT_TO_EXT = 5,   /* tagged frame from inside, out its port */
	LB_MOD_DIST = 6,         /* DIST frame, to the agent */
	LB_MOD_EXT_NDP = 7,      /* Neighbor Solicitation from outside, answered */
	LB_MOD_INT_NDP_OUT = 8,  /* back-end or VCP NDP, out to its VLAN's port */
	LB_MOD_INT_NDP_IN = 9,   /* Neighbor Advertisement from outside, to every back-end */
	LB_MOD_MAX = 10,
};

/* Why a frame was dropped, per ingress port. */
enum lb_drop {
	LB_DROP_RUNT = 0,            /* shorter than its headers say */
	LB_DROP_NOT_OURS = 1,        /* unicast to another MAC */
	LB_DROP_PORT_UNKNOWN = 2,    /* port has no role yet; only DIST passes */
	LB_DROP_DIST_EXTERNAL = 3,   /* DIST from outside: an attack */
	LB_DROP_TAGGED_EXTERNAL = 4, /* 802.1Q frame from outside */
	LB_DROP_BAD_ARP = 5,         /* not Ethernet/IPv4 ARP, or unknown op */
	LB_DROP_ARP_NOT_OURS = 6,    /* ARP request for an address not this port's */
	LB_DROP_BAD_IP = 7,          /* IPv4 or IPv6 header (chain) invalid */
	LB_DROP_MCAST_EXTERNAL = 8,  /* multicast/broadcast data from outside */
	LB_DROP_NO_BACKEND = 9,      /* balancing table empty */
	LB_DROP_NO_VCP = 10,         /* control packet, VCP unknown */
	LB_DROP_NO_RULE = 11,        /* no rule of Table 1 matches */
	LB_DROP_OWN_FRAME = 12,      /* from inside with one of our MACs as source */
	LB_DROP_UNTAGGED_INTERNAL = 13, /* untagged non-DIST from inside */
	LB_DROP_VLAN_NOT_OURS = 14,  /* VLAN owned by another LB */
	LB_DROP_VLAN_IN_VLAN = 15,   /* stacked tags */
	LB_DROP_NO_INTERNAL = 16,    /* no default internal port configured */
	LB_DROP_CAP = 17,            /* over the LB's capacity (cap.h) */
	LB_DROP_PORT_CAP = 18,       /* over its internal port's capacity (DTX-n) */
	LB_DROP_POLICED = 19,        /* to the router, over its class's rate */
	LB_DROP_BAD_NDP = 20,        /* NDP with hop limit not 255, a code, or short */
	LB_DROP_NDP_NOT_OURS = 21,   /* Neighbor Solicitation for an address not this port's */
	LB_DROP_INFRA = 22,          /* from outside, to or from the router's inside (infra.h) */
	LB_DROP_GTSM = 23,           /* BGP or BFD that must come with TTL 255 did not (RFC 5082) */
	LB_DROP_MAX = 24,
};

/* Control-plane policing: what a packet from outside addressed to the
 * router itself is, for its class's rate (lb_police_rates). Classes up to
 * LB_POLICE_MGMT go to the VCP; ICMP and the rest are answered by a
 * back-end (echo, port unreachable, reset), so policing them keeps a flood
 * off the back-ends' slow paths. Transit traffic has no class. */
enum lb_police_class {
	LB_POLICE_BGP = 0,   /* TCP to or from port 179 of a router address */
	LB_POLICE_IGP = 1,   /* OSPF and RIP, to the router or their groups */
	LB_POLICE_BFD = 2,   /* UDP 3784/4784 to a router address */
	LB_POLICE_MGMT = 3,  /* SNMP, and anything to the management address */
	LB_POLICE_ICMP = 4,  /* ICMP to a router address */
	LB_POLICE_LOCAL = 5, /* any other packet to a router address */
	LB_POLICE_CLASSES = 6,
	LB_POLICE_NONE = 6,  /* transit: not policed */
};

/* A class's rates, as cap.h's buckets take them: the class as a whole,
 * and each of its sources (a flood from one host leaves the others their
 * share). 0 intervals: no limit. */
struct lb_police_rate {
	__u64 interval_ns;
	__u64 tolerance_ns;
	__u64 src_interval_ns;
	__u64 src_tolerance_ns;
};

/* One bucket of lb_police_buckets: class c's whole at
 * c * (LB_POLICE_SOURCES + 1), its sources' after it. */
struct lb_police_bucket {
	struct bpf_spin_lock lock;
	__u32 pad;
	__u64 tat; /* cap.h: when the next frame is due */
};

/* Per class, per CPU: what passed, and what was dropped for its source's
 * rate or the class's. */
struct lb_police_counts {
	__u64 passed;
	__u64 dropped_source;
	__u64 dropped_class;
};

/* A configured neighbour of the router (BGP and BFD peers), by its
 * address and the port it is heard on: its routing packets take its own
 * bucket, at its class's per-source rate, ahead of and instead of the
 * class's shared one, so a flood of the class from other sources cannot
 * starve it. IPv4 addresses as IPv4-mapped IPv6. */
struct lb_peer_key {
	__u32 addr[4];
	__u32 port; /* port index */
};

enum lb_peer_flags {
	LB_PEER_GTSM = 1, /* its BGP must arrive with TTL 255 (RFC 5082) */
};

struct lb_peer {
	struct bpf_spin_lock lock;
	__u32 flags; /* enum lb_peer_flags */
	__u64 tat;   /* cap.h: when its next packet is due */
	__u64 passed;
	__u64 dropped;      /* over its bucket */
	__u64 gtsm_dropped; /* TTL below 255 */
};

struct lb_port {
	__u8 mac[6];
	__u8 role;  /* enum lb_port_role */
	__u8 index; /* 0..LB_MAX_PORTS-1: counters and hellos */
	__u16 vlan; /* external ports: the VLAN id that names them inside */
	/* external ports: balance what arrives tagged with vlan, so that the
	 * back-end checks its source (unicast RPF) */
	__u8 urpf;
	__u8 pad;
	__be32 ip; /* external ports: the address Ext ARP answers for */
	/* external ports: sFlow's 1 in sample_rate frames in sent to the
	 * agent (lb_samples); 0: none */
	__u32 sample_rate;
	/* external ports: the addresses Ext NDP answers for, the port's
	 * global IPv6 address (zero: none) and its link-local one */
	struct in6_addr ip6;
	struct in6_addr ll6;
};

struct lb_config {
	__u8 vcp_mac[6];
	__u8 has_vcp;
	__u8 active_table; /* 0 or 1: which of lb_table_0/1 is live */
	__u32 default_int_ifindex;
	__be32 mgmt_ip;
	__u32 flowlet_gap_us; /* LB_MODE_FLOWLET: the gap that ends a flowlet */
	__u8 flow_label; /* IPv6: hash a non-zero flow label, not the ports (RFC 6438) */
	__u8 pad[3];
	/* The policing buckets' hash key, random for each data path (the
	 * agent draws it when it finds 0): a source cannot be chosen to
	 * share a peer's bucket. */
	__u32 police_seed;
};

/* A flow's current flowlet (lb_flowlets, by flow hash). */
struct lb_flowlet {
	__u32 slot;  /* the slot its back-end was picked from */
	__u32 table; /* in which of the two tables */
	__u64 last_ns; /* when its last packet was seen */
};

/* A balancing table's header, per table id. */
struct lb_table_meta {
	__u32 len; /* slots in use, 1..LB_TABLE_SLOTS; 0 = empty */
	__u32 mode; /* enum lb_mode */
};

/* Where a frame leaves: a port's ifindex and its index (for counters). */
struct lb_egress {
	__u32 ifindex;
	__u32 index;
};

struct lb_slot {
	__u8 mac[6];  /* the back-end's MAC */
	__u16 index;  /* the LB port's index */
	__u32 ifindex; /* the LB port */
};

struct lb_port_stats {
	__u64 rx_packets;
	__u64 rx_bytes;
	__u64 tx_packets; /* frames the data path sent out of this port */
	__u64 tx_bytes;
	__u64 module[LB_MOD_MAX];
	__u64 drop[LB_DROP_MAX];
};

/* A sampled frame, as the agent reads it from lb_samples: the port it
 * came in by and its length (without the FCS), then its first bytes (at
 * most LB_SAMPLE_HEADER), which the perf buffer appends. */
struct lb_sample {
	__u32 frame_len;
	__u8 port;
	__u8 pad[3];
};

/* A port's sampler, per CPU: the frames it saw up to its last sample
 * (sFlow's sample pool), the samples the perf buffer had no room for, and
 * the frames to skip before the next sample, of the interval drawn. */
struct lb_sample_pool {
	__u64 pool;
	__u64 drops;
	__u32 countdown;
	__u32 interval;
};

/* lb_router_addrs6's key: an IPv6 address of the router. */
struct lb_addr6 {
	struct in6_addr addr;
};

/* lb_router_addrs and lb_router_addrs6 values. */
enum lb_addr_flag {
	LB_ADDR_ROUTER = 1, /* an external address of the router */
	LB_ADDR_MGMT = 2,   /* the management address: everything to the VCP */
};

#endif
