// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/*
 * xdppass: passes every frame to the stack. The lab attaches it to veths
 * that must receive frames another XDP program sends with XDP_TX or
 * XDP_REDIRECT: veth queues such frames only into a peer with NAPI, and
 * after XDP_TX schedules the peer's NAPI only if the peer has an XDP
 * program (drivers/net/veth.c, veth_xdp_flush) — with GRO alone the frames
 * wait in the ring until other traffic comes by.
 *
 * Verdict: XDP_PASS. No maps.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

SEC("xdp")
int xdppass(struct xdp_md *ctx)
{
	return XDP_PASS;
}
