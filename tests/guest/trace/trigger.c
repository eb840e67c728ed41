// SPDX-License-Identifier: GPL-2.0
/*
 * Calls known kernel functions a known number of times, for the `bpfmux trace` checks:
 *
 *   trigger getpgid N [getpriority M]
 *
 * getpgid(0) N times (__x64_sys_getpgid), then getpriority(PRIO_PROCESS, 0) M times
 * (__x64_sys_getpriority). Nothing else in this program makes those system calls.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>

int main(int argc, char **argv)
{
	for (int i = 1; i + 1 < argc; i += 2) {
		long n = strtol(argv[i + 1], NULL, 10);

		if (!strcmp(argv[i], "getpgid")) {
			for (long k = 0; k < n; k++)
				syscall(SYS_getpgid, 0);
		} else if (!strcmp(argv[i], "getpriority")) {
			for (long k = 0; k < n; k++)
				syscall(SYS_getpriority, 0 /* PRIO_PROCESS */, 0);
		} else {
			fprintf(stderr, "trigger: unknown call %s\n", argv[i]);
			return 2;
		}
	}
	if (argc < 3 || argc % 2 == 0) {
		fprintf(stderr, "usage: trigger getpgid N [getpriority M]\n");
		return 2;
	}
	return 0;
}
