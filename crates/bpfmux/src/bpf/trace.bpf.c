// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * `bpfmux trace`: one program body hung on many kernel functions. Every
 * engine (src/trace/engine/) loads one or two of the entry points below and
 * attaches it with its own mechanism; all of them end in the same helpers,
 * so counts, latencies, events and stacks do not depend on the engine.
 *
 * The attach cookie carries the function's index in the user-space function
 * set (and, for per-call events, how many argument slots to read and which
 * hold strings), so no program looks up addresses or names.
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
 * A filter (src/trace/filter.rs) decides which calls are recorded: its
 * entry half at the entry, its exit half (return value, errno, latency) at
 * the exit; when it has an exit half, calls are counted (and their stacks
 * and entry events taken) at the exit. A call it rejects keeps its frame
 * on the call stack (pairing, callers in chains and graph paths) but is
 * recorded nowhere.
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
#define MAP_ARRAY 2
#define MAP_PERCPU_ARRAY 6
#define MAP_STACK_TRACE 7
#define MAP_LRU_HASH 9
#define MAP_RINGBUF 27
#define F_NOEXIST 1
#define F_USER_STACK (1ULL << 8)
#define F_STACK_BUILD_ID (1U << 5)

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
/*
 * Bytes of each string an entry event carries (a multiple of 8, at most
 * TRACE_STR_MAX; 0: no captured function has a string argument).
 */
const volatile __u32 event_str_size;
/*
 * Pointee budget of an entry event (--args-depth; a multiple of 8, 0: off):
 * its area is twice that, so that a read of at most this many bytes at an
 * offset below it stays in the record whatever the verifier knows of both.
 */
const volatile __u32 event_deref_size;
/* Count calls per path of traced callers (call stacks on every engine). */
const volatile bool want_graph;
/*
 * Error injection (`bpfmux inject`): the value a chosen call returns instead
 * of running (-errno), the chance a call is chosen out of 2^32 (2^32: every
 * call), and how many calls at most (0: no limit). The calls of bpfmux
 * itself (inject_self_tgid) never fail: it still has maps to read and links
 * to detach while the programs run.
 */
const volatile __u32 inject_self_tgid;
const volatile __s64 inject_ret;
const volatile __u64 inject_chance;
const volatile __u64 inject_times;
/*
 * The filter: a postfix program per side of the call (trace.h). Calls it
 * saw are counted when it is on; per-function variables (arguments, the
 * return value) are looked up in `filter_funcs` when it has any.
 */
const volatile bool filter_on;
const volatile bool filter_vars;
const volatile __u32 filter_entry_nops;
const volatile __u32 filter_exit_nops;
const volatile struct trace_filter_op filter_entry_ops[TRACE_FILTER_MAX_OPS];
const volatile struct trace_filter_op filter_exit_ops[TRACE_FILTER_MAX_OPS];
/* The string literals TRACE_FOP_STR operations compare with (their `value`). */
const volatile struct trace_filter_str filter_strs[TRACE_FILTER_MAX_STRS];

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

/*
 * User stacks as build ID + file offset per frame, taken the first time a
 * process shows a stack (ustack_bids: its `stacks` id -> its id here): what
 * names the frames of a process that exits before user space normalizes
 * its stack (trace/stacks.rs).
 */
struct {
	__uint(type, MAP_STACK_TRACE);
	__uint(max_entries, 1);
	__uint(map_flags, F_STACK_BUILD_ID);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, TRACE_BID_FRAMES * TRACE_BID_FRAME_SIZE);
} ustacks_bid SEC(".maps");

struct {
	__uint(type, MAP_HASH);
	__uint(max_entries, 1);
	__type(key, struct trace_ustack_key);
	__type(value, __s32);
} ustack_bids SEC(".maps");

struct {
	__uint(type, MAP_PERCPU_ARRAY);
	__uint(max_entries, TRACE_LOST_MAX);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

/* The pointee reads per captured function (trace.h), with --args-depth. */
struct {
	__uint(type, MAP_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct trace_deref_func);
} deref_funcs SEC(".maps");

/* The filter's variables per function (trace.h), when it has any. */
struct {
	__uint(type, MAP_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct trace_filter_func);
} filter_funcs SEC(".maps");

/*
 * Calls in flight per thread, outermost first: when entry and exit are
 * separate programs (their pairing), and for error chains on every engine.
 * A fixed depth: calls nested deeper are counted in `overflow`, not kept.
 * Bit i of `skip`: frame i's call failed the filter's entry half.
 */
struct call_stack {
	__u32 depth;
	__u32 overflow;
	__u32 skip;
	__u32 _pad;
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

/*
 * Scoping (src/trace/scoping.rs). filter_cgroup_tree: the cgroup in
 * cgroup_tree[0] and every cgroup below it count, not filter_cgroup alone.
 * filter_pidns_ino: only tasks whose own pid namespace is that one (its
 * device as the kernel encodes it in filter_pidns_dev), and filter_tgid is
 * a process ID as that namespace numbers it.
 */
#define MAP_CGROUP_ARRAY 8
const volatile bool filter_cgroup_tree;
const volatile __u64 filter_pidns_dev;
const volatile __u64 filter_pidns_ino;

struct {
	__uint(type, MAP_CGROUP_ARRAY);
	__uint(max_entries, 1);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} cgroup_tree SEC(".maps");

/* linux/bpf.h: what bpf_get_ns_current_pid_tgid fills. */
struct bpf_pidns_info {
	__u32 pid;
	__u32 tgid;
};

static __always_inline bool pass_filters(void)
{
	if (!armed)
		return false;
	if (filter_pidns_ino) {
		struct bpf_pidns_info ns;

		/* fails for a task of any other pid namespace */
		if (bpf_get_ns_current_pid_tgid(filter_pidns_dev, filter_pidns_ino, &ns, sizeof(ns)))
			return false;
		if (filter_tgid && ns.tgid != filter_tgid)
			return false;
	} else if (filter_tgid && (bpf_get_current_pid_tgid() >> 32) != filter_tgid) {
		return false;
	}
	if (filter_cgroup_tree) {
		/* 1: under it (or in it); 0: not; < 0: no cgroup in the map */
		if (bpf_current_task_under_cgroup(&cgroup_tree, 0) != 1)
			return false;
	} else if (filter_cgroup && bpf_get_current_cgroup_id() != filter_cgroup) {
		return false;
	}
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

/* The build ID form of user stack `ustack` of `tgid`, the first time it is seen. */
static __always_inline void record_ustack_bid(void *ctx, __u32 tgid, __s32 ustack)
{
	struct trace_ustack_key key = { .tgid = tgid, .ustack = ustack };
	__s32 id;

	if (ustack < 0 || bpf_map_lookup_elem(&ustack_bids, &key))
		return;
	id = bpf_get_stackid(ctx, &ustacks_bid, F_USER_STACK);
	if (id >= 0)
		bpf_map_update_elem(&ustack_bids, &key, &id, F_NOEXIST);
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
		return;
	}
	record_ustack_bid(ctx, key.tgid, key.ustack);
}

/* Where a program runs: its context and what it can read there. */
enum ctx_kind {
	CTX_TRAMP = 0,  /* fentry/fexit/fsession (and .multi): bpf_get_func_arg */
	CTX_KPROBE = 1, /* kprobe.multi/kprobe.session: registers */
};

/* The head every event record starts with. */
static __always_inline void event_head(struct trace_event *h, __u32 kind, __u64 cookie, __u64 ret,
				       __u64 ts, __u64 duration)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();

	h->ts_ns = ts;
	h->ret = ret;
	h->duration_ns = duration;
	h->func = (__u32)cookie;
	h->tgid = pid_tgid >> 32;
	h->tid = (__u32)pid_tgid;
	h->kind = kind;
	h->version = TRACE_EVENT_VERSION;
	h->nargs = 0;
	h->nstrs = 0;
	bpf_get_current_comm(h->comm, sizeof(h->comm));
}

/*
 * The first n argument slots into args. A trampoline program has every
 * argument (stack-passed ones too) in its context. A kprobe program at a
 * function's entry reads the argument registers, and the stack above the
 * return address (pt_regs->sp points at it) for the 7th argument on.
 */
static __always_inline void read_args(void *ctx, const int kind, __u32 n, __u64 *args)
{
	struct pt_regs *regs = ctx;

	if (kind == CTX_TRAMP) {
		for (int i = 0; i < TRACE_MAX_ARGS; i++) {
			__u64 v = 0;

			if (i < n)
				bpf_get_func_arg(ctx, i, &v);
			args[i] = v;
		}
		return;
	}
	args[0] = regs->di;
	args[1] = regs->si;
	args[2] = regs->dx;
	args[3] = regs->cx;
	args[4] = regs->r8;
	args[5] = regs->r9;
	for (int i = TRACE_REG_ARGS; i < TRACE_MAX_ARGS; i++)
		args[i] = 0;
	/* a failed read leaves zeros */
	if (n > TRACE_REG_ARGS)
		bpf_probe_read_kernel(&args[TRACE_REG_ARGS], 8 * (TRACE_MAX_ARGS - TRACE_REG_ARGS),
				      (void *)(regs->sp + 8));
}

/*
 * The strings the cookie names, each from its argument slot into its buffer
 * (event_str_size bytes): user memory for a pointer below the kernel half of
 * the address space, kernel memory above. NULL is read as nothing.
 */
static __always_inline void read_strs(__u64 cookie, struct trace_entry_event *e)
{
	if (!event_str_size)
		return;
	e->h.nstrs = TRACE_MAX_STRS;
#pragma unroll
	for (int i = 0; i < TRACE_MAX_STRS; i++) {
		__u64 d = cookie >> (TRACE_COOKIE_STR_SHIFT + i * TRACE_COOKIE_STR_BITS);
		__u32 slot = d & TRACE_COOKIE_STR_SLOT;
		char *dst = e->data + i * event_str_size;
		__u64 p;

		e->strs[i].len = 0;
		e->strs[i].slot = slot;
		e->strs[i].user = 0;
		e->strs[i]._pad = 0;
		if (!(d & TRACE_COOKIE_STR_ON) || slot >= TRACE_MAX_ARGS)
			continue;
		p = e->args[slot];
		if (!p)
			continue;
		if ((__s64)p >= 0) {
			e->strs[i].user = 1;
			e->strs[i].len = bpf_probe_read_user_str(dst, event_str_size, (void *)p);
		} else {
			e->strs[i].len = bpf_probe_read_kernel_str(dst, event_str_size, (void *)p);
		}
	}
}

/*
 * The pointee reads of the event's function, in order, into the area after
 * the strings: each from an argument slot or from a pointer an earlier read
 * brought (a failed read leaves zeros, so the reads under it fail too).
 * User memory below the kernel half of the address space, kernel memory
 * above, as for strings.
 */
static __always_inline void read_derefs(struct trace_entry_event *e)
{
	char *area = e->data + TRACE_MAX_STRS * event_str_size;
	struct trace_deref_func *df;
	__u32 func = e->h.func;

	if (!event_deref_size)
		return;
	df = bpf_map_lookup_elem(&deref_funcs, &func);
	if (!df)
		return;
	for (int i = 0; i < TRACE_MAX_DEREFS; i++) {
		struct trace_deref *r = &df->r[i];
		__u32 dst = r->dst, len = r->len, at = r->at, from = r->from;
		__u64 p;

		if (!len || dst >= event_deref_size || len > event_deref_size)
			break;
		if (from & TRACE_DEREF_FIELD) {
			if (at > event_deref_size - 8)
				break;
			p = *(__u64 *)(area + at);
		} else {
			if (from >= TRACE_MAX_ARGS)
				break;
			p = e->args[from];
		}
		if ((__s64)p < 0)
			e->deref_ret[i] = bpf_probe_read_kernel(area + dst, len, (void *)p);
		else
			e->deref_ret[i] = bpf_probe_read_user(area + dst, len, (void *)p);
	}
}

/*
 * An entry event: its argument slots (`args_here`: the program can read
 * them; a kprobe program at the exit cannot), strings and pointees. ts:
 * when the call entered.
 */
static __always_inline void emit_entry(void *ctx, const int kind, bool args_here, __u64 cookie,
				       __u64 ts)
{
	__u32 n = (cookie & TRACE_COOKIE_NARGS_MASK) >> TRACE_COOKIE_NARGS_SHIFT;
	struct trace_entry_event *e;

	e = bpf_ringbuf_reserve(&events,
				sizeof(*e) + TRACE_MAX_STRS * event_str_size + 2 * event_deref_size, 0);
	if (!e) {
		count_lost(TRACE_LOST_EVENTS);
		return;
	}
	event_head(&e->h, TRACE_EVENT_ENTRY, cookie, 0, ts, 0);
	if (n > TRACE_MAX_ARGS)
		n = TRACE_MAX_ARGS;
	if (!args_here)
		n = 0;
	read_args(ctx, kind, n, e->args);
	e->h.nargs = n;
	e->str_size = event_str_size;
	e->deref_size = event_deref_size;
	e->_pad = 0;
#pragma unroll
	for (int i = 0; i < TRACE_MAX_DEREFS; i++)
		e->deref_ret[i] = 1;
	if (n) {
		read_strs(cookie, e);
		read_derefs(e);
	}
	bpf_ringbuf_submit(e, 0);
}

/* An exit event: the return value and the call's duration. */
static __always_inline void emit_exit(__u64 cookie, __u64 ret, __u64 ts, __u64 duration)
{
	struct trace_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		count_lost(TRACE_LOST_EVENTS);
		return;
	}
	event_head(e, TRACE_EVENT_EXIT, cookie, ret, ts, duration);
	bpf_ringbuf_submit(e, 0);
}

/*
 * The filter's evaluator: a bounded loop over the operations, not
 * unrolled (every program carries one copy of the step, filter or not;
 * unrolled, the programs were 4 to 13 times their size). The verifier
 * walks the loop once per operation and reads each operation from .rodata
 * as constants, so it follows one path through each step. A test's
 * outcome depends on the call, so it is computed without a branch (a
 * branch per test would double the verifier's states at each one);
 * barrier_var() keeps clang from turning the arithmetic back into
 * compare-and-branch.
 */

/* 1 when x != 0. */
static __always_inline __u64 f_nonzero(__u64 x)
{
	__u64 n = -x;

	barrier_var(n);
	return (n | x) >> 63;
}

/* 1 when a < b, unsigned (the borrow of a - b). */
static __always_inline __u64 f_ult(__u64 a, __u64 b)
{
	__u64 d = a - b;

	barrier_var(d);
	return ((~a & b) | ((~a | b) & d)) >> 63;
}

/* c ? a : b for c in {0, 1}. */
static __always_inline __u64 f_pick(__u64 c, __u64 a, __u64 b)
{
	__u64 m = -c;

	barrier_var(m);
	return (a & m) | (b & ~m);
}

/* The errno a return value carries, by the return class in the cookie: 0 if none. */
static __always_inline __u64 f_errno(__u64 cookie, __u64 ret)
{
	__u64 class = (cookie & TRACE_COOKIE_RET_MASK) >> TRACE_COOKIE_RET_SHIFT;
	__u64 is_int = f_nonzero(class ^ TRACE_RET_INT) ^ 1;
	__u64 v = f_pick(is_int, (__u64)(__s64)(__s32)ret, ret);
	/* -4095 <= v <= -1 */
	__u64 err = f_ult(v + 4095, 4095) & f_nonzero(class);

	return -v & -err;
}

/* 1 when slot == n. */
static __always_inline __u64 f_is(__u64 slot, __u64 n)
{
	return f_nonzero(slot ^ n) ^ 1;
}

/*
 * Argument slot `slot` (0-11) where the program runs. A kprobe program
 * reads every register and keeps one: the verifier takes context reads at
 * constant offsets only (clang would turn a switch into one read at a
 * computed offset); the 7th slot on is on the stack above the return
 * address, as read_args() finds it.
 */
static __always_inline __u64 filter_arg(void *ctx, const int kind, __u64 slot)
{
	struct pt_regs *regs = ctx;
	__u64 v = 0;

	if (kind == CTX_TRAMP) {
		bpf_get_func_arg(ctx, slot, &v);
		return v;
	}
	if (slot >= TRACE_REG_ARGS && slot < TRACE_MAX_ARGS) {
		/* a failed read leaves 0 */
		bpf_probe_read_kernel(&v, sizeof(v),
				      (void *)(regs->sp + 8 * (slot - TRACE_REG_ARGS + 1)));
		return v;
	}
	return (regs->di & -f_is(slot, 0)) | (regs->si & -f_is(slot, 1)) |
	       (regs->dx & -f_is(slot, 2)) | (regs->cx & -f_is(slot, 3)) |
	       (regs->r8 & -f_is(slot, 4)) | (regs->r9 & -f_is(slot, 5));
}

/*
 * 1 when the string at `p` matches literal `lit` (trace.h): read as
 * read_strs() reads an event's strings (user memory below the kernel half
 * of the address space, kernel memory above) with a bound past the bytes
 * compared, then compared 8 bytes at a time without a branch. NULL or an
 * unreadable string matches nothing.
 */
static __always_inline __u64 filter_str(const volatile struct trace_filter_str *lit, __u64 p)
{
	__u64 buf[TRACE_FILTER_STR_READ / 8];
	__u64 diff = 0;
	long n;

	if ((__s64)p < 0)
		n = bpf_probe_read_kernel_str(buf, sizeof(buf), (void *)p);
	else
		n = bpf_probe_read_user_str(buf, sizeof(buf), (void *)p);
#pragma unroll
	for (int i = 0; i < TRACE_FILTER_STR_WORDS; i++)
		diff |= (buf[i] ^ lit->word[i]) & lit->mask[i];
	/* read (n >= 1: its length with the NUL) and no compared byte differs */
	return (f_nonzero(diff) ^ 1) & (((__u64)n >> 63) ^ 1) & f_nonzero(n);
}

/*
 * The value a test reads, as the function has it (sign- or zero-extended
 * from its size; *missing set when the function lacks it).
 */
static __always_inline __u64 filter_value(const volatile struct trace_filter_op *op,
					  struct trace_filter_func *ff, void *ctx, const int kind,
					  const bool at_exit, __u64 cookie, __u64 ret, __u64 start,
					  __u64 *sgn, __u64 *missing)
{
	__u64 v = 0, d, shift;

	if (op->src == TRACE_FSRC_LATENCY)
		return bpf_ktime_get_ns() - start;
	if (op->src == TRACE_FSRC_ERRNO)
		return f_errno(cookie, ret);
	if (!ff) {
		*missing = 1;
		return 0;
	}
	d = ff->var[op->src & (TRACE_FILTER_MAX_VARS - 1)];
	*missing |= ((d & TRACE_FVAR_PRESENT) >> 7) ^ 1;
	if (!(kind == CTX_KPROBE && at_exit))
		v = filter_arg(ctx, kind, d & TRACE_FVAR_SLOT_MASK);
	if (at_exit)
		v = f_pick(f_nonzero((d & TRACE_FVAR_SLOT_MASK) ^ TRACE_FVAR_RET) ^ 1, ret, v);
	shift = 64 - (8 << ((d >> TRACE_FVAR_SIZE_SHIFT) & 3));
	*sgn = (d & TRACE_FVAR_SIGNED) >> 6;
	v <<= shift;
	return f_pick(*sgn, (__u64)((__s64)v >> shift), v >> shift);
}

/*
 * One op on the stack of bits `s`. A signed comparison is the unsigned
 * one of both sides with their sign bit flipped.
 */
static __always_inline __u64 filter_step(const volatile struct trace_filter_op *op, __u64 s,
					 struct trace_filter_func *ff, void *ctx, const int kind,
					 const bool at_exit, __u64 cookie, __u64 ret, __u64 start,
					 __u64 *missing)
{
	__u8 what = op->kind, cmp = op->cmp;
	__u64 v, b = op->value, sgn = 0, flip, t;

	if (what == TRACE_FOP_NOT)
		return s ^ 1;
	if (what == TRACE_FOP_AND)
		return (s >> 1) & (~1ULL | (s & 1));
	if (what == TRACE_FOP_OR)
		return (s >> 1) | (s & 1);
	if (what == TRACE_FOP_STR) {
		v = filter_value(op, ff, ctx, kind, at_exit, cookie, ret, start, &sgn, missing);
		t = filter_str(&filter_strs[op->value & (TRACE_FILTER_MAX_STRS - 1)], v);
		return (s << 1) | (t ^ (cmp == TRACE_FCMP_NE));
	}
	v = filter_value(op, ff, ctx, kind, at_exit, cookie, ret, start, &sgn, missing) & op->mask;
	if (cmp == TRACE_FCMP_EQ)
		return (s << 1) | (f_nonzero(v ^ b) ^ 1);
	if (cmp == TRACE_FCMP_NE)
		return (s << 1) | f_nonzero(v ^ b);
	/* a > b is b < a; a <= b is !(b < a); a >= b is !(a < b) */
	if (cmp == TRACE_FCMP_GT || cmp == TRACE_FCMP_LE) {
		t = v;
		v = b;
		b = t;
	}
	flip = sgn << 63;
	t = f_ult(v ^ flip, b ^ flip);
	if (cmp == TRACE_FCMP_LE || cmp == TRACE_FCMP_GE)
		t ^= 1;
	return (s << 1) | t;
}

/*
 * Runs one side's program on a call: `at_exit` with its return value and
 * the time it entered (`start`). A kprobe program reads no argument at
 * exit (the loader puts none in that side's program there). A function
 * that lacks a variable the program reads never passes.
 */
static __always_inline bool filter_run(const volatile struct trace_filter_op *ops, __u32 nops,
				       void *ctx, const int kind, const bool at_exit, __u64 cookie,
				       __u64 ret, __u64 start)
{
	struct trace_filter_func *ff = NULL;
	__u64 s = 0, missing = 0;

	if (!nops)
		return true;
	if (filter_vars) {
		__u32 func = (__u32)cookie;

		ff = bpf_map_lookup_elem(&filter_funcs, &func);
		if (!ff)
			return false;
	}
	/* one copy of the step: every program carries it, filter or not */
#pragma clang loop unroll(disable)
	for (int i = 0; i < TRACE_FILTER_MAX_OPS; i++) {
		if (i >= nops)
			break;
		s = filter_step(&ops[i], s, ff, ctx, kind, at_exit, cookie, ret, start, &missing);
	}
	return s & 1 & (missing ^ 1);
}

/* Calls are recorded (counted, stacks, entry events) at the exit when only it can decide. */
static __always_inline bool record_at_exit(void)
{
	return filter_exit_nops != 0;
}

/* The filter's entry half (arguments): true without one. */
static __always_inline bool filter_entry(void *ctx, const int kind, __u64 cookie)
{
	return filter_run(filter_entry_ops, filter_entry_nops, ctx, kind, false, cookie, 0, 0);
}

/* The filter's exit half (return value, errno, latency; arguments on trampolines). */
static __always_inline bool filter_exit(void *ctx, const int kind, __u64 cookie, __u64 ret,
					__u64 start)
{
	return filter_run(filter_exit_ops, filter_exit_nops, ctx, kind, true, cookie, ret, start);
}

/*
 * The call is counted here, and its entry event sent when captured
 * (`args_here`: its arguments can be read where this runs). ts: when it
 * entered, for its entry event (0: now).
 */
static __always_inline void on_entry(void *ctx, const int kind, bool args_here, __u64 cookie,
				     __u64 ts)
{
	__u32 func = (__u32)cookie;
	struct trace_func_stats *st = bpf_map_lookup_elem(&stats, &func);

	if (st)
		st->calls++;
	if (want_kstack || want_ustack)
		record_stack(ctx, func);
	if (cookie & TRACE_COOKIE_CAPTURE)
		emit_entry(ctx, kind, args_here, cookie, ts ? ts : bpf_ktime_get_ns());
}

/*
 * A call that passed the identity filters (pass_filters) enters: the
 * filter's entry half, what it saw counted; recorded now unless the exit
 * decides. Returns whether the entry half passed it.
 */
static __always_inline bool enter(void *ctx, const int kind, __u64 cookie)
{
	bool ok = filter_entry(ctx, kind, cookie);

	if (filter_on) {
		__u32 func = (__u32)cookie;
		struct trace_func_stats *st = bpf_map_lookup_elem(&stats, &func);

		if (st)
			st->filter_seen++;
	}
	if (!ok || record_at_exit())
		return ok;
	on_entry(ctx, kind, true, cookie, 0);
	return ok;
}

/*
 * The call the filter passed returns. start_ns == 0: the entry was not
 * seen, no duration. When the filter's exit half decided, the call is
 * counted here, its stack taken here and its entry event sent just before
 * its exit event (trampolines read the arguments at exit; the loader asks
 * kprobe programs for no argument at exit).
 */
static __always_inline void on_exit(void *ctx, const int kind, __u64 cookie, __u64 start_ns,
				    __u64 ret)
{
	__u32 func = (__u32)cookie;
	__u64 now = bpf_ktime_get_ns(), d = start_ns ? now - start_ns : 0;
	struct trace_func_stats *st;

	if (record_at_exit())
		on_entry(ctx, kind, kind == CTX_TRAMP, cookie, start_ns);
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
		emit_exit(cookie, ret, now, d);
}

/*
 * Entry half of a two-program pairing: remember when this thread entered
 * the function, for the exit program of the same function (`skip`: the
 * filter's entry half rejected the call; its exit only pops the frame).
 */
static __always_inline void push_frame(__u64 cookie, bool skip)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct call_stack *cs;
	__u32 d;

	if (!want_latency && !keep_call_stacks() && !(cookie & TRACE_COOKIE_CAPTURE) &&
	    !record_at_exit())
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
	d = cs->depth & (TRACE_MAX_DEPTH - 1);
	cs->func[d] = (__u32)cookie;
	cs->ts[d] = bpf_ktime_get_ns();
	cs->skip = (cs->skip & ((1U << d) - 1)) | ((__u32)skip << d);
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
 * starts a new chain from the call stack if the filter `passed` the call;
 * a call in the chain records its return, passed or not; the outermost
 * call's return sends the chain.
 */
static __always_inline void chain_exit(void *ctx, struct call_stack *cs, __u32 j, __u64 cookie,
				       __u64 ret, __u64 now, bool passed)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct error_chain *ec = bpf_map_lookup_elem(&error_chains, &tid);
	bool in_chain;

	j &= TRACE_MAX_DEPTH - 1;
	in_chain = ec && ec->len > j && ec->ts[j] == cs->ts[j];
	if (passed && is_error(cookie, ret) && !in_chain) {
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
		record_ustack_bid(ctx, bpf_get_current_pid_tgid() >> 32, ec->ustack);
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
 * Pops this function's frame off the thread's call stack: its index (*j),
 * when it entered (*start) and whether the filter's entry half rejected it
 * (*skip). NULL when the stack has no frame of it.
 */
static __always_inline struct call_stack *pop_frame(__u64 cookie, __u32 *j, __u64 *start,
						    bool *skip)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct call_stack *cs = bpf_map_lookup_elem(&call_stacks, &tid);

	if (!cs)
		return NULL;
	/* The exit of a call the full stack did not keep. */
	if (cs->overflow) {
		cs->overflow--;
		return NULL;
	}
	/*
	 * Find this function's frame from the top; frames above it lost their
	 * exit (not attached, or skipped by the recursion guard) and are
	 * dropped with it.
	 */
	for (int i = 0; i < TRACE_MAX_DEPTH; i++) {
		__u32 d = cs->depth, k;

		if (i >= d)
			return NULL;
		k = (d - 1 - i) & (TRACE_MAX_DEPTH - 1);
		if (cs->func[k] == (__u32)cookie) {
			*j = k;
			*start = cs->ts[k];
			*skip = (cs->skip >> k) & 1;
			cs->depth = k;
			return *start ? cs : NULL;
		}
	}
	return NULL;
}

/*
 * Exit half: the call returned `ret`. `start`: when it entered, as a
 * session program's cookie kept it; 0 when entry and exit are two programs
 * and the call stack pairs them. With error chains or the call graph the
 * frame is popped either way. The call's end is recorded if the filter
 * passes it.
 */
static __always_inline void leave(void *ctx, const int kind, __u64 cookie, __u64 ret,
				  __u64 start)
{
	struct call_stack *cs = NULL;
	bool skip = false, passed;
	__u32 j = 0;

	if (!start || keep_call_stacks()) {
		cs = pop_frame(cookie, &j, &start, &skip);
		if (!cs)
			return;
	}
	passed = !skip && filter_exit(ctx, kind, cookie, ret, start);
	if (cs && want_errors)
		chain_exit(ctx, cs, j, cookie, ret, bpf_ktime_get_ns(), passed);
	if (!passed)
		return;
	if (cs && want_graph)
		graph_exit(cs, j, bpf_ktime_get_ns() - start);
	on_exit(ctx, kind, cookie, start, ret);
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
	__u64 cookie = bpf_get_attach_cookie(ctx);
	bool ok;

	if (!pass_filters())
		return 0;
	ok = enter(ctx, CTX_TRAMP, cookie);
	if (pair_entry_exit)
		push_frame(cookie, !ok);
	return 0;
}

SEC("fexit.multi")
int trace_multi_exit(void *ctx)
{
	leave(ctx, CTX_TRAMP, bpf_get_attach_cookie(ctx), tramp_ret(ctx), 0);
	return 0;
}

SEC("fsession.multi")
int trace_multi_session(void *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx), ret = 0;
	__u64 *start = session_cookie(ctx);
	bool ok;

	if (session_is_return(ctx)) {
		/* the entry left 0 here when the filters said no */
		if (!*start)
			return 0;
		bpf_get_func_ret(ctx, &ret);
		leave(ctx, CTX_TRAMP, cookie, ret, *start);
		return 0;
	}
	*start = 0;
	if (!pass_filters())
		return 0;
	ok = enter(ctx, CTX_TRAMP, cookie);
	if (keep_call_stacks())
		push_frame(cookie, !ok);
	else if (!ok)
		return 0;
	*start = bpf_ktime_get_ns();
	return 0;
}

SEC("kprobe.multi")
int trace_kprobe_entry(struct pt_regs *ctx)
{
	if (pass_filters())
		enter(ctx, CTX_KPROBE, bpf_get_attach_cookie(ctx));
	return 0;
}

SEC("kprobe.session")
int trace_kprobe_session(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u64 *start = session_cookie(ctx);
	bool ok;

	if (!start)
		return 1;
	if (session_is_return(ctx)) {
		/* set by every entry that returned 0 (asking for its exit) */
		if (*start)
			leave(ctx, CTX_KPROBE, cookie, ctx->ax, *start);
		return 0;
	}
	/* returning 1 skips the exit half for calls the filters drop */
	if (!pass_filters())
		return 1;
	ok = enter(ctx, CTX_KPROBE, cookie);
	if (keep_call_stacks())
		push_frame(cookie, !ok);
	else if (!ok)
		return 1;
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

	if (!pass_filters() || (bpf_get_current_pid_tgid() >> 32) == inject_self_tgid)
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
	__u64 cookie = bpf_get_attach_cookie(ctx);

	if (!pass_filters())
		return 0;
	push_frame(cookie, !enter(ctx, CTX_TRAMP, cookie));
	return 0;
}

SEC("fexit")
int trace_fexit(void *ctx)
{
	leave(ctx, CTX_TRAMP, bpf_get_attach_cookie(ctx), tramp_ret(ctx), 0);
	return 0;
}
