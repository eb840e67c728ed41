// SPDX-License-Identifier: GPL-2.0
/*
 * Per-packet cost of running XDP programs one after another, measured with
 * BPF_PROG_TEST_RUN and `repeat` (the kernel reports the mean time per run):
 *
 *   single DROP, no chain anywhere        baseline; the static key is off
 *   single DROP, key on                   an unrelated program has a chain, so the
 *                                         key is on: the cost for everyone who does
 *                                         not chain (target: zero)
 *   PASS -> DROP, kernel chain            exact entry on XDP_PASS
 *   PASS -> DROP, kernel chain wildcard   wildcard entry
 *   PASS -> DROP, tail call               bpf_tail_call() into the DROP program
 *   PASS -> DROP, freplace dispatcher     libxdp-style dispatcher, two freplace slots
 *   8 x PASS -> DROP, kernel chain        per-hop slope over a long chain
 *
 *   xdpchain [TRIALS [REPEAT]]            defaults 9 and 200000
 *
 * Rows are measured in turn within each trial, so drift hits all of them
 * alike; each row reports the median and the minimum over the trials, and the
 * derived per-hop costs and ratios use the minimums. Output is a markdown table; exit
 * status 1 if a kernel without chain calls is found (the chain rows cannot run).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/if_ether.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#ifndef bpf_prog_chain_opts__last_field
int main(void)
{
	fprintf(stderr, "xdpchain bench: built without bpf_prog_chain_add(); run 'make kernel'\n");
	return 1;
}
#else

#define LONG_HOPS 8

enum row {
	SINGLE, SINGLE_KEY_ON, CHAIN, CHAIN_WILDCARD, TAIL_CALL, DISPATCHER, CHAIN_LONG, NR_ROWS
};

static const char *const row_names[NR_ROWS] = {
	"single DROP, no chain anywhere (key off)",
	"single DROP, another program chained (key on)",
	"PASS -> DROP, kernel chain (exact entry)",
	"PASS -> DROP, kernel chain (wildcard entry)",
	"PASS -> DROP, tail call",
	"PASS -> DROP, freplace dispatcher (2 slots)",
	"8 x PASS -> DROP, kernel chain",
};

static const int row_hops[NR_ROWS] = { 0, 0, 1, 1, 1, 1, LONG_HOPS };

static struct bpf_object *obj, *ext_obj;
static int drop_fd, drop2_fd, pass_fd, pass2_fd, tail_fd, disp_fd;
static int long_fds[LONG_HOPS];
static unsigned int repeat;

static void die(const char *what)
{
	fprintf(stderr, "xdpchain bench: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int prog_fd(struct bpf_object *o, const char *name)
{
	struct bpf_program *p = bpf_object__find_program_by_name(o, name);

	if (!p)
		die(name);
	return bpf_program__fd(p);
}

static void object_path(char *path, size_t size, const char *name)
{
	ssize_t n = readlink("/proc/self/exe", path, size - 64);
	char *slash;

	if (n < 0)
		die("/proc/self/exe");
	path[n] = 0;
	slash = strrchr(path, '/');
	snprintf(slash + 1, 64, "%s", name);
}

static int load_pass_raw(void)
{
	struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = XDP_PASS },
		{ .code = BPF_JMP | BPF_EXIT },
	};

	/* Chained programs must share the expected attach type: BPF_XDP, as
	 * libbpf gives SEC("xdp") programs.
	 */
	LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = BPF_XDP);
	int fd = bpf_prog_load(BPF_PROG_TYPE_XDP, "hop", "GPL", insns, 2, &opts);

	if (fd < 0)
		die("load hop program");
	return fd;
}

static void setup(void)
{
	char path[PATH_MAX];
	struct bpf_program *p;
	__u32 zero = 0;

	object_path(path, sizeof(path), "xdpchain.bpf.o");
	obj = bpf_object__open_file(path, NULL);
	if (!obj || bpf_object__load(obj))
		die(path);
	drop_fd = prog_fd(obj, "drop");
	drop2_fd = prog_fd(obj, "drop2");
	pass_fd = prog_fd(obj, "pass");
	pass2_fd = prog_fd(obj, "pass2");
	tail_fd = prog_fd(obj, "tail_pass");
	disp_fd = prog_fd(obj, "dispatcher");
	if (bpf_map_update_elem(bpf_object__find_map_fd_by_name(obj, "jmp"), &zero, &drop_fd,
				BPF_ANY))
		die("tail call map");

	/* The dispatcher's slots: freplace programs aimed at this dispatcher. */
	object_path(path, sizeof(path), "xdpchain_ext.bpf.o");
	ext_obj = bpf_object__open_file(path, NULL);
	if (!ext_obj)
		die(path);
	if (bpf_program__set_attach_target(bpf_object__find_program_by_name(ext_obj, "ext_pass"),
					   disp_fd, "slot0") ||
	    bpf_program__set_attach_target(bpf_object__find_program_by_name(ext_obj, "ext_drop"),
					   disp_fd, "slot1") ||
	    bpf_object__load(ext_obj))
		die("load freplace programs");
	bpf_object__for_each_program(p, ext_obj) {
		const char *slot = strcmp(bpf_program__name(p), "ext_pass") ? "slot1" : "slot0";

		if (!bpf_program__attach_freplace(p, disp_fd, slot))
			die("attach freplace");
	}

	for (int i = 0; i < LONG_HOPS; i++)
		long_fds[i] = load_pass_raw();
}

static int chain_add(int prog, __u32 retval, int next, __u32 flags)
{
	LIBBPF_OPTS(bpf_prog_chain_opts, opts, .flags = flags);
	int err = bpf_prog_chain_add(prog, retval, next, &opts);

	if (err) {
		errno = -err;
		die("BPF_PROG_CHAIN_ADD");
	}
	return 0;
}

static void chain_del(int prog, __u32 retval, __u32 flags)
{
	LIBBPF_OPTS(bpf_prog_chain_opts, opts, .flags = flags);
	int err = bpf_prog_chain_del(prog, retval, &opts);

	if (err) {
		errno = -err;
		die("BPF_PROG_CHAIN_DEL");
	}
}

/* Mean ns per run of @fd over `repeat` runs; checks the verdict. */
static double measure(int fd, const char *what)
{
	unsigned char pkt[64] = { [12] = 0x08 };	/* an IPv4 ethertype, zeros else */
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt, .data_size_in = sizeof(pkt),
		    .repeat = repeat);

	if (bpf_prog_test_run_opts(fd, &opts))
		die(what);
	if (opts.retval != XDP_DROP) {
		fprintf(stderr, "xdpchain bench: %s: verdict %u, want XDP_DROP\n", what,
			opts.retval);
		exit(1);
	}
	return opts.duration;
}

static void measure_trial(double *t)
{
	/* No entry anywhere: the key is off. */
	t[SINGLE] = measure(drop_fd, row_names[SINGLE]);
	t[TAIL_CALL] = measure(tail_fd, row_names[TAIL_CALL]);
	t[DISPATCHER] = measure(disp_fd, row_names[DISPATCHER]);

	/* An unrelated chain turns the key on for every XDP program. */
	chain_add(pass2_fd, XDP_PASS, drop2_fd, 0);
	t[SINGLE_KEY_ON] = measure(drop_fd, row_names[SINGLE_KEY_ON]);

	chain_add(pass_fd, XDP_PASS, drop_fd, 0);
	t[CHAIN] = measure(pass_fd, row_names[CHAIN]);
	chain_del(pass_fd, XDP_PASS, 0);
	chain_add(pass_fd, 0, drop_fd, BPF_F_CHAIN_WILDCARD);
	t[CHAIN_WILDCARD] = measure(pass_fd, row_names[CHAIN_WILDCARD]);
	chain_del(pass_fd, 0, BPF_F_CHAIN_WILDCARD);

	for (int i = 0; i < LONG_HOPS; i++)
		chain_add(long_fds[i], XDP_PASS, i + 1 < LONG_HOPS ? long_fds[i + 1] : drop_fd, 0);
	t[CHAIN_LONG] = measure(long_fds[0], row_names[CHAIN_LONG]);
	for (int i = 0; i < LONG_HOPS; i++)
		chain_del(long_fds[i], XDP_PASS, 0);

	chain_del(pass2_fd, XDP_PASS, 0);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int trials = argc > 1 ? atoi(argv[1]) : 9;
	double t[NR_ROWS][64], med[NR_ROWS], min[NR_ROWS], hop[NR_ROWS];
	cpu_set_t cpus;

	repeat = argc > 2 ? strtoul(argv[2], NULL, 10) : 200000;
	if (trials < 1 || trials > 64 || !repeat) {
		fprintf(stderr, "usage: xdpchain [TRIALS (1-64) [REPEAT]]\n");
		return 2;
	}
	libbpf_set_print(NULL);
	/* One CPU for the whole run: the rows compare like with like. */
	CPU_ZERO(&cpus);
	CPU_SET(0, &cpus);
	sched_setaffinity(0, sizeof(cpus), &cpus);

	setup();
	{
		struct bpf_prog_chain_entry e;
		__u32 cnt = 1;

		if (bpf_prog_chain_get(drop_fd, &e, &cnt)) {
			fprintf(stderr, "xdpchain bench: the kernel has no chain calls\n");
			return 1;
		}
	}
	{
		double warm[NR_ROWS];

		measure_trial(warm);	/* warm-up, also checks every verdict */
	}
	for (int i = 0; i < trials; i++) {
		double row[NR_ROWS];

		measure_trial(row);
		for (int r = 0; r < NR_ROWS; r++)
			t[r][i] = row[r];
		fprintf(stderr, "trial %d/%d done\n", i + 1, trials);
	}
	for (int r = 0; r < NR_ROWS; r++) {
		qsort(t[r], trials, sizeof(double), cmp_double);
		med[r] = trials % 2 ? t[r][trials / 2] : (t[r][trials / 2 - 1] + t[r][trials / 2]) / 2;
		min[r] = t[r][0];
	}
	/*
	 * Derived costs come from the minimum of each row: under emulation a
	 * trial's mean swings with host load far more than rows differ, while
	 * the minimum (the least disturbed trial) is stable between runs.
	 */
	for (int r = 0; r < NR_ROWS; r++)
		hop[r] = row_hops[r] ? (min[r] - min[SINGLE]) / row_hops[r] : 0;

	printf("%d trials of %u runs each; ns per run (per packet), median and minimum of the "
	       "trials; added costs and ratios from the minimums.\n\n", trials, repeat);
	printf("| case | hops | median ns | min ns | added ns per hop (min) | per hop vs tail call |\n");
	printf("|---|---:|---:|---:|---:|---:|\n");
	for (int r = 0; r < NR_ROWS; r++) {
		printf("| %s | %d | %.0f | %.0f |", row_names[r], row_hops[r], med[r], min[r]);
		if (row_hops[r])
			printf(" %.1f | %.2f× |\n", hop[r], hop[r] / hop[TAIL_CALL]);
		else
			printf(" %+.1f (vs key off) | |\n", min[r] - min[SINGLE]);
	}
	printf("\n");
	printf("- kernel chain hop / tail call hop: %.2f× (exact), %.2f× (wildcard), %.2f× (8-hop slope)\n",
	       hop[CHAIN] / hop[TAIL_CALL], hop[CHAIN_WILDCARD] / hop[TAIL_CALL],
	       hop[CHAIN_LONG] / hop[TAIL_CALL]);
	printf("- kernel chain hop / freplace dispatcher hop: %.2f× (exact)\n",
	       hop[CHAIN] / hop[DISPATCHER]);
	printf("- seed scale (its tail call hop = 5.3 ns): kernel chain hop = %.1f ns-equivalent, "
	       "dispatcher hop = %.1f ns-equivalent\n",
	       5.3 * hop[CHAIN] / hop[TAIL_CALL], 5.3 * hop[DISPATCHER] / hop[TAIL_CALL]);
	printf("- unchained program with the key on / key off: %.3f× (%+.1f ns, minimums)\n",
	       min[SINGLE_KEY_ON] / min[SINGLE], min[SINGLE_KEY_ON] - min[SINGLE]);
	return 0;
}
#endif
