// SPDX-License-Identifier: GPL-2.0
/*
 * Guest instructions per getpgid(0) call (__x64_sys_getpgid), counted with the QEMU
 * plugin (vm/run --insn): the work that bench/trace-filter/guest.py runs untraced and
 * under `bpfmux trace -c` with and without a filter, so the difference between rows is
 * what tracing and the filter cost per call.
 *
 *   trace-filter [WINDOWS]
 *
 * Prints one line: "insns_per_call X clear C hits H windows W": X from insn_per_rep()
 * over windows of CALLS and 2*CALLS calls (fixed costs cancel), C 1 when both window
 * sizes had a clear most frequent count, H/W the windows that counted it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>
#include "lib/insn.h"

/* Calls per repetition, as bench/trigger counts them (INSN_CALLS): windows short enough
 * that most of them see no timer tick, so their count is the most frequent one. */
#define CALLS 25

static int work(void *arg, unsigned int reps)
{
	(void)arg;
	for (unsigned int r = 0; r < reps; r++)
		for (int i = 0; i < CALLS; i++)
			syscall(SYS_getpgid, 0);
	return 0;
}

int main(int argc, char **argv)
{
	int windows = argc > 1 ? atoi(argv[1]) : 15;
	struct insn_estimate e;

	if (windows < 3) {
		fprintf(stderr, "usage: trace-filter [WINDOWS >= 3]\n");
		return 2;
	}
	if (insn_open() || insn_pin())
		return 1;
	/* warm: first-call page faults and lazy setup stay out of the windows */
	work(NULL, 2);
	if (insn_per_rep(work, NULL, 1, 2, windows, &e))
		return 1;
	printf("insns_per_call %.1f clear %d hits %d windows %d\n", e.per_rep / CALLS, e.clear,
	       e.lo.hits + e.hi.hits, e.lo.samples + e.hi.samples);
	return 0;
}
