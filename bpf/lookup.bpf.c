// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/*
 * lookup: the FIB lookup alone, timed (`msr bench lookup`, bench/lookup.go;
 * docs/benchmarks.md, "The lookup alone"). A run of the program
 * (BPF_PROG_RUN) makes lk_cfg.count lookups in a bpf_loop, of the
 * destinations in lk_dsts in turn from lk_cfg.start, by lk_cfg.what:
 *
 *   LK_NONE:    the destination read and no lookup: the loop's own cost;
 *   LK_MSR4:    the back-end's IPv4 FIB (fib.h's fib_lookup, DIR-24-8);
 *   LK_MSR6:    its IPv6 FIB (fib6_lookup, the compressed trie);
 *   LK_KERNEL4, LK_KERNEL6: the kernel's own FIB by bpf_fib_lookup, with
 *               BPF_FIB_LOOKUP_DIRECT as xdpfib.bpf.c looks up, in the
 *               namespace of the run's ingress device.
 *
 * The destinations lie in a random order, so that each lookup's places in
 * the tables are as unrelated to the last one's as an edge router's
 * packets' are. Lookups do not wait for each other: the figure is their
 * throughput on one CPU. Each result is added to lk_cfg.sum and the
 * routes found counted, so that none is left out and the caller can see
 * they found routes. Verdict: XDP_PASS; XDP_ABORTED without config.
 */
#include <linux/bpf.h>
#include <linux/in6.h>
#include <bpf/bpf_helpers.h>

#include "common.h"
#include "fib.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

enum lk_what {
	LK_NONE,
	LK_MSR4,
	LK_MSR6,
	LK_KERNEL4,
	LK_KERNEL6,
};

const enum lk_what *unused_lk_what __attribute__((unused));

struct lk_cfg {
	__u32 what;  /* enum lk_what */
	__u32 n;     /* destinations in lk_dsts */
	__u32 count; /* lookups a run makes */
	__u32 start; /* the destination the next run begins at */
	__u64 sum;   /* the results, added */
	__u64 found; /* lookups that found a route */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lk_cfg);
} lk_config SEC(".maps");

/* IPv4 destinations in the first 4 bytes. Its size is set before loading. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct in6_addr);
} lk_dsts SEC(".maps");

struct lk_loop {
	struct xdp_md *xdp;
	__u32 what, n, start, ifindex;
	__u64 sum, found;
};

static long lk_step(__u64 i, void *data)
{
	struct lk_loop *c = data;
	__u32 k = (c->start + (__u32)i) % c->n;
	struct in6_addr *d = bpf_map_lookup_elem(&lk_dsts, &k);
	__u32 r = 0;

	if (!d)
		return 1;
	if (c->what == LK_NONE) {
		r = d->in6_u.u6_addr32[0] & 1;
	} else if (c->what == LK_MSR4) {
		r = fib_lookup(d->in6_u.u6_addr32[0]);
	} else if (c->what == LK_MSR6) {
		r = fib6_lookup(d);
	} else {
		struct bpf_fib_lookup p = {.ifindex = c->ifindex, .tot_len = 64};

		if (c->what == LK_KERNEL4) {
			p.family = FIB_AF_INET;
			p.ipv4_dst = d->in6_u.u6_addr32[0];
		} else {
			p.family = FIB_AF_INET6;
			__builtin_memcpy(p.ipv6_dst, d, sizeof(p.ipv6_dst));
		}
		long rc = bpf_fib_lookup(c->xdp, &p, sizeof(p), BPF_FIB_LOOKUP_DIRECT);
		if (rc == BPF_FIB_LKUP_RET_SUCCESS || rc == BPF_FIB_LKUP_RET_NO_NEIGH)
			r = p.ifindex;
	}
	c->sum += r;
	c->found += r != 0;
	return 0;
}

SEC("xdp")
int lookup(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct lk_cfg *cfg = bpf_map_lookup_elem(&lk_config, &zero);

	if (!cfg || cfg->n == 0)
		return XDP_ABORTED;
	struct lk_loop c = {.xdp = ctx, .what = cfg->what, .n = cfg->n, .start = cfg->start, .ifindex = ctx->ingress_ifindex};
	bpf_loop(cfg->count, lk_step, &c, 0);
	cfg->start = (cfg->start + cfg->count) % cfg->n;
	cfg->sum += c.sum;
	cfg->found += c.found;
	return XDP_PASS;
}
