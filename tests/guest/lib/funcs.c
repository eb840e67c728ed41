// SPDX-License-Identifier: GPL-2.0
/* Choosing kernel functions a tracing program can attach to, for the guest tests. */
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/btf.h>
#include "funcs.h"

/* Names seen in a listing, with how often: a tiny open hash over a sorted array. */
struct name_count {
	char *name;
	int count;
};

struct names {
	struct name_count *v;
	size_t cnt, cap;
};

static int cmp_name(const void *a, const void *b)
{
	return strcmp(((const struct name_count *)a)->name, ((const struct name_count *)b)->name);
}

static int names_add(struct names *n, const char *name)
{
	if (n->cnt == n->cap) {
		size_t cap = n->cap ? n->cap * 2 : 4096;
		void *v = realloc(n->v, cap * sizeof(*n->v));

		if (!v)
			return -ENOMEM;
		n->v = v;
		n->cap = cap;
	}
	n->v[n->cnt].name = strdup(name);
	n->v[n->cnt].count = 1;
	if (!n->v[n->cnt].name)
		return -ENOMEM;
	n->cnt++;
	return 0;
}

/* Sort and fold duplicates into counts. */
static void names_fold(struct names *n)
{
	size_t i, out = 0;

	qsort(n->v, n->cnt, sizeof(*n->v), cmp_name);
	for (i = 0; i < n->cnt; i++) {
		if (out && !strcmp(n->v[out - 1].name, n->v[i].name)) {
			n->v[out - 1].count++;
			free(n->v[i].name);
			continue;
		}
		n->v[out++] = n->v[i];
	}
	n->cnt = out;
}

static int names_count(const struct names *n, const char *name)
{
	struct name_count key = { .name = (char *)name }, *hit;

	hit = bsearch(&key, n->v, n->cnt, sizeof(*n->v), cmp_name);
	return hit ? hit->count : 0;
}

static void names_free(struct names *n)
{
	for (size_t i = 0; i < n->cnt; i++)
		free(n->v[i].name);
	free(n->v);
}

/* available_filter_functions: "name" or "name [module]" per line. */
static int read_ftrace_names(struct names *n)
{
	char line[512], name[256];
	FILE *f = fopen("/sys/kernel/tracing/available_filter_functions", "r");
	int err = 0;

	if (!f) {
		err = -errno;
		perror("available_filter_functions");
		return err;
	}
	while (!err && fgets(line, sizeof(line), f)) {
		if (strchr(line, '['))
			continue;	/* module functions are not in vmlinux BTF */
		if (sscanf(line, "%255s", name) == 1)
			err = names_add(n, name);
	}
	fclose(f);
	names_fold(n);
	return err;
}

/* kallsyms text symbols of vmlinux: "addr t name" (module lines carry "[mod]"). */
static int read_kallsyms_names(struct names *n)
{
	char line[512], name[256], type;
	unsigned long addr;
	FILE *f = fopen("/proc/kallsyms", "r");
	int err = 0;

	if (!f) {
		err = -errno;
		perror("/proc/kallsyms");
		return err;
	}
	while (!err && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx %c %255s", &addr, &type, name) != 3)
			continue;
		if (type != 't' && type != 'T')
			continue;
		err = names_add(n, name);
	}
	fclose(f);
	names_fold(n);
	return err;
}

unsigned long ksym_addr(const char *want)
{
	char line[512], name[256], type;
	unsigned long addr, found = 0;
	FILE *f = fopen("/proc/kallsyms", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx %c %255s", &addr, &type, name) == 3 &&
		    (type == 't' || type == 'T') && !strcmp(name, want)) {
			found = addr;
			break;
		}
	}
	fclose(f);
	return found;
}

/* Scalars, enums and pointers fit in a register; anything else we leave alone. */
static int fits_register(const struct btf *btf, __u32 type_id)
{
	const struct btf_type *t = btf__type_by_id(btf, type_id);

	while (t && (btf_is_mod(t) || btf_is_typedef(t)))
		t = btf__type_by_id(btf, t->type);
	return t && (btf_is_int(t) || btf_is_enum(t) || btf_is_enum64(t) || btf_is_ptr(t));
}

static int traceable(const struct btf *btf, const struct btf_type *func, int max_args)
{
	const struct btf_type *proto = btf__type_by_id(btf, func->type);
	const struct btf_param *p;
	int i, n;

	if (!proto || !btf_is_func_proto(proto))
		return 0;
	n = btf_vlen(proto);
	if (n > max_args)
		return 0;
	if (proto->type && !fits_register(btf, proto->type))
		return 0;
	p = btf_params(proto);
	for (i = 0; i < n; i++)
		if (!p[i].type || !fits_register(btf, p[i].type))
			return 0;
	return 1;
}

/*
 * The verifier's btf_id_deny list (kernel/bpf/verifier.c): functions a trampoline itself
 * calls, refused for every tracing attach, so a set that holds one is refused whole.
 */
static const char *const tracing_denied[] = {
	"___migrate_enable", "migrate_disable", "migrate_enable", "rcu_read_unlock_strict",
	"preempt_count_add", "preempt_count_sub", "__rcu_read_lock", "__rcu_read_unlock", NULL };

/*
 * Not on that list, but a per-function trampoline's own exit calls it: rcu_read_unlock()
 * calls rcu_read_unlock_special() while a grace period waits on this CPU, so a program
 * there re-enters its trampoline until the stack overflows (7.3.4, fentry and
 * tracing_multi; bpfmux trace drops it for the same reason, trace/select.rs).
 */
static const char *const tracing_reenters[] = { "rcu_read_unlock_special", NULL };

static int matches(const char *name, const char *const *globs)
{
	for (; *globs; globs++)
		if (!fnmatch(*globs, name, 0))
			return 1;
	return 0;
}

static int listed(const char *name, const char *const *list)
{
	for (; list && *list; list++)
		if (!strcmp(name, *list))
			return 1;
	return 0;
}

/* Both listings, and room for @slots functions in @set. */
static int collect_start(struct func_set *set, struct names *ftrace, struct names *ksyms,
			 size_t slots)
{
	int err;

	memset(set, 0, sizeof(*set));
	err = read_ftrace_names(ftrace);
	if (!err)
		err = read_kallsyms_names(ksyms);
	if (err)
		return err;
	set->ids = calloc(slots, sizeof(*set->ids));
	set->names = calloc(slots, sizeof(*set->names));
	return set->ids && set->names ? 0 : -ENOMEM;
}

static int collect_end(struct func_set *set, struct names *ftrace, struct names *ksyms, int err)
{
	names_free(ftrace);
	names_free(ksyms);
	if (err)
		func_set_free(set);
	return err;
}

int func_set_collect(struct func_set *set, const struct btf *btf, const char *const *globs,
		     const char *const *must, size_t max)
{
	return func_set_collect_args(set, btf, globs, must, max, 6);
}

int func_set_collect_args(struct func_set *set, const struct btf *btf, const char *const *globs,
			  const char *const *must, size_t max, int max_args)
{
	struct names ftrace = {}, ksyms = {};
	__u32 id, n = btf__type_cnt(btf);
	size_t need = 0;
	int err;

	err = collect_start(set, &ftrace, &ksyms, n);
	if (err)
		goto out;
	for (const char *const *m = must; m && *m; m++)
		need++;
	/* Two passes: the required names first, so a limit never drops them. */
	for (int pass = 0; pass < 2; pass++) {
		for (id = 1; id < n; id++) {
			const struct btf_type *t = btf__type_by_id(btf, id);
			const char *name;
			int required;

			if (!btf_is_func(t))
				continue;
			name = btf__name_by_offset(btf, t->name_off);
			required = listed(name, must);
			if (pass == 0 ? !required : (required || !matches(name, globs)))
				continue;
			if (pass == 1 && set->cnt >= max)
				break;
			if (!traceable(btf, t, max_args) || listed(name, tracing_denied) ||
			    listed(name, tracing_reenters) ||
			    names_count(&ftrace, name) != 1 ||
			    names_count(&ksyms, name) != 1) {
				if (required) {
					fprintf(stderr, "%s is not a safe tracing target here\n", name);
					err = -ENOENT;
					goto out;
				}
				continue;
			}
			set->ids[set->cnt] = id;
			set->names[set->cnt] = strdup(name);
			set->cnt++;
		}
		if (pass == 0 && set->cnt != need) {
			fprintf(stderr, "only %zu of %zu required functions are in vmlinux BTF\n",
				set->cnt, need);
			err = -ENOENT;
			goto out;
		}
	}
out:
	return collect_end(set, &ftrace, &ksyms, err);
}

int func_set_collect_absent(struct func_set *set, const struct btf *btf, size_t max)
{
	struct names ftrace = {}, ksyms = {};
	__u32 id, n = btf__type_cnt(btf);
	int err;

	err = collect_start(set, &ftrace, &ksyms, max);
	if (err)
		goto out;
	for (id = 1; id < n && set->cnt < max; id++) {
		const struct btf_type *t = btf__type_by_id(btf, id);
		const char *name;

		if (!btf_is_func(t))
			continue;
		name = btf__name_by_offset(btf, t->name_off);
		if (!traceable(btf, t, 6) || listed(name, tracing_denied) ||
		    names_count(&ftrace, name) || names_count(&ksyms, name))
			continue;
		set->ids[set->cnt] = id;
		set->names[set->cnt] = strdup(name);
		set->cnt++;
	}
out:
	return collect_end(set, &ftrace, &ksyms, err);
}

/* The verifier's noreturn_deny list (kernel/bpf/verifier.c). */
static const char *const noreturn_denied[] = {
	"__x64_sys_exit", "__x64_sys_exit_group", "__ia32_sys_exit", "__ia32_sys_exit_group",
	"__module_put_and_kthread_exit", "do_exit", "do_group_exit", "kthread_complete_and_exit",
	"make_task_dead", "__kunit_abort", "kunit_try_catch_throw", NULL };

int func_noreturn(const char *name)
{
	return listed(name, noreturn_denied);
}

void func_set_drop_noreturn(struct func_set *set)
{
	size_t i, k = 0;

	for (i = 0; i < set->cnt; i++) {
		if (func_noreturn(set->names[i])) {
			free(set->names[i]);
			continue;
		}
		set->ids[k] = set->ids[i];
		set->names[k++] = set->names[i];
	}
	set->cnt = k;
}

static int ksym_cmp(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

int alias_pair(const struct btf *btf, const char *want, struct ksym *out)
{
	size_t n = 0, cap = 1 << 16, i, j;
	struct ksym *syms = malloc(cap * sizeof(*syms));
	char line[512], type;
	FILE *f = fopen("/proc/kallsyms", "r");
	int found = 0;

	while (f && syms && fgets(line, sizeof(line), f)) {
		if (n == cap && !(syms = realloc(syms, (cap *= 2) * sizeof(*syms))))
			break;
		if (sscanf(line, "%lx %c %127s", &syms[n].addr, &type, syms[n].name) == 3 &&
		    (type == 't' || type == 'T') && !strchr(line, '[') &&
		    btf__find_by_name_kind(btf, syms[n].name, BTF_KIND_FUNC) > 0)
			n++;
	}
	if (f)
		fclose(f);
	if (!syms)
		return 0;
	qsort(syms, n, sizeof(*syms), ksym_cmp);
	for (i = 0; i + 1 < n; i = j) {
		for (j = i + 1; j < n && syms[j].addr == syms[i].addr; j++)
			;
		if (j - i < 2)
			continue;
		for (size_t k = i; k < j; k++) {
			if (found < 2 && !strcmp(syms[k].name, want)) {
				out[0] = syms[k];
				out[1] = syms[k == i ? i + 1 : i];
				found = 2;
			}
		}
		if (!found) {
			out[0] = syms[i];
			out[1] = syms[i + 1];
			found = 1;
		}
	}
	free(syms);
	return found;
}

void func_set_free(struct func_set *set)
{
	for (size_t i = 0; set->names && i < set->cnt; i++)
		free(set->names[i]);
	free(set->ids);
	free(set->names);
	memset(set, 0, sizeof(*set));
}
