// SPDX-License-Identifier: GPL-2.0
/*
 * Programs for the XDP chaining benchmark: the two halves of a PASS -> DROP
 * chain, and a PASS program that hands off to DROP through a plain tail call.
 * They do no work, so what the benchmark measures is the cost of the hop.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} bench_jmp SEC(".maps");

SEC("xdp")
int bench_drop(struct xdp_md *ctx)
{
	return XDP_DROP;
}

SEC("xdp")
int bench_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

/* PASS, then the tail call replaces this program by whatever is in slot 0. */
SEC("xdp")
int bench_tail_pass(struct xdp_md *ctx)
{
	bpf_tail_call(ctx, &bench_jmp, 0);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
