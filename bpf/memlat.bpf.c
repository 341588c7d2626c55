// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/*
 * memlat: what a table lookup's reads cost in an XDP program, apart from
 * any lookup (bench/memlat_test.go, BenchmarkMemLat; docs/router.md, "What
 * an IPv6 lookup's reads cost"). Each run of a program does MEMLAT_STEPS
 * lookups; a lookup makes memlat_cfg.reads reads of one u32 in 1 KiB
 * groups (the FIB's struct rt_tbl8_group), at places drawn from a working
 * set of memlat_cfg.keys keys, as a FIB's groups are read by the flows
 * crossing it.
 *
 *   chase:        each read's place depends on the read before (a trie
 *                 walk: the next group is named by the entry read);
 *   probe:        the reads' places depend on the key alone, so the CPU
 *                 can have them all outstanding at once (lookups in tables
 *                 indexed by the address itself);
 *   chase_nested: as chase, in groups held by small inner arrays of an
 *                 array of maps, which the kernel allocates with kmalloc
 *                 in its direct map (huge pages) where a big array is
 *                 vmalloc'd in 4 KiB pages: the TLB's share of a read.
 *
 * The next lookup's key depends on the last read's value, so lookups do
 * not overlap either. Verdict: XDP_PASS (XDP_ABORTED without config).
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* A group as the router's FIBs have them (struct rt_tbl8_group's 256
 * entries). An array type, not a struct: clang gives BTF only a forward
 * declaration of a struct that the maps alone name, and the loader needs
 * the value's size. */
typedef __u32 memlat_group[256];

enum {
	MEMLAT_STEPS = 64,
	MEMLAT_MAX_READS = 8,
	MEMLAT_INNER_GROUPS = 31, /* 31 KiB + the array's header: one 32 KiB kmalloc */
};

struct memlat_cfg {
	__u32 keys;   /* the working set: distinct keys, cycled through */
	__u32 reads;  /* reads a lookup makes, 1..MEMLAT_MAX_READS */
	__u32 groups; /* groups in memlat_groups used */
	__u32 inner;  /* inner arrays in memlat_outer used */
	__u32 next;   /* the key the next run starts at */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct memlat_cfg);
} memlat_config SEC(".maps");

/* Its size is set before loading, as the router's rt6_groups is. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, memlat_group);
} memlat_groups SEC(".maps");

struct memlat_inner {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MEMLAT_INNER_GROUPS);
	__type(key, __u32);
	__type(value, memlat_group);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct memlat_inner);
} memlat_outer SEC(".maps");

/* mix is a 32-bit finalizer (murmur3's): places spread over the pool. */
static __always_inline __u32 mix(__u32 x)
{
	x ^= x >> 16;
	x *= 0x85ebca6bu;
	x ^= x >> 13;
	x *= 0xc2b2ae35u;
	x ^= x >> 16;
	return x;
}

/* read_group reads entry x's byte of group g of the flat pool. */
static __always_inline __u32 read_group(__u32 g, __u32 x)
{
	__u32 *grp = bpf_map_lookup_elem(&memlat_groups, &g);

	return grp ? grp[x & 0xff] : 0;
}

SEC("xdp")
int chase(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct memlat_cfg *c = bpf_map_lookup_elem(&memlat_config, &zero);

	if (!c || !c->keys || !c->groups)
		return XDP_ABORTED;
	__u32 key = c->next, v = 0;
	for (int s = 0; s < MEMLAT_STEPS; s++) {
		key = (key + 1 + v) % c->keys;
		__u32 x = mix(key);
#pragma unroll
		for (int r = 0; r < MEMLAT_MAX_READS; r++) {
			if (r >= c->reads)
				break;
			x = mix(x + v); /* the place depends on the read before */
			v = read_group(x % c->groups, x >> 8);
		}
	}
	c->next = key;
	return XDP_PASS;
}

SEC("xdp")
int probe(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct memlat_cfg *c = bpf_map_lookup_elem(&memlat_config, &zero);

	if (!c || !c->keys || !c->groups)
		return XDP_ABORTED;
	__u32 key = c->next, v = 0;
	for (int s = 0; s < MEMLAT_STEPS; s++) {
		key = (key + 1 + v) % c->keys;
		__u32 x = mix(key), acc = 0;
#pragma unroll
		for (int r = 0; r < MEMLAT_MAX_READS; r++) {
			if (r >= c->reads)
				break;
			x = mix(x); /* the place depends on the key alone */
			acc |= read_group(x % c->groups, x >> 8);
		}
		v = acc;
	}
	c->next = key;
	return XDP_PASS;
}

SEC("xdp")
int chase_nested(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct memlat_cfg *c = bpf_map_lookup_elem(&memlat_config, &zero);

	if (!c || !c->keys || !c->inner)
		return XDP_ABORTED;
	/* Unrolled, this loop hits a verifier bug (EFAULT) on 6.18. */
	__u32 key = c->next, v = 0;
	for (int s = 0; s < MEMLAT_STEPS; s++) {
		key = (key + 1 + v) % c->keys;
		__u32 x = mix(key), reads = c->reads, inner = c->inner;
		for (__u32 r = 0; r < reads && r < MEMLAT_MAX_READS; r++) {
			x = mix(x + v);
			__u32 o = x % inner, g = (x >> 8) % MEMLAT_INNER_GROUPS;
			void *in = bpf_map_lookup_elem(&memlat_outer, &o);
			__u32 *grp = in ? bpf_map_lookup_elem(in, &g) : 0;
			v = grp ? grp[(x >> 16) & 0xff] : 0;
		}
	}
	c->next = key;
	return XDP_PASS;
}
