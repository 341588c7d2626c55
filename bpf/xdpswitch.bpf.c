// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/*
 * xdpswitch: a lab switch's fast path. Attached to every port of a Linux
 * bridge (a lab switch with `xdp: on`), it forwards a unicast frame whose
 * destination MAC it has seen as a source on another port straight to
 * that port with XDP_REDIRECT: the frame stays an XDP frame, never an
 * sk_buff, and never enters the bridge. It learns source MACs from every
 * frame. Broadcast, multicast, unknown destinations and frames for the
 * port they came in by pass to the bridge, which floods and learns as
 * usual.
 *
 * The peer of every port must take XDP frames (run an XDP program, or
 * have GRO on): veth drops what it redirects into a peer without NAPI.
 *
 * Maps: sw_fdb (MAC -> ifindex, learned), sw_ports (the ports, a devmap
 * filled by the lab). Verdicts: XDP_REDIRECT, XDP_PASS.
 */
#include "common.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define SW_MAX_PORTS 256
#define SW_MAX_MACS 4096

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SW_MAX_MACS);
	__type(key, __u64); /* the MAC in the low six bytes */
	__type(value, __u32);
} sw_fdb SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, SW_MAX_PORTS);
	__type(key, __u32);
	__type(value, __u32);
} sw_ports SEC(".maps");

SEC("xdp")
int xdpswitch(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u32 in = ctx->ingress_ifindex;

	if ((void *)(eth + 1) > end)
		return XDP_PASS;
	if (!is_multicast(eth->h_source)) {
		__u64 src = mac_key(eth->h_source);
		__u32 *port = bpf_map_lookup_elem(&sw_fdb, &src);
		if (!port || *port != in)
			bpf_map_update_elem(&sw_fdb, &src, &in, BPF_ANY);
	}
	if (is_multicast(eth->h_dest))
		return XDP_PASS;
	__u64 dst = mac_key(eth->h_dest);
	__u32 *out = bpf_map_lookup_elem(&sw_fdb, &dst);
	if (!out || *out == in)
		return XDP_PASS;
	return bpf_redirect_map(&sw_ports, *out, XDP_PASS);
}
