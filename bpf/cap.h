/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * cap.h: an element's capacity, in frames per second, enforced in its own
 * data path. Off by default. It makes an element a slower machine, as
 * seed 000's r3 at half capacity is, so that a lab on two cores can show
 * what balancing and the fabric do with N elements each slower than the
 * host (`msr bench scale`, docs/scaling.md).
 *
 * The bucket is the Generic Cell Rate Algorithm (ITU-T I.371), a token
 * bucket in the time domain: tat is when the next frame is due; a frame
 * that arrives earlier than tat - tolerance finds the bucket empty and is
 * dropped, otherwise tat moves one interval on. No division in the
 * program: the agent writes interval = 1e9 / capacity and tolerance =
 * burst x interval. One bucket per element (not per CPU: its NAPI threads
 * run on any core), so a spin lock guards it.
 */
#ifndef MSR_CAP_H
#define MSR_CAP_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct msr_cap {
	struct bpf_spin_lock lock;
	__u32 pad;
	__u64 interval_ns;  /* 1e9 / capacity in frames/s; 0: no cap */
	__u64 tolerance_ns; /* burst x interval: how far ahead a frame may be */
	__u64 tat;          /* the theoretical arrival time of the next frame */
};

/* gcra_admit is the bucket's test: whether a frame may pass now, at most
 * tolerance ahead of the theoretical arrival time *tat, which it then
 * moves one interval on. lock guards *tat. Control-plane policing's
 * buckets (lb.bpf.c) share it. */
static __always_inline int gcra_admit(struct bpf_spin_lock *lock, __u64 *tat, __u64 interval_ns, __u64 tolerance_ns)
{
	__u64 now = bpf_ktime_get_ns();
	int ok = 0;

	bpf_spin_lock(lock);
	__u64 t = *tat > now ? *tat : now;
	if (t - now <= tolerance_ns) {
		*tat = t + interval_ns;
		ok = 1;
	}
	bpf_spin_unlock(lock);
	return ok;
}

/* cap_admit says whether c has room for one more frame now, and takes it. */
static __always_inline int cap_admit(struct msr_cap *c)
{
	if (!c || c->interval_ns == 0)
		return 1;
	return gcra_admit(&c->lock, &c->tat, c->interval_ns, c->tolerance_ns);
}

#endif
