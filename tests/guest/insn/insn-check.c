// SPDX-License-Identifier: GPL-2.0
/*
 * Checks the instruction counter itself (vm/insn/plugin.c, lib/insn.h) against loops
 * whose instruction counts are known exactly, markers inside the same asm so the
 * compiler adds nothing to the window:
 *
 *   loop       BEGIN; mov; N × (dec; jnz); END                 = 2 + 2N
 *   cross      BEGIN; mov; jmp; N × (dec; mov-across-a-page; test; jnz); END = 3 + 4N
 *              (the mov starts 2 bytes before a page end: QEMU 7.2 reports it in two
 *              blocks, and counting it twice would give 3 + 5N)
 *   profile    the cross loop as a profile window: the addresses' counts add up to the
 *              window's count and each loop instruction ran exactly N times
 *   dispatch   the plugin's TCG dispatch counts ("Dispatch" in vm/insn/plugin.c), N=1000
 *              against N=10: the simple loop adds no lookup, the indirect loop
 *              (BEGIN; mov; N × (dec; lea; jmp *%rax; test; jnz); END) one lookup per
 *              iteration and no jump-cache miss, the cross loop one unchained entry and
 *              two lookups per iteration (QEMU's blocks: [dec], ended before the crossing
 *              mov, falls through into [mov], which spans two pages; [test; jnz] on the
 *              next page is entered and left by lookups). Misses: exact up to the
 *              loop's lookup targets, each of which may miss once more or less at the
 *              start of a window (the reading syscall between windows evicts them); the
 *              colliding loop two lookups and two misses per iteration (its two
 *              indirect targets, at page offsets 0x100 and 0x1c3, share one entry of
 *              QEMU's jump cache: 0x100 ^ 0x100 >> 6 and 0x1c3 ^ 0x1c3 >> 6 agree in
 *              their low 6 bits)
 *
 * The jump cache's index also mixes in the page number, so the cross loop's two lookup
 * targets ([dec] at page offset 0xffc, [test; jnz] at 0x003 of the next page) share an
 * entry when [dec]'s page number is 0x7ff or 0xfff modulo 4096: under ASLR, 2 of
 * 4096 load addresses give 2N misses. The program re-executes itself with
 * ADDR_NO_RANDOMIZE, so it always runs at the same address (PIE base 0x555555554000),
 * and checks a copy of the loop at page 0x7ff: two lookups and two misses per iteration.
 *
 * A timer tick inside a window adds its handler's instructions, so each size runs
 * several windows: the smallest and the most frequent count must both be the exact one.
 * Run under `vm/run --insn -- build/guest/insn-check`.
 *
 * `insn-check --hazards` (under `vm/run --insn-hazards`) checks the hazard counts instead
 * ("Hazards" in vm/insn/plugin.c) on snippets with known answers, each a window of its
 * own in one asm function, per N iterations:
 *   icall      call *%rax to a ret: N indirect, N calls, N returns, 0 mispredicts, 1 site
 *   encodings  8 indirect branches of other encodings (REX, memory operands, %fs:,
 *              notrack and cs prefixes; 4 calls, 4 jumps) and a direct call, returning
 *              by ret, rep ret and ret $0: 8N indirect, 5N calls and returns, 0
 *              mispredicts, 8 sites of one target each
 *   ijmp       the dispatch test's indirect loop: N indirect, no call, no return
 *   balanced   call f; f: call g; ret: 2N calls and returns, 0 mispredicts
 *   skipped    the exit pattern: call w; w: call m; m: call s; s: add $8,%rsp; ret (to
 *              w, the model predicts m); w: ret (predicts the stale entry w): 3N calls,
 *              2N returns, 2N mispredicts
 *   push+ret   lea 1f; push; ret: N returns, N mispredicts, no indirect branch
 *   deep       a recursion 20 calls deep: 20N calls and returns; the 16-entry stack
 *              keeps the innermost 16, so 4N mispredicts
 *   retpoline  a kernel-style retpoline thunk (call 1f; 1: mov %reg,(%rsp); ret) and
 *              one returning through a return thunk (jmp to a ret): 2N indirect, 4N
 *              calls and returns, 2N mispredicts (the thunks' rets), 2 sites
 *   cycle T    one call *(%rdx,%rax,8) site over T = 1, 2, 4 targets: 1 site, T targets
 *   data lines loads of N = 100 64-byte-aligned lines, twice: 100 lines; 8-byte loads at
 *              offset 60 of each (across each line end): 101; stores: 100
 *   code lines a loop over jumps laid out on 5 lines, one of them a jmp across a line
 *              end, the END marker alone on the 6th and a ret on the 7th: 5 lines
 *   overflow   loads of 132,072 lines: the data-line set holds 131,072 and says so
 * The counts are of an undisturbed window (the smallest instruction count of several,
 * reached at least 3 times: an interrupt only adds), and must be exact.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <unistd.h>
#include "lib/check.h"
#include "lib/insn.h"

#define STR2(x) #x
#define STR(x) STR2(x)
#define BEGIN_DISP STR(0x42504d01)
#define END_DISP STR(0x42504d02)
#define PROF_DISP STR(0x42504d03)

/* cross_loop(n), cross_loop_profile(n): the page-crossing loop, 4 KiB aligned. */
void cross_loop(unsigned int n);
void cross_loop_profile(unsigned int n);
extern const char cross_dec[], cross_mov[], cross_test[], cross_jnz[];
extern const char cross_dec_p[], cross_mov_p[];

#define CROSS_LOOP(name, begin, suffix)						\
	".balign 4096\n"							\
	".globl " name "\n"							\
	".type " name ", @function\n"						\
	name ":\n"								\
	"	nopl " begin "(%rax)\n"						\
	"	mov %edi, %ecx\n"						\
	"	.byte 0xe9\n"		/* jmp rel32: fixed size for .org */	\
	"	.long 1f - (. + 4)\n"						\
	"	.org " name " + 4092, 0xcc\n"					\
	"1:\n"									\
	"cross_dec" suffix ":\n"						\
	"	dec %ecx\n"							\
	"cross_mov" suffix ":\n"						\
	"	mov $0x11223344, %eax\n"	/* 5 bytes from page end - 2 */	\
	"cross_test" suffix ":\n"						\
	"	test %ecx, %ecx\n"						\
	"cross_jnz" suffix ":\n"						\
	"	jnz 1b\n"							\
	"	nopl " END_DISP "(%rax)\n"					\
	"	ret\n"								\
	".size " name ", . - " name "\n"

__asm__(".pushsection .text.insn_cross, \"ax\", @progbits\n"
	".globl cross_dec, cross_mov, cross_test, cross_jnz, cross_dec_p, cross_mov_p\n"
	CROSS_LOOP("cross_loop", BEGIN_DISP, "")
	CROSS_LOOP("cross_loop_profile", PROF_DISP, "_p")
	".popsection\n");

/* indirect_loop(n): an indirect jump per iteration, on a page of its own */
void indirect_loop(unsigned int n);

__asm__(".pushsection .text.insn_indirect, \"ax\", @progbits\n"
	".balign 4096\n"
	".globl indirect_loop\n"
	".type indirect_loop, @function\n"
	"indirect_loop:\n"
	"	nopl " BEGIN_DISP "(%rax)\n"
	"	mov %edi, %ecx\n"
	"1:	dec %ecx\n"
	"	lea 2f(%rip), %rax\n"
	"	jmp *%rax\n"
	"2:	test %ecx, %ecx\n"
	"	jnz 1b\n"
	"	nopl " END_DISP "(%rax)\n"
	"	ret\n"
	".size indirect_loop, . - indirect_loop\n"
	".popsection\n");

/* colliding_loop(n): two indirect jumps per iteration to targets of one cache entry */
void colliding_loop(unsigned int n);

__asm__(".pushsection .text.insn_collide, \"ax\", @progbits\n"
	".balign 4096\n"
	".globl colliding_loop\n"
	".type colliding_loop, @function\n"
	"colliding_loop:\n"
	"	nopl " BEGIN_DISP "(%rax)\n"
	"	mov %edi, %ecx\n"
	"1:	dec %ecx\n"
	"	lea 2f(%rip), %rax\n"
	"	jmp *%rax\n"
	"	.org colliding_loop + 0x100, 0xcc\n"
	"2:	lea 3f(%rip), %rax\n"
	"	jmp *%rax\n"
	"	.org colliding_loop + 0x1c3, 0xcc\n"
	"3:	test %ecx, %ecx\n"
	"	jnz 1b\n"
	"	nopl " END_DISP "(%rax)\n"
	"	ret\n"
	".size colliding_loop, . - colliding_loop\n"
	".popsection\n");

/*
 * The hazard snippets ("--hazards"): each hz_NAME(n, arg) is one window of n iterations,
 * its markers inside the asm, so the window holds nothing but the snippet.
 */
void hz_icall(unsigned int n, void *arg);
void hz_encodings(unsigned int n, void *arg);
void hz_balanced(unsigned int n, void *arg);
void hz_skipped(unsigned int n, void *arg);
void hz_pushret(unsigned int n, void *arg);
void hz_deep(unsigned int n, void *arg);
void hz_retpoline(unsigned int n, void *arg);
void hz_cycle(unsigned int n, void *mask);
void hz_loads(unsigned int n, void *buf);
void hz_stores(unsigned int n, void *buf);
void hz_code_lines(unsigned int n, void *arg);
void hz_ret(void), hz_repret(void);
/* hz_encodings' call *%fs:hz_tls@tpoff (a segment prefix, as the kernel's %gs:) */
__thread void *hz_tls;

#define HZ_FUNC(name) ".globl " name "\n.type " name ", @function\n" name ":\n"
#define HZ_END(name) ".size " name ", . - " name "\n"
/* hz_NAME(n, arg): BEGIN; SETUP; n × (BODY; dec %ecx; jnz); END; ret; then AFTER */
#define HZ_LOOP(name, setup, body, after)					\
	HZ_FUNC(name)								\
	"	nopl " BEGIN_DISP "(%rax)\n"					\
	"	mov %edi, %ecx\n"						\
	setup									\
	"1:\n"									\
	body									\
	"	dec %ecx\n"							\
	"	jnz 1b\n"							\
	"	nopl " END_DISP "(%rax)\n"					\
	"	ret\n"								\
	after									\
	HZ_END(name)

__asm__(".pushsection .text.insn_hazards, \"ax\", @progbits\n"
	".balign 64\n"
	HZ_FUNC("hz_ret")
	"	ret\n"
	HZ_END("hz_ret")
	HZ_FUNC("hz_repret")
	"	.byte 0xf3, 0xc3\n"			/* rep ret */
	HZ_END("hz_repret")
	"hz_ret0:\n"
	"	.byte 0xc2, 0x00, 0x00\n"		/* ret $0 */

	HZ_LOOP("hz_icall", "	lea hz_ret(%rip), %rax\n", "	call *%rax\n", "")

	HZ_LOOP("hz_encodings",
		"	lea hz_table(%rip), %rdx\n"
		"	lea hz_ret(%rip), %r11\n",
		"	call *%r11\n"				/* 41 ff d3 */
		"	call *8(%rdx)\n"			/* ff 52 08: hz_ret */
		"	call *%fs:hz_tls@tpoff\n"		/* 64 ff 14 25 ..: hz_repret */
		"	call hz_ret0\n"			/* e8: direct, to ret $0 */
		"	lea hz_ret(%rip), %rax\n"
		"	.byte 0x48, 0xff, 0xd0\n"		/* rex.W call *%rax */
		"	lea 2f(%rip), %rax\n"
		"	.byte 0x3e, 0xff, 0xe0\n"		/* notrack jmp *%rax */
		"2:	lea 3f(%rip), %rax\n"
		"	.byte 0x2e, 0xff, 0xe0\n"		/* cs jmp *%rax */
		"3:	jmp *16(%rdx)\n"			/* ff 62 10: to hz_encodings_4 */
		".globl hz_encodings_4\n"
		"hz_encodings_4:\n"
		"	lea 5f(%rip), %r8\n"
		"	jmp *%r8\n"				/* 41 ff e0 */
		"5:\n", "")

	HZ_LOOP("hz_balanced", "", "	call 2f\n",
		"2:	call hz_ret\n"
		"	ret\n")

	HZ_LOOP("hz_skipped", "", "	call 2f\n",
		"2:	call 3f\n"			/* w */
		"	ret\n"				/* predicted: the stale entry (this ret) */
		"3:	call 4f\n"			/* m */
		"	int3\n"			/* never returned to */
		"4:	add $8, %rsp\n"		/* s: drops the return into m ... */
		"	ret\n")			/* ... and returns into w */

	HZ_LOOP("hz_pushret", "",
		"	lea 2f(%rip), %rax\n"
		"	push %rax\n"
		"	ret\n"
		"2:\n", "")

	HZ_LOOP("hz_deep", "",
		"	mov $20, %edx\n"
		"	call 2f\n",
		"2:	dec %edx\n"			/* 20 calls deep in all */
		"	jz 3f\n"
		"	call 2b\n"
		"3:	ret\n")

	HZ_LOOP("hz_retpoline", "",
		"	lea hz_ret(%rip), %rax\n"
		"	call hz_thunk_rax\n"
		"	lea hz_ret(%rip), %r11\n"
		"	call hz_thunk_r11\n",
		"hz_thunk_rax:\n"			/* retpoline.S: RETPOLINE rax */
		"	call 2f\n"
		"	int3\n"
		"2:	mov %rax, (%rsp)\n"
		"	ret\n"
		"hz_thunk_r11:\n"			/* ... whose RET is a return thunk */
		"	call 3f\n"
		"	int3\n"
		"3:	mov %r11, (%rsp)\n"
		"	jmp hz_return_thunk\n"
		"hz_return_thunk:\n"
		"	ret\n"
		"	int3\n")

	HZ_LOOP("hz_cycle",				/* arg: the mask of the target index */
		"	lea hz_targets(%rip), %rdx\n",
		"	mov %ecx, %eax\n"
		"	and %esi, %eax\n"
		"	call *(%rdx,%rax,8)\n",
		".globl hz_t0, hz_t1, hz_t2, hz_t3\n"
		"hz_t0:	ret\n"
		"hz_t1:	ret\n"
		"hz_t2:	ret\n"
		"hz_t3:	ret\n")

	HZ_LOOP("hz_stores", "	mov %rsi, %rdx\n",
		"	mov %ecx, (%rdx)\n"
		"	add $64, %rdx\n", "")

	HZ_FUNC("hz_loads")			/* twice over n lines from buf */
	"	nopl " BEGIN_DISP "(%rax)\n"
	"	mov $2, %r8d\n"
	"1:	mov %edi, %ecx\n"
	"	mov %rsi, %rdx\n"
	"2:	mov (%rdx), %rax\n"
	"	add $64, %rdx\n"
	"	dec %ecx\n"
	"	jnz 2b\n"
	"	dec %r8d\n"
	"	jnz 1b\n"
	"	nopl " END_DISP "(%rax)\n"
	"	ret\n"
	HZ_END("hz_loads")

	/* on lines 0-4 of its own 512 bytes, END alone at the end of line 5, ret on 6 */
	".balign 512\n"
	HZ_FUNC("hz_code_lines")
	"	nopl " BEGIN_DISP "(%rax)\n"		/* line 0 */
	"	mov %edi, %ecx\n"
	"	jmp 4f\n"
	"1:	dec %ecx\n"
	"	.byte 0x0f, 0x84\n"			/* jz rel32: to END */
	"	.long 5f - (. + 4)\n"
	"	.byte 0xe9\n"				/* jmp rel32: to line 1 */
	"	.long 2f - (. + 4)\n"
	"	.org hz_code_lines + 64, 0xcc\n"
	"2:	.byte 0xe9\n"				/* line 1: to line 2 */
	"	.long 3f - (. + 4)\n"
	"	.org hz_code_lines + 128, 0xcc\n"
	"3:	.byte 0xe9\n"				/* line 2: to the one on 3 and 4 */
	"	.long 4f - (. + 4)\n"
	"	.org hz_code_lines + 3 * 64 + 62, 0xcc\n"
	"4:	.byte 0xe9\n"				/* lines 3 and 4: back to line 0 */
	"	.long 1b - (. + 4)\n"
	"	.org hz_code_lines + 5 * 64 + 57, 0xcc\n"
	"5:	nopl " END_DISP "(%rax)\n"		/* line 5, excluded */
	"	ret\n"					/* line 6 */
	HZ_END("hz_code_lines")
	".popsection\n"
	".pushsection .data.rel.local, \"aw\", @progbits\n"
	".balign 8\n"
	"hz_table:\n"
	"	.quad hz_ret, hz_ret, hz_encodings_4\n"
	"hz_targets:\n"
	"	.quad hz_t0, hz_t1, hz_t2, hz_t3\n"
	".popsection\n");

static int simple_loop(void *arg, unsigned int n)
{
	(void)arg;
	/* the whole window in one asm: BEGIN, mov, n × (dec, jnz), END */
	__asm__ __volatile__("nopl " BEGIN_DISP "(%%rax)\n"
			     "	mov %0, %%ecx\n"
			     "1:	dec %%ecx\n"
			     "	jnz 1b\n"
			     "	nopl " END_DISP "(%%rax)\n"
			     : : "r"(n) : "rcx", "cc", "memory");
	return 0;
}

static int crossing_loop(void *arg, unsigned int n)
{
	(void)arg;
	cross_loop(n);
	return 0;
}

/*
 * Windows of one loop size: every count, then the smallest and the most frequent. At
 * least MIN_WINDOWS; more while fewer than three windows agree on the smallest count (a
 * slow host lets more ticks into each window), up to MAX_WINDOWS. An interrupt inside a
 * window only adds instructions, so the loop counts exactly when the smallest count is
 * the loop's length and at least three windows saw it; the most frequent count is printed
 * (on a busy host most windows may take a tick) but decides nothing.
 */
static void check_size(const char *what, int (*loop)(void *, unsigned int), unsigned int n,
		       uint64_t want)
{
	enum { MIN_WINDOWS = 11, MAX_WINDOWS = 121 };
	uint64_t c[MAX_WINDOWS], min = UINT64_MAX, mode = 0;
	int best = 0, nw = 0, at_min = 0;

	while (nw < MIN_WINDOWS || (at_min < 3 && nw < MAX_WINDOWS)) {
		struct insn_window w;

		loop(NULL, n);
		if (insn_read(&w)) {
			check(0, "%s, N=%u: a record for every window", what, n);
			return;
		}
		c[nw++] = w.count;
		if (w.count < min)
			min = w.count, at_min = 0;
		at_min += w.count == min;
	}
	for (int i = 0; i < nw; i++) {
		int k = 0;

		for (int j = 0; j < nw; j++)
			k += c[j] == c[i];
		if (k > best || (k == best && c[i] < mode))
			best = k, mode = c[i];
	}
	check(min == want && at_min >= 3,
	      "%s, N=%u: %" PRIu64 " instructions exactly (smallest %" PRIu64 " in %d of %d "
	      "windows, most frequent %" PRIu64 " in %d)", what, n, want, min, at_min, nw, mode,
	      best);
}

static int jumping_loop(void *arg, unsigned int n)
{
	(void)arg;
	indirect_loop(n);
	return 0;
}

static int colliding_jumps(void *arg, unsigned int n)
{
	(void)arg;
	colliding_loop(n);
	return 0;
}

/* The cross loop copied to pages whose number makes its two lookup targets collide. */
static void (*moved_cross)(unsigned int n);

static int moved_crossing_loop(void *arg, unsigned int n)
{
	(void)arg;
	moved_cross(n);
	return 0;
}

/* Copies the cross loop (position independent, two pages) to @addr; 0 on success. */
static int move_cross_loop(uintptr_t addr)
{
	size_t len = 2 * 4096;
	void *p = mmap((void *)addr, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);

	if (p == MAP_FAILED || p != (void *)addr) {
		check(0, "a mapping at %#lx for the moved cross loop", (unsigned long)addr);
		return -1;
	}
	memcpy(p, (const void *)cross_loop, len);
	if (mprotect(p, len, PROT_READ | PROT_EXEC)) {
		check(0, "mprotect of the moved cross loop: %s", strerror(errno));
		return -1;
	}
	moved_cross = (void (*)(unsigned int))p;
	return 0;
}

/* Dispatch counts of the most frequent instruction count's first window of size @n. */
static int dispatch_of(int (*loop)(void *, unsigned int), unsigned int n,
		       struct insn_window *out)
{
	enum { WINDOWS = 11 };
	struct insn_window w[WINDOWS];
	int best = -1, best_k = 0;

	for (int i = 0; i < WINDOWS; i++) {
		loop(NULL, n);
		if (insn_read(&w[i]))
			return -1;
	}
	for (int i = 0; i < WINDOWS; i++) {
		int k = 0;

		for (int j = 0; j < WINDOWS; j++)
			k += w[j].count == w[i].count;
		if (k > best_k)
			best = i, best_k = k;
	}
	*out = w[best];
	return 0;
}

/* Per-iteration lookups, misses and unchained entries of @loop, N=1000 against N=10. */
static void check_dispatch(const char *what, int (*loop)(void *, unsigned int),
			   int64_t lookups, int64_t misses, int64_t unchained)
{
	struct insn_window a, b;
	int64_t dl, dm, du;

	if (dispatch_of(loop, 10, &a) || dispatch_of(loop, 1000, &b)) {
		check(0, "dispatch, %s: a record for every window", what);
		return;
	}
	if (!a.dispatch || !b.dispatch) {
		check(0, "dispatch, %s: the plugin reports dispatch counts (an older plugin?)",
		      what);
		return;
	}
	dl = (int64_t)(b.lookups - a.lookups);
	dm = (int64_t)(b.misses - a.misses);
	du = (int64_t)(b.unchained - a.unchained);
	/* each lookup target may miss once at a window's start: a slack of one per target */
	check(dl == 990 * lookups && dm >= 990 * misses - lookups &&
	      dm <= 990 * misses + lookups && du == 990 * unchained,
	      "dispatch, %s: 990 more iterations add %" PRId64 " lookups, %" PRId64 " misses, %"
	      PRId64 " unchained entries (want %" PRId64 ", %" PRId64 " ± %" PRId64 ", %" PRId64
	      ")", what, dl, dm, du, 990 * lookups, 990 * misses, lookups, 990 * unchained);
}

static int64_t prof_count(const struct insn_window *w, const void *addr)
{
	for (size_t i = 0; i < w->nprof; i++)
		if (w->prof[i].addr == (uint64_t)(uintptr_t)addr)
			return w->prof[i].count;
	return 0;
}

static void check_profile(unsigned int n)
{
	struct insn_window w;
	uint64_t want = 3 + 4ull * n;
	int64_t sum = 0;
	int tries;

	for (tries = 0; tries < 9; tries++) {
		cross_loop_profile(n);
		if (insn_read(&w)) {
			check(0, "profile window: a record");
			return;
		}
		if (w.count == want)
			break;
		insn_window_free(&w);
	}
	if (tries == 9) {
		check(0, "profile window, N=%u: an undisturbed window in 9 tries", n);
		return;
	}
	for (size_t i = 0; i < w.nprof; i++)
		sum += w.prof[i].count;
	check(w.count == want, "profile window, N=%u: counts %" PRIu64 " (want %" PRIu64 ")", n,
	      w.count, want);
	check(sum == (int64_t)w.count, "profile: the addresses' counts add up to the window "
	      "(%" PRId64 " of %" PRIu64 ", %zu addresses)", sum, w.count, w.nprof);
	check(prof_count(&w, cross_dec_p) == n && prof_count(&w, cross_mov_p) == n,
	      "profile: dec and the page-crossing mov ran %u times each (%" PRId64 ", %" PRId64
	      ")", n, prof_count(&w, cross_dec_p), prof_count(&w, cross_mov_p));
	check(w.nprof == 7, "profile: 7 addresses (BEGIN, mov, jmp, 4 loop instructions), "
	      "got %zu", w.nprof);
	insn_window_free(&w);
}

/* Expected hazard counts of a window; ANY: not checked. */
#define ANY (-1)
struct hz_want {
	int64_t indirect, calls, rets, ret_miss, ilines, dlines, isites, itargets, max_targets;
};

/*
 * An undisturbed window of hz(n, arg): of at least 7 windows, and more (up to 41) until
 * 3 agree on it, one with the smallest instruction count; *agree: the windows at that
 * count report the same hazards. 0, or -1 with a failed check.
 */
static int undisturbed(const char *what, void (*hz)(unsigned int, void *), unsigned int n,
		       void *arg, struct insn_window *out, int *agree)
{
	enum { MIN_WINDOWS = 7, MAX_WINDOWS = 41 };
	struct insn_window w[MAX_WINDOWS];
	int nw = 0, at_min = 0, first = -1;

	while (nw < MIN_WINDOWS || (at_min < 3 && nw < MAX_WINDOWS)) {
		hz(n, arg);
		if (insn_read(&w[nw])) {
			check(0, "hazards, %s: a record for every window", what);
			return -1;
		}
		if (!w[nw].hazards) {
			check(0, "hazards, %s: the plugin reports hazards (boot with `vm/run "
			      "--insn-hazards`)", what);
			return -1;
		}
		if (first < 0 || w[nw].count < w[first].count)
			first = nw, at_min = 0;
		at_min += w[nw].count == w[first].count;
		nw++;
	}
	*agree = 1;
	for (int i = 0; i < nw; i++) {
		const struct insn_window *a = &w[i], *b = &w[first];

		if (a->count == b->count &&
		    (a->indirect != b->indirect || a->calls != b->calls || a->rets != b->rets ||
		     a->ret_miss != b->ret_miss || a->ilines != b->ilines ||
		     a->dlines != b->dlines || a->isites != b->isites ||
		     a->itargets != b->itargets || a->max_targets != b->max_targets))
			*agree = 0;
	}
	*out = w[first];
	return 0;
}

/* " name got (want W)" for each checked field into @msg; whether all are as wanted. */
static int hz_compare(const struct insn_window *w, const struct hz_want *want, char *msg,
		      size_t size)
{
	const struct {
		const char *name;
		uint64_t got;
		int64_t want;
	} f[] = {
		{ "indirect", w->indirect, want->indirect },
		{ "calls", w->calls, want->calls },
		{ "returns", w->rets, want->rets },
		{ "mispredicts", w->ret_miss, want->ret_miss },
		{ "code lines", w->ilines, want->ilines },
		{ "data lines", w->dlines, want->dlines },
		{ "sites", w->isites, want->isites },
		{ "targets", w->itargets, want->itargets },
		{ "max targets", w->max_targets, want->max_targets },
	};
	size_t off = 0;
	int ok = 1;

	msg[0] = 0;
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		if (f[i].want == ANY)
			continue;
		ok &= f[i].got == (uint64_t)f[i].want;
		off += snprintf(msg + off, size - off, "%s %s %" PRIu64, off ? "," : "",
				f[i].name, f[i].got);
		if (f[i].got != (uint64_t)f[i].want)
			off += snprintf(msg + off, size - off, " (want %" PRId64 ")", f[i].want);
	}
	return ok;
}

static void check_hazards(const char *what, void (*hz)(unsigned int, void *), unsigned int n,
			  void *arg, struct hz_want want)
{
	struct insn_window w;
	char msg[512];
	int agree, ok;

	if (undisturbed(what, hz, n, arg, &w, &agree))
		return;
	ok = hz_compare(&w, &want, msg, sizeof(msg));
	check(ok && agree && !w.full, "hazards, %s, N=%u:%s%s%s", what, n, msg,
	      agree ? "" : "; undisturbed windows disagree", w.full ? "; a set overflowed" : "");
}

/* Loads of more lines than the plugin's data-line set holds: it says it overflowed. */
static void check_overflow(char *buf)
{
	enum { LINES_MAX = 1 << 17, N = LINES_MAX + 1000 };
	struct insn_window w;

	hz_loads(N, buf);
	if (insn_read(&w)) {
		check(0, "hazards, overflow: a record");
		return;
	}
	check(w.dlines == LINES_MAX && (w.full & 2),
	      "hazards, overflow: loads of %d lines report %" PRIu64 " data lines (the set "
	      "holds %d) and the overflow bit (full %u)", N, w.dlines, LINES_MAX, w.full);
}

static int hazard_checks(void)
{
	enum { N = 1000, LINES = 100, BIG = (1 << 17) + 1000 };
	struct insn_window probe;
	struct hz_want w;
	char *buf = aligned_alloc(4096, (size_t)(BIG + 2) * 64);

	if (!buf) {
		check(0, "hazards: a buffer");
		return 1;
	}
	memset(buf, 1, (size_t)(BIG + 2) * 64);	/* no page faults inside the windows */
	hz_tls = (void *)hz_repret;
	hz_icall(1, NULL);
	if (insn_read(&probe) || !probe.hazards) {
		check(0, "hazards: the plugin reports them (boot with `vm/run --insn-hazards`)");
		free(buf);
		return 1;
	}
	w = (struct hz_want){ N, N, N, 0, ANY, ANY, 1, 1, 1 };
	check_hazards("call *%rax", hz_icall, N, NULL, w);
	w = (struct hz_want){ 8 * 100, 5 * 100, 5 * 100, 0, ANY, ANY, 8, 8, 1 };
	check_hazards("8 encodings", hz_encodings, 100, NULL, w);
	w = (struct hz_want){ N, 0, 0, 0, ANY, 0, 1, 1, 1 };
	check_hazards("jmp *%rax", (void (*)(unsigned int, void *))indirect_loop, N, NULL, w);
	w = (struct hz_want){ 0, 2 * N, 2 * N, 0, ANY, ANY, 0, 0, 0 };
	check_hazards("balanced calls", hz_balanced, N, NULL, w);
	w = (struct hz_want){ 0, 3 * N, 2 * N, 2 * N, ANY, ANY, 0, 0, 0 };
	check_hazards("a skipped return", hz_skipped, N, NULL, w);
	w = (struct hz_want){ 0, 0, N, N, ANY, ANY, 0, 0, 0 };
	check_hazards("push+ret", hz_pushret, N, NULL, w);
	w = (struct hz_want){ 0, 20 * 100, 20 * 100, 4 * 100, ANY, ANY, 0, 0, 0 };
	check_hazards("20 calls deep", hz_deep, 100, NULL, w);
	w = (struct hz_want){ 2 * N, 4 * N, 4 * N, 2 * N, ANY, ANY, 2, 2, 1 };
	check_hazards("retpolines", hz_retpoline, N, NULL, w);
	for (unsigned long t = 1; t <= 4; t *= 2) {
		char what[64];

		snprintf(what, sizeof(what), "one site over %lu target%s", t, t > 1 ? "s" : "");
		w = (struct hz_want){ N, N, N, 0, ANY, ANY, 1, t, t };
		check_hazards(what, hz_cycle, N, (void *)(t - 1), w);
	}
	w = (struct hz_want){ 0, 0, 0, 0, ANY, LINES, 0, 0, 0 };
	check_hazards("loads of 100 lines", hz_loads, LINES, buf, w);
	w.dlines = LINES + 1;
	check_hazards("loads across 100 line ends", hz_loads, LINES, buf + 60, w);
	w.dlines = LINES;
	check_hazards("stores to 100 lines", hz_stores, LINES, buf, w);
	w = (struct hz_want){ 0, 0, 0, 0, 5, 0, 0, 0, 0 };
	check_hazards("code on 5 lines", hz_code_lines, N, NULL, w);
	check_overflow(buf);
	free(buf);
	printf("%s\n", check_failures ? "FAIL" : "ok");
	return check_failures ? 1 : 0;
}

/* Runs this program at its unrandomized address (see the jump cache above); 1 on failure. */
static int fixed_address(char **argv)
{
	int persona = personality(0xffffffff);

	if (persona != -1 && (persona & ADDR_NO_RANDOMIZE))
		return 0;
	if (persona == -1 || personality(persona | ADDR_NO_RANDOMIZE) == -1) {
		check(0, "personality(ADDR_NO_RANDOMIZE): %s", strerror(errno));
		return 1;
	}
	execv("/proc/self/exe", argv);
	check(0, "re-executing /proc/self/exe without ASLR: %s", strerror(errno));
	return 1;
}

int main(int argc, char **argv)
{
	/*
	 * The largest loops stay well under a tick period with the hazard callbacks on a busy
	 * host: a CI run of 20,000 iterations (40,002 instructions) saw a tick in all 61 of
	 * its windows. Each crossing iteration also goes through QEMU's main loop.
	 */
	static const unsigned int sizes[] = { 1, 10, 1000, 5000 };
	static const unsigned int cross_sizes[] = { 1, 10, 1000, 5000 };

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 2 || (argc == 2 && strcmp(argv[1], "--hazards"))) {
		fprintf(stderr, "usage: insn-check [--hazards]\n");
		return 2;
	}
	if (fixed_address(argv) || insn_open() || insn_pin())
		return 1;
	if (argc == 2)
		return hazard_checks();
	if (((uintptr_t)cross_mov & 4095) != 4094) {
		check(0, "the crossing mov sits 2 bytes before a page end (offset %#lx)",
		      (unsigned long)((uintptr_t)cross_mov & 4095));
		return 1;
	}
	if ((((uintptr_t)cross_dec >> 12) & 0x7ff) == 0x7ff) {
		check(0, "the cross loop's blocks have entries of their own in QEMU's jump cache "
		      "(cross_dec at %p)", (void *)cross_dec);
		return 1;
	}
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		check_size("loop", simple_loop, sizes[i], 2 + 2ull * sizes[i]);
	for (size_t i = 0; i < sizeof(cross_sizes) / sizeof(cross_sizes[0]); i++)
		check_size("page-crossing loop", crossing_loop, cross_sizes[i],
			   3 + 4ull * cross_sizes[i]);
	check_profile(1000);
	check_dispatch("loop", simple_loop, 0, 0, 0);
	check_dispatch("indirect loop", jumping_loop, 1, 0, 0);
	check_dispatch("page-crossing loop", crossing_loop, 2, 0, 1);
	check_dispatch("colliding loop", colliding_jumps, 2, 2, 0);
	if (!move_cross_loop(0x7ff000))
		check_dispatch("page-crossing loop on page 0x7ff", moved_crossing_loop, 2, 2, 1);
	printf("%s\n", check_failures ? "FAIL" : "ok");
	return check_failures ? 1 : 0;
}
