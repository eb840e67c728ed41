// SPDX-License-Identifier: GPL-2.0
/*
 * ipmodify-race LOOPS [PKIND [XKIND]]: the reproducer of a crash uapi-fuzz found
 * (bench/results/raw/uapi-fuzz-2026-11-28/README.md; suite part 27).
 * A thread calls getpgid without end; each loop, on __x64_sys_getpgid:
 *
 *   1. a global fentry.multi link G;
 *   2. gtramp_kmod.ko loads: an IPMODIFY ftrace user (like livepatch) on the function;
 *   3. a per-function PKIND.multi link P (default fexit; "none": no P);
 *   4. the module unloads in another thread while this one attaches a global
 *      XKIND.multi link X (default fexit) again and again until it is not refused with
 *      EBUSY any more: it attaches the first moment the module lets it;
 *   5. 20 ms of calls; X, P and G closed.
 *
 * On the 53-patch series as of 2026-11-28 03:00 UTC a call of getpgid then jumped to
 * address 0 from bpf_global_caller_1, or into freed trampoline text (an int3 oops, a
 * panic), within the first loops when P and X were fexit, fmod_ret or fsession: X's new
 * metadata chained to P's image from before X's attach rebuilt P for the module's
 * departure (the image that calls the function through the stack, which then called
 * into the global trampoline). Fixed in patch "bpf: Keep livepatch and the global
 * trampoline from bypassing each other".
 * Checks: every step answers as documented, and the calling thread kept coming back.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "../lib/check.h"
#include "../lib/counter.h"
#include "../lib/kmod.h"

#ifndef BPFMUX_HAVE_GLOBAL_TRAMP
int main(void)
{
	fprintf(stderr, "ipmodify-race: built without the series' UAPI; run 'make kernel'\n");
	return 1;
}
#else

#define KMOD_NAME "gtramp_kmod"

static const struct {
	const char *name, *obj, *prog;
	__u32 attach;
} kinds[] = {
	{ "fentry", "gtramp.bpf.o", "fentry_multi", BPF_TRACE_FENTRY_MULTI },
	{ "fexit", "gexit.bpf.o", "fexit_multi", BPF_TRACE_FEXIT_MULTI },
	{ "fmod_ret", "gexit.bpf.o", "fmodret_multi", BPF_MODIFY_RETURN_MULTI },
	{ "fsession", "gexit.bpf.o", "session_multi", BPF_TRACE_FSESSION_MULTI },
};
#define NR_KINDS 4

static char dir[4096];
static __u32 pgid_id;
static double seen;	/* when the caller last came back */

static int kind_of(const char *name)
{
	for (int i = 0; i < NR_KINDS; i++)
		if (!strcmp(name, kinds[i].name))
			return i;
	return -1;
}

/* A program of kind @k: its fd, or -1 with a message. */
static int load(int k)
{
	struct bpf_program *prog;
	char path[4200];

	snprintf(path, sizeof(path), "%s/%s", dir, kinds[k].obj);
	return counter_load(path, kinds[k].prog, getpid(), &prog) ? bpf_program__fd(prog) : -1;
}

/* A link of program @fd (kind @k) on getpgid: its fd, or -errno. */
static int attach(int fd, int k, int global)
{
	LIBBPF_OPTS(bpf_link_create_opts, opts,
		    .flags = global ? BPF_F_TRACING_MULTI_GLOBAL : 0,
		    .tracing_multi = { .ids = &pgid_id, .cnt = 1 });
	int link = bpf_link_create(fd, 0, kinds[k].attach, &opts);

	return link < 0 ? -errno : link;
}

static void *caller(void *arg)
{
	for (;;) {
		double t = now();

		syscall(SYS_getpgid, 0);
		__atomic_store(&seen, &t, __ATOMIC_RELAXED);
	}
	return NULL;
}

static void *unloader(void *arg)
{
	*(int *)arg = kmod_remove(KMOD_NAME);
	return NULL;
}

int main(int argc, char **argv)
{
	const int loops = argc > 1 ? atoi(argv[1]) : 40;
	const int pk = argc > 2 ? kind_of(argv[2]) : 1, xk = argc > 3 ? kind_of(argv[3]) : 1;
	long bad_g = 0, bad_m = 0, bad_p = 0, bad_x = 0, x_ok = 0, late = 0;
	int gfd, pfd = -1, xfd, g, p, x, err, uerr;
	char params[32], kmod[4200];
	struct btf *btf;
	pthread_t tid, ut;
	double last;

	if (loops <= 0 || (argc > 2 && strcmp(argv[2], "none") && pk < 0) || xk < 0) {
		fprintf(stderr, "usage: %s LOOPS [fentry|fexit|fmod_ret|fsession|none [KIND]]\n",
			argv[0]);
		return 2;
	}
	prog_dir(dir, sizeof(dir) - 64, argv[0]);
	kmod_file(kmod, sizeof(kmod), dir, KMOD_NAME);
	snprintf(params, sizeof(params), "tgid=%d", getpid());
	libbpf_set_strict_mode(LIBBPF_STRICT_ALL);
	btf = btf__load_vmlinux_btf();
	pgid_id = btf ? btf__find_by_name_kind(btf, "__x64_sys_getpgid", BTF_KIND_FUNC) : 0;
	gfd = load(0);
	xfd = load(xk);
	if (pk >= 0)
		pfd = load(pk);
	check((__s32)pgid_id > 0 && gfd >= 0 && xfd >= 0 && (pk < 0 || pfd >= 0) &&
	      !kmod_is_loaded(KMOD_NAME), "getpgid in BTF, programs load, %s not loaded",
	      KMOD_NAME);
	if (check_failures)
		return 1;
	last = now();
	__atomic_store(&seen, &last, __ATOMIC_RELAXED);
	pthread_create(&tid, NULL, caller, NULL);
	for (int l = 0; l < loops; l++) {
		g = attach(gfd, 0, 1);
		bad_g += g < 0;
		err = kmod_insert(kmod, params);
		bad_m += !!err;
		p = pk >= 0 ? attach(pfd, pk, 0) : -1;
		bad_p += pk >= 0 && p < 0;
		pthread_create(&ut, NULL, unloader, &uerr);
		/* EBUSY while the module is there: X attaches the first moment it may */
		for (int tries = 0; (x = attach(xfd, xk, 1)) == -EBUSY && tries < 100000; tries++)
			;
		pthread_join(ut, NULL);
		bad_m += !!uerr;
		bad_x += x < 0;
		x_ok += x >= 0;
		usleep(20000);
		__atomic_load(&seen, &last, __ATOMIC_RELAXED);
		late += now() - last > 2;
		for (int *fd = (int[]){ x, p, g }, i = 0; i < 3; i++)
			if (fd[i] >= 0)
				close(fd[i]);
	}
	__atomic_load(&seen, &last, __ATOMIC_RELAXED);
	printf("# %d loops: global %s attached %ld times once the module left\n", loops,
	       kinds[xk].name, x_ok);
	check(!bad_g && !bad_m, "global fentry.multi attached and the module came and went every time (%ld, %ld failures)",
	      bad_g, bad_m);
	check(!bad_p, "per-function %s.multi attached next to the module every time (%ld refused)",
	      pk >= 0 ? kinds[pk].name : "(none)", bad_p);
	check(!bad_x, "global %s.multi attached once the module left, every time (%ld refused)",
	      kinds[xk].name, bad_x);
	check(!late && now() - last < 2,
	      "the thread calling getpgid kept coming back (%ld loops late, last %.1f s ago)",
	      late, now() - last);
	return check_failures ? 1 : 0;
}
#endif /* BPFMUX_HAVE_GLOBAL_TRAMP */
