// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/*
 * minfwd: the least an L2 forwarder can do, the baseline `msr bench prog`
 * puts beside the LB's program: rewrite both MACs, redirect. No parsing,
 * no maps, no counters.
 *
 * Verdicts: XDP_REDIRECT (XDP_DROP for a frame under 14 bytes).
 * Configuration: cfg (MACs and egress ifindex), set at load time.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

struct minfwd_config {
	__u8 dst_mac[ETH_ALEN];
	__u8 src_mac[ETH_ALEN];
	__u32 ifindex;
};

const volatile struct minfwd_config cfg = {};

SEC("xdp")
int minfwd(struct xdp_md *ctx)
{
	struct ethhdr *eth = (void *)(long)ctx->data;

	if ((void *)(eth + 1) > (void *)(long)ctx->data_end)
		return XDP_DROP;
#pragma unroll
	for (int i = 0; i < ETH_ALEN; i++) {
		eth->h_dest[i] = cfg.dst_mac[i];
		eth->h_source[i] = cfg.src_mac[i];
	}
	return bpf_redirect(cfg.ifindex, 0);
}
