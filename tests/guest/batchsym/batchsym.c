// SPDX-License-Identifier: GPL-2.0
/*
 * Guest test of kprobe.multi attach by name: the kernel's ftrace_lookup_symbols() must
 * resolve every request exactly as the linear kallsyms scan does (see ksym_model.h) and
 * fail with the same errno for missing, untraceable and repeated names. Run unchanged on
 * a kernel with the batch lookup and on stock 7.3, it shows both behave the same.
 *
 *   batchsym [--require CLASS]...
 *
 * Kinds of names (CLASS) it draws from, besides plain unique functions:
 *   dup                 several vmlinux symbols share the name; the first one is traceable
 *   dup-skip            several vmlinux symbols share the name; the first is not traceable
 *   module              only modules have the name
 *   module-shadow       vmlinux has the name but not traceable, a module has it traceable
 *   module-and-vmlinux  vmlinux and a module both have it traceable (vmlinux wins)
 * A kind the kernel does not offer is reported and left out, unless --require names it:
 * then the run fails. Names on the kprobe blacklist are never attached.
 *
 * Each request goes straight to BPF_LINK_CREATE (libbpf would rewrite ESRCH), with cookie
 * i+1 on name i, so bpf_link_info pairs every resolved address with its name.
 * Prints "ok - ..." or "FAIL - ..." per check; exit status 0 when every check holds.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "ksym_model.h"
#include "lib/check.h"

enum name_class {
	NC_UNIQUE,
	NC_DUP,
	NC_DUP_SKIP,
	NC_MODULE,
	NC_MODULE_SHADOW,
	NC_MODULE_VMLINUX,
	NC_UNTRACEABLE,
	NC_COUNT,
};

static const char *const class_names[NC_COUNT] = {
	"unique", "dup", "dup-skip", "module", "module-shadow", "module-and-vmlinux", "untraceable",
};

struct name_list {
	const char **v;
	size_t cnt;
};

static struct ksym_model model;
static struct name_list classes[NC_COUNT];
static int prog_fd;

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	if (!p) {
		perror("calloc");
		exit(1);
	}
	return p;
}

static void list_add(struct name_list *l, const char *name)
{
	/* Lists only grow to the number of distinct names, so one allocation each. */
	if (!l->v)
		l->v = xcalloc(model.cnt, sizeof(*l->v));
	l->v[l->cnt++] = name;
}

/* Sort every distinct kallsyms name into the class its lookup exercises. */
static void classify(void)
{
	size_t i = 0;

	while (i < model.cnt) {
		const struct ksym *first = model.by_name[i], *r;
		size_t j = i, in_vmlinux = 0, in_modules = 0;

		for (; j < model.cnt && !strcmp(model.by_name[j]->name, first->name); j++) {
			if (model.by_name[j]->mod)
				in_modules++;
			else
				in_vmlinux++;
		}
		i = j;
		if (ksym_blacklisted(&model, first->name))
			continue;
		r = ksym_resolve(&model, first->name);
		if (!r) {
			if (in_vmlinux == 1 && !in_modules && (first->type == 't' || first->type == 'T'))
				list_add(&classes[NC_UNTRACEABLE], first->name);
		} else if (r->mod) {
			list_add(&classes[in_vmlinux ? NC_MODULE_SHADOW : NC_MODULE], first->name);
		} else if (in_modules) {
			list_add(&classes[NC_MODULE_VMLINUX], first->name);
		} else if (in_vmlinux > 1) {
			list_add(&classes[r == first ? NC_DUP : NC_DUP_SKIP], first->name);
		} else {
			list_add(&classes[NC_UNIQUE], first->name);
		}
	}
}

/* Deterministic shuffle, so a run can be repeated name for name. */
static void shuffle(struct name_list *l, unsigned long seed)
{
	for (size_t i = l->cnt; i > 1; i--) {
		size_t k;
		const char *t;

		seed = seed * 6364136223846793005UL + 1442695040888963407UL;
		k = (seed >> 33) % i;
		t = l->v[i - 1];
		l->v[i - 1] = l->v[k];
		l->v[k] = t;
	}
}

/*
 * BPF_LINK_CREATE by name; on success @got[i] is the address the kernel chose for
 * @names[i] (through the cookie) and the link is closed again. Returns 0 or -errno.
 */
static int attach_names(const char **names, size_t cnt, unsigned long *got)
{
	LIBBPF_OPTS(bpf_link_create_opts, opts);
	__u64 *cookies = xcalloc(cnt, sizeof(*cookies));
	__u64 *info_addrs = xcalloc(cnt, sizeof(*info_addrs));
	__u64 *info_cookies = xcalloc(cnt, sizeof(*info_cookies));
	struct bpf_link_info info = {};
	__u32 info_len = sizeof(info);
	int fd, err = 0;

	for (size_t i = 0; i < cnt; i++)
		cookies[i] = i + 1;
	opts.kprobe_multi.syms = names;
	opts.kprobe_multi.cnt = cnt;
	opts.kprobe_multi.cookies = cookies;
	fd = bpf_link_create(prog_fd, 0, BPF_TRACE_KPROBE_MULTI, &opts);
	if (fd < 0) {
		err = -errno;
		goto out;
	}
	info.kprobe_multi.addrs = (unsigned long)info_addrs;
	info.kprobe_multi.cookies = (unsigned long)info_cookies;
	info.kprobe_multi.count = cnt;
	if (bpf_link_get_info_by_fd(fd, &info, &info_len)) {
		err = -errno;
		fprintf(stderr, "bpf_link_get_info_by_fd: %s\n", strerror(errno));
	} else if (info.kprobe_multi.count != cnt) {
		fprintf(stderr, "link reports %u functions, asked for %zu\n",
			info.kprobe_multi.count, cnt);
		err = -EPROTO;
	}
	for (size_t i = 0; !err && i < cnt; i++) {
		if (info_cookies[i] < 1 || info_cookies[i] > cnt) {
			fprintf(stderr, "link reports cookie %llu\n", (unsigned long long)info_cookies[i]);
			err = -EPROTO;
			break;
		}
		got[info_cookies[i] - 1] = info_addrs[i];
	}
	close(fd);
out:
	free(cookies);
	free(info_addrs);
	free(info_cookies);
	return err;
}

static const char *errname(int err)
{
	static char buf[32];

	switch (-err) {
	case 0: return "success";
	case ESRCH: return "ESRCH";
	case ENOENT: return "ENOENT";
	case EINVAL: return "EINVAL";
	case E2BIG: return "E2BIG";
	case ENOMEM: return "ENOMEM";
	case EPROTO: return "EPROTO (bad link info)";
	}
	snprintf(buf, sizeof(buf), "errno %d", -err);
	return buf;
}

/*
 * The kernel refused a batch the model resolves (or the reverse): halve it while one half
 * alone still disagrees, and print the names it comes down to (a name alone takes the
 * kernel's cnt == 1 path, so stop at two).
 */
static void narrow_disagreement(const char **names, size_t cnt)
{
	unsigned long *want = xcalloc(cnt, sizeof(*want)), *got = xcalloc(cnt, sizeof(*got));

	while (cnt > 2) {
		size_t half = cnt / 2;
		int moved = 0;

		for (int h = 0; h < 2 && !moved; h++) {
			const char **part = names + (h ? half : 0);
			size_t n = h ? cnt - half : half;

			if (ksym_expect(&model, part, n, want) != attach_names(part, n, got)) {
				names = part;
				cnt = n;
				moved = 1;
			}
		}
		if (!moved)
			break;
	}
	fprintf(stderr, "  the disagreement comes down to %zu names:", cnt);
	for (size_t i = 0; i < cnt && i < 8; i++)
		fprintf(stderr, " %s", names[i]);
	fprintf(stderr, "%s\n", cnt > 8 ? " ..." : "");
	free(want);
	free(got);
}

/* One request: the kernel's answer must equal the linear-scan model's, name for name. */
static void expect_same(const char *what, const char **names, size_t cnt)
{
	unsigned long *want = xcalloc(cnt, sizeof(*want)), *got = xcalloc(cnt, sizeof(*got));
	int want_err = ksym_expect(&model, names, cnt, want);
	int got_err = attach_names(names, cnt, got);
	size_t bad = 0;
	char want_s[64];

	snprintf(want_s, sizeof(want_s), "%s", errname(want_err));
	if (!want_err && !got_err) {
		for (size_t i = 0; i < cnt; i++) {
			if (got[i] == want[i])
				continue;
			if (bad++ < 5)
				fprintf(stderr, "  %s: kernel 0x%lx, model 0x%lx\n", names[i], got[i],
					want[i]);
		}
	}
	if (want_err != got_err)
		narrow_disagreement(names, cnt);
	check(want_err == got_err && !bad, "%s: %zu names, kernel %s, linear-scan model %s%s",
	      what, cnt, errname(got_err), want_s, bad ? " (addresses differ, see above)" : "");
	free(want);
	free(got);
}

/*
 * A batch of @n names: about a fifth drawn in turn from the special kinds the kernel
 * has, the rest unique functions, each list entered at @offset so batches differ.
 */
static size_t make_batch(const char **out, size_t n, size_t offset)
{
	static const enum name_class special[] = {
		NC_DUP, NC_DUP_SKIP, NC_MODULE, NC_MODULE_SHADOW, NC_MODULE_VMLINUX,
	};
	const size_t nspecial = sizeof(special) / sizeof(special[0]);
	size_t k = 0, taken[sizeof(special) / sizeof(special[0])] = {};
	size_t want_special = n >= 2 ? (n + 4) / 5 : 0;

	/* Never more names from a list than it holds: a name twice would fail the request. */
	for (size_t t = 0; k < want_special && t < want_special * nspecial; t++) {
		const struct name_list *l = &classes[special[t % nspecial]];

		if (taken[t % nspecial] < l->cnt)
			out[k++] = l->v[(offset + taken[t % nspecial]++) % l->cnt];
	}
	for (size_t u = 0; k < n && u < classes[NC_UNIQUE].cnt; u++)
		out[k++] = classes[NC_UNIQUE].v[(offset + u) % classes[NC_UNIQUE].cnt];
	return k;
}

static const char missing_name[] = "bpfmux_batchsym_no_such_function";

int main(int argc, char **argv)
{
	/*
	 * The last size is set below: a batch above the kernel's crossover to one pass over
	 * all symbols (our kernel resolves fewer than symbols / 64 names one by one), which
	 * looks each symbol up in a hash of the names and bounds its site by the next symbol.
	 */
	size_t sizes[] = { 1, 2, 10, 50, 500, 0 };
	const size_t nsizes = sizeof(sizes) / sizeof(sizes[0]);
	int required[NC_COUNT] = {};
	char obj_path[4096];
	struct bpf_object *obj;
	struct bpf_program *prog;
	const char **batch;
	size_t offset = 0, big;
	int err;

	for (int i = 1; i < argc; i++) {
		int c;

		if (strcmp(argv[i], "--require") || i + 1 >= argc)
			goto usage;
		for (c = 0; c < NC_COUNT && strcmp(argv[i + 1], class_names[c]); c++)
			;
		if (c == NC_COUNT)
			goto usage;
		required[c] = 1;
		i++;
	}

	err = ksym_model_load(&model);
	check(!err, "kallsyms, ftrace records, kprobe blacklist read (%zu symbols, %zu records)",
	      model.cnt, model.nips);
	if (err)
		return 1;
	classify();
	for (int c = 0; c < NC_COUNT; c++) {
		int need = required[c] || c == NC_UNIQUE || c == NC_UNTRACEABLE;

		if (need)
			check(classes[c].cnt > 0, "kernel offers %zu %s names (required)",
			      classes[c].cnt, class_names[c]);
		else
			printf("note - kernel offers %zu %s names%s\n", classes[c].cnt, class_names[c],
			       classes[c].cnt ? "" : ": this kind is not tested here");
		shuffle(&classes[c], 0x62617463680aUL + c);
	}
	big = model.cnt / 64 + 1000;
	big = big < 5000 ? 5000 : big;
	check(classes[NC_UNIQUE].cnt >= big, "%zu unique names for a batch of %zu (symbols / 64 "
	      "+ 1000, at least 5000)", classes[NC_UNIQUE].cnt, big);
	if (classes[NC_UNIQUE].cnt < big || !classes[NC_UNTRACEABLE].cnt)
		return 1;
	sizes[nsizes - 1] = big;
	batch = xcalloc(big, sizeof(*batch));

	snprintf(obj_path, sizeof(obj_path), "%s.bpf.o", argv[0]);
	libbpf_set_strict_mode(LIBBPF_STRICT_ALL);
	obj = bpf_object__open_file(obj_path, NULL);
	err = obj ? bpf_object__load(obj) : -errno;
	check(!err, "%s loads (%s)", obj_path, errname(err));
	if (err)
		return 1;
	prog = bpf_object__find_program_by_name(obj, "noop");
	prog_fd = bpf_program__fd(prog);

	/* Each kind alone: a single name takes the kernel's cnt == 1 path. */
	for (int c = 0; c < NC_COUNT; c++) {
		char what[64];

		if (!classes[c].cnt)
			continue;
		snprintf(what, sizeof(what), "one %s name (%s)", class_names[c], classes[c].v[0]);
		expect_same(what, classes[c].v, 1);
	}

	/* Batches of every size, mixing the special kinds in. */
	for (size_t s = 0; s < nsizes; s++, offset += 7) {
		size_t n = make_batch(batch, sizes[s], offset);
		char what[64];

		snprintf(what, sizeof(what), "batch of %zu", sizes[s]);
		check(n == sizes[s], "%s assembled (%zu names)", what, n);
		expect_same(what, batch, n);
	}

	/* Only module names in one batch: the module pass alone must resolve all. */
	if (classes[NC_MODULE].cnt >= 2) {
		size_t n = classes[NC_MODULE].cnt < 20 ? classes[NC_MODULE].cnt : 20;

		expect_same("batch of module-only names", classes[NC_MODULE].v, n);
	}

	/* A missing name fails the whole request, at every size. */
	for (size_t s = 0; s < nsizes; s++, offset += 7) {
		size_t n = make_batch(batch, sizes[s], offset);
		char what[64];

		batch[n / 2] = missing_name;
		snprintf(what, sizeof(what), "missing name in a batch of %zu", sizes[s]);
		expect_same(what, batch, n);
	}

	/* A name kallsyms knows but ftrace cannot trace fails it too. */
	batch[0] = classes[NC_UNTRACEABLE].v[0];
	expect_same("untraceable name alone", batch, 1);
	make_batch(batch, 10, offset);
	batch[3] = classes[NC_UNTRACEABLE].v[0];
	expect_same("untraceable name in a batch of 10", batch, 10);

	/* A name requested twice fails the request (the linear scan fills one slot). */
	batch[0] = batch[1] = classes[NC_UNIQUE].v[0];
	expect_same("the same name twice", batch, 2);
	make_batch(batch, 10, offset);
	batch[9] = batch[2];
	expect_same("a repeated name in a batch of 10", batch, 10);
	make_batch(batch, 500, offset);
	batch[499] = batch[0];
	expect_same("a repeated name in a batch of 500", batch, 500);
	make_batch(batch, big, offset);
	batch[big - 1] = batch[big / 3];
	expect_same("a repeated name in a batch above the crossover", batch, big);

	bpf_object__close(obj);
	free(batch);
	ksym_model_free(&model);
	printf("batchsym: %s\n", check_failures ? "FAILED" : "all checks passed");
	return check_failures ? 1 : 0;
usage:
	fprintf(stderr, "usage: %s [--require dup|dup-skip|module|module-shadow|module-and-vmlinux]...\n",
		argv[0]);
	return 2;
}
