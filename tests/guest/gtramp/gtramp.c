// SPDX-License-Identifier: GPL-2.0
/*
 * Guest tests of the series' global-trampoline backend for tracing multi-links
 * (link_create.flags = BPF_F_TRACING_MULTI_GLOBAL).
 *
 *   gtramp probe            exit 0 if the kernel accepts the flag, 3 if it refuses it
 *                           with EINVAL (stock kernels), 1 otherwise
 *   gtramp basic N          one function: exact count, link info and fdinfo say "global",
 *                           nothing counted after detach
 *   gtramp many N MIN       >= MIN functions with a cookie each: exact counts and cookies
 *   gtramp all N            every safe function with up to 12 arguments, exact count
 *   gtramp args             do_mmap (9 arguments, 3 on the stack): every argument exact
 *   gtramp rollback         a refused target fails the whole link and leaves nothing behind
 *   gtramp churn N          N changes of up to four links on overlapping sets of functions
 *                           (the kernel's function table changes in place and is rebuilt now
 *                           and then): after each, exact counts and cookies for every link
 *   gtramp coexist N        per-function fentry and global multi on one function, both orders
 *   gtramp ipmodify N       an IPMODIFY ftrace user (gtramp_kmod.ko, like livepatch) on
 *                           __x64_sys_getpgid: fentry.multi keeps counting exactly in both
 *                           orders; fexit/fmod_ret/fsession.multi and the module refuse
 *                           each other with EBUSY and leave nothing behind
 *   gtramp ipmodify-peer N  the module, a per-function fentry or fexit and a global link of
 *                           each kind on getpgid, in every order of arrival and of
 *                           departure: a global link that calls the function and the
 *                           module refuse each other (EBUSY), the rest attaches; after each
 *                           step every call runs the module's replacement while it is
 *                           loaded and every program counts it
 *   gtramp ipmodify-multi N the module and a per-function multi-link of each kind, in
 *                           every order of arrival and departure
 *   gtramp ipmodify-other N the module and a per-function fexit.multi on getpgid while
 *                           other functions move from per-function to global links
 *   gtramp ipmodify-transient N
 *                           N refused fexit.multi attaches next to the module and a global
 *                           fentry.multi: no call of getpgid made meanwhile by another
 *                           process runs the function's own body
 *   gtramp detach-fault N [all]
 *                           the ftrace update of a detach fails (failslab, this thread
 *                           only): the functions run their own code and no program, their
 *                           stubs go to no other function (a link attached later on
 *                           another function counts only its calls), the kernel says so
 *                           once and gives the sites back later, after which a
 *                           per-function fentry attaches and counts exactly; all: the
 *                           first link is on every safe function
 *   gtramp detach-nofail N
 *                           global fentry.multi and fexit.multi links on a few hundred
 *                           functions and fentry.multi on every safe one, each detached
 *                           with the tracefs events kmem:kmalloc, kmem:kmem_cache_alloc and
 *                           kmem:mm_page_alloc recording this thread's __GFP_NOFAIL
 *                           allocations, while failslab and fail_page_alloc fail every
 *                           other allocation of this thread: no __GFP_NOFAIL allocation,
 *                           the detach completes, the functions run no program, and once
 *                           the kernel gave their sites back a per-function fentry on
 *                           getpgid attaches and counts exactly
 *   gtramp counter-fault N
 *                           the allocation of in-flight counters fails (failslab below
 *                           counter_chunk_alloc): an fexit.multi attach is refused with
 *                           ENOMEM and leaves nothing; a detach shares one counter, the
 *                           kernel says so; links come and go on those functions while a
 *                           thread sleeps in one and two more enter and leave it: the
 *                           sleeper returns, the link left counts exactly
 *   gtramp alias N          two BTF ids of one function (__x64_sys_munlockall and its
 *                           alias) in one global link: EBUSY (the program would run twice
 *                           per call); each alone counts each of N calls once
 *   gtramp stress SECS [per-function] [all-cpus]
 *                           attach/detach in a loop while two workers call the functions;
 *                           per-function: upstream's backend, for comparison. Everything
 *                           runs on CPU 0 unless all-cpus: under QEMU TCG with 2 vCPUs,
 *                           patching call sites that another vCPU is executing dies of an
 *                           unclaimed int3 at the site, with either backend and on stock
 *                           Debian 7.3.4 too (see kernel/README.md, "Known issues").
 *
 * Each check prints "ok - ..." or "FAIL - ..."; exit status 0 when all hold.
 */
#define _GNU_SOURCE	/* sched_setaffinity */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/klog.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "../lib/check.h"
#include "../lib/counter.h"
#include "../lib/funcs.h"
#include "../lib/kmod.h"

#ifndef BPFMUX_HAVE_GLOBAL_TRAMP
/* Built against a libbpf without the series (kernel tree not patched yet): fail when run. */
int main(void)
{
	fprintf(stderr, "gtramp: built without BPF_F_TRACING_MULTI_GLOBAL; run 'make kernel'\n");
	return 1;
}
#else

static char obj_path[4096];	/* gtramp.bpf.o, next to this binary */
static char gexit_path[4096];	/* gexit.bpf.o: fexit, fmod_ret and fsession programs */
static char kmod_path[4096];	/* gtramp_kmod.ko: the IPMODIFY ftrace user */

static void call_getpgid(long n)
{
	for (long i = 0; i < n; i++)
		syscall(SYS_getpgid, 0);
}

static void call_getpriority(long n)
{
	for (long i = 0; i < n; i++)
		syscall(SYS_getpriority, 0 /* PRIO_PROCESS */, 0);
}

static struct bpf_link *attach_flags(struct bpf_program *prog, const __u32 *ids,
				     const __u64 *cookies, size_t cnt, __u32 flags)
{
	LIBBPF_OPTS(bpf_tracing_multi_opts, opts, .ids = ids, .cookies = cookies, .cnt = cnt,
		    .flags = flags);

	return bpf_program__attach_tracing_multi(prog, NULL, &opts);
}

static struct bpf_link *attach_global(struct bpf_program *prog, const __u32 *ids,
				      const __u64 *cookies, size_t cnt)
{
	return attach_flags(prog, ids, cookies, cnt, BPF_F_TRACING_MULTI_GLOBAL);
}

static int fdinfo_has(int fd, const char *needle)
{
	char path[64], buf[4096];
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	return strstr(buf, needle) != NULL;
}

static __s32 func_id(const struct btf *btf, const char *name)
{
	return btf__find_by_name_kind(btf, name, BTF_KIND_FUNC);
}

static int cmp_u32(const void *a, const void *b)
{
	__u32 x = *(const __u32 *)a, y = *(const __u32 *)b;

	return (x > y) - (x < y);
}

/* Must not be counted: the kernel dropped everything on detach. */
static void check_detached(struct bpf_object *obj, unsigned long addr, __u64 before)
{
	call_getpgid(5);
	check(counter_hits(obj, addr) == before, "nothing counted after detach (%llu, was %llu)",
	      (unsigned long long)counter_hits(obj, addr), (unsigned long long)before);
}

static int test_probe(void)
{
	struct btf *btf = btf__load_vmlinux_btf();
	struct bpf_program *prog;
	struct bpf_object *obj;
	struct bpf_link *link;
	__u32 id;
	int err;

	if (!btf)
		return 1;
	id = func_id(btf, "__x64_sys_getpgid");
	obj = counter_load(obj_path, "fentry_multi", getpid(), &prog);
	if (!obj)
		return 1;
	link = attach_global(prog, &id, NULL, 1);
	err = link ? 0 : errno;
	bpf_link__destroy(link);
	bpf_object__close(obj);
	btf__free(btf);
	printf("global backend: %s\n", link ? "yes" : strerror(err));
	return link ? 0 : err == EINVAL ? 3 : 1;
}

static void test_basic(long n)
{
	unsigned long addr = ksym_addr("__x64_sys_getpgid");
	struct bpf_link_info info = {};
	__u32 info_len = sizeof(info), id;
	struct bpf_program *prog;
	struct bpf_object *obj;
	struct bpf_link *link;
	struct btf *btf;
	int err;

	btf = btf__load_vmlinux_btf();
	check(btf && addr, "vmlinux BTF and __x64_sys_getpgid");
	if (!btf || !addr)
		return;
	id = func_id(btf, "__x64_sys_getpgid");
	obj = counter_load(obj_path, "fentry_multi", getpid(), &prog);
	check(obj != NULL, "program loads");
	if (!obj)
		goto out;
	link = attach_global(prog, &id, NULL, 1);
	check(link != NULL, "global link on __x64_sys_getpgid (%s)", link ? "ok" : strerror(errno));
	if (link) {
		err = bpf_link_get_info_by_fd(bpf_link__fd(link), &info, &info_len);
		check(!err && info.type == BPF_LINK_TYPE_TRACING_MULTI &&
		      info.tracing_multi.count == 1 &&
		      info.tracing_multi.flags == BPF_F_TRACING_MULTI_GLOBAL,
		      "link info: type %u, %u functions, flags %#x", info.type,
		      info.tracing_multi.count, info.tracing_multi.flags);
		check(fdinfo_has(bpf_link__fd(link), "backend:\tglobal"), "fdinfo says backend global");
		call_getpgid(n);
		check(counter_hits(obj, addr) == (__u64)n, "counted %llu of %ld calls",
		      (unsigned long long)counter_hits(obj, addr), n);
		bpf_link__destroy(link);
		check_detached(obj, addr, n);
	}
	bpf_object__close(obj);
out:
	btf__free(btf);
}

/* Cookie of function i is i + 1000, so each function's cookie is recognisable. */
static void test_set(long n, size_t min_funcs, int all)
{
	static const char *const some[] = {
		"__x64_sys_*", "vfs_*", "ext4_*", "tcp_*", "udp_*", "inet_*", "proc_*", "seq_*",
		"kernfs_*", "pipe_*", "sock_*", NULL };
	static const char *const every[] = { "*", NULL };
	static const char *const must[] = { "__x64_sys_getpgid", "__x64_sys_getpriority", NULL };
	unsigned long pgid = ksym_addr("__x64_sys_getpgid");
	unsigned long prio = ksym_addr("__x64_sys_getpriority");
	struct bpf_program *prog;
	struct bpf_object *obj;
	struct bpf_link *link;
	struct func_set set;
	__u64 *cookies = NULL;
	struct btf *btf;
	double t0, t1;
	int err, cfd;

	btf = btf__load_vmlinux_btf();
	check(btf && pgid && prio, "vmlinux BTF, getpgid and getpriority");
	if (!btf || !pgid || !prio)
		return;
	err = func_set_collect_args(&set, btf, all ? every : some, must,
				    all ? (size_t)-1 : min_funcs + min_funcs / 2, all ? 12 : 6);
	check(!err && set.cnt >= min_funcs, "found %zu functions (need %zu)", set.cnt, min_funcs);
	if (err || set.cnt < min_funcs)
		goto out_btf;
	cookies = calloc(set.cnt, sizeof(*cookies));
	for (size_t i = 0; cookies && i < set.cnt; i++)
		cookies[i] = 1000 + i;
	obj = counter_load(obj_path, "fentry_multi", getpid(), &prog);
	check(obj && cookies, "program loads");
	if (!obj || !cookies)
		goto out_set;

	t0 = now();
	link = attach_global(prog, set.ids, cookies, set.cnt);
	t1 = now();
	check(link != NULL, "global link on %zu functions (%s), attach %.3f s", set.cnt,
	      link ? "ok" : strerror(errno), t1 - t0);
	if (link) {
		call_getpgid(n);
		call_getpriority(n / 2);
		check(counter_hits(obj, pgid) == (__u64)n, "getpgid counted %llu of %ld",
		      (unsigned long long)counter_hits(obj, pgid), n);
		check(counter_hits(obj, prio) == (__u64)(n / 2), "getpriority counted %llu of %ld",
		      (unsigned long long)counter_hits(obj, prio), n / 2);
		cfd = bpf_map__fd(bpf_object__find_map_by_name(obj, "cookies"));
		for (size_t i = 0; i < 2; i++) {
			unsigned long a = i ? prio : pgid;
			const char *name = i ? "__x64_sys_getpriority" : "__x64_sys_getpgid";
			__u64 key = a, got = 0, want = 0;

			for (size_t j = 0; j < set.cnt; j++)
				if (!strcmp(set.names[j], name))
					want = cookies[j];
			bpf_map_lookup_elem(cfd, &key, &got);
			check(got == want && want, "%s saw cookie %llu (want %llu)", name,
			      (unsigned long long)got, (unsigned long long)want);
		}
		t0 = now();
		bpf_link__destroy(link);
		t1 = now();
		printf("detach %.3f s\n", t1 - t0);
		check_detached(obj, pgid, n);
	}
	bpf_object__close(obj);
out_set:
	free(cookies);
	func_set_free(&set);
out_btf:
	btf__free(btf);
}

/*
 * do_mmap(file, addr, len, prot, flags, vm_flags, pgoff, populate, uf): nine arguments, the
 * last three on the stack. Map a file at page offset 5 with a length nobody else uses.
 */
static void test_args(void)
{
	const long pg = sysconf(_SC_PAGESIZE), len = 3 * pg;
	__u64 cfg0, cfg1, v[14] = {};
	struct bpf_program *prog;
	struct bpf_object *obj;
	struct bpf_link *link;
	int fd, cfd, afd;
	struct btf *btf;
	void *p;
	__u32 id;

	btf = btf__load_vmlinux_btf();
	cfg0 = ksym_addr("do_mmap");
	check(btf && cfg0 && func_id(btf, "do_mmap") > 0, "do_mmap is in BTF and kallsyms");
	if (!btf || !cfg0)
		goto out_btf;
	id = func_id(btf, "do_mmap");
	obj = counter_load(obj_path, "fentry_args", getpid(), &prog);
	check(obj != NULL, "program loads");
	if (!obj)
		goto out_btf;
	cfd = bpf_map__fd(bpf_object__find_map_by_name(obj, "cfg"));
	afd = bpf_map__fd(bpf_object__find_map_by_name(obj, "args"));
	cfg1 = len;
	bpf_map_update_elem(cfd, &(__u32){0}, &cfg0, BPF_ANY);
	bpf_map_update_elem(cfd, &(__u32){1}, &cfg1, BPF_ANY);
	link = attach_global(prog, &id, NULL, 1);
	check(link != NULL, "global link on do_mmap (%s)", link ? "ok" : strerror(errno));
	fd = open("/proc/self/exe", O_RDONLY);
	if (link && fd >= 0) {
		p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 5 * pg);
		check(p != MAP_FAILED, "mmap of the test binary at page 5");
		if (p != MAP_FAILED)
			munmap(p, len);
		for (__u32 k = 0; k < 14; k++)
			bpf_map_lookup_elem(afd, &k, &v[k]);
		check(v[13] == 1, "one call captured (%llu)", (unsigned long long)v[13]);
		check(v[0] == 9, "bpf_get_func_arg_cnt() = %llu (want 9)", (unsigned long long)v[0]);
		check(v[1] != 0 && v[2] == 0 && v[3] == (__u64)len && v[4] == PROT_READ &&
		      (v[5] & MAP_PRIVATE),
		      "register arguments: file %#llx addr %llu len %llu prot %llu flags %#llx",
		      (unsigned long long)v[1], (unsigned long long)v[2],
		      (unsigned long long)v[3], (unsigned long long)v[4], (unsigned long long)v[5]);
		check(v[7] == 5 && v[8] != 0,
		      "stack arguments: pgoff %llu (want 5), populate %#llx",
		      (unsigned long long)v[7], (unsigned long long)v[8]);
	}
	if (fd >= 0)
		close(fd);
	bpf_link__destroy(link);
	bpf_object__close(obj);
out_btf:
	btf__free(btf);
}

/* Functions the kernel refuses to trace; the first one present in BTF is used. */
static const char *const refused[] = {
	"migrate_disable", "migrate_enable", "__rcu_read_lock", "__rcu_read_unlock",
	"rcu_read_unlock_strict", "preempt_count_sub", NULL };

static void test_rollback(void)
{
	unsigned long addr = ksym_addr("__x64_sys_getpgid");
	struct bpf_program *prog, *prog1;
	struct bpf_object *obj, *obj1;
	struct bpf_link *link;
	struct btf *btf;
	const char *bad = NULL;
	__u32 ids[3];
	int err;

	btf = btf__load_vmlinux_btf();
	if (!btf) {
		check(0, "vmlinux BTF");
		return;
	}
	for (const char *const *r = refused; *r && !bad; r++)
		if (func_id(btf, *r) > 0)
			bad = *r;
	check(bad != NULL, "a refused function is in BTF (%s)", bad ? bad : "none");
	if (!bad)
		goto out_btf;
	ids[0] = func_id(btf, "__x64_sys_getpgid");
	ids[1] = func_id(btf, "__x64_sys_getpriority");
	ids[2] = func_id(btf, bad);
	qsort(ids, 3, sizeof(ids[0]), cmp_u32);
	obj = counter_load(obj_path, "fentry_multi", getpid(), &prog);
	obj1 = counter_load(obj_path, "fentry_one", getpid(), &prog1);
	check(obj && obj1, "programs load");
	if (!obj || !obj1)
		goto out_obj;
	link = attach_global(prog, ids, NULL, 3);
	err = errno;
	check(link == NULL, "global link including %s is refused (%s)", bad,
	      link ? "attached!" : strerror(err));
	bpf_link__destroy(link);
	call_getpgid(10);
	check(counter_hits(obj, addr) == 0, "nothing attached after the refusal (%llu counted)",
	      (unsigned long long)counter_hits(obj, addr));
	/* The site must be free again for a per-function trampoline. */
	link = bpf_program__attach(prog1);
	check(link != NULL, "fentry on __x64_sys_getpgid still attaches (%s)",
	      link ? "ok" : strerror(errno));
	if (link) {
		call_getpgid(7);
		check(counter_hits(obj1, addr) == 7, "and counts 7 of 7 (%llu)",
		      (unsigned long long)counter_hits(obj1, addr));
	}
	bpf_link__destroy(link);
out_obj:
	bpf_object__close(obj);
	bpf_object__close(obj1);
out_btf:
	btf__free(btf);
}

/*
 * Links come and go on overlapping sets of functions, one program per link, so that the
 * kernel's table of functions changes in place (functions joining, leaving, replacing
 * their metadata, joining again into the slots others left) and is rebuilt now and then,
 * growing and shrinking. After every change each program must count exactly the calls of
 * getpgid and getpriority that its link covers, with the cookie given for it, and nothing
 * else. The choices come from a fixed seed: a failure replays.
 */
#define CHURN_LINKS 4

struct churn_slot {
	struct bpf_object *obj;
	struct bpf_program *prog;
	struct bpf_link *link;
	size_t cnt;
	__u64 cookie[2];	/* of getpgid, getpriority; 0: not in the link */
};

static __u64 churn_rand(__u64 *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return *state;
}

/* Exact counts and cookies of every slot for 7 getpgid and 3 getpriority calls. */
static int churn_check(struct churn_slot *slots, const unsigned long *addr, char *why,
		       size_t len)
{
	static const long calls[2] = { 7, 3 };
	__u64 before[CHURN_LINKS][2];

	for (int s = 0; s < CHURN_LINKS; s++)
		for (int f = 0; f < 2; f++)
			before[s][f] = counter_hits(slots[s].obj, addr[f]);
	call_getpgid(calls[0]);
	call_getpriority(calls[1]);
	for (int s = 0; s < CHURN_LINKS; s++) {
		int cfd = bpf_map__fd(bpf_object__find_map_by_name(slots[s].obj, "cookies"));

		for (int f = 0; f < 2; f++) {
			__u64 got = counter_hits(slots[s].obj, addr[f]) - before[s][f];
			__u64 want = slots[s].link && slots[s].cookie[f] ? calls[f] : 0;
			__u64 key = addr[f], cookie = 0;

			if (got != want) {
				snprintf(why, len, "link %d: %s counted %llu, want %llu", s,
					 f ? "getpriority" : "getpgid", (unsigned long long)got,
					 (unsigned long long)want);
				return 0;
			}
			if (!want)
				continue;
			bpf_map_lookup_elem(cfd, &key, &cookie);
			if (cookie != slots[s].cookie[f]) {
				snprintf(why, len, "link %d: %s saw cookie %llu, want %llu", s,
					 f ? "getpriority" : "getpgid", (unsigned long long)cookie,
					 (unsigned long long)slots[s].cookie[f]);
				return 0;
			}
		}
	}
	return 1;
}

static void test_churn(long rounds)
{
	static const char *const some[] = {
		"__x64_sys_*", "vfs_*", "ext4_*", "tcp_*", "udp_*", "inet_*", "proc_*", "seq_*",
		"kernfs_*", "pipe_*", "sock_*", NULL };
	static const char *const must[] = { "__x64_sys_getpgid", "__x64_sys_getpriority", NULL };
	static const size_t sizes[] = { 1, 20, 200, 0 /* all */ };
	unsigned long addr[2] = { ksym_addr("__x64_sys_getpgid"),
				  ksym_addr("__x64_sys_getpriority") };
	struct churn_slot slots[CHURN_LINKS] = {};
	__u64 state = 0x9e3779b97f4a7c15ULL, *cookies = NULL;
	size_t fidx[2] = { SIZE_MAX, SIZE_MAX };
	int bad = 0, joins = 0, leaves = 0;
	struct func_set set = {};
	__u32 *ids = NULL;
	struct btf *btf;
	char why[160];

	btf = btf__load_vmlinux_btf();
	check(btf && addr[0] && addr[1], "vmlinux BTF, getpgid and getpriority");
	if (!btf || !addr[0] || !addr[1])
		return;
	if (func_set_collect_args(&set, btf, some, must, 1500, 6) || set.cnt < 500) {
		check(0, "function set for the churn test (%zu functions)", set.cnt);
		goto out;
	}
	for (size_t j = 0; j < set.cnt; j++)
		for (int f = 0; f < 2; f++)
			if (!strcmp(set.names[j], must[f]))
				fidx[f] = j;
	ids = calloc(set.cnt, sizeof(*ids));
	cookies = calloc(set.cnt, sizeof(*cookies));
	check(ids && cookies && fidx[0] != SIZE_MAX && fidx[1] != SIZE_MAX,
	      "%zu functions, getpgid and getpriority among them", set.cnt);
	if (!ids || !cookies || fidx[0] == SIZE_MAX || fidx[1] == SIZE_MAX)
		goto out;
	for (int s = 0; s < CHURN_LINKS; s++) {
		slots[s].obj = counter_load(obj_path, "fentry_multi", getpid(), &slots[s].prog);
		if (!slots[s].obj) {
			check(0, "program %d loads", s);
			goto out;
		}
	}
	for (long r = 0; r < rounds && !bad; r++) {
		struct churn_slot *sl = &slots[churn_rand(&state) % CHURN_LINKS];
		size_t want, n = 0;

		if (sl->link) {
			bpf_link__destroy(sl->link);
			sl->link = NULL;
			leaves++;
		} else {
			want = sizes[churn_rand(&state) % 4] ?: set.cnt;
			for (size_t j = 0; j < set.cnt; j++) {
				if (churn_rand(&state) % set.cnt >= want)
					continue;
				ids[n] = set.ids[j];
				cookies[n] = (__u64)(r + 1) << 32 | j;
				n++;
			}
			if (!n) {	/* at least one function, sometimes getpgid */
				ids[0] = set.ids[fidx[r & 1]];
				cookies[0] = (__u64)(r + 1) << 32 | fidx[r & 1];
				n = 1;
			}
			sl->cookie[0] = sl->cookie[1] = 0;
			for (size_t i = 0; i < n; i++)
				for (int f = 0; f < 2; f++)
					if (ids[i] == set.ids[fidx[f]])
						sl->cookie[f] = cookies[i];
			sl->link = attach_global(sl->prog, ids, cookies, n);
			sl->cnt = n;
			if (!sl->link) {
				check(0, "round %ld: global link on %zu functions (%s)", r, n,
				      strerror(errno));
				bad = 1;
				break;
			}
			joins++;
		}
		if (!churn_check(slots, addr, why, sizeof(why))) {
			check(0, "round %ld, after %s a link of %zu functions: %s", r,
			      sl->link ? "attaching" : "detaching", sl->cnt, why);
			bad = 1;
		}
	}
	check(!bad, "%ld changes (%d links attached, %d detached, up to %d at once, "
	      "1 to %zu functions each): counts and cookies exact after every change",
	      rounds, joins, leaves, CHURN_LINKS, set.cnt);
	for (int s = 0; s < CHURN_LINKS; s++) {
		bpf_link__destroy(slots[s].link);
		slots[s].link = NULL;
	}
	bad = !churn_check(slots, addr, why, sizeof(why));
	check(!bad, "nothing counted after the last detach%s%s", bad ? ": " : "", bad ? why : "");
out:
	for (int s = 0; s < CHURN_LINKS; s++)
		bpf_object__close(slots[s].obj);
	free(ids);
	free(cookies);
	func_set_free(&set);
	btf__free(btf);
}

/*
 * A function with an ordinary fentry program (per-function trampoline) and a global
 * multi program: both run, in either attach order, and detaching one leaves the other.
 */
static void test_coexist(long n)
{
	unsigned long addr = ksym_addr("__x64_sys_getpgid");
	struct bpf_program *gprog, *fprog;
	struct bpf_object *gobj, *fobj;
	struct bpf_link *g, *f;
	__u64 gbase, fbase;
	struct btf *btf;
	__u32 ids[2];

	btf = btf__load_vmlinux_btf();
	if (!btf) {
		check(0, "vmlinux BTF");
		return;
	}
	ids[0] = func_id(btf, "__x64_sys_getpgid");
	ids[1] = func_id(btf, "__x64_sys_getpriority");
	qsort(ids, 2, sizeof(ids[0]), cmp_u32);
	gobj = counter_load(obj_path, "fentry_multi", getpid(), &gprog);
	fobj = counter_load(obj_path, "fentry_one", getpid(), &fprog);
	check(gobj && fobj, "programs load");
	if (!gobj || !fobj)
		goto out;
	for (int order = 0; order < 2; order++) {
		const char *first = order ? "global" : "fentry";

		if (order) {
			g = attach_global(gprog, ids, NULL, 2);
			f = g ? bpf_program__attach(fprog) : NULL;
		} else {
			f = bpf_program__attach(fprog);
			g = f ? attach_global(gprog, ids, NULL, 2) : NULL;
		}
		check(f && g, "%s first: both attach (%s)", first, f && g ? "ok" : strerror(errno));
		if (!f || !g) {
			bpf_link__destroy(f);
			bpf_link__destroy(g);
			continue;
		}
		gbase = counter_hits(gobj, addr);
		fbase = counter_hits(fobj, addr);
		call_getpgid(n);
		check(counter_hits(gobj, addr) - gbase == (__u64)n &&
		      counter_hits(fobj, addr) - fbase == (__u64)n,
		      "%s first: global counted %llu, fentry %llu of %ld", first,
		      (unsigned long long)(counter_hits(gobj, addr) - gbase),
		      (unsigned long long)(counter_hits(fobj, addr) - fbase), n);
		/* Detach the one attached first; the other keeps counting alone. */
		bpf_link__destroy(order ? g : f);
		gbase = counter_hits(gobj, addr);
		fbase = counter_hits(fobj, addr);
		call_getpgid(n);
		check(counter_hits(gobj, addr) - gbase == (__u64)(order ? 0 : n) &&
		      counter_hits(fobj, addr) - fbase == (__u64)(order ? n : 0),
		      "%s first, %s detached: global %llu, fentry %llu", first, first,
		      (unsigned long long)(counter_hits(gobj, addr) - gbase),
		      (unsigned long long)(counter_hits(fobj, addr) - fbase));
		bpf_link__destroy(order ? f : g);
		gbase = counter_hits(gobj, addr);
		fbase = counter_hits(fobj, addr);
		call_getpgid(5);
		check(counter_hits(gobj, addr) == gbase && counter_hits(fobj, addr) == fbase,
		      "%s first: nothing counted after both detached", first);
	}
out:
	bpf_object__close(gobj);
	bpf_object__close(fobj);
	btf__free(btf);
}

/*
 * The IPMODIFY ftrace user of gtramp_kmod.ko (what livepatch does): its handler sends
 * __x64_sys_getpgid to a replacement that returns KMOD_RET and counts this process's calls.
 */
#define KMOD_NAME "gtramp_kmod"
#define KMOD_RET 4242

static int kmod_loaded(void)
{
	return kmod_is_loaded(KMOD_NAME);
}

/* 0, or the errno of loading (the module's init returns the ftrace error). */
static int kmod_load(void)
{
	char params[32];

	snprintf(params, sizeof(params), "tgid=%d", getpid());
	return kmod_insert(kmod_path, params);
}

static int kmod_unload(void)
{
	return kmod_remove(KMOD_NAME);
}

/* Calls of the module's replacement so far; -1 when the module is not there. */
static long long kmod_calls(void)
{
	FILE *f = fopen("/sys/module/" KMOD_NAME "/parameters/calls", "r");
	long long v = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* How many of @n calls of getpgid(0) returned @want (-errno for a failed call). */
static long getpgid_returning(long n, long want)
{
	long same = 0;

	for (long i = 0; i < n; i++) {
		long r = syscall(SYS_getpgid, 0);

		if (r == -1)
			r = -errno;
		same += r == want;
	}
	return same;
}

/* The kinds that call the function themselves, from gexit.bpf.o. */
static const char *const origin_kinds[] = { "fexit", "fmod_ret", "fsession" };
static const char *const origin_progs[] = { "fexit_multi", "fmodret_multi", "session_multi" };
#define NR_ORIGIN_KINDS 3
#define MAX_COUNTED (1 + NR_ORIGIN_KINDS)

/* A program expected to count @want calls of a function. */
struct counted {
	const char *name;
	struct bpf_object *obj;
	long want;
};

/* "EBUSY" for EBUSY, "ok" for 0 */
static const char *errname(int err)
{
	const char *name = err ? strerrorname_np(err) : "ok";

	return name ? name : "?";
}

static void counts_before(const struct counted *progs, int nprogs, unsigned long addr,
			  __u64 *before)
{
	for (int i = 0; i < nprogs && i < MAX_COUNTED; i++)
		before[i] = counter_hits(progs[i].obj, addr);
}

/* Each program in @progs counted its want on @func at @addr since @before. */
static void check_counts(const char *what, const char *func, unsigned long addr,
			 const struct counted *progs, int nprogs, const __u64 *before)
{
	for (int i = 0; i < nprogs && i < MAX_COUNTED; i++) {
		__u64 got = counter_hits(progs[i].obj, addr) - before[i];

		check(got == (__u64)progs[i].want, "%s: %s counted %llu on %s (want %ld)", what,
		      progs[i].name, (unsigned long long)got, func, progs[i].want);
	}
}

/*
 * @n calls of getpgid(0) must all return @ret, the module's replacement must run @kmod of
 * them (-1: the module must not be loaded), and each program in @progs count its number
 * of them on the function at @addr. All exact.
 */
static void expect_getpgid(const char *what, unsigned long addr, long n, long ret, long kmod,
			   const struct counted *progs, int nprogs)
{
	long long k0 = kmod_calls(), k1;
	__u64 before[MAX_COUNTED];
	long same;

	counts_before(progs, nprogs, addr, before);
	same = getpgid_returning(n, ret);
	k1 = kmod_calls();
	check(same == n, "%s: %ld of %ld getpgid(0) returned %ld", what, same, n, ret);
	if (kmod < 0)
		check(k0 < 0 && k1 < 0 && !kmod_loaded(), "%s: module not loaded", what);
	else
		check(k0 >= 0 && k1 >= 0 && k1 - k0 == kmod,
		      "%s: the module's replacement ran %lld times (want %ld)", what,
		      k0 >= 0 && k1 >= 0 ? k1 - k0 : -1, kmod);
	check_counts(what, "getpgid", addr, progs, nprogs, before);
}

/* getpriority, which the module leaves alone: each program in @progs counts its want. */
static void expect_getpriority(const char *what, long n, const struct counted *progs,
			       int nprogs)
{
	unsigned long addr = ksym_addr("__x64_sys_getpriority");
	__u64 before[MAX_COUNTED];

	counts_before(progs, nprogs, addr, before);
	call_getpriority(n);
	check_counts(what, "getpriority", addr, progs, nprogs, before);
}

/*
 * Not a check: what @n calls of getpgid(0) do while a link the kernel should have refused
 * is attached, for the report (returns seen, the module's and each program's counts).
 */
static void describe_getpgid(const char *what, unsigned long addr, long n, long real,
			     const struct counted *progs, int nprogs)
{
	long long k0 = kmod_calls(), k1;
	long kmod_ret = 0, real_ret = 0, other = 0, last = 0;
	__u64 before[MAX_COUNTED];

	counts_before(progs, nprogs, addr, before);
	for (long i = 0; i < n; i++) {
		long r = syscall(SYS_getpgid, 0);

		if (r == -1)
			r = -errno;
		if (r == KMOD_RET)
			kmod_ret++;
		else if (r == real)
			real_ret++;
		else
			other++, last = r;
	}
	k1 = kmod_calls();
	printf("# %s: of %ld getpgid(0), %ld returned %d (module), %ld returned %ld, %ld other (last %ld); module ran %lld",
	       what, n, kmod_ret, KMOD_RET, real_ret, real, other, last, k1 - k0);
	for (int i = 0; i < nprogs && i < MAX_COUNTED; i++)
		printf(", %s counted %llu", progs[i].name,
		       (unsigned long long)(counter_hits(progs[i].obj, addr) - before[i]));
	putchar('\n');
	fflush(stdout);
}

/*
 * fentry.multi on the global backend keeps running while an IPMODIFY user redirects the
 * function, whichever came first; programs that call the function (fexit, fmod_ret,
 * fsession) and the IPMODIFY user refuse each other with EBUSY and leave nothing behind.
 * fmod_ret makes getpgid fail with EPERM whenever it runs.
 */
static void test_ipmodify(long n)
{
	unsigned long addr = ksym_addr("__x64_sys_getpgid");
	struct bpf_object *fobj = NULL, *xobj[NR_ORIGIN_KINDS] = {};
	struct bpf_program *fprog, *xprog[NR_ORIGIN_KINDS];
	struct counted fentry_only[1], fentry_none[MAX_COUNTED], next_to[MAX_COUNTED];
	struct bpf_link *g = NULL, *x;
	__u32 ids[3], pgid_id;
	struct btf *btf;
	long real;
	int err;

	check(access(kmod_path, R_OK) == 0, "test module %s (built by tests/guest/Makefile)",
	      kmod_path);
	if (kmod_loaded()) {
		check(0, "%s was loaded before the test (unloading: %s)", KMOD_NAME,
		      strerror(kmod_unload()));
		return;
	}
	real = syscall(SYS_getpgid, 0);
	check(real >= 0 && real != KMOD_RET, "getpgid(0) = %ld without the module", real);
	btf = btf__load_vmlinux_btf();
	check(btf && addr, "vmlinux BTF and __x64_sys_getpgid");
	if (!btf || !addr || real < 0 || real == KMOD_RET || access(kmod_path, R_OK))
		goto out_btf;
	pgid_id = ids[0] = func_id(btf, "__x64_sys_getpgid");
	ids[1] = func_id(btf, "__x64_sys_getpriority");
	ids[2] = func_id(btf, "__x64_sys_getsid");
	check((__s32)ids[1] > 0 && (__s32)ids[2] > 0, "getpriority and getsid are in BTF");
	if ((__s32)ids[1] <= 0 || (__s32)ids[2] <= 0)
		goto out_btf;
	qsort(ids, 3, sizeof(ids[0]), cmp_u32);

	fobj = counter_load(obj_path, "fentry_multi", getpid(), &fprog);
	for (int k = 0; k < NR_ORIGIN_KINDS; k++)
		xobj[k] = counter_load(gexit_path, origin_progs[k], getpid(), &xprog[k]);
	check(fobj && xobj[0] && xobj[1] && xobj[2], "programs load (%s, %s)", obj_path,
	      gexit_path);
	if (!fobj || !xobj[0] || !xobj[1] || !xobj[2])
		goto out;
	bpf_map_update_elem(bpf_map__fd(bpf_object__find_map_by_name(xobj[1], "cfg")),
			    &(__u32){0}, &(__u64){EPERM}, BPF_ANY);
	fentry_only[0] = (struct counted){ "fentry.multi", fobj, n };
	fentry_none[0] = (struct counted){ "fentry.multi", fobj, 0 };
	for (int k = 0; k < NR_ORIGIN_KINDS; k++)
		fentry_none[1 + k] = (struct counted){ origin_kinds[k], xobj[k], 0 };

	/* (1) the global fentry.multi link alone */
	g = attach_global(fprog, ids, NULL, 3);
	check(g != NULL, "global fentry.multi on getpgid, getpriority, getsid (%s)",
	      g ? "ok" : strerror(errno));
	if (!g)
		goto out;
	expect_getpgid("no IPMODIFY user", addr, n, real, -1, fentry_only, 1);

	/* (2) the IPMODIFY user arrives while the link is attached */
	err = kmod_load();
	check(!err, "module loads with the global link attached (%s)", errname(err));
	if (err)
		goto out;
	expect_getpgid("module loaded after the link", addr, n, KMOD_RET, n, fentry_only, 1);
	expect_getpriority("module loaded after the link", n, fentry_only, 1);

	/* (3) and leaves again */
	err = kmod_unload();
	check(!err, "module unloads (%s)", errname(err));
	if (err)
		goto out;
	expect_getpgid("module unloaded", addr, n, real, -1, fentry_only, 1);
	bpf_link__destroy(g);
	g = NULL;
	expect_getpgid("link detached", addr, 5, real, -1, fentry_none, 1);

	/* (4) the other order: the IPMODIFY user first */
	err = kmod_load();
	check(!err, "module loads (%s)", errname(err));
	if (err)
		goto out;
	g = attach_global(fprog, ids, NULL, 3);
	check(g != NULL, "global fentry.multi attaches with the module loaded (%s)",
	      g ? "ok" : strerror(errno));
	if (!g)
		goto out;
	expect_getpgid("link attached after the module", addr, n, KMOD_RET, n, fentry_only, 1);
	bpf_link__destroy(g);
	g = NULL;
	expect_getpgid("link detached, module loaded", addr, n, KMOD_RET, n, fentry_none, 1);

	/*
	 * (5) with the module loaded, programs that call the function are refused: alone on
	 * getpgid (the link would take its ftrace site), and joining a global fentry.multi
	 * link that already serves getpgid and two more functions (the site is the
	 * trampoline's already; the others must be rolled back too).
	 */
	for (int k = 0; k < NR_ORIGIN_KINDS; k++) {
		x = attach_global(xprog[k], &pgid_id, NULL, 1);
		err = x ? 0 : errno;
		check(!x && err == EBUSY,
		      "module loaded: %s.multi global on getpgid alone refused (%s, want EBUSY)",
		      origin_kinds[k], x ? "attached" : errname(err));
		if (x)
			describe_getpgid("attached anyway", addr, n, real, &fentry_none[1 + k], 1);
		bpf_link__destroy(x);
	}
	expect_getpgid("after the refusals on getpgid alone", addr, n, KMOD_RET, n,
		       fentry_none, MAX_COUNTED);
	g = attach_global(fprog, ids, NULL, 3);
	check(g != NULL, "global fentry.multi attaches again (%s)", g ? "ok" : strerror(errno));
	if (!g)
		goto out;
	for (int k = 0; k < NR_ORIGIN_KINDS; k++) {
		x = attach_global(xprog[k], ids, NULL, 3);
		err = x ? 0 : errno;
		check(!x && err == EBUSY,
		      "module and global fentry.multi: %s.multi global on the same 3 functions refused (%s, want EBUSY)",
		      origin_kinds[k], x ? "attached" : errname(err));
		if (x) {
			struct counted c[2] = { fentry_only[0], fentry_none[1 + k] };

			describe_getpgid("attached anyway", addr, n, real, c, 2);
		}
		bpf_link__destroy(x);
	}
	memcpy(next_to, fentry_none, sizeof(next_to));
	next_to[0].want = n;
	expect_getpgid("after the refusals next to fentry.multi", addr, n, KMOD_RET, n, next_to,
		       MAX_COUNTED);
	expect_getpriority("after the refusals next to fentry.multi", n, next_to,
			   MAX_COUNTED);
	bpf_link__destroy(g);
	g = NULL;
	err = kmod_unload();
	check(!err, "module unloads (%s)", errname(err));
	if (err)
		goto out;

	/* (6) with a program that calls the function attached, the module is refused */
	for (int k = 0; k < NR_ORIGIN_KINDS; k++) {
		struct counted c = { origin_kinds[k], xobj[k], n };
		char what[64];

		x = attach_global(xprog[k], ids, NULL, 3);
		check(x != NULL, "global %s.multi on getpgid, getpriority, getsid (%s)",
		      origin_kinds[k], x ? "ok" : strerror(errno));
		if (!x)
			continue;
		err = kmod_load();
		check(err == EBUSY, "%s.multi attached: loading the module refused (%s, want EBUSY)",
		      origin_kinds[k], err ? errname(err) : "loaded");
		snprintf(what, sizeof(what), "%s.multi after the refused load", origin_kinds[k]);
		if (!err) {
			struct counted c[1] = { { origin_kinds[k], xobj[k], 0 } };

			describe_getpgid("loaded anyway", addr, n, real, c, 1);
			bpf_link__destroy(x);
			check(!kmod_unload(), "module unloads");
			continue;
		}
		/* fmod_ret makes each call fail with EPERM */
		expect_getpgid(what, addr, n, k == 1 ? -EPERM : real, -1, &c, 1);
		bpf_link__destroy(x);
	}
	expect_getpgid("everything detached", addr, 5, real, -1, fentry_none, MAX_COUNTED);
out:
	bpf_link__destroy(g);
	if (kmod_loaded())
		check(!kmod_unload(), "module unloads at the end");
	bpf_object__close(fobj);
	for (int k = 0; k < NR_ORIGIN_KINDS; k++)
		bpf_object__close(xobj[k]);
out_btf:
	btf__free(btf);
}

/*
 * gtramp ipmodify-peer: three users of __x64_sys_getpgid's ftrace site arrive and leave in
 * every order: the IPMODIFY module (M), a per-function trampoline (P: fentry or fexit) and
 * a global link on getpgid, getpriority and getsid (G: each kind). The rule: M and a G that
 * calls the function (fexit, fmod_ret, fsession) refuse each other with EBUSY, whichever
 * comes second; everything else attaches. After every step, every call runs the module's
 * replacement while it is loaded and every program attached counts every call. fmod_ret
 * is configured to change nothing (skipping the function is another subject), so its own
 * count is not checked.
 */
enum { PEER_MOD, PEER_PER, PEER_GLOBAL, PEER_ACTORS };

struct peer_case {
	unsigned long addr;
	long n, real;
	const __u32 *ids;
	struct bpf_program *pprog, *gprog;
	struct bpf_object *pobj, *gobj;
	const char *pkind, *gkind;
	int g_origin, g_counts;
	int p_multi, p_uncounted;	/* P is a per-function multi-link; its count is not checked */
	struct bpf_link *p, *g;
	int on[PEER_ACTORS];
	char fail[256];		/* the first thing that went wrong in this case */
};

static void peer_fail(struct peer_case *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void peer_fail(struct peer_case *c, const char *fmt, ...)
{
	va_list ap;

	if (c->fail[0])
		return;
	va_start(ap, fmt);
	vsnprintf(c->fail, sizeof(c->fail), fmt, ap);
	va_end(ap);
}

/* n calls: the module's value while it is loaded, each attached program counts each. */
static void peer_expect(struct peer_case *c, const char *step)
{
	__u64 p0 = counter_hits(c->pobj, c->addr), g0 = counter_hits(c->gobj, c->addr);
	long want = c->on[PEER_MOD] ? KMOD_RET : c->real;
	long long k0 = kmod_calls(), k1;
	long same = getpgid_returning(c->n, want);
	__u64 p = counter_hits(c->pobj, c->addr) - p0, g = counter_hits(c->gobj, c->addr) - g0;

	k1 = kmod_calls();
	if (same != c->n)
		peer_fail(c, "%s: %ld of %ld calls returned %ld", step, same, c->n, want);
	if (c->on[PEER_MOD] && k1 - k0 != c->n)
		peer_fail(c, "%s: the module's replacement ran %lld of %ld", step, k1 - k0, c->n);
	if (!c->p_uncounted && p != (__u64)(c->on[PEER_PER] ? c->n : 0))
		peer_fail(c, "%s: %s counted %llu (want %ld)", step, c->pkind,
			  (unsigned long long)p, c->on[PEER_PER] ? c->n : 0);
	if (c->g_counts && g != (__u64)(c->on[PEER_GLOBAL] ? c->n : 0))
		peer_fail(c, "%s: %s.multi counted %llu (want %ld)", step, c->gkind,
			  (unsigned long long)g, c->on[PEER_GLOBAL] ? c->n : 0);
}

static void peer_arrive(struct peer_case *c, int who)
{
	int refuse = c->g_origin &&
		     ((who == PEER_MOD && c->on[PEER_GLOBAL]) ||
		      (who == PEER_GLOBAL && c->on[PEER_MOD]));
	const char *name[] = { "module", c->pkind, c->gkind };
	int err;

	if (who == PEER_MOD) {
		err = kmod_load();
	} else if (who == PEER_PER) {
		c->p = c->p_multi ? attach_flags(c->pprog, c->ids, NULL, 3, 0) :
				    bpf_program__attach(c->pprog);
		err = c->p ? 0 : errno;
	} else {
		c->g = attach_global(c->gprog, c->ids, NULL, 3);
		err = c->g ? 0 : errno;
	}
	if (refuse ? err != EBUSY : err != 0)
		peer_fail(c, "%s arriving: %s (want %s)", name[who], errname(err),
			  refuse ? "EBUSY" : "ok");
	c->on[who] = !err;
	peer_expect(c, name[who]);
}

static void peer_leave(struct peer_case *c, int who)
{
	const char *name[] = { "module gone", "per-function gone", "global gone" };

	if (!c->on[who])
		return;
	if (who == PEER_MOD) {
		int err = kmod_unload();

		if (err)
			peer_fail(c, "module unload: %s", errname(err));
	} else if (who == PEER_PER) {
		bpf_link__destroy(c->p);
		c->p = NULL;
	} else {
		bpf_link__destroy(c->g);
		c->g = NULL;
	}
	c->on[who] = 0;
	peer_expect(c, name[who]);
}

/* The BTF ids of getpgid, getpriority and getsid, sorted: 0, or -1 if one is missing. */
static int three_ids(const struct btf *btf, __u32 *ids)
{
	ids[0] = func_id(btf, "__x64_sys_getpgid");
	ids[1] = func_id(btf, "__x64_sys_getpriority");
	ids[2] = func_id(btf, "__x64_sys_getsid");
	qsort(ids, 3, sizeof(ids[0]), cmp_u32);
	return (__s32)ids[0] > 0 && (__s32)ids[1] > 0 && (__s32)ids[2] > 0 ? 0 : -1;
}

/* The counting multi programs of fentry, fexit, fmod_ret and fsession, in that order. */
static void load_multi_kinds(struct bpf_object **obj, struct bpf_program **prog)
{
	static const char *const names[] = { "fentry_multi", "fexit_multi", "fmodret_multi",
					     "session_multi" };

	obj[0] = counter_load(obj_path, names[0], getpid(), &prog[0]);
	for (int k = 1; k < 4; k++)
		obj[k] = counter_load(gexit_path, names[k], getpid(), &prog[k]);
}

/* Count a case and report its failure; -1 when it left the module loaded. */
static int peer_case_end(const struct peer_case *c, const char *label, int *cases, int *failed)
{
	(*cases)++;
	*failed += !!c->fail[0];
	if (c->fail[0])
		check(0, "%s: %s", label, c->fail);
	if (kmod_loaded()) {
		check(0, "module still loaded after a case");
		return -1;
	}
	return 0;
}

/*
 * What the module tests on getpgid start from: the module there and not loaded, the
 * real getpgid(0), vmlinux BTF (returned; NULL after a failed check) and the sorted ids
 * of getpgid, getpriority and getsid.
 */
static struct btf *peer_setup(__u32 *ids, long *real)
{
	struct btf *btf;

	check(access(kmod_path, R_OK) == 0 && !kmod_loaded(),
	      "test module %s present and not loaded", kmod_path);
	*real = syscall(SYS_getpgid, 0);
	btf = btf__load_vmlinux_btf();
	if (!btf || access(kmod_path, R_OK) || kmod_loaded() || *real < 0 || *real == KMOD_RET ||
	    three_ids(btf, ids)) {
		check(0, "vmlinux BTF with getpgid, getpriority and getsid");
		btf__free(btf);
		return NULL;
	}
	return btf;
}

static const int peer_orders[6][3] = {
	{ 0, 1, 2 }, { 0, 2, 1 }, { 1, 0, 2 }, { 1, 2, 0 }, { 2, 0, 1 }, { 2, 1, 0 },
};

static void test_ipmodify_peer(long n)
{
	static const char *const pprogs[] = { "fentry_one", "fexit_one" };
	static const char *const pkinds[] = { "fentry", "fexit" };
	static const char *const gkinds[] = { "fentry", "fexit", "fmod_ret", "fsession" };
	struct bpf_object *pobj[2] = {}, *gobj[4] = {};
	struct bpf_program *pprog[2], *gprog[4];
	struct btf *btf = NULL;
	char label[64];
	int cases = 0, failed = 0;
	__u32 ids[3];
	long real;

	btf = peer_setup(ids, &real);
	if (!btf)
		goto out;
	pobj[0] = counter_load(obj_path, pprogs[0], getpid(), &pprog[0]);
	pobj[1] = counter_load(gexit_path, pprogs[1], getpid(), &pprog[1]);
	load_multi_kinds(gobj, gprog);
	check(pobj[0] && pobj[1] && gobj[0] && gobj[1] && gobj[2] && gobj[3], "programs load");
	if (!pobj[0] || !pobj[1] || !gobj[0] || !gobj[1] || !gobj[2] || !gobj[3])
		goto out;

	for (int pk = 0; pk < 2; pk++) {
		for (int gk = 0; gk < 4; gk++) {
			for (int a = 0; a < 6; a++) {
				for (int l = 0; l < 6; l++) {
					struct peer_case c = {
						.addr = ksym_addr("__x64_sys_getpgid"), .n = n,
						.real = real, .ids = ids, .pprog = pprog[pk],
						.gprog = gprog[gk], .pobj = pobj[pk],
						.gobj = gobj[gk], .pkind = pkinds[pk],
						.gkind = gkinds[gk], .g_origin = gk > 0,
						.g_counts = gk != 2,
					};
					char order[8];

					for (int i = 0; i < 3; i++) {
						order[i] = "MPG"[peer_orders[a][i]];
						order[4 + i] = "MPG"[peer_orders[l][i]];
					}
					order[3] = '/';
					order[7] = 0;
					for (int i = 0; i < 3; i++)
						peer_arrive(&c, peer_orders[a][i]);
					for (int i = 0; i < 3; i++)
						peer_leave(&c, peer_orders[l][i]);
					snprintf(label, sizeof(label), "P=%s G=%s.multi, arrive/leave %s",
						 pkinds[pk], gkinds[gk], order);
					if (peer_case_end(&c, label, &cases, &failed))
						goto out;
				}
			}
		}
	}
	check(!failed, "%d of %d cases of arrival and departure orders hold (%ld calls each step)",
	      cases - failed, cases, n);
out:
	for (int k = 0; k < 2; k++)
		bpf_object__close(pobj[k]);
	for (int k = 0; k < 4; k++)
		bpf_object__close(gobj[k]);
	btf__free(btf);
}

/*
 * gtramp ipmodify-multi N: the module (M) and a per-function multi-link (P, each kind) on
 * getpgid, getpriority and getsid arrive and leave in every order. Both must attach
 * whichever comes second: a trampoline that calls the function is built to call it
 * through the stack next to the module, as for a single-function link. Upstream 7.3
 * answered EAGAIN to every exit-kind multi-link arriving after the module. Every call
 * runs the module's replacement while it is loaded and every program counts every call
 * (fmod_ret changes nothing and is not counted, as in ipmodify-peer).
 */
static void test_ipmodify_multi(long n)
{
	static const char *const kinds[] = { "fentry", "fexit", "fmod_ret", "fsession" };
	static const int orders[2][2] = { { PEER_MOD, PEER_PER }, { PEER_PER, PEER_MOD } };
	struct bpf_object *obj[4] = {};
	struct bpf_program *prog[4];
	struct btf *btf = NULL;
	char label[64];
	int cases = 0, failed = 0;
	__u32 ids[3];
	long real;

	btf = peer_setup(ids, &real);
	if (!btf)
		goto out;
	load_multi_kinds(obj, prog);
	check(obj[0] && obj[1] && obj[2] && obj[3], "programs load");
	if (!obj[0] || !obj[1] || !obj[2] || !obj[3])
		goto out;

	for (int k = 0; k < 4; k++) {
		for (int a = 0; a < 2; a++) {
			for (int l = 0; l < 2; l++) {
				struct peer_case c = {
					.addr = ksym_addr("__x64_sys_getpgid"), .n = n,
					.real = real, .ids = ids, .pprog = prog[k],
					.pobj = obj[k], .gobj = obj[k], .pkind = kinds[k],
					.gkind = kinds[k], .p_multi = 1,
					.p_uncounted = k == 2,
				};

				for (int i = 0; i < 2; i++)
					peer_arrive(&c, orders[a][i]);
				for (int i = 0; i < 2; i++)
					peer_leave(&c, orders[l][i]);
				snprintf(label, sizeof(label), "P=%s.multi, arrive %s, leave %s",
					 kinds[k], a ? "PM" : "MP", l ? "PM" : "MP");
				if (peer_case_end(&c, label, &cases, &failed))
					goto out;
			}
		}
	}
	check(!failed, "%d of %d cases of arrival and departure orders hold (%ld calls each step)",
	      cases - failed, cases, n);
out:
	for (int k = 0; k < 4; k++)
		bpf_object__close(obj[k]);
	btf__free(btf);
}

/*
 * gtramp ipmodify-other N: the module and a per-function fexit.multi link on getpgid, then,
 * one at a time, other syscalls that each get a per-function fentry.multi link and then a
 * global fentry.multi link, which takes the site over from the per-function trampoline
 * (update_ftrace_direct_mod()). ftrace asked about every IPMODIFY site of the direct ops
 * on such a move, getpgid's included, whose trampoline lock the global update does not
 * hold: a lockdep report (lockdep_assert_held_once() in bpf_tramp_ftrace_ops_func()) on a
 * lockdep build, an unlocked read of the trampoline's flags on any. Five functions, so
 * that at least one of them almost surely has another trampoline lock than getpgid. On
 * every kernel: each link attaches, counts each of N calls, and getpgid keeps returning
 * the module's value, counted.
 */
static void test_ipmodify_other(long n)
{
	/* Harmless with three zero arguments (the last two fail with EFAULT). */
	static const char *const others[] = { "__x64_sys_getpriority", "__x64_sys_getsid",
					      "__x64_sys_times", "__x64_sys_getresuid",
					      "__x64_sys_getresgid" };
	static const long nrs[] = { SYS_getpriority, SYS_getsid, SYS_times, SYS_getresuid,
				    SYS_getresgid };
	struct bpf_object *xobj = NULL, *pobj = NULL, *gobj = NULL;
	struct bpf_program *xprog, *pprog, *gprog;
	unsigned long pgid = ksym_addr("__x64_sys_getpgid");
	struct bpf_link *x = NULL, *p, *g;
	struct btf *btf = NULL;
	__u32 pgid_id, id;
	int err, bad = 0;
	long same;

	check(access(kmod_path, R_OK) == 0 && !kmod_loaded(),
	      "test module %s present and not loaded", kmod_path);
	btf = btf__load_vmlinux_btf();
	pgid_id = btf ? func_id(btf, "__x64_sys_getpgid") : 0;
	if (!btf || (__s32)pgid_id <= 0 || !pgid || access(kmod_path, R_OK) || kmod_loaded()) {
		check(0, "vmlinux BTF with getpgid");
		goto out;
	}
	xobj = counter_load(gexit_path, "fexit_multi", getpid(), &xprog);
	pobj = counter_load(obj_path, "fentry_multi", getpid(), &pprog);
	gobj = counter_load(obj_path, "fentry_multi", getpid(), &gprog);
	check(xobj && pobj && gobj, "programs load");
	if (!xobj || !pobj || !gobj)
		goto out;
	err = kmod_load();
	check(!err, "module loads: %s", errname(err));
	if (err)
		goto out;
	x = attach_flags(xprog, &pgid_id, NULL, 1, 0);
	check(x != NULL, "per-function fexit.multi on getpgid next to the module: %s",
	      x ? "ok" : errname(errno));
	for (int i = 0; x && i < 5; i++) {
		unsigned long addr = ksym_addr(others[i]);
		__u64 p0, g0;

		id = func_id(btf, others[i]);
		if ((__s32)id <= 0 || !addr) {
			check(0, "%s in BTF and kallsyms", others[i]);
			bad++;
			continue;
		}
		p = attach_flags(pprog, &id, NULL, 1, 0);
		g = p ? attach_global(gprog, &id, NULL, 1) : NULL;
		if (!p || !g) {
			check(0, "%s: per-function then global fentry.multi: %s", others[i],
			      errname(errno));
			bad++;
		} else {
			p0 = counter_hits(pobj, addr);
			g0 = counter_hits(gobj, addr);
			for (long c = 0; c < n; c++)
				syscall(nrs[i], 0, 0, 0);
			if (counter_hits(pobj, addr) - p0 != (__u64)n ||
			    counter_hits(gobj, addr) - g0 != (__u64)n) {
				check(0, "%s: counted %llu and %llu of %ld", others[i],
				      (unsigned long long)(counter_hits(pobj, addr) - p0),
				      (unsigned long long)(counter_hits(gobj, addr) - g0), n);
				bad++;
			}
		}
		bpf_link__destroy(g);
		bpf_link__destroy(p);
	}
	if (x) {
		__u64 x0 = counter_hits(xobj, pgid);

		same = getpgid_returning(n, KMOD_RET);
		check(same == n && counter_hits(xobj, pgid) - x0 == (__u64)n,
		      "getpgid: %ld of %ld calls ran the module's replacement, %llu counted", same,
		      n, (unsigned long long)(counter_hits(xobj, pgid) - x0));
	}
	check(!bad, "five functions moved between backends next to getpgid's module and trampoline");
	bpf_link__destroy(x);
	err = kmod_unload();
	check(!err, "module unloads: %s", errname(err));
out:
	bpf_object__close(xobj);
	bpf_object__close(pobj);
	bpf_object__close(gobj);
	btf__free(btf);
}

/*
 * gtramp ipmodify-transient N: with the module loaded and a global fentry.multi link on
 * getpgid (which shares the site with the module), a global fexit.multi link on the same
 * functions is refused N times while another process calls getpgid in a loop. No call may
 * run the function's own body meanwhile: none may return anything but the module's value.
 */
static void test_ipmodify_transient(long n)
{
	struct bpf_object *fobj = NULL, *xobj = NULL;
	struct bpf_program *fprog, *xprog;
	struct bpf_link *g = NULL, *x;
	volatile long *shared;
	long refused = 0;
	struct btf *btf;
	__u32 ids[3];
	pid_t child = -1;
	int status, setup;

	shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	btf = btf__load_vmlinux_btf();
	setup = shared != MAP_FAILED && btf && !kmod_loaded() && !three_ids(btf, ids);
	check(setup, "shared memory, vmlinux BTF with the three functions, module not loaded");
	if (!setup)
		goto out;
	fobj = counter_load(obj_path, "fentry_multi", getpid(), &fprog);
	xobj = counter_load(gexit_path, "fexit_multi", getpid(), &xprog);
	check(fobj && xobj && !kmod_load(), "programs load, module loads");
	if (!fobj || !xobj || !kmod_loaded())
		goto out;
	g = attach_global(fprog, ids, NULL, 3);
	check(g != NULL, "global fentry.multi attaches next to the module (%s)",
	      g ? "ok" : strerror(errno));
	if (!g)
		goto out;
	shared[0] = shared[1] = shared[2] = 0;
	child = fork();
	if (!child) {
		while (!shared[2]) {
			long r = syscall(SYS_getpgid, 0);

			shared[0]++;
			if (r != KMOD_RET)
				shared[1]++;
		}
		_exit(0);
	}
	while (!shared[0])
		sched_yield();
	for (long i = 0; i < n; i++) {
		x = attach_global(xprog, ids, NULL, 3);
		refused += !x && errno == EBUSY;
		bpf_link__destroy(x);
	}
	shared[2] = 1;
	waitpid(child, &status, 0);
	check(refused == n, "fexit.multi refused %ld of %ld times (EBUSY)", refused, n);
	check(shared[1] == 0,
	      "%ld calls of getpgid during the refused attaches, %ld ran the function's own body",
	      shared[0], shared[1]);
out:
	bpf_link__destroy(g);
	if (kmod_loaded())
		check(!kmod_unload(), "module unloads");
	bpf_object__close(fobj);
	bpf_object__close(xobj);
	btf__free(btf);
}

/*
 * failslab for the calling thread alone (task-filter): while its make-it-fail is 1, every
 * slab allocation the thread makes that may fail fails, opening a file included, so the
 * switch is opened beforehand and nothing is printed while it is on. No report per
 * failure: its stack dump would read as a splat.
 */
static int write_str(const char *path, const char *v)
{
	int fd = open(path, O_WRONLY), ok;

	if (fd < 0)
		return -1;
	ok = write(fd, v, strlen(v)) == (ssize_t)strlen(v);
	close(fd);
	return ok ? 0 : -1;
}

static int failslab_switch = -1;

static int failslab_arm(void)
{
	static const char *const knobs[][2] = {
		{ "task-filter", "Y" }, { "ignore-gfp-wait", "N" }, { "verbose", "0" },
		{ "times", "-1" }, { "interval", "1" }, { "space", "0" }, { "probability", "100" },
	};
	char path[128];
	int err = 0;

	for (size_t i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++) {
		snprintf(path, sizeof(path), "/sys/kernel/debug/failslab/%s", knobs[i][0]);
		err |= write_str(path, knobs[i][1]);
	}
	failslab_switch = open("/proc/thread-self/make-it-fail", O_WRONLY);
	return err | (failslab_switch < 0);
}

/* Writing the switch allocates nothing, so it also works while it is on. */
static int failslab_on(int on)
{
	return write(failslab_switch, on ? "1" : "0", 1) == 1 ? 0 : -1;
}

static int failslab_disarm(void)
{
	close(failslab_switch);
	failslab_switch = -1;
	return write_str("/sys/kernel/debug/failslab/probability", "0");
}

/* Whether the kernel log has @needle (the whole ring buffer). */
static int klog_has(const char *needle)
{
	int size = klogctl(10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0), n, found;
	char *buf;

	if (size <= 0 || !(buf = malloc(size + 1)))
		return 0;
	n = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, buf, size);
	buf[n > 0 ? n : 0] = 0;
	found = strstr(buf, needle) != NULL;
	free(buf);
	return found;
}

static void test_detach_fault(long n, int all)
{
	static const char *const every[] = { "*", NULL };
	static const char *const must[] = { "__x64_sys_getpgid", NULL };
	unsigned long pgid = ksym_addr("__x64_sys_getpgid");
	unsigned long prio = ksym_addr("__x64_sys_getpriority");
	struct bpf_program *prog, *fprog;
	struct bpf_object *obj, *fobj = NULL;
	struct bpf_link *link, *other, *f = NULL;
	struct func_set set = {};
	libbpf_print_fn_t print_fn;
	__u64 base, prio_base;
	struct btf *btf;
	__u32 id_pgid, id_prio;
	int err, on, off;
	double t0;

	btf = btf__load_vmlinux_btf();
	check(btf && pgid && prio, "vmlinux BTF, getpgid and getpriority");
	if (!btf || !pgid || !prio)
		return;
	id_pgid = func_id(btf, "__x64_sys_getpgid");
	id_prio = func_id(btf, "__x64_sys_getpriority");
	if (all) {
		err = func_set_collect_args(&set, btf, every, must, (size_t)-1, 12);
		check(!err && set.cnt >= 5000, "found %zu functions", set.cnt);
		if (err || set.cnt < 5000)
			goto out_btf;
	}
	obj = counter_load(obj_path, "fentry_multi", getpid(), &prog);
	check(obj != NULL, "program loads");
	if (!obj)
		goto out_btf;
	link = all ? attach_global(prog, set.ids, NULL, set.cnt) : attach_global(prog, &id_pgid, NULL, 1);
	check(link != NULL, "global link on %zu functions (%s)", all ? set.cnt : 1,
	      link ? "ok" : strerror(errno));
	if (!link)
		goto out_obj;
	call_getpgid(n);
	check(counter_hits(obj, pgid) == (__u64)n, "counted %llu of %ld",
	      (unsigned long long)counter_hits(obj, pgid), n);

	/* Detach with every allocation of this thread failing: the ftrace update fails. */
	check(!failslab_arm(), "failslab set up for this thread");
	on = failslab_on(1);
	bpf_link__destroy(link);
	off = failslab_on(0);
	check(!on && !off && !failslab_disarm(), "failslab on for the detach, then off");
	check(klog_has("call sites could not leave it"), "the kernel log says sites are kept");
	call_getpgid(n);
	check(counter_hits(obj, pgid) == (__u64)n, "nothing counted after detach (%llu, was %ld)",
	      (unsigned long long)counter_hits(obj, pgid), n);

	/*
	 * Time for a stub taken back to be handed out again. Another function attached now
	 * must count only its own calls, whichever stub it gets.
	 */
	sleep(3);
	other = attach_global(prog, &id_prio, NULL, 1);
	check(other != NULL, "global link on __x64_sys_getpriority (%s)",
	      other ? "ok" : strerror(errno));
	base = counter_hits(obj, pgid);
	prio_base = counter_hits(obj, prio);
	call_getpgid(n);
	call_getpriority(n / 2);
	check(counter_hits(obj, pgid) == base &&
	      counter_hits(obj, prio) - prio_base == (__u64)(n / 2),
	      "getpgid runs no program (%llu counted), getpriority counted %llu of %ld",
	      (unsigned long long)(counter_hits(obj, pgid) - base),
	      (unsigned long long)(counter_hits(obj, prio) - prio_base), n / 2);
	bpf_link__destroy(other);

	/* The sites go back to ftrace when a retry succeeds: then fentry attaches. */
	fobj = counter_load(obj_path, "fentry_one", getpid(), &fprog);
	check(fobj != NULL, "fentry program loads");
	t0 = now();
	print_fn = libbpf_set_print(NULL);	/* one line per refused try otherwise */
	while (fobj && !(f = bpf_program__attach(fprog)) && now() - t0 < 30)
		usleep(100000);
	libbpf_set_print(print_fn);
	check(f != NULL, "per-function fentry on __x64_sys_getpgid attaches (%s, after %.1f s)",
	      f ? "ok" : strerror(errno), now() - t0);
	check(klog_has("every stuck call site has left it"), "the kernel log says the sites left");
	if (f) {
		call_getpgid(n);
		check(counter_hits(fobj, pgid) == (__u64)n, "fentry counted %llu of %ld",
		      (unsigned long long)counter_hits(fobj, pgid), n);
		bpf_link__destroy(f);
	}
	bpf_object__close(fobj);
out_obj:
	bpf_object__close(obj);
out_btf:
	func_set_free(&set);
	btf__free(btf);
}


/*
 * Allocation events of one thread with __GFP_NOFAIL (bit 15 of gfp_t in this kernel's
 * include/linux/gfp_types.h), in a tracefs instance of its own.
 */
#define NOFAIL_INSTANCE "/sys/kernel/tracing/instances/gtramp_nofail"
static const char *const nofail_events[] = { "kmem/kmalloc", "kmem/kmem_cache_alloc",
					     "kmem/mm_page_alloc" };

static int nofail_trace(int on)
{
	char path[256], filter[96];
	int err = 0;

	if (on) {
		rmdir(NOFAIL_INSTANCE);
		if (mkdir(NOFAIL_INSTANCE, 0755))
			return -1;
		err |= write_str(NOFAIL_INSTANCE "/buffer_size_kb", "4096");
	}
	snprintf(filter, sizeof(filter), "gfp_flags & 0x8000 && common_pid == %d",
		 (int)syscall(SYS_gettid));
	for (size_t i = 0; i < sizeof(nofail_events) / sizeof(nofail_events[0]); i++) {
		if (on) {
			snprintf(path, sizeof(path), NOFAIL_INSTANCE "/events/%s/filter",
				 nofail_events[i]);
			err |= write_str(path, filter);
		}
		snprintf(path, sizeof(path), NOFAIL_INSTANCE "/events/%s/enable", nofail_events[i]);
		err |= write_str(path, on ? "1" : "0");
	}
	return err;
}

/* The recorded events: how many, the first few printed. */
static long nofail_report(const char *what)
{
	char line[512];
	long n = 0;
	FILE *f = fopen(NOFAIL_INSTANCE "/trace", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (line[0] == '#')
			continue;
		if (n++ < 8)
			printf("  %s: %s", what, line);
	}
	fclose(f);
	rmdir(NOFAIL_INSTANCE);
	return n;
}

/*
 * fail_page_alloc next to failslab (armed by failslab_arm()), this thread only. Not for
 * __GFP_HIGHMEM allocations: those are the pages of this thread's own page faults, which
 * would otherwise be retried for as long as the switch is on.
 */
static int fail_page_alloc_set(int on)
{
	static const char *const knobs[][2] = {
		{ "task-filter", "Y" }, { "ignore-gfp-wait", "N" }, { "ignore-gfp-highmem", "Y" },
		{ "min-order", "0" }, { "verbose", "0" }, { "times", "-1" }, { "interval", "1" },
		{ "space", "0" }, { "probability", "100" },
	};
	char path[128];
	int err = 0;

	if (!on)
		return write_str("/sys/kernel/debug/fail_page_alloc/probability", "0");
	for (size_t i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++) {
		snprintf(path, sizeof(path), "/sys/kernel/debug/fail_page_alloc/%s", knobs[i][0]);
		err |= write_str(path, knobs[i][1]);
	}
	return err;
}

/*
 * Detach @link (of @obj, on @cnt functions including getpgid) with every allocation of
 * this thread that may fail failing and its __GFP_NOFAIL ones recorded.
 */
static void nofail_detach(const char *what, struct bpf_object *obj, struct bpf_link *link,
			  size_t cnt, long n)
{
	unsigned long pgid = ksym_addr("__x64_sys_getpgid");
	int armed, on, off;
	__u64 before;
	long nofail;
	double t0;

	call_getpgid(n);
	before = counter_hits(obj, pgid);
	check(before >= (__u64)n, "%s: counted %llu of %ld before the detach", what,
	      (unsigned long long)before, n);
	check(!nofail_trace(1), "%s: NOFAIL allocation events on for this thread", what);
	armed = failslab_arm() | fail_page_alloc_set(1);
	check(!armed, "%s: failslab and fail_page_alloc set up for this thread", what);
	t0 = now();
	on = failslab_on(1);
	bpf_link__destroy(link);
	off = failslab_on(0);
	t0 = now() - t0;
	check(!on && !off && !failslab_disarm() && !fail_page_alloc_set(0),
	      "%s: faults on for the detach (%.3f s), then off", what, t0);
	nofail_trace(0);
	nofail = nofail_report(what);
	check(nofail == 0, "%s: detach of %zu functions made %ld __GFP_NOFAIL allocations",
	      what, cnt, nofail);
	call_getpgid(n);
	check(counter_hits(obj, pgid) == before, "%s: nothing counted after detach (%llu, was %llu)",
	      what, (unsigned long long)counter_hits(obj, pgid), (unsigned long long)before);
}

/* Once the kernel gave the sites back (now or after a retry), fentry attaches on getpgid. */
static void nofail_sites_back(const char *what, long n)
{
	unsigned long pgid = ksym_addr("__x64_sys_getpgid");
	libbpf_print_fn_t print_fn;
	struct bpf_program *fprog;
	struct bpf_object *fobj;
	struct bpf_link *f = NULL;
	double t0;

	fobj = counter_load(obj_path, "fentry_one", getpid(), &fprog);
	check(fobj != NULL, "%s: fentry program loads", what);
	if (!fobj)
		return;
	t0 = now();
	print_fn = libbpf_set_print(NULL);	/* one line per refused try otherwise */
	while (!(f = bpf_program__attach(fprog)) && now() - t0 < 60)
		usleep(100000);
	libbpf_set_print(print_fn);
	check(f != NULL, "%s: per-function fentry on __x64_sys_getpgid attaches (%s, after %.1f s)",
	      what, f ? "ok" : strerror(errno), now() - t0);
	if (f) {
		call_getpgid(n);
		check(counter_hits(fobj, pgid) == (__u64)n, "%s: fentry counted %llu of %ld", what,
		      (unsigned long long)counter_hits(fobj, pgid), n);
		bpf_link__destroy(f);
	}
	bpf_object__close(fobj);
}

static void test_detach_nofail(long n)
{
	static const char *const some[] = { "__x64_sys_*", "vfs_*", "seq_*", NULL };
	static const char *const every[] = { "*", NULL };
	static const char *const must[] = { "__x64_sys_getpgid", NULL };
	const char *const kinds[] = { "fentry", "fexit", "fentry-all" };
	struct bpf_program *prog;
	struct bpf_object *obj;
	struct bpf_link *link;
	struct func_set set;
	struct btf *btf;
	int err;

	btf = btf__load_vmlinux_btf();
	check(btf != NULL, "vmlinux BTF");
	if (!btf)
		return;
	for (int k = 0; k < 3; k++) {
		int all = k == 2;

		memset(&set, 0, sizeof(set));
		err = func_set_collect_args(&set, btf, all ? every : some, must,
					    all ? (size_t)-1 : 300, all ? 12 : 6);
		check(!err && set.cnt >= (all ? 5000u : 200u), "%s: found %zu functions", kinds[k],
		      set.cnt);
		if (!err && k == 1)
			func_set_drop_noreturn(&set);
		if (err || set.cnt < (all ? 5000u : 200u)) {
			func_set_free(&set);
			continue;
		}
		obj = k == 1 ? counter_load(gexit_path, "fexit_multi", getpid(), &prog) :
			       counter_load(obj_path, "fentry_multi", getpid(), &prog);
		check(obj != NULL, "%s: program loads", kinds[k]);
		link = obj ? attach_global(prog, set.ids, NULL, set.cnt) : NULL;
		check(link != NULL, "%s: global link on %zu functions (%s)", kinds[k], set.cnt,
		      link ? "ok" : strerror(errno));
		if (link)
			nofail_detach(kinds[k], obj, link, set.cnt, n);
		if (link)
			nofail_sites_back(kinds[k], n);
		bpf_object__close(obj);
		func_set_free(&set);
	}
	btf__free(btf);
}

static void hot_worker(void)
{
	char buf[64];
	int fd = open("/proc/self/stat", O_RDONLY);

	for (;;) {
		syscall(SYS_getpgid, 0);
		syscall(SYS_getpriority, 0, 0);
		if (fd >= 0)
			pread(fd, buf, sizeof(buf), 0);
	}
}

/* @flags 0: upstream's per-function backend, the same stress for comparison. */
static void test_stress(double secs, __u32 flags, int all_cpus)
{
	static const char *const globs[] = { "__x64_sys_*", "vfs_*", "seq_*", "proc_*", NULL };
	static const char *const must[] = { "__x64_sys_getpgid", NULL };
	unsigned long addr = ksym_addr("__x64_sys_getpgid");
	struct bpf_program *prog;
	struct bpf_object *obj;
	struct func_set set;
	pid_t workers[2];
	int rounds = 0, failed = 0, status;
	struct btf *btf;
	double end;

	if (!all_cpus) {
		cpu_set_t cpu0;

		CPU_ZERO(&cpu0);
		CPU_SET(0, &cpu0);
		check(!sched_setaffinity(0, sizeof(cpu0), &cpu0), "stress runs on CPU 0 (%s)",
		      strerror(errno));
	}
	btf = btf__load_vmlinux_btf();
	if (!btf || func_set_collect(&set, btf, globs, must, 1000)) {
		check(0, "function set for the stress test");
		btf__free(btf);
		return;
	}
	/* Count every process: the workers are the load. */
	obj = counter_load(obj_path, "fentry_multi", 0, &prog);
	check(obj != NULL, "program loads");
	if (!obj)
		goto out;
	for (int i = 0; i < 2; i++) {
		workers[i] = fork();
		if (!workers[i])
			hot_worker();
	}
	end = now() + secs;
	while (now() < end) {
		struct bpf_link *link = attach_flags(prog, set.ids, NULL, set.cnt, flags);

		if (!link) {
			failed++;
			continue;
		}
		usleep(20000);
		bpf_link__destroy(link);
		rounds++;
	}
	for (int i = 0; i < 2; i++) {
		kill(workers[i], SIGKILL);
		waitpid(workers[i], &status, 0);
	}
	check(rounds > 0 && !failed,
	      "%s backend: %d attach/detach rounds of %zu functions under load, %d failed",
	      flags ? "global" : "per-function", rounds, set.cnt, failed);
	check(counter_hits(obj, addr) > 0, "the workers' calls were counted while attached (%llu)",
	      (unsigned long long)counter_hits(obj, addr));
	bpf_object__close(obj);
out:
	func_set_free(&set);
	btf__free(btf);
}

/*
 * Address of kallsyms text symbol @name and of the next symbol after it: the range a
 * failslab stack filter needs. 0 when absent (e.g. inlined).
 */
static unsigned long ksym_range(const char *name, unsigned long *end)
{
	unsigned long addr = 0, a, next = ~0UL;
	char line[512], sym[256], type;
	FILE *f = fopen("/proc/kallsyms", "r");

	if (!f)
		return 0;
	while (!addr && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx %c %255s", &a, &type, sym) == 3 && !strcmp(sym, name))
			addr = a;
	rewind(f);
	while (addr && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx %c %255s", &a, &type, sym) == 3 && a > addr && a < next)
			next = a;
	fclose(f);
	*end = next;
	return addr;
}

/* failslab fails only allocations made below [start, end) (0 and ~0: no filter). */
static int failslab_below(unsigned long start, unsigned long end)
{
	char v[32];
	int err;

	snprintf(v, sizeof(v), "%lu", start);
	err = write_str("/sys/kernel/debug/failslab/require-start", v);
	snprintf(v, sizeof(v), "%lu", end);
	return err | write_str("/sys/kernel/debug/failslab/require-end", v);
}

/* A child process that calls clock_nanosleep for @ms at a time, @count times (0: forever). */
static pid_t nanosleeper(long ms, long count)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };
	pid_t pid = fork();

	if (!pid) {
		for (long i = 0; !count || i < count; i++)
			clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
		_exit(0);
	}
	return pid;
}

/*
 * The in-flight counters of metadata whose programs call the function (fexit here)
 * come in chunks. gtramp counter-fault N: with the allocation of a chunk failing
 * (failslab below counter_chunk_alloc), an attach that needs a counter fails with
 * ENOMEM and leaves nothing behind; a detach cannot fail and shares one counter among
 * the metadata it makes. Then links come and go on those functions while a thread
 * sleeps in one of them and others enter and leave them on both CPUs: the sleeper
 * returns normally and the link left in place counts exactly (under KASAN: no report).
 */
static void test_counter_fault(long n)
{
	static const char *const every[] = { "*", NULL };
	static const char *const must[] = { "__x64_sys_getpgid", "__x64_sys_clock_nanosleep",
					    NULL };
	unsigned long pgid = ksym_addr("__x64_sys_getpgid"), start, end = 0;
	struct bpf_object *xobj = NULL, *fobj = NULL, *cobj = NULL;
	struct bpf_program *xprog, *fprog, *cprog;
	struct bpf_link *x, *f, *c;
	struct func_set set = {};
	pid_t sleeper, workers[2];
	int err, on, off, status;
	long refused = 0, rounds = 0;
	struct btf *btf;

	btf = btf__load_vmlinux_btf();
	start = ksym_range("counter_chunk_alloc", &end);
	check(btf && pgid && start, "vmlinux BTF, getpgid and counter_chunk_alloc (%#lx-%#lx)",
	      start, end);
	if (!btf || !pgid || !start)
		goto out;
	/* More functions than a chunk holds: some counter needs a new chunk. */
	err = func_set_collect(&set, btf, every, must, 3100);
	func_set_drop_noreturn(&set);
	check(!err && set.cnt >= 3000, "found %zu functions fexit may trace", set.cnt);
	xobj = counter_load(gexit_path, "fexit_multi", getpid(), &xprog);
	fobj = counter_load(obj_path, "fentry_multi", getpid(), &fprog);
	cobj = counter_load(gexit_path, "fexit_multi", getpid(), &cprog);
	check(xobj && fobj && cobj, "programs load");
	if (err || set.cnt < 3000 || !xobj || !fobj || !cobj)
		goto out;
	check(!failslab_arm() && !failslab_below(start, end),
	      "failslab set up for this thread, below counter_chunk_alloc");

	/* 1. An attach gets no counter: refused as a whole. */
	on = failslab_on(1);
	x = attach_global(xprog, set.ids, NULL, set.cnt);
	err = x ? 0 : errno;
	off = failslab_on(0);
	check(!on && !off, "failslab on for the attach, then off");
	check(!x && err == ENOMEM, "fexit.multi on %zu functions without counters: %s (want ENOMEM)",
	      set.cnt, x ? "attached" : strerror(err));
	bpf_link__destroy(x);
	call_getpgid(n);
	check(counter_hits(xobj, pgid) == 0, "nothing left behind: fexit ran %llu times",
	      (unsigned long long)counter_hits(xobj, pgid));

	/* 2. The same attach with memory: then a detach that gets no counter. */
	x = attach_global(xprog, set.ids, NULL, set.cnt);
	f = attach_global(fprog, set.ids, NULL, set.cnt);
	check(x && f, "fexit.multi and fentry.multi on %zu functions (%s)", set.cnt,
	      x && f ? "ok" : strerror(errno));
	if (!x || !f)
		goto out_links;
	on = failslab_on(1);
	bpf_link__destroy(f);
	f = NULL;
	off = failslab_on(0);
	check(!on && !off, "failslab on for the detach, then off");
	check(klog_has("sharing one in-flight counter"), "the kernel log says counters are shared");

	/*
	 * 3. A thread asleep in clock_nanosleep; two more enter and leave it on both CPUs
	 * while a third link comes (with memory) and goes (without) on every function.
	 */
	sleeper = nanosleeper(3000, 1);
	workers[0] = nanosleeper(1, 0);
	workers[1] = nanosleeper(1, 0);
	usleep(200000);
	for (double t0 = now(); now() - t0 < 6 || rounds < 4; rounds++) {
		c = attach_global(cprog, set.ids, NULL, set.cnt);
		if (!c) {
			refused++;
			continue;
		}
		call_getpgid(10);
		on = failslab_on(1);
		bpf_link__destroy(c);
		off = failslab_on(0);
		if (on || off)
			break;
	}
	check(refused == 0, "a third link came and went %ld times (%ld refused)", rounds, refused);
	waitpid(sleeper, &status, 0);
	check(WIFEXITED(status) && !WEXITSTATUS(status), "the sleeper returned normally");
	kill(workers[0], SIGKILL);
	kill(workers[1], SIGKILL);
	waitpid(workers[0], NULL, 0);
	waitpid(workers[1], NULL, 0);
	{
		__u64 before = counter_hits(xobj, pgid);

		call_getpgid(n);
		check(counter_hits(xobj, pgid) - before == (__u64)n,
		      "the fexit.multi link left counts %llu of %ld",
		      (unsigned long long)(counter_hits(xobj, pgid) - before), n);
	}
out_links:
	bpf_link__destroy(f);
	bpf_link__destroy(x);
	check(!failslab_below(0, ~0UL) && !failslab_disarm(), "failslab off");
out:
	bpf_object__close(xobj);
	bpf_object__close(fobj);
	bpf_object__close(cobj);
	func_set_free(&set);
	btf__free(btf);
}

/*
 * Two BTF ids of one function (aliases: __x64_sys_munlockall and __do_sys_munlockall) in
 * one global link would run the program twice per call: gtramp alias N. The link is
 * refused with EBUSY, as one program is attached once per function and kind. Each id
 * alone attaches and counts each of N munlockall() calls once.
 */
static void test_alias(long n)
{
	struct bpf_program *prog;
	struct bpf_object *obj = NULL;
	struct bpf_link *link;
	struct ksym pair[2];
	struct btf *btf;
	__u32 ids[2];
	__u64 before;
	int err;

	btf = btf__load_vmlinux_btf();
	check(btf != NULL, "vmlinux BTF");
	if (!btf)
		return;
	err = alias_pair(btf, "__x64_sys_munlockall", pair) != 2;
	check(!err, "__x64_sys_munlockall has an alias in BTF: %s (%#lx)",
	      err ? "-" : pair[1].name, err ? 0 : pair[0].addr);
	if (err)
		goto out;
	ids[0] = func_id(btf, pair[0].name);
	ids[1] = func_id(btf, pair[1].name);
	obj = counter_load(obj_path, "fentry_multi", getpid(), &prog);
	check(obj != NULL, "program loads");
	if (!obj)
		goto out;
	link = attach_global(prog, ids, NULL, 2);
	err = link ? 0 : errno;
	for (long i = 0; i < n; i++)
		munlockall();
	check(!link && err == EBUSY, "one link on both: %s (want EBUSY); %llu runs for %ld calls",
	      link ? "attached" : strerror(err), (unsigned long long)counter_hits(obj, pair[0].addr),
	      n);
	bpf_link__destroy(link);
	/* Upstream's per-function backend: one trampoline per BTF id, two on one site. */
	link = attach_flags(prog, ids, NULL, 2, 0);
	err = link ? 0 : errno;
	check(!link && err == EBUSY, "the per-function backend: %s (EBUSY)",
	      link ? "attached" : strerror(err));
	bpf_link__destroy(link);
	for (int i = 0; i < 2; i++) {
		before = counter_hits(obj, pair[0].addr);
		link = attach_global(prog, &ids[i], NULL, 1);
		for (long j = 0; link && j < n; j++)
			munlockall();
		check(link && counter_hits(obj, pair[0].addr) - before == (__u64)n,
		      "%s alone: %s, %llu runs for %ld calls", pair[i].name,
		      link ? "attached" : strerror(errno),
		      (unsigned long long)(counter_hits(obj, pair[0].addr) - before), n);
		bpf_link__destroy(link);
	}
out:
	bpf_object__close(obj);
	btf__free(btf);
}

static int has_arg(int argc, char **argv, const char *word)
{
	for (int i = 3; i < argc; i++)
		if (!strcmp(argv[i], word))
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	long n = argc > 2 ? atol(argv[2]) : 1000;
	const char *cmd = argc > 1 ? argv[1] : "";

	snprintf(obj_path, sizeof(obj_path), "%s.bpf.o", argv[0]);
	prog_dir(gexit_path, sizeof(gexit_path) - 32, argv[0]);
	strcpy(kmod_path, gexit_path);
	strcat(gexit_path, "/gexit.bpf.o");
	strcat(kmod_path, "/gtramp_kmod.ko");
	/* A module built for another kernel build (tests/guest/kasan.sh: the KASAN one). */
	if (getenv("BPFMUX_KMOD_DIR"))
		snprintf(kmod_path, sizeof(kmod_path), "%.4000s/gtramp_kmod.ko",
			 getenv("BPFMUX_KMOD_DIR"));
	libbpf_set_strict_mode(LIBBPF_STRICT_ALL);
	if (!strcmp(cmd, "probe"))
		return test_probe();
	else if (!strcmp(cmd, "basic"))
		test_basic(n);
	else if (!strcmp(cmd, "many"))
		test_set(n, argc > 3 ? atol(argv[3]) : 1000, 0);
	else if (!strcmp(cmd, "all"))
		test_set(n, 5000, 1);
	else if (!strcmp(cmd, "args"))
		test_args();
	else if (!strcmp(cmd, "rollback"))
		test_rollback();
	else if (!strcmp(cmd, "churn"))
		test_churn(n);
	else if (!strcmp(cmd, "coexist"))
		test_coexist(n);
	else if (!strcmp(cmd, "ipmodify"))
		test_ipmodify(n);
	else if (!strcmp(cmd, "ipmodify-peer"))
		test_ipmodify_peer(n);
	else if (!strcmp(cmd, "ipmodify-multi"))
		test_ipmodify_multi(n);
	else if (!strcmp(cmd, "ipmodify-other"))
		test_ipmodify_other(n);
	else if (!strcmp(cmd, "ipmodify-transient"))
		test_ipmodify_transient(n);
	else if (!strcmp(cmd, "detach-fault"))
		test_detach_fault(n, has_arg(argc, argv, "all"));
	else if (!strcmp(cmd, "detach-nofail"))
		test_detach_nofail(n);
	else if (!strcmp(cmd, "counter-fault"))
		test_counter_fault(n);
	else if (!strcmp(cmd, "alias"))
		test_alias(n);
	else if (!strcmp(cmd, "stress"))
		test_stress(argc > 2 ? atof(argv[2]) : 10,
			    has_arg(argc, argv, "per-function") ? 0 : BPF_F_TRACING_MULTI_GLOBAL,
			    has_arg(argc, argv, "all-cpus"));
	else {
		fprintf(stderr, "usage: %s probe|basic|many|all|args|rollback|churn|coexist|ipmodify|ipmodify-peer|ipmodify-multi|ipmodify-other|ipmodify-transient|detach-fault|detach-nofail|counter-fault|alias|stress [N] [per-function] [all-cpus]\n",
			argv[0]);
		return 2;
	}
	return check_failures ? 1 : 0;
}
#endif /* BPFMUX_HAVE_GLOBAL_TRAMP */
