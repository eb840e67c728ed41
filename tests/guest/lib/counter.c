// SPDX-License-Identifier: GPL-2.0
/* Loading smoke.bpf.o (call counters keyed by function address) and reading it back. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "counter.h"

struct bpf_object *counter_load(const char *path, const char *prog_name, __u32 tgid_filter,
				 struct bpf_program **prog)
{
	struct bpf_object *obj;
	struct bpf_program *p;
	struct bpf_map *rodata;
	__u32 *tgid;
	size_t sz;
	int err;

	obj = bpf_object__open_file(path, NULL);
	if (!obj) {
		fprintf(stderr, "open %s: %s\n", path, strerror(errno));
		return NULL;
	}
	bpf_object__for_each_program(p, obj)
		bpf_program__set_autoload(p, !strcmp(bpf_program__name(p), prog_name));
	*prog = bpf_object__find_program_by_name(obj, prog_name);
	rodata = bpf_object__find_map_by_name(obj, ".rodata");
	tgid = rodata ? bpf_map__initial_value(rodata, &sz) : NULL;
	if (!*prog || !tgid || sz < sizeof(*tgid)) {
		fprintf(stderr, "%s: program or .rodata missing\n", path);
		bpf_object__close(obj);
		return NULL;
	}
	*tgid = tgid_filter;
	err = bpf_object__load(obj);
	if (err) {
		fprintf(stderr, "load %s: %s\n", prog_name, strerror(-err));
		bpf_object__close(obj);
		return NULL;
	}
	return obj;
}

__u64 counter_hits(struct bpf_object *obj, unsigned long addr)
{
	int fd = bpf_map__fd(bpf_object__find_map_by_name(obj, "hits"));
	__u64 key, next, val, sum = 0;
	void *prev = NULL;

	while (!bpf_map_get_next_key(fd, prev, &next)) {
		if (next >= addr && next < addr + 16 && !bpf_map_lookup_elem(fd, &next, &val))
			sum += val;
		key = next;
		prev = &key;
	}
	return sum;
}

