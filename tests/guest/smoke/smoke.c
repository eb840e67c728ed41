// SPDX-License-Identifier: GPL-2.0
/*
 * Guest smoke tests: prove that the kernel under test runs trampoline and multi-attach BPF.
 *
 *   smoke fentry N           fentry on __x64_sys_getpgid; N calls must count exactly N
 *   smoke tracing-multi N M  upstream tracing_multi link (BPF_TRACE_FENTRY_MULTI) on at
 *                            least M functions incl. __x64_sys_getpgid; exact count N; detach
 *   smoke kprobe-multi N     kprobe.multi link with the wildcard __x64_sys_getp*; getpgid N
 *                            times and getpriority N/2 times, each counted exactly
 *
 * Exit status 0 when every check holds; each check prints "ok - ..." or "FAIL - ...".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "../lib/check.h"
#include "../lib/counter.h"
#include "../lib/funcs.h"

static char obj_path[4096];	/* smoke.bpf.o, next to this binary */

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

static int test_fentry(long n)
{
	unsigned long addr = ksym_addr("__x64_sys_getpgid");
	struct bpf_program *prog;
	struct bpf_object *obj;
	struct bpf_link *link;

	check(addr != 0, "__x64_sys_getpgid is in kallsyms");
	obj = counter_load(obj_path, "fentry_one", getpid(), &prog);
	check(obj != NULL, "fentry program loads");
	if (!obj || !addr)
		return 1;
	link = bpf_program__attach(prog);
	check(link != NULL, "fentry attaches to __x64_sys_getpgid (%s)", link ? "ok" : strerror(errno));
	if (link) {
		call_getpgid(n);
		check(counter_hits(obj, addr) == (__u64)n, "fentry counted %llu of %ld calls",
		      (unsigned long long)counter_hits(obj, addr), n);
		bpf_link__destroy(link);
		call_getpgid(3);
		check(counter_hits(obj, addr) == (__u64)n, "no counts after detach");
	}
	bpf_object__close(obj);
	return 0;
}

static int test_tracing_multi(long n, long min_funcs)
{
	static const char *const globs[] = {
		"__x64_sys_*", "vfs_*", "ext4_*", "tcp_*", "udp_*", "inet_*", "proc_*", "seq_*",
		"kernfs_*", "pipe_*", "sock_*", NULL };
	static const char *const must[] = { "__x64_sys_getpgid", NULL };
	LIBBPF_OPTS(bpf_tracing_multi_opts, opts);
	unsigned long addr = ksym_addr("__x64_sys_getpgid");
	struct bpf_link_info info = {};
	__u32 info_len = sizeof(info);
	struct bpf_program *prog;
	struct func_set set;
	struct bpf_object *obj;
	struct bpf_link *link;
	struct btf *btf;
	double t0, t1;
	int err;

	btf = btf__load_vmlinux_btf();
	check(btf != NULL, "vmlinux BTF loads");
	if (!btf)
		return 1;
	err = func_set_collect(&set, btf, globs, must, min_funcs + min_funcs / 2);
	check(!err && set.cnt >= (size_t)min_funcs, "found %zu traceable functions (need %ld)",
	      set.cnt, min_funcs);
	if (err || set.cnt < (size_t)min_funcs)
		goto out_btf;
	obj = counter_load(obj_path, "fentry_multi", getpid(), &prog);
	check(obj != NULL, "fentry.multi program loads");
	if (!obj)
		goto out_set;

	opts.ids = set.ids;
	opts.cnt = set.cnt;
	t0 = now();
	link = bpf_program__attach_tracing_multi(prog, NULL, &opts);
	t1 = now();
	check(link != NULL, "tracing_multi link on %zu functions (%s), attach %.3f s",
	      set.cnt, link ? "ok" : strerror(errno), t1 - t0);
	if (link) {
		err = bpf_link_get_info_by_fd(bpf_link__fd(link), &info, &info_len);
		check(!err && info.type == BPF_LINK_TYPE_TRACING_MULTI &&
		      info.tracing_multi.count == set.cnt,
		      "link info: type %u, %u functions", info.type, info.tracing_multi.count);
		call_getpgid(n);
		check(counter_hits(obj, addr) == (__u64)n, "tracing_multi counted %llu of %ld calls",
		      (unsigned long long)counter_hits(obj, addr), n);
		t0 = now();
		bpf_link__destroy(link);
		t1 = now();
		call_getpgid(3);
		check(counter_hits(obj, addr) == (__u64)n, "detach in %.3f s; no counts after it", t1 - t0);
	}
	bpf_object__close(obj);
out_set:
	func_set_free(&set);
out_btf:
	btf__free(btf);
	return 0;
}

static int test_kprobe_multi(long n)
{
	unsigned long pgid = ksym_addr("__x64_sys_getpgid"), prio = ksym_addr("__x64_sys_getpriority");
	struct bpf_link_info info = {};
	__u32 info_len = sizeof(info);
	struct bpf_program *prog;
	struct bpf_object *obj;
	struct bpf_link *link;
	int err;

	check(pgid && prio, "__x64_sys_getpgid and __x64_sys_getpriority are in kallsyms");
	obj = counter_load(obj_path, "kprobe_multi", getpid(), &prog);
	check(obj != NULL, "kprobe.multi program loads");
	if (!obj)
		return 1;
	link = bpf_program__attach_kprobe_multi_opts(prog, "__x64_sys_getp*", NULL);
	check(link != NULL, "kprobe.multi attaches to __x64_sys_getp* (%s)",
	      link ? "ok" : strerror(errno));
	if (link) {
		err = bpf_link_get_info_by_fd(bpf_link__fd(link), &info, &info_len);
		check(!err && info.type == BPF_LINK_TYPE_KPROBE_MULTI && info.kprobe_multi.count >= 2,
		      "link info: type %u, %u functions", info.type, info.kprobe_multi.count);
		call_getpgid(n);
		call_getpriority(n / 2);
		check(counter_hits(obj, pgid) == (__u64)n, "getpgid counted %llu of %ld",
		      (unsigned long long)counter_hits(obj, pgid), n);
		check(counter_hits(obj, prio) == (__u64)(n / 2), "getpriority counted %llu of %ld",
		      (unsigned long long)counter_hits(obj, prio), n / 2);
		bpf_link__destroy(link);
	}
	bpf_object__close(obj);
	return 0;
}

int main(int argc, char **argv)
{
	long n = argc > 2 ? atol(argv[2]) : 1000;

	if (argc < 2) {
		fprintf(stderr, "usage: %s fentry|tracing-multi|kprobe-multi [N [MIN_FUNCS]]\n", argv[0]);
		return 2;
	}
	snprintf(obj_path, sizeof(obj_path), "%s.bpf.o", argv[0]);
	libbpf_set_strict_mode(LIBBPF_STRICT_ALL);
	if (!strcmp(argv[1], "fentry"))
		test_fentry(n);
	else if (!strcmp(argv[1], "tracing-multi"))
		test_tracing_multi(n, argc > 3 ? atol(argv[3]) : 1000);
	else if (!strcmp(argv[1], "kprobe-multi"))
		test_kprobe_multi(n);
	else {
		fprintf(stderr, "unknown test %s\n", argv[1]);
		return 2;
	}
	return check_failures ? 1 : 0;
}
