/* SPDX-License-Identifier: GPL-2.0 */
/* Choosing kernel functions a tracing program can attach to, for the guest tests. */
#ifndef BPFMUX_TEST_FUNCS_H
#define BPFMUX_TEST_FUNCS_H

#include <stddef.h>
#include <linux/types.h>

struct btf;

struct func_set {
	__u32 *ids;		/* BTF FUNC ids in vmlinux BTF */
	char **names;
	size_t cnt;
};

/*
 * Fill @set with up to @max vmlinux functions that are safe targets for fentry and
 * tracing_multi: a FUNC in BTF with at most six scalar/pointer arguments and no
 * struct return, not on the verifier's deny list, listed exactly once in
 * available_filter_functions and once among
 * kallsyms text symbols, and whose name matches one of @globs (fnmatch, NULL-terminated).
 * Functions named in @must are always included (and must qualify).
 * Returns 0 or a negative errno, with a message on stderr.
 */
int func_set_collect(struct func_set *set, const struct btf *btf, const char *const *globs,
		     const char *const *must, size_t max);
/* Same, with functions of up to @max_args arguments (up to 12: some passed on the stack). */
int func_set_collect_args(struct func_set *set, const struct btf *btf, const char *const *globs,
			  const char *const *must, size_t max, int max_args);
void func_set_free(struct func_set *set);

/*
 * Fill @set with up to @max functions of vmlinux BTF with a prototype a trampoline takes
 * that neither kallsyms nor available_filter_functions lists (inlined everywhere, or
 * discarded): an attach can never find them (ENOENT).
 */
int func_set_collect_absent(struct func_set *set, const struct btf *btf, size_t max);

/* Whether the verifier refuses @name for fexit, fsession and fmod_ret (noreturn_deny). */
int func_noreturn(const char *name);
/* Drop those functions from @set. */
void func_set_drop_noreturn(struct func_set *set);

/* Address of a kallsyms text symbol, 0 if absent. */
unsigned long ksym_addr(const char *name);

struct ksym {
	unsigned long addr;
	char name[128];
};

/*
 * Two text symbols at one address that are both FUNCs in vmlinux BTF, into @out[0] and
 * @out[1]: @want and another (returns 2), else the first such pair (returns 1); 0 if
 * there is none.
 */
int alias_pair(const struct btf *btf, const char *want, struct ksym *out);

#endif
