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

/* The compressed IPv4 FIB, weighed against DIR-24-8 at many destinations
 * (docs/router.md, "How big a FIB stays flat at a million destinations")
 * and loaded by the bench alone (`bench flat --duts router-c18`), so its
 * maps are not pinned and hold one element unless the loader sizes them.
 * rt4c_l1 has an entry per /18: a next-hop group, or RT_TBL8_FLAG | the
 * first line in rt4c_pool of the /18's group. A group covers /19-/24 as an
 * IPv6 group its 8 bits: a 64-bit bitmap of where each run of equal
 * entries begins (words 0-1), then the runs' values, into the lines after.
 * A value with RT_TBL8_FLAG names a /24's 256 entries in rt4c_tbl8. */
const volatile __u32 rt_fib4c = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct rt4c_l1_chunk);
} rt4c_l1 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct rt6_line);
} rt4c_pool SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct rt_tbl8_group);
} rt4c_tbl8 SEC(".maps");

/* fib4c_lookup: the first level, then at most one line of the /18's group
 * (two when its value lies past the first line), then a /24's entries for
 * the longer prefixes. Returns the next-hop group, 0 for no route. */
static __always_inline __u32 fib4c_lookup(__be32 daddr)
{
	__u32 d = bpf_ntohl(daddr), i = d >> (32 - RT4C_L1_BITS);
	__u32 chunk = i >> RT4C_L1_CHUNK_BITS;
	struct rt4c_l1_chunk *c = bpf_map_lookup_elem(&rt4c_l1, &chunk);

	if (!c)
		return 0;
	__u32 v = c->e[i & ((1 << RT4C_L1_CHUNK_BITS) - 1)];
	if (!(v & RT_TBL8_FLAG))
		return v;
	__u32 line = v & ~RT_TBL8_FLAG;
	struct rt6_line *l = bpf_map_lookup_elem(&rt4c_pool, &line);
	if (!l)
		return 0;
	__u32 b = (d >> 8) & 63;
	__u32 pos = RT4C_HEADER_WORDS - 1 + (__u32)__builtin_popcountll(l->bm[0] & ((2ULL << b) - 1));
	if (pos >= RT6_LINE_WORDS) {
		line += pos / RT6_LINE_WORDS;
		l = bpf_map_lookup_elem(&rt4c_pool, &line);
		if (!l)
			return 0;
	}
	v = l->w[pos % RT6_LINE_WORDS];
	if (v & RT_TBL8_FLAG) {
		__u32 g = v & ~RT_TBL8_FLAG;
		struct rt_tbl8_group *grp = bpf_map_lookup_elem(&rt4c_tbl8, &g);
		if (!grp)
			return 0;
		v = grp->e[d & 0xff];
	}
	return v;
}

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

/* fib4_lookup is the IPv4 lookup the data path uses: DIR-24-8, or the
 * compressed FIB where the bench loaded it (rt_fib4c: the verifier keeps
 * one of the two). */
static __always_inline __u32 fib4_lookup(__be32 daddr)
{
	return rt_fib4c ? fib4c_lookup(daddr) : fib_lookup(daddr);
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
