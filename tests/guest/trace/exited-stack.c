// SPDX-License-Identifier: GPL-2.0
/*
 * A known user call chain into a traced system call, then an exit, for the checks of
 * `bpfmux trace --stacks` on processes that are gone by the end of the run (user stacks
 * normalized as they are captured; check.py exited-stacks):
 *
 *   exited-stack [-w] N LINGER_MS
 *   exited-stack spawn K N LINGER_MS
 *
 * main -> exited_a -> exited_b, which makes the getpgid(0) system call itself (the
 * `syscall` instruction is in exited_b: no libc wrapper without a frame pointer stands
 * between the kernel and it), N times; then main -> exited_c -> exited_b once more (a
 * second user stack in the same mappings); then the program sleeps LINGER_MS and exits.
 * With -w it first prints "exited-stack PID", its pid, and waits for a line on standard
 * input (a tracer of that pid attaches meanwhile); without, it prints nothing.
 * exited_a, exited_b, exited_c and main keep frame pointers and are not inlined, cloned
 * or tail-called, so a frame-pointer walk from the system call reads exited_b, exited_a
 * (or exited_c), main, then libc's caller of main.
 *
 * spawn: K times, forks and execs itself as `exited-stack N LINGER_MS` and waits for it:
 * a workload that forks and execs, for the capture-cost benchmark.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#define CHAIN __attribute__((noipa, optimize("no-omit-frame-pointer", "no-optimize-sibling-calls")))

CHAIN long exited_b(long x)
{
	long ret;

	/* A leaf: without this, gcc leaves out its frame even with no-omit-frame-pointer, and
	 * the walk would go from it straight to main. */
	__asm__ volatile("" : : "r"(__builtin_frame_address(0)));
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"((long)SYS_getpgid), "D"(0L)
			 : "rcx", "r11", "memory");
	return ret + x;
}

CHAIN long exited_a(long x)
{
	return exited_b(x + 1) * 3;
}

CHAIN long exited_c(long x)
{
	return exited_b(x + 2) * 5;
}

static int usage(void)
{
	fprintf(stderr, "usage: exited-stack [-w] N LINGER_MS | exited-stack spawn K N LINGER_MS\n");
	return 2;
}

static int spawn(char *self, long k, char *n, char *linger)
{
	for (long i = 0; i < k; i++) {
		pid_t pid = fork();
		int st;

		if (pid < 0) {
			perror("exited-stack: fork");
			return 1;
		}
		if (pid == 0) {
			execl(self, "exited-stack", n, linger, (char *)NULL);
			perror("exited-stack: exec");
			_exit(127);
		}
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "exited-stack: child %d failed\n", (int)pid);
			return 1;
		}
	}
	return 0;
}

CHAIN int main(int argc, char **argv)
{
	long n, linger, sum = 0;
	char line[16];
	int wait_line = argc > 1 && !strcmp(argv[1], "-w");

	if (argc == 5 && !strcmp(argv[1], "spawn")) {
		/* The file's own name: exec'd as /proc/self/exe a child's comm would be "exe". */
		char self[4096];
		ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);

		if (len <= 0)
			return 1;
		self[len] = '\0';
		return spawn(self, strtol(argv[2], NULL, 10), argv[3], argv[4]);
	}
	if (argc != 3 + wait_line)
		return usage();
	n = strtol(argv[1 + wait_line], NULL, 10);
	linger = strtol(argv[2 + wait_line], NULL, 10);
	if (wait_line) {
		printf("exited-stack %d\n", (int)getpid());
		fflush(stdout);
		if (!fgets(line, sizeof(line), stdin))
			return 1;
	}
	for (long i = 0; i < n; i++)
		sum += exited_a(i);
	sum += exited_c(n);
	if (linger > 0) {
		struct timespec ts = { linger / 1000, (linger % 1000) * 1000000 };

		nanosleep(&ts, NULL);
	}
	return sum == 0x7fffffff;
}
