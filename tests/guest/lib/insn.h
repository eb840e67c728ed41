/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Counting guest instructions from inside the guest, with the QEMU plugin that
 * `vm/run --insn` loads (vm/insn/plugin.c; vm/insn/README.md has the design).
 *
 * A program marks a window with INSN_BEGIN() ... INSN_END(); the plugin counts every
 * instruction the vCPU executed in between (interrupts and other tasks included) and
 * appends a record to a file the guest sees at $BPFMUX_INSN; insn_read() returns it.
 * The thread must stay on one CPU between the two markers (pin it: insn_pin()).
 *
 *	if (insn_open() || insn_pin())
 *		exit(1);
 *	INSN_BEGIN();
 *	work();
 *	INSN_END();
 *	insn_read(&w);		// w.count: instructions from INSN_BEGIN() to INSN_END()
 *
 * A window is exact when nothing interrupted it; a timer tick adds a few thousand
 * instructions. insn_per_rep() measures many short windows of two sizes and takes the
 * most frequent count of each (the undisturbed one), so the difference is the cost of
 * the work alone, fixed costs (the markers, the call) cancelled.
 */
#ifndef BPFMUX_TEST_INSN_H
#define BPFMUX_TEST_INSN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define INSN_MAGIC 0x42504d00	/* "\0MPB": the marker's displacement, plus the id */
#define INSN_ID_BEGIN 1
#define INSN_ID_END 2
#define INSN_ID_BEGIN_PROFILE 3

/* `nopl INSN_MAGIC+id(%rax)`: 0f 1f 80 id 4d 50 42, a 7-byte no-op the plugin knows. */
#define INSN_MARK(id) __asm__ __volatile__("nopl %c0(%%rax)" : : "i"(INSN_MAGIC + (id)) : "memory")
#define INSN_BEGIN() INSN_MARK(INSN_ID_BEGIN)
#define INSN_BEGIN_PROFILE() INSN_MARK(INSN_ID_BEGIN_PROFILE)
#define INSN_END() INSN_MARK(INSN_ID_END)

struct insn_pc {
	uint64_t addr;
	int64_t count;		/* executions of the instruction at addr in the window */
};

struct insn_window {
	unsigned int cpu;
	uint64_t count;		/* instructions from BEGIN (included) to END (excluded) */
	/*
	 * TCG dispatch in the window (vm/insn/plugin.c, "Dispatch"): transitions between
	 * blocks that QEMU looks up, the misses of its jump cache (a model), and entries
	 * into two-page blocks that QEMU does not chain. Only if @dispatch (the plugin
	 * reports them).
	 */
	int dispatch;
	uint64_t lookups, misses, unchained;
	/*
	 * Blocks QEMU translated during the window, on any vCPU (0 from an older plugin): in
	 * a steady loop, more than none means code is being rewritten or flushed.
	 */
	uint64_t translated;
	/*
	 * Hazards (vm/insn/plugin.c, "Hazards"; only if @hazards: the plugin runs with
	 * hazards=on, `vm/run --insn-hazards`): indirect branches (thunks included), calls,
	 * near returns and the returns a 16-entry return stack model mispredicts; distinct
	 * 64-byte instruction and data lines; distinct indirect sites, (site, target) pairs,
	 * and the most targets of one site. @full: bits 1 instruction lines, 2 data lines, 4
	 * sites overflowed the plugin's sets (those counts are lower bounds).
	 */
	int hazards;
	uint64_t indirect, calls, rets, ret_miss;
	uint64_t ilines, dlines, isites, itargets, max_targets;
	unsigned int full;
	size_t nprof;		/* profile windows: one entry per address executed */
	struct insn_pc *prof;
};

/* Open $BPFMUX_INSN (set by `vm/run --insn`). 0, or -1 with a message on stderr. */
int insn_open(void);
/* Pin the calling thread to the CPU it runs on. 0, or -1 with a message. */
int insn_pin(void);
/* The record of the window that just ended on this CPU. 0, or -1 with a message. */
int insn_read(struct insn_window *w);
void insn_window_free(struct insn_window *w);

/* Work to count: runs something @reps times; non-zero return = error (counting stops). */
typedef int (*insn_work_fn)(void *arg, unsigned int reps);

/* One window around fn(arg, reps): its count, or -1 (message on stderr). */
int64_t insn_window(insn_work_fn fn, void *arg, unsigned int reps);

/* Many windows of one size: the most frequent count (the undisturbed one). */
struct insn_sample {
	uint64_t mode, min, max;
	int hits, samples;	/* windows that counted exactly `mode`, windows */
	int runner_up;		/* windows of the next most frequent count */
};

/*
 * Instructions per repetition of @fn: windows of @k1 and of @k2 repetitions (interleaved),
 * per_rep = (mode(k2) - mode(k1)) / (k2 - k1). At least @samples windows of each, more
 * (up to 8× or 120) until both modes are clear: seen 3 times or more and twice as often
 * as any other count. 0 or -1; e->clear says whether they became clear.
 */
struct insn_estimate {
	double per_rep;
	unsigned int k1, k2;
	int clear;
	struct insn_sample lo, hi;
	/* medians over the windows that counted each mode, differenced like per_rep */
	int dispatch;
	double lookups_per_rep, misses_per_rep, unchained_per_rep;
	/*
	 * Hazards (if @hazards): branch counts per repetition, differenced like per_rep; the
	 * distinct lines and sites are sizes of a set, not sums, so they are a window's:
	 * medians over the windows of k1 (lo) and of k2 (hi) repetitions that counted the
	 * mode. @full: the windows' full bits, or'ed.
	 */
	int hazards;
	double indirect_per_rep, calls_per_rep, rets_per_rep, ret_miss_per_rep;
	double ilines[2], dlines[2], isites[2], itargets[2], max_targets[2];	/* lo, hi */
	unsigned int full;
};
int insn_per_rep(insn_work_fn fn, void *arg, unsigned int k1, unsigned int k2, int samples,
		 struct insn_estimate *e);

/* Median and relative spread ((max - min) / median) of @n values (sorted in place). */
void insn_median_spread(double *v, int n, double *median, double *spread);

/*
 * An undisturbed profile window of fn(arg, reps): of @tries windows, one with the most
 * frequent count (at least two alike). 0, or -1 with a message.
 */
int insn_profile(insn_work_fn fn, void *arg, unsigned int reps, int tries,
		 struct insn_window *w);

/* A profile folded to kernel symbols (/proc/kallsyms, BPF programs included). */
struct insn_sym {
	char name[128];
	int64_t count;
};
struct insn_prof {
	struct insn_sym *sym;	/* most instructions first */
	size_t n;
};
/* Fold @w's addresses to symbols; user-space addresses are one "[user space]". 0 or -1. */
int insn_fold(const struct insn_window *w, struct insn_prof *p);
/*
 * The folded profile of what @k2 - @k1 repetitions of @fn add: an undisturbed profile
 * window of each size (insn_profile()), folded, subtracted: fixed costs cancel. 0 or -1.
 */
int insn_profile_diff(insn_work_fn fn, void *arg, unsigned int k1, unsigned int k2,
		      struct insn_prof *out);
/* *out = a - b, symbol by symbol (zero rows dropped). 0 or -1. */
int insn_prof_sub(const struct insn_prof *a, const struct insn_prof *b, struct insn_prof *out);
void insn_prof_free(struct insn_prof *p);
/*
 * Markdown table of @a / adiv next to @b / bdiv per symbol, with their difference, the
 * largest differences first (then the largest @a), at most @top rows plus a total line.
 */
void insn_prof_print(FILE *f, const struct insn_prof *a, double adiv, const char *acol,
		     const struct insn_prof *b, double bdiv, const char *bcol, int top);

#endif
