// SPDX-License-Identifier: GPL-2.0
/*
 * multi-top GLOB... SECONDS: one fentry.multi program on every safe vmlinux function that
 * matches the globs, through one upstream tracing_multi link, while a small file-system
 * workload runs; prints the busiest functions each second. The stand-in for
 * 'bpfmux trace' until the toolkit has it: it shows the guest loop end to end.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "../lib/counter.h"
#include "../lib/funcs.h"

struct row {
	const char *name;
	__u64 total, last;
};

static int by_delta(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	__u64 dx = x->total - x->last, dy = y->total - y->last;

	return dx < dy ? 1 : dx > dy ? -1 : strcmp(x->name, y->name);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	LIBBPF_OPTS(bpf_tracing_multi_opts, opts);
	char path[4096], *slash;
	const char **globs;
	struct bpf_program *prog;
	struct bpf_object *obj;
	struct bpf_link *link;
	unsigned long *addrs;
	struct func_set set;
	struct row *rows;
	struct btf *btf;
	int seconds, err;
	pid_t load;
	double t0;

	if (argc < 3) {
		fprintf(stderr, "usage: %s GLOB... SECONDS\nexample: %s 'vfs_*' '__x64_sys_*' 5\n",
			argv[0], argv[0]);
		return 2;
	}
	seconds = atoi(argv[argc - 1]);
	globs = calloc(argc - 1, sizeof(*globs));
	for (int i = 1; i < argc - 1; i++)
		globs[i - 1] = argv[i];

	btf = btf__load_vmlinux_btf();
	if (!btf) {
		perror("vmlinux BTF");
		return 1;
	}
	err = func_set_collect(&set, btf, globs, NULL, 1 << 20);
	if (err || !set.cnt) {
		fprintf(stderr, "no traceable function matches\n");
		return 1;
	}
	snprintf(path, sizeof(path), "%s", argv[0]);
	slash = strrchr(path, '/');
	snprintf(slash ? slash + 1 : path, sizeof(path) - (slash ? slash + 1 - path : 0), "smoke.bpf.o");
	obj = counter_load(path, "fentry_multi", 0, &prog);
	if (!obj)
		return 1;

	opts.ids = set.ids;
	opts.cnt = set.cnt;
	t0 = now();
	link = bpf_program__attach_tracing_multi(prog, NULL, &opts);
	if (!link) {
		fprintf(stderr, "tracing_multi attach failed: %s\n", strerror(errno));
		return 1;
	}
	printf("one program, one tracing_multi link: %zu functions attached in %.3f s\n",
	       set.cnt, now() - t0);

	addrs = calloc(set.cnt, sizeof(*addrs));
	rows = calloc(set.cnt, sizeof(*rows));
	for (size_t i = 0; i < set.cnt; i++) {
		addrs[i] = ksym_addr(set.names[i]);
		rows[i].name = set.names[i];
	}

	load = fork();
	if (load == 0) {
		for (;;)
			if (system("ls -lR /usr/share/doc >/dev/null 2>&1; cat /proc/self/status >/dev/null"))
				_exit(1);
	}
	for (int s = 1; s <= seconds; s++) {
		sleep(1);
		for (size_t i = 0; i < set.cnt; i++) {
			rows[i].last = rows[i].total;
			rows[i].total = counter_hits(obj, addrs[i]);
		}
		qsort(rows, set.cnt, sizeof(*rows), by_delta);
		printf("\n[%ds] %-40s %12s %12s\n", s, "function", "calls/s", "total");
		for (size_t i = 0; i < set.cnt && i < 10; i++)
			printf("     %-40s %12llu %12llu\n", rows[i].name,
			       (unsigned long long)(rows[i].total - rows[i].last),
			       (unsigned long long)rows[i].total);
		fflush(stdout);
	}
	kill(load, SIGKILL);
	waitpid(load, NULL, 0);
	t0 = now();
	bpf_link__destroy(link);
	printf("\ndetached %zu functions in %.3f s\n", set.cnt, now() - t0);
	bpf_object__close(obj);
	func_set_free(&set);
	btf__free(btf);
	return 0;
}
