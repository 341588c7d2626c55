/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * fib.h: the back-end's FIBs, their maps and their lookups (router.h says
 * how they are laid out), shared by the data path (router.bpf.c) and the
 * lookup micro-benchmark (lookup.bpf.c), so that the benchmark times the
 * very code that forwards.
 */
#ifndef MSR_FIB_H
#define MSR_FIB_H

#include <linux/bpf.h>
#include <linux/in6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "router.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RT_TBL24_CHUNKS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct rt_tbl24_chunk);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rt_tbl24 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RT_TBL8_GROUPS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct rt_tbl8_group);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rt_tbl8 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct rt6_tbl16);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rt6_tbl16 SEC(".maps");

/* Its size is the agent's to set before loading (fib6_lines). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RT6_LINES);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct rt6_line);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rt6_pool SEC(".maps");

/* fib_lookup is DIR-24-8: one or two array reads. Returns the next-hop
 * group, 0 for no route. */
static __always_inline __u32 fib_lookup(__be32 daddr)
{
	__u32 d = bpf_ntohl(daddr);
	__u32 idx = d >> 8;
	__u32 chunk = idx >> RT_TBL24_CHUNK_BITS;
	struct rt_tbl24_chunk *c = bpf_map_lookup_elem(&rt_tbl24, &chunk);

	if (!c)
		return 0;
	__u32 v = c->e[idx & ((1 << RT_TBL24_CHUNK_BITS) - 1)];
	if (v & RT_TBL8_FLAG) {
		__u32 g = v & ~RT_TBL8_FLAG;
		struct rt_tbl8_group *grp = bpf_map_lookup_elem(&rt_tbl8, &g);
		if (!grp)
			return 0;
		v = grp->e[d & 0xff];
	}
	return v;
}

/* fib6_lookup walks the IPv6 trie: rt6_tbl16, then one compressed group
 * per 8 bits while the entry names a group. The address's byte picks its
 * entry's run: the runs begun before the byte's 64-bit word, plus those
 * its bitmap word marks up to the byte. Returns the next-hop group, 0 for
 * no route. */
static __always_inline __u32 fib6_lookup(const struct in6_addr *daddr)
{
	__u32 zero = 0;
	struct rt6_tbl16 *t = bpf_map_lookup_elem(&rt6_tbl16, &zero);
	__u8 a[16];

	if (!t)
		return 0;
	__builtin_memcpy(a, daddr, 16);
	__u32 v = t->e[(__u32)a[0] << 8 | a[1]];
#pragma unroll
	for (int k = 0; k < RT6_LEVELS; k++) {
		if (!(v & RT_TBL8_FLAG))
			return v;
		__u32 line = v & ~RT_TBL8_FLAG;
		struct rt6_line *l = bpf_map_lookup_elem(&rt6_pool, &line);
		if (!l)
			return 0;
		__u32 b = a[2 + k], wi = b >> 6;
		__u32 pos = RT6_HEADER_WORDS - 1 + ((l->w[RT6_COUNTS] >> (wi * 8)) & 0xff) +
			    (__u32)__builtin_popcountll(l->bm[wi] & ((2ULL << (b & 63)) - 1));
		if (pos >= RT6_LINE_WORDS) {
			line += pos / RT6_LINE_WORDS;
			l = bpf_map_lookup_elem(&rt6_pool, &line);
			if (!l)
				return 0;
		}
		v = l->w[pos % RT6_LINE_WORDS];
	}
	return v & RT_TBL8_FLAG ? 0 : v;
}

#endif /* MSR_FIB_H */
