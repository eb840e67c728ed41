// SPDX-License-Identifier: GPL-2.0
/* Counters for the guest smoke tests: every program counts calls of the traced function,
 * keyed by its address, for one process (target_tgid, set before load) or all (0).
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

const volatile __u32 target_tgid;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u64);
} hits SEC(".maps");

static __always_inline int count(__u64 ip)
{
	__u64 one = 1, *v;

	if (target_tgid && (bpf_get_current_pid_tgid() >> 32) != target_tgid)
		return 0;
	v = bpf_map_lookup_elem(&hits, &ip);
	if (v) {
		__sync_fetch_and_add(v, 1);
		return 0;
	}
	/* Lost the race to create the slot: another CPU inserted it, so add to that one. */
	if (bpf_map_update_elem(&hits, &ip, &one, BPF_NOEXIST)) {
		v = bpf_map_lookup_elem(&hits, &ip);
		if (v)
			__sync_fetch_and_add(v, 1);
	}
	return 0;
}

SEC("fentry/__x64_sys_getpgid")
int BPF_PROG(fentry_one)
{
	return count(bpf_get_func_ip(ctx));
}

SEC("fentry.multi")
int BPF_PROG(fentry_multi)
{
	return count(bpf_get_func_ip(ctx));
}

SEC("kprobe.multi")
int kprobe_multi(struct pt_regs *ctx)
{
	return count(bpf_get_func_ip(ctx));
}

char LICENSE[] SEC("license") = "GPL";
