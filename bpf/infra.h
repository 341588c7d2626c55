/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * infra.h: the router's infrastructure, the prefixes of its own inside
 * (the interconnect, the management network, every element's host
 * address), which nothing from an external port may reach or claim as
 * its source (RFC 6192 §2; docs/operations.md, "Hardening"). The LB
 * drops such a frame before balancing it; a back-end drops a frame to
 * its host's own address whose source is not inside, which only the
 * balance path can bring it.
 *
 * A handful of prefixes, so a bounded scan of one array value: cheaper
 * than two LPM trie lookups a frame. The agents write them: the
 * prefixes of their host's interfaces that are not the router's ports,
 * and the config's `infrastructure`.
 */
#ifndef MSR_INFRA_H
#define MSR_INFRA_H

#include <linux/types.h>

enum msr_infra_limit {
	MSR_INFRA_PREFIXES = 16, /* each family's */
};

struct msr_prefix4 {
	__be32 addr; /* masked */
	__be32 mask;
};

struct msr_prefix6 {
	__be32 addr[4]; /* masked */
	__be32 mask[4];
};

struct msr_infra {
	__u32 n4; /* prefixes in v4, up to MSR_INFRA_PREFIXES */
	__u32 n6;
	struct msr_prefix4 v4[MSR_INFRA_PREFIXES];
	struct msr_prefix6 v6[MSR_INFRA_PREFIXES];
};

/* infra_has4 says whether a is inside one of in's IPv4 prefixes. */
static __always_inline int infra_has4(const struct msr_infra *in, __be32 a)
{
	for (__u32 i = 0; i < MSR_INFRA_PREFIXES; i++) {
		if (i >= in->n4)
			return 0;
		if ((a & in->v4[i].mask) == in->v4[i].addr)
			return 1;
	}
	return 0;
}

/* infra_has6 says whether a (four words as in the packet) is inside one
 * of in's IPv6 prefixes. */
static __always_inline int infra_has6(const struct msr_infra *in, const __be32 *a)
{
	for (__u32 i = 0; i < MSR_INFRA_PREFIXES; i++) {
		if (i >= in->n6)
			return 0;
		const struct msr_prefix6 *p = &in->v6[i];
		if ((a[0] & p->mask[0]) == p->addr[0] && (a[1] & p->mask[1]) == p->addr[1] &&
		    (a[2] & p->mask[2]) == p->addr[2] && (a[3] & p->mask[3]) == p->addr[3])
			return 1;
	}
	return 0;
}

#endif /* MSR_INFRA_H */
