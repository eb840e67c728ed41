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

/* Windows of one loop size: every count, then the smallest and the most frequent. */
static void check_size(const char *what, int (*loop)(void *, unsigned int), unsigned int n,
		       uint64_t want)
{
	enum { WINDOWS = 11 };
	uint64_t c[WINDOWS], min = UINT64_MAX, mode = 0;
	int best = 0;

	for (int i = 0; i < WINDOWS; i++) {
		struct insn_window w;

		loop(NULL, n);
		if (insn_read(&w)) {
			check(0, "%s, N=%u: a record for every window", what, n);
			return;
		}
		c[i] = w.count;
		if (c[i] < min)
			min = c[i];
	}
	for (int i = 0; i < WINDOWS; i++) {
		int k = 0;

		for (int j = 0; j < WINDOWS; j++)
			k += c[j] == c[i];
		if (k > best || (k == best && c[i] < mode))
			best = k, mode = c[i];
	}
	check(min == want && mode == want,
	      "%s, N=%u: %" PRIu64 " instructions exactly (smallest %" PRIu64 ", most frequent %"
	      PRIu64 " in %d of %d windows)", what, n, want, min, mode, best, WINDOWS);
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
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		check_size("page-crossing loop", crossing_loop, sizes[i], 3 + 4ull * sizes[i]);
	check_profile(1000);
	printf("%s\n", check_failures ? "FAIL" : "ok");
	return check_failures ? 1 : 0;
}
