// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * `bpfmux trace`: one program body hung on many kernel functions. Every
 * engine (src/trace/engine/) loads one or two of the entry points below and
 * attaches it with its own mechanism; all of them end in the same helpers,
 * so counts, latencies, events and stacks do not depend on the engine.
 *
 * The attach cookie carries the function's index in the user-space function
 * set (and a capture flag), so no program looks up addresses or names.
 *
 * Entry points:
 *   trace_multi_entry    fentry.multi   tracing_multi link, counts only
 *   trace_multi_session  fsession.multi tracing_multi link, entry + exit
 *   trace_kprobe_entry   kprobe.multi   counts only
 *   trace_kprobe_session kprobe.session entry + exit
 *   trace_multi_exit     fexit.multi    global trampoline's exit side (it has no
 *                                       fsession.multi), paired with trace_multi_entry
 *   trace_fentry         fentry         template, one copy per function
 *   trace_fexit          fexit          template, one copy per function
 *   trace_multi_fmod_ret fmod_ret.multi error injection, tracing_multi link
 *   trace_fmod_ret       fmod_ret       error injection, one copy per function
 * Where entry and exit are two programs (fentry + fexit, fentry.multi +
 * fexit.multi) the entry pushes a frame on a per-thread call stack and the
 * exit pops it, which gives the duration. Error chains (`want_errors`) keep
 * that call stack on every engine, session ones too: a failing return
 * copies the stack's frames into the thread's error chain, the exits of its
 * outer calls fill in their return values, and the outermost one's exit
 * sends the chain (ring buffer `chains`).
 * The .multi sections are newer than the vendored libbpf: the loader sets
 * their program type and expected attach type itself.
 */
#include <stdbool.h>
#include "bpfmux_types.h"
#include <bpf/bpf_helpers.h>
#include "trace.h"

char LICENSE[] SEC("license") = "GPL";

/* Stable UAPI values (linux/bpf.h), spelled out to keep the include set small. */
#define MAP_HASH 1
#define MAP_PERCPU_ARRAY 6
#define MAP_STACK_TRACE 7
#define MAP_LRU_HASH 9
#define MAP_RINGBUF 27
#define F_NOEXIST 1
#define F_USER_STACK (1ULL << 8)

/* x86-64 registers as the kernel saves them (kprobe context). */
struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	unsigned long ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
} __attribute__((preserve_access_index));

/* Filters and switches, fixed at load time by the loader. */
const volatile __u32 filter_tgid;
const volatile __u64 filter_cgroup;
const volatile bool filter_comm_on;
const volatile char filter_comm[16];
const volatile bool want_latency;
const volatile bool want_kstack;
const volatile bool want_ustack;
/* Entry and exit are separate programs: the entry pushes call frames. */
const volatile bool pair_entry_exit;
/* Report chains of calls that end in an error (call stacks on every engine). */
const volatile bool want_errors;
/* Count calls per path of traced callers (call stacks on every engine). */
const volatile bool want_graph;
/*
 * Error injection (`bpfmux inject`): the value a chosen call returns instead
 * of running (-errno), the chance a call is chosen out of 2^32 (2^32: every
 * call), and how many calls at most (0: no limit).
 */
const volatile __s64 inject_ret;
const volatile __u64 inject_chance;
const volatile __u64 inject_times;

/* Sizes below are placeholders: the loader sets them from the function set. */
struct {
	__uint(type, MAP_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct trace_func_stats);
} stats SEC(".maps");

/* Index func * TRACE_HIST_BUCKETS + bucket. */
struct {
	__uint(type, MAP_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} hist SEC(".maps");

struct {
	__uint(type, MAP_RINGBUF);
	__uint(max_entries, 4096);
} events SEC(".maps");

/* Call graph: calls and time per path of traced calls. */
struct {
	__uint(type, MAP_HASH);
	__uint(max_entries, 1);
	__type(key, struct trace_graph_key);
	__type(value, struct trace_graph_value);
} graph SEC(".maps");

/* Error chains, sent when the thread's outermost traced call returns. */
struct {
	__uint(type, MAP_RINGBUF);
	__uint(max_entries, 4096);
} chains SEC(".maps");

struct {
	__uint(type, MAP_STACK_TRACE);
	__uint(max_entries, 1);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, 127 * sizeof(__u64));
} stacks SEC(".maps");

struct {
	__uint(type, MAP_HASH);
	__uint(max_entries, 1);
	__type(key, struct trace_stack_key);
	__type(value, __u64);
} stack_counts SEC(".maps");

struct {
	__uint(type, MAP_PERCPU_ARRAY);
	__uint(max_entries, TRACE_LOST_MAX);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

/*
 * Calls in flight per thread, outermost first: when entry and exit are
 * separate programs (their pairing), and for error chains on every engine.
 * A fixed depth: calls nested deeper are counted in `overflow`, not kept.
 */
struct call_stack {
	__u32 depth;
	__u32 overflow;
	__u32 func[TRACE_MAX_DEPTH];
	__u64 ts[TRACE_MAX_DEPTH];
};

struct {
	__uint(type, MAP_LRU_HASH);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct call_stack);
} call_stacks SEC(".maps");

/*
 * Per thread: the chain of the latest failing call under the outermost call
 * in flight. Frame i is the same call as the call stack's frame i while
 * ts[i] matches.
 */
struct error_chain {
	__u32 len; /* 0: no error under the current outermost call */
	__u32 failed;
	__u32 overflow;
	__u32 done; /* bit i: frame i returned */
	__s32 kstack;
	__s32 ustack;
	__u32 func[TRACE_MAX_DEPTH];
	__u64 ts[TRACE_MAX_DEPTH];
	__u64 ret[TRACE_MAX_DEPTH];
	__u64 dur[TRACE_MAX_DEPTH];
};

struct {
	__uint(type, MAP_LRU_HASH);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct error_chain);
} error_chains SEC(".maps");

/* A new thread's stack and chain: too large for the BPF stack (never written). */
const struct call_stack empty_stack = {};
const struct error_chain empty_chain = {};
const struct trace_graph_value empty_graph_value = {};

/* Error chains and call graphs keep every thread's calls in flight. */
static __always_inline bool keep_call_stacks(void)
{
	return want_errors || want_graph;
}

/*
 * Session kfuncs took no argument until fsession (7.x) gave them the context;
 * both spellings are declared and the verifier drops the one the running
 * kernel lacks (libbpf resolves the name before "___").
 */
extern bool bpf_session_is_return___ctx(void *ctx) __ksym __weak;
extern __u64 *bpf_session_cookie___ctx(void *ctx) __ksym __weak;
extern bool bpf_session_is_return___noctx(void) __ksym __weak;
extern __u64 *bpf_session_cookie___noctx(void) __ksym __weak;

static __always_inline bool session_is_return(void *ctx)
{
	if (bpf_ksym_exists(bpf_session_is_return___ctx))
		return bpf_session_is_return___ctx(ctx);
	return bpf_session_is_return___noctx();
}

static __always_inline __u64 *session_cookie(void *ctx)
{
	if (bpf_ksym_exists(bpf_session_cookie___ctx))
		return bpf_session_cookie___ctx(ctx);
	return bpf_session_cookie___noctx();
}

static __always_inline void count_lost(__u32 what)
{
	__u64 *v = bpf_map_lookup_elem(&lost, &what);

	if (v)
		*v += 1;
}

/*
 * Set by user space once every link is attached: calls made while the set
 * is being attached (the kernel's own text patching, among others) are not
 * counted, so a summary shows the traced workload only.
 */
volatile __u32 armed;
/* Calls chosen for injection so far (those past inject_times included). */
__u64 inject_tickets;

static __always_inline bool pass_filters(void)
{
	if (!armed)
		return false;
	if (filter_tgid && (bpf_get_current_pid_tgid() >> 32) != filter_tgid)
		return false;
	if (filter_cgroup && bpf_get_current_cgroup_id() != filter_cgroup)
		return false;
	if (filter_comm_on) {
		char comm[16];

		bpf_get_current_comm(comm, sizeof(comm));
		for (int i = 0; i < 16; i++) {
			if (comm[i] != filter_comm[i])
				return false;
			if (!comm[i])
				break;
		}
	}
	return true;
}

static __always_inline void record_stack(void *ctx, __u32 func)
{
	struct trace_stack_key key = {
		.func = func,
		.tgid = bpf_get_current_pid_tgid() >> 32,
		.kstack = -1,
		.ustack = -1,
	};
	__u64 one = 1, *v;

	if (want_kstack)
		key.kstack = bpf_get_stackid(ctx, &stacks, 0);
	if (want_ustack)
		key.ustack = bpf_get_stackid(ctx, &stacks, F_USER_STACK);
	v = bpf_map_lookup_elem(&stack_counts, &key);
	if (v) {
		__sync_fetch_and_add(v, 1);
		return;
	}
	if (bpf_map_update_elem(&stack_counts, &key, &one, F_NOEXIST)) {
		v = bpf_map_lookup_elem(&stack_counts, &key);
		if (v)
			__sync_fetch_and_add(v, 1);
		else
			count_lost(TRACE_LOST_STACKS);
	}
}

/* One ring buffer record; args NULL for an exit. */
static __always_inline void emit(__u32 kind, __u32 func, const __u64 *args, __u64 ret,
				 __u64 ts, __u64 duration)
{
	struct trace_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	__u64 pid_tgid = bpf_get_current_pid_tgid();

	if (!e) {
		count_lost(TRACE_LOST_EVENTS);
		return;
	}
	e->ts_ns = ts;
	for (int i = 0; i < TRACE_MAX_ARGS; i++)
		e->args[i] = args ? args[i] : 0;
	e->ret = ret;
	e->duration_ns = duration;
	e->func = func;
	e->tgid = pid_tgid >> 32;
	e->tid = (__u32)pid_tgid;
	e->kind = kind;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
}

/* The call is counted here; args[] is only read when captured. */
static __always_inline void on_entry(void *ctx, __u64 cookie, const __u64 *args)
{
	__u32 func = (__u32)cookie;
	struct trace_func_stats *st = bpf_map_lookup_elem(&stats, &func);

	if (st)
		st->calls++;
	if (want_kstack || want_ustack)
		record_stack(ctx, func);
	if (cookie & TRACE_COOKIE_CAPTURE)
		emit(TRACE_EVENT_ENTRY, func, args, 0, bpf_ktime_get_ns(), 0);
}

/* start_ns == 0: the entry was not seen, no duration. */
static __always_inline void on_exit(__u64 cookie, __u64 start_ns, __u64 ret)
{
	__u32 func = (__u32)cookie;
	__u64 now = bpf_ktime_get_ns(), d = start_ns ? now - start_ns : 0;
	struct trace_func_stats *st;

	if (start_ns && want_latency) {
		__u32 b = 0, idx;
		__u64 *h;

		st = bpf_map_lookup_elem(&stats, &func);
		if (st) {
			st->lat_count++;
			st->lat_sum_ns += d;
			if (d > st->lat_max_ns)
				st->lat_max_ns = d;
		}
		/* floor(log2(d)), capped at the last bucket */
		for (int i = 0; i < TRACE_HIST_BUCKETS - 1; i++) {
			if ((d >> (i + 1)) == 0)
				break;
			b = i + 1;
		}
		idx = func * TRACE_HIST_BUCKETS + b;
		h = bpf_map_lookup_elem(&hist, &idx);
		if (h)
			*h += 1;
	}
	if (cookie & TRACE_COOKIE_CAPTURE)
		emit(TRACE_EVENT_EXIT, func, NULL, ret, now, d);
}

/* Arguments of a trampoline program (fentry, fsession and their multi forms). */
static __always_inline void tramp_args(void *ctx, __u64 *args)
{
	for (int i = 0; i < TRACE_MAX_ARGS; i++) {
		args[i] = 0;
		bpf_get_func_arg(ctx, i, &args[i]);
	}
}

static __always_inline void kprobe_args(struct pt_regs *regs, __u64 *args)
{
	args[0] = regs->di;
	args[1] = regs->si;
	args[2] = regs->dx;
	args[3] = regs->cx;
	args[4] = regs->r8;
	args[5] = regs->r9;
}

/*
 * Entry half of a two-program pairing: remember when this thread entered
 * the function, for the exit program of the same function.
 */
static __always_inline void push_frame(__u64 cookie)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct call_stack *cs;

	if (!want_latency && !keep_call_stacks() && !(cookie & TRACE_COOKIE_CAPTURE))
		return;
	cs = bpf_map_lookup_elem(&call_stacks, &tid);
	if (!cs) {
		bpf_map_update_elem(&call_stacks, &tid, &empty_stack, F_NOEXIST);
		cs = bpf_map_lookup_elem(&call_stacks, &tid);
		if (!cs)
			return;
	}
	if (cs->depth >= TRACE_MAX_DEPTH) {
		/* its exit pops nothing: exits of one thread come in order */
		cs->overflow++;
		count_lost(TRACE_LOST_DEPTH);
		return;
	}
	cs->func[cs->depth & (TRACE_MAX_DEPTH - 1)] = (__u32)cookie;
	cs->ts[cs->depth & (TRACE_MAX_DEPTH - 1)] = bpf_ktime_get_ns();
	cs->depth++;
}

/* Did a call of a function of this return class fail? */
static __always_inline bool is_error(__u64 cookie, __u64 ret)
{
	switch ((cookie & TRACE_COOKIE_RET_MASK) >> TRACE_COOKIE_RET_SHIFT) {
	case TRACE_RET_INT:
		return (__s32)ret < 0 && (__s32)ret >= -4095;
	case TRACE_RET_LONG:
		return (__s64)ret < 0 && (__s64)ret >= -4095;
	case TRACE_RET_PTR:
		return ret == 0 || ret >= (__u64)-4095;
	}
	return false;
}

/* Sends the thread's chain and starts it afresh. */
static __always_inline void send_chain(struct error_chain *ec, __u64 now)
{
	struct trace_chain_event *e = bpf_ringbuf_reserve(&chains, sizeof(*e), 0);
	__u64 pid_tgid = bpf_get_current_pid_tgid();

	if (!e) {
		count_lost(TRACE_LOST_CHAINS);
		ec->len = 0;
		return;
	}
	e->ts_ns = now;
	e->tgid = pid_tgid >> 32;
	e->tid = (__u32)pid_tgid;
	e->len = ec->len;
	e->failed = ec->failed;
	e->overflow = ec->overflow;
	e->kstack = ec->kstack;
	e->ustack = ec->ustack;
	e->_pad = 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
#pragma unroll
	for (int i = 0; i < TRACE_MAX_DEPTH; i++) {
		e->frames[i].func = ec->func[i];
		e->frames[i].done = (ec->done >> i) & 1;
		e->frames[i].ret = ec->ret[i];
		e->frames[i].duration_ns = ec->dur[i];
	}
	bpf_ringbuf_submit(e, 0);
	ec->len = 0;
}

/*
 * The call in frame j of `cs` returned `ret` at `now`. A failure outside
 * the current chain (the first, or one in another subtree than the last)
 * starts a new chain from the call stack; a call in the chain records its
 * return; the outermost call's return sends the chain.
 */
static __always_inline void chain_exit(void *ctx, struct call_stack *cs, __u32 j, __u64 cookie,
				       __u64 ret, __u64 now)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct error_chain *ec = bpf_map_lookup_elem(&error_chains, &tid);
	bool in_chain;

	j &= TRACE_MAX_DEPTH - 1;
	in_chain = ec && ec->len > j && ec->ts[j] == cs->ts[j];
	if (is_error(cookie, ret) && !in_chain) {
		if (!ec) {
			bpf_map_update_elem(&error_chains, &tid, &empty_chain, F_NOEXIST);
			ec = bpf_map_lookup_elem(&error_chains, &tid);
			if (!ec)
				return;
		}
		/* unrolled: constant offsets the verifier can check */
#pragma unroll
		for (int i = 0; i < TRACE_MAX_DEPTH; i++) {
			ec->func[i] = cs->func[i];
			ec->ts[i] = cs->ts[i];
			ec->ret[i] = 0;
			ec->dur[i] = 0;
		}
		ec->len = j + 1;
		ec->failed = j;
		ec->overflow = cs->overflow;
		ec->done = 0;
		ec->kstack = bpf_get_stackid(ctx, &stacks, 0);
		ec->ustack = bpf_get_stackid(ctx, &stacks, F_USER_STACK);
		/* a kernel thread has no user stack: only the kernel's is missed */
		if (ec->kstack < 0)
			count_lost(TRACE_LOST_STACKS);
		in_chain = true;
	}
	if (!ec || !in_chain)
		return;
	ec->ret[j] = ret;
	ec->dur[j] = now - cs->ts[j];
	ec->done |= 1U << j;
	if (j == 0)
		send_chain(ec, now);
}

/* The call in frame j of `cs` took `dur`: count it under its path. */
static __always_inline void graph_exit(struct call_stack *cs, __u32 j, __u64 dur)
{
	struct trace_graph_key key;
	struct trace_graph_value *v;

	j &= TRACE_MAX_DEPTH - 1;
	key.depth = j + 1;
#pragma unroll
	for (int i = 0; i < TRACE_MAX_DEPTH; i++)
		key.func[i] = i <= j ? cs->func[i] : 0;
	v = bpf_map_lookup_elem(&graph, &key);
	if (!v) {
		bpf_map_update_elem(&graph, &key, &empty_graph_value, F_NOEXIST);
		v = bpf_map_lookup_elem(&graph, &key);
		if (!v) {
			count_lost(TRACE_LOST_GRAPH);
			return;
		}
	}
	__sync_fetch_and_add(&v->calls, 1);
	__sync_fetch_and_add(&v->total_ns, dur);
}

/*
 * Exit half: find this function's frame, pop it, record the call's end
 * (`ret`: its return value).
 */
static __always_inline void pop_frame_on_exit(void *ctx, __u64 cookie, __u64 ret)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct call_stack *cs = bpf_map_lookup_elem(&call_stacks, &tid);
	__u64 start = 0;
	__u32 j = 0;

	if (!cs)
		return;
	/* The exit of a call the full stack did not keep. */
	if (cs->overflow) {
		cs->overflow--;
		return;
	}
	/*
	 * Find this function's frame from the top; frames above it lost their
	 * exit (not attached, or skipped by the recursion guard) and are
	 * dropped with it.
	 */
	for (int i = 0; i < TRACE_MAX_DEPTH; i++) {
		__u32 d = cs->depth;

		if (i >= d)
			return;
		j = (d - 1 - i) & (TRACE_MAX_DEPTH - 1);
		if (cs->func[j] == (__u32)cookie) {
			start = cs->ts[j];
			cs->depth = j;
			break;
		}
	}
	if (!start)
		return;
	if (want_errors)
		chain_exit(ctx, cs, j, cookie, ret, bpf_ktime_get_ns());
	if (want_graph)
		graph_exit(cs, j, bpf_ktime_get_ns() - start);
	on_exit(cookie, start, ret);
}

/* Return value of a trampoline program's function (fexit, fsession). */
static __always_inline __u64 tramp_ret(void *ctx)
{
	__u64 ret = 0;

	bpf_get_func_ret(ctx, &ret);
	return ret;
}

SEC("fentry.multi")
int trace_multi_entry(void *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx), args[TRACE_MAX_ARGS];

	if (!pass_filters())
		return 0;
	if (cookie & TRACE_COOKIE_CAPTURE)
		tramp_args(ctx, args);
	on_entry(ctx, cookie, args);
	if (pair_entry_exit)
		push_frame(cookie);
	return 0;
}

SEC("fexit.multi")
int trace_multi_exit(void *ctx)
{
	pop_frame_on_exit(ctx, bpf_get_attach_cookie(ctx), tramp_ret(ctx));
	return 0;
}

SEC("fsession.multi")
int trace_multi_session(void *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx), args[TRACE_MAX_ARGS], ret = 0;
	__u64 *start = session_cookie(ctx);

	if (session_is_return(ctx)) {
		/* the entry left 0 here when the filters said no */
		if (!*start)
			return 0;
		bpf_get_func_ret(ctx, &ret);
		if (keep_call_stacks())
			pop_frame_on_exit(ctx, cookie, ret);
		else
			on_exit(cookie, *start, ret);
		return 0;
	}
	*start = 0;
	if (!pass_filters())
		return 0;
	if (cookie & TRACE_COOKIE_CAPTURE)
		tramp_args(ctx, args);
	on_entry(ctx, cookie, args);
	if (keep_call_stacks())
		push_frame(cookie);
	*start = bpf_ktime_get_ns();
	return 0;
}

SEC("kprobe.multi")
int trace_kprobe_entry(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx), args[TRACE_MAX_ARGS];

	if (!pass_filters())
		return 0;
	if (cookie & TRACE_COOKIE_CAPTURE)
		kprobe_args(ctx, args);
	on_entry(ctx, cookie, args);
	return 0;
}

SEC("kprobe.session")
int trace_kprobe_session(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx), args[TRACE_MAX_ARGS];
	__u64 *start = session_cookie(ctx);

	if (!start)
		return 1;
	if (session_is_return(ctx)) {
		if (keep_call_stacks())
			pop_frame_on_exit(ctx, cookie, ctx->ax);
		else
			on_exit(cookie, *start, ctx->ax);
		return 0;
	}
	/* returning 1 skips the exit half for calls the filters drop */
	if (!pass_filters())
		return 1;
	if (cookie & TRACE_COOKIE_CAPTURE)
		kprobe_args(ctx, args);
	on_entry(ctx, cookie, args);
	if (keep_call_stacks())
		push_frame(cookie);
	*start = bpf_ktime_get_ns();
	return 0;
}

/*
 * Error injection: counts the call like an entry and decides whether it
 * fails. Returns the value the function returns instead of running, or 0:
 * run it. A 64-bit return, so an ERR_PTR comes out whole.
 */
static __always_inline long inject(__u64 cookie)
{
	__u32 func = (__u32)cookie;
	struct trace_func_stats *st;

	if (!pass_filters())
		return 0;
	st = bpf_map_lookup_elem(&stats, &func);
	if (st)
		st->calls++;
	if (inject_chance <= 0xffffffffULL && bpf_get_prandom_u32() >= inject_chance)
		return 0;
	/* each chosen call takes a ticket: exactly inject_times of them fail */
	if (inject_times && __sync_fetch_and_add(&inject_tickets, 1) >= inject_times)
		return 0;
	if (st)
		st->injected++;
	return inject_ret;
}

SEC("fmod_ret.multi")
long trace_multi_fmod_ret(void *ctx)
{
	return inject(bpf_get_attach_cookie(ctx));
}

SEC("fmod_ret")
long trace_fmod_ret(void *ctx)
{
	return inject(bpf_get_attach_cookie(ctx));
}

SEC("fentry")
int trace_fentry(void *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx), args[TRACE_MAX_ARGS];

	if (!pass_filters())
		return 0;
	if (cookie & TRACE_COOKIE_CAPTURE)
		tramp_args(ctx, args);
	on_entry(ctx, cookie, args);
	push_frame(cookie);
	return 0;
}

SEC("fexit")
int trace_fexit(void *ctx)
{
	pop_frame_on_exit(ctx, bpf_get_attach_cookie(ctx), tramp_ret(ctx));
	return 0;
}
