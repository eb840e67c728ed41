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
/*
 * Argument slots captured per call: MAX_BPF_FUNC_ARGS, the most a trampoline
 * saves (the 7th and later arguments are on the stack on x86-64). A kprobe
 * program reads the TRACE_REG_ARGS argument registers, then the stack.
 */
#define TRACE_MAX_ARGS 12
#define TRACE_REG_ARGS 6
/* Strings (`char *` arguments) read per call, and the largest bound of one. */
#define TRACE_MAX_STRS 2
#define TRACE_STR_MAX 1024
/*
 * Pointee reads per call (--args-depth): the structs pointer arguments point
 * at, and those their pointer fields point at, into the event's pointee area.
 */
#define TRACE_MAX_DEREFS 8
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
/* Bits 35-38 (capture): argument slots to read, 0 to TRACE_MAX_ARGS. */
#define TRACE_COOKIE_NARGS_SHIFT 35
#define TRACE_COOKIE_NARGS_MASK (0xfULL << TRACE_COOKIE_NARGS_SHIFT)
/*
 * Bits 39-43 and 44-48 (capture): string i of the call. TRACE_COOKIE_STR_ON:
 * read one; the low bits: the argument slot holding the pointer.
 */
#define TRACE_COOKIE_STR_SHIFT 39
#define TRACE_COOKIE_STR_BITS 5
#define TRACE_COOKIE_STR_ON 0x10
#define TRACE_COOKIE_STR_SLOT 0xf

/* Per function, per CPU. */
struct trace_func_stats {
	__u64 calls;
	__u64 lat_count;
	__u64 lat_sum_ns;
	__u64 lat_max_ns;
	__u64 injected; /* calls made to fail (bpfmux inject) */
	__u64 filter_seen; /* calls the filter looked at (calls: those it passed) */
};

enum trace_event_kind {
	TRACE_EVENT_ENTRY = 1,
	TRACE_EVENT_EXIT = 2,
};

/*
 * Per-call events (ring buffer `events`). Every record starts with a
 * struct trace_event; an exit is only that, an entry is a struct
 * trace_entry_event followed by nstrs string buffers of str_size bytes
 * each, then the pointee area (2 * deref_size bytes). Bump
 * TRACE_EVENT_VERSION with any change: src/trace/events.rs reads only the
 * version it knows.
 */
#define TRACE_EVENT_VERSION 3

struct trace_event {
	__u64 ts_ns;
	__u64 ret;         /* exit */
	__u64 duration_ns; /* exit; 0 when unknown */
	__u32 func;
	__u32 tgid;
	__u32 tid;
	__u8 kind;
	__u8 version;      /* TRACE_EVENT_VERSION */
	__u8 nargs;        /* entry: slots of args[] read */
	__u8 nstrs;        /* entry: string buffers after the record */
	char comm[16];
};

/* A string an entry event carries (its bytes in the buffer of its index). */
struct trace_event_str {
	__s32 len;  /* bpf_probe_read_*_str(): bytes with the NUL, or -errno; 0: none */
	__u8 slot;  /* the argument slot the pointer was in */
	__u8 user;  /* read from user memory (a pointer below the kernel half) */
	__u16 _pad;
};

struct trace_entry_event {
	struct trace_event h;
	/* trampolines: bpf_get_func_arg() order; kprobes: 6 registers, then the stack */
	__u64 args[TRACE_MAX_ARGS];
	struct trace_event_str strs[TRACE_MAX_STRS];
	__u16 str_size;   /* bytes of each string buffer */
	__u16 deref_size; /* the pointee budget; the area after the strings is twice that */
	__u32 _pad;
	/* pointee read i (trace_deref_func): 0 read, -errno failed, 1 not made */
	__s32 deref_ret[TRACE_MAX_DEREFS];
	/* string i at data + i * str_size; the pointee area after the strings */
	char data[];
};

/* src/trace/events.rs decodes these layouts (EVENT_SIZE, ENTRY_SIZE). */
_Static_assert(sizeof(struct trace_event) == 56, "trace_event layout changed");
_Static_assert(sizeof(struct trace_entry_event) ==
		       56 + 8 * TRACE_MAX_ARGS + 8 * TRACE_MAX_STRS + 8 + 4 * TRACE_MAX_DEREFS,
	       "trace_entry_event layout changed");

/*
 * One pointee read of a captured function (map `deref_funcs`, per function;
 * src/trace/pointee.rs plans them): `len` bytes to area + `dst` from the
 * pointer in argument slot `from`, or (from & TRACE_DEREF_FIELD) from the
 * pointer at area + `at`, a field of an earlier read. len 0: no more reads.
 */
#define TRACE_DEREF_FIELD 0x80
struct trace_deref {
	__u8 from;
	__u8 _pad;
	__u16 at;
	__u16 dst;
	__u16 len;
};

struct trace_deref_func {
	struct trace_deref r[TRACE_MAX_DEREFS];
};

/* Key of the stack aggregation: who called which function from where. */
struct trace_stack_key {
	__u32 func;
	__u32 tgid;
	__s32 kstack; /* stack map id, negative: not captured */
	__s32 ustack;
};

/* A process's user stack: the key of ustack_bids. */
struct trace_ustack_key {
	__u32 tgid;
	__s32 ustack; /* its id in the stacks map */
};

/*
 * Frames of a user stack kept as build ID + file offset, each a struct
 * bpf_stack_build_id (linux/bpf.h): __s32 status (0 empty, 1 build ID and
 * offset, 2 address only), 20 bytes of build ID, __u64 offset or address.
 */
#define TRACE_BID_FRAMES 64
#define TRACE_BID_FRAME_SIZE 32

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

/*
 * Filters (src/trace/filter.rs compiles them): a postfix program per side
 * of the call, in .rodata. The entry side reads arguments; the exit side
 * the return value, errno and latency too. A test pushes one bit on a
 * stack of bits; NOT, AND and OR work on its top.
 */
#define TRACE_FILTER_MAX_OPS 16
#define TRACE_FILTER_MAX_VARS 8
/*
 * String literals a filter compares `char *` arguments with, and the bytes
 * compared at most: a literal of up to TRACE_FILTER_STR_LEN - 1 bytes and,
 * for equality, its NUL. The argument's string is read with a bound
 * TRACE_FILTER_STR_READ, so the compared bytes are never its cut.
 */
#define TRACE_FILTER_MAX_STRS 4
#define TRACE_FILTER_STR_LEN 64
#define TRACE_FILTER_STR_WORDS (TRACE_FILTER_STR_LEN / 8)
#define TRACE_FILTER_STR_READ (TRACE_FILTER_STR_LEN + 8)

enum trace_filter_op_kind {
	TRACE_FOP_TEST = 1, /* push (value(src) & mask) CMP value */
	TRACE_FOP_NOT = 2,
	TRACE_FOP_AND = 3,
	TRACE_FOP_OR = 4,
	/*
	 * push: the string value(src) points at matches literal `value` (cmp
	 * EQ), or does not (cmp NE); NULL or unreadable matches nothing
	 */
	TRACE_FOP_STR = 5,
};

/* Where a test's value comes from: 0..TRACE_FILTER_MAX_VARS-1 a variable. */
enum trace_filter_src {
	TRACE_FSRC_ERRNO = 8,   /* -ret if it is -4095..-1 by the return class, else 0 */
	TRACE_FSRC_LATENCY = 9, /* ns since the entry */
};

/* <, <=, >, >= compare signed when the variable's type is signed. */
enum trace_filter_cmp {
	TRACE_FCMP_EQ = 0,
	TRACE_FCMP_NE = 1,
	TRACE_FCMP_LT = 2,
	TRACE_FCMP_LE = 3,
	TRACE_FCMP_GT = 4,
	TRACE_FCMP_GE = 5,
};

struct trace_filter_op {
	__u8 kind;
	__u8 src;
	__u8 cmp;
	__u8 _pad[5];
	__u64 mask;
	__u64 value;
};

/*
 * A literal as the program compares it, 8 bytes at a time: a string
 * matches when (its word ^ word) & mask is 0 for every word. The masks
 * cover the literal's bytes, and its NUL for equality (not for a prefix).
 */
struct trace_filter_str {
	__u64 word[TRACE_FILTER_STR_WORDS];
	__u64 mask[TRACE_FILTER_STR_WORDS];
};

/*
 * A variable as one function has it (map `filter_funcs`, per function):
 * which argument slot, its size and signedness. Not PRESENT: the function
 * has no such argument, and the filter never passes its calls.
 */
#define TRACE_FVAR_PRESENT 0x80
#define TRACE_FVAR_SIGNED 0x40
#define TRACE_FVAR_SIZE_SHIFT 4 /* 2 bits: log2 of the size in bytes */
#define TRACE_FVAR_SLOT_MASK 0xf /* 0-11: argument slot, TRACE_FVAR_RET: return value */
#define TRACE_FVAR_RET 0xf

struct trace_filter_func {
	__u8 var[TRACE_FILTER_MAX_VARS];
};

#endif /* BPFMUX_TRACE_H */
