/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Records shared by the `bpfmux trace` BPF programs (trace.bpf.c) and their
 * Rust reader (src/trace/events.rs mirrors these layouts with #[repr(C)]).
 * Change both together.
 */
#ifndef BPFMUX_TRACE_H
#define BPFMUX_TRACE_H

/* Latency histogram: bucket b counts durations in [2^b, 2^(b+1)) ns. */
#define TRACE_HIST_BUCKETS 32
/* Arguments captured per call (register arguments on x86-64). */
#define TRACE_MAX_ARGS 6
/* Nesting depth remembered per thread when entry and exit are two programs. */
#define TRACE_MAX_DEPTH 32

/* The attach cookie: function index in the low 32 bits, flags above. */
#define TRACE_COOKIE_CAPTURE (1ULL << 32) /* emit an event per call */
/* Bits 33-34: how to tell a failed call by its return value (error chains). */
#define TRACE_COOKIE_RET_SHIFT 33
#define TRACE_COOKIE_RET_MASK (3ULL << TRACE_COOKIE_RET_SHIFT)
enum trace_ret_class {
	TRACE_RET_NONE = 0, /* void, unsigned, bool: never an error */
	TRACE_RET_INT = 1,  /* signed, 32 bits or fewer: -4095..-1 */
	TRACE_RET_LONG = 2, /* signed, 64 bits: -4095..-1 */
	TRACE_RET_PTR = 3,  /* pointer: NULL or an ERR_PTR */
};

/* Per function, per CPU. */
struct trace_func_stats {
	__u64 calls;
	__u64 lat_count;
	__u64 lat_sum_ns;
	__u64 lat_max_ns;
	__u64 injected; /* calls made to fail (bpfmux inject) */
};

enum trace_event_kind {
	TRACE_EVENT_ENTRY = 1,
	TRACE_EVENT_EXIT = 2,
};

/* One call of a function named exactly on the command line (ring buffer). */
struct trace_event {
	__u64 ts_ns;
	__u64 args[TRACE_MAX_ARGS]; /* entry */
	__u64 ret;                  /* exit */
	__u64 duration_ns;          /* exit; 0 when unknown */
	__u32 func;
	__u32 tgid;
	__u32 tid;
	__u32 kind;
	char comm[16];
};

/* src/trace/events.rs decodes this layout (EVENT_SIZE). */
_Static_assert(sizeof(struct trace_event) == 104, "trace_event layout changed");

/* Key of the stack aggregation: who called which function from where. */
struct trace_stack_key {
	__u32 func;
	__u32 tgid;
	__s32 kstack; /* stack map id, negative: not captured */
	__s32 ustack;
};

/* One call of an error chain: the outermost traced call first. */
struct trace_chain_frame {
	__u32 func;
	__u32 done; /* its exit was seen: ret and duration_ns are known */
	__u64 ret;
	__u64 duration_ns;
};

/*
 * A chain of traced calls that ended in an error (ring buffer `chains`):
 * sent when the outermost traced call of the thread returns, so every
 * frame's return value is known.
 */
struct trace_chain_event {
	__u64 ts_ns;     /* when the outermost call returned */
	__u32 tgid;
	__u32 tid;
	__u32 len;       /* frames used */
	__u32 failed;    /* index of the call whose error started the chain */
	__u32 overflow;  /* calls deeper than TRACE_MAX_DEPTH, not kept, when it failed */
	__s32 kstack;    /* stack map ids at the failing return, negative: none */
	__s32 ustack;
	__u32 _pad;
	char comm[16];
	struct trace_chain_frame frames[TRACE_MAX_DEPTH];
};

/* src/trace/errors.rs decodes this layout (CHAIN_SIZE). */
_Static_assert(sizeof(struct trace_chain_event) == 56 + 24 * TRACE_MAX_DEPTH,
	       "trace_chain_event layout changed");

/* Call graph (`graph` map): the path of traced calls to a returning one. */
struct trace_graph_key {
	__u32 depth; /* functions in func[] */
	__u32 func[TRACE_MAX_DEPTH];
};

struct trace_graph_value {
	__u64 calls;
	__u64 total_ns;
};

/* Things the programs could not record, per CPU (indexes of the `lost` map). */
enum trace_lost {
	TRACE_LOST_EVENTS = 0, /* ring buffer full */
	TRACE_LOST_STACKS = 1, /* stack map or stack_counts full */
	TRACE_LOST_DEPTH = 2,  /* entry/exit pairing: nesting deeper than TRACE_MAX_DEPTH */
	TRACE_LOST_CHAINS = 3, /* error chains: ring buffer `chains` full */
	TRACE_LOST_GRAPH = 4,  /* call graph: map `graph` full */
	TRACE_LOST_MAX = 8,
};

#endif /* BPFMUX_TRACE_H */
