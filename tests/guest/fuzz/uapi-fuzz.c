// SPDX-License-Identifier: GPL-2.0
/*
 * uapi-fuzz OPS [SEED] [THREADS]: a bounded fuzzer of the UAPI the kernel series adds
 * (kernel/README.md, "UAPI added by the series"). THREADS threads (default 3) make OPS
 * operations in all, each chosen at random, on a shared table of link fds and of program
 * fds. Every thread draws from its own generator, seeded from SEED (default 1): with one
 * thread a seed repeats its operations exactly, with several as far as their interleaving
 * allows.
 *
 *   link_create   BPF_LINK_CREATE of a tracing multi-link: fentry/fexit/fmod_ret/
 *                 fsession.multi on the global or the per-function backend, 1 to a few
 *                 thousand functions from a pool of safe ones, in order or not, cookies or
 *                 none; a third of them with one fault: junk flags, a target fd, a count of
 *                 0, a huge or a wrong count, no ids, a duplicate, two names of one function,
 *                 an id that is 0, past the BTF, no FUNC, absent from the kernel or denied,
 *                 a noreturn function for an exit kind, a function off the error-injection
 *                 list for fmod_ret, another attach type, a bad program fd
 *   link_close    closing a random link, often one another thread made: its detach
 *   link_info     BPF_OBJ_GET_INFO_BY_FD of a link, with arrays absent, exact, too small,
 *                 of count 0 or too large: the answer must match what was attached
 *   link_enum     every link in the table must be in BPF_LINK_GET_NEXT_ID's enumeration
 *   chain_add, chain_del, chain_get
 *                 BPF_PROG_CHAIN_* on a few XDP programs (plain, frags, devmap): random
 *                 return codes, the wildcard with and without a return value, REPLACE,
 *                 cycles, junk, bad fds, a program or a map of another kind; GET with no
 *                 buffer, a small and a large one, whose entries must be well formed
 *   xdp_run       BPF_PROG_TEST_RUN of an XDP program, which runs its chain
 *   xdp_reload    closing an XDP program, which chain entries may name, and loading another
 *   prog_reload   closing a tracing program, which its links keep, and loading another
 *   kmod_load, kmod_unload
 *                 gtramp_kmod.ko, an IPMODIFY ftrace user on __x64_sys_getpgid (like
 *                 livepatch), comes and goes while links on getpgid do
 *
 * A worker thread calls getpgid, getpriority and munlockall meanwhile, so programs run.
 * Every refusal must be an errno documented for its operation (the tables below, each
 * saying where the kernel or the series documents it), and the one its fault implies. A
 * link_create without a fault may only fail with ENOMEM, or with EBUSY when another link
 * of the same program on one of its functions, or the module on getpgid, was there or
 * coming or going while it ran. At the end everything is closed, and no link and no program
 * the fuzzer made may remain (it waits up to 15 s for deferred frees).
 *
 * Prints a progress line every 10 % (stderr), then per operation its successes, each
 * errno and its time, and "ok - ..." / "FAIL - ..." lines; exit status 0 when all hold.
 * Kernel splats are vm/run's to catch; an oops in the worker's calls also fails the run.
 *
 * Environment, to narrow a finding down: UAPI_FUZZ_SKIP=op,... leaves operations out,
 * UAPI_FUZZ_POOL=N keeps N functions (getpgid first), UAPI_FUZZ_LINKS=gfentry,pfexit,...
 * only those kinds (g global, p per-function), UAPI_FUZZ_SLOW=S prints each operation that
 * takes S seconds or more, UAPI_FUZZ_STRICT=1 fails the known bug counted below.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
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
	fprintf(stderr, "uapi-fuzz: built without the series' UAPI; run 'make kernel'\n");
	return 1;
}
#else

/* ---- operations and the errnos documented for each ------------------------------------ */

enum op {
	OP_LINK_CREATE, OP_LINK_CLOSE, OP_LINK_INFO, OP_LINK_ENUM,
	OP_CHAIN_ADD, OP_CHAIN_DEL, OP_CHAIN_GET, OP_XDP_RUN, OP_XDP_RELOAD,
	OP_PROG_RELOAD, OP_KMOD_LOAD, OP_KMOD_UNLOAD, NR_OPS
};

/*
 * BPF_LINK_CREATE of a tracing multi-link: kernel/trace/bpf_trace.c
 * bpf_tracing_multi_attach(), kernel/bpf/tracing_multi_global.c
 * bpf_tracing_multi_global_attach(), kernel/bpf/verifier.c
 * bpf_check_attach_btf_id_multi(), kernel/bpf/kfunc_md.c md_apply(),
 * kernel/bpf/trampoline.c bpf_trampoline_multi_attach() and bpf_trampoline_add_prog();
 * kernel/README.md, "UAPI added by the series" and "Design".
 *   EINVAL      a count of 0 or no ids; flags other than BPF_F_TRACING_MULTI_GLOBAL (stock
 *               7.3 refuses any, README); a target fd; a duplicate id; an id that names no
 *               FUNC, one on the verifier's deny list, a noreturn one for fexit, fmod_ret
 *               or fsession; fmod_ret on a function neither on the error-injection list
 *               nor a security hook; an attach type other than the program's
 *   E2BIG       a count above MAX_TRACING_MULTI_CNT (1 << 20); more programs on a function
 *               than its trampoline (BPF_MAX_TRAMP_LINKS) or its metadata (255 a kind, 8
 *               fsession, README "fsession.multi") takes
 *   ENOENT      a function with no address or no ftrace site
 *   EBUSY       two ids of one function (README: aliases, both backends); the program
 *               already on one of the functions; a function the global trampoline calls
 *               itself next to an IPMODIFY ftrace user (README, "Entry stubs")
 *   EOPNOTSUPP  a sleepable program, stack arguments the global trampoline cannot
 *               describe, a return value wider than 8 bytes (README)
 *   ENOMEM      no memory; a global fexit or fsession attach without an in-flight counter
 *               (README)
 *   EBADF       a program fd that is not open (bpf_prog_get())
 */
static const int link_create_errnos[] = {
	EINVAL, E2BIG, ENOENT, EBUSY, EOPNOTSUPP, ENOMEM, EBADF, 0 };
/* close(2) of a link fd the table holds: nothing to refuse. */
static const int no_errnos[] = { 0 };
/*
 * BPF_OBJ_GET_INFO_BY_FD of a tracing multi-link (fill_link_info of both backends,
 * kernel/trace/bpf_trace.c and kernel/bpf/tracing_multi_global.c): EINVAL for arrays with
 * a count of 0, ENOSPC for a count smaller than the link's (the first count written).
 */
static const int link_info_errnos[] = { EINVAL, ENOSPC, 0 };
/*
 * BPF_PROG_CHAIN_ADD (include/uapi/linux/bpf.h, kernel/bpf/prog_chain.c
 * bpf_prog_chain_add(), README "XDP chain calls": "Checks at add time"): EINVAL (entries
 * or count set, unknown flags, the wildcard with a return value, two programs that may not
 * follow each other, an fd of no program), ERANGE (no XDP action), EBADF, EEXIST (an entry
 * there, without REPLACE), ENOENT (REPLACE with nothing to replace), ELOOP (a cycle), E2BIG
 * (a path of more than 16 programs), ENOSPC (more than the dispatcher's 48 owners), EPERM
 * (no CAP_NET_ADMIN), EOPNOTSUPP (a program not JITed), ENOMEM.
 */
static const int chain_add_errnos[] = {
	EINVAL, ERANGE, EBADF, EEXIST, ENOENT, ELOOP, E2BIG, ENOSPC, EPERM, EOPNOTSUPP, ENOMEM, 0 };
/*
 * BPF_PROG_CHAIN_DEL (same places, bpf_prog_chain_del()): EINVAL (a next fd, entries or
 * count set, REPLACE or unknown flags, the wildcard with a return value), ERANGE, EBADF,
 * ENOENT (no such entry), EPERM, ENOMEM.
 */
static const int chain_del_errnos[] = { EINVAL, ERANGE, EBADF, ENOENT, EPERM, ENOMEM, 0 };
/*
 * BPF_PROG_CHAIN_GET (same places, bpf_prog_chain_get()): EINVAL (a return value, next fd
 * or flags), EBADF, ENOSPC (count smaller than the program's entries, the first count
 * written).
 */
static const int chain_get_errnos[] = { EINVAL, EBADF, ENOSPC, 0 };
/* BPF_PROG_TEST_RUN of XDP (net/bpf/test_run.c): EINVAL for a devmap or cpumap program. */
static const int xdp_run_errnos[] = { EINVAL, 0 };
/* Loading a program again (BPF_PROG_LOAD of what loaded before): ENOMEM at most. */
static const int reload_errnos[] = { ENOMEM, 0 };
/*
 * finit_module(2) of gtramp_kmod.ko, whose init returns register_ftrace_function()'s
 * error: EBUSY when a function the global trampoline calls itself cannot share its site
 * with an IPMODIFY user (README, "Entry stubs"; kernel/bpf/trampoline.c
 * global_tramp_ipmodify()); EAGAIN when the global trampoline's mutex or a trampoline's
 * lock is held meanwhile (global_tramp_ipmodify(), bpf_tramp_ftrace_ops_func(): they try
 * the lock, against a deadlock with ftrace's direct_mutex, and say so).
 */
static const int kmod_load_errnos[] = { EBUSY, EAGAIN, 0 };

static const struct {
	const char *name;
	int weight;		/* per mille */
	const int *errnos;	/* documented refusals */
} ops[NR_OPS] = {
	[OP_LINK_CREATE] = { "link_create", 220, link_create_errnos },
	[OP_LINK_CLOSE] = { "link_close", 140, no_errnos },
	[OP_LINK_INFO] = { "link_info", 120, link_info_errnos },
	[OP_LINK_ENUM] = { "link_enum", 20, no_errnos },
	[OP_CHAIN_ADD] = { "chain_add", 170, chain_add_errnos },
	[OP_CHAIN_DEL] = { "chain_del", 110, chain_del_errnos },
	[OP_CHAIN_GET] = { "chain_get", 120, chain_get_errnos },
	[OP_XDP_RUN] = { "xdp_run", 60, xdp_run_errnos },
	[OP_XDP_RELOAD] = { "xdp_reload", 30, reload_errnos },
	[OP_PROG_RELOAD] = { "prog_reload", 3, reload_errnos },
	/* one weight for both: whichever the module's state calls for */
	[OP_KMOD_LOAD] = { "kmod_load", 7, kmod_load_errnos },
	[OP_KMOD_UNLOAD] = { "kmod_unload", 0, no_errnos },
};

#define MAX_ERRNO 1024
/* Outcomes per operation: [0] successes, [e] refusals with errno e. */
static unsigned long stats[NR_OPS][MAX_ERRNO];
/* What failed, by class; printed as checks at the end. */
enum fail_class { FC_ERRNO, FC_INFO, FC_ENUM, FC_CHAIN, FC_RUN, FC_HARNESS, NR_FC };
static unsigned long failed[NR_FC];

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *errname(int err)
{
	static __thread char buf[16];
	const char *name = err ? strerrorname_np(err) : "ok";

	if (name)
		return name;
	snprintf(buf, sizeof(buf), "errno %d", err);
	return buf;
}

/* A failed check, with what the operation was: printed (the first 50) and counted. */
static void fail(enum fail_class fc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(enum fail_class fc, const char *fmt, ...)
{
	static unsigned long printed;
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&out_lock);
	failed[fc]++;
	if (printed++ < 50)
		check(0, "%s", msg);
	else if (printed == 51)
		printf("# more failures are counted, not printed\n");
	pthread_mutex_unlock(&out_lock);
}

static int listed(const int *errnos, int err)
{
	for (; *errnos; errnos++)
		if (*errnos == err)
			return 1;
	return 0;
}

/* What an operation may answer: 0 for success, errnos. */
struct expect {
	int n;
	int v[8];
};

static void expect_add(struct expect *e, int v)
{
	if (e->n < (int)(sizeof(e->v) / sizeof(e->v[0])))
		e->v[e->n++] = v;
}

static int expect_has(const struct expect *e, int v)
{
	for (int i = 0; i < e->n; i++)
		if (e->v[i] == v)
			return 1;
	return 0;
}

static const char *expect_str(const struct expect *e, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = 0;
	for (int i = 0; i < e->n && len < size; i++)
		len += snprintf(buf + len, size - len, "%s%s", i ? " or " : "", errname(e->v[i]));
	return buf;
}

/*
 * Count the outcome @err (0 or an errno) of @op; fail on an errno not documented for it,
 * or not one of @want (NULL: any documented one, or success).
 */
/* The last outcome counted by this thread, for its history. */
static __thread int last_err;

static void count_outcome(enum op op, int err)
{
	last_err = err;
	__atomic_fetch_add(&stats[op][err >= 0 && err < MAX_ERRNO ? err : MAX_ERRNO - 1], 1,
			   __ATOMIC_RELAXED);
}

static void outcome(enum op op, int err, const struct expect *want, const char *args)
{
	char buf[128];

	count_outcome(op, err);
	if (err && !listed(ops[op].errnos, err))
		fail(FC_ERRNO, "%s %s: %s, an errno not documented for it", ops[op].name, args,
		     errname(err));
	else if (want && !expect_has(want, err))
		fail(FC_ERRNO, "%s %s: %s (want %s)", ops[op].name, args, errname(err),
		     expect_str(want, buf, sizeof(buf)));
}

/* ---- random numbers -------------------------------------------------------------------- */

struct rng {
	__u64 s;
};

/* splitmix64 */
static __u64 rnd(struct rng *r)
{
	__u64 z = (r->s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static __u32 below(struct rng *r, __u32 n)
{
	return n ? rnd(r) % n : 0;
}

/* true with probability @per_mille / 1000 */
static int chance(struct rng *r, __u32 per_mille)
{
	return below(r, 1000) < per_mille;
}

/* ---- ids the fuzzer made, for the leftover check and GET ------------------------------- */

struct idset {
	pthread_mutex_t lock;
	__u32 *v;
	size_t n, cap;
};

static struct idset made_links = { PTHREAD_MUTEX_INITIALIZER };
static struct idset made_progs = { PTHREAD_MUTEX_INITIALIZER };
static struct idset xdp_ids = { PTHREAD_MUTEX_INITIALIZER };

/* Kept sorted: ids grow, so an insertion moves little. */
static void ids_add(struct idset *s, __u32 id)
{
	size_t i;

	pthread_mutex_lock(&s->lock);
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 1024;
		__u32 *v = realloc(s->v, cap * sizeof(*v));

		if (!v) {
			pthread_mutex_unlock(&s->lock);
			fail(FC_HARNESS, "out of memory for ids");
			return;
		}
		s->v = v;
		s->cap = cap;
	}
	for (i = s->n; i > 0 && s->v[i - 1] > id; i--)
		s->v[i] = s->v[i - 1];
	s->v[i] = id;
	s->n++;
	pthread_mutex_unlock(&s->lock);
}

static int cmp_u32(const void *a, const void *b)
{
	__u32 x = *(const __u32 *)a, y = *(const __u32 *)b;

	return (x > y) - (x < y);
}

static int ids_has(struct idset *s, __u32 id)
{
	int found;

	pthread_mutex_lock(&s->lock);
	found = s->n && bsearch(&id, s->v, s->n, sizeof(id), cmp_u32);
	pthread_mutex_unlock(&s->lock);
	return found;
}

static __u32 prog_id(int fd)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);

	return bpf_prog_get_info_by_fd(fd, &info, &len) ? 0 : info.id;
}

/* ---- tracing programs and the functions they attach to -------------------------------- */

enum { K_FENTRY, K_FEXIT, K_FMODRET, K_FSESSION, NR_KINDS };

static const struct {
	const char *name, *obj, *prog;
	__u32 attach;
	int calls_origin;	/* the global trampoline calls the function itself */
} kinds[NR_KINDS] = {
	[K_FENTRY] = { "fentry.multi", "gtramp.bpf.o", "fentry_multi", BPF_TRACE_FENTRY_MULTI, 0 },
	[K_FEXIT] = { "fexit.multi", "gexit.bpf.o", "fexit_multi", BPF_TRACE_FEXIT_MULTI, 1 },
	[K_FMODRET] = { "fmod_ret.multi", "gexit.bpf.o", "fmodret_multi", BPF_MODIFY_RETURN_MULTI,
			1 },
	[K_FSESSION] = { "fsession.multi", "gexit.bpf.o", "session_multi",
			 BPF_TRACE_FSESSION_MULTI, 1 },
};

#define PROGS_PER_KIND 2
#define NR_TPROGS (NR_KINDS * PROGS_PER_KIND)

struct tprog {
	pthread_rwlock_t lock;	/* read: fd in use; write: closing and loading */
	struct bpf_object *obj;
	int fd;
	__u32 id;
};

static struct tprog tprogs[NR_TPROGS];
static char bin_dir[4096];
static unsigned long pgid_addr;
static __u64 hits_closed;	/* getpgid calls counted by programs closed since */

static int tprog_kind(int slot)
{
	return slot / PROGS_PER_KIND;
}

/* Load program @slot: 0 or an errno. */
static int tprog_load(int slot)
{
	const int kind = tprog_kind(slot);
	struct tprog *t = &tprogs[slot];
	struct bpf_program *prog;
	char path[4200];
	int cfg;

	snprintf(path, sizeof(path), "%s/%s", bin_dir, kinds[kind].obj);
	errno = 0;
	t->obj = counter_load(path, kinds[kind].prog, getpid(), &prog);
	if (!t->obj)
		return errno ?: EIO;
	t->fd = bpf_program__fd(prog);
	t->id = prog_id(t->fd);
	ids_add(&made_progs, t->id);
	/*
	 * fmodret_multi returns cfg[3], or -cfg[0], when either is set (gexit.bpf.c): both
	 * stay 0, so that it never changes what a function returns.
	 */
	cfg = bpf_object__find_map_fd_by_name(t->obj, "cfg");
	if (cfg >= 0)
		for (__u32 k = 0; k < 4; k++)
			bpf_map_update_elem(cfg, &k, &(__u64){ 0 }, BPF_ANY);
	return 0;
}

static void tprog_close(int slot)
{
	struct tprog *t = &tprogs[slot];

	__atomic_fetch_add(&hits_closed, counter_hits(t->obj, pgid_addr), __ATOMIC_RELAXED);
	bpf_object__close(t->obj);
	t->obj = NULL;
	t->fd = -1;
}

/* The pool: safe targets of every kind (funcs.h), noreturn functions left out. */
static struct func_set pool;
static int *inj_idx, *noinj_idx;	/* pool functions fmod_ret may or may not attach to */
static size_t n_inj, n_noinj;
static int pgid_idx;			/* __x64_sys_getpgid in the pool */
static __u32 alias_ids[2];		/* two BTF names of one function */
static __u32 denied_ids[2];		/* on the verifier's deny list */
static __u32 nonfunc_ids[3];		/* an INT, a STRUCT, a FUNC_PROTO */
static __u32 *noreturn_ids;		/* refused for the exit kinds */
static size_t n_noreturn;
static struct func_set absent;		/* in BTF, not in the kernel */
static __u32 btf_types;

/* Names of the error-injection list ("name\tTYPE" lines), sorted. */
static char **errinj;
static size_t n_errinj;

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int read_errinj(void)
{
	FILE *f = fopen("/sys/kernel/debug/error_injection/list", "r");
	char line[512], name[256];
	size_t cap = 0;

	if (!f)
		return errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%255s", name) != 1)
			continue;
		if (n_errinj == cap) {
			cap = cap ? 2 * cap : 1024;
			errinj = realloc(errinj, cap * sizeof(*errinj));
			if (!errinj)
				break;
		}
		errinj[n_errinj++] = strdup(name);
	}
	fclose(f);
	if (!errinj)
		return ENOMEM;
	qsort(errinj, n_errinj, sizeof(*errinj), cmp_str);
	return 0;
}

/* What check_attach_modify_return() lets fmod_ret attach to. */
static int fmodret_allowed(const char *name)
{
	return !strncmp(name, "security_", 9) ||
	       bsearch(&name, errinj, n_errinj, sizeof(*errinj), cmp_str);
}

static struct btf *btf;

static void swap_func(struct func_set *set, size_t i, size_t j)
{
	__u32 id = set->ids[i];
	char *name = set->names[i];

	set->ids[i] = set->ids[j];
	set->names[i] = set->names[j];
	set->ids[j] = id;
	set->names[j] = name;
}

static __s32 func_id(const char *name)
{
	return btf__find_by_name_kind(btf, name, BTF_KIND_FUNC);
}

/* UAPI_FUZZ_POOL: only the first @n functions, getpgid and getpriority moved there. */
static void pool_keep(size_t n)
{
	size_t k = 0;

	if (!n || n >= pool.cnt)
		return;
	for (size_t i = 0; i < pool.cnt; i++) {
		if (strcmp(pool.names[i], "__x64_sys_getpgid") &&
		    strcmp(pool.names[i], "__x64_sys_getpriority"))
			continue;
		swap_func(&pool, i, k++);
	}
	for (size_t i = n; i < pool.cnt; i++)
		free(pool.names[i]);
	pool.cnt = n;
	pgid_idx = 0;
	if (strcmp(pool.names[0], "__x64_sys_getpgid"))
		swap_func(&pool, 0, 1);
}

/* The pool and the ids of each fault: 0, or an errno with a message on stderr. */
static int setup_funcs(void)
{
	static const char *const globs[] = {
		"__x64_sys_*", "vfs_*", "seq_*", "proc_*", "kernfs_*", "pipe_*", "sock_*",
		"security_*", "tcp_*", "udp_*", "inet_*", "ext4_*", NULL };
	static const char *const must[] = { "__x64_sys_getpgid", "__x64_sys_getpriority",
					    NULL };
	const struct btf_type *t;
	struct ksym pair[2];
	size_t i, k;
	int err;

	btf = btf__load_vmlinux_btf();
	if (!btf)
		return errno;
	btf_types = btf__type_cnt(btf);
	err = -func_set_collect(&pool, btf, globs, must, 4000);
	if (err)
		return err;
	func_set_drop_noreturn(&pool);
	if (alias_pair(btf, "__x64_sys_munlockall", pair) != 2) {
		fprintf(stderr, "uapi-fuzz: __x64_sys_munlockall has no alias in BTF\n");
		return ENOENT;
	}
	alias_ids[0] = func_id(pair[0].name);
	alias_ids[1] = func_id(pair[1].name);
	/* Only in the alias fault: a link of pool functions never names them. */
	pgid_idx = -1;
	for (i = k = 0; i < pool.cnt; i++) {
		if (pool.ids[i] == alias_ids[0] || pool.ids[i] == alias_ids[1]) {
			free(pool.names[i]);
			continue;
		}
		pool.ids[k] = pool.ids[i];
		pool.names[k] = pool.names[i];
		if (!strcmp(pool.names[k], "__x64_sys_getpgid"))
			pgid_idx = k;
		k++;
	}
	pool.cnt = k;
	pool_keep(getenv("UAPI_FUZZ_POOL") ? atoi(getenv("UAPI_FUZZ_POOL")) : 0);
	err = read_errinj();
	if (err) {
		fprintf(stderr, "uapi-fuzz: the error-injection list: %s\n", strerror(err));
		return err;
	}
	inj_idx = calloc(pool.cnt, sizeof(*inj_idx));
	noinj_idx = calloc(pool.cnt, sizeof(*noinj_idx));
	noreturn_ids = calloc(64, sizeof(*noreturn_ids));
	if (!inj_idx || !noinj_idx || !noreturn_ids)
		return ENOMEM;
	for (i = 0; i < pool.cnt; i++) {
		if (fmodret_allowed(pool.names[i]))
			inj_idx[n_inj++] = i;
		else
			noinj_idx[n_noinj++] = i;
	}
	denied_ids[0] = func_id("migrate_disable");	/* deny list with CONFIG_SMP */
	denied_ids[1] = func_id("migrate_enable");
	nonfunc_ids[0] = btf__find_by_name_kind(btf, "int", BTF_KIND_INT);
	nonfunc_ids[1] = btf__find_by_name_kind(btf, "task_struct", BTF_KIND_STRUCT);
	t = pgid_idx >= 0 ? btf__type_by_id(btf, pool.ids[pgid_idx]) : NULL;
	nonfunc_ids[2] = t ? t->type : 0;
	for (__u32 id = 1; id < btf_types && n_noreturn < 64; id++) {
		t = btf__type_by_id(btf, id);
		if (btf_is_func(t) && func_noreturn(btf__name_by_offset(btf, t->name_off)))
			noreturn_ids[n_noreturn++] = id;
	}
	err = -func_set_collect_absent(&absent, btf, 64);
	if (err)
		return err;
	printf("# pool: %zu functions, %zu fmod_ret may take; %zu absent, %zu noreturn; aliases %s and %s\n",
	       pool.cnt, n_inj, absent.cnt, n_noreturn, pair[0].name, pair[1].name);
	if (pgid_idx < 0 || !fmodret_allowed(pool.names[pgid_idx]) ||
	    (__s32)denied_ids[0] <= 0 || (__s32)denied_ids[1] <= 0 ||
	    (__s32)nonfunc_ids[0] <= 0 || (__s32)nonfunc_ids[1] <= 0 || !nonfunc_ids[2] ||
	    !n_noreturn || !absent.cnt) {
		fprintf(stderr, "uapi-fuzz: some function kind is missing from this kernel\n");
		return ENOENT;
	}
	return 0;
}

/* ---- the link table -------------------------------------------------------------------- */

#define MAX_LINKS 48

struct link {
	int fd;
	int refs;		/* the table's, and one per link_info using a copy of fd */
	__u32 id, prog_id, cnt;
	int prog, global, creator;
	__u32 *ids;		/* sorted, as the kernel keeps them */
	__u64 *cookies;		/* along with ids; NULL: none */
	int *pidx;		/* pool indices of the functions */
	int origin_pgid;	/* a global link whose trampoline calls getpgid itself */
};

static struct link *links[MAX_LINKS];
static pthread_mutex_t tab_lock = PTHREAD_MUTEX_INITIALIZER;
/*
 * Under tab_lock, for the EBUSY a link_create without a fault may get: per program slot
 * and backend, how many links (live, or being made) name each pool function, and the
 * change at which that count last changed; the same for global links that call getpgid
 * themselves, and for the module. A reloaded slot's old links count for its next program
 * as well: an EBUSY it cannot get is then let through, never the reverse.
 */
static __u64 seq;
static unsigned short *cover[NR_TPROGS][2];
static __u64 *cover_seq[NR_TPROGS][2];
static int origin_pgid_cnt, kmod_maybe;
static __u64 origin_pgid_seq, kmod_seq;

/* Under tab_lock: a link of @prog on @global names @pidx (@delta 1) or not any more (-1). */
static __u64 cover_change(int prog, int global, const int *pidx, __u32 n, int delta,
			  int origin_pgid)
{
	seq++;
	for (__u32 i = 0; i < n; i++) {
		cover[prog][global][pidx[i]] += delta;
		cover_seq[prog][global][pidx[i]] = seq;
	}
	if (origin_pgid) {
		origin_pgid_cnt += delta;
		origin_pgid_seq = seq;
	}
	return seq;
}

/*
 * Under tab_lock: was another link of @prog on @global on one of @pidx there, or coming
 * or going, since @since, when this one registered?
 */
static int cover_conflict(int prog, int global, const int *pidx, __u32 n, __u64 since)
{
	for (__u32 i = 0; i < n; i++)
		if (cover[prog][global][pidx[i]] > 1 || cover_seq[prog][global][pidx[i]] > since)
			return 1;
	return 0;
}

static void link_free(struct link *l)
{
	free(l->ids);
	free(l->cookies);
	free(l->pidx);
	free(l);
}

/* Drops a reference; the last one (after its fd is closed) takes the link's functions off. */
static void link_put(struct link *l)
{
	int last;

	pthread_mutex_lock(&tab_lock);
	last = !--l->refs;
	if (last)
		cover_change(l->prog, l->global, l->pidx, l->cnt, -1, l->origin_pgid);
	pthread_mutex_unlock(&tab_lock);
	if (last)
		link_free(l);
}

/* Under tab_lock: a random link of the table, its slot in *@slot; NULL if there is none. */
static struct link *link_any(struct rng *r, int *slot)
{
	int start = below(r, MAX_LINKS);

	for (int i = 0; i < MAX_LINKS; i++) {
		*slot = (start + i) % MAX_LINKS;
		if (links[*slot])
			return links[*slot];
	}
	return NULL;
}

/* ---- per-thread state and counters ----------------------------------------------------- */

#define HIST 1024

struct thr {
	pthread_t tid;
	int idx;
	struct rng rng;
	long ops;
	int *perm;		/* a permutation of the pool's indices */
	int *perm_inj;		/* of the indices fmod_ret may take */
	char args[1024];	/* the operation, for a failure */
	/* the last operations, printed when the worker stops coming back */
	struct {
		double at;
		int op, err;
		char args[200];
	} hist[HIST];
	unsigned int nhist;
};

static unsigned long idle[NR_OPS];	/* nothing to do: no link in the table */
static __u64 op_ns[NR_OPS];		/* time spent in each operation */
static unsigned long closed_by_other, pgid_links, enum_checks, info_checked;
static unsigned long get_checked, kmod_transitions;
/*
 * A known kernel bug, not a documented answer: an fexit, fmod_ret or fsession.multi link
 * on the per-function backend that names a function an IPMODIFY ftrace user (the module,
 * livepatch) has is refused with EAGAIN, every time (upstream 7.3's
 * bpf_trampoline_multi_attach() returns what bpf_tramp_ftrace_ops_func() asks
 * update_ftrace_direct_add()'s caller to retry; bpf_trampoline_update() retries, the
 * multi-link does not). Counted and printed, not failed, while the series has it: set
 * UAPI_FUZZ_STRICT=1 to fail on it too.
 */
static unsigned long known_eagain;
static int strict;

static void bump(unsigned long *c)
{
	__atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
}

/* ---- link_create ----------------------------------------------------------------------- */

enum lfault {
	LF_NONE, LF_JUNK_FLAGS, LF_TARGET_FD, LF_ZERO_CNT, LF_NULL_IDS, LF_HUGE_CNT,
	LF_EXTRA_CNT, LF_DUP, LF_ALIAS, LF_ID_ZERO, LF_ID_HUGE, LF_ID_NONFUNC, LF_ID_ABSENT,
	LF_ID_DENIED, LF_NORETURN, LF_NOT_INJECTABLE, LF_WRONG_ATTACH, LF_BAD_PROG_FD,
	NR_LFAULTS
};

/* A fault of an operation's arguments, and the errno it gives alone. */
struct fault {
	const char *name;
	int err;
};

/* See link_create_errnos. */
static const struct fault lfaults[NR_LFAULTS] = {
	[LF_NONE] = { "none", 0 },
	[LF_JUNK_FLAGS] = { "junk flags", EINVAL },
	[LF_TARGET_FD] = { "a target fd", EINVAL },
	[LF_ZERO_CNT] = { "count 0", EINVAL },
	[LF_NULL_IDS] = { "no ids", EINVAL },
	[LF_HUGE_CNT] = { "count > 1 << 20", E2BIG },
	[LF_EXTRA_CNT] = { "count past the ids (zeros)", EINVAL },
	[LF_DUP] = { "a duplicate id", EINVAL },
	[LF_ALIAS] = { "two names of one function", EBUSY },
	[LF_ID_ZERO] = { "id 0", EINVAL },
	[LF_ID_HUGE] = { "an id past the BTF", EINVAL },
	[LF_ID_NONFUNC] = { "an id of no FUNC", EINVAL },
	[LF_ID_ABSENT] = { "a function absent from the kernel", ENOENT },
	[LF_ID_DENIED] = { "a denied function", EINVAL },
	[LF_NORETURN] = { "a noreturn function", EINVAL },
	[LF_NOT_INJECTABLE] = { "a function off the error-injection list", EINVAL },
	[LF_WRONG_ATTACH] = { "another attach type", EINVAL },
	[LF_BAD_PROG_FD] = { "program fd -1", EBADF },
};

static enum lfault pick_fault(struct rng *r, int kind)
{
	for (;;) {
		enum lfault f = 1 + below(r, NR_LFAULTS - 1);

		if (f == LF_NORETURN && kind == K_FENTRY)
			continue;
		if (f == LF_NOT_INJECTABLE && (kind != K_FMODRET || !n_noinj))
			continue;
		return f;
	}
}

/*
 * The per-function backend makes a trampoline per function, which under TCG takes long:
 * its links stay at a few hundred functions; global ones reach a few thousand.
 */
#define PERFN_MAX 400

static __u32 pick_size(struct rng *r, int global, size_t avail)
{
	__u32 p = below(r, 1000), n;

	if (p < 450)
		n = 1 + below(r, 4);
	else if (p < 750)
		n = 5 + below(r, 60);
	else if (p < 980)
		n = 65 + below(r, 236);
	else
		n = global ? 1000 + below(r, 2001) : 301 + below(r, PERFN_MAX - 300);
	return n < avail ? n : avail;
}

/* @n distinct values of @from[0..@avail), shuffling @from further in place. */
static void pick(struct rng *r, int *from, size_t avail, int *out, __u32 n)
{
	for (__u32 i = 0; i < n; i++) {
		__u32 j = i + below(r, avail - i);
		int v = from[j];

		from[j] = from[i];
		from[i] = v;
		out[i] = v;
	}
}

struct pair {
	__u32 id;
	__u64 cookie;
};

static int cmp_pair(const void *a, const void *b)
{
	return cmp_u32(&((const struct pair *)a)->id, &((const struct pair *)b)->id);
}

/* A link as the kernel keeps it: its functions sorted by id, cookies along. */
static struct link *link_new(int fd, const __u32 *ids, const __u64 *cookies, const int *pidx,
			     __u32 n)
{
	struct link *l = calloc(1, sizeof(*l));
	struct pair *p = calloc(n, sizeof(*p));

	if (!l || !p)
		goto nomem;
	l->ids = calloc(n, sizeof(*l->ids));
	l->pidx = calloc(n, sizeof(*l->pidx));
	l->cookies = cookies ? calloc(n, sizeof(*l->cookies)) : NULL;
	if (!l->ids || !l->pidx || (cookies && !l->cookies))
		goto nomem;
	for (__u32 i = 0; i < n; i++)
		p[i] = (struct pair){ ids[i], cookies ? cookies[i] : 0 };
	qsort(p, n, sizeof(*p), cmp_pair);
	for (__u32 i = 0; i < n; i++) {
		l->ids[i] = p[i].id;
		if (l->cookies)
			l->cookies[i] = p[i].cookie;
	}
	memcpy(l->pidx, pidx, n * sizeof(*pidx));
	l->fd = fd;
	l->cnt = n;
	l->refs = 1;
	free(p);
	return l;
nomem:
	free(p);
	if (l)
		link_free(l);
	return NULL;
}

/* Checks the link's info without arrays against what was attached. */
static void check_link_info(const char *what, int fd, const struct bpf_link_info *info,
			    __u32 prog, int kind, int global, __u32 cnt)
{
	if (info->type != BPF_LINK_TYPE_TRACING_MULTI || info->prog_id != prog ||
	    info->tracing_multi.attach_type != kinds[kind].attach ||
	    info->tracing_multi.count != cnt ||
	    info->tracing_multi.flags != (global ? BPF_F_TRACING_MULTI_GLOBAL : 0))
		fail(FC_INFO, "%s: link info of fd %d: type %u prog %u attach %u count %u flags %#x (want %u %u %u %u %#x)",
		     what, fd, info->type, info->prog_id, info->tracing_multi.attach_type,
		     info->tracing_multi.count, info->tracing_multi.flags,
		     BPF_LINK_TYPE_TRACING_MULTI, prog, kinds[kind].attach, cnt,
		     global ? BPF_F_TRACING_MULTI_GLOBAL : 0);
}

static void describe_create(struct thr *t, int prog, int global, enum lfault fault,
			    __u32 flags, __u32 cnt, __u32 n, const __u32 *ids, int cookies)
{
	const int kind = tprog_kind(prog);
	int len;

	len = snprintf(t->args, sizeof(t->args),
		       "[thread %d: %s %s prog %d, flags %#x, count %u of %u ids%s, fault: %s; ids",
		       t->idx, kinds[kind].name, global ? "global" : "per-function",
		       prog, flags, cnt, n, cookies ? " with cookies" : "", lfaults[fault].name);
	for (__u32 i = 0; i < n && i < 8 && len < (int)sizeof(t->args) - 40; i++) {
		const struct btf_type *bt = btf__type_by_id(btf, ids[i]);

		len += snprintf(t->args + len, sizeof(t->args) - len, " %u%s%s%s", ids[i],
				bt ? "(" : "", bt ? btf__name_by_offset(btf, bt->name_off) : "",
				bt ? ")" : "");
	}
	snprintf(t->args + len, sizeof(t->args) - len, "%s]", n > 8 ? " ..." : "");
}

/*
 * UAPI_FUZZ_LINKS=gfentry,pfexit,...: only links of these kinds and backends (g global,
 * p per-function; fentry, fexit, fmod_ret, fsession), to narrow a finding down.
 */
static int link_kinds[2][NR_KINDS];

static void set_link_kinds(const char *list)
{
	if (list && !*list)
		list = NULL;
	for (int g = 0; g < 2; g++) {
		for (int k = 0; k < NR_KINDS; k++) {
			char want[32];
			size_t len;
			const char *at;

			len = snprintf(want, sizeof(want), "%c%.*s", g ? 'g' : 'p',
				       (int)strcspn(kinds[k].name, "."), kinds[k].name);
			at = list ? strstr(list, want) : NULL;
			link_kinds[g][k] = !list || (at && (at == list || at[-1] == ',') &&
						     (!at[len] || at[len] == ','));
		}
	}
}

static void op_link_create_one(struct thr *t, int prog, int global)
{
	struct rng *r = &t->rng;
	const int kind = tprog_kind(prog), fmodret = kind == K_FMODRET;
	const enum lfault fault = chance(r, 330) ? pick_fault(r, kind) : LF_NONE;
	__u32 n = pick_size(r, global, fmodret ? n_inj : pool.cnt), npidx = n, cnt;
	__u32 *ids = calloc(n + 16, sizeof(*ids));
	const int with_cookies = chance(r, 500);
	__u64 *cookies = with_cookies ? calloc(n + 16, sizeof(*cookies)) : NULL;
	int *pidx = calloc(n + 2, sizeof(*pidx)), has_pgid = 0, kmod_near = 0, origin_pgid, fd, err;
	struct bpf_link_info info = {};
	__u32 info_len = sizeof(info), tprog_id;
	struct expect want = {};
	union bpf_attr attr;
	struct link *l;
	__u64 since;

	if (!ids || !pidx || (with_cookies && !cookies)) {
		fail(FC_HARNESS, "link_create: out of memory");
		goto out;
	}
	pick(r, fmodret ? t->perm_inj : t->perm, fmodret ? n_inj : pool.cnt, pidx, n);
	/* getpgid in a quarter of them: the module's function, which the worker calls */
	if (chance(r, 250)) {
		for (__u32 i = 0; i < n; i++)
			has_pgid |= pidx[i] == pgid_idx;
		if (!has_pgid)
			pidx[0] = pgid_idx;
	}
	for (__u32 i = 0; i < n; i++)
		ids[i] = pool.ids[pidx[i]];
	switch (fault) {
	case LF_DUP:
		ids[n] = ids[below(r, n)];
		n++;
		break;
	case LF_ALIAS:
		ids[n++] = alias_ids[0];
		ids[n++] = alias_ids[1];
		break;
	case LF_ID_ZERO:
		ids[n++] = 0;
		break;
	case LF_ID_HUGE:
		ids[n++] = chance(r, 500) ? 0x7fffffff : btf_types + below(r, 1000);
		break;
	case LF_ID_NONFUNC:
		ids[n++] = nonfunc_ids[below(r, 3)];
		break;
	case LF_ID_ABSENT:
		ids[n++] = absent.ids[below(r, absent.cnt)];
		break;
	case LF_ID_DENIED:
		ids[n++] = denied_ids[below(r, 2)];
		break;
	case LF_NORETURN:
		ids[n++] = noreturn_ids[below(r, n_noreturn)];
		break;
	case LF_NOT_INJECTABLE:
		pidx[npidx] = noinj_idx[below(r, n_noinj)];
		ids[n++] = pool.ids[pidx[npidx++]];
		break;
	default:
		break;
	}
	/* In BTF order, which the kernel takes without sorting, or shuffled. */
	if (chance(r, 500)) {
		qsort(ids, n, sizeof(*ids), cmp_u32);
	} else {
		for (__u32 i = n; i > 1; i--) {
			__u32 j = below(r, i), v = ids[j];

			ids[j] = ids[i - 1];
			ids[i - 1] = v;
		}
	}
	for (__u32 i = 0; cookies && i < n; i++)
		cookies[i] = rnd(r);
	has_pgid = 0;
	for (__u32 i = 0; i < npidx; i++)
		has_pgid |= pidx[i] == pgid_idx;
	origin_pgid = global && kinds[kind].calls_origin && has_pgid;

	memset(&attr, 0, sizeof(attr));
	attr.link_create.attach_type = kinds[kind].attach;
	attr.link_create.flags = global ? BPF_F_TRACING_MULTI_GLOBAL : 0;
	attr.link_create.tracing_multi.ids = (__u64)(unsigned long)ids;
	attr.link_create.tracing_multi.cookies = (__u64)(unsigned long)cookies;
	cnt = n;
	switch (fault) {
	case LF_JUNK_FLAGS:
		attr.link_create.flags |= 1u << (1 + below(r, 31));
		break;
	case LF_TARGET_FD:
		attr.link_create.target_fd = 1 + below(r, 64);
		break;
	case LF_ZERO_CNT:
		cnt = 0;
		break;
	case LF_NULL_IDS:
		attr.link_create.tracing_multi.ids = 0;
		break;
	case LF_HUGE_CNT:
		cnt = (1u << 20) + 1 + below(r, 1000);
		break;
	case LF_EXTRA_CNT:
		cnt = n + 1 + below(r, 8);	/* the arrays' zeroed tail */
		break;
	case LF_WRONG_ATTACH:
		attr.link_create.attach_type = kinds[(kind + 1 + below(r, NR_KINDS - 1)) %
						     NR_KINDS].attach;
		break;
	default:
		break;
	}
	attr.link_create.tracing_multi.cnt = cnt;
	describe_create(t, prog, global, fault, attr.link_create.flags, cnt, n, ids, !!cookies);

	pthread_mutex_lock(&tab_lock);
	since = cover_change(prog, global, pidx, npidx, 1, origin_pgid);
	pthread_mutex_unlock(&tab_lock);

	pthread_rwlock_rdlock(&tprogs[prog].lock);
	tprog_id = tprogs[prog].id;
	attr.link_create.prog_fd = fault == LF_BAD_PROG_FD ? -1 : tprogs[prog].fd;
	fd = syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	err = fd < 0 ? errno : 0;
	if (fd >= 0 && bpf_link_get_info_by_fd(fd, &info, &info_len))
		fail(FC_INFO, "link_create %s: link info: %s", t->args, errname(errno));
	pthread_rwlock_unlock(&tprogs[prog].lock);

	if (fault) {
		expect_add(&want, lfaults[fault].err);
	} else {
		expect_add(&want, 0);
		expect_add(&want, ENOMEM);
		pthread_mutex_lock(&tab_lock);
		/* the module on getpgid, there or coming or going */
		kmod_near = has_pgid && (kmod_maybe || kmod_seq > since);
		/* The module refuses what calls getpgid itself; H2 may refuse the rest. */
		if (cover_conflict(prog, global, pidx, npidx, since) ||
		    (kmod_near && (!global || kinds[kind].calls_origin)))
			expect_add(&want, EBUSY);
		pthread_mutex_unlock(&tab_lock);
	}
	if (err == EAGAIN && !strict && !global && kinds[kind].calls_origin && kmod_near) {
		bump(&known_eagain);
		count_outcome(OP_LINK_CREATE, err);
	} else {
		outcome(OP_LINK_CREATE, err, &want, t->args);
	}
	if (fd < 0)
		goto out_uncover;
	ids_add(&made_links, info.id);
	check_link_info(t->args, fd, &info, tprog_id, kind, global, npidx);
	l = fault ? NULL : link_new(fd, ids, cookies, pidx, n);
	if (!l) {
		/* a fault attached (counted above) or no memory: it goes at once */
		close(fd);
		goto out_uncover;
	}
	l->id = info.id;
	l->prog_id = tprog_id;
	l->prog = prog;
	l->global = global;
	l->creator = t->idx;
	l->origin_pgid = origin_pgid;
	if (has_pgid && kind != K_FMODRET)
		bump(&pgid_links);
	pthread_mutex_lock(&tab_lock);
	for (int i = 0; i < MAX_LINKS; i++) {
		if (!links[i]) {
			links[i] = l;
			l = NULL;
			break;
		}
	}
	pthread_mutex_unlock(&tab_lock);
	if (l) {
		/* the table is full */
		close(fd);
		link_put(l);
	}
	goto out;
out_uncover:
	pthread_mutex_lock(&tab_lock);
	cover_change(prog, global, pidx, npidx, -1, origin_pgid);
	pthread_mutex_unlock(&tab_lock);
out:
	free(ids);
	free(cookies);
	free(pidx);
}

static void op_link_create(struct thr *t)
{
	struct rng *r = &t->rng;
	int prog = below(r, NR_TPROGS), global = chance(r, 700);

	for (int i = 0; i < 1000 && !link_kinds[global][tprog_kind(prog)]; i++) {
		prog = below(r, NR_TPROGS);
		global = chance(r, 700);
	}
	op_link_create_one(t, prog, global);
}

/* ---- link_close, link_info, link_enum -------------------------------------------------- */

static void op_link_close(struct thr *t)
{
	struct link *l;
	int slot, err;

	pthread_mutex_lock(&tab_lock);
	l = link_any(&t->rng, &slot);
	if (l)
		links[slot] = NULL;
	pthread_mutex_unlock(&tab_lock);
	if (!l) {
		bump(&idle[OP_LINK_CLOSE]);
		return;
	}
	if (l->creator != t->idx)
		bump(&closed_by_other);
	snprintf(t->args, sizeof(t->args), "[thread %d: link %u of thread %d, fd %d]", t->idx,
		 l->id, l->creator, l->fd);
	err = close(l->fd) ? errno : 0;
	outcome(OP_LINK_CLOSE, err, NULL, t->args);
	link_put(l);
}

enum { LI_PLAIN, LI_EXACT, LI_SMALL, LI_ZERO, LI_LARGE, NR_LI };
static const char *const li_names[NR_LI] = {
	"no arrays", "arrays of its count", "arrays too small", "arrays of count 0",
	"arrays too large" };

/* What a link whose fd is @fd says about itself, checked against @l. */
static void link_info(struct thr *t, struct link *l, int fd)
{
	struct rng *r = &t->rng;
	int variant = below(r, NR_LI), want_ids, want_cookies, want_addrs, err;
	__u32 room, len = sizeof(struct bpf_link_info), given = 0, n;
	__u32 *ids = NULL;
	__u64 *cookies = NULL, *addrs = NULL;
	struct bpf_link_info info;
	struct expect want = {};

	if (variant == LI_SMALL && l->cnt == 1)
		variant = LI_ZERO;
	room = variant == LI_SMALL ? below(r, l->cnt - 1) + 1 :
	       variant == LI_LARGE ? l->cnt + 1 + below(r, 16) : l->cnt;
	want_ids = chance(r, 700);
	want_cookies = chance(r, 600);
	want_addrs = chance(r, 400) || (!want_ids && !want_cookies);
	memset(&info, 0, sizeof(info));
	if (variant != LI_PLAIN) {
		ids = want_ids ? calloc(room, sizeof(*ids)) : NULL;
		cookies = want_cookies ? calloc(room, sizeof(*cookies)) : NULL;
		addrs = want_addrs ? calloc(room, sizeof(*addrs)) : NULL;
		if ((want_ids && !ids) || (want_cookies && !cookies) || (want_addrs && !addrs)) {
			fail(FC_HARNESS, "link_info: out of memory");
			goto out;
		}
		info.tracing_multi.ids = (__u64)(unsigned long)ids;
		info.tracing_multi.cookies = (__u64)(unsigned long)cookies;
		info.tracing_multi.addrs = (__u64)(unsigned long)addrs;
		info.tracing_multi.count = given = variant == LI_ZERO ? 0 : room;
	}
	snprintf(t->args, sizeof(t->args), "[thread %d: link %u (%u functions, %s), %s: count %u%s%s%s]",
		 t->idx, l->id, l->cnt, l->global ? "global" : "per-function", li_names[variant],
		 given, ids ? " ids" : "", cookies ? " cookies" : "", addrs ? " addrs" : "");
	err = bpf_link_get_info_by_fd(fd, &info, &len) ? errno : 0;
	expect_add(&want, variant == LI_SMALL ? ENOSPC : variant == LI_ZERO ? EINVAL : 0);
	outcome(OP_LINK_INFO, err, &want, t->args);
	if (err && err != ENOSPC)
		goto out;
	bump(&info_checked);
	/* With ENOSPC only the arrays are written (bpf_link_get_info_by_fd()). */
	if (!err && info.id != l->id)
		fail(FC_INFO, "link_info %s: id %u", t->args, info.id);
	if (!err)
		check_link_info(t->args, fd, &info, l->prog_id, tprog_kind(l->prog), l->global,
				l->cnt);
	n = given < l->cnt ? given : l->cnt;
	for (__u32 i = 0; i < n; i++) {
		__u64 cookie = l->cookies ? l->cookies[i] : 0;

		if ((ids && ids[i] != l->ids[i]) || (cookies && cookies[i] != cookie) ||
		    (addrs && !addrs[i])) {
			fail(FC_INFO, "link_info %s: function %u: id %u cookie %#llx addr %#llx (want id %u cookie %#llx, an address)",
			     t->args, i, ids ? ids[i] : 0,
			     (unsigned long long)(cookies ? cookies[i] : 0),
			     (unsigned long long)(addrs ? addrs[i] : 0), l->ids[i],
			     (unsigned long long)cookie);
			break;
		}
	}
	for (__u32 i = n; i < given; i++) {
		if ((ids && ids[i]) || (cookies && cookies[i]) || (addrs && addrs[i])) {
			fail(FC_INFO, "link_info %s: written past the link's %u functions, at %u",
			     t->args, l->cnt, i);
			break;
		}
	}
out:
	free(ids);
	free(cookies);
	free(addrs);
}

/* fdinfo says the backend; small links only, since it lists every function. */
static void link_fdinfo(struct thr *t, struct link *l, int fd)
{
	char path[64], buf[4096];
	const char *want = l->global ? "backend:\tglobal\n" : "backend:\tper-function\n";
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "r");
	n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = 0;
	if (!strstr(buf, want))
		fail(FC_INFO, "link_info [thread %d: link %u]: fdinfo has no \"%.*s\"", t->idx,
		     l->id, (int)strlen(want) - 1, want);
}

static void op_link_info(struct thr *t)
{
	struct link *l;
	int slot, fd;

	pthread_mutex_lock(&tab_lock);
	l = link_any(&t->rng, &slot);
	fd = l ? fcntl(l->fd, F_DUPFD_CLOEXEC, 0) : -1;
	if (l && fd >= 0)
		l->refs++;
	pthread_mutex_unlock(&tab_lock);
	if (!l) {
		bump(&idle[OP_LINK_INFO]);
		return;
	}
	if (fd < 0) {
		fail(FC_HARNESS, "link_info: dup of link fd %d: %s", l->fd, strerror(errno));
		return;
	}
	link_info(t, l, fd);
	if (l->cnt <= 32 && chance(&t->rng, 200))
		link_fdinfo(t, l, fd);
	/* may be the link's last fd: then this thread detaches it */
	close(fd);
	link_put(l);
}

/* Every link in the table is in the kernel's enumeration; the table cannot change meanwhile. */
static void op_link_enum(struct thr *t)
{
	__u32 id = 0, *seen = NULL, n = 0, cap = 0;
	int err = 0;

	pthread_mutex_lock(&tab_lock);
	while (!bpf_link_get_next_id(id, &id)) {
		if (n == cap) {
			__u32 *v = realloc(seen, (cap = cap ? 2 * cap : 256) * sizeof(*v));

			if (!v) {
				err = ENOMEM;
				break;
			}
			seen = v;
		}
		seen[n++] = id;
	}
	if (!err && errno != ENOENT)
		err = errno;
	for (int i = 0; !err && i < MAX_LINKS; i++) {
		if (links[i] && !bsearch(&links[i]->id, seen, n, sizeof(*seen), cmp_u32))
			fail(FC_ENUM, "link_enum [thread %d]: link %u (fd %d, thread %d, %u functions) is not in BPF_LINK_GET_NEXT_ID's %u links",
			     t->idx, links[i]->id, links[i]->fd, links[i]->creator, links[i]->cnt,
			     n);
	}
	pthread_mutex_unlock(&tab_lock);
	free(seen);
	bump(&enum_checks);
	snprintf(t->args, sizeof(t->args), "[thread %d: %u links seen]", t->idx, n);
	outcome(OP_LINK_ENUM, err, NULL, t->args);
}

/* ---- XDP programs and their chains ----------------------------------------------------- */

#define NR_XDP 10
#define CHAIN_SLOTS 6		/* an entry per XDP action, and the wildcard */
#define MAX_RET 9		/* programs return 0..9: XDP actions and a few that are not */

enum { XT_PLAIN, XT_FRAGS, XT_DEVMAP, NR_XT };
static const char *const xt_names[NR_XT] = { "xdp", "xdp+frags", "devmap" };

struct xprog {
	pthread_rwlock_t lock;	/* read: fd in use; write: closing and loading */
	int fd, type;
	__u32 id, ret;
};

static struct xprog xprogs[NR_XDP];
static int tc_fd = -1, map_fd = -1;	/* a program and a map of other kinds */

/* A two-instruction program returning @ret: the fd, or -errno. */
static int load_ret(enum bpf_prog_type type, enum bpf_attach_type eat, __u32 flags, __u32 ret)
{
	struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = (__s32)ret },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = eat, .prog_flags = flags);
	int fd = bpf_prog_load(type, "fuzz_ret", "GPL", insns, 2, &opts);

	return fd < 0 ? -errno : fd;
}

/*
 * Load XDP program @x (its lock held for writing, or no thread running) of @type, or of a
 * random one when it is negative: 0 or an errno.
 */
static int xprog_load(struct xprog *x, struct rng *r, int type)
{
	__u32 p = below(r, 100);
	int fd;

	x->type = type >= 0 ? type : p < 80 ? XT_PLAIN : p < 90 ? XT_FRAGS : XT_DEVMAP;
	p = below(r, 100);
	x->ret = p < 60 ? XDP_PASS : p < 90 ? below(r, XDP_REDIRECT + 1) :
		 XDP_REDIRECT + 1 + below(r, MAX_RET - XDP_REDIRECT);
	fd = load_ret(BPF_PROG_TYPE_XDP, x->type == XT_DEVMAP ? BPF_XDP_DEVMAP : BPF_XDP,
		      x->type == XT_FRAGS ? BPF_F_XDP_HAS_FRAGS : 0, x->ret);
	if (fd < 0) {
		x->fd = -1;
		return -fd;
	}
	x->fd = fd;
	x->id = prog_id(fd);
	ids_add(&made_progs, x->id);
	ids_add(&xdp_ids, x->id);
	return 0;
}

/* Read locks on XDP programs @a and @b (may be equal), in slot order. */
static void xlock2(int a, int b)
{
	pthread_rwlock_rdlock(&xprogs[a < b ? a : b].lock);
	if (a != b)
		pthread_rwlock_rdlock(&xprogs[a < b ? b : a].lock);
}

static void xunlock2(int a, int b)
{
	pthread_rwlock_unlock(&xprogs[a].lock);
	if (a != b)
		pthread_rwlock_unlock(&xprogs[b].lock);
}

static int chain_cmd(int cmd, __u32 prog_fd, __u32 retval, __u32 next_fd, __u32 flags,
		     const void *entries, __u32 *count)
{
	union bpf_attr attr;
	int ret;

	memset(&attr, 0, sizeof(attr));
	attr.prog_chain.prog_fd = prog_fd;
	attr.prog_chain.retval = retval;
	attr.prog_chain.next_prog_fd = next_fd;
	attr.prog_chain.flags = flags;
	attr.prog_chain.entries = (__u64)(unsigned long)entries;
	attr.prog_chain.count = count ? *count : 0;
	ret = syscall(__NR_bpf, cmd, &attr, sizeof(attr));
	if (count)
		*count = attr.prog_chain.count;
	return ret < 0 ? errno : 0;
}

/* Faults of the chain commands, one at a time, and the errno each gives. */
enum cfault {
	CF_NONE, CF_FLAGS, CF_ENTRIES, CF_RANGE, CF_WILD_RET, CF_BADFD, CF_NEXT_BADFD,
	CF_NOT_XDP, CF_NEXT_NOT_XDP, CF_NEXT_MAP, CF_NEXT_FD, CF_REPLACE, CF_ARGS, NR_CF
};

static const struct fault cfaults[NR_CF] = {
	[CF_NONE] = { "none", 0 },
	[CF_FLAGS] = { "unknown flags", EINVAL },
	[CF_ENTRIES] = { "entries and count set", EINVAL },
	[CF_RANGE] = { "no XDP action", ERANGE },
	[CF_WILD_RET] = { "the wildcard with a return value", EINVAL },
	[CF_BADFD] = { "program fd -1", EBADF },
	[CF_NEXT_BADFD] = { "next fd -1", EBADF },
	[CF_NOT_XDP] = { "a tc program's chain", EINVAL },
	[CF_NEXT_NOT_XDP] = { "a tc program as next", EINVAL },
	[CF_NEXT_MAP] = { "a map as next", EINVAL },
	[CF_NEXT_FD] = { "a next fd", EINVAL },
	[CF_REPLACE] = { "REPLACE", EINVAL },
	[CF_ARGS] = { "a return value, next fd or flags", EINVAL },
};

static void describe_chain(struct thr *t, const char *what, int a, int b, __u32 retval,
			   __u32 flags, enum cfault f)
{
	snprintf(t->args, sizeof(t->args),
		 "[thread %d: %s (%s, id %u, returns %u)%s%s%s retval %u flags %#x, fault: %s]",
		 t->idx, what, xt_names[xprogs[a].type], xprogs[a].id, xprogs[a].ret,
		 b >= 0 ? " -> " : "", b >= 0 ? xt_names[xprogs[b].type] : "",
		 b >= 0 ? " program" : "", retval, flags, cfaults[f].name);
}

/* Key of a command: an XDP action now and then out of range, or the wildcard. */
static void chain_key(struct rng *r, enum cfault f, __u32 *retval, __u32 *flags)
{
	*flags = chance(r, 150) ? BPF_F_CHAIN_WILDCARD : 0;
	*retval = *flags ? 0 : below(r, XDP_REDIRECT + 1);
	if (f == CF_RANGE) {
		*flags = 0;
		*retval = XDP_REDIRECT + 1 + below(r, chance(r, 500) ? 8 : 0x7fffffff);
	} else if (f == CF_WILD_RET) {
		*flags = BPF_F_CHAIN_WILDCARD;
		*retval = 1 + below(r, 1000);
	} else if (f == CF_FLAGS) {
		*flags |= 1u << (2 + below(r, 30));
	}
}

/*
 * The next program for @a: itself now and then, or any program; mostly one of its type
 * (read without its lock: the command's expectation reads it again under the lock).
 */
static int pick_next(struct rng *r, int a)
{
	int b = below(r, NR_XDP);

	if (chance(r, 150))
		return a;
	if (chance(r, 100))
		return b;
	for (int i = 0; i < NR_XDP; i++, b = (b + 1) % NR_XDP)
		if (b != a && xprogs[b].type == xprogs[a].type)
			return b;
	return b;
}

static void op_chain_add(struct thr *t)
{
	static const enum cfault faults[] = {
		CF_FLAGS, CF_ENTRIES, CF_RANGE, CF_WILD_RET, CF_BADFD, CF_NEXT_BADFD,
		CF_NOT_XDP, CF_NEXT_NOT_XDP, CF_NEXT_MAP };
	struct rng *r = &t->rng;
	const enum cfault f = chance(r, 250) ? faults[below(r, sizeof(faults) / sizeof(*faults))] :
				CF_NONE;
	const int a = below(r, NR_XDP), b = pick_next(r, a);
	struct expect want = {};
	__u32 retval, flags, count = f == CF_ENTRIES ? 1 + below(r, 8) : 0, pfd, nfd;
	__u64 dummy[4];
	int err;

	chain_key(r, f, &retval, &flags);
	if (chance(r, 300))
		flags |= BPF_F_CHAIN_REPLACE;
	xlock2(a, b);
	pfd = f == CF_BADFD ? -1 : f == CF_NOT_XDP ? tc_fd : xprogs[a].fd;
	nfd = f == CF_NEXT_BADFD ? -1 : f == CF_NEXT_NOT_XDP ? tc_fd :
	      f == CF_NEXT_MAP ? map_fd : xprogs[b].fd;
	describe_chain(t, "add", a, b, retval, flags, f);
	err = chain_cmd(BPF_PROG_CHAIN_ADD, pfd, retval, nfd, flags,
			f == CF_ENTRIES && chance(r, 500) ? dummy : NULL, &count);
	if (f) {
		expect_add(&want, cfaults[f].err);
	} else if (xprogs[a].type != xprogs[b].type) {
		/* devmap after xdp, frags after plain, ...: they may not follow each other */
		expect_add(&want, EINVAL);
	} else {
		/* What is there decides EEXIST or ENOENT before the graph is walked. */
		expect_add(&want, flags & BPF_F_CHAIN_REPLACE ? ENOENT : EEXIST);
		expect_add(&want, ELOOP);
		if (a != b) {
			expect_add(&want, 0);
			expect_add(&want, E2BIG);
			expect_add(&want, ENOSPC);
			expect_add(&want, ENOMEM);
		}
	}
	xunlock2(a, b);
	outcome(OP_CHAIN_ADD, err, &want, t->args);
}

static void op_chain_del(struct thr *t)
{
	static const enum cfault faults[] = {
		CF_FLAGS, CF_ENTRIES, CF_RANGE, CF_WILD_RET, CF_BADFD, CF_NEXT_FD, CF_REPLACE };
	struct rng *r = &t->rng;
	const enum cfault f = chance(r, 200) ? faults[below(r, sizeof(faults) / sizeof(*faults))] :
				CF_NONE;
	const int a = below(r, NR_XDP);
	struct expect want = {};
	__u32 retval, flags, count = f == CF_ENTRIES ? 1 + below(r, 8) : 0;
	int err;

	chain_key(r, f, &retval, &flags);
	if (f == CF_REPLACE)
		flags |= BPF_F_CHAIN_REPLACE;
	pthread_rwlock_rdlock(&xprogs[a].lock);
	/* Mostly an entry that is there, as far as GET says: it may go meanwhile. */
	if (!f && chance(r, 700)) {
		struct bpf_prog_chain_entry e[CHAIN_SLOTS];
		__u32 n = CHAIN_SLOTS;

		if (!chain_cmd(BPF_PROG_CHAIN_GET, xprogs[a].fd, 0, 0, 0, e, &n) && n) {
			n = below(r, n < CHAIN_SLOTS ? n : CHAIN_SLOTS);
			retval = e[n].retval;
			flags = e[n].flags;
		}
	}
	describe_chain(t, "del", a, -1, retval, flags, f);
	err = chain_cmd(BPF_PROG_CHAIN_DEL, f == CF_BADFD ? -1 : xprogs[a].fd, retval,
			f == CF_NEXT_FD ? xprogs[below(r, NR_XDP)].fd : 0, flags, NULL, &count);
	pthread_rwlock_unlock(&xprogs[a].lock);
	if (f) {
		expect_add(&want, cfaults[f].err);
	} else {
		expect_add(&want, 0);
		expect_add(&want, ENOENT);
		expect_add(&want, ENOMEM);
	}
	outcome(OP_CHAIN_DEL, err, &want, t->args);
}

/* Entries GET wrote into @e[0..@n) of a buffer of @room, the rest of which is @canary. */
static void check_entries(struct thr *t, const struct bpf_prog_chain_entry *e, __u32 n,
			  __u32 room, __u8 canary)
{
	for (__u32 i = 0; i < n; i++) {
		int exact = e[i].flags == 0 && e[i].retval <= XDP_REDIRECT;
		int wildcard = e[i].flags == BPF_F_CHAIN_WILDCARD && e[i].retval == 0;

		if ((!exact && !wildcard) || (wildcard && i + 1 != n) ||
		    (i && exact && e[i].retval <= e[i - 1].retval) ||
		    !ids_has(&xdp_ids, e[i].next_prog_id)) {
			fail(FC_CHAIN, "chain_get %s: entry %u of %u: retval %u flags %#x next %u (exact entries by value, then the wildcard, each naming an XDP program of ours)",
			     t->args, i, n, e[i].retval, e[i].flags, e[i].next_prog_id);
			return;
		}
	}
	for (const __u8 *p = (const __u8 *)&e[n]; p < (const __u8 *)&e[room]; p++) {
		if (*p != canary) {
			fail(FC_CHAIN, "chain_get %s: written past its %u entries", t->args, n);
			return;
		}
	}
}

static void op_chain_get(struct thr *t)
{
	struct rng *r = &t->rng;
	const enum cfault f = chance(r, 150) ? (chance(r, 700) ? CF_ARGS : CF_BADFD) : CF_NONE;
	const int a = below(r, NR_XDP), buffer = chance(r, 750);
	struct bpf_prog_chain_entry e[16];
	const __u8 canary = rnd(r);
	struct bpf_prog_info info;
	__u32 room = chance(r, 500) ? below(r, CHAIN_SLOTS + 1) : below(r, 17), count = room;
	__u32 retval = 0, flags = 0, next = 0, len = sizeof(info);
	struct expect want = {};
	int err;

	if (f == CF_ARGS) {
		int which = below(r, 3);

		retval = which == 0 ? 1 + below(r, 100) : 0;
		next = which == 1 ? 1 + below(r, 100) : 0;
		flags = which == 2 ? 1u << below(r, 32) : 0;
	}
	memset(e, canary, sizeof(e));
	pthread_rwlock_rdlock(&xprogs[a].lock);
	snprintf(t->args, sizeof(t->args),
		 "[thread %d: get (%s, id %u), %s of %u, retval %u next %u flags %#x, fault: %s]",
		 t->idx, xt_names[xprogs[a].type], xprogs[a].id, buffer ? "buffer" : "no buffer",
		 room, retval, next, flags, cfaults[f].name);
	err = chain_cmd(BPF_PROG_CHAIN_GET, f == CF_BADFD ? -1 : xprogs[a].fd, retval, next,
			flags, buffer ? e : NULL, &count);
	/* The owner's counts in its info, read without the chain mutex. */
	memset(&info, 0, sizeof(info));
	if (!f && chance(r, 200) && !bpf_prog_get_info_by_fd(xprogs[a].fd, &info, &len) &&
	    info.nr_chain_entries > CHAIN_SLOTS)
		fail(FC_CHAIN, "chain_get %s: prog info says %u entries", t->args,
		     info.nr_chain_entries);
	pthread_rwlock_unlock(&xprogs[a].lock);
	if (f) {
		expect_add(&want, cfaults[f].err);
	} else {
		expect_add(&want, 0);
		if (buffer)
			expect_add(&want, ENOSPC);
	}
	outcome(OP_CHAIN_GET, err, &want, t->args);
	if (f || (err && err != ENOSPC))
		return;
	bump(&get_checked);
	if (count > CHAIN_SLOTS || (buffer && (err == ENOSPC) != (count > room)))
		fail(FC_CHAIN, "chain_get %s: %s with count %u", t->args, errname(err), count);
	else if (buffer)
		check_entries(t, e, count < room ? count : room, 16, canary);
}

static void op_xdp_run(struct thr *t)
{
	struct rng *r = &t->rng;
	const int a = below(r, NR_XDP);
	unsigned char pkt[64] = { 0 };
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt, .data_size_in = sizeof(pkt),
		    .repeat = 1 + below(r, 4));
	struct expect want = {};
	int err;

	pthread_rwlock_rdlock(&xprogs[a].lock);
	snprintf(t->args, sizeof(t->args), "[thread %d: run (%s, id %u, returns %u) %u times]",
		 t->idx, xt_names[xprogs[a].type], xprogs[a].id, xprogs[a].ret, opts.repeat);
	err = bpf_prog_test_run_opts(xprogs[a].fd, &opts) ? errno : 0;
	expect_add(&want, xprogs[a].type == XT_DEVMAP ? EINVAL : 0);
	pthread_rwlock_unlock(&xprogs[a].lock);
	outcome(OP_XDP_RUN, err, &want, t->args);
	/* The verdict is some program's return value. */
	if (!err && opts.retval > MAX_RET)
		fail(FC_RUN, "xdp_run %s: verdict %u, which no program returns", t->args,
		     opts.retval);
}

static void op_xdp_reload(struct thr *t)
{
	const int a = below(&t->rng, NR_XDP);
	struct xprog *x = &xprogs[a];
	int err;

	pthread_rwlock_wrlock(&x->lock);
	snprintf(t->args, sizeof(t->args), "[thread %d: close (%s, id %u) and load another]",
		 t->idx, xt_names[x->type], x->id);
	close(x->fd);
	err = xprog_load(x, &t->rng, -1);
	pthread_rwlock_unlock(&x->lock);
	outcome(OP_XDP_RELOAD, err, NULL, t->args);
}

/* ---- tracing programs again, and the module -------------------------------------------- */

static void op_prog_reload(struct thr *t)
{
	const int slot = below(&t->rng, NR_TPROGS);
	int err;

	pthread_rwlock_wrlock(&tprogs[slot].lock);
	snprintf(t->args, sizeof(t->args), "[thread %d: close %s program %d (id %u), load another]",
		 t->idx, kinds[tprog_kind(slot)].name, slot, tprogs[slot].id);
	tprog_close(slot);
	err = tprog_load(slot);
	pthread_rwlock_unlock(&tprogs[slot].lock);
	outcome(OP_PROG_RELOAD, err, NULL, t->args);
	if (err)
		exit(1);	/* the table would hold no program */
}

#define KMOD_NAME "gtramp_kmod"
static char kmod_path[4096];
static pthread_mutex_t kmod_lock = PTHREAD_MUTEX_INITIALIZER;

/* Loads the module when it is not there, unloads it when it is: which it was. */
static enum op op_kmod(struct thr *t)
{
	struct expect want = {};
	char params[32];
	int loaded, err;
	__u64 since;

	pthread_mutex_lock(&kmod_lock);
	loaded = kmod_is_loaded(KMOD_NAME);
	pthread_mutex_lock(&tab_lock);
	kmod_maybe = 1;
	since = kmod_seq = ++seq;
	pthread_mutex_unlock(&tab_lock);
	snprintf(t->args, sizeof(t->args), "[thread %d: %s %.900s]", t->idx,
		 loaded ? "unload" : "load", loaded ? KMOD_NAME : kmod_path);
	snprintf(params, sizeof(params), "tgid=%d", getpid());
	err = loaded ? kmod_remove(KMOD_NAME) : kmod_insert(kmod_path, params);
	expect_add(&want, 0);
	pthread_mutex_lock(&tab_lock);
	if (!loaded) {
		expect_add(&want, EAGAIN);
		/* a global link that calls getpgid itself, there or coming or going */
		if (origin_pgid_cnt || origin_pgid_seq > since)
			expect_add(&want, EBUSY);
	}
	kmod_maybe = kmod_is_loaded(KMOD_NAME);
	kmod_seq = ++seq;
	pthread_mutex_unlock(&tab_lock);
	pthread_mutex_unlock(&kmod_lock);
	if (!err)
		bump(&kmod_transitions);
	outcome(loaded ? OP_KMOD_UNLOAD : OP_KMOD_LOAD, err, &want, t->args);
	return loaded ? OP_KMOD_UNLOAD : OP_KMOD_LOAD;
}

/* ---- threads --------------------------------------------------------------------------- */

/*
 * The operations' weights; to narrow a finding down, UAPI_FUZZ_SKIP=op,op,... leaves
 * operations out (link_create, chain_add, kmod_load, ...), and UAPI_FUZZ_POOL=N keeps only
 * N functions (getpgid and getpriority among them) in the pool.
 */
static int weights[NR_OPS], total_weight;

static void set_weights(const char *skip)
{
	for (int op = 0; op < NR_OPS; op++) {
		const char *at = skip ? strstr(skip, ops[op].name) : NULL;
		size_t len = strlen(ops[op].name);
		int skipped = at && (at == skip || at[-1] == ',') && (!at[len] || at[len] == ',');

		weights[op] = skipped ? 0 : ops[op].weight;
		total_weight += weights[op];
	}
}

static long total_ops, done_ops;
static double slow_op;	/* UAPI_FUZZ_SLOW: print operations that take longer (seconds) */
static double t_start;
static int stop_worker;
static unsigned long worker_calls;
static double worker_seen;	/* when the worker last came back from its calls */

/*
 * Calls the functions links come and go on, so that their programs run. An oops in one
 * of its calls ends this thread only: the end checks that it kept coming back.
 */
static void *worker(void *arg)
{
	while (!__atomic_load_n(&stop_worker, __ATOMIC_RELAXED)) {
		double seen = now();

		__atomic_store(&worker_seen, &seen, __ATOMIC_RELAXED);
		for (int i = 0; i < 16; i++) {
			syscall(SYS_getpgid, 0);
			syscall(SYS_getpriority, 0 /* PRIO_PROCESS */, 0);
		}
		munlockall();
		__atomic_fetch_add(&worker_calls, 33, __ATOMIC_RELAXED);
		usleep(2000);
	}
	return NULL;
}

static struct thr *thr;
static int nthreads;

/*
 * The worker stopped coming back from its calls (an oops killed it, or a call hangs):
 * once, what each thread finished from a second before its last return to 0.2 s after,
 * with times relative to that return.
 */
static void worker_gone(void)
{
	static int printed;
	double seen, t = now();

	__atomic_load(&worker_seen, &seen, __ATOMIC_RELAXED);
	if (t - seen < 3 || __atomic_exchange_n(&printed, 1, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&out_lock);
	printf("# the worker last came back %.3f s ago; operations finished around then:\n",
	       t - seen);
	for (int i = 0; i < nthreads; i++) {
		struct thr *h = &thr[i];

		for (unsigned int j = h->nhist > HIST ? h->nhist - HIST : 0; j < h->nhist; j++) {
			unsigned int k = j % HIST;
			double at = h->hist[k].at - seen;

			if (at >= -1 && at <= 0.2)
				printf("#   %+.4f s thread %d %s: %s %s\n", at, i,
				       ops[h->hist[k].op].name, errname(h->hist[k].err),
				       h->hist[k].args);
		}
	}
	pthread_mutex_unlock(&out_lock);
}

static void progress(void)
{
	long d = __atomic_add_fetch(&done_ops, 1, __ATOMIC_RELAXED);
	double el;

	if (d * 10 / total_ops == (d - 1) * 10 / total_ops)
		return;
	el = now() - t_start;
	fprintf(stderr, "uapi-fuzz: %ld%%: %ld of %ld operations, %.0f s, %.1f/s\n",
		d * 100 / total_ops, d, total_ops, el, d / (el > 0 ? el : 1));
}

static void *fuzzer(void *arg)
{
	struct thr *t = arg;

	for (long i = 0; i < t->ops; i++) {
		int w = below(&t->rng, total_weight), op = 0;
		double t0 = now();

		snprintf(t->args, sizeof(t->args), "[thread %d: nothing to do]", t->idx);
		last_err = 0;

		while (op < NR_OPS - 1 && w >= weights[op]) {
			w -= weights[op];
			op++;
		}
		switch (op) {
		case OP_LINK_CREATE:
			op_link_create(t);
			break;
		case OP_LINK_CLOSE:
			op_link_close(t);
			break;
		case OP_LINK_INFO:
			op_link_info(t);
			break;
		case OP_LINK_ENUM:
			op_link_enum(t);
			break;
		case OP_CHAIN_ADD:
			op_chain_add(t);
			break;
		case OP_CHAIN_DEL:
			op_chain_del(t);
			break;
		case OP_CHAIN_GET:
			op_chain_get(t);
			break;
		case OP_XDP_RUN:
			op_xdp_run(t);
			break;
		case OP_XDP_RELOAD:
			op_xdp_reload(t);
			break;
		case OP_PROG_RELOAD:
			op_prog_reload(t);
			break;
		default:
			op = op_kmod(t);
			break;
		}
		t->hist[t->nhist % HIST].at = now();
		t->hist[t->nhist % HIST].op = op;
		t->hist[t->nhist % HIST].err = last_err;
		snprintf(t->hist[t->nhist % HIST].args, sizeof(t->hist[0].args), "%.199s",
			 t->args);
		t->nhist++;
		worker_gone();
		t0 = now() - t0;
		__atomic_fetch_add(&op_ns[op], (__u64)(t0 * 1e9), __ATOMIC_RELAXED);
		if (slow_op > 0 && t0 >= slow_op) {
			pthread_mutex_lock(&out_lock);
			printf("# slow: %.3f s %s %s\n", t0, ops[op].name, t->args);
			pthread_mutex_unlock(&out_lock);
		}
		progress();
	}
	return NULL;
}

/* ---- setup and the end ----------------------------------------------------------------- */

static int setup_progs(struct rng *r)
{
	int err;

	for (int i = 0; i < NR_TPROGS; i++) {
		pthread_rwlock_init(&tprogs[i].lock, NULL);
		err = tprog_load(i);
		if (err) {
			fprintf(stderr, "uapi-fuzz: loading %s: %s\n",
				kinds[tprog_kind(i)].prog, strerror(err));
			return err;
		}
	}
	/* Two of each type at least, so that every pair that may follow is there. */
	for (int i = 0; i < NR_XDP; i++) {
		pthread_rwlock_init(&xprogs[i].lock, NULL);
		err = xprog_load(&xprogs[i], r, i < 2 * NR_XT ? i / 2 : -1);
		if (err) {
			fprintf(stderr, "uapi-fuzz: loading an XDP program: %s\n", strerror(err));
			return err;
		}
	}
	tc_fd = load_ret(BPF_PROG_TYPE_SCHED_CLS, 0, 0, 0);
	map_fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "fuzz_map", 4, 4, 1, NULL);
	if (tc_fd < 0 || map_fd < 0) {
		fprintf(stderr, "uapi-fuzz: a tc program and a map: %s\n", strerror(errno));
		return errno;
	}
	ids_add(&made_progs, prog_id(tc_fd));
	for (int p = 0; p < NR_TPROGS; p++) {
		for (int g = 0; g < 2; g++) {
			cover[p][g] = calloc(pool.cnt, sizeof(**cover));
			cover_seq[p][g] = calloc(pool.cnt, sizeof(**cover_seq));
			if (!cover[p][g] || !cover_seq[p][g])
				return ENOMEM;
		}
	}
	return 0;
}

/* Everything the fuzzer holds, closed: links first, then programs. */
static void close_all(void)
{
	for (int i = 0; i < MAX_LINKS; i++) {
		if (!links[i])
			continue;
		close(links[i]->fd);
		link_put(links[i]);
		links[i] = NULL;
	}
	for (int i = 0; i < NR_TPROGS; i++)
		tprog_close(i);
	for (int i = 0; i < NR_XDP; i++)
		close(xprogs[i].fd);
	close(tc_fd);
	close(map_fd);
}

/* Links (@link) or programs of ours the kernel still has; the first in *@first. */
static unsigned long leftovers(int link, __u32 *first)
{
	unsigned long n = 0;
	__u32 id = 0;

	while (!(link ? bpf_link_get_next_id(id, &id) : bpf_prog_get_next_id(id, &id)))
		if (ids_has(link ? &made_links : &made_progs, id) && !n++)
			*first = id;
	return n;
}

static const char *prog_desc(__u32 id)
{
	static char buf[128];
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);
	int fd = bpf_prog_get_fd_by_id(id);

	snprintf(buf, sizeof(buf), "program %u", id);
	if (fd >= 0 && !bpf_prog_get_info_by_fd(fd, &info, &len))
		snprintf(buf, sizeof(buf), "program %u (%s, type %u)", id, info.name, info.type);
	if (fd >= 0)
		close(fd);
	return buf;
}

static void print_stats(double elapsed, unsigned long seed, int nthreads)
{
	unsigned long refusals = 0;

	for (int op = 0; op < NR_OPS; op++) {
		printf("# %-12s %8lu ok", ops[op].name, stats[op][0]);
		for (int e = 1; e < MAX_ERRNO; e++) {
			if (!stats[op][e])
				continue;
			printf(", %s %lu", errname(e), stats[op][e]);
			refusals += stats[op][e];
		}
		if (idle[op])
			printf(" (%lu with nothing to do)", idle[op]);
		printf("; %.1f s\n", op_ns[op] / 1e9);
	}
	printf("# %ld operations in %.1f s: %.1f/s (seed %lu, %d threads); %lu refusals; %lu links closed by another thread than their maker's; module loaded or unloaded %lu times; worker calls %lu\n",
	       done_ops, elapsed, done_ops / (elapsed > 0 ? elapsed : 1), seed, nthreads,
	       refusals, closed_by_other, kmod_transitions, worker_calls);
}

int main(int argc, char **argv)
{
	const long n_ops = argc > 1 ? atol(argv[1]) : 0;
	const unsigned long seed = argc > 2 ? strtoul(argv[2], NULL, 0) : 1;
	const int threads = argc > 3 ? atoi(argv[3]) : 3;
	unsigned long n_links, n_progs;
	__u32 first_link = 0, first_prog = 0;
	struct rng setup_rng = { seed };
	pthread_t wtid;
	double elapsed, t_end, worker_late;
	__u64 hits;
	int err;

	nthreads = threads;
	if (n_ops <= 0 || nthreads < 1 || nthreads > 64) {
		fprintf(stderr, "usage: %s OPS [SEED] [THREADS]   (THREADS 1 to 64, default 3)\n",
			argv[0]);
		return 2;
	}
	prog_dir(bin_dir, sizeof(bin_dir) - 64, argv[0]);
	kmod_file(kmod_path, sizeof(kmod_path), bin_dir, KMOD_NAME);
	libbpf_set_strict_mode(LIBBPF_STRICT_ALL);
	slow_op = getenv("UAPI_FUZZ_SLOW") ? atof(getenv("UAPI_FUZZ_SLOW")) : 0;
	strict = getenv("UAPI_FUZZ_STRICT") && atoi(getenv("UAPI_FUZZ_STRICT"));
	set_weights(getenv("UAPI_FUZZ_SKIP"));
	set_link_kinds(getenv("UAPI_FUZZ_LINKS"));
	if (!total_weight) {
		fprintf(stderr, "uapi-fuzz: UAPI_FUZZ_SKIP leaves no operation\n");
		return 2;
	}
	pgid_addr = ksym_addr("__x64_sys_getpgid");
	err = setup_funcs();
	check(!err && pgid_addr, "functions to attach to (%s)", errname(err));
	if (err || !pgid_addr)
		return 1;
	err = setup_progs(&setup_rng);
	check(!err, "%d tracing and %d XDP programs load (%s)", NR_TPROGS, NR_XDP, errname(err));
	check(access(kmod_path, R_OK) == 0 && !kmod_is_loaded(KMOD_NAME),
	      "test module %s there, not loaded", kmod_path);
	if (check_failures)
		return 1;

	total_ops = n_ops;
	thr = calloc(nthreads, sizeof(*thr));
	for (int i = 0; thr && i < nthreads; i++) {
		thr[i].idx = i;
		thr[i].rng.s = seed * 0x9e3779b97f4a7c15ULL + i + 1;
		thr[i].ops = n_ops / nthreads + (i < n_ops % nthreads);
		thr[i].perm = calloc(pool.cnt, sizeof(*thr[i].perm));
		thr[i].perm_inj = calloc(n_inj, sizeof(*thr[i].perm_inj));
		if (!thr[i].perm || !thr[i].perm_inj) {
			check(0, "memory for the threads");
			return 1;
		}
		for (size_t j = 0; j < pool.cnt; j++)
			thr[i].perm[j] = j;
		memcpy(thr[i].perm_inj, inj_idx, n_inj * sizeof(*inj_idx));
	}
	worker_late = now();
	__atomic_store(&worker_seen, &worker_late, __ATOMIC_RELAXED);
	pthread_create(&wtid, NULL, worker, NULL);
	t_start = now();
	for (int i = 0; i < nthreads; i++)
		pthread_create(&thr[i].tid, NULL, fuzzer, &thr[i]);
	for (int i = 0; i < nthreads; i++)
		pthread_join(thr[i].tid, NULL);
	elapsed = now() - t_start;
	__atomic_load(&worker_seen, &worker_late, __ATOMIC_RELAXED);
	worker_late = now() - worker_late;
	__atomic_store_n(&stop_worker, 1, __ATOMIC_RELAXED);
	pthread_join(wtid, NULL);

	if (kmod_is_loaded(KMOD_NAME)) {
		err = kmod_remove(KMOD_NAME);
		check(!err, "the module unloads at the end (%s)", errname(err));
	}
	close_all();
	hits = hits_closed;
	/* Deferred frees: RCU, RCU tasks, the global trampoline's drain work. */
	t_end = now();
	do {
		n_links = leftovers(1, &first_link);
		n_progs = leftovers(0, &first_prog);
		if (!n_links && !n_progs)
			break;
		usleep(250 * 1000);
	} while (now() - t_end < 15);
	t_end = now() - t_end;

	print_stats(elapsed, seed, nthreads);
	if (known_eagain)
		printf("# KNOWN BUG: %lu per-function fexit/fmod_ret/fsession.multi links next to the IPMODIFY module refused with EAGAIN (not failed; UAPI_FUZZ_STRICT=1 fails them)\n",
		       known_eagain);
	check(!failed[FC_ERRNO],
	      "every refusal is documented for its operation and is the one its fault gives (%lu unexpected)",
	      failed[FC_ERRNO]);
	check(!failed[FC_INFO], "link info matches what was attached (%lu links made, %lu infos)",
	      made_links.n, info_checked);
	check(!failed[FC_ENUM], "every link in the table is enumerated (%lu enumerations)",
	      enum_checks);
	check(!failed[FC_CHAIN], "chain GET answers are well formed (%lu checked)", get_checked);
	check(!failed[FC_RUN], "XDP verdicts are return values of programs (%lu runs)",
	      stats[OP_XDP_RUN][0]);
	check(!failed[FC_HARNESS], "the harness itself ran clean (%lu failures)",
	      failed[FC_HARNESS]);
	check(done_ops == n_ops, "%ld of %ld operations made", done_ops, n_ops);
	check(worker_late < 5, "the worker kept calling the traced functions: %lu calls, the last %.1f s before the end",
	      worker_calls, worker_late);
	if (pgid_links >= 20)
		check(hits > 0, "programs ran: %llu getpgid calls counted, %lu links on getpgid",
		      (unsigned long long)hits, pgid_links);
	else
		printf("# %lu links on getpgid: too few to require that programs ran (%llu counted)\n",
		       pgid_links, (unsigned long long)hits);
	check(!n_links && !n_progs,
	      "nothing left behind %.1f s after closing everything: %lu links (first %u), %lu programs (first %s)",
	      t_end, n_links, first_link, n_progs, n_progs ? prog_desc(first_prog) : "-");
	return check_failures ? 1 : 0;
}
#endif /* BPFMUX_HAVE_GLOBAL_TRAMP */
