// SPDX-License-Identifier: GPL-2.0
/* Programs for the batch symbol lookup benchmark: they do nothing, only attach time counts. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("kprobe.multi")
int multi_noop(void *ctx)
{
	return 0;
}

SEC("kprobe.session")
int session_noop(void *ctx)
{
	return 0;
}

SEC("kprobe")
int kprobe_noop(void *ctx)
{
	return 0;
}

SEC("kretprobe")
int kretprobe_noop(void *ctx)
{
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
