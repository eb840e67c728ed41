// SPDX-License-Identifier: GPL-2.0
/*
 * Attach benchmark: time to attach and to detach one (empty) program to N kernel
 * functions, and the kernel memory it costs, per engine:
 *
 *   global        tracing multi-link through the series' global trampoline
 *                 (link_create.flags = BPF_F_TRACING_MULTI_GLOBAL)
 *   tracing_multi upstream tracing multi-link (one trampoline per function)
 *   kprobe.multi  one kprobe.multi link (fprobe)
 *   fentry        one fentry program and link per function (what bpftrace and retsnoop's
 *                 fentry mode do); its program loads are timed separately
 *
 * Each engine is attached and detached once on one function before its first row, so
 * one-time setup (the first trampoline, fprobe's pools) is not billed to that row.
 *
 * Memory: the change of Slab + VmallocUsed + Percpu in /proc/meminfo from before the
 * programs are loaded to after the attach, with MemAvailable's drop as a cross-check;
 * "left" is what is still allocated once memory stops shrinking after the detach.
 * Slab + VmallocUsed + Percpu misses what the kernel takes from the page allocator
 * directly: whole pages (get_free_page) and large kmalloc()/kvmalloc() buffers, such as
 * link arrays and hash tables of hundreds of kB. "pages" therefore also counts every
 * page neither free (the buddy lists and the per-CPU lists, /proc/zoneinfo) nor on an
 * LRU list (anonymous, file and unevictable pages): all of the kernel's own memory,
 * read the same way before and after, with the guest otherwise idle.
 *
 * The functions are the safe traceable ones (tests/guest/lib/funcs.c), in BTF order;
 * N = 1, 1000, 10000 and all of them. An engine the kernel does not have reports
 * "not available on this kernel" with the error of the attempt.
 *
 * --insn (under `vm/run --insn --smp 1`): the guest instructions of each multi-link's
 * attach and detach, counted by the QEMU plugin around the one syscall and folded to
 * kernel symbols; with one vCPU the window holds everything the kernel did meanwhile
 * (kworkers, RCU callbacks, interrupts). Then each row's attach profile on its own
 * (where its instructions go), and the global engine's next to kprobe.multi's for each
 * count both have: where the two attaches and detaches differ.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "lib/check.h"
#include "lib/funcs.h"
#include "lib/insn.h"

#ifdef BPFMUX_HAVE_GLOBAL_TRAMP	/* set by tests/guest/Makefile: the UAPI has it */
#define GLOBAL_FLAG BPF_F_TRACING_MULTI_GLOBAL
#else
#define GLOBAL_FLAG 0	/* libbpf without the series: the global engine says so */
#endif

enum engine { GLOBAL, TRACING_MULTI, KPROBE_MULTI, FENTRY_EACH, NR_ENGINES };

static const char *engine_name[] = { "global", "tracing_multi", "kprobe.multi", "fentry" };

struct mem {
	long slab, vmalloc, percpu, avail, pages;	/* kB */
};

struct result {
	enum engine engine;
	size_t want, got;	/* functions asked for, attached */
	char status[256];	/* "" = measured */
	double load_s, attach_s, detach_s;
	long kmem_kb, avail_kb, left_kb, pages_kb;
	/* --runs: program runs counted while attaching and while detaching, or -1 */
	long long runs_attach, runs_detach;
	/* --insn: guest instructions of the attach and of the detach, folded to symbols */
	long long insn_attach, insn_detach;
	struct insn_prof prof_attach, prof_detach;
};

#define MAX_RESULTS 256
static struct result results[MAX_RESULTS];
static int nresults;

static struct {
	size_t single_cap;	/* fentry engine: at most this many functions */
	double single_budget;	/* fentry engine: stop attaching after this many seconds */
	int quick, max_args, runs, insn;
	/* --beside: another link of the row's engine on the last N functions (0: all) */
	long beside;
	const char *json;
	char dir[4096];
} opt = { 2000, 300, 0, 12, .beside = -1 };

static struct func_set set;

static long meminfo_kb(const char *buf, const char *key)
{
	const char *p = strstr(buf, key);

	return p ? atol(p + strlen(key)) : -1;
}

/* Pages on the per-CPU free lists, which MemFree leaves out, in kB; -1 if unknown. */
static long pcp_free_kb(void)
{
	FILE *f = fopen("/proc/zoneinfo", "r");
	char line[256];
	long pages = 0, n;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, " count: %ld", &n) == 1)
			pages += n;
	fclose(f);
	return pages * (sysconf(_SC_PAGESIZE) / 1024);
}

static struct mem read_mem(void)
{
	char buf[8192];
	struct mem m = { -1, -1, -1, -1, -1 };
	FILE *f = fopen("/proc/meminfo", "r");
	long pcp = pcp_free_kb();
	size_t n;

	if (!f)
		return m;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	m.slab = meminfo_kb(buf, "\nSlab:");
	m.vmalloc = meminfo_kb(buf, "\nVmallocUsed:");
	m.percpu = meminfo_kb(buf, "\nPercpu:");
	m.avail = meminfo_kb(buf, "\nMemAvailable:");
	/* MemTotal comes first: no newline before it. */
	if (pcp >= 0)
		m.pages = atol(buf + strlen("MemTotal:")) - meminfo_kb(buf, "\nMemFree:") - pcp -
			  meminfo_kb(buf, "\nActive(anon):") - meminfo_kb(buf, "\nInactive(anon):") -
			  meminfo_kb(buf, "\nActive(file):") - meminfo_kb(buf, "\nInactive(file):") -
			  meminfo_kb(buf, "\nUnevictable:");
	return m;
}

static long kmem(struct mem m)
{
	return m.slab + m.vmalloc + m.percpu;
}

/*
 * Let deferred frees (RCU, RCU tasks, workqueues, trampolines of an earlier row) finish
 * before memory is read: wait until neither kernel memory nor the kernel's pages have
 * shrunk by more than 64 kB for three reads in a row, half a second apart. An earlier
 * row's frees still under way would otherwise be subtracted from the next row's memory:
 * upstream's backend frees tens of megabytes over many seconds on a busy host. At most
 * 60 s (2 s with --quick), then it says so.
 */
static void settle(void)
{
	struct mem prev = read_mem(), cur;
	int quiet = 0, i, max = opt.quick ? 4 : 120;

	for (i = 0; i < max && quiet < 3; i++) {
		usleep(500000);
		cur = read_mem();
		if (kmem(prev) - kmem(cur) < 64 && prev.pages - cur.pages < 64)
			quiet++;
		else
			quiet = 0;
		prev = cur;
	}
	if (quiet < 3 && !opt.quick)
		fprintf(stderr, "attach: kernel memory still shrinking after %d s\n", max / 2);
}

/* ---- multi engines: one program, one link ---- */

static struct bpf_object *open_one(const char *prog_name, struct bpf_program **prog)
{
	char path[4200];
	struct bpf_object *obj;
	struct bpf_program *p;

	snprintf(path, sizeof(path), "%s/attach.bpf.o", opt.dir);
	obj = bpf_object__open_file(path, NULL);
	if (!obj)
		return NULL;
	bpf_object__for_each_program(p, obj)
		bpf_program__set_autoload(p, !strcmp(bpf_program__name(p), prog_name));
	*prog = bpf_object__find_program_by_name(obj, prog_name);
	if (bpf_object__load(obj)) {
		int err = errno;

		bpf_object__close(obj);
		errno = err;
		return NULL;
	}
	return obj;
}

static __u32 link_count(struct bpf_link *link, enum engine e)
{
	struct bpf_link_info info = {};
	__u32 len = sizeof(info);

	if (bpf_link_get_info_by_fd(bpf_link__fd(link), &info, &len))
		return 0;
	return e == KPROBE_MULTI ? info.kprobe_multi.count : info.tracing_multi.count;
}

static struct bpf_link *attach_multi(struct bpf_program *prog, enum engine e, size_t off,
				     size_t cnt)
{
	if (e == KPROBE_MULTI) {
		LIBBPF_OPTS(bpf_kprobe_multi_opts, kopts, .syms = (const char **)set.names + off,
			    .cnt = cnt);

		return bpf_program__attach_kprobe_multi_opts(prog, NULL, &kopts);
	} else {
		LIBBPF_OPTS(bpf_tracing_multi_opts, topts, .ids = set.ids + off, .cnt = cnt);

#ifdef BPFMUX_HAVE_GLOBAL_TRAMP	/* set by tests/guest/Makefile: the UAPI has it */
		if (e == GLOBAL)
			topts.flags = GLOBAL_FLAG;
#endif
		return bpf_program__attach_tracing_multi(prog, NULL, &topts);
	}
}

/*
 * After a refused link: find the first function the kernel refuses on its own, by
 * halving, so the report can name it. -1 if each half attaches alone.
 */
static long first_refused(struct bpf_program *prog, enum engine e, size_t cnt)
{
	size_t lo = 0, n = cnt;

	while (n > 1) {
		struct bpf_link *l = attach_multi(prog, e, lo, n / 2);

		if (l) {
			bpf_link__destroy(l);
			lo += n / 2;
			n -= n / 2;
		} else {
			n /= 2;
		}
	}
	{
		struct bpf_link *l = attach_multi(prog, e, lo, 1);

		if (l) {
			bpf_link__destroy(l);
			return -1;
		}
	}
	return lo;
}

/* The program's run count (kernel.bpf_stats_enabled on), or -1. */
static long long run_cnt(struct bpf_program *prog)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);

	if (bpf_prog_get_info_by_fd(bpf_program__fd(prog), &info, &len))
		return -1;
	return info.run_cnt;
}

/* --insn: the window that just ended, folded into @p; its instruction count, or -1. */
static long long insn_fold_window(struct insn_prof *p)
{
	struct insn_window w = {};
	long long count;

	if (insn_read(&w))
		return -1;
	count = w.count;
	if (insn_fold(&w, p))
		count = -1;
	insn_window_free(&w);
	return count;
}

/*
 * --beside: a second program of the row's engine attached to the last @opt.beside functions
 * of the set (0: all) for the whole row, so that the row changes a kernel that already
 * traces them: is the row's cost proportional to what it changes? NULL with a message in
 * @r->status when it cannot be had.
 */
static struct bpf_link *beside_attach(struct result *r, struct bpf_object **obj)
{
	const char *prog_name = r->engine == KPROBE_MULTI ? "empty_kprobe_multi" :
							    "empty_fentry_multi";
	size_t cnt = opt.beside && (size_t)opt.beside < set.cnt ? (size_t)opt.beside : set.cnt;
	struct bpf_program *prog;
	struct bpf_link *link;
	double t0 = now();

	*obj = open_one(prog_name, &prog);
	if (!*obj) {
		snprintf(r->status, sizeof(r->status), "error: --beside: load: %s",
			 strerror(errno));
		return NULL;
	}
	link = attach_multi(prog, r->engine, set.cnt - cnt, cnt);
	if (!link) {
		snprintf(r->status, sizeof(r->status), "error: --beside: attach on %zu functions: %s",
			 cnt, strerror(errno));
		bpf_object__close(*obj);
		*obj = NULL;
		return NULL;
	}
	fprintf(stderr, "attach: beside the row, %s on the last %zu functions, attached in %.3f s\n",
		engine_name[r->engine], cnt, now() - t0);
	return link;
}

static void run_multi_row(struct result *r)
{
	const char *prog_name = r->engine == KPROBE_MULTI ? "empty_kprobe_multi" :
							    "empty_fentry_multi";
	struct bpf_program *prog;
	struct bpf_object *obj;
	struct bpf_link *link;
	struct mem m0, m1, m2;
	long long runs;
	int stats_fd = -1;
	double t0;
	__u32 n;

	if (r->engine == GLOBAL && !GLOBAL_FLAG) {
		snprintf(r->status, sizeof(r->status),
			 "not available: built against a libbpf without BPF_F_TRACING_MULTI_GLOBAL");
		return;
	}
	settle();
	m0 = read_mem();
	t0 = now();
	obj = open_one(prog_name, &prog);
	r->load_s = now() - t0;
	if (!obj) {
		snprintf(r->status, sizeof(r->status), "not available on this kernel (load: %s)",
			 strerror(errno));
		return;
	}
	r->runs_attach = r->runs_detach = -1;
	if (opt.runs) {
		stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
		if (stats_fd < 0)
			fprintf(stderr, "attach: --runs: run-time stats: %s\n", strerror(errno));
	}
	t0 = now();
	if (opt.insn)
		INSN_BEGIN_PROFILE();
	link = attach_multi(prog, r->engine, 0, r->want);
	if (opt.insn) {
		INSN_END();
		r->insn_attach = insn_fold_window(&r->prof_attach);
	}
	r->attach_s = now() - t0;
	if (stats_fd >= 0 && link)
		r->runs_attach = run_cnt(prog);
	if (!link) {
		int err = errno;
		long bad = r->want > 1 ? first_refused(prog, r->engine, r->want) : -1;

		if (bad >= 0)
			snprintf(r->status, sizeof(r->status), "refused (attach: %s; the kernel "
				 "refuses %s alone)", strerror(err), set.names[bad]);
		else
			snprintf(r->status, sizeof(r->status),
				 "not available on this kernel (attach: %s)", strerror(err));
		bpf_object__close(obj);
		if (stats_fd >= 0)
			close(stats_fd);
		return;
	}
	n = link_count(link, r->engine);
	r->got = r->want;
	if (n != r->want)
		snprintf(r->status, sizeof(r->status), "error: link info says %u functions, want %zu",
			 n, r->want);
	m1 = read_mem();
	/* Runs while detaching only: reading the counters above runs it too. */
	runs = stats_fd >= 0 ? run_cnt(prog) : 0;
	t0 = now();
	if (opt.insn)
		INSN_BEGIN_PROFILE();
	bpf_link__destroy(link);
	if (opt.insn) {
		INSN_END();
		r->insn_detach = insn_fold_window(&r->prof_detach);
	}
	r->detach_s = now() - t0;
	if (stats_fd >= 0) {
		r->runs_detach = run_cnt(prog) - runs;
		close(stats_fd);
	}
	bpf_object__close(obj);
	settle();
	m2 = read_mem();
	r->kmem_kb = kmem(m1) - kmem(m0);
	r->avail_kb = m0.avail - m1.avail;
	r->left_kb = kmem(m2) - kmem(m0);
	r->pages_kb = m1.pages - m0.pages;
}

static void run_multi(struct result *r)
{
	struct bpf_object *beside_obj = NULL;
	struct bpf_link *beside = NULL;

	if (opt.beside >= 0 && !(r->engine == GLOBAL && !GLOBAL_FLAG)) {
		beside = beside_attach(r, &beside_obj);
		if (!beside)
			return;
	}
	run_multi_row(r);
	bpf_link__destroy(beside);
	bpf_object__close(beside_obj);
}

/* ---- one fentry program and link per function ---- */

static int load_fentry(__u32 btf_id)
{
	/* r0 = 0; exit */
	static const struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, popts, .expected_attach_type = BPF_TRACE_FENTRY,
		    .attach_btf_id = btf_id);

	return bpf_prog_load(BPF_PROG_TYPE_TRACING, "empty_fentry", "GPL", insns, 2, &popts);
}

static void run_each(struct result *r)
{
	int *progs = calloc(r->want, sizeof(int)), *links = calloc(r->want, sizeof(int));
	struct mem m0, m1, m2;
	double t0, deadline;
	size_t i, loaded = 0;

	if (!progs || !links) {
		snprintf(r->status, sizeof(r->status), "error: out of memory");
		goto out;
	}
	settle();
	m0 = read_mem();
	t0 = now();
	deadline = t0 + opt.single_budget;
	for (i = 0; i < r->want && now() < deadline; i++) {
		progs[i] = load_fentry(set.ids[i]);
		if (progs[i] < 0)
			break;
		loaded++;
	}
	r->load_s = now() - t0;
	if (loaded < r->want && progs[loaded] < 0) {
		snprintf(r->status, sizeof(r->status), "%s (load of %s: %s)",
			 loaded ? "error" : "not available on this kernel", set.names[loaded],
			 strerror(errno));
		goto close;
	}
	t0 = now();
	for (i = 0; i < loaded && now() < deadline; i++) {
		links[i] = bpf_link_create(progs[i], 0, BPF_TRACE_FENTRY, NULL);
		if (links[i] < 0) {
			snprintf(r->status, sizeof(r->status), "%s (attach to %s: %s)",
				 i ? "error" : "not available on this kernel", set.names[i],
				 strerror(errno));
			break;
		}
		r->got++;
		if (r->got % 200 == 0)
			fprintf(stderr, "attach: fentry: %zu of %zu attached\n", r->got, r->want);
	}
	r->attach_s = now() - t0;
	m1 = read_mem();
	t0 = now();
	for (i = 0; i < r->got; i++)
		close(links[i]);
	r->detach_s = now() - t0;
close:
	for (i = 0; i < loaded; i++)
		close(progs[i]);
	settle();
	m2 = read_mem();
	if (r->got) {
		r->kmem_kb = kmem(m1) - kmem(m0);
		r->avail_kb = m0.avail - m1.avail;
		r->left_kb = kmem(m2) - kmem(m0);
		r->pages_kb = m1.pages - m0.pages;
	}
	if (!r->status[0] && r->got < r->want)
		snprintf(r->status, sizeof(r->status),
			 "stopped at the %.0f s time cap: %zu of %zu attached", opt.single_budget,
			 r->got, r->want);
out:
	free(progs);
	free(links);
}

static void print_result(const struct result *r);
static int write_json(const char *path, int running);

static void run_one(enum engine e, size_t want)
{
	static int warm[NR_ENGINES];
	struct result *r = &results[nresults++];

	r->engine = e;
	r->want = want;
	r->runs_attach = r->runs_detach = -1;	/* counted by run_multi() only */
	if (opt.json)
		write_json(opt.json, 1);
	/* One-time setup of an engine (first trampoline, fprobe pools) is not a row's cost. */
	if (!warm[e]) {
		struct result scratch = { .engine = e, .want = 1 };

		warm[e] = 1;
		if (e == FENTRY_EACH) {
			run_each(&scratch);
		} else {
			run_multi(&scratch);
			insn_prof_free(&scratch.prof_attach);
			insn_prof_free(&scratch.prof_detach);
		}
	}
	fprintf(stderr, "attach: %s on %zu functions\n", engine_name[e], want);
	if (e == FENTRY_EACH && want > opt.single_cap) {
		snprintf(r->status, sizeof(r->status),
			 "skipped: one program per function is capped at %zu functions under TCG",
			 opt.single_cap);
	} else if (e == FENTRY_EACH) {
		run_each(r);
	} else {
		run_multi(r);
	}
	print_result(r);
	if (opt.json)
		write_json(opt.json, 0);
}

static void print_header(void)
{
	printf("%-14s %8s %9s %9s %9s %10s %10s %9s %10s  %s\n", "engine", "funcs", "load s",
	       "attach s", "detach s", "kmem kB", "avail kB", "left kB", "pages kB", "status");
	fflush(stdout);
}

static void print_result(const struct result *r)
{
	if (!r->got)
		printf("%-14s %8zu %s\n", engine_name[r->engine], r->want, r->status);
	else
		printf("%-14s %8zu %9.3f %9.3f %9.3f %10ld %10ld %9ld %10ld  %s\n",
		       engine_name[r->engine], r->got, r->load_s, r->attach_s, r->detach_s,
		       r->kmem_kb, r->avail_kb, r->left_kb, r->pages_kb,
		       r->status[0] ? r->status : "ok");
	if (r->got && opt.runs && r->runs_attach >= 0)
		printf("%-14s %8zu runs while attaching %lld, while detaching %lld\n",
		       engine_name[r->engine], r->got, r->runs_attach, r->runs_detach);
	if (r->got && opt.insn)
		printf("%-14s %8zu guest instructions: attach %lld, detach %lld\n",
		       engine_name[r->engine], r->got, r->insn_attach, r->insn_detach);
	fflush(stdout);
}

/* --insn: global next to kprobe.multi, per count both attached, attach then detach. */
static void print_insn_profiles(void)
{
	const struct insn_prof none = { NULL, 0 };

	/* First each multi-link row on its own: where its instructions go, largest first. */
	for (int i = 0; i < nresults; i++) {
		const struct result *r = &results[i];

		if (!r->got || !r->prof_attach.n)
			continue;
		printf("\n### %s, attach of %zu functions, guest instructions by symbol\n\n",
		       engine_name[r->engine], r->got);
		insn_prof_print(stdout, &r->prof_attach, 1, engine_name[r->engine], &none, 1,
				"-", 30);
	}
	for (int i = 0; i < nresults; i++) {
		const struct result *g = &results[i], *k = NULL;

		if (g->engine != GLOBAL || !g->got || !g->prof_attach.n)
			continue;
		for (int j = 0; j < nresults; j++)
			if (results[j].engine == KPROBE_MULTI && results[j].got == g->got &&
			    results[j].prof_attach.n)
				k = &results[j];
		if (!k)
			continue;
		printf("\n### Attach of %zu functions, guest instructions by symbol\n\n", g->got);
		insn_prof_print(stdout, &g->prof_attach, 1, "global", &k->prof_attach, 1,
				"kprobe.multi", 40);
		printf("\n### Detach of %zu functions, guest instructions by symbol\n\n", g->got);
		insn_prof_print(stdout, &g->prof_detach, 1, "global", &k->prof_detach, 1,
				"kprobe.multi", 25);
	}
	fflush(stdout);
}

/*
 * Rewritten after every row, the row in progress marked, and synced: if the guest
 * kernel hangs or crashes, what was measured survives and the report names the row.
 */
static int write_json(const char *path, int running)
{
	struct utsname u;
	FILE *f = fopen(path, "w");

	if (!f) {
		perror(path);
		return -1;
	}
	uname(&u);
	fprintf(f, "{\"kernel\": \"%s\", \"funcs_total\": %zu, \"single_cap\": %zu, "
		"\"single_budget_s\": %g, \"max_args\": %d, \"beside\": %ld,\n \"results\": [\n",
		u.release, set.cnt, opt.single_cap, opt.single_budget, opt.max_args, opt.beside);
	for (int i = 0; i < nresults; i++) {
		const struct result *r = &results[i];
		const char *st = r->status[0] ? r->status : "ok";

		if (running && i == nresults - 1)
			st = "did not finish: the guest was killed (timeout) or crashed during this row";

		fprintf(f, "  {\"engine\": \"%s\", \"want\": %zu, \"got\": %zu, \"status\": \"",
			engine_name[r->engine], r->want, r->got);
		for (const char *c = st; *c; c++)
			fprintf(f, *c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
		fprintf(f, "\", \"load_s\": %.6f, \"attach_s\": %.6f, \"detach_s\": %.6f, "
			"\"kmem_kb\": %ld, \"avail_kb\": %ld, \"left_kb\": %ld, \"pages_kb\": %ld",
			r->load_s, r->attach_s, r->detach_s, r->kmem_kb, r->avail_kb, r->left_kb,
			r->pages_kb);
		if (opt.runs)
			fprintf(f, ", \"runs_attach\": %lld, \"runs_detach\": %lld",
				r->runs_attach, r->runs_detach);
		fprintf(f, "}%s\n", i + 1 < nresults ? "," : "");
	}
	fprintf(f, " ]}\n");
	return close_synced(f);
}

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [options] [ENGINE...]\n"
		"Attach/detach time and kernel memory of one program on 1, 1000, 10000 and all\n"
		"safe traceable functions. ENGINE: global tracing_multi kprobe.multi fentry\n"
		"(default all four).\n"
		"  --quick          N = 1 and 100 only\n"
		"  --counts A,B,..  function counts (0 = all), default 1,1000,10000,0\n"
		"  --single-cap N   fentry engine: at most N functions (default 2000)\n"
		"  --single-budget S fentry engine: stop attaching after S s (default 300)\n"
		"  --max-args N     functions with up to N arguments (default 12)\n"
		"  --json FILE      also write the results as JSON\n"
		"  --runs           count the program's runs while attaching and detaching\n"
		"                   (run-time stats on: times are then not comparable)\n"
		"  --cycles N       every row N times (1-50), then the kernel memory left\n"
		"                   after the last cycle against before the first\n"
		"  --insn           guest instructions of each multi-link attach and detach,\n"
		"                   by kernel symbol (vm/run --insn --smp 1; global vs kprobe.multi)\n"
		"  --beside N       multi-link rows: another link of the row's engine stays on the\n"
		"                   last N functions (0 = all) while the row attaches and detaches\n"
		"examples:\n"
		"  %s --quick\n"
		"  %s --counts 1,1000 global kprobe.multi\n"
		"  %s --runs --counts 0 global kprobe.multi\n"
		"  %s --cycles 10 --counts 0 global\n"
		"  %s --insn --counts 0 global kprobe.multi\n"
		"  %s --insn --beside 0 --counts 1,100 global kprobe.multi\n", argv0, argv0, argv0,
		argv0, argv0, argv0, argv0);
}

int main(int argc, char **argv)
{
	static const char *const every[] = { "*", NULL };
	size_t counts[8] = { 1, 1000, 10000, 0 };
	int ncounts = 4, engines = 0, bad = 0, err, cycles = 1, rows;
	struct mem before, after;
	struct rlimit rl = { 1 << 20, 1 << 20 };
	struct btf *btf;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int hit = 0;

		if (!strcmp(a, "--quick")) {
			opt.quick = 1;
			ncounts = 2;
			counts[1] = 100;
		} else if (!strcmp(a, "--counts") && v) {
			char *s = strdup(v), *tok, *save;

			ncounts = 0;
			for (tok = strtok_r(s, ",", &save); tok && ncounts < 8;
			     tok = strtok_r(NULL, ",", &save))
				counts[ncounts++] = strtoul(tok, NULL, 10);
			free(s);
			i++;
		} else if (!strcmp(a, "--single-cap") && v) {
			opt.single_cap = strtoul(v, NULL, 10), i++;
		} else if (!strcmp(a, "--single-budget") && v) {
			opt.single_budget = atof(v), i++;
		} else if (!strcmp(a, "--max-args") && v) {
			opt.max_args = atoi(v), i++;
		} else if (!strcmp(a, "--runs")) {
			opt.runs = 1;
		} else if (!strcmp(a, "--insn")) {
			opt.insn = 1;
		} else if (!strcmp(a, "--cycles") && v) {
			cycles = atoi(v), i++;
			if (cycles < 1 || cycles > 50) {
				fprintf(stderr, "attach: --cycles takes 1 to 50, not %s\n", v);
				return 2;
			}
		} else if (!strcmp(a, "--beside") && v) {
			char *end;

			opt.beside = strtol(v, &end, 10), i++;
			if (*end || opt.beside < 0) {
				fprintf(stderr, "attach: --beside takes a function count (0 = all), "
					"not %s\n", v);
				return 2;
			}
		} else if (!strcmp(a, "--json") && v) {
			opt.json = v, i++;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(argv[0]);
			return 0;
		} else {
			for (int e = 0; e < NR_ENGINES; e++)
				if (!strcmp(a, engine_name[e]))
					engines |= 1 << e, hit = 1;
			if (!hit) {
				usage(argv[0]);
				return 2;
			}
		}
	}
	if (!engines)
		engines = (1 << NR_ENGINES) - 1;
	rows = cycles * ncounts * __builtin_popcount(engines);
	if (rows > MAX_RESULTS) {
		fprintf(stderr, "attach: %d rows (cycles x counts x engines), at most %d\n", rows,
			MAX_RESULTS);
		return 2;
	}
	if (opt.insn && (insn_open() || insn_pin()))
		return 1;
	prog_dir(opt.dir, sizeof(opt.dir), argv[0]);
	libbpf_set_strict_mode(LIBBPF_STRICT_ALL);
	libbpf_set_print(NULL);
	/* two fds per function for the fentry engine */
	if (setrlimit(RLIMIT_NOFILE, &rl))
		perror("setrlimit(RLIMIT_NOFILE)");

	btf = btf__load_vmlinux_btf();
	if (!btf) {
		fprintf(stderr, "attach: no vmlinux BTF\n");
		return 1;
	}
	err = func_set_collect_args(&set, btf, every, NULL, (size_t)-1, opt.max_args);
	btf__free(btf);
	if (err || !set.cnt) {
		fprintf(stderr, "attach: no traceable functions found\n");
		return 1;
	}
	printf("attach: %zu safe traceable functions (up to %d arguments)\n", set.cnt,
	       opt.max_args);
	if (opt.beside >= 0)
		printf("attach: every multi-link row beside a link of its engine on the last %zu "
		       "functions\n", opt.beside && (size_t)opt.beside < set.cnt ?
		       (size_t)opt.beside : set.cnt);
	print_header();
	settle();
	before = read_mem();
	for (int k = 0; k < cycles; k++) {
		for (int c = 0; c < ncounts; c++) {
			size_t want = counts[c] && counts[c] < set.cnt ? counts[c] : set.cnt;

			for (int e = 0; e < NR_ENGINES; e++)
				if (engines & (1 << e))
					run_one(e, want);
		}
	}
	if (cycles > 1) {
		settle();
		after = read_mem();
		printf("attach: after %d cycles of every row, kernel memory %+ld kB against before "
		       "the first (Slab %+ld, VmallocUsed %+ld, Percpu %+ld kB)\n", cycles,
		       kmem(after) - kmem(before), after.slab - before.slab,
		       after.vmalloc - before.vmalloc, after.percpu - before.percpu);
	}
	if (opt.insn)
		print_insn_profiles();
	for (int i = 0; i < nresults; i++)
		bad += !strncmp(results[i].status, "error", 5);
	if (opt.json && write_json(opt.json, 0))
		return 1;
	func_set_free(&set);
	return bad ? 1 : 0;
}
