// SPDX-License-Identifier: GPL-2.0
/*
 * Benchmark of kprobe.multi attach by name (the kernel's ftrace_lookup_symbols()), run in
 * a guest; bench/batchsym/run.sh boots each kernel and turns the output into a table.
 *
 *   batchsym-bench info
 *   batchsym-bench lookup SIZE...     name resolution alone, per batch size
 *   batchsym-bench attach SIZE...     full attach + detach, by name and by address
 *   batchsym-bench session50          the seed's table: 50 exact names, kprobe.session
 *
 * "lookup" makes BPF_LINK_CREATE fail right after the names are resolved: with every file
 * descriptor slot taken, the kernel resolves the names, then cannot install the link's fd
 * and unwinds (EMFILE) before any probe is registered. The syscall time is then copying,
 * sorting and resolving the names, and nothing else, on any kernel.
 *
 * Names are vmlinux functions with exactly one kallsyms symbol, traceable, not on the kprobe
 * blacklist, in a fixed pseudo-random order. Output: one "key value..." line per result on
 * stdout (times in microseconds, medians over the repetitions), progress on stderr.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "batchsym/ksym_model.h"
#include "lib/check.h"

static struct ksym_model model;
static const char **names;	/* unique traceable functions, shuffled */
static unsigned long *name_addrs;
static size_t nnames;
static struct bpf_object *obj;

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void die(const char *what, int err)
{
	fprintf(stderr, "batchsym-bench: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

static void setup(const char *argv0)
{
	char path[4096];
	int err;

	err = ksym_model_load(&model);
	if (err)
		die("reading kallsyms/ftrace records", err);
	nnames = ksym_unique_functions(&model, &names);
	if (!nnames)
		die("no traceable functions", ENOENT);
	/* Fixed-seed shuffle: batch k is the first k names, the same on every run. */
	for (size_t i = nnames, seed = 0x6261746368; i > 1; i--) {
		size_t k;
		const char *t;

		seed = seed * 6364136223846793005UL + 1442695040888963407UL;
		k = (seed >> 33) % i;
		t = names[i - 1];
		names[i - 1] = names[k];
		names[k] = t;
	}
	name_addrs = calloc(nnames, sizeof(*name_addrs));
	if (!name_addrs)
		die("calloc", ENOMEM);
	for (size_t i = 0; i < nnames; i++)
		name_addrs[i] = ksym_resolve(&model, names[i])->addr;

	snprintf(path, sizeof(path), "%s.bpf.o", argv0);
	libbpf_set_strict_mode(LIBBPF_STRICT_ALL);
	obj = bpf_object__open_file(path, NULL);
	if (!obj)
		die(path, errno);
	err = bpf_object__load(obj);
	if (err)
		die("loading the BPF programs", err);
}

static int prog_fd(const char *name)
{
	return bpf_program__fd(bpf_object__find_program_by_name(obj, name));
}

static int reps_for(size_t size, int small, int large)
{
	return size <= 1024 ? small : large;
}

/* BPF_LINK_CREATE kprobe.multi by name (@by_name) or by address for the first @cnt names. */
static int link_create(int fd, size_t cnt, int by_name, enum bpf_attach_type type)
{
	LIBBPF_OPTS(bpf_link_create_opts, opts);

	if (by_name)
		opts.kprobe_multi.syms = names;
	else
		opts.kprobe_multi.addrs = name_addrs;
	opts.kprobe_multi.cnt = cnt;
	return bpf_link_create(fd, 0, type, &opts);
}

/*
 * Time one resolution of the first @cnt names with every fd slot taken: the kernel fails
 * the attach with EMFILE right after ftrace_lookup_symbols().
 */
static double time_lookup(size_t cnt)
{
	static int fillers[65536];
	struct rlimit old, lim;
	int nfill = 0, fd = prog_fd("multi_noop"), ret, err;
	double t0, t1;

	getrlimit(RLIMIT_NOFILE, &old);
	lim = old;
	lim.rlim_cur = 4096;
	if (setrlimit(RLIMIT_NOFILE, &lim))
		die("setrlimit", errno);
	while (nfill < (int)(sizeof(fillers) / sizeof(fillers[0]))) {
		int f = dup(fd);

		if (f < 0)
			break;
		fillers[nfill++] = f;
	}
	t0 = now() * 1e6;
	ret = link_create(fd, cnt, 1, BPF_TRACE_KPROBE_MULTI);
	t1 = now() * 1e6;
	err = errno;
	while (nfill)
		close(fillers[--nfill]);
	setrlimit(RLIMIT_NOFILE, &old);
	if (ret >= 0) {
		close(ret);
		die("attach succeeded with no free fd", EINVAL);
	}
	if (err != EMFILE)
		die("resolving names (expected EMFILE after the lookup)", err);
	return t1 - t0;
}

static void cmd_lookup(int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		size_t size = strtoul(argv[i], NULL, 0);
		int reps = reps_for(size, 9, 3);
		double t[9];

		if (!size || size > nnames) {
			printf("lookup %zu skipped (only %zu functions)\n", size, nnames);
			continue;
		}
		for (int r = 0; r < reps; r++)
			t[r] = time_lookup(size);
		printf("lookup %zu %.1f\n", size, median(t, reps));
		fprintf(stderr, "progress: lookup %zu names: %.1f us\n", size, t[reps / 2]);
		fflush(stdout);
	}
}

static void cmd_attach(int argc, char **argv)
{
	int fd = prog_fd("multi_noop");

	for (int i = 0; i < argc; i++) {
		size_t size = strtoul(argv[i], NULL, 0);
		int reps = reps_for(size, 5, 1);

		if (!size || size > nnames) {
			printf("attach %zu skipped (only %zu functions)\n", size, nnames);
			continue;
		}
		for (int by_name = 1; by_name >= 0; by_name--) {
			double ta[5], td[5];

			for (int r = 0; r < reps; r++) {
				double t0 = now() * 1e6, t1, t2;
				int link = link_create(fd, size, by_name, BPF_TRACE_KPROBE_MULTI);

				t1 = now() * 1e6;
				if (link < 0)
					die(by_name ? "attach by name" : "attach by address", errno);
				close(link);
				t2 = now() * 1e6;
				ta[r] = t1 - t0;
				td[r] = t2 - t1;
			}
			printf("attach %zu %s %.1f %.1f\n", size, by_name ? "name" : "addr",
			       median(ta, reps), median(td, reps));
			fprintf(stderr, "progress: attach %zu by %s: %.1f us (detach %.1f us)\n", size,
				by_name ? "name" : "address", ta[reps / 2], td[reps / 2]);
			fflush(stdout);
		}
	}
}

/*
 * The seed's "before": the loader reads all of /proc/kallsyms to find @name (libbpf does
 * this on kernels without available_filter_functions_addrs; it reads the whole file, since
 * a pattern may match many symbols), then attaches by address. Returns 0 when not found.
 */
static unsigned long kallsyms_parse_addr(const char *name)
{
	char line[512], sym[256], type;
	unsigned long addr, found = 0;
	FILE *f = fopen("/proc/kallsyms", "r");

	if (!f)
		die("/proc/kallsyms", errno);
	while (fgets(line, sizeof(line), f)) {
		/* module symbols carry a "[mod]" suffix: only vmlinux names are wanted */
		if (sscanf(line, "%lx %c %255s", &addr, &type, sym) != 3 || strchr(line, '['))
			continue;
		/* functions: t/T, or w/W for weak ones (a __weak default the kernel kept) */
		if (strchr("tTwW", type) && !found && !strcmp(sym, name))
			found = addr;
	}
	fclose(f);
	return found;
}

/* One row of the seed's table: attach the first 50 names one way, then detach all. */
static void session_row(const char *key, int how)
{
	enum { N = 50 };
	struct bpf_program *session = bpf_object__find_program_by_name(obj, "session_noop");
	struct bpf_program *kp = bpf_object__find_program_by_name(obj, "kprobe_noop");
	struct bpf_program *krp = bpf_object__find_program_by_name(obj, "kretprobe_noop");
	struct bpf_link *links[2 * N] = {};
	int nlinks = 0;
	double t0, t1;

	t0 = now() * 1e6;
	for (int i = 0; i < N; i++) {
		LIBBPF_OPTS(bpf_kprobe_multi_opts, opts, .session = true);
		unsigned long addr;

		switch (how) {
		case 4:	/* the loader parses /proc/kallsyms, attaches by address */
		case 5:	/* the address is known already: no name resolution at all */
			addr = how == 4 ? kallsyms_parse_addr(names[i]) : name_addrs[i];
			if (!addr)
				die(names[i], ENOENT);
			opts.addrs = &addr;
			opts.cnt = 1;
			links[nlinks++] = bpf_program__attach_kprobe_multi_opts(session, NULL, &opts);
			break;
		case 0:	/* libbpf resolves the name itself (parses available functions) */
			opts.unique_match = true;
			links[nlinks++] = bpf_program__attach_kprobe_multi_opts(session, names[i], &opts);
			break;
		case 1:	/* exact name handed to the kernel: cnt == 1 */
			links[nlinks++] = bpf_program__attach_kprobe_multi_opts(session, names[i], &opts);
			break;
		case 2:	/* classic kprobe + kretprobe pair */
			links[nlinks++] = bpf_program__attach_kprobe(kp, false, names[i]);
			links[nlinks++] = bpf_program__attach_kprobe(krp, true, names[i]);
			break;
		case 3:	/* all 50 names in one kprobe.session link: a batch of 50 */
			opts.syms = names;
			opts.cnt = N;
			links[nlinks++] = bpf_program__attach_kprobe_multi_opts(session, NULL, &opts);
			i = N;
			break;
		}
		if (!links[nlinks - 1] || (how == 2 && !links[nlinks - 2]))
			die(key, errno);
	}
	t1 = now() * 1e6;
	for (int i = 0; i < nlinks; i++)
		bpf_link__destroy(links[i]);
	printf("session50 %s %.1f %d\n", key, t1 - t0, nlinks);
	fprintf(stderr, "progress: session50 %s: %.1f ms for %d links\n", key, (t1 - t0) / 1000, nlinks);
	fflush(stdout);
}

static void cmd_session50(void)
{
	if (nnames < 50)
		die("fewer than 50 functions", ENOENT);
	session_row("kallsyms-parse", 4);
	session_row("libbpf-parse", 0);
	session_row("exact-name", 1);
	session_row("by-address", 5);
	session_row("one-link-50", 3);
	session_row("kprobe-pairs", 2);
}

static void cmd_info(void)
{
	size_t in_vmlinux = 0;
	struct utsname u;

	for (size_t i = 0; i < model.cnt; i++)
		in_vmlinux += !model.syms[i].mod;
	uname(&u);
	printf("info kernel %s\n", u.release);
	printf("info kallsyms %zu vmlinux %zu records %zu functions %zu\n", model.cnt, in_vmlinux,
	       model.nips, nnames);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s info | lookup SIZE... | attach SIZE... | session50\n",
			argv[0]);
		return 2;
	}
	setup(argv[0]);
	if (!strcmp(argv[1], "info"))
		cmd_info();
	else if (!strcmp(argv[1], "lookup"))
		cmd_lookup(argc - 2, argv + 2);
	else if (!strcmp(argv[1], "attach"))
		cmd_attach(argc - 2, argv + 2);
	else if (!strcmp(argv[1], "session50"))
		cmd_session50();
	else {
		fprintf(stderr, "unknown command %s\n", argv[1]);
		return 2;
	}
	return 0;
}
