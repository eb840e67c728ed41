// SPDX-License-Identifier: GPL-2.0
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "lib/counter.h"
#include "lib/kmod.h"

int main(int argc, char **argv)
{
	const char *kind = argc > 1 ? argv[1] : "fsession";
	const char *obj = !strcmp(kind, "fentry") ? "build/guest/gtramp.bpf.o" : "build/guest/gexit.bpf.o";
	const char *pname = !strcmp(kind, "fexit") ? "fexit_multi" : !strcmp(kind, "fmod_ret") ? "fmodret_multi" : !strcmp(kind, "fentry") ? "fentry_multi" : "session_multi";
	__u32 flags = argc > 2 && !strcmp(argv[2], "global") ? BPF_F_TRACING_MULTI_GLOBAL : 0;
	struct btf *btf = btf__load_vmlinux_btf();
	__u32 id = btf__find_by_name_kind(btf, "__x64_sys_getpgid", BTF_KIND_FUNC);
	struct bpf_program *prog;
	struct bpf_object *o = counter_load(obj, pname, getpid(), &prog);
	char params[32];
	int err;

	snprintf(params, sizeof(params), "tgid=%d", getpid());
	err = kmod_insert("build/guest/gtramp_kmod.ko", params);
	printf("module load: %s\n", err ? strerror(err) : "ok");
	for (int i = 0; i < 3; i++) {
		LIBBPF_OPTS(bpf_link_create_opts, opts, .flags = flags,
			    .tracing_multi = { .ids = &id, .cnt = 1 });
		int fd = bpf_link_create(bpf_program__fd(prog), 0, bpf_program__expected_attach_type(prog), &opts);
		printf("%s.multi %s on __x64_sys_getpgid, try %d: %s; getpgid() = %ld\n", kind,
		       flags ? "global" : "per-function", i + 1, fd < 0 ? strerrorname_np(errno) : "attached",
		       syscall(SYS_getpgid, 0));
		if (fd >= 0)
			close(fd);
	}
	err = kmod_remove("gtramp_kmod");
	printf("module unload: %s\n", err ? strerror(err) : "ok");
	bpf_object__close(o);
	return 0;
}
