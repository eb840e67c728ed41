// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Minimal programs used by `bpfmux features`: each one is loaded (and where
 * it matters attached) to find out whether the running kernel accepts it.
 * They do nothing; the kernel's verdict is the result. Attach targets are
 * set at run time (see src/features/), so the section names carry none.
 */
#include "bpfmux_types.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("fentry")
int probe_fentry(void *ctx)
{
	return 0;
}

SEC("fexit")
int probe_fexit(void *ctx)
{
	return 0;
}

SEC("fmod_ret")
int probe_fmod_ret(void *ctx)
{
	return 0;
}

SEC("kprobe.multi")
int probe_kprobe_multi(void *ctx)
{
	return 0;
}

SEC("kprobe.session")
int probe_kprobe_session(void *ctx)
{
	return 0;
}

SEC("uprobe.multi")
int probe_uprobe_multi(void *ctx)
{
	return 0;
}

/* A global (non-static) function is what freplace can replace; the XDP
 * program below calls it so it has a real caller. */
__attribute__((noinline)) int probe_xdp_stub(struct xdp_md *ctx)
{
	/* volatile read so clang keeps the function body non-trivial */
	volatile int ret = XDP_PASS;

	return ctx ? ret : XDP_ABORTED;
}

SEC("xdp")
int probe_xdp(struct xdp_md *ctx)
{
	return probe_xdp_stub(ctx);
}

SEC("freplace")
int probe_freplace(struct xdp_md *ctx)
{
	return XDP_PASS;
}
