// SPDX-License-Identifier: GPL-2.0
/*
 * Guest tests of fexit.multi, fmod_ret.multi and fsession.multi on the series' global
 * trampoline, where the trampoline calls the traced function itself ("origin call").
 *
 *   gexit fexit N      fexit sees the exact return value of every call
 *   gexit fmodret N    fmod_ret.multi makes getpgid/getpriority fail with EPERM for this
 *                      process only, then return a value above 2^32, one whose low 32
 *                      bits are 0 (still non-zero: the call is skipped) and -EINVAL, each
 *                      in full, and the override can be lifted: alone, then with
 *                      fexit.multi, which sees each value; the same with the per-function
 *                      backend
 *   gexit mmap         fexit on do_mmap (9 arguments, 3 on the stack): the call works and
 *                      fexit sees every argument and the returned address; with a plain
 *                      fentry on do_mmap too (both orders), which the origin call enters
 *                      through its per-function trampoline, both see the same arguments
 *   gexit sleep        detach while threads sleep in a traced function: they return
 *                      normally; their exits run the detached fexit program at most
 *                      until its metadata is retired, a grace period after the detach
 *                      (as a per-function trampoline stops calling fexit programs of
 *                      an image it replaced; pinned-detach checks that it stops)
 *   gexit rollback     fmod_ret.multi including a function that is not error-injectable
 *                      is refused as a whole
 *   gexit coexist N    fexit (per-function trampoline) and fexit.multi (global) on the
 *                      same function, both orders, both see every return value
 *   gexit skipchain N  a global fmod_ret.multi program that skips getpgid, alone and
 *                      with a global fexit.multi program, next to a per-function fentry,
 *                      fexit, or both, attached before or after it: the per-function
 *                      programs run for every skipped call and their fexit sees the value
 *                      fmod_ret chose, without the function's body, as on one trampoline
 *                      with all of them; with the override lifted they see the real value
 *   gexit kinds N      a function with only fexit programs is entered through its exit
 *                      stub (enabled_functions shows where its site goes), moves to its
 *                      common stub when an fmod_ret.multi program joins and back when it
 *                      leaves; fexit sees every call and return value at each step
 *   gexit pinned N     a thread sleeps in clock_nanosleep under a global fexit.multi
 *                      program while N other links attach and detach (some on the same
 *                      function): all their programs are freed while it sleeps; its
 *                      exit runs none of the programs of the metadata those replaced
 *   gexit pinned-detach
 *                      a thread sleeps in clock_nanosleep under a global fexit.multi
 *                      (then fsession.multi) program whose link detaches meanwhile: the
 *                      program is freed while the thread still sleeps, and the thread's
 *                      exit, when it wakes, runs no program
 *   gexit drain-backoff
 *                      a thread sleeps in clock_nanosleep, traced by a global
 *                      fexit.multi program whose link then detaches: the work that
 *                      waits for the call to return (its metadata's memory) backs off,
 *                      at most 10 runs in 10 s after the first 3 s (every 100 ms before)
 *   gexit args7        fentry, fexit, fmod_ret and fsession.multi together on
 *                      bpf_modify_return_test2 (7 arguments, one on the stack), global
 *                      and per-function backend, and global fmod_ret (alone, or with
 *                      fexit) next to per-function others: every kind sees all 7
 *                      arguments, the exits the return value, and an fmod_ret override
 *                      replaces the call, every program still running for it
 *   gexit session N    two fsession.multi programs on the same functions, global and
 *                      per-function backend: each exit finds its own entry's cookie and
 *                      the return value; the ninth session program on a function is
 *                      refused by the global backend with E2BIG
 *
 * Each check prints "ok - ..." or "FAIL - ..."; exit status 0 when all hold.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "../lib/check.h"
#include "../lib/counter.h"
#include "../lib/funcs.h"

#ifndef BPFMUX_HAVE_GLOBAL_TRAMP
int main(void)
{
	fprintf(stderr, "gexit: built without the series' UAPI; run 'make kernel'\n");
	return 1;
}
#else

static char obj_path[4096];	/* gexit.bpf.o, next to this binary */
static struct btf *btf;

static __s32 func_id(const char *name)
{
	return btf__find_by_name_kind(btf, name, BTF_KIND_FUNC);
}

static struct bpf_link *attach_ids(struct bpf_program *prog, const char *const *names, int global)
{
	LIBBPF_OPTS(bpf_tracing_multi_opts, opts, .flags = global ? BPF_F_TRACING_MULTI_GLOBAL : 0);
	__u32 ids[8];
	size_t n = 0;

	for (; *names && n < 8; names++) {
		__s32 id = func_id(*names);

		if (id <= 0) {
			fprintf(stderr, "%s is not in vmlinux BTF\n", *names);
			errno = ENOENT;
			return NULL;
		}
		ids[n++] = id;
	}
	opts.ids = ids;
	opts.cnt = n;
	return bpf_program__attach_tracing_multi(prog, NULL, &opts);
}

static __u64 map_u64(struct bpf_object *obj, const char *map, __u64 key)
{
	int fd = bpf_map__fd(bpf_object__find_map_by_name(obj, map));
	__u64 v = 0;

	bpf_map_lookup_elem(fd, &key, &v);
	return v;
}

static __u64 array_u64(struct bpf_object *obj, const char *map, __u32 key)
{
	int fd = bpf_map__fd(bpf_object__find_map_by_name(obj, map));
	__u64 v = 0;

	bpf_map_lookup_elem(fd, &key, &v);
	return v;
}

static void set_cfg(struct bpf_object *obj, __u32 key, __u64 val)
{
	int fd = bpf_map__fd(bpf_object__find_map_by_name(obj, "cfg"));

	bpf_map_update_elem(fd, &key, &val, BPF_ANY);
}

static const char *const syscalls[] = { "__x64_sys_getpgid", "__x64_sys_getpriority", NULL };

static void test_fexit(long n)
{
	unsigned long pgid = ksym_addr("__x64_sys_getpgid"), prio = ksym_addr("__x64_sys_getpriority");
	struct bpf_program *prog;
	struct bpf_object *obj;
	struct bpf_link *link;
	long r1 = 0, r2 = 0;

	obj = counter_load(obj_path, "fexit_multi", getpid(), &prog);
	check(obj && pgid && prio, "fexit.multi program loads");
	if (!obj)
		return;
	link = attach_ids(prog, syscalls, 1);
	check(link != NULL, "global fexit.multi link (%s)", link ? "ok" : strerror(errno));
	if (link) {
		for (long i = 0; i < n; i++) {
			r1 = syscall(SYS_getpgid, 0);
			r2 = syscall(SYS_getpriority, 0, 0);
		}
		check(counter_hits(obj, pgid) == (__u64)n && counter_hits(obj, prio) == (__u64)n,
		      "fexit ran %llu and %llu times of %ld", (unsigned long long)counter_hits(obj, pgid),
		      (unsigned long long)counter_hits(obj, prio), n);
		check(map_u64(obj, "rets", pgid) == (__u64)r1 && map_u64(obj, "rets", prio) == (__u64)r2,
		      "fexit saw return values %lld and %lld (callers got %ld and %ld)",
		      (long long)map_u64(obj, "rets", pgid), (long long)map_u64(obj, "rets", prio),
		      r1, r2);
		bpf_link__destroy(link);
	}
	bpf_object__close(obj);
}

/*
 * Values above 2^32: an fmod_ret program's whole R0 becomes the return value, and
 * any non-zero R0 skips the function, also one whose low 32 bits are 0.
 */
#define BIG_RET 0x100000005LL
#define HIGH_RET 0x200000000LL

/*
 * getpgid under an fmod_ret.multi override: fails with EPERM @n times, returns
 * BIG_RET and HIGH_RET, then a 64-bit negative errno, then normally again once the
 * override is lifted. @x, when not NULL, is an fexit.multi program on the same
 * functions, which must see each of these values. Both backends keep all 64 bits.
 */
static void fmodret_values(struct bpf_object *mobj, struct bpf_object *xobj, long n,
			   long normal, const char *what)
{
	static const long long big[] = { BIG_RET, HIGH_RET };
	unsigned long pgid = ksym_addr("__x64_sys_getpgid");
	__u64 before = counter_hits(mobj, pgid);
	long fails = 0, r;

	set_cfg(mobj, 0, EPERM);
	for (long i = 0; i < n; i++) {
		errno = 0;
		if (syscall(SYS_getpgid, 0) == -1 && errno == EPERM)
			fails++;
	}
	check(fails == n, "%s: getpgid failed with EPERM %ld of %ld times", what, fails, n);
	check(counter_hits(mobj, pgid) - before == (__u64)n, "%s: fmod_ret ran %llu times", what,
	      (unsigned long long)(counter_hits(mobj, pgid) - before));
	if (xobj)
		check((long long)map_u64(xobj, "rets", pgid) == -EPERM, "%s: fexit saw %lld (want %d)",
		      what, (long long)map_u64(xobj, "rets", pgid), -EPERM);
	errno = 0;
	check(syscall(SYS_getpriority, 0, 0) == -1 && errno == EPERM,
	      "%s: getpriority fails with EPERM too", what);

	for (int i = 0; i < 2; i++) {
		set_cfg(mobj, 3, big[i]);
		r = syscall(SYS_getpgid, 0);
		check(r == big[i], "%s: fmod_ret returned %#llx, the caller got %#lx",
		      what, big[i], r);
		if (xobj)
			check((long long)map_u64(xobj, "rets", pgid) == big[i],
			      "%s: fexit saw %#llx (want %#llx)", what,
			      (unsigned long long)map_u64(xobj, "rets", pgid), big[i]);
	}
	set_cfg(mobj, 3, (__u64)-EINVAL);
	errno = 0;
	r = syscall(SYS_getpgid, 0);
	check(r == -1 && errno == EINVAL, "%s: a 64-bit -EINVAL reaches the caller (%ld, %s)",
	      what, r, strerror(errno));
	set_cfg(mobj, 3, 0);

	set_cfg(mobj, 0, 0);
	r = syscall(SYS_getpgid, 0);
	check(r == normal, "%s: override lifted, getpgid returns %ld (want %ld)", what, r, normal);
	if (xobj)
		check((long)map_u64(xobj, "rets", pgid) == normal,
		      "%s: fexit sees the real return value %ld", what, normal);
}

/*
 * fmod_ret.multi alone (on the global backend its entry returns for the function,
 * with no call and no exit side), then with fexit.multi on the same functions.
 */
static void fmodret_backend(long n, int global)
{
	const char *what = global ? "global" : "per-function";
	struct bpf_program *mprog, *xprog;
	struct bpf_object *mobj, *xobj;
	struct bpf_link *m, *x;
	long normal = syscall(SYS_getpgid, 0);
	char alone[64];

	mobj = counter_load(obj_path, "fmodret_multi", getpid(), &mprog);
	xobj = counter_load(obj_path, "fexit_multi", getpid(), &xprog);
	check(mobj && xobj, "%s: programs load", what);
	if (!mobj || !xobj)
		goto out;
	m = attach_ids(mprog, syscalls, global);
	check(m != NULL, "%s: fmod_ret.multi link (%s)", what, m ? "ok" : strerror(errno));
	if (!m)
		goto out;
	snprintf(alone, sizeof(alone), "%s, fmod_ret alone", what);
	fmodret_values(mobj, NULL, n, normal, alone);
	x = attach_ids(xprog, syscalls, global);
	check(x != NULL, "%s: fexit.multi link next to it (%s)", what,
	      x ? "ok" : strerror(errno));
	if (x)
		fmodret_values(mobj, xobj, n, normal, what);
	bpf_link__destroy(m);
	bpf_link__destroy(x);
	errno = 0;
	check(syscall(SYS_getpgid, 0) == normal, "%s: getpgid normal after detach", what);
out:
	bpf_object__close(mobj);
	bpf_object__close(xobj);
}

static void test_fmodret(long n)
{
	fmodret_backend(n, 1);
	fmodret_backend(n, 0);
}

/*
 * fexit.multi (global) and a plain fentry (per-function trampoline) on do_mmap: the global
 * trampoline calls the function through the called-mode per-function trampoline, which
 * reads arguments 6 to 8 from the stack. Both programs must see the same nine arguments.
 */
static void mmap_coexist(int fd, long len, long pg, const char *want, int fentry_first)
{
	static const char *const names[] = { "do_mmap", NULL };
	const char *order = fentry_first ? "fentry first" : "fexit.multi first";
	struct bpf_program *gprog, *fprog;
	struct bpf_object *gobj, *fobj;
	struct bpf_link *glink = NULL, *flink = NULL;
	int i, same = 0;
	char *p;

	gobj = counter_load(obj_path, "fexit_mmap", getpid(), &gprog);
	fobj = counter_load(obj_path, "fentry_mmap", getpid(), &fprog);
	check(gobj && fobj, "%s: programs load", order);
	if (!gobj || !fobj)
		goto out;
	set_cfg(gobj, 1, len);
	set_cfg(fobj, 1, len);
	if (fentry_first)
		flink = bpf_program__attach(fprog);
	glink = attach_ids(gprog, names, 1);
	if (!fentry_first)
		flink = bpf_program__attach(fprog);
	check(glink && flink, "%s: fentry and global fexit.multi on do_mmap (%s)", order,
	      glink && flink ? "ok" : strerror(errno));
	if (!glink || !flink)
		goto out;
	p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 5 * pg);
	check(p != MAP_FAILED && !memcmp(p, want, 64), "%s: mmap at page 5 maps the right bytes",
	      order);
	check(array_u64(fobj, "mmap_entry", 9) == 1 && array_u64(gobj, "mmap_seen", 11) == 1,
	      "%s: fentry ran %llu time(s), fexit.multi %llu", order,
	      (unsigned long long)array_u64(fobj, "mmap_entry", 9),
	      (unsigned long long)array_u64(gobj, "mmap_seen", 11));
	for (i = 0; i < 9; i++)
		same += array_u64(fobj, "mmap_entry", i) == array_u64(gobj, "mmap_seen", i + 1);
	check(same == 9 && array_u64(fobj, "mmap_entry", 6) == 5,
	      "%s: fentry saw the nine arguments fexit.multi saw (%d of 9 equal; pgoff %llu, "
	      "populate %#llx, uf %#llx)", order, same,
	      (unsigned long long)array_u64(fobj, "mmap_entry", 6),
	      (unsigned long long)array_u64(fobj, "mmap_entry", 7),
	      (unsigned long long)array_u64(fobj, "mmap_entry", 8));
	if (p != MAP_FAILED)
		munmap(p, len);
out:
	bpf_link__destroy(flink);
	bpf_link__destroy(glink);
	bpf_object__close(fobj);
	bpf_object__close(gobj);
}

static void test_mmap(void)
{
	static const char *const names[] = { "do_mmap", NULL };
	const long pg = sysconf(_SC_PAGESIZE), len = 3 * pg;
	struct bpf_program *prog;
	struct bpf_object *obj;
	struct bpf_link *link;
	char want[64], *p;
	int fd;

	obj = counter_load(obj_path, "fexit_mmap", getpid(), &prog);
	check(obj != NULL, "program loads");
	if (!obj)
		return;
	set_cfg(obj, 1, len);
	link = attach_ids(prog, names, 1);
	check(link != NULL, "global fexit.multi on do_mmap (%s)", link ? "ok" : strerror(errno));
	fd = open("/proc/self/exe", O_RDONLY);
	if (link && fd >= 0 && pread(fd, want, sizeof(want), 5 * pg) == sizeof(want)) {
		p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 5 * pg);
		check(p != MAP_FAILED && !memcmp(p, want, sizeof(want)),
		      "mmap at page 5 works through the origin call and maps the right bytes");
		check(array_u64(obj, "mmap_seen", 11) == 1 && array_u64(obj, "mmap_seen", 0) == 9,
		      "fexit ran once (%llu) with 9 arguments (%llu)",
		      (unsigned long long)array_u64(obj, "mmap_seen", 11),
		      (unsigned long long)array_u64(obj, "mmap_seen", 0));
		check(array_u64(obj, "mmap_seen", 3) == (__u64)len &&
		      array_u64(obj, "mmap_seen", 4) == PROT_READ &&
		      array_u64(obj, "mmap_seen", 7) == 5,
		      "fexit arguments: len %llu prot %llu pgoff %llu",
		      (unsigned long long)array_u64(obj, "mmap_seen", 3),
		      (unsigned long long)array_u64(obj, "mmap_seen", 4),
		      (unsigned long long)array_u64(obj, "mmap_seen", 7));
		check(p != MAP_FAILED && array_u64(obj, "mmap_seen", 10) == (__u64)(unsigned long)p,
		      "fexit return value %#llx is the mapped address %p",
		      (unsigned long long)array_u64(obj, "mmap_seen", 10), p);
		if (p != MAP_FAILED)
			munmap(p, len);
	}
	bpf_link__destroy(link);
	bpf_object__close(obj);
	if (fd >= 0 && pread(fd, want, sizeof(want), 5 * pg) == sizeof(want)) {
		mmap_coexist(fd, len, pg, want, 0);
		mmap_coexist(fd, len, pg, want, 1);
	}
	if (fd >= 0)
		close(fd);
}

static long sleeper_rc[4];
static int sleeper_tid[4];

static void *sleeper(void *arg)
{
	struct timespec ts = { .tv_sec = 2 };
	long *rc = arg;

	if (rc >= sleeper_rc && rc < sleeper_rc + 4)
		__atomic_store_n(&sleeper_tid[rc - sleeper_rc], (int)syscall(SYS_gettid),
				 __ATOMIC_RELEASE);
	*rc = syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &ts, NULL);
	return NULL;
}

/* The first line of /proc/self/task/@tid/@file into @buf ("" when unreadable). */
static void task_line(int tid, const char *file, char *buf, size_t size)
{
	char path[64];
	FILE *f;

	buf[0] = 0;
	snprintf(path, sizeof(path), "/proc/self/task/%d/%s", tid, file);
	f = fopen(path, "r");
	if (!f)
		return;
	if (!fgets(buf, size, f))
		buf[0] = 0;
	fclose(f);
}

/*
 * Whether thread @tid sleeps inside the traced function: /proc's syscall file alone
 * also names the syscall of a thread preempted on its way in, before the function is
 * called, so the place it sleeps at must be a nanosleep function too
 * (hrtimer_nanosleep(), which __x64_sys_clock_nanosleep() calls).
 */
static int in_nanosleep(int tid)
{
	char buf[64], wchan[64];

	task_line(tid, "syscall", buf, sizeof(buf));
	if (atoi(buf) != SYS_clock_nanosleep || !strchr(buf, ' '))
		return 0;
	task_line(tid, "wchan", wchan, sizeof(wchan));
	return strstr(wchan, "nanosleep") != NULL;
}

static __u64 recursion_misses(struct bpf_program *prog)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);

	return bpf_prog_get_info_by_fd(bpf_program__fd(prog), &info, &len) ? ~0ULL :
	       info.recursion_misses;
}

static void test_sleep(void)
{
	static const char *const names[] = { "__x64_sys_clock_nanosleep", NULL };
	unsigned long addr = ksym_addr("__x64_sys_clock_nanosleep");
	struct bpf_program *prog;
	struct bpf_object *obj;
	struct bpf_link *link;
	long *rc = sleeper_rc;
	pthread_t t[4];
	int ok = 1, asleep = 0;
	__u64 hits, misses;

	obj = counter_load(obj_path, "fexit_multi", getpid(), &prog);
	check(obj && addr, "program loads");
	if (!obj)
		return;
	link = attach_ids(prog, names, 1);
	check(link != NULL, "global fexit.multi on clock_nanosleep (%s)",
	      link ? "ok" : strerror(errno));
	if (!link)
		goto out;
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, sleeper, &rc[i]);
	/*
	 * Until all four sleep inside the function (at most 1.5 s of their 2 s).
	 * Not usleep(): that is clock_nanosleep too, and this process is counted.
	 */
	for (int w = 0; w < 150 && asleep < 4; w++) {
		poll(NULL, 0, 10);
		asleep = 0;
		for (int i = 0; i < 4; i++) {
			int tid = __atomic_load_n(&sleeper_tid[i], __ATOMIC_ACQUIRE);

			asleep += tid && in_nanosleep(tid);
		}
	}
	check(asleep == 4, "all four threads sleep in clock_nanosleep before the detach (%d)",
	      asleep);
	bpf_link__destroy(link);	/* while all four sleep inside the function */
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		ok &= rc[i] == 0;
	}
	check(ok, "the sleepers returned normally after the detach");
	/*
	 * An exit before the metadata is retired runs the program or, when another task on
	 * the same CPU is inside it, counts a recursion miss; later ones run nothing.
	 */
	hits = counter_hits(obj, addr);
	misses = recursion_misses(prog);
	check(hits + misses <= 4,
	      "their exits ran the program %llu times, recursion misses %llu, of at most 4",
	      (unsigned long long)hits, (unsigned long long)misses);
	sleeper(&rc[0]);
	check(counter_hits(obj, addr) == hits && recursion_misses(prog) == misses,
	      "a call after the detach is not seen (%llu, misses %llu)",
	      (unsigned long long)counter_hits(obj, addr),
	      (unsigned long long)recursion_misses(prog));
out:
	bpf_object__close(obj);
}

static void wake_signal(int sig)
{
	(void)sig;
}

static long long_sleep_rc;
static int long_sleep_tid;

/* clock_nanosleep for an hour, or until SIGUSR1 interrupts it. */
static void *long_sleeper(void *arg)
{
	struct timespec ts = { .tv_sec = 3600 };

	(void)arg;
	__atomic_store_n(&long_sleep_tid, (int)syscall(SYS_gettid), __ATOMIC_RELEASE);
	long_sleep_rc = syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &ts, NULL) ? errno : 0;
	return NULL;
}

/*
 * Start long_sleeper() on @t; whether it sleeps inside clock_nanosleep within 3 s
 * (SIGUSR1, without SA_RESTART, ends its sleep with EINTR).
 */
static int start_long_sleeper(pthread_t *t)
{
	struct sigaction sa = { .sa_handler = wake_signal };
	int asleep = 0;

	sigaction(SIGUSR1, &sa, NULL);
	__atomic_store_n(&long_sleep_tid, 0, __ATOMIC_RELEASE);
	pthread_create(t, NULL, long_sleeper, NULL);
	for (int w = 0; w < 300 && !asleep; w++) {
		int tid = __atomic_load_n(&long_sleep_tid, __ATOMIC_ACQUIRE);

		poll(NULL, 0, 10);
		asleep = tid && in_nanosleep(tid);
	}
	return asleep;
}

/* Whether the kernel still has program @id (a program is freed when its last user goes). */
static int prog_alive(__u32 id)
{
	int fd = bpf_prog_get_fd_by_id(id);

	if (fd < 0)
		return errno != ENOENT;
	close(fd);
	return 1;
}

static __u32 prog_id(struct bpf_program *prog)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);

	return bpf_prog_get_info_by_fd(bpf_program__fd(prog), &info, &len) ? 0 : info.id;
}

/* Programs of @ids still alive after waiting up to @ms for their frees. */
static int alive_after(const __u32 *ids, long n, int ms)
{
	int alive = 0;

	for (int w = 0; w <= ms / 10; w++) {
		alive = 0;
		for (long i = 0; i < n; i++)
			alive += prog_alive(ids[i]);
		if (!alive)
			break;
		poll(NULL, 0, 10);
	}
	return alive;
}

/*
 * A thread sleeps inside a function with a global fexit.multi program (its call keeps
 * that function's metadata) while @n other fexit.multi links attach, run and detach,
 * some on the same function: every one of their programs must be freed while the
 * sleeper still sleeps. Then the sleeper wakes, its exit returns without programs (the
 * metadata it entered with was replaced), and its own link detaches and frees its
 * program.
 */
static void test_pinned(long n)
{
	static const char *const sleep_fn[] = { "__x64_sys_clock_nanosleep", NULL };
	static const char *const names[] = { "__x64_sys_getpgid", "__x64_sys_getpriority",
					     "__x64_sys_clock_nanosleep", NULL };
	unsigned long sleep_addr = ksym_addr("__x64_sys_clock_nanosleep");
	unsigned long pgid = ksym_addr("__x64_sys_getpgid");
	struct bpf_program *sprog, *prog;
	struct bpf_object *sobj, *obj;
	struct bpf_link *slink, *link;
	long attached = 0, counted = 0;
	__u32 *ids = calloc(n, sizeof(*ids)), sid = 0;
	pthread_t t;
	int alive;

	sobj = counter_load(obj_path, "fexit_multi", getpid(), &sprog);
	check(sobj && ids && sleep_addr && pgid, "the sleeper's program loads");
	if (!sobj || !ids)
		goto out_free;
	sid = prog_id(sprog);
	slink = attach_ids(sprog, sleep_fn, 1);
	check(slink != NULL, "global fexit.multi on clock_nanosleep (%s)",
	      slink ? "ok" : strerror(errno));
	if (!slink)
		goto out;
	check(start_long_sleeper(&t),
	      "a thread sleeps in clock_nanosleep under the global fexit.multi program");

	for (long i = 0; i < n; i++) {
		obj = counter_load(obj_path, "fexit_multi", getpid(), &prog);
		if (!obj)
			break;
		ids[i] = prog_id(prog);
		link = attach_ids(prog, names, 1);
		if (link) {
			attached++;
			syscall(SYS_getpgid, 0);
			counted += counter_hits(obj, pgid) == 1;
		}
		bpf_link__destroy(link);
		bpf_object__close(obj);
	}
	check(attached == n && counted == n,
	      "%ld of %ld links on getpgid, getpriority and clock_nanosleep attached, ran and "
	      "detached (%ld counted their call)", attached, n, counted);
	alive = alive_after(ids, n, 5000);
	check(alive == 0, "while the thread sleeps, the programs of all %ld detached links were "
	      "freed (%d still alive after 5 s)", n, alive);
	check(in_nanosleep(long_sleep_tid) && prog_alive(sid),
	      "the thread still sleeps, and its own program is alive");

	pthread_kill(t, SIGUSR1);
	pthread_join(t, NULL);
	check(long_sleep_rc == EINTR, "the sleeper woke with EINTR (%s)", strerror(long_sleep_rc));
	/*
	 * The other links' attaches to clock_nanosleep replaced the metadata the sleeper
	 * entered with; as with a per-function trampoline whose image was replaced, its
	 * exit then runs none of that metadata's programs, its own still-attached one too.
	 */
	check(counter_hits(sobj, sleep_addr) == 0,
	      "its exit ran no program of the metadata it entered with, which was replaced "
	      "meanwhile (%llu runs, %llu recursion misses)",
	      (unsigned long long)counter_hits(sobj, sleep_addr),
	      (unsigned long long)recursion_misses(sprog));
	bpf_link__destroy(slink);
out:
	bpf_object__close(sobj);
	if (sid)
		check(alive_after(&sid, 1, 5000) == 0, "the sleeper's program is freed after its detach");
out_free:
	free(ids);
}

/*
 * What a kernel thread's main loop does to a traced function: its call never returns.
 * A thread sleeps inside a function with a global exit-side program whose link then
 * detaches: the program must be freed while the thread still sleeps (its metadata's
 * memory may stay), and the thread's exit, when it finally wakes, runs no program.
 */
static void test_pinned_detach(void)
{
	static const char *const sleep_fn[] = { "__x64_sys_clock_nanosleep", NULL };
	static const char *const kinds[] = { "fexit_multi", "session_multi" };
	unsigned long sleep_addr = ksym_addr("__x64_sys_clock_nanosleep");
	struct bpf_program *prog;
	struct bpf_object *obj;
	struct bpf_link *link;

	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		__u64 key = sleep_addr, exits = 0;
		int hits_fd;
		pthread_t t;
		__u32 id;

		obj = counter_load(obj_path, kinds[k], getpid(), &prog);
		check(obj && sleep_addr, "%s loads", kinds[k]);
		if (!obj)
			continue;
		id = prog_id(prog);
		hits_fd = dup(bpf_map__fd(bpf_object__find_map_by_name(obj, "hits")));
		link = attach_ids(prog, sleep_fn, 1);
		check(link != NULL, "global %s on clock_nanosleep (%s)", kinds[k],
		      link ? "ok" : strerror(errno));
		if (!link) {
			bpf_object__close(obj);
			close(hits_fd);
			continue;
		}
		check(start_long_sleeper(&t), "%s: a thread sleeps in clock_nanosleep", kinds[k]);

		/* The link goes, and with the object this process's last reference. */
		bpf_link__destroy(link);
		bpf_object__close(obj);
		check(alive_after(&id, 1, 5000) == 0 && in_nanosleep(long_sleep_tid),
		      "%s: the detached program is freed while the thread still sleeps", kinds[k]);

		pthread_kill(t, SIGUSR1);
		pthread_join(t, NULL);
		check(long_sleep_rc == EINTR, "%s: the sleeper woke with EINTR (%s)", kinds[k],
		      strerror(long_sleep_rc));
		bpf_map_lookup_elem(hits_fd, &key, &exits);
		check(exits == 0, "%s: its exit ran no program (%llu runs)", kinds[k],
		      (unsigned long long)exits);
		close(hits_fd);
	}
}

/*
 * The drain work looks at retired metadata until no call is in flight on it any more.
 * A call that never returns (a kernel thread's main loop) must not keep it waking ten
 * times a second for as long as the call lasts.
 */
static void test_drain_backoff(void)
{
	static const char *const sleep_fn[] = { "__x64_sys_clock_nanosleep", NULL };
	unsigned long drain = ksym_addr("md_drain_fn");
	struct bpf_program *prog, *dprog;
	struct bpf_object *obj, *dobj;
	struct bpf_link *link, *dlink;
	__u64 before, runs;
	pthread_t t;

	obj = counter_load(obj_path, "fexit_multi", getpid(), &prog);
	dobj = counter_load(obj_path, "drain_runs", 0, &dprog);
	check(obj && dobj && drain, "programs load, md_drain_fn at %#lx", drain);
	if (!obj || !dobj)
		goto out;
	link = attach_ids(prog, sleep_fn, 1);
	check(link != NULL, "global fexit.multi on clock_nanosleep (%s)",
	      link ? "ok" : strerror(errno));
	if (!link)
		goto out;
	check(start_long_sleeper(&t), "a thread sleeps in clock_nanosleep");
	set_cfg(dobj, 0, drain);
	dlink = bpf_program__attach(dprog);
	check(dlink != NULL, "workqueue_execute_start counted for md_drain_fn (%s)",
	      dlink ? "ok" : strerror(errno));
	bpf_link__destroy(link);	/* its metadata stays in flight while the thread sleeps */
	sleep(3);
	before = counter_hits(dobj, 1);
	sleep(10);
	runs = counter_hits(dobj, 1) - before;
	check(dlink && before > 0 && runs <= 10 && in_nanosleep(long_sleep_tid),
	      "the drain work ran %llu times in 10 s while the call stayed in flight "
	      "(%llu in the first 3 s; at most 10 wanted)",
	      (unsigned long long)runs, (unsigned long long)before);
	pthread_kill(t, SIGUSR1);
	pthread_join(t, NULL);
	bpf_link__destroy(dlink);
out:
	bpf_object__close(obj);
	bpf_object__close(dobj);
}

static void test_rollback(void)
{
	static const char *const names[] = { "__x64_sys_getpgid", "vfs_read", NULL };
	struct bpf_program *prog;
	struct bpf_object *obj;
	struct bpf_link *link;
	long normal = syscall(SYS_getpgid, 0);

	obj = counter_load(obj_path, "fmodret_multi", getpid(), &prog);
	check(obj != NULL, "program loads");
	if (!obj)
		return;
	set_cfg(obj, 0, EPERM);
	link = attach_ids(prog, names, 1);
	check(link == NULL, "fmod_ret.multi including vfs_read is refused (%s)",
	      link ? "attached!" : strerror(errno));
	bpf_link__destroy(link);
	check(syscall(SYS_getpgid, 0) == normal, "getpgid is untouched");
	bpf_object__close(obj);
}

static void test_coexist(long n)
{
	unsigned long addr = ksym_addr("__x64_sys_getpgid");
	struct bpf_program *gprog, *fprog;
	struct bpf_object *gobj, *fobj;
	struct bpf_link *g, *f;
	__u64 gb, fb;
	long r = 0;

	gobj = counter_load(obj_path, "fexit_multi", getpid(), &gprog);
	fobj = counter_load(obj_path, "fexit_one", getpid(), &fprog);
	check(gobj && fobj, "programs load");
	if (!gobj || !fobj)
		goto out;
	for (int order = 0; order < 2; order++) {
		const char *first = order ? "global" : "fexit";

		if (order) {
			g = attach_ids(gprog, syscalls, 1);
			f = g ? bpf_program__attach(fprog) : NULL;
		} else {
			f = bpf_program__attach(fprog);
			g = f ? attach_ids(gprog, syscalls, 1) : NULL;
		}
		check(f && g, "%s first: both attach (%s)", first, f && g ? "ok" : strerror(errno));
		if (f && g) {
			gb = counter_hits(gobj, addr);
			fb = counter_hits(fobj, addr);
			for (long i = 0; i < n; i++)
				r = syscall(SYS_getpgid, 0);
			check(counter_hits(gobj, addr) - gb == (__u64)n &&
			      counter_hits(fobj, addr) - fb == (__u64)n,
			      "%s first: global fexit ran %llu, per-function fexit %llu of %ld", first,
			      (unsigned long long)(counter_hits(gobj, addr) - gb),
			      (unsigned long long)(counter_hits(fobj, addr) - fb), n);
			check((long)map_u64(gobj, "rets", addr) == r &&
			      (long)map_u64(fobj, "rets", addr) == r,
			      "%s first: both saw return value %ld", first, r);
		}
		bpf_link__destroy(order ? g : f);
		if (f && g) {
			fb = counter_hits(order ? fobj : gobj, addr);
			syscall(SYS_getpgid, 0);
			check(counter_hits(order ? fobj : gobj, addr) == fb + 1,
			      "%s first: the other keeps running after %s detached", first, first);
		}
		bpf_link__destroy(order ? f : g);
	}
out:
	bpf_object__close(gobj);
	bpf_object__close(fobj);
}

/* The kallsyms text symbol that holds @addr, into @sym; 0 if none. */
static int ksym_holding(unsigned long addr, char *sym, size_t symlen)
{
	FILE *f = fopen("/proc/kallsyms", "r");
	unsigned long a, best = 0;
	char line[512], name[256], type;

	if (!f)
		return 0;
	sym[0] = 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx %c %255s", &a, &type, name) == 3 && a <= addr && a > best &&
		    (type == 't' || type == 'T')) {
			best = a;
			snprintf(sym, symlen, "%s", name);
		}
	fclose(f);
	return best != 0;
}

/*
 * The kernel stack fexit_one took at its last call, as "sym<sym<...", into @out; whether
 * it reaches do_syscall_64, which called the traced syscall.
 */
static int kstack_reaches_syscall(struct bpf_object *obj, char *out, size_t outlen)
{
	int fd = bpf_map__fd(bpf_object__find_map_by_name(obj, "kstack"));
	__u64 st[33] = {};
	__u32 k = 0;
	size_t used = 0;
	int found = 0;

	out[0] = 0;
	if (bpf_map_lookup_elem(fd, &k, st) || (__s64)st[0] <= 0)
		return 0;
	for (__u64 i = 1; i <= st[0] / 8 && i < 33; i++) {
		char name[256];

		if (!ksym_holding(st[i], name, sizeof(name)))
			snprintf(name, sizeof(name), "%#llx", (unsigned long long)st[i]);
		found |= !strcmp(name, "do_syscall_64");
		if (used < outlen)
			used += snprintf(out + used, outlen - used, "%s%s", i > 1 ? "<" : "", name);
	}
	return found;
}

/*
 * One case of gexit skipchain: per-function programs @pkinds (bit 0 fentry, bit 1 fexit)
 * and a global fmod_ret.multi program, with a global fexit.multi program when @gexit,
 * the per-function ones attached first when @pfirst.
 */
static void skipchain_case(struct bpf_object *const objs[4], struct bpf_program *const progs[4],
			   int pkinds, int gexit, int pfirst, long n, long normal)
{
	enum { FE, FX, GM, GX };
	unsigned long addr = ksym_addr("__x64_sys_getpgid");
	struct bpf_link *links[4] = {};
	__u64 before[4];
	char what[96];
	long fails = 0;
	int ok = 1;

	snprintf(what, sizeof(what), "per-function %s%s%s, global fmod_ret%s, %s first",
		 pkinds & 1 ? "fentry" : "", pkinds == 3 ? "+" : "", pkinds & 2 ? "fexit" : "",
		 gexit ? "+fexit" : "", pfirst ? "per-function" : "global");
	for (int step = 0; step < 2 && ok; step++) {
		if (step == !pfirst) {
			for (int k = FE; k <= FX && ok; k++)
				if (pkinds & (1 << k))
					ok = (links[k] = bpf_program__attach(progs[k])) != NULL;
		} else {
			ok = (links[GM] = attach_ids(progs[GM], syscalls, 1)) != NULL;
			if (ok && gexit)
				ok = (links[GX] = attach_ids(progs[GX], syscalls, 1)) != NULL;
		}
	}
	check(ok, "%s: all attach (%s)", what, ok ? "ok" : strerror(errno));
	if (!ok)
		goto out;
	for (int k = 0; k < 4; k++)
		before[k] = counter_hits(objs[k], addr);
	set_cfg(objs[GM], 0, EPERM);
	for (long i = 0; i < n; i++) {
		errno = 0;
		if (syscall(SYS_getpgid, 0) == -1 && errno == EPERM)
			fails++;
	}
	check(fails == n, "%s: getpgid failed with EPERM %ld of %ld times", what, fails, n);
	for (int k = 0; k < 4; k++) {
		static const char *const name[] = { "per-function fentry", "per-function fexit",
						    "global fmod_ret", "global fexit" };
		__u64 want = links[k] ? n : 0, got = counter_hits(objs[k], addr) - before[k];

		if (k == GM || links[k])
			check(got == want, "%s: %s ran %llu times for %ld skipped calls", what,
			      name[k], (unsigned long long)got, n);
	}
	if (links[FX]) {
		char trace[1024];

		/* Unwound through bpf_global_caller_skipped, where the image returns. */
		check(kstack_reaches_syscall(objs[FX], trace, sizeof(trace)),
		      "%s: the per-function fexit's kernel stack reaches do_syscall_64 (%s)",
		      what, trace);
	}
	for (int k = FX; k <= GX; k += GX - FX)
		if (links[k])
			check((long long)map_u64(objs[k], "rets", addr) == -EPERM,
			      "%s: %s saw %lld (want %d: the value fmod_ret chose, not the body's)",
			      what, k == FX ? "per-function fexit" : "global fexit",
			      (long long)map_u64(objs[k], "rets", addr), -EPERM);
	set_cfg(objs[GM], 0, 0);
	errno = 0;
	check(syscall(SYS_getpgid, 0) == normal, "%s: override lifted, getpgid returns %ld",
	      what, normal);
	if (links[FX])
		check((long)map_u64(objs[FX], "rets", addr) == normal,
		      "%s: per-function fexit then sees the real value %lld", what,
		      (long long)map_u64(objs[FX], "rets", addr));
out:
	/* The global links leave first when the per-function ones came first. */
	for (int i = 0; i < 4; i++) {
		int k = pfirst ? GX - i : i;

		bpf_link__destroy(links[k]);
	}
	errno = 0;
	check(syscall(SYS_getpgid, 0) == normal, "%s: getpgid normal after detach", what);
}

static void test_skipchain(long n)
{
	static const char *const names[] = { "fentry_one", "fexit_one", "fmodret_multi",
					     "fexit_multi" };
	struct bpf_program *progs[4] = {};
	struct bpf_object *objs[4] = {};
	long normal;
	int loaded = 1;

	/* A process group of our own: its id is not 0, which a map reads before any update. */
	setpgid(0, 0);
	normal = syscall(SYS_getpgid, 0);
	check(normal > 0, "getpgid returns %ld, not 0", normal);

	for (int k = 0; k < 4; k++)
		loaded &= (objs[k] = counter_load(obj_path, names[k], getpid(), &progs[k])) != NULL;
	check(loaded, "programs load");
	if (loaded)
		for (int pkinds = 1; pkinds <= 3; pkinds++)
			for (int gexit = 0; gexit < 2; gexit++)
				for (int pfirst = 0; pfirst < 2; pfirst++)
					skipchain_case(objs, progs, pkinds, gexit, pfirst, n,
						       normal);
	for (int k = 0; k < 4; k++)
		bpf_object__close(objs[k]);
}

/* The name of a text symbol that starts at @addr, into @sym; 0 if none does. */
static int ksym_at(unsigned long addr, char *sym, size_t symlen)
{
	FILE *f = fopen("/proc/kallsyms", "r");
	char line[512], name[256], type;
	unsigned long a;
	int found = 0;

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx %c %255s", &a, &type, name) == 3 && a == addr &&
		    (type == 't' || type == 'T')) {
			size_t n = strnlen(name, symlen - 1);

			memcpy(sym, name, n);
			sym[n] = 0;
			found = 1;
		}
	fclose(f);
	return found;
}

/*
 * Where ftrace sends @func's site, from enabled_functions ("FUNC (N) ... D" then
 * "\tdirect-->SYM+0xOFF/0xSIZE"): the symbol into @sym and the offset, or -1 when the
 * function has no direct call. BPF images count their end address as theirs (a return
 * address after a final call), so the first stub of a page that directly follows another
 * image prints as that image's SYM+SIZE/SIZE: name the symbol that starts there instead.
 */
static long site_target(const char *func, char *sym, size_t symlen)
{
	FILE *f = fopen("/sys/kernel/tracing/enabled_functions", "r");
	size_t len = strlen(func);
	char line[512], name[128];
	unsigned long off, size;
	int in_func = 0;
	long ret = -1;

	snprintf(sym, symlen, "none");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		const char *arrow = strstr(line, "-->");

		if (line[0] != '\t' && line[0] != ' ')
			in_func = !strncmp(line, func, len) && line[len] == ' ';
		if (!in_func || !arrow || !strstr(line, "direct"))
			continue;
		if (sscanf(arrow + 3, "%127[^+]+%lx/%lx", name, &off, &size) == 3) {
			snprintf(sym, symlen, "%s", name);
			ret = off;
			if (off == size && ksym_addr(name) &&
			    ksym_at(ksym_addr(name) + off, sym, symlen))
				ret = 0;
		}
		break;
	}
	fclose(f);
	return ret;
}

/*
 * Whether @func's site calls an exit stub (1), a common stub (0), or neither (-1): a stub
 * page's common stubs are bpf_global_stubs_rN_M, its exit stubs, written when first needed,
 * bpf_global_exit_stubs_rN_M.
 */
static int site_on_exit_stub(const char *func, char *sym, size_t symlen)
{
	if (site_target(func, sym, symlen) < 0)
		return -1;
	if (!strncmp(sym, "bpf_global_exit_stubs_", 22))
		return 1;
	return strncmp(sym, "bpf_global_stubs_", 17) ? -1 : 0;
}

/* getpgid's site calls an exit stub (@want 1) or a common stub (@want 0). */
static void expect_stub(int want, const char *step)
{
	static const char *const what[] = { "no stub", "common stub", "exit stub" };
	char sym[128];
	int where = site_on_exit_stub("__x64_sys_getpgid", sym, sizeof(sym));

	check(where == want, "%s: the site calls the %s (%s, %s)", step, what[want + 1], sym,
	      what[where + 1]);
}

/* fexit calls and return values of getpgid and getpriority, @n more than @before. */
static void kinds_calls(struct bpf_object *obj, long n, __u64 before, const char *step)
{
	unsigned long pgid = ksym_addr("__x64_sys_getpgid"), prio = ksym_addr("__x64_sys_getpriority");
	long r1 = 0, r2 = 0;

	for (long i = 0; i < n; i++) {
		r1 = syscall(SYS_getpgid, 0);
		r2 = syscall(SYS_getpriority, 0, 0);
	}
	check(counter_hits(obj, pgid) == before + n && counter_hits(obj, prio) == before + n,
	      "%s: fexit ran %llu and %llu times (want %llu)", step,
	      (unsigned long long)counter_hits(obj, pgid),
	      (unsigned long long)counter_hits(obj, prio), (unsigned long long)(before + n));
	check(map_u64(obj, "rets", pgid) == (__u64)r1 && map_u64(obj, "rets", prio) == (__u64)r2,
	      "%s: fexit saw return values %lld and %lld (callers got %ld and %ld)", step,
	      (long long)map_u64(obj, "rets", pgid), (long long)map_u64(obj, "rets", prio), r1, r2);
}

/*
 * Links of the suite's previous test on getpgid are released after its process exited, by
 * the kernel's deferred work: wait (at most @ms) until its site has no direct call, so that
 * the stub kinds below are this test's alone. Whether the site is clear.
 */
static bool wait_site_clear(long ms)
{
	char sym[128];

	for (long waited = 0; site_target("__x64_sys_getpgid", sym, sizeof(sym)) >= 0; waited += 10) {
		if (waited >= ms)
			return false;
		usleep(10000);
	}
	return true;
}

static void test_kinds(long n)
{
	struct bpf_program *xprog, *mprog;
	struct bpf_object *xobj, *mobj;
	struct bpf_link *x = NULL, *m = NULL;
	char sym[128];

	check(wait_site_clear(10000), "getpgid's site is clear before the test (no link of an "
	      "earlier test left after 10 s)");
	xobj = counter_load(obj_path, "fexit_multi", getpid(), &xprog);
	mobj = counter_load(obj_path, "fmodret_multi", getpid(), &mprog);
	check(xobj && mobj, "programs load");
	if (!xobj || !mobj)
		goto out;
	/* cfg 0: the fmod_ret program returns 0 and changes nothing. */
	set_cfg(mobj, 0, 0);
	x = attach_ids(xprog, syscalls, 1);
	check(x != NULL, "global fexit.multi link (%s)", x ? "ok" : strerror(errno));
	if (!x)
		goto out;
	expect_stub(1, "fexit only");
	kinds_calls(xobj, n, 0, "fexit only");

	m = attach_ids(mprog, syscalls, 1);
	check(m != NULL, "global fmod_ret.multi link (%s)", m ? "ok" : strerror(errno));
	if (!m)
		goto out;
	expect_stub(0, "fexit and fmod_ret");
	kinds_calls(xobj, n, n, "fexit and fmod_ret");

	bpf_link__destroy(m);
	m = NULL;
	expect_stub(1, "fmod_ret detached");
	kinds_calls(xobj, n, 2 * n, "fmod_ret detached");

	bpf_link__destroy(x);
	x = NULL;
	check(site_target("__x64_sys_getpgid", sym, sizeof(sym)) < 0,
	      "all detached: the site has no direct call (%s)", sym);
	syscall(SYS_getpgid, 0);
	check(counter_hits(xobj, ksym_addr("__x64_sys_getpgid")) == 3 * (__u64)n,
	      "all detached: a call is not seen");
out:
	bpf_link__destroy(m);
	bpf_link__destroy(x);
	bpf_object__close(mobj);
	bpf_object__close(xobj);
}

/* Two fsession.multi programs on the same functions: each pairs its own entry and exit. */
static void session_backend(long n, int global)
{
	const char *what = global ? "global" : "per-function";
	unsigned long pgid = ksym_addr("__x64_sys_getpgid"), prio = ksym_addr("__x64_sys_getpriority");
	struct bpf_object *obj[2] = {};
	struct bpf_program *prog[2];
	struct bpf_link *link[2] = {};
	long r1 = 0, r2 = 0;
	int i;

	for (i = 0; i < 2; i++)
		obj[i] = counter_load(obj_path, "session_multi", getpid(), &prog[i]);
	check(obj[0] && obj[1] && pgid && prio, "%s: two fsession.multi programs load", what);
	if (!obj[0] || !obj[1])
		goto out;
	for (i = 0; i < 2; i++)
		link[i] = attach_ids(prog[i], syscalls, global);
	check(link[0] && link[1], "%s: two fsession.multi links (%s)", what,
	      link[0] && link[1] ? "ok" : strerror(errno));
	if (!link[0] || !link[1])
		goto out;
	for (long k = 0; k < n; k++) {
		r1 = syscall(SYS_getpgid, 0);
		r2 = syscall(SYS_getpriority, 0, 0);
	}
	for (i = 0; i < 2; i++) {
		__u64 in = array_u64(obj[i], "sess", 0), out = array_u64(obj[i], "sess", 1);

		check(in == 2 * (__u64)n && out == 2 * (__u64)n,
		      "%s: program %d ran %llu times on entry and %llu on exit (want %ld each)", what,
		      i, (unsigned long long)in, (unsigned long long)out, 2 * n);
		check(array_u64(obj[i], "sess", 2) == 0,
		      "%s: program %d: every exit found its entry's cookie (%llu did not)", what, i,
		      (unsigned long long)array_u64(obj[i], "sess", 2));
		check(array_u64(obj[i], "sess", 3) == 0,
		      "%s: program %d: the entry side sees a return value of 0", what, i);
		check(map_u64(obj[i], "rets", pgid) == (__u64)r1 &&
		      map_u64(obj[i], "rets", prio) == (__u64)r2,
		      "%s: program %d: the exit side saw return values %lld and %lld (callers got %ld and %ld)",
		      what, i, (long long)map_u64(obj[i], "rets", pgid),
		      (long long)map_u64(obj[i], "rets", prio), r1, r2);
	}
out:
	for (i = 0; i < 2; i++) {
		bpf_link__destroy(link[i]);
		bpf_object__close(obj[i]);
	}
}

/* The global trampoline's frame has BPF_KFUNC_MD_MAX_SESSION (8) cookie slots. */
static void session_limit(void)
{
	struct bpf_object *obj[9] = {};
	struct bpf_link *link[9] = {};
	struct bpf_program *prog;
	long normal = syscall(SYS_getpgid, 0);
	int i, attached = 0;

	for (i = 0; i < 9; i++) {
		obj[i] = counter_load(obj_path, "session_multi", getpid(), &prog);
		if (!obj[i])
			break;
		link[i] = attach_ids(prog, syscalls, 1);
		if (i < 8)
			attached += link[i] != NULL;
		else
			check(!link[i] && errno == E2BIG,
			      "global: a ninth fsession.multi program on the same functions is refused "
			      "with E2BIG (%s)", link[i] ? "attached" : strerror(errno));
	}
	check(attached == 8, "global: eight fsession.multi programs on the same functions (%d attached)",
	      attached);
	errno = 0;
	check(syscall(SYS_getpgid, 0) == normal, "global: getpgid works with eight sessions");
	for (i = 0; i < 9; i++) {
		bpf_link__destroy(link[i]);
		bpf_object__close(obj[i]);
	}
}

static void test_session(long n)
{
	session_backend(n, 1);
	session_backend(n, 0);
	session_limit();
}

/*
 * bpf_modify_return_test2(int a, int *b, short c, int d, void *e, char f, int g): seven
 * arguments, the last on the stack. The kernel calls it as (1, &b, 3, 4, 5, 6, 7) with b = 2
 * when a plain fmod_ret program is test-run, and it returns 1 + 3 + 3 + 4 + 5 + 6 + 7 = 29
 * after incrementing b.
 */
#define ARGS7_KINDS 5
static const char *const args7_kind[ARGS7_KINDS] = {
	"fentry.multi", "fexit.multi", "fmod_ret.multi", "fsession.multi entry",
	"fsession.multi exit",
};

/* Compare what kind @k recorded with the call's arguments, at each argument's width. */
static int args7_match(struct bpf_object *obj, int k, __u64 *b_seen)
{
	static const __u64 want[7] = { 1, 0, 3, 4, 5, 6, 7 };
	static const int bits[7] = { 32, 64, 16, 32, 64, 8, 32 };
	int ok = 1;

	for (int i = 0; i < 7; i++) {
		__u64 v = array_u64(obj, "args7", k * 8 + i);
		__u64 mask = bits[i] == 64 ? ~0ULL : (1ULL << bits[i]) - 1;

		if (i == 1) {	/* &b: a kernel stack address, the same for every kind */
			if (!*b_seen)
				*b_seen = v;
			ok &= v == *b_seen && v >> 63;
		} else {
			ok &= (v & mask) == want[i];
		}
	}
	return ok;
}

/*
 * Bit k of @global: kind k (0 fentry, 1 fexit, 2 fmod_ret, 3 fsession) attaches on the
 * global backend, else on the per-function one. Mixed, the global trampoline enters the
 * per-function one for every call, also those fmod_ret skips.
 */
static void args7_backend(unsigned int global, const char *what)
{
	static const char *const names[] = { "args7_fentry", "args7_fexit", "args7_fmodret",
					     "args7_session", "args7_driver" };
	static const char *const target[] = { "bpf_modify_return_test2", NULL };
	LIBBPF_OPTS(bpf_test_run_opts, run);
	struct bpf_link *links[4] = {};
	struct bpf_program *prog[5];
	struct bpf_object *obj;
	__u64 b_seen = 0;
	int ok = 1, err;

	obj = bpf_object__open_file(obj_path, NULL);
	check(obj != NULL, "%s: open %s", what, obj_path);
	if (!obj)
		return;
	bpf_object__for_each_program(prog[0], obj)
		bpf_program__set_autoload(prog[0], 0);
	for (int i = 0; i < 5; i++) {
		prog[i] = bpf_object__find_program_by_name(obj, names[i]);
		ok &= prog[i] && !bpf_program__set_autoload(prog[i], 1);
	}
	err = ok ? bpf_object__load(obj) : -ENOENT;
	check(!err, "%s: the four multi programs and the driver load (%s)", what, strerror(-err));
	if (err)
		goto out;
	for (int i = 0; i < 4; i++) {
		links[i] = attach_ids(prog[i], target, (global >> i) & 1);
		ok &= links[i] != NULL;
	}
	check(ok, "%s: fentry, fexit, fmod_ret and fsession.multi on bpf_modify_return_test2 (%s)",
	      what, ok ? "ok" : strerror(errno));
	if (!ok)
		goto out;

	err = bpf_prog_test_run_opts(bpf_program__fd(prog[4]), &run);
	check(!err && run.retval == (2u << 16 | (4 + 29)),
	      "%s: the kernel's calls ran as without programs (retval %#x, want %#x)", what,
	      run.retval, 2u << 16 | (4 + 29));
	for (int k = 0; k < ARGS7_KINDS; k++)
		check(array_u64(obj, "args7", k * 8 + 7) && args7_match(obj, k, &b_seen),
		      "%s: %s saw a=1 b=&b c=3 d=4 e=5 f=6 g=7 (%llu %#llx %llu %llu %llu %llu %llu)",
		      what, args7_kind[k],
		      (unsigned long long)array_u64(obj, "args7", k * 8 + 0),
		      (unsigned long long)array_u64(obj, "args7", k * 8 + 1),
		      (unsigned long long)array_u64(obj, "args7", k * 8 + 2),
		      (unsigned long long)array_u64(obj, "args7", k * 8 + 3),
		      (unsigned long long)array_u64(obj, "args7", k * 8 + 4),
		      (unsigned long long)array_u64(obj, "args7", k * 8 + 5),
		      (unsigned long long)array_u64(obj, "args7", k * 8 + 6));
	check((__u32)array_u64(obj, "args7", 1 * 8 + 7) == 29 &&
	      (__u32)array_u64(obj, "args7", 4 * 8 + 7) == 29,
	      "%s: fexit and the session's exit saw the return value 29 (%lld, %lld)", what,
	      (long long)(__s32)array_u64(obj, "args7", 1 * 8 + 7),
	      (long long)(__s32)array_u64(obj, "args7", 4 * 8 + 7));

	/*
	 * The override: the function is not called, every program still runs (slots
	 * cleared first), and the exits see what fmod_ret returned.
	 */
	for (__u32 k = 0; k < 5 * 8; k++) {
		__u64 zero = 0;

		bpf_map_update_elem(bpf_map__fd(bpf_object__find_map_by_name(obj, "args7")), &k,
				    &zero, BPF_ANY);
	}
	set_cfg(obj, 2, 1000);
	err = bpf_prog_test_run_opts(bpf_program__fd(prog[4]), &run);
	check(!err && run.retval == (1u << 16 | (4 + 1000)),
	      "%s: fmod_ret.multi returned 1000 instead of calling it (retval %#x, want %#x)",
	      what, run.retval, 1u << 16 | (4 + 1000));
	check((__u32)array_u64(obj, "args7", 1 * 8 + 7) == 1000 &&
	      (__u32)array_u64(obj, "args7", 4 * 8 + 7) == 1000 && args7_match(obj, 1, &b_seen),
	      "%s: fexit and the session's exit saw 1000 and the same arguments", what);
	for (int k = 0; k < ARGS7_KINDS; k++)
		check(array_u64(obj, "args7", k * 8 + 7) && args7_match(obj, k, &b_seen),
		      "%s: %s ran for the skipped call and saw the same arguments (%llu %llu)",
		      what, args7_kind[k], (unsigned long long)array_u64(obj, "args7", k * 8 + 0),
		      (unsigned long long)array_u64(obj, "args7", k * 8 + 6));
out:
	for (int i = 0; i < 4; i++)
		bpf_link__destroy(links[i]);
	bpf_object__close(obj);
}

static void test_args7(void)
{
	args7_backend(0xf, "global");
	args7_backend(0, "per-function");
	args7_backend(1 << 2, "global fmod_ret, the rest per-function");
	args7_backend(1 << 2 | 1 << 1, "global fmod_ret and fexit, the rest per-function");
}

int main(int argc, char **argv)
{
	long n = argc > 2 ? atol(argv[2]) : 500;
	const char *cmd = argc > 1 ? argv[1] : "";

	snprintf(obj_path, sizeof(obj_path), "%s.bpf.o", argv[0]);
	libbpf_set_strict_mode(LIBBPF_STRICT_ALL);
	btf = btf__load_vmlinux_btf();
	if (!btf) {
		fprintf(stderr, "gexit: no vmlinux BTF\n");
		return 1;
	}
	if (!strcmp(cmd, "fexit"))
		test_fexit(n);
	else if (!strcmp(cmd, "fmodret"))
		test_fmodret(n);
	else if (!strcmp(cmd, "mmap"))
		test_mmap();
	else if (!strcmp(cmd, "sleep"))
		test_sleep();
	else if (!strcmp(cmd, "rollback"))
		test_rollback();
	else if (!strcmp(cmd, "coexist"))
		test_coexist(n);
	else if (!strcmp(cmd, "skipchain"))
		test_skipchain(n);
	else if (!strcmp(cmd, "session"))
		test_session(n);
	else if (!strcmp(cmd, "kinds"))
		test_kinds(n);
	else if (!strcmp(cmd, "args7"))
		test_args7();
	else if (!strcmp(cmd, "pinned"))
		test_pinned(n);
	else if (!strcmp(cmd, "pinned-detach"))
		test_pinned_detach();
	else if (!strcmp(cmd, "drain-backoff"))
		test_drain_backoff();
	else {
		fprintf(stderr, "usage: %s fexit|fmodret|mmap|sleep|rollback|coexist|skipchain|session|kinds|args7|pinned|pinned-detach|drain-backoff [N]\n",
			argv[0]);
		return 2;
	}
	btf__free(btf);
	return check_failures ? 1 : 0;
}
#endif /* BPFMUX_HAVE_GLOBAL_TRAMP */
