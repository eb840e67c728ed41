/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the kernel's ftrace_lookup_symbols() resolves kprobe.multi names to, computed in
 * userspace from /proc/kallsyms and tracefs available_filter_functions_addrs with the
 * rules of its linear scan (the behaviour every kernel since 5.18 has for batches):
 *
 *  - vmlinux symbols are searched before module symbols, each in /proc/kallsyms order
 *    (vmlinux by address, modules in list order, then symbol-table order);
 *  - a symbol counts only if ftrace_location() accepts its address, i.e. it is code and an
 *    ftrace record of its own image lies between it and the next higher symbol of that
 *    image (data symbols never count: the kernel bounds their extent by their own memory
 *    region; for the same reason a module's last function, e.g. its __exit function, does
 *    not take a record of the module loaded above it);
 *  - the first symbol of a name that counts wins;
 *  - the lookup fails (ESRCH) if a name resolves to nothing or is requested twice.
 *
 * Header-only so the guest test and the benchmark share one model. It also reads the
 * kprobe blacklist, which both keep kprobe.multi away from.
 */
#ifndef BPFMUX_KSYM_MODEL_H
#define BPFMUX_KSYM_MODEL_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ksym {
	unsigned long addr;
	unsigned long end;	/* next higher symbol address of the same image, ~0UL if none */
	char *name;
	char *mod;		/* module name, NULL for vmlinux */
	char type;		/* kallsyms type letter */
	size_t order;		/* line number in /proc/kallsyms */
	int traceable;		/* ftrace_location(addr) != 0 */
};

struct ksym_model {
	struct ksym *syms;	/* /proc/kallsyms order */
	size_t cnt;
	struct ksym **by_name;	/* by name, then /proc/kallsyms order */
	unsigned long *ips;	/* ftrace records, sorted */
	char **ip_mods;		/* the module of each record, NULL for vmlinux */
	size_t nips;
	char **blacklist;	/* the kprobe blacklist, sorted: never attached to */
	size_t nblacklist;
};

static inline int ksym_cmp_image_addr(const void *a, const void *b)
{
	const struct ksym *x = *(const struct ksym *const *)a, *y = *(const struct ksym *const *)b;
	int c = strcmp(x->mod ? x->mod : "", y->mod ? y->mod : "");

	if (c)
		return c;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static inline int ksym_cmp_name_order(const void *a, const void *b)
{
	const struct ksym *x = *(const struct ksym *const *)a, *y = *(const struct ksym *const *)b;
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	return x->order < y->order ? -1 : x->order > y->order;
}

static inline int ksym_cmp_ulong(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;

	return x < y ? -1 : x > y;
}

/* Pseudo-images in /proc/kallsyms that module_kallsyms_on_each_symbol() never visits. */
static inline int ksym_pseudo_image(const char *mod)
{
	return !strcmp(mod, "bpf") || !strncmp(mod, "__builtin", 9);
}

static inline int ksym_read_kallsyms(struct ksym_model *m)
{
	char line[1024], name[512], mod[128];
	size_t cap = 0;
	FILE *f = fopen("/proc/kallsyms", "r");

	if (!f) {
		perror("/proc/kallsyms");
		return -errno;
	}
	while (fgets(line, sizeof(line), f)) {
		struct ksym *s;
		unsigned long addr;
		char type;
		int n;

		mod[0] = '\0';
		n = sscanf(line, "%lx %c %511s [%127[^]]]", &addr, &type, name, mod);
		if (n < 3 || (n == 4 && ksym_pseudo_image(mod)))
			continue;
		if (m->cnt == cap) {
			cap = cap ? cap * 2 : 65536;
			s = realloc(m->syms, cap * sizeof(*s));
			if (!s)
				goto nomem;
			m->syms = s;
		}
		s = &m->syms[m->cnt];
		memset(s, 0, sizeof(*s));
		s->addr = addr;
		s->type = type;
		s->order = m->cnt;
		s->name = strdup(name);
		s->mod = n == 4 ? strdup(mod) : NULL;
		if (!s->name || (n == 4 && !s->mod))
			goto nomem;
		m->cnt++;
	}
	fclose(f);
	if (m->cnt && m->syms[0].addr == 0 && m->syms[m->cnt - 1].addr == 0) {
		fprintf(stderr, "/proc/kallsyms hides addresses (kptr_restrict?)\n");
		return -EPERM;
	}
	return 0;
nomem:
	fclose(f);
	return -ENOMEM;
}

struct ksym_rec {
	unsigned long ip;
	char *mod;
};

static inline int ksym_cmp_rec(const void *a, const void *b)
{
	const struct ksym_rec *x = a, *y = b;

	return x->ip < y->ip ? -1 : x->ip > y->ip;
}

/* Lines "ADDRESS NAME" or "ADDRESS NAME [MODULE]", kept sorted by address. */
static inline int ksym_read_ftrace_records(struct ksym_model *m)
{
	static const char path[] = "/sys/kernel/tracing/available_filter_functions_addrs";
	struct ksym_rec *recs = NULL;
	char line[1024];
	size_t cap = 0, n = 0;
	FILE *f = fopen(path, "r");
	int err = 0;

	if (!f) {
		perror(path);
		return -errno;
	}
	while (!err && fgets(line, sizeof(line), f)) {
		char mod[256] = "";
		unsigned long ip;

		if (sscanf(line, "%lx %*s [%255[^]]]", &ip, mod) < 1)
			continue;
		if (n == cap) {
			struct ksym_rec *v;

			cap = cap ? cap * 2 : 65536;
			v = realloc(recs, cap * sizeof(*v));
			if (!v) {
				err = -ENOMEM;
				break;
			}
			recs = v;
		}
		recs[n].ip = ip;
		recs[n].mod = mod[0] ? strdup(mod) : NULL;
		if (mod[0] && !recs[n].mod)
			err = -ENOMEM;
		n++;
	}
	fclose(f);
	if (!err) {
		qsort(recs, n, sizeof(*recs), ksym_cmp_rec);
		m->ips = malloc((n ? n : 1) * sizeof(*m->ips));
		m->ip_mods = malloc((n ? n : 1) * sizeof(*m->ip_mods));
		if (!m->ips || !m->ip_mods)
			err = -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		if (err) {
			free(recs[i].mod);
			continue;
		}
		m->ips[i] = recs[i].ip;
		m->ip_mods[i] = recs[i].mod;
	}
	if (!err)
		m->nips = n;
	free(recs);
	return err;
}

/* Is there an ftrace record of image @mod (NULL: vmlinux) in [lo, hi)? */
static inline int ksym_has_record(const struct ksym_model *m, unsigned long lo, unsigned long hi,
				  const char *mod)
{
	size_t l = 0, h = m->nips;

	while (l < h) {
		size_t mid = l + (h - l) / 2;

		if (m->ips[mid] < lo)
			l = mid + 1;
		else
			h = mid;
	}
	return l < m->nips && m->ips[l] < hi &&
	       !strcmp(m->ip_mods[l] ? m->ip_mods[l] : "", mod ? mod : "");
}

static inline int ksym_cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * The kprobe blacklist (functions kprobes refuse): tests and benchmarks keep kprobe.multi
 * off them too, so attaching many functions cannot recurse into the probe machinery.
 */
static inline int ksym_read_blacklist(struct ksym_model *m)
{
	static const char path[] = "/sys/kernel/debug/kprobes/blacklist";
	char line[512], name[256];
	size_t cap = 0;
	FILE *f = fopen(path, "r");

	if (!f) {
		perror(path);
		return -errno;
	}
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%*s %255s", name) != 1)
			continue;
		if (m->nblacklist == cap) {
			char **v;

			cap = cap ? cap * 2 : 1024;
			v = realloc(m->blacklist, cap * sizeof(*v));
			if (!v) {
				fclose(f);
				return -ENOMEM;
			}
			m->blacklist = v;
		}
		m->blacklist[m->nblacklist] = strdup(name);
		if (!m->blacklist[m->nblacklist++]) {
			fclose(f);
			return -ENOMEM;
		}
	}
	fclose(f);
	qsort(m->blacklist, m->nblacklist, sizeof(*m->blacklist), ksym_cmp_str);
	return 0;
}

static inline int ksym_blacklisted(const struct ksym_model *m, const char *name)
{
	return bsearch(&name, m->blacklist, m->nblacklist, sizeof(*m->blacklist),
		       ksym_cmp_str) != NULL;
}

static inline void ksym_model_free(struct ksym_model *m)
{
	for (size_t i = 0; i < m->nblacklist; i++)
		free(m->blacklist[i]);
	free(m->blacklist);
	for (size_t i = 0; i < m->cnt; i++) {
		free(m->syms[i].name);
		free(m->syms[i].mod);
	}
	free(m->syms);
	free(m->by_name);
	for (size_t i = 0; i < m->nips; i++)
		free(m->ip_mods[i]);
	free(m->ip_mods);
	free(m->ips);
	memset(m, 0, sizeof(*m));
}

static inline int ksym_model_load(struct ksym_model *m)
{
	struct ksym **by_addr;
	int err;

	memset(m, 0, sizeof(*m));
	err = ksym_read_kallsyms(m);
	if (!err)
		err = ksym_read_ftrace_records(m);
	if (!err)
		err = ksym_read_blacklist(m);
	if (err)
		goto fail;
	by_addr = malloc(m->cnt * sizeof(*by_addr));
	m->by_name = malloc(m->cnt * sizeof(*m->by_name));
	if (!by_addr || !m->by_name) {
		free(by_addr);
		err = -ENOMEM;
		goto fail;
	}
	for (size_t i = 0; i < m->cnt; i++)
		by_addr[i] = m->by_name[i] = &m->syms[i];
	/* A symbol's extent ends where the next higher symbol of its image starts. */
	qsort(by_addr, m->cnt, sizeof(*by_addr), ksym_cmp_image_addr);
	for (size_t i = 0; i < m->cnt; i++) {
		struct ksym *s = by_addr[i];
		size_t j = i + 1;

		while (j < m->cnt && !ksym_cmp_image_addr(&by_addr[j], &by_addr[i]))
			j++;
		s->end = j < m->cnt && !strcmp(s->mod ? s->mod : "", by_addr[j]->mod ? by_addr[j]->mod : "")
			? by_addr[j]->addr : ~0UL;
		s->traceable = s->addr && strchr("tTwW", s->type) &&
			       ksym_has_record(m, s->addr, s->end, s->mod);
	}
	free(by_addr);
	qsort(m->by_name, m->cnt, sizeof(*m->by_name), ksym_cmp_name_order);
	return 0;
fail:
	ksym_model_free(m);
	return err;
}

/* Index in by_name of the first symbol called @name, or m->cnt. */
static inline size_t ksym_first_named(const struct ksym_model *m, const char *name)
{
	size_t l = 0, h = m->cnt;

	while (l < h) {
		size_t mid = l + (h - l) / 2;

		if (strcmp(m->by_name[mid]->name, name) < 0)
			l = mid + 1;
		else
			h = mid;
	}
	return l < m->cnt && !strcmp(m->by_name[l]->name, name) ? l : m->cnt;
}

/* The symbol ftrace_lookup_symbols() picks for @name, NULL if none. */
static inline const struct ksym *ksym_resolve(const struct ksym_model *m, const char *name)
{
	for (size_t i = ksym_first_named(m, name); i < m->cnt && !strcmp(m->by_name[i]->name, name);
	     i++)
		if (m->by_name[i]->traceable)
			return m->by_name[i];
	return NULL;
}

/*
 * What the kernel answers for the request @names[@cnt]: 0 with @addrs[i] the address
 * for @names[i], or -ESRCH (a name resolves to nothing or appears twice).
 */
static inline int ksym_expect(const struct ksym_model *m, const char *const *names, size_t cnt,
		       unsigned long *addrs)
{
	const char **sorted = malloc(cnt * sizeof(*sorted));
	int err = 0;

	if (!sorted)
		return -ENOMEM;
	memcpy(sorted, names, cnt * sizeof(*sorted));
	qsort(sorted, cnt, sizeof(*sorted), ksym_cmp_str);
	for (size_t i = 1; i < cnt; i++)
		if (!strcmp(sorted[i - 1], sorted[i]))
			err = -ESRCH;
	free(sorted);
	for (size_t i = 0; i < cnt; i++) {
		const struct ksym *s = ksym_resolve(m, names[i]);

		addrs[i] = s ? s->addr : 0;
		if (!s)
			err = -ESRCH;
	}
	return err;
}

/*
 * Names kprobe.multi can take with no ambiguity: one kallsyms symbol, in vmlinux,
 * traceable, not blacklisted. Returns how many, with the names (owned by @m) in @out.
 */
static inline size_t ksym_unique_functions(const struct ksym_model *m, const char ***out)
{
	size_t n = 0;

	*out = malloc((m->cnt ? m->cnt : 1) * sizeof(**out));
	if (!*out)
		return 0;
	for (size_t i = 0; i < m->cnt; i++) {
		const struct ksym *s = m->by_name[i];

		if ((i && !strcmp(m->by_name[i - 1]->name, s->name)) ||
		    (i + 1 < m->cnt && !strcmp(m->by_name[i + 1]->name, s->name)))
			continue;
		if (!s->mod && s->traceable && !ksym_blacklisted(m, s->name))
			(*out)[n++] = s->name;
	}
	return n;
}

#endif
