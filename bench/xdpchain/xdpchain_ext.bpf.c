// SPDX-License-Identifier: GPL-2.0
/* freplace programs for the dispatcher slots of xdpchain.bpf.c; the benchmark sets
 * their targets (slot0, slot1 of the loaded dispatcher) before loading them.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("freplace")
int ext_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

SEC("freplace")
int ext_drop(struct xdp_md *ctx)
{
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
