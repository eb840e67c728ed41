// SPDX-License-Identifier: GPL-2.0
/* A kprobe.multi program that does nothing: the batchsym test only looks at what the
 * kernel resolved the names to (bpf_link_info), never at the calls.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("kprobe.multi")
int noop(void *ctx)
{
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
