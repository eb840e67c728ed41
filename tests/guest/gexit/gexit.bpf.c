// SPDX-License-Identifier: GPL-2.0
/*
 * Programs for the fexit/fmod_ret/fsession multi guest tests: return values seen by fexit
 * per function address, an fmod_ret override for one process, fexit on do_mmap with its
 * arguments, a per-function fentry and fexit for coexistence, and an fsession program that checks
 * its cookie pairs entry with exit.
 */
#include <stdbool.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

/* Only this process is counted (0: all); counter_load() sets it before load. */
const volatile __u32 target_tgid;

/* calls per function address (name kept: counter_hits() reads "hits") */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u64);
} hits SEC(".maps");

/* last return value per function address */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u64);
} rets SEC(".maps");

/*
 * cfg[0]: errno fmod_ret returns (0: let the call through); cfg[1]: do_mmap length to
 * record; cfg[2]: what args7_fmodret returns (0: let the call through); cfg[3]: a 64-bit
 * value fmod_ret returns instead of an errno (0: none)
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} cfg SEC(".maps");

/* do_mmap seen by fexit: [0] argument count, [1..9] arguments, [10] return value, [11] calls */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 12);
	__type(key, __u32);
	__type(value, __u64);
} mmap_seen SEC(".maps");

static __always_inline int mine(void)
{
	return !target_tgid || (bpf_get_current_pid_tgid() >> 32) == target_tgid;
}

static __always_inline void bump(__u64 key)
{
	__u64 one = 1, *v = bpf_map_lookup_elem(&hits, &key);

	if (v) {
		__sync_fetch_and_add(v, 1);
		return;
	}
	if (bpf_map_update_elem(&hits, &key, &one, BPF_NOEXIST)) {
		v = bpf_map_lookup_elem(&hits, &key);
		if (v)
			__sync_fetch_and_add(v, 1);
	}
}

static __always_inline int record_exit(void *ctx)
{
	__u64 ip = bpf_get_func_ip(ctx), ret = 0;

	if (!mine())
		return 0;
	bpf_get_func_ret(ctx, &ret);
	bpf_map_update_elem(&rets, &ip, &ret, BPF_ANY);
	bump(ip);
	return 0;
}

SEC("fexit.multi")
int BPF_PROG(fexit_multi)
{
	return record_exit(ctx);
}

/*
 * Runs of the global trampoline's drain work (gexit drain-backoff), counted under key 1:
 * the work items that start with cfg[0] as their function. The series' own files are
 * traced neither by ftrace nor (md_drain_fn) by kprobes.
 */
struct workqueue_execute_start_args {
	__u64 common;
	void *work;
	void *function;
};

SEC("tracepoint/workqueue/workqueue_execute_start")
int drain_runs(struct workqueue_execute_start_args *args)
{
	__u32 k = 0;
	__u64 *fn = bpf_map_lookup_elem(&cfg, &k);

	if (fn && *fn && (__u64)args->function == *fn)
		bump(1);
	return 0;
}

/* The kernel stack of fexit_one's last call: [0] its size in bytes, then the frames. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64[33]);
} kstack SEC(".maps");

SEC("fexit/__x64_sys_getpgid")
int BPF_PROG(fexit_one)
{
	__u32 k = 0;
	__u64 *st = bpf_map_lookup_elem(&kstack, &k);

	if (st && mine())
		st[0] = bpf_get_stack(ctx, &st[1], 32 * sizeof(__u64), 0);
	return record_exit(ctx);
}

SEC("fentry/__x64_sys_getpgid")
int BPF_PROG(fentry_one)
{
	if (mine())
		bump(bpf_get_func_ip(ctx));
	return 0;
}

SEC("fmod_ret.multi")
long BPF_PROG(fmodret_multi)
{
	__u32 k = 0, kv = 3;
	__u64 *err = bpf_map_lookup_elem(&cfg, &k), *val = bpf_map_lookup_elem(&cfg, &kv);

	if (!mine() || !err || !val || (!*err && !*val))
		return 0;
	bump(bpf_get_func_ip(ctx));
	/* All of R0 is the function's return value: 64 bits, not an int. */
	if (*val) {
		long v = *val;

		return v;
	}
	return -(long)*err;
}

/* do_mmap seen by a plain fentry program: [0..8] arguments, [9] calls */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 10);
	__type(key, __u32);
	__type(value, __u64);
} mmap_entry SEC(".maps");

/* A do_mmap call of this process with the length cfg[1] names? */
static __always_inline int mmap_wanted(void *ctx)
{
	__u32 k = 1;
	__u64 *want = bpf_map_lookup_elem(&cfg, &k), len = 0;

	return mine() && want && !bpf_get_func_arg(ctx, 2, &len) && len == *want;
}

/* The nine arguments of do_mmap into @map from key @first on; one more call in @calls. */
static __always_inline void mmap_record(void *ctx, void *map, __u32 first, __u32 calls)
{
	__u64 v, *n;
	__u32 i, k;

	for (i = 0; i < 9; i++) {
		v = 0;
		bpf_get_func_arg(ctx, i, &v);
		k = first + i;
		bpf_map_update_elem(map, &k, &v, BPF_ANY);
	}
	n = bpf_map_lookup_elem(map, &calls);
	if (n)
		__sync_fetch_and_add(n, 1);
}

SEC("fexit.multi")
int BPF_PROG(fexit_mmap)
{
	__u32 k = 0;
	__u64 v;

	if (!mmap_wanted(ctx))
		return 0;
	v = bpf_get_func_arg_cnt(ctx);
	bpf_map_update_elem(&mmap_seen, &k, &v, BPF_ANY);
	v = 0;
	bpf_get_func_ret(ctx, &v);
	k = 10;
	bpf_map_update_elem(&mmap_seen, &k, &v, BPF_ANY);
	mmap_record(ctx, &mmap_seen, 1, 11);
	return 0;
}

/*
 * Plain fentry (a per-function trampoline) on do_mmap next to fexit.multi on the global
 * trampoline: the global trampoline's origin call enters this trampoline, which must find
 * the stack arguments (6 to 8) where ftrace's call would have left them.
 */
SEC("fentry/do_mmap")
int BPF_PROG(fentry_mmap)
{
	if (mmap_wanted(ctx))
		mmap_record(ctx, &mmap_entry, 0, 9);
	return 0;
}

/*
 * fsession: [0] entries, [1] exits, [2] exits whose cookie is not the one their entry
 * stored, [3] entries that saw a non-zero return value
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} sess SEC(".maps");

/* the cookie each thread's entry stored, to compare on exit */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} sess_cookie SEC(".maps");

extern bool bpf_session_is_return(void *ctx) __ksym;
extern __u64 *bpf_session_cookie(void *ctx) __ksym;

static __always_inline void sess_add(__u32 k)
{
	__u64 *v = bpf_map_lookup_elem(&sess, &k);

	if (v)
		__sync_fetch_and_add(v, 1);
}

/* Entry stores a random cookie; exit must find the same one in its slot. */
SEC("fsession.multi")
int BPF_PROG(session_multi)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 *cookie, *want, v = 0;

	if (!mine())
		return 0;
	cookie = bpf_session_cookie(ctx);
	if (!bpf_session_is_return(ctx)) {
		sess_add(0);
		bpf_get_func_ret(ctx, &v);
		if (v)
			sess_add(3);
		v = ((__u64)bpf_get_prandom_u32() << 32 | bpf_get_prandom_u32()) | 1;
		*cookie = v;
		bpf_map_update_elem(&sess_cookie, &tid, &v, BPF_ANY);
		return 0;
	}
	sess_add(1);
	want = bpf_map_lookup_elem(&sess_cookie, &tid);
	if (!want || *want != *cookie)
		sess_add(2);
	return record_exit(ctx);
}

/*
 * args7: bpf_modify_return_test2(int a, int *b, short c, int d, void *e, char f, int g),
 * seven arguments, the last on the stack. Per kind k (0 fentry.multi, 1 fexit.multi,
 * 2 fmod_ret.multi, 3 fsession.multi entry, 4 fsession.multi exit): slots 8k..8k+6 the
 * arguments as bpf_get_func_arg() reads them, 8k+7 the return value (exits) or calls.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 40);
	__type(key, __u32);
	__type(value, __u64);
} args7 SEC(".maps");

static __always_inline void args7_put(__u32 slot, __u64 v)
{
	bpf_map_update_elem(&args7, &slot, &v, BPF_ANY);
}

static __always_inline void args7_save(void *ctx, __u32 kind, int exit)
{
	__u64 v;

	for (__u32 i = 0; i < 7; i++) {
		v = 0;
		bpf_get_func_arg(ctx, i, &v);
		args7_put(kind * 8 + i, v);
	}
	v = 0;
	if (exit)
		bpf_get_func_ret(ctx, &v);
	else
		v = 1;
	args7_put(kind * 8 + 7, v);
}

SEC("fentry.multi")
int BPF_PROG(args7_fentry)
{
	args7_save(ctx, 0, 0);
	return 0;
}

SEC("fexit.multi")
int BPF_PROG(args7_fexit)
{
	args7_save(ctx, 1, 1);
	return 0;
}

SEC("fmod_ret.multi")
int BPF_PROG(args7_fmodret)
{
	__u32 k = 2;
	__u64 *ret = bpf_map_lookup_elem(&cfg, &k);

	args7_save(ctx, 2, 0);
	return ret ? (int)*ret : 0;
}

SEC("fsession.multi")
int BPF_PROG(args7_session)
{
	if (bpf_session_is_return(ctx))
		args7_save(ctx, 4, 1);
	else
		args7_save(ctx, 3, 0);
	return 0;
}

/* Test-running this plain fmod_ret program makes the kernel call bpf_modify_return_test2. */
SEC("fmod_ret/bpf_modify_return_test")
int BPF_PROG(args7_driver, int a, int *b, int ret)
{
	return ret;
}

char LICENSE[] SEC("license") = "GPL";
