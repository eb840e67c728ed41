// SPDX-License-Identifier: GPL-2.0
/*
 * Calls known kernel functions a known number of times, for the `bpfmux trace` checks:
 *
 *   trigger CALL N [CALL N]...
 *
 * CALL getpgid: getpgid(0) (__x64_sys_getpgid); getpriority: getpriority(PRIO_PROCESS, 0)
 * (__x64_sys_getpriority); sigaction: sigaction(SIGUSR1, NULL, &old), a query
 * (__x64_sys_rt_sigaction), which /bin/sh also makes at startup (dash: 7 times), so a shell
 * started in front of the command shows in the count; openat-missing: openat(AT_FDCWD,
 * MISSING, O_RDONLY) of a path that does not exist (__x64_sys_openat fails with -ENOENT);
 * getpgid-errors: getpgid(0) like getpgid, then prints "failed K errno E" (K calls failed,
 * E the errno of the last failure, 0 if none) for the error-injection checks;
 * getpgid-missing: getpgid(MISSING_PID) of a process that cannot exist (__x64_sys_getpgid
 * fails with -ESRCH because find_task_by_vpid returns NULL).
 * Nothing else in this program, its dynamic loader or libc's startup makes those system
 * calls, or an openat that fails.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>

#define MISSING "/nonexistent-bpfmux-trigger/file"
/* Above PID_MAX_LIMIT (4M): no process has it, whatever pid_max says. */
#define MISSING_PID 0x7fffffff

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
		} else if (!strcmp(argv[i], "getpgid-errors")) {
			long failed = 0;
			int last = 0;

			for (long k = 0; k < n; k++) {
				if (syscall(SYS_getpgid, 0) < 0) {
					failed++;
					last = errno;
				}
			}
			printf("failed %ld errno %d\n", failed, last);
		} else if (!strcmp(argv[i], "openat-missing")) {
			for (long k = 0; k < n; k++) {
				if (openat(AT_FDCWD, MISSING, O_RDONLY) >= 0) {
					fprintf(stderr, "trigger: %s exists\n", MISSING);
					return 1;
				}
			}
		} else if (!strcmp(argv[i], "getpgid-missing")) {
			for (long k = 0; k < n; k++) {
				if (syscall(SYS_getpgid, MISSING_PID) >= 0 || errno != ESRCH) {
					fprintf(stderr, "trigger: getpgid(%d) did not fail with ESRCH\n",
						MISSING_PID);
					return 1;
				}
			}
		} else if (!strcmp(argv[i], "sigaction")) {
			struct sigaction old;

			for (long k = 0; k < n; k++)
				sigaction(SIGUSR1, NULL, &old);
		} else {
			fprintf(stderr, "trigger: unknown call %s\n", argv[i]);
			return 2;
		}
	}
	if (argc < 3 || argc % 2 == 0) {
		fprintf(stderr, "usage: trigger getpgid|getpgid-errors|getpgid-missing|getpriority|"
			"sigaction|openat-missing N ...\n");
		return 2;
	}
	return 0;
}
