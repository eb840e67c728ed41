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
 * openat-other: the same with MISSING_OTHER, another missing path in the same directory;
 * getpgid-errors: getpgid(0) like getpgid, then prints "failed K errno E" (K calls failed,
 * E the errno of the last failure, 0 if none) for the error-injection checks;
 * getpgid-self-errors: the same with getpgid(getpid()), which asks the LSM hook
 * security_task_getpgid (getpgid(0) does not);
 * getpgid-missing: getpgid(MISSING_PID) of a process that cannot exist (__x64_sys_getpgid
 * fails with -ESRCH because find_task_by_vpid returns NULL); getpgid-negative: getpgid(-1)
 * (find_task_by_vpid(-1) returns NULL too: -ESRCH); getpgid-self: getpgid(getpid()), which
 * succeeds through find_task_by_vpid (the pid is read once, before the calls);
 * nanosleep0: nanosleep of 0 ns, nanosleep200ms: nanosleep of 200 ms (__x64_sys_nanosleep,
 * a known latency); mmap-self: mmap(NULL, 3 pages, PROT_READ, MAP_PRIVATE, /proc/self/exe,
 * page 5) and munmap (do_mmap: len 12288 with 4 KiB pages, pgoff 5 on the stack, its 7th
 * argument); targs: write(/proc/bpfmux_targs, "user-string" and its NUL), which makes the
 * test module targs_kmod call its functions with known arguments once each;
 * close-bad: close(BAD_FD), a descriptor that cannot be open (__x64_sys_close fails with
 * -EBADF); openat-timed and close-timed: openat-missing and close-bad, each call printing
 * "openat START END" or "close START END" (CLOCK_MONOTONIC nanoseconds, the clock of
 * bpfmux's chain times) on its own line; pause: prints "paused" and waits for a line on
 * standard input (or its end), N times.
 * Nothing else in this program, its dynamic loader or libc's startup makes those system
 * calls, or an openat that fails.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#define MISSING "/nonexistent-bpfmux-trigger/file"
#define MISSING_OTHER "/nonexistent-bpfmux-trigger/other"
/* Above PID_MAX_LIMIT (4M): no process has it, whatever pid_max says. */
#define MISSING_PID 0x7fffffff
/* Above the kernel's NR_OPEN (1M): no descriptor has it, whatever the limits say. */
#define BAD_FD 0x7ffffff0

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* A call that must fail with `want`, N times; with `timed`, each one's START END. */
static int fail_n(const char *what, long n, int want, int timed, int (*call)(void))
{
	for (long k = 0; k < n; k++) {
		long long start = now_ns();
		int r = call();
		int e = errno;
		long long end = now_ns();

		if (r >= 0 || e != want) {
			fprintf(stderr, "trigger: %s did not fail with errno %d (%d, errno %d)\n",
				what, want, r, e);
			return 1;
		}
		if (timed)
			printf("%s %lld %lld\n", what, start, end);
	}
	fflush(stdout);
	return 0;
}

static int openat_missing(void)
{
	return openat(AT_FDCWD, MISSING, O_RDONLY);
}

static int close_bad(void)
{
	return close(BAD_FD);
}

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
		} else if (!strcmp(argv[i], "getpgid-errors") ||
			   !strcmp(argv[i], "getpgid-self-errors")) {
			pid_t pid = strcmp(argv[i], "getpgid-errors") ? getpid() : 0;
			long failed = 0;
			int last = 0;

			for (long k = 0; k < n; k++) {
				if (syscall(SYS_getpgid, pid) < 0) {
					failed++;
					last = errno;
				}
			}
			printf("failed %ld errno %d\n", failed, last);
		} else if (!strcmp(argv[i], "openat-missing") || !strcmp(argv[i], "openat-other")) {
			const char *path = strcmp(argv[i], "openat-other") ? MISSING : MISSING_OTHER;

			for (long k = 0; k < n; k++) {
				if (openat(AT_FDCWD, path, O_RDONLY) >= 0) {
					fprintf(stderr, "trigger: %s exists\n", path);
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
		} else if (!strcmp(argv[i], "getpgid-negative")) {
			for (long k = 0; k < n; k++) {
				if (syscall(SYS_getpgid, -1) >= 0 || errno != ESRCH) {
					fprintf(stderr, "trigger: getpgid(-1) did not fail with ESRCH\n");
					return 1;
				}
			}
		} else if (!strcmp(argv[i], "getpgid-self")) {
			long self = getpid();

			for (long k = 0; k < n; k++) {
				if (syscall(SYS_getpgid, self) < 0) {
					fprintf(stderr, "trigger: getpgid(%ld) failed\n", self);
					return 1;
				}
			}
		} else if (!strcmp(argv[i], "nanosleep0") || !strcmp(argv[i], "nanosleep200ms")) {
			struct timespec ts = { 0, strcmp(argv[i], "nanosleep0") ? 200000000L : 0 };

			for (long k = 0; k < n; k++)
				syscall(SYS_nanosleep, &ts, NULL);
		} else if (!strcmp(argv[i], "mmap-self")) {
			long pg = sysconf(_SC_PAGESIZE);
			int fd = open("/proc/self/exe", O_RDONLY);

			for (long k = 0; k < n && fd >= 0; k++) {
				void *p = mmap(NULL, 3 * pg, PROT_READ, MAP_PRIVATE, fd, 5 * pg);

				if (p == MAP_FAILED) {
					perror("trigger: mmap");
					return 1;
				}
				munmap(p, 3 * pg);
			}
			if (fd < 0) {
				perror("trigger: /proc/self/exe");
				return 1;
			}
			close(fd);
		} else if (!strcmp(argv[i], "targs")) {
			static const char user[] = "user-string";
			int fd = open("/proc/bpfmux_targs", O_WRONLY);

			if (fd < 0) {
				perror("trigger: /proc/bpfmux_targs (is targs_kmod loaded?)");
				return 1;
			}
			for (long k = 0; k < n; k++) {
				if (write(fd, user, sizeof(user)) != sizeof(user)) {
					perror("trigger: write /proc/bpfmux_targs");
					return 1;
				}
			}
			close(fd);
		} else if (!strcmp(argv[i], "close-bad") || !strcmp(argv[i], "close-timed")) {
			if (fail_n("close", n, EBADF, !strcmp(argv[i], "close-timed"), close_bad))
				return 1;
		} else if (!strcmp(argv[i], "openat-timed")) {
			if (fail_n("openat", n, ENOENT, 1, openat_missing))
				return 1;
		} else if (!strcmp(argv[i], "pause")) {
			char line[64];

			for (long k = 0; k < n; k++) {
				printf("paused\n");
				fflush(stdout);
				if (!fgets(line, sizeof(line), stdin))
					break;
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
		fprintf(stderr, "usage: trigger getpgid|getpgid-errors|getpgid-missing|"
			"getpgid-negative|getpgid-self|getpgid-self-errors|getpriority|sigaction|"
			"openat-missing|openat-other|nanosleep0|nanosleep200ms|mmap-self|targs|"
			"close-bad|close-timed|openat-timed|pause N ...\n");
		return 2;
	}
	return 0;
}
