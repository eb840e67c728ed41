// SPDX-License-Identifier: GPL-2.0
/*
 * Per-packet cost of chaining two XDP programs (PASS -> DROP), measured with
 * BPF_PROG_TEST_RUN and `repeat` on one 64-byte packet, all rows in one run
 * so they can be compared as ratios (the guest is emulated):
 *
 *   baseline      one XDP_DROP program
 *   dispatcher    bpfmux's freplace dispatcher (`bpfmux xdp attach lo PASS DROP`)
 *   tail call     PASS program that tail-calls the DROP program
 *   libxdp        libxdp's dispatcher (on a veth it creates), if libxdp.so.1 loads
 *   bpfmux libxdp `bpfmux xdp attach --engine libxdp` (libxdp's dispatcher, made
 *                 through libxdp by bpfmux; on a veth)
 *   kernel chain  the series' BPF_PROG_CHAIN_ADD, PASS entry and wildcard entry,
 *                 if the kernel has the command
 *
 * usage: xdp-bench BPFMUX OBJ [TRIALS REPEAT]
 * Prints a markdown table; rows that cannot run say why. Every measured row
 * first checks that its chain returns XDP_DROP (the second program ran).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/if_link.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#define MAX_ROWS 8
/* Series UAPI (kernel/README.md, crates/bpfmux/src/sys/chain.rs) */
#define BPF_PROG_CHAIN_ADD 39
#define BPF_PROG_CHAIN_GET 41
#define BPF_F_CHAIN_WILDCARD 1

struct chain_attr {
	__u32 prog_fd;
	__u32 retval;
	__u32 next_prog_fd;
	__u32 flags;
};

struct row {
	const char *name;
	int fd;			/* program to run, -1: not available */
	char why[200];		/* why not available */
	double samples[64];
	int n;
};

static struct row rows[MAX_ROWS];
static int nr_rows;
static unsigned char pkt[64];	/* zeroed Ethernet frame: no program parses it */

static struct row *add_row(const char *name)
{
	struct row *r = &rows[nr_rows++];

	r->name = name;
	r->fd = -1;
	return r;
}

/*
 * One test run of `repeat` packets: mean ns per packet as the kernel timed it, or -1.
 * The kernel's timer stops while the test is rescheduled, so time the (busy, shared)
 * machine gives to others does not count; wall time would.
 */
static double run_once(int fd, unsigned int repeat, __u32 *retval)
{
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = pkt, .data_size_in = sizeof(pkt),
		    .repeat = repeat);

	if (bpf_prog_test_run_opts(fd, &o))
		return -1;
	*retval = o.retval;
	return o.duration;
}

/* Checks the chain's verdict once; disables the row if it is not DROP. */
static void validate(struct row *r)
{
	__u32 ret = 0;

	if (r->fd < 0)
		return;
	if (run_once(r->fd, 1, &ret) < 0) {
		snprintf(r->why, sizeof(r->why), "test run failed: %s", strerror(errno));
		r->fd = -1;
	} else if (ret != XDP_DROP) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);

		bpf_prog_get_info_by_fd(r->fd, &info, &len);
		snprintf(r->why, sizeof(r->why),
			 "program %u (%s) returned %u, not XDP_DROP: the chain did not run", info.id,
			 info.name, ret);
		r->fd = -1;
	}
}

static int load_prog(const char *obj_path, const char *name, struct bpf_object **objp)
{
	struct bpf_object *obj = bpf_object__open_file(obj_path, NULL);
	struct bpf_program *p;

	if (!obj)
		return -1;
	bpf_object__for_each_program(p, obj)
		bpf_program__set_autoload(p, !strcmp(bpf_program__name(p), name));
	if (bpf_object__load(obj)) {
		bpf_object__close(obj);
		return -1;
	}
	*objp = obj;
	return bpf_program__fd(bpf_object__find_program_by_name(obj, name));
}

static int xdp_prog_on(int ifindex)
{
	__u32 id = 0;

	if (bpf_xdp_query_id(ifindex, 0, &id) || !id)
		return -1;
	return bpf_prog_get_fd_by_id(id);
}

/* bpfmux xdp attach IFACE PASS DROP --engine ENGINE in generic mode, like the other rows'
 * attachments; the row runs what IFACE then runs */
static void setup_dispatcher(struct row *r, const char *bpfmux, const char *obj,
			     const char *iface, const char *engine)
{
	char cmd[4096];

	snprintf(cmd, sizeof(cmd),
		 "%s xdp attach %s %s:bench_pass %s:bench_drop --engine %s --mode generic >/dev/null",
		 bpfmux, iface, obj, obj, engine);
	if (system(cmd)) {
		snprintf(r->why, sizeof(r->why), "bpfmux xdp attach --engine %s failed", engine);
		return;
	}
	r->fd = xdp_prog_on(if_nametoindex(iface));
	if (r->fd < 0)
		snprintf(r->why, sizeof(r->why), "no XDP program on %s after attach", iface);
}

static void setup_tail_call(struct row *r, const char *obj_path)
{
	struct bpf_object *obj = bpf_object__open_file(obj_path, NULL);
	struct bpf_program *p;
	__u32 key = 0;
	int drop, map;

	if (!obj || bpf_object__load(obj)) {
		snprintf(r->why, sizeof(r->why), "load %s: %s", obj_path, strerror(errno));
		return;
	}
	drop = bpf_program__fd(bpf_object__find_program_by_name(obj, "bench_drop"));
	map = bpf_map__fd(bpf_object__find_map_by_name(obj, "bench_jmp"));
	if (bpf_map_update_elem(map, &key, &drop, BPF_ANY)) {
		snprintf(r->why, sizeof(r->why), "prog array update: %s", strerror(errno));
		return;
	}
	p = bpf_object__find_program_by_name(obj, "bench_tail_pass");
	r->fd = bpf_program__fd(p);
}

/* libxdp, loaded at run time: its libbpf (the system's) stays apart from ours. */
struct libxdp_opts {	/* struct xdp_program_opts of libxdp 1.2+ */
	size_t sz;
	void *obj;
	void *opts;
	const char *prog_name;
	const char *find_filename;
	const char *open_filename;
	const char *pin_path;
	__u32 id;
	int fd;
};

static void *libxdp_mp;
static int (*libxdp_mp_detach)(void *mp);

static void setup_libxdp(struct row *r, const char *obj, int ifindex)
{
	void *(*create)(struct libxdp_opts *);
	long (*get_error)(const void *);
	int (*set_prio)(void *, unsigned int);
	int (*attach_multi)(void **, size_t, int, int, unsigned int);
	void *(*mp_get)(int);
	void *(*mp_main)(const void *);
	int (*prog_fd)(const void *);
	void *h = dlopen("libxdp.so.1", RTLD_NOW | RTLD_LOCAL);
	void *progs[2];
	const char *names[2] = { "bench_pass", "bench_drop" };
	int err;

	if (!h) {
		snprintf(r->why, sizeof(r->why), "libxdp not available (%s)", dlerror());
		return;
	}
	create = dlsym(h, "xdp_program__create");
	get_error = dlsym(h, "libxdp_get_error");
	set_prio = dlsym(h, "xdp_program__set_run_prio");
	attach_multi = dlsym(h, "xdp_program__attach_multi");
	mp_get = dlsym(h, "xdp_multiprog__get_from_ifindex");
	mp_main = dlsym(h, "xdp_multiprog__main_prog");
	prog_fd = dlsym(h, "xdp_program__fd");
	libxdp_mp_detach = dlsym(h, "xdp_multiprog__detach");
	if (!create || !get_error || !set_prio || !attach_multi || !mp_get || !mp_main ||
	    !prog_fd || !libxdp_mp_detach) {
		snprintf(r->why, sizeof(r->why), "libxdp.so.1 lacks xdp_program__create (needs 1.2+)");
		return;
	}
	for (int i = 0; i < 2; i++) {
		struct libxdp_opts o = { .sz = sizeof(o), .prog_name = names[i], .open_filename = obj };

		progs[i] = create(&o);
		if (get_error(progs[i])) {
			snprintf(r->why, sizeof(r->why), "libxdp open %s: error %ld", names[i],
				 get_error(progs[i]));
			return;
		}
		set_prio(progs[i], 10 + i);	/* PASS first; libxdp chains on PASS by default */
	}
	err = attach_multi(progs, 2, ifindex, 2 /* XDP_MODE_SKB */, 0);
	if (err) {
		snprintf(r->why, sizeof(r->why), "libxdp attach: %s", strerror(-err));
		return;
	}
	libxdp_mp = mp_get(ifindex);
	if (get_error(libxdp_mp)) {
		snprintf(r->why, sizeof(r->why), "libxdp multiprog lookup failed");
		libxdp_mp = NULL;
		return;
	}
	/* our own descriptor keeps the dispatcher alive after libxdp detaches it */
	r->fd = dup(prog_fd(mp_main(libxdp_mp)));
}

static long chain_cmd(int cmd, int prog, __u32 retval, int next, __u32 flags)
{
	struct chain_attr a = { .prog_fd = prog, .retval = retval, .next_prog_fd = next,
				.flags = flags };

	return syscall(__NR_bpf, cmd, &a, sizeof(a));
}

/* Kernel chain calls: PASS entry (wildcard = false) or wildcard entry. */
static void setup_kernel_chain(struct row *r, const char *obj, bool wildcard)
{
	struct bpf_object *o1, *o2;
	int pass = load_prog(obj, "bench_pass", &o1);
	int drop = load_prog(obj, "bench_drop", &o2);

	if (pass < 0 || drop < 0) {
		snprintf(r->why, sizeof(r->why), "load: %s", strerror(errno));
		return;
	}
	if (chain_cmd(BPF_PROG_CHAIN_GET, pass, XDP_PASS, 0, 0) && errno == EINVAL) {
		snprintf(r->why, sizeof(r->why), "not available on this kernel");
		return;
	}
	if (chain_cmd(BPF_PROG_CHAIN_ADD, pass, XDP_PASS, drop,
		      wildcard ? BPF_F_CHAIN_WILDCARD : 0)) {
		snprintf(r->why, sizeof(r->why), "BPF_PROG_CHAIN_ADD: %s", strerror(errno));
		return;
	}
	r->fd = pass;
}

/*
 * Attaches a row's program to a veth of its own. The kernel's XDP bpf_dispatcher turns
 * the call into a direct jump only for programs attached to an interface (the others
 * get an indirect call, which costs far more in an emulated guest), so every row is
 * attached somewhere: the two dispatchers are, by construction.
 */
static int nr_veths;

static void attach_to_veth(struct row *r)
{
	char cmd[256], name[IFNAMSIZ];
	int ifindex, err;

	if (r->fd < 0)
		return;
	snprintf(name, sizeof(name), "xbench%d", 2 + 2 * nr_veths++);
	snprintf(cmd, sizeof(cmd), "ip link add %s type veth peer name %sp && ip link set %s up",
		 name, name, name);
	ifindex = system(cmd) ? 0 : if_nametoindex(name);
	err = ifindex ? bpf_xdp_attach(ifindex, r->fd, XDP_FLAGS_SKB_MODE, NULL) : -ENODEV;
	if (err) {
		snprintf(r->why, sizeof(r->why), "attach to %s: %s", name, strerror(-err));
		r->fd = -1;
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(struct row *r)
{
	qsort(r->samples, r->n, sizeof(double), cmp_double);
	return r->n % 2 ? r->samples[r->n / 2]
			: (r->samples[r->n / 2 - 1] + r->samples[r->n / 2]) / 2;
}

int main(int argc, char **argv)
{
	const char *bpfmux, *obj;
	int trials = 21, lo;
	unsigned int repeat = 50000;
	struct bpf_object *base_obj;
	struct row *base, *disp, *tail, *xdp, *bxdp, *kc, *kcw;
	char cmd[4096];

	if (argc != 3 && argc != 5) {
		fprintf(stderr, "usage: xdp-bench BPFMUX OBJ [TRIALS REPEAT]\n");
		return 2;
	}
	bpfmux = argv[1];
	obj = argv[2];
	if (argc == 5) {
		trials = atoi(argv[3]);
		repeat = atoi(argv[4]);
	}
	if (trials < 1 || trials > 64 || repeat < 1) {
		fprintf(stderr, "xdp-bench: TRIALS 1-64, REPEAT >= 1\n");
		return 2;
	}
	lo = if_nametoindex("lo");
	if (!lo) {
		perror("lo");
		return 1;
	}
	pkt[12] = 0x08;	/* EtherType IPv4, for realism only */

	base = add_row("single XDP_DROP program (baseline)");
	disp = add_row("PASS -> DROP, bpfmux freplace dispatcher");
	tail = add_row("PASS -> DROP, plain tail call");
	xdp = add_row("PASS -> DROP, libxdp dispatcher");
	bxdp = add_row("PASS -> DROP, libxdp dispatcher made by bpfmux --engine libxdp");
	kc = add_row("PASS -> DROP, kernel chain (PASS entry)");
	kcw = add_row("PASS -> DROP, kernel chain (wildcard entry)");

	base->fd = load_prog(obj, "bench_drop", &base_obj);
	if (base->fd < 0)
		snprintf(base->why, sizeof(base->why), "load bench_drop: %s", strerror(errno));
	/* Both dispatchers stay attached while measured: detaching drops their freplace
	 * links and the slots fall back to their stubs. bpfmux takes lo, libxdp a veth. */
	setup_dispatcher(disp, bpfmux, obj, "lo", "dispatcher");
	setup_tail_call(tail, obj);
	if (system("[ -d /sys/module/veth ] || modprobe veth 2>/dev/null; "
		   "ip link add xbench0 type veth peer name xbench1 && ip link set xbench0 up"))
		snprintf(xdp->why, sizeof(xdp->why), "cannot create a veth for libxdp");
	else
		setup_libxdp(xdp, obj, if_nametoindex("xbench0"));
	if (system("ip link add xblx0 type veth peer name xblx1 && ip link set xblx0 up"))
		snprintf(bxdp->why, sizeof(bxdp->why), "cannot create a veth for bpfmux --engine libxdp");
	else
		setup_dispatcher(bxdp, bpfmux, obj, "xblx0", "libxdp");
	setup_kernel_chain(kc, obj, false);
	setup_kernel_chain(kcw, obj, true);
	attach_to_veth(base);
	attach_to_veth(tail);
	attach_to_veth(kc);
	attach_to_veth(kcw);
	for (int i = 0; i < nr_rows; i++)
		validate(&rows[i]);

	/* one untimed round first (translation, caches), then round robin, so slow drift
	 * of the emulated machine hits every row alike */
	for (int i = 0; i < nr_rows; i++) {
		__u32 ret;

		if (rows[i].fd >= 0)
			run_once(rows[i].fd, repeat, &ret);
	}
	for (int t = 0; t < trials; t++) {
		for (int i = 0; i < nr_rows; i++) {
			struct row *r = &rows[i];
			__u32 ret;
			double ns;

			if (r->fd < 0)
				continue;
			ns = run_once(r->fd, repeat, &ret);
			if (ns < 0) {
				snprintf(r->why, sizeof(r->why), "test run failed: %s", strerror(errno));
				r->fd = -1;
				continue;
			}
			r->samples[r->n++] = ns;
		}
	}

	printf("| case | ns/packet (median of %d x %u) | added per hop, ns | ratio to baseline | ratio to tail call |\n",
	       trials, repeat);
	printf("|---|---:|---:|---:|---:|\n");
	/* clean up the two attachments */
	if (libxdp_mp && libxdp_mp_detach(libxdp_mp))
		fprintf(stderr, "xdp-bench: libxdp detach failed\n");
	for (int i = 0; i <= nr_veths; i++) {	/* xbench0 (libxdp), xbench2, 4, ... */
		snprintf(cmd, sizeof(cmd), "ip link del xbench%d 2>/dev/null", 2 * i);
		if (system(cmd))
			fprintf(stderr, "xdp-bench: could not delete xbench%d\n", 2 * i);
	}
	snprintf(cmd, sizeof(cmd), "%s xdp detach lo >/dev/null", bpfmux);
	if (disp->n && system(cmd))
		fprintf(stderr, "xdp-bench: bpfmux xdp detach lo failed\n");
	snprintf(cmd, sizeof(cmd), "%s xdp detach xblx0 >/dev/null", bpfmux);
	if (bxdp->n && system(cmd))
		fprintf(stderr, "xdp-bench: bpfmux xdp detach xblx0 failed\n");
	if (system("ip link del xblx0 2>/dev/null"))
		fprintf(stderr, "xdp-bench: could not delete xblx0\n");

	double b = base->n ? median(base) : 0, tc = tail->n ? median(tail) : 0;

	for (int i = 0; i < nr_rows; i++) {
		struct row *r = &rows[i];
		char added[32] = "", vs_tail[32] = "";
		double m;

		if (!r->n) {
			printf("| %s | %s | | | |\n", r->name, r->why[0] ? r->why : "not run");
			continue;
		}
		m = median(r);
		if (r != base)
			snprintf(added, sizeof(added), "%+.1f", m - b);
		if (r != base && r != tail && tc)
			snprintf(vs_tail, sizeof(vs_tail), "%.2fx", m / tc);
		printf("| %s | %.1f | %s | %.2fx | %s |\n", r->name, m, added, b ? m / b : 0.0,
		       vs_tail);
	}
	return 0;
}
