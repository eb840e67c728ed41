// SPDX-License-Identifier: GPL-2.0
/*
 * Empty programs for the attach benchmark: what is measured is the cost of attaching
 * and detaching one program to N functions, not what the program does.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

SEC("?fentry.multi")
int BPF_PROG(empty_fentry_multi)
{
	return 0;
}

SEC("?kprobe.multi")
int empty_kprobe_multi(struct pt_regs *ctx)
{
	return 0;
}
