// SPDX-License-Identifier: GPL-2.0
/*
 * Programs for the chain-call benchmark (xdpchain.c). They do no work of
 * their own, so what is measured is the cost of getting from one program to
 * the next:
 *
 *   drop, drop2        return XDP_DROP (baseline, and the last hop of every chain)
 *   pass, pass2        return XDP_PASS (first hops of kernel chains; pass2 is
 *                      also the owner of an unrelated chain)
 *   tail_pass          tail call into jmp[0] (drop), XDP_PASS if that fails
 *   dispatcher         a two-slot dispatcher in the style of libxdp: calls slot0,
 *                      goes on to slot1 if (1 << verdict) & CHAIN_ON (PASS); the
 *                      slots are replaced by freplace programs (xdpchain_ext.bpf.c)
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define CHAIN_ON (1U << XDP_PASS)

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} jmp SEC(".maps");

SEC("xdp")
int drop(struct xdp_md *ctx)
{
	return XDP_DROP;
}

SEC("xdp")
int drop2(struct xdp_md *ctx)
{
	return XDP_DROP;
}

SEC("xdp")
int pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

SEC("xdp")
int pass2(struct xdp_md *ctx)
{
	return XDP_PASS;
}

SEC("xdp")
int tail_pass(struct xdp_md *ctx)
{
	bpf_tail_call(ctx, &jmp, 0);
	return XDP_PASS;
}

/* Global functions are verified on their own and can be replaced by freplace
 * programs; the volatile keeps the compiler from folding the default verdict.
 */
__attribute__((noinline)) int slot0(struct xdp_md *ctx)
{
	volatile int ret = XDP_PASS;

	if (!ctx)
		return XDP_ABORTED;
	return ret;
}

__attribute__((noinline)) int slot1(struct xdp_md *ctx)
{
	volatile int ret = XDP_PASS;

	if (!ctx)
		return XDP_ABORTED;
	return ret;
}

SEC("xdp")
int dispatcher(struct xdp_md *ctx)
{
	int ret = slot0(ctx);

	if (!((1U << ret) & CHAIN_ON))
		return ret;
	return slot1(ctx);
}

char LICENSE[] SEC("license") = "GPL";
