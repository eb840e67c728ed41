// SPDX-License-Identifier: GPL-2.0
/*
 * Trigger benchmark (the bench_trigger method of the kernel selftests, our own code):
 * a producer thread test-runs a raw_tp driver that calls the target kernel function
 * 100 times per run; the program under test, attached to the target by one mechanism
 * per row, bumps a per-CPU counter; the main thread samples the counter every
 * --duration seconds, drops the warm-up samples and reports mean ± stddev in M calls/s.
 *
 * Rows the running kernel cannot do are reported "not available on this kernel" with
 * the error of the attempt (load or attach), found by trying, never by version. Before
 * timing, every row is checked to count exactly 100 calls per driver run.
 *
 * Rounds: each round measures every row once, rows in order; several rounds interleave
 * the rows so a slow phase of the (emulated, shared) machine hits all rows alike.
 *
 * --insn (under `vm/run --insn`, vm/insn/README.md): instead of timing, counts the guest
 * instructions per target call: windows of one driver run making 25 and 50 calls, the
 * most frequent count of each (windows a timer tick hit differ), their difference / 25;
 * repeated, median and spread. The same driver with nothing attached is the baseline:
 * a row's hook instructions are its count minus the baseline's. --profile FILE adds, per
 * row, the kernel symbols of those 25 calls (the difference of two profile windows)
 * next to the baseline's. Under `vm/run --insn-hazards` each row also gets its hazards
 * (vm/insn/README.md, "Hazards"): indirect branches, calls, returns and modelled return
 * mispredicts per call (differenced like the instructions), and the distinct code and
 * data lines, indirect sites and most targets of one site of a 25-call window.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "lib/check.h"
#include "lib/funcs.h"
#include "lib/insn.h"

#define BATCH 100		/* target calls per driver run, as in trigger.bpf.h */
#define BATCH_LONG (BATCH * BATCH)	/* --long-runs: driver_long's */
#define INSN_CALLS 25		/* --insn: calls per counted run (and twice), as there */
#define NR_SLOTS 64
#define MAX_SAMPLES 256
#define MAX_REPEATS 32
#define TARGET "bpf_modify_return_test_tp"
/* The series' fmod_ret multi attach type (kernel/README.md), after 7.3's last (61). */
#define ATTACH_FMODRET_MULTI 62
#ifdef BPFMUX_HAVE_GLOBAL_TRAMP	/* set by tests/guest/Makefile: the UAPI has it */
#define GLOBAL_FLAG BPF_F_TRACING_MULTI_GLOBAL
#else
#define GLOBAL_FLAG 0	/* libbpf without the series: the global rows say so */
#endif

enum how {
	USER_COUNT, KERNEL_COUNT, SYSCALL_COUNT,	/* baselines, nothing attached */
	DRIVER_ONLY,		/* --insn baseline: the driver alone */
	ATTACH_AUTO,		/* bpf_program__attach(): fentry/fexit/fmod_ret/fsession/tp/raw_tp */
	ATTACH_KPROBE, ATTACH_KRETPROBE,
	ATTACH_KPROBE_MULTI, ATTACH_KRETPROBE_MULTI,
	ATTACH_TRACING_MULTI,
};

enum backend { NONE, PER_FUNCTION, GLOBAL };

/*
 * --insn under hazards=on: per target call (differenced like the instructions) the first
 * four; the others are set sizes of a window of one driver run (INSN_CALLS calls).
 */
enum hz_field {
	HZ_INDIRECT, HZ_CALLS, HZ_RETS, HZ_RET_MISS,	/* per call */
	HZ_ILINES, HZ_DLINES, HZ_SITES, HZ_TARGETS, HZ_MAX_TARGETS,	/* per window */
	HZ_FIELDS
};
#define HZ_PER_CALL HZ_ILINES	/* fields below it are per call */
static const char *const hz_json[HZ_FIELDS] = {
	"indirect", "calls", "returns", "return_mispredicts", "code_lines", "data_lines",
	"indirect_sites", "indirect_targets", "max_targets_per_site",
};

struct row {
	const char *name;	/* as in the seeds' tables */
	enum how how;
	const char *prog;	/* program in trigger.bpf.o / trigger_session.bpf.o */
	int session;		/* program lives in trigger_session.bpf.o */
	enum backend backend;
	int all;		/* attached to every safe function, not just the target */
	const char *single;	/* the single-attach row a multi row is compared with */
	/* results */
	int done, failed;
	char status[256];	/* "" = measured */
	double samples[MAX_SAMPLES];
	int nsamples;
	double attach_s;
	size_t funcs;
	/* --insn results: instructions per target call, one per repeat */
	double insn[MAX_REPEATS];
	int ninsn;
	/* TCG dispatch per target call, one per repeat, if the plugin reports it */
	double lookups[MAX_REPEATS], misses[MAX_REPEATS], unchained[MAX_REPEATS];
	int dispatch;
	/* hazards per repeat, if the plugin reports them (enum hz_field) */
	double hz[HZ_FIELDS][MAX_REPEATS];
	int hazards;
	unsigned int hz_full;	/* the plugin's overflow bits, or'ed */
	int hits, windows;	/* undisturbed windows (count = mode) of all windows */
	int unclear;		/* repeats whose modes did not become clear */
	struct insn_prof prof;	/* --profile: INSN_CALLS calls, folded */
};

static struct row rows[] = {
	{ "usermode-count", USER_COUNT },
	{ "kernel-count", KERNEL_COUNT, "kernel_count" },
	{ "syscall-count", SYSCALL_COUNT },
	{ "fentry", ATTACH_AUTO, "on_fentry" },
	{ "fentry.multi", ATTACH_TRACING_MULTI, "on_fentry_multi", 0, PER_FUNCTION, 0, "fentry" },
	{ "fentry.multi", ATTACH_TRACING_MULTI, "on_fentry_multi", 0, GLOBAL, 0, "fentry" },
	{ "fentry.multi-all", ATTACH_TRACING_MULTI, "on_fentry_multi", 0, PER_FUNCTION, 1, "fentry" },
	{ "fentry.multi-all", ATTACH_TRACING_MULTI, "on_fentry_multi", 0, GLOBAL, 1, "fentry" },
	{ "fexit", ATTACH_AUTO, "on_fexit" },
	{ "fexit.multi", ATTACH_TRACING_MULTI, "on_fexit_multi", 0, PER_FUNCTION, 0, "fexit" },
	{ "fexit.multi", ATTACH_TRACING_MULTI, "on_fexit_multi", 0, GLOBAL, 0, "fexit" },
	{ "fmodret", ATTACH_AUTO, "on_fmodret" },
	{ "fmodret.multi", ATTACH_TRACING_MULTI, "on_fmodret_multi", 0, PER_FUNCTION, 0, "fmodret" },
	{ "fmodret.multi", ATTACH_TRACING_MULTI, "on_fmodret_multi", 0, GLOBAL, 0, "fmodret" },
	{ "fsession", ATTACH_AUTO, "on_fsession", 1 },
	{ "fsession.multi", ATTACH_TRACING_MULTI, "on_fsession_multi", 1, PER_FUNCTION, 0, "fsession" },
	{ "fsession.multi", ATTACH_TRACING_MULTI, "on_fsession_multi", 1, GLOBAL, 0, "fsession" },
	{ "rawtp", ATTACH_AUTO, "on_rawtp" },
	{ "tp", ATTACH_AUTO, "on_tp" },
	{ "kprobe", ATTACH_KPROBE, "on_kprobe" },
	{ "kprobe.multi", ATTACH_KPROBE_MULTI, "on_kprobe_multi", 0, NONE, 0, "kprobe" },
	{ "kprobe.multi-all", ATTACH_KPROBE_MULTI, "on_kprobe_multi", 0, NONE, 1, "kprobe" },
	{ "kretprobe", ATTACH_KRETPROBE, "on_kretprobe" },
	{ "kretprobe.multi", ATTACH_KRETPROBE_MULTI, "on_kretprobe_multi", 0, NONE, 0, "kretprobe" },
	{ "kretprobe.multi-all", ATTACH_KRETPROBE_MULTI, "on_kretprobe_multi", 0, NONE, 1,
	  "kretprobe" },
};
#define NR_ROWS (sizeof(rows) / sizeof(rows[0]))

static const char *backend_name[] = { "", "per-function", "global" };

/* --insn: the driver with nothing attached, measured first */
static struct row baseline = { "baseline (driver, nothing attached)", DRIVER_ONLY };

static struct {
	double duration;
	int samples, warmup, rounds, max_args;
	const char *json;
	char dir[4096];		/* where the .bpf.o files are */
	int insn, insn_windows, insn_repeats;
	const char *profile;
	int batch;		/* target calls per driver run: BATCH, or BATCH_LONG */
} opt = { 1.0, 3, 1, 3, 12, .insn_windows = 15, .insn_repeats = 3, .batch = BATCH };

static unsigned long target_addr;
static __u32 target_id;
static struct func_set all_set;	/* every safe function, for the -all rows */
static int all_set_err = 1;	/* not collected yet */

/* ---- the producer thread ---- */

static atomic_int stop_producer;
static atomic_ulong user_hits;	/* usermode-count and syscall-count count here */

struct producer {
	enum how how;
	int driver_fd;
	int cpu;
	int err;
};

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static void *producer(void *arg)
{
	struct producer *p = arg;
	LIBBPF_OPTS(bpf_test_run_opts, topts);

	pin(p->cpu);
	while (!atomic_load_explicit(&stop_producer, memory_order_relaxed)) {
		switch (p->how) {
		case USER_COUNT:
			atomic_fetch_add_explicit(&user_hits, 1, memory_order_relaxed);
			break;
		case SYSCALL_COUNT:
			syscall(SYS_getpgid, 0);
			atomic_fetch_add_explicit(&user_hits, 1, memory_order_relaxed);
			break;
		default:
			if (bpf_prog_test_run_opts(p->driver_fd, &topts)) {
				p->err = errno;
				return NULL;
			}
		}
	}
	return NULL;
}

/* ---- one row ---- */

struct loaded {
	struct bpf_object *obj, *sobj;	/* trigger.bpf.o, trigger_session.bpf.o */
	struct bpf_program *driver, *prog;
	volatile __u64 *hits;		/* the row program's counters (mmap'ed .bss) */
	struct bpf_link *link;
	struct bpf_program *insn_driver[3];	/* --insn: by multiple of INSN_CALLS (1, 2) */
};

/* The mmap'ed global data section whose map name ends with @suffix (.bss, .data). */
static void *global_data(struct bpf_object *obj, const char *suffix)
{
	size_t sl = strlen(suffix), sz;
	struct bpf_map *m;

	bpf_object__for_each_map(m, obj) {
		const char *n = bpf_map__name(m);
		size_t l = strlen(n);

		if (l >= sl && !strcmp(n + l - sl, suffix))
			return bpf_map__initial_value(m, &sz);
	}
	return NULL;
}

static struct bpf_object *open_obj(const char *file, const char *const *enable)
{
	struct bpf_object *obj;
	struct bpf_program *p;
	struct bpf_map *rodata;
	char path[4200];
	__u64 *tip;
	size_t sz;

	snprintf(path, sizeof(path), "%s/%s", opt.dir, file);
	obj = bpf_object__open_file(path, NULL);
	if (!obj)
		return NULL;
	bpf_object__for_each_program(p, obj) {
		int on = 0;

		for (const char *const *e = enable; *e; e++)
			on |= !strcmp(bpf_program__name(p), *e);
		bpf_program__set_autoload(p, on);
	}
	rodata = bpf_object__find_map_by_name(obj, ".rodata");
	tip = rodata ? bpf_map__initial_value(rodata, &sz) : NULL;
	if (!tip || sz < sizeof(*tip)) {
		bpf_object__close(obj);
		errno = ENOENT;
		return NULL;
	}
	*tip = target_addr;
	return obj;
}

static __u64 sum_hits(volatile __u64 *hits)
{
	__u64 s = 0;

	/* struct slot is 128 bytes: 16 u64 per slot */
	for (int i = 0; i < NR_SLOTS; i++)
		s += hits[i * 16];
	return s;
}

static void unload(struct loaded *l)
{
	bpf_link__destroy(l->link);
	bpf_object__close(l->sobj);
	bpf_object__close(l->obj);
	memset(l, 0, sizeof(*l));
}

static int need_all_set(void)
{
	static const char *const every[] = { "*", NULL };
	static const char *const must[] = { TARGET, NULL };
	struct btf *btf;

	if (all_set_err <= 0)
		return all_set_err;
	btf = btf__load_vmlinux_btf();
	if (!btf)
		return all_set_err = -errno;
	all_set_err = func_set_collect_args(&all_set, btf, every, must, (size_t)-1, opt.max_args);
	btf__free(btf);
	if (!all_set_err)
		fprintf(stderr, "trigger: %zu safe traceable functions for the -all rows\n",
			all_set.cnt);
	return all_set_err;
}

/* Attach the row's program; on failure a "not available" reason in r->status. */
static int attach_row(struct row *r, struct loaded *l)
{
	const __u32 *ids = &target_id;
	const char *const *syms;
	const char *target_sym = TARGET;
	size_t cnt = 1;
	double t0;

	if (r->all) {
		int err = need_all_set();

		if (err) {
			snprintf(r->status, sizeof(r->status),
				 "error: collecting the traceable functions: %s", strerror(-err));
			return -1;
		}
		ids = all_set.ids;
		syms = (const char *const *)all_set.names;
		cnt = all_set.cnt;
	} else {
		syms = &target_sym;
	}
	r->funcs = cnt;
	t0 = now();
	switch (r->how) {
	case ATTACH_AUTO:
		l->link = bpf_program__attach(l->prog);
		break;
	case ATTACH_KPROBE:
	case ATTACH_KRETPROBE:
		l->link = bpf_program__attach_kprobe(l->prog, r->how == ATTACH_KRETPROBE, TARGET);
		break;
	case ATTACH_KPROBE_MULTI:
	case ATTACH_KRETPROBE_MULTI: {
		LIBBPF_OPTS(bpf_kprobe_multi_opts, kopts, .syms = (const char **)syms, .cnt = cnt,
			    .retprobe = r->how == ATTACH_KRETPROBE_MULTI);

		l->link = bpf_program__attach_kprobe_multi_opts(l->prog, NULL, &kopts);
		break;
	}
	case ATTACH_TRACING_MULTI: {
		LIBBPF_OPTS(bpf_tracing_multi_opts, topts, .ids = ids, .cnt = cnt);

		if (r->backend == GLOBAL) {
			if (!GLOBAL_FLAG) {
				snprintf(r->status, sizeof(r->status), "not available: built against a "
					 "libbpf without BPF_F_TRACING_MULTI_GLOBAL");
				return -1;
			}
#ifdef BPFMUX_HAVE_GLOBAL_TRAMP	/* set by tests/guest/Makefile: the UAPI has it */
			topts.flags = GLOBAL_FLAG;
#endif
		}
		l->link = bpf_program__attach_tracing_multi(l->prog, NULL, &topts);
		break;
	}
	default:
		return 0;
	}
	r->attach_s = now() - t0;
	if (!l->link) {
		snprintf(r->status, sizeof(r->status), "not available on this kernel (attach: %s)",
			 strerror(errno));
		return -1;
	}
	return 0;
}

static int load_row(struct row *r, struct loaded *l)
{
	const char *main_progs[] = { opt.batch == BATCH ? "driver" : "driver_long", NULL, NULL,
				     NULL, NULL };
	const char *sess_progs[] = { r->prog, NULL };
	int err, n = 1;

	memset(l, 0, sizeof(*l));
	if (r->how == USER_COUNT || r->how == SYSCALL_COUNT)
		return 0;
	if (r->how == KERNEL_COUNT)
		main_progs[0] = r->prog;
	else if (!r->session && r->how != DRIVER_ONLY)
		main_progs[n++] = r->prog;
	if (opt.insn) {
		main_progs[n++] = "insn_driver";
		main_progs[n++] = "insn_driver2";
	}
	l->obj = open_obj("trigger.bpf.o", main_progs);
	if (!l->obj) {
		snprintf(r->status, sizeof(r->status), "error: open trigger.bpf.o: %s",
			 strerror(errno));
		return -1;
	}
	if (r->session) {
		l->sobj = open_obj("trigger_session.bpf.o", sess_progs);
		if (!l->sobj) {
			snprintf(r->status, sizeof(r->status), "error: open trigger_session.bpf.o: %s",
				 strerror(errno));
			return -1;
		}
	}
	l->driver = bpf_object__find_program_by_name(l->obj, main_progs[0]);
	l->prog = r->how == KERNEL_COUNT || r->how == DRIVER_ONLY ? NULL :
		  bpf_object__find_program_by_name(r->session ? l->sobj : l->obj, r->prog);
	if (r->how == ATTACH_AUTO && (!strcmp(r->name, "fentry") || !strcmp(r->name, "fexit") ||
				      !strcmp(r->name, "fmodret") || !strcmp(r->name, "fsession")))
		bpf_program__set_attach_target(l->prog, 0, TARGET);
	if (!strcmp(r->name, "fmodret.multi"))
		bpf_program__set_expected_attach_type(l->prog, ATTACH_FMODRET_MULTI);
	err = bpf_object__load(l->obj);
	if (err) {
		snprintf(r->status, sizeof(r->status), "%s (load: %s)",
			 r->session ? "error: the driver did not load" :
				      "not available on this kernel", strerror(-err));
		return -1;
	}
	if (l->sobj) {
		err = bpf_object__load(l->sobj);
		if (err) {
			snprintf(r->status, sizeof(r->status),
				 "not available on this kernel (load: %s)", strerror(-err));
			return -1;
		}
	}
	l->hits = global_data(r->session ? l->sobj : l->obj, ".bss");
	if (!l->hits) {
		snprintf(r->status, sizeof(r->status), "error: no .bss counters");
		return -1;
	}
	if (opt.insn) {
		l->insn_driver[1] = bpf_object__find_program_by_name(l->obj, "insn_driver");
		l->insn_driver[2] = bpf_object__find_program_by_name(l->obj, "insn_driver2");
		if (!l->insn_driver[1] || !l->insn_driver[2]) {
			snprintf(r->status, sizeof(r->status), "error: no insn_driver programs");
			return -1;
		}
	}
	return attach_row(r, l);
}

/* Exactly opt.batch counts per driver run, or the row measures something else. */
static int verify_row(struct row *r, struct loaded *l)
{
	LIBBPF_OPTS(bpf_test_run_opts, topts);
	const int runs = 10;
	__u64 before, got;

	if (!l->driver || r->how == DRIVER_ONLY)
		return 0;
	before = sum_hits(l->hits);
	for (int i = 0; i < runs; i++) {
		if (bpf_prog_test_run_opts(bpf_program__fd(l->driver), &topts)) {
			snprintf(r->status, sizeof(r->status), "error: test run: %s",
				 strerror(errno));
			return -1;
		}
	}
	got = sum_hits(l->hits) - before;
	if (got != (__u64)runs * opt.batch) {
		snprintf(r->status, sizeof(r->status),
			 "error: counted %llu of %d target calls before timing",
			 (unsigned long long)got, runs * opt.batch);
		return -1;
	}
	return 0;
}

static __u64 read_count(struct row *r, struct loaded *l)
{
	if (r->how == USER_COUNT || r->how == SYSCALL_COUNT)
		return atomic_load(&user_hits);
	return sum_hits(l->hits);
}

static void sleep_s(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (time_t)s) * 1e9) };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static int measure_row(struct row *r, struct loaded *l)
{
	struct producer p = { .how = r->how, .cpu = sysconf(_SC_NPROCESSORS_ONLN) > 1 };
	pthread_t th;
	__u64 c0, c1;
	double t0, t1;

	p.driver_fd = l->driver ? bpf_program__fd(l->driver) : -1;
	atomic_store(&stop_producer, 0);
	if (pthread_create(&th, NULL, producer, &p)) {
		snprintf(r->status, sizeof(r->status), "error: pthread_create");
		return -1;
	}
	c0 = read_count(r, l);
	t0 = now();
	for (int i = 0; i < opt.warmup + opt.samples; i++) {
		sleep_s(opt.duration);
		c1 = read_count(r, l);
		t1 = now();
		if (i >= opt.warmup && r->nsamples < MAX_SAMPLES)
			r->samples[r->nsamples++] = (c1 - c0) / (t1 - t0) / 1e6;
		c0 = c1;
		t0 = t1;
	}
	atomic_store(&stop_producer, 1);
	pthread_join(th, NULL);
	if (p.err) {
		snprintf(r->status, sizeof(r->status), "error: test run: %s", strerror(p.err));
		return -1;
	}
	return 0;
}

/* --insn work: one test run making reps × INSN_CALLS target calls (reps 1 or 2). */
struct drive {
	int fd[3];	/* by reps: insn_driver, insn_driver2 */
};

static int drive(void *arg, unsigned int reps)
{
	LIBBPF_OPTS(bpf_test_run_opts, topts);
	struct drive *d = arg;

	return bpf_prog_test_run_opts(d->fd[reps], &topts) ? errno : 0;
}

/*
 * The two windows of a profile run different drivers (insn_driver, insn_driver2): one
 * line for both, their difference being the loop around the extra INSN_CALLS calls.
 */
static void merge_drivers(struct insn_prof *p)
{
	const char *merged = "the driver's loop (bpf_prog_*_insn_driver2 - *_insn_driver)";
	size_t to = 0, first = (size_t)-1;

	for (size_t i = 0; i < p->n; i++) {
		size_t l = strlen(p->sym[i].name);
		int drv = (l > 12 && !strcmp(p->sym[i].name + l - 12, "_insn_driver")) ||
			  (l > 13 && !strcmp(p->sym[i].name + l - 13, "_insn_driver2"));

		if (drv && first != (size_t)-1) {
			p->sym[first].count += p->sym[i].count;
			continue;
		}
		p->sym[to] = p->sym[i];
		if (drv) {
			first = to;
			snprintf(p->sym[to].name, sizeof(p->sym[to].name), "%s", merged);
		}
		to++;
	}
	p->n = to;
}

/*
 * --insn: instructions per target call, opt.insn_repeats times; the profile after. The
 * windows are one test run of INSN_CALLS and of 2 × INSN_CALLS calls: their difference
 * is INSN_CALLS calls and nothing else (no syscall, no hooks along the syscall path).
 */
static int measure_insn(struct row *r, struct loaded *l)
{
	struct drive d = { { -1, l->insn_driver[1] ? bpf_program__fd(l->insn_driver[1]) : -1,
			     l->insn_driver[2] ? bpf_program__fd(l->insn_driver[2]) : -1 } };
	struct insn_estimate e;

	if (r->how == KERNEL_COUNT) {
		snprintf(r->status, sizeof(r->status), "not counted with --insn (a wall-time "
			 "baseline; the baseline here is the driver alone)");
		return -1;
	}
	if (d.fd[1] < 0 || d.fd[2] < 0) {
		snprintf(r->status, sizeof(r->status), "not counted with --insn (no BPF driver)");
		return -1;
	}
	drive(&d, 1);	/* warm: first-run page faults and lazy setup stay out */
	drive(&d, 2);
	for (int i = 0; i < opt.insn_repeats && r->ninsn < MAX_REPEATS; i++) {
		if (insn_per_rep(drive, &d, 1, 2, opt.insn_windows, &e)) {
			snprintf(r->status, sizeof(r->status), "error: counting instructions "
				 "(see stderr)");
			return -1;
		}
		r->dispatch = e.dispatch;
		r->lookups[r->ninsn] = e.lookups_per_rep / INSN_CALLS;
		r->misses[r->ninsn] = e.misses_per_rep / INSN_CALLS;
		r->unchained[r->ninsn] = e.unchained_per_rep / INSN_CALLS;
		r->hazards = e.hazards;
		if (e.hazards) {
			double v[HZ_FIELDS] = {
				e.indirect_per_rep, e.calls_per_rep, e.rets_per_rep,
				e.ret_miss_per_rep, e.ilines[0], e.dlines[0], e.isites[0],
				e.itargets[0], e.max_targets[0],
			};

			for (int k = 0; k < HZ_FIELDS; k++)
				r->hz[k][r->ninsn] = k < HZ_PER_CALL ? v[k] / INSN_CALLS : v[k];
			r->hz_full |= e.full;
		}
		r->insn[r->ninsn++] = e.per_rep / INSN_CALLS;
		r->hits += e.lo.hits + e.hi.hits;
		r->windows += e.lo.samples + e.hi.samples;
		r->unclear += !e.clear;
	}
	if (opt.profile && insn_profile_diff(drive, &d, 1, 2, &r->prof))
		fprintf(stderr, "trigger: %s: no profile\n", r->name);
	merge_drivers(&r->prof);
	return 0;
}

/* Busy and total jiffies of all CPUs so far (/proc/stat); 0 on success. */
static int cpu_jiffies(unsigned long long *busy, unsigned long long *total)
{
	unsigned long long v[8] = { 0 };
	FILE *f = fopen("/proc/stat", "r");
	int n;

	if (!f)
		return -1;
	n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
		   &v[3], &v[4], &v[5], &v[6], &v[7]);
	fclose(f);
	if (n < 5)
		return -1;
	*total = 0;
	for (int i = 0; i < 8; i++)
		*total += v[i];
	*busy = *total - v[3] - v[4];	/* less idle and iowait */
	return 0;
}

/* Per-function trampoline images the kernel has (their symbols in /proc/kallsyms), or -1. */
static long tramp_images(void)
{
	FILE *f = fopen("/proc/kallsyms", "r");
	char line[512];
	long n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += !!strstr(line, " bpf_trampoline_");
	fclose(f);
	return n;
}

static long tramp_images_before = -1;

/*
 * After a row, wall time only: wait until the kernel has done what the row's detach left
 * to work items, so that it does not run during the next row's samples, where an -all link
 * would trace all of it too. An -all link on the per-function backend leaves some 37,000
 * trampoline images to free after RCU grace periods, for seconds, in bursts: first until
 * no more images than before the first row are left, then until the CPUs were busy for at
 * most one tick in ten over 200 ms; 60 s at most.
 */
static void settle(void)
{
	unsigned long long b0, t0, b1, t1;
	int waited = 0;

	while (tramp_images_before >= 0 && tramp_images() > tramp_images_before &&
	       waited < 300) {
		usleep(200000);
		waited++;
	}
	for (; waited < 300; waited++) {
		if (cpu_jiffies(&b0, &t0))
			return;
		usleep(200000);
		if (cpu_jiffies(&b1, &t1))
			return;
		if (t1 > t0 && (b1 - b0) * 10 <= t1 - t0)
			return;
	}
	fprintf(stderr, "trigger: the kernel was still busy 60 s after the last row; "
		"measuring the next one anyway\n");
}

static void run_row(struct row *r)
{
	struct loaded l;

	if (r->failed)
		return;		/* not available, or broken: said once, not retried */
	if (load_row(r, &l) || verify_row(r, &l) ||
	    (opt.insn ? measure_insn(r, &l) : measure_row(r, &l)))
		r->failed = 1;
	unload(&l);
	if (!opt.insn)
		settle();
	r->done = 1;
}

/* ---- results ---- */

/* Newton's square root: keeps the program free of libm. */
static double root(double x)
{
	double y = x > 1 ? x : 1;

	if (x <= 0)
		return 0;
	for (int i = 0; i < 100; i++)
		y = (y + x / y) / 2;
	return y;
}

static void stats(const struct row *r, double *mean, double *sd)
{
	double s = 0, q = 0;

	for (int i = 0; i < r->nsamples; i++)
		s += r->samples[i];
	*mean = r->nsamples ? s / r->nsamples : 0;
	for (int i = 0; i < r->nsamples; i++)
		q += (r->samples[i] - *mean) * (r->samples[i] - *mean);
	*sd = r->nsamples > 1 ? root(q / (r->nsamples - 1)) : 0;
}

static const char *label(const struct row *r, char *buf, size_t n)
{
	if (r->backend)
		snprintf(buf, n, "%s (%s)", r->name, backend_name[r->backend]);
	else
		snprintf(buf, n, "%s", r->name);
	return buf;
}

static const struct row *find_single(const struct row *r)
{
	for (size_t i = 0; r->single && i < NR_ROWS; i++)
		if (!strcmp(rows[i].name, r->single))
			return &rows[i];
	return NULL;
}

static void print_table(void)
{
	char name[96];

	printf("%-34s %22s  %s\n", "row", "M/s (mean ± stddev)", "vs single");
	for (size_t i = 0; i < NR_ROWS; i++) {
		const struct row *r = &rows[i], *s = find_single(r);
		double m, sd, sm, ssd;

		label(r, name, sizeof(name));
		if (!r->done)
			continue;
		if (r->failed) {
			printf("%-34s %s\n", name, r->status);
			continue;
		}
		stats(r, &m, &sd);
		printf("%-34s %12.3f ± %7.3f", name, m, sd);
		if (s && !s->failed && s->nsamples) {
			stats(s, &sm, &ssd);
			printf("  %.3f× %s", m / sm, s->name);
		}
		if (r->all)
			printf("  (%zu functions, attach %.2f s)", r->funcs, r->attach_s);
		putchar('\n');
	}
}

/* --insn: per-call median and spread of a row's repeats; 0 if it has none. */
static int insn_stats(const struct row *r, double *median, double *spread)
{
	double v[MAX_REPEATS];

	if (r->failed || !r->ninsn)
		return 0;
	memcpy(v, r->insn, r->ninsn * sizeof(v[0]));
	insn_median_spread(v, r->ninsn, median, spread);
	return 1;
}

/* --insn: medians of a row's TCG dispatch counts per call (lookups, misses, unchained) */
static int dispatch_stats(const struct row *r, double out[3])
{
	const double *src[3] = { r->lookups, r->misses, r->unchained };
	double v[MAX_REPEATS], sp;

	if (r->failed || !r->ninsn || !r->dispatch)
		return 0;
	for (int k = 0; k < 3; k++) {
		memcpy(v, src[k], r->ninsn * sizeof(v[0]));
		insn_median_spread(v, r->ninsn, &out[k], &sp);
	}
	return 1;
}

/* " LOOKUPS MISSES UNCHAINED" of a row, the hook's only (less the baseline's), or blanks */
static void print_dispatch(const struct row *r, int hook)
{
	double d[3], b[3] = { 0, 0, 0 };

	if (!dispatch_stats(r, d)) {
		printf(" %7s %7s %7s", "", "", "");
		return;
	}
	if (hook && !dispatch_stats(&baseline, b))
		b[0] = b[1] = b[2] = 0;
	printf(" %7.2f %7.2f %7.2f", d[0] - b[0], d[1] - b[1], d[2] - b[2]);
}

/* --insn: medians of a row's hazards over its repeats; 0 if it has none. */
static int hazard_stats(const struct row *r, double out[HZ_FIELDS])
{
	double v[MAX_REPEATS], sp;

	if (r->failed || !r->ninsn || !r->hazards)
		return 0;
	for (int k = 0; k < HZ_FIELDS; k++) {
		memcpy(v, r->hz[k], r->ninsn * sizeof(v[0]));
		insn_median_spread(v, r->ninsn, &out[k], &sp);
	}
	return 1;
}

/*
 * --insn under hazards=on: per row, the hook's hazards (row - baseline) next to the
 * baseline's own; max targets is the row's (the most targets of one site is no sum).
 */
static void print_hazard_table(void)
{
	double b[HZ_FIELDS], h[HZ_FIELDS];
	char name[96];

	if (!hazard_stats(&baseline, b))
		return;
	printf("\nhazards (vm/insn/README.md, \"Hazards\"; hook = row - baseline): indirect "
	       "branches (thunks included), calls, returns and returns the 16-entry return stack "
	       "model mispredicts, per target call; distinct 64-byte code and data lines and "
	       "indirect sites of a window of one driver run (%d calls), and the most targets "
	       "of one indirect site in it\n", INSN_CALLS);
	printf("%-34s %9s %8s %8s %9s %10s %10s %7s %8s\n", "row", "indirect", "calls", "rets",
	       "ret miss", "code lines", "data lines", "sites", "max tgts");
	printf("%-34s %9.2f %8.2f %8.2f %9.2f %10.0f %10.0f %7.0f %8.0f\n",
	       "baseline (nothing attached)", b[HZ_INDIRECT], b[HZ_CALLS], b[HZ_RETS],
	       b[HZ_RET_MISS], b[HZ_ILINES], b[HZ_DLINES], b[HZ_SITES], b[HZ_MAX_TARGETS]);
	for (size_t i = 0; i < NR_ROWS; i++) {
		const struct row *r = &rows[i];

		label(r, name, sizeof(name));
		if (!r->done || !hazard_stats(r, h))
			continue;
		printf("%-34s %+9.2f %+8.2f %+8.2f %+9.2f %+10.0f %+10.0f %+7.0f %8.0f%s\n", name,
		       h[HZ_INDIRECT] - b[HZ_INDIRECT], h[HZ_CALLS] - b[HZ_CALLS],
		       h[HZ_RETS] - b[HZ_RETS], h[HZ_RET_MISS] - b[HZ_RET_MISS],
		       h[HZ_ILINES] - b[HZ_ILINES], h[HZ_DLINES] - b[HZ_DLINES],
		       h[HZ_SITES] - b[HZ_SITES], h[HZ_MAX_TARGETS],
		       r->hz_full ? "  (a set overflowed: lower bounds)" : "");
	}
}

static void print_insn_table(void)
{
	double bm, bs, m, sp, sm, ssp;
	char name[96];

	if (!insn_stats(&baseline, &bm, &bs))
		return;
	printf("\ninstructions per target call (median of %d repeats; spread = (max - min) / "
	       "median); hook = row - baseline\n", opt.insn_repeats);
	if (baseline.dispatch)
		printf("TCG dispatch of the hook per call (vm/insn/README.md, \"Dispatch\"): "
		       "lookups = block transitions QEMU looks up, jc miss = of those, misses of "
		       "its jump cache (a model), unchain = jumps into two-page blocks, which "
		       "QEMU takes through its main loop; they cost wall time under TCG only\n");
	printf("%-34s %10s %7s %9s %10s %7s %7s %7s  %s\n", "row", "insns/call", "spread",
	       "hook", "vs single", "lookups", "jc miss", "unchain", "undisturbed windows");
	printf("%-34s %10.2f %6.2f%% %9s %10s", "baseline (nothing attached)", bm, 100 * bs,
	       "-", "-");
	print_dispatch(&baseline, 0);
	printf("  %d/%d\n", baseline.hits, baseline.windows);
	for (size_t i = 0; i < NR_ROWS; i++) {
		const struct row *r = &rows[i], *s = find_single(r);

		label(r, name, sizeof(name));
		if (!r->done)
			continue;
		if (!insn_stats(r, &m, &sp)) {
			printf("%-34s %s\n", name, r->status);
			continue;
		}
		printf("%-34s %10.2f %6.2f%% %9.2f", name, m, 100 * sp, m - bm);
		if (s && insn_stats(s, &sm, &ssp) && sm - bm > 0)
			printf(" %9.3f×", (m - bm) / (sm - bm));
		else
			printf(" %10s", "");
		print_dispatch(r, 1);
		printf("  %d/%d", r->hits, r->windows);
		if (r->unclear)
			printf(" (no clear mode in %d repeat(s): interrupts)", r->unclear);
		putchar('\n');
	}
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

/* A row's --insn result as JSON (null without one). */
static void json_insn(FILE *f, const struct row *r)
{
	double m, sp;

	if (!insn_stats(r, &m, &sp)) {
		fputs("null", f);
		return;
	}
	fprintf(f, "{\"per_call\": %.4f, \"spread\": %.6f, \"undisturbed\": %d, \"windows\": %d, "
		"\"unclear\": %d, \"batch_calls\": [%d, %d], \"runs\": [", m, sp, r->hits, r->windows,
		r->unclear, INSN_CALLS, 2 * INSN_CALLS);
	for (int j = 0; j < r->ninsn; j++)
		fprintf(f, "%s%.4f", j ? ", " : "", r->insn[j]);
	fputs("]", f);
	if (r->dispatch) {
		fputs(", \"lookups\": [", f);
		for (int j = 0; j < r->ninsn; j++)
			fprintf(f, "%s%.4f", j ? ", " : "", r->lookups[j]);
		fputs("], \"jc_misses\": [", f);
		for (int j = 0; j < r->ninsn; j++)
			fprintf(f, "%s%.4f", j ? ", " : "", r->misses[j]);
		fputs("], \"unchained\": [", f);
		for (int j = 0; j < r->ninsn; j++)
			fprintf(f, "%s%.4f", j ? ", " : "", r->unchained[j]);
		fputs("]", f);
	}
	if (r->hazards) {
		fprintf(f, ", \"hazards\": {\"window_calls\": %d, \"full\": %u", INSN_CALLS,
			r->hz_full);
		for (int k = 0; k < HZ_FIELDS; k++) {
			fprintf(f, ", \"%s\": [", hz_json[k]);
			for (int j = 0; j < r->ninsn; j++)
				fprintf(f, "%s%.4f", j ? ", " : "", r->hz[k][j]);
			fputs("]", f);
		}
		fputs("}", f);
	}
	fputs("}", f);
}

/*
 * Rewritten after every row (the row in progress, @running, marked) and synced: if the
 * guest kernel hangs or crashes, what was measured survives and the report names the row.
 */
static int write_json(const char *path, const struct row *running)
{
	struct utsname u;
	FILE *f = fopen(path, "w");

	if (!f) {
		perror(path);
		return -1;
	}
	uname(&u);
	fprintf(f, "{\"kernel\": ");
	json_str(f, u.release);
	fprintf(f, ", \"target\": \"%s\", \"batch\": %d, \"duration_s\": %g, \"samples\": %d, "
		"\"warmup\": %d, \"rounds\": %d, \"cpus\": %ld, \"mode\": \"%s\", "
		"\"insn_windows\": %d, \"insn_repeats\": %d,\n \"rows\": [\n", TARGET, opt.batch,
		opt.duration, opt.samples, opt.warmup, opt.rounds, sysconf(_SC_NPROCESSORS_ONLN),
		opt.insn ? "insn" : "time", opt.insn_windows, opt.insn_repeats);
	for (size_t i = 0, first = 1; i < NR_ROWS; i++) {
		const struct row *r = &rows[i];
		double m, sd;

		if (r->done != 1 && r != running)
			continue;
		stats(r, &m, &sd);
		fprintf(f, "%s  {\"name\": \"%s\", \"backend\": \"%s\", \"all\": %d, \"single\": ",
			first ? "" : ",\n", r->name, backend_name[r->backend], r->all);
		if (r->single)
			json_str(f, r->single);
		else
			fputs("null", f);
		fprintf(f, ", \"status\": ");
		json_str(f, r == running ? "did not finish: the guest was killed (timeout) or crashed "
			 "while measuring this row" : r->failed ? r->status : "ok");
		fprintf(f, ", \"funcs\": %zu, \"attach_s\": %.6f, \"mean\": %.6f, \"stddev\": %.6f, "
			"\"samples\": [", r->funcs, r->attach_s, m, sd);
		for (int j = 0; j < r->nsamples; j++)
			fprintf(f, "%s%.6f", j ? ", " : "", r->samples[j]);
		fprintf(f, "], \"insn\": ");
		json_insn(f, r);
		fprintf(f, "}");
		first = 0;
	}
	fprintf(f, "\n ], \"insn_baseline\": ");
	json_insn(f, &baseline);
	fprintf(f, "}\n");
	return close_synced(f);
}

/* --profile: per row, the symbols of one undisturbed window next to the baseline's. */
static int write_profiles(const char *path)
{
	FILE *f = fopen(path, "w");
	struct utsname u;
	char name[96];

	if (!f) {
		perror(path);
		return -1;
	}
	uname(&u);
	fprintf(f, "# Instructions per target call by kernel symbol: %s\n\n", u.release);
	fprintf(f, "The instructions of %d calls of `%s` by `/proc/kallsyms` symbol, divided by %d: "
		"the profile of an undisturbed window of one driver run making %d calls minus one "
		"making %d (`bench/trigger --insn --profile`, QEMU plugin `vm/insn`), so the "
		"syscall around them cancels; next to it the same driver with nothing attached. "
		"The difference is where the hook's instructions go. Emulated guest: counts are "
		"exact for this kernel build, not timings.\n", INSN_CALLS, TARGET, INSN_CALLS,
		2 * INSN_CALLS, INSN_CALLS);
	for (size_t i = 0; i < NR_ROWS; i++) {
		const struct row *r = &rows[i];

		if (!r->done || r->failed || !r->prof.n)
			continue;
		fprintf(f, "\n## %s\n\n", label(r, name, sizeof(name)));
		insn_prof_print(f, &r->prof, INSN_CALLS, "insns/call", &baseline.prof, INSN_CALLS,
				"nothing attached", 25);
	}
	return close_synced(f);
}

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [options] [ROW...]\n"
		"Trigger benchmark: M target calls/s seen by a program attached with each mechanism.\n"
		"ROW: a row name (fentry, fentry.multi, kprobe.multi-all, ...: every backend of it)\n"
		"     or NAME/BACKEND (fentry.multi/global); default every row. --list names them.\n"
		"  --duration S   seconds per sample (default 1.0)\n"
		"  --samples N    samples per row and round after warm-up (default 3)\n"
		"  --warmup N     samples dropped at the start of each measurement (default 1)\n"
		"  --rounds N     measure every row N times, interleaved (default 3)\n"
		"  --quick        --duration 0.2 --samples 2 --warmup 1 --rounds 1\n"
		"  --long-runs    driver runs make 10,000 calls, not 100: the bpf() syscall of each\n"
		"                 run, whose functions -all rows trace too, is then 1/100 as dear\n"
		"  --max-args N   -all rows: functions with up to N arguments (default 12)\n"
		"  --json FILE    also write the results as JSON\n"
		"  --insn         count instructions per call instead of timing (needs `vm/run --insn`;\n"
		"                 under `vm/run --insn-hazards` also indirect branches, return\n"
		"                 mispredicts, code and data lines per row)\n"
		"  --insn-windows N  --insn: windows per batch size and repeat (default 15)\n"
		"  --insn-repeats N  --insn: repeats, median and spread over them (default 3)\n"
		"  --profile FILE --insn: also the kernel symbols of one call per row (Markdown)\n"
		"  --list         print the row names\n"
		"examples:\n"
		"  %s --quick fentry fentry.multi/global\n"
		"  %s --json /tmp/trigger.json\n"
		"  vm/run --insn -- %s --insn --profile /tmp/prof.md fentry fentry.multi\n"
		"  %s --long-runs --rounds 5 fentry.multi/global fentry.multi-all/global\n",
		argv0, argv0, argv0, argv0, argv0);
}

int main(int argc, char **argv)
{
	int selected = 0, bad = 0;
	struct btf *btf;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--quick")) {
			opt.duration = 0.2;
			opt.samples = 2;
			opt.warmup = 1;
			opt.rounds = 1;
		} else if (!strcmp(a, "--long-runs")) {
			opt.batch = BATCH_LONG;
		} else if (!strcmp(a, "--duration") && v) {
			opt.duration = atof(v), i++;
		} else if (!strcmp(a, "--samples") && v) {
			opt.samples = atoi(v), i++;
		} else if (!strcmp(a, "--warmup") && v) {
			opt.warmup = atoi(v), i++;
		} else if (!strcmp(a, "--rounds") && v) {
			opt.rounds = atoi(v), i++;
		} else if (!strcmp(a, "--max-args") && v) {
			opt.max_args = atoi(v), i++;
		} else if (!strcmp(a, "--json") && v) {
			opt.json = v, i++;
		} else if (!strcmp(a, "--insn")) {
			opt.insn = 1;
		} else if (!strcmp(a, "--insn-windows") && v) {
			opt.insn_windows = atoi(v), i++;
		} else if (!strcmp(a, "--insn-repeats") && v) {
			opt.insn_repeats = atoi(v), i++;
		} else if (!strcmp(a, "--profile") && v) {
			opt.profile = v, i++;
		} else if (!strcmp(a, "--list")) {
			for (size_t j = 0; j < NR_ROWS; j++)
				printf("%s%s%s\n", rows[j].name, rows[j].backend ? "/" : "",
				       backend_name[rows[j].backend]);
			return 0;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(argv[0]);
			return 0;
		} else if (a[0] == '-') {
			usage(argv[0]);
			return 2;
		} else {
			const char *slash = strchr(a, '/');
			size_t len = slash ? (size_t)(slash - a) : strlen(a);
			int hit = 0;

			/* NAME: every backend of that row; NAME/BACKEND: just that one */
			for (size_t j = 0; j < NR_ROWS; j++)
				if (strlen(rows[j].name) == len && !strncmp(rows[j].name, a, len) &&
				    (!slash || !strcmp(slash + 1, backend_name[rows[j].backend])))
					rows[j].done = -1, hit = 1;	/* -1: selected */
			if (!hit) {
				fprintf(stderr, "trigger: unknown row '%s' (see --list)\n", a);
				return 2;
			}
			selected = 1;
		}
	}
	if (opt.duration <= 0 || opt.samples < 1 || opt.warmup < 0 || opt.rounds < 1 ||
	    opt.samples * opt.rounds > MAX_SAMPLES) {
		fprintf(stderr, "trigger: bad --duration/--samples/--warmup/--rounds\n");
		return 2;
	}
	if (opt.insn && opt.batch != BATCH) {
		fprintf(stderr, "trigger: --long-runs times the rows; --insn counts %d and %d calls "
			"per run and cancels the syscall anyway\n", INSN_CALLS, 2 * INSN_CALLS);
		return 2;
	}
	if (opt.insn_windows < 1 || opt.insn_repeats < 1 || opt.insn_repeats > MAX_REPEATS ||
	    (opt.profile && !opt.insn)) {
		fprintf(stderr, "trigger: bad --insn-windows/--insn-repeats (1-%d), or --profile "
			"without --insn\n", MAX_REPEATS);
		return 2;
	}
	/* counting: one CPU, the driver runs in this thread; each row once, repeats inside */
	if (opt.insn && (insn_open() || insn_pin()))
		return 1;
	if (opt.insn)
		opt.rounds = 1;
	prog_dir(opt.dir, sizeof(opt.dir), argv[0]);
	libbpf_set_strict_mode(LIBBPF_STRICT_ALL);
	/* libbpf's own warnings would repeat what each row's status says */
	libbpf_set_print(NULL);

	target_addr = ksym_addr(TARGET);
	btf = btf__load_vmlinux_btf();
	if (!target_addr || !btf || btf__find_by_name_kind(btf, TARGET, BTF_KIND_FUNC) <= 0) {
		fprintf(stderr, "trigger: %s is not in kallsyms and vmlinux BTF here\n", TARGET);
		return 1;
	}
	target_id = btf__find_by_name_kind(btf, TARGET, BTF_KIND_FUNC);
	btf__free(btf);
	if (opt.insn)
		printf("trigger: target %s at %#lx, counting instructions: %d repeats of %d or more "
		       "windows of one driver run making %d and %d calls\n", TARGET, target_addr,
		       opt.insn_repeats, opt.insn_windows, INSN_CALLS, 2 * INSN_CALLS);
	else
		printf("trigger: target %s at %#lx, %d calls per driver run, %d round(s) of %d × "
		       "%.2f s samples (+%d warm-up)\n", TARGET, target_addr, opt.batch, opt.rounds,
		       opt.samples, opt.duration, opt.warmup);
	fflush(stdout);
	if (opt.insn) {
		run_row(&baseline);
		if (baseline.failed) {
			fprintf(stderr, "trigger: the baseline: %s\n", baseline.status);
			return 1;
		}
	}

	for (size_t j = 0; j < NR_ROWS; j++)
		rows[j].done = selected ? (rows[j].done == -1 ? 0 : -2) : 0;
	if (!opt.insn)
		tramp_images_before = tramp_images();
	for (int round = 0; round < opt.rounds; round++) {
		for (size_t j = 0; j < NR_ROWS; j++) {
			char name[96];

			if (rows[j].done == -2)
				continue;
			fprintf(stderr, "trigger: round %d/%d: %s\n", round + 1, opt.rounds,
				label(&rows[j], name, sizeof(name)));
			if (opt.json)
				write_json(opt.json, &rows[j]);
			run_row(&rows[j]);
			if (opt.json)
				write_json(opt.json, NULL);
		}
	}
	for (size_t j = 0; j < NR_ROWS; j++) {
		if (rows[j].done == -2)
			rows[j].done = 0;
		if (rows[j].done && rows[j].failed && !strncmp(rows[j].status, "error", 5))
			bad++;
	}
	if (opt.insn) {
		print_insn_table();
		print_hazard_table();
	} else
		print_table();
	if (opt.json && write_json(opt.json, NULL))
		return 1;
	if (opt.profile && write_profiles(opt.profile))
		return 1;
	func_set_free(&all_set);
	return bad ? 1 : 0;
}
