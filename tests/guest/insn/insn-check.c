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
 * A timer tick inside a window adds its handler's instructions, so each size runs
 * several windows: the smallest and the most frequent count must both be the exact one.
 * Run under `vm/run --insn -- build/guest/insn-check`.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
 * slow host lets more ticks into each window), up to MAX_WINDOWS.
 */
static void check_size(const char *what, int (*loop)(void *, unsigned int), unsigned int n,
		       uint64_t want)
{
	enum { MIN_WINDOWS = 11, MAX_WINDOWS = 61 };
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
	check(min == want && mode == want,
	      "%s, N=%u: %" PRIu64 " instructions exactly (smallest %" PRIu64 ", most frequent %"
	      PRIu64 " in %d of %d windows)", what, n, want, min, mode, best, nw);
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

int main(void)
{
	static const unsigned int sizes[] = { 1, 10, 1000, 20000 };
	/*
	 * Each crossing iteration goes through QEMU's main loop: 20,000 of them take about a
	 * millisecond, a tick period, so that size would rarely see an undisturbed window.
	 */
	static const unsigned int cross_sizes[] = { 1, 10, 1000, 5000 };

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (insn_open() || insn_pin())
		return 1;
	if (((uintptr_t)cross_mov & 4095) != 4094) {
		check(0, "the crossing mov sits 2 bytes before a page end (offset %#lx)",
		      (unsigned long)((uintptr_t)cross_mov & 4095));
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
	printf("%s\n", check_failures ? "FAIL" : "ok");
	return check_failures ? 1 : 0;
}
