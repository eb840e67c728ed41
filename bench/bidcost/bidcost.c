// SPDX-License-Identifier: GPL-2.0
/*
 * What the trace programs spend on a process's first user stack, counted in guest
 * instructions (vm/run --insn): bpfmux trace --stacks keeps each process's user stack the
 * first time it sees it also as build IDs and file offsets (BPF_F_STACK_BUILD_ID), so that
 * a process gone before its stack is read can still be named.
 *
 * usage: bidcost CHILDREN
 *
 * Forks CHILDREN children one after the other. Each pins itself, then counts two getpgid()
 * calls made from the same call site (the same user stack): the first is its process's
 * first stack (the programs add it to their maps, and keep the build-ID stack), the second
 * a repeat. Prints "child N: first F second S" per child, then "prof N SYMBOL COUNT":
 * where the second call's instructions went (a profile window), 40 symbols at most; a
 * run under another bpfmux binary, or untraced, gives the other terms of the difference.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/insn.h"

static volatile int calls = 2;

/* One call site for both calls: the same user stack. @profile: a profile window. */
static __attribute__((noinline)) long counted_getpgid(struct insn_window *w, int profile)
{
	long r;

	if (profile)
		INSN_BEGIN_PROFILE();
	else
		INSN_BEGIN();
	r = syscall(SYS_getpgid, 0);
	INSN_END();
	if (insn_read(w))
		return -1;
	return r;
}

static int child(int n)
{
	struct insn_window w[2] = {};
	struct insn_prof prof;

	if (insn_open() || insn_pin())
		return 1;
	/*
	 * A loop the compiler cannot unroll (its bound is volatile), so that both calls
	 * return to the same address: one user stack.
	 */
	for (int k = 0; k < calls; k++)
		if (counted_getpgid(&w[k], k == 1) < 0)
			return 1;
	printf("child %d: first %llu second %llu\n", n, (unsigned long long)w[0].count,
	       (unsigned long long)w[1].count);
	/* Where the second call's instructions went, by kernel symbol. */
	if (!insn_fold(&w[1], &prof)) {
		for (size_t i = 0; i < prof.n && i < 40; i++)
			printf("prof %d %s %lld\n", n, prof.sym[i].name,
			       (long long)prof.sym[i].count);
		insn_prof_free(&prof);
	}
	insn_window_free(&w[1]);
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	int children = argc > 1 ? atoi(argv[1]) : 0;

	if (children <= 0) {
		fprintf(stderr, "usage: bidcost CHILDREN\n");
		return 2;
	}
	for (int i = 0; i < children; i++) {
		int status;
		pid_t p = fork();

		if (p < 0) {
			perror("fork");
			return 1;
		}
		if (p == 0)
			_exit(child(i));
		if (waitpid(p, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
			fprintf(stderr, "bidcost: child %d failed\n", i);
			return 1;
		}
	}
	return 0;
}
