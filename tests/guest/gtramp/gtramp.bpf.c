// SPDX-License-Identifier: GPL-2.0
/*
 * Programs for the global-trampoline guest tests: call counters keyed by function
 * address (like the smoke tests), the attach cookie each function saw, and the
 * arguments of one chosen call.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

/* Only this process is counted (0: all); counter_load() sets it before load. */
const volatile __u32 target_tgid;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u64);
} hits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u64);
} cookies SEC(".maps");

/* cfg[0]: function whose arguments to capture, cfg[1]: its argument 2 must equal this. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} cfg SEC(".maps");

/* args[0]: argument count seen, args[1 + i]: argument i; args[13]: captures made. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 14);
	__type(key, __u32);
	__type(value, __u64);
} args SEC(".maps");

static __always_inline int mine(void)
{
	return !target_tgid || (bpf_get_current_pid_tgid() >> 32) == target_tgid;
}

static __always_inline void bump(void *map, __u64 key, __u64 val)
{
	__u64 *v = bpf_map_lookup_elem(map, &key);

	if (v) {
		__sync_fetch_and_add(v, val);
		return;
	}
	/* Lost the race to create the slot: add to the one another CPU inserted. */
	if (bpf_map_update_elem(map, &key, &val, BPF_NOEXIST)) {
		v = bpf_map_lookup_elem(map, &key);
		if (v)
			__sync_fetch_and_add(v, val);
	}
}

SEC("fentry/__x64_sys_getpgid")
int BPF_PROG(fentry_one)
{
	if (mine())
		bump(&hits, bpf_get_func_ip(ctx), 1);
	return 0;
}

SEC("fentry.multi")
int BPF_PROG(fentry_multi)
{
	__u64 ip = bpf_get_func_ip(ctx), cookie = bpf_get_attach_cookie(ctx);

	if (!mine())
		return 0;
	bump(&hits, ip, 1);
	bpf_map_update_elem(&cookies, &ip, &cookie, BPF_ANY);
	return 0;
}

SEC("fentry.multi")
int BPF_PROG(fentry_args)
{
	__u32 k0 = 0, k1 = 1, n, i;
	__u64 *want, *want_arg2, v = 0;

	want = bpf_map_lookup_elem(&cfg, &k0);
	want_arg2 = bpf_map_lookup_elem(&cfg, &k1);
	if (!mine() || !want || !want_arg2 || bpf_get_func_ip(ctx) != *want)
		return 0;
	if (bpf_get_func_arg(ctx, 2, &v) || v != *want_arg2)
		return 0;
	n = bpf_get_func_arg_cnt(ctx);
	for (i = 0; i < 12; i++) {
		__u32 key = i + 1;

		v = 0;
		if (bpf_get_func_arg(ctx, i, &v))
			break;
		bpf_map_update_elem(&args, &key, &v, BPF_ANY);
	}
	v = n;
	bpf_map_update_elem(&args, &k0, &v, BPF_ANY);
	k0 = 13;
	want = bpf_map_lookup_elem(&args, &k0);
	if (want)
		__sync_fetch_and_add(want, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
