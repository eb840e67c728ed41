// SPDX-License-Identifier: GPL-2.0
/*
 * Per-packet cost of running XDP programs one after another, measured with
 * BPF_PROG_TEST_RUN and `repeat` (the kernel reports the mean time per run):
 *
 *   single DROP, no chain anywhere        baseline
 *   single DROP, another program chained  an unrelated program owns a chain (and a
 *                                         slot of the XDP dispatcher): the cost for
 *                                         everyone who does not chain (target: zero)
 *   single DROP, another program attached the same with that program attached to a
 *                                         veth device instead (generic XDP): what any
 *                                         second XDP program costs without chains
 *   PASS -> DROP, kernel chain            exact entry on XDP_PASS
 *   PASS -> DROP, kernel chain wildcard   wildcard entry
 *   PASS -> DROP, tail call               bpf_tail_call() into the DROP program
 *   PASS -> DROP, freplace dispatcher     libxdp-style dispatcher, two freplace slots
 *   8 x PASS -> DROP, kernel chain        per-hop slope over a long chain
 *
 *   xdpchain [TRIALS [REPEAT]]            defaults 9 and 200000
 *   xdpchain --insn [TRIALS] [--json FILE] [--profile FILE]     (under `vm/run --insn`)
 *
 * Rows are measured in turn within each trial, so drift hits all of them
 * alike; each row reports the median and the minimum over the trials, and the
 * derived per-hop costs and ratios use the minimums. Output is a markdown table; exit
 * status 1 if a kernel without chain calls is found (the chain rows cannot run).
 *
 * --insn counts guest instructions per packet instead (vm/insn/README.md): windows of
 * INSN_K1 and INSN_K2 test runs (`repeat`), the most frequent count of each, difference
 * / (K2 - K1); a median over TRIALS (default 3) with its spread. --profile writes the
 * kernel symbols of one packet through the chain hop and the tail call next to the
 * single program's (also from the difference of two window sizes).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <net/if.h>
#include <sys/utsname.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "lib/insn.h"

#ifndef bpf_prog_chain_opts__last_field
int main(void)
{
	fprintf(stderr, "xdpchain bench: built without bpf_prog_chain_add(); run 'make kernel'\n");
	return 1;
}
#else

#define LONG_HOPS 8

enum row {
	SINGLE, SINGLE_KEY_ON, SINGLE_OTHER, CHAIN, CHAIN_WILDCARD, TAIL_CALL, DISPATCHER,
	CHAIN_LONG, NR_ROWS
};

static const char *const row_names[NR_ROWS] = {
	"single DROP, no chain anywhere",
	"single DROP, another program chained",
	"single DROP, another program attached (no chain)",
	"PASS -> DROP, kernel chain (exact entry)",
	"PASS -> DROP, kernel chain (wildcard entry)",
	"PASS -> DROP, tail call",
	"PASS -> DROP, freplace dispatcher (2 slots)",
	"8 x PASS -> DROP, kernel chain",
};

static const int row_hops[NR_ROWS] = { 0, 0, 0, 1, 1, 1, 1, LONG_HOPS };

static struct bpf_object *obj, *ext_obj;
static int drop_fd, drop2_fd, pass_fd, pass2_fd, tail_fd, disp_fd;
static int long_fds[LONG_HOPS];
static unsigned int repeat;

/* --insn: window sizes in packets; profiles of the first trial (rows that have one) */
#define INSN_K1 8
#define INSN_K2 40
#define INSN_WINDOWS 15
static int insn_mode, insn_profiling, insn_unclear;
static struct insn_prof insn_profiles[NR_ROWS];

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

/* --insn work: one test run of `reps` packets, verdict checked. */
struct xdp_work {
	int fd;
	const char *what;
};

static int run_packets(void *arg, unsigned int reps)
{
	struct xdp_work *x = arg;
	unsigned char pkt[64] = { [12] = 0x08 };
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt, .data_size_in = sizeof(pkt),
		    .repeat = reps);

	if (bpf_prog_test_run_opts(x->fd, &opts))
		return errno ? errno : -1;
	return opts.retval == XDP_DROP ? 0 : -2;
}

/* --insn: TCG dispatch per packet of each row's last trial (lookups, misses, unchained) */
static double disp[NR_ROWS][3];
static int disp_seen;

/*
 * --insn: instructions per packet of @fd (row @r: profiled on the first trial).
 *
 * A test run of more than one packet adds the program to the kernel's XDP dispatcher
 * and takes it out at the end, each change waiting for an RCU grace period: thousands
 * of instructions that differ from run to run. Attached to lo (generic XDP) while it
 * is counted, the program stays in the dispatcher and the runs leave it alone; the
 * dispatcher holds the same programs as during a timed run.
 */
static double measure_insn(int r, int fd, const char *what)
{
	struct xdp_work x = { fd, what };
	struct insn_estimate e;
	int lo = if_nametoindex("lo");

	if (!lo || bpf_xdp_attach(lo, fd, XDP_FLAGS_SKB_MODE, NULL)) {
		fprintf(stderr, "xdpchain bench: %s: attaching to lo (generic XDP) to keep it in the "
			"dispatcher: %s\n", what, strerror(errno));
		exit(1);
	}
	if (insn_per_rep(run_packets, &x, INSN_K1, INSN_K2, INSN_WINDOWS, &e)) {
		fprintf(stderr, "xdpchain bench: %s: counting instructions failed\n", what);
		exit(1);
	}
	if (!e.clear)
		insn_unclear++;
	if (e.dispatch) {
		disp[r][0] = e.lookups_per_rep;
		disp[r][1] = e.misses_per_rep;
		disp[r][2] = e.unchained_per_rep;
		disp_seen = 1;
	}
	if (insn_profiling && (r == SINGLE || r == CHAIN || r == TAIL_CALL) &&
	    !insn_profiles[r].n &&
	    insn_profile_diff(run_packets, &x, INSN_K1, INSN_K2, &insn_profiles[r]))
		fprintf(stderr, "xdpchain bench: %s: no profile\n", what);
	if (bpf_xdp_detach(lo, XDP_FLAGS_SKB_MODE, NULL)) {
		fprintf(stderr, "xdpchain bench: detaching from lo: %s\n", strerror(errno));
		exit(1);
	}
	return e.per_rep;
}

/* Mean ns per run of @fd over `repeat` runs (instructions per packet with --insn). */
static double measure_row(int r, int fd)
{
	const char *what = row_names[r];
	unsigned char pkt[64] = { [12] = 0x08 };	/* an IPv4 ethertype, zeros else */
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt, .data_size_in = sizeof(pkt),
		    .repeat = repeat);

	if (insn_mode)
		return measure_insn(r, fd, what);
	if (bpf_prog_test_run_opts(fd, &opts))
		die(what);
	if (opts.retval != XDP_DROP) {
		fprintf(stderr, "xdpchain bench: %s: verdict %u, want XDP_DROP\n", what,
			opts.retval);
		exit(1);
	}
	return opts.duration;
}

/* A veth device (created once) that holds an unrelated program, attached in
 * generic mode: it then sits in the XDP dispatcher like a chain's owner does.
 */
static const char other_dev[] = "xcbench0";

static void other_attach(int fd)
{
	int ifindex = if_nametoindex(other_dev);

	if (!ifindex) {
		if (system("ip link add xcbench0 type veth peer name xcbench1 && "
			   "ip link set xcbench0 up && ip link set xcbench1 up")) {
			fprintf(stderr, "xdpchain bench: cannot create veth %s\n", other_dev);
			exit(1);
		}
		ifindex = if_nametoindex(other_dev);
	}
	if (!ifindex || bpf_xdp_attach(ifindex, fd, XDP_FLAGS_SKB_MODE, NULL)) {
		fprintf(stderr, "xdpchain bench: attaching to %s: %s\n", other_dev, strerror(errno));
		exit(1);
	}
}

static void other_detach(void)
{
	if (bpf_xdp_detach(if_nametoindex(other_dev), XDP_FLAGS_SKB_MODE, NULL)) {
		fprintf(stderr, "xdpchain bench: detaching from %s: %s\n", other_dev, strerror(errno));
		exit(1);
	}
}

static void measure_trial(double *t)
{
	/* No entry anywhere. */
	t[SINGLE] = measure_row(SINGLE, drop_fd);
	t[TAIL_CALL] = measure_row(TAIL_CALL, tail_fd);
	t[DISPATCHER] = measure_row(DISPATCHER, disp_fd);

	/* An unrelated chain: what does everybody else pay? Its owner holds a
	 * slot of the XDP dispatcher, as does any program attached to a device.
	 */
	chain_add(pass2_fd, XDP_PASS, drop2_fd, 0);
	t[SINGLE_KEY_ON] = measure_row(SINGLE_KEY_ON, drop_fd);
	chain_del(pass2_fd, XDP_PASS, 0);
	other_attach(pass2_fd);
	t[SINGLE_OTHER] = measure_row(SINGLE_OTHER, drop_fd);
	other_detach();

	/* The chain rows hold as many programs in the dispatcher as the single,
	 * tail call and freplace rows: the owner.
	 */

	chain_add(pass_fd, XDP_PASS, drop_fd, 0);
	t[CHAIN] = measure_row(CHAIN, pass_fd);
	chain_del(pass_fd, XDP_PASS, 0);
	chain_add(pass_fd, 0, drop_fd, BPF_F_CHAIN_WILDCARD);
	t[CHAIN_WILDCARD] = measure_row(CHAIN_WILDCARD, pass_fd);
	chain_del(pass_fd, 0, BPF_F_CHAIN_WILDCARD);

	for (int i = 0; i < LONG_HOPS; i++)
		chain_add(long_fds[i], XDP_PASS, i + 1 < LONG_HOPS ? long_fds[i + 1] : drop_fd, 0);
	t[CHAIN_LONG] = measure_row(CHAIN_LONG, long_fds[0]);
	for (int i = 0; i < LONG_HOPS; i++)
		chain_del(long_fds[i], XDP_PASS, 0);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* --insn: the instruction table (Markdown on stdout), JSON and profiles. */
static int report_insn(int trials, double t[][64], const char *json, const char *profile)
{
	double med[NR_ROWS], spread[NR_ROWS], hop[NR_ROWS], v[64];
	struct utsname u;
	FILE *f;

	for (int r = 0; r < NR_ROWS; r++) {
		memcpy(v, t[r], trials * sizeof(v[0]));
		insn_median_spread(v, trials, &med[r], &spread[r]);
	}
	for (int r = 0; r < NR_ROWS; r++)
		hop[r] = row_hops[r] ? (med[r] - med[SINGLE]) / row_hops[r] : 0;
	printf("%d trials; guest instructions per packet (QEMU plugin `vm/insn`): in each trial the "
	       "most frequent count of %d windows of %d and of %d packets (one test run each), "
	       "difference / %d; median over the trials, spread = (max - min) / median.\n\n",
	       trials, INSN_WINDOWS, INSN_K1, INSN_K2, INSN_K2 - INSN_K1);
	printf("| case | hops | insns per packet | spread | added insns per hop | per hop vs tail call |\n");
	printf("|---|---:|---:|---:|---:|---:|\n");
	for (int r = 0; r < NR_ROWS; r++) {
		printf("| %s | %d | %.2f | %.2f%% |", row_names[r], row_hops[r], med[r],
		       100 * spread[r]);
		if (row_hops[r])
			printf(" %.2f | %.2f× |\n", hop[r], hop[r] / hop[TAIL_CALL]);
		else
			printf(" %+.2f (vs no chain) | |\n", med[r] - med[SINGLE]);
	}
	printf("\n- kernel chain hop / tail call hop, instructions: %.2f× (exact), %.2f× (wildcard), "
	       "%.2f× (8-hop slope)\n", hop[CHAIN] / hop[TAIL_CALL],
	       hop[CHAIN_WILDCARD] / hop[TAIL_CALL], hop[CHAIN_LONG] / hop[TAIL_CALL]);
	printf("- kernel chain hop / freplace dispatcher hop, instructions: %.2f×\n",
	       hop[CHAIN] / hop[DISPATCHER]);
	printf("- unchained program with a chain elsewhere / with none, instructions: %.4f× (%+.2f); "
	       "/ with another program attached instead: %.4f× (%+.2f)\n",
	       med[SINGLE_KEY_ON] / med[SINGLE], med[SINGLE_KEY_ON] - med[SINGLE],
	       med[SINGLE_KEY_ON] / med[SINGLE_OTHER], med[SINGLE_KEY_ON] - med[SINGLE_OTHER]);
	if (insn_unclear)
		printf("- %d measurement(s) found no clear most frequent count (interrupts in most "
		       "windows): their rows may be off\n", insn_unclear);
	if (disp_seen) {
		printf("\nTCG dispatch per packet, last trial (`vm/insn/README.md`, \"Dispatch\"): "
		       "lookups = block transitions QEMU looks up, jc misses = of those, misses of "
		       "its jump cache (a model), unchained = jumps into two-page blocks, which "
		       "QEMU takes through its main loop. They cost wall time under TCG only.\n\n");
		printf("| case | lookups | jc misses | unchained | added lookups per hop |\n");
		printf("|---|---:|---:|---:|---:|\n");
		for (int r = 0; r < NR_ROWS; r++) {
			printf("| %s | %.2f | %.2f | %.2f |", row_names[r], disp[r][0], disp[r][1],
			       disp[r][2]);
			if (row_hops[r])
				printf(" %.2f |\n", (disp[r][0] - disp[SINGLE][0]) / row_hops[r]);
			else
				printf(" |\n");
		}
	}
	uname(&u);
	if (json) {
		f = fopen(json, "w");
		if (!f) {
			perror(json);
			return -1;
		}
		fprintf(f, "{\"kernel\": \"%s\", \"unit\": \"instructions per packet\", "
			"\"windows\": %d, \"batch_packets\": [%d, %d], \"rows\": [\n", u.release,
			INSN_WINDOWS, INSN_K1, INSN_K2);
		for (int r = 0; r < NR_ROWS; r++) {
			fprintf(f, "%s  {\"name\": \"%s\", \"hops\": %d, \"insns_per_packet\": %.4f, "
				"\"spread\": %.6f, \"added_per_hop\": %.4f, \"runs\": [", r ? ",\n" : "",
				row_names[r], row_hops[r], med[r], spread[r], hop[r]);
			for (int i = 0; i < trials; i++)
				fprintf(f, "%s%.4f", i ? ", " : "", t[r][i]);
			fprintf(f, "]}");
		}
		fprintf(f, "\n]}\n");
		if (fclose(f))
			return -1;
	}
	if (profile) {
		f = fopen(profile, "w");
		if (!f) {
			perror(profile);
			return -1;
		}
		fprintf(f, "# XDP: instructions per packet by kernel symbol: %s\n\n"
			"One packet's instructions by `/proc/kallsyms` symbol: the profile of an "
			"undisturbed window of %d packets (one BPF_PROG_TEST_RUN) minus one of %d "
			"packets, divided by %d (`bench/xdpchain/xdpchain --insn --profile`, QEMU plugin "
			"`vm/insn`), next to the same for the single DROP program: the difference is "
			"what the hop adds. Emulated guest: exact counts for this kernel build.\n",
			u.release, INSN_K2, INSN_K1, INSN_K2 - INSN_K1);
		for (int r = CHAIN; r <= TAIL_CALL; r += TAIL_CALL - CHAIN) {
			fprintf(f, "\n## %s\n\n", row_names[r]);
			if (!insn_profiles[r].n || !insn_profiles[SINGLE].n) {
				fprintf(f, "no profile (an undisturbed window was not found; see the "
					"run's log)\n");
				continue;
			}
			insn_prof_print(f, &insn_profiles[r], INSN_K2 - INSN_K1, "insns/packet",
					&insn_profiles[SINGLE], INSN_K2 - INSN_K1, "single DROP", 30);
		}
		if (fclose(f))
			return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int trials = 0;
	const char *json = NULL, *profile = NULL;
	double t[NR_ROWS][64], med[NR_ROWS], min[NR_ROWS], hop[NR_ROWS];
	cpu_set_t cpus;

	for (int i = 1, pos = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--insn"))
			insn_mode = 1;
		else if (!strcmp(argv[i], "--json") && i + 1 < argc)
			json = argv[++i];
		else if (!strcmp(argv[i], "--profile") && i + 1 < argc)
			profile = argv[++i];
		else if (argv[i][0] == '-')
			trials = -1;
		else if (pos++ == 0)
			trials = atoi(argv[i]);
		else
			repeat = strtoul(argv[i], NULL, 10);
	}
	if (!trials)
		trials = insn_mode ? 3 : 9;
	if (!repeat)
		repeat = 200000;
	if (trials < 1 || trials > 64 || ((json || profile) && !insn_mode)) {
		fprintf(stderr, "usage: xdpchain [TRIALS (1-64) [REPEAT]]\n"
			"       xdpchain --insn [TRIALS] [--json FILE] [--profile FILE]\n");
		return 2;
	}
	libbpf_set_print(NULL);
	/* One CPU for the whole run: the rows compare like with like. */
	CPU_ZERO(&cpus);
	CPU_SET(0, &cpus);
	sched_setaffinity(0, sizeof(cpus), &cpus);
	if (insn_mode && insn_open())
		return 1;

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
	insn_profiling = !!profile;
	for (int i = 0; i < trials; i++) {
		double row[NR_ROWS];

		measure_trial(row);
		for (int r = 0; r < NR_ROWS; r++)
			t[r][i] = row[r];
		fprintf(stderr, "trial %d/%d done\n", i + 1, trials);
	}
	if (insn_mode)
		return report_insn(trials, t, json, profile) ? 1 : 0;
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
			printf(" %+.1f (vs no chain) | |\n", min[r] - min[SINGLE]);
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
	printf("- unchained program with a chain elsewhere / with none: %.3f× (%+.1f ns, minimums); "
	       "/ with another program attached instead: %.3f× (%+.1f ns)\n",
	       min[SINGLE_KEY_ON] / min[SINGLE], min[SINGLE_KEY_ON] - min[SINGLE],
	       min[SINGLE_KEY_ON] / min[SINGLE_OTHER], min[SINGLE_KEY_ON] - min[SINGLE_OTHER]);
	return 0;
}
#endif
