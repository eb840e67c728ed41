// SPDX-License-Identifier: GPL-2.0
/* Guest side of the instruction counter (insn.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "insn.h"

static int rec_fd = -1;
static off_t rec_off;		/* what was read of the record file so far */
static char *buf;		/* unread text of the record file */
static size_t buf_len, buf_cap;

int insn_open(void)
{
	const char *path = getenv("BPFMUX_INSN");

	if (rec_fd >= 0)
		return 0;
	if (!path || !*path) {
		fprintf(stderr, "insn: BPFMUX_INSN is not set: run under `vm/run --insn`, which "
			"loads the instruction counter into QEMU\n");
		return -1;
	}
	/*
	 * O_DIRECT: the guest's 9p client would otherwise serve the bytes the plugin appended
	 * from a page it cached while they were not written yet (zeros).
	 */
	rec_fd = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
	if (rec_fd < 0) {
		fprintf(stderr, "insn: %s: %s\n", path, strerror(errno));
		return -1;
	}
	/* records of earlier programs in this guest are not ours */
	rec_off = lseek(rec_fd, 0, SEEK_END);
	return rec_off < 0 ? -1 : 0;
}

int insn_pin(void)
{
	int cpu = sched_getcpu();
	cpu_set_t set;

	CPU_ZERO(&set);
	if (cpu >= 0)
		CPU_SET(cpu, &set);
	if (cpu < 0 || sched_setaffinity(0, sizeof(set), &set)) {
		fprintf(stderr, "insn: pinning to CPU %d: %s\n", cpu, strerror(errno));
		return -1;
	}
	return 0;
}

/* Append what the plugin wrote since the last call; returns bytes added or -1. */
static ssize_t fill(void)
{
	ssize_t got, total = 0;

	for (;;) {
		if (buf_cap - buf_len < 65536) {
			buf_cap = buf_cap ? buf_cap * 2 : 1 << 20;
			buf = realloc(buf, buf_cap);
			if (!buf) {
				fprintf(stderr, "insn: out of memory\n");
				return -1;
			}
		}
		got = pread(rec_fd, buf + buf_len, buf_cap - buf_len, rec_off);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			fprintf(stderr, "insn: reading the record file: %s\n", strerror(errno));
			return -1;
		}
		if (!got)
			return total;
		buf_len += got;
		rec_off += got;
		total += got;
	}
}

/* The end of line @n counting from @p (n >= 1), or NULL if not all there yet. */
static char *line_end(char *p, char *end, size_t n)
{
	while (n--) {
		p = memchr(p, '\n', end - p);
		if (!p)
			return NULL;
		p++;
	}
	return p;
}

int insn_read(struct insn_window *w)
{
	unsigned long long count, lookups = 0, misses = 0, unchained = 0, translated = 0;
	unsigned long long hz[9] = { 0 };
	unsigned int cpu, full = 0;
	size_t nprof;
	char *end, *rec_end, *p, line[512];
	int tries = 0, fields;

	memset(w, 0, sizeof(*w));
	if (rec_fd < 0 && insn_open())
		return -1;
	/*
	 * The plugin writes the record while the END marker executes, before the guest
	 * runs on; the retries only cover a record file that is not there at all.
	 */
	for (;;) {
		if (fill() < 0)
			return -1;
		end = buf + buf_len;
		p = line_end(buf, end, 1);
		if (p)
			break;
		if (++tries > 20) {
			fprintf(stderr, "insn: no record from the plugin after the END marker (is "
				"this guest running under `vm/run --insn`?)\n");
			return -1;
		}
		usleep(1000);
	}
	if (!strncmp(buf, "error ", 6)) {
		fprintf(stderr, "insn: the plugin says: %.*s\n", (int)(p - buf - 1), buf);
		memmove(buf, p, end - p);
		buf_len = end - p;
		return -1;
	}
	/*
	 * An older plugin writes no dispatch counts, or no translations; hazards=on adds 10.
	 * The line alone: scanning on would take the next line's numbers (or stale bytes
	 * past buf_len) for fields this one does not have.
	 */
	if ((size_t)(p - buf) > sizeof(line)) {
		fprintf(stderr, "insn: a record line of %zu bytes\n", (size_t)(p - buf));
		return -1;
	}
	memcpy(line, buf, p - buf - 1);
	line[p - buf - 1] = 0;
	fields = sscanf(line, "window %u %llu %zu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu "
			"%llu %llu %llu %u", &cpu, &count, &nprof, &lookups, &misses, &unchained,
			&translated, &hz[0], &hz[1], &hz[2], &hz[3], &hz[4], &hz[5], &hz[6], &hz[7],
			&hz[8], &full);
	if (fields != 3 && fields != 6 && fields != 7 && fields != 17) {
		fprintf(stderr, "insn: unexpected record '%.*s'\n", (int)(p - buf - 1), buf);
		return -1;
	}
	rec_end = nprof ? line_end(p, end, nprof) : p;
	if (!rec_end) {
		if (fill() < 0)
			return -1;
		end = buf + buf_len;
		p = line_end(buf, end, 1);
		rec_end = line_end(p, end, nprof);
		if (!rec_end) {
			fprintf(stderr, "insn: a profile record is cut short\n");
			return -1;
		}
	}
	w->cpu = cpu;
	w->count = count;
	w->dispatch = fields >= 6;
	w->lookups = lookups;
	w->misses = misses;
	w->unchained = unchained;
	w->translated = translated;
	w->hazards = fields == 17;
	w->indirect = hz[0];
	w->calls = hz[1];
	w->rets = hz[2];
	w->ret_miss = hz[3];
	w->ilines = hz[4];
	w->dlines = hz[5];
	w->isites = hz[6];
	w->itargets = hz[7];
	w->max_targets = hz[8];
	w->full = full;
	if (nprof) {
		w->prof = calloc(nprof, sizeof(*w->prof));
		if (!w->prof) {
			fprintf(stderr, "insn: out of memory\n");
			return -1;
		}
		for (size_t i = 0; i < nprof; i++) {
			char *q;

			w->prof[i].addr = strtoull(p, &q, 16);
			w->prof[i].count = strtoll(q, &q, 10);
			p = q + 1;
		}
		w->nprof = nprof;
	}
	memmove(buf, rec_end, end - rec_end);
	buf_len = end - rec_end;
	if ((int)cpu != sched_getcpu()) {
		fprintf(stderr, "insn: the window ended on vCPU %u but the reader runs on CPU %d "
			"(pin the thread: insn_pin())\n", cpu, sched_getcpu());
		insn_window_free(w);
		return -1;
	}
	return 0;
}

void insn_window_free(struct insn_window *w)
{
	free(w->prof);
	w->prof = NULL;
	w->nprof = 0;
}

/* One window around fn(arg, reps) into @w (no profile). 0, or -1 with a message. */
static int window(insn_work_fn fn, void *arg, unsigned int reps, struct insn_window *w)
{
	int err;

	INSN_BEGIN();
	err = fn(arg, reps);
	INSN_END();
	if (insn_read(w))
		return -1;
	if (err) {
		fprintf(stderr, "insn: the counted work failed (%d)\n", err);
		return -1;
	}
	return 0;
}

int64_t insn_window(insn_work_fn fn, void *arg, unsigned int reps)
{
	struct insn_window w;

	if (window(fn, arg, reps, &w))
		return -1;
	return w.count;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The most frequent of @n counts (ties: the smaller), its hits and the runner-up's. */
static void summarize(const uint64_t *in, int n, struct insn_sample *s)
{
	uint64_t *v = malloc(n * sizeof(*v));
	int best = 0, second = 0;

	if (!v) {
		memset(s, 0, sizeof(*s));
		return;
	}
	memcpy(v, in, n * sizeof(*v));
	qsort(v, n, sizeof(*v), cmp_u64);
	s->samples = n;
	s->min = v[0];
	s->max = v[n - 1];
	s->mode = v[0];
	for (int i = 0, j; i < n; i = j) {
		for (j = i; j < n && v[j] == v[i]; j++)
			;
		if (j - i > best) {
			second = best;
			best = j - i;
			s->mode = v[i];
		} else if (j - i > second) {
			second = j - i;
		}
	}
	s->hits = best;
	s->runner_up = second;
	free(v);
}

/* A mode to trust: seen 3 times or more, at least twice as often as any other count. */
static int clear_mode(const struct insn_sample *s)
{
	return s->hits >= 3 && s->hits >= 2 * s->runner_up;
}

/* The median of @field over the windows of @w[0..n) that counted @mode instructions. */
static double median_at_mode(const struct insn_window *w, int n, uint64_t mode,
			     size_t field)
{
	uint64_t *v = malloc(n * sizeof(*v));
	double med;
	int m = 0;

	if (!v)
		return 0;
	for (int i = 0; i < n; i++)
		if (w[i].count == mode)
			v[m++] = *(const uint64_t *)((const char *)&w[i] + field);
	if (!m) {
		free(v);
		return 0;
	}
	qsort(v, m, sizeof(*v), cmp_u64);
	med = m % 2 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2.0;
	free(v);
	return med;
}

/* (median of @field at hi's mode - the same at lo's) / (k2 - k1) */
static double per_rep_at_mode(const struct insn_estimate *e, const struct insn_window *wlo,
			      const struct insn_window *whi, int n, size_t field)
{
	return (median_at_mode(whi, n, e->hi.mode, field) -
		median_at_mode(wlo, n, e->lo.mode, field)) / (e->k2 - e->k1);
}

/* The hazard fields of an estimate (insn.h) from its undisturbed windows. */
static void hazard_estimate(struct insn_estimate *e, const struct insn_window *wlo,
			    const struct insn_window *whi, int n)
{
	static const size_t sets[] = {
		offsetof(struct insn_window, ilines), offsetof(struct insn_window, dlines),
		offsetof(struct insn_window, isites), offsetof(struct insn_window, itargets),
		offsetof(struct insn_window, max_targets),
	};
	double *out[] = { e->ilines, e->dlines, e->isites, e->itargets, e->max_targets };

	e->indirect_per_rep = per_rep_at_mode(e, wlo, whi, n,
					      offsetof(struct insn_window, indirect));
	e->calls_per_rep = per_rep_at_mode(e, wlo, whi, n, offsetof(struct insn_window, calls));
	e->rets_per_rep = per_rep_at_mode(e, wlo, whi, n, offsetof(struct insn_window, rets));
	e->ret_miss_per_rep = per_rep_at_mode(e, wlo, whi, n,
					      offsetof(struct insn_window, ret_miss));
	for (size_t k = 0; k < sizeof(sets) / sizeof(sets[0]); k++) {
		out[k][0] = median_at_mode(wlo, n, e->lo.mode, sets[k]);
		out[k][1] = median_at_mode(whi, n, e->hi.mode, sets[k]);
	}
	for (int i = 0; i < n; i++)
		e->full |= wlo[i].full | whi[i].full;
}

int insn_per_rep(insn_work_fn fn, void *arg, unsigned int k1, unsigned int k2, int samples,
		 struct insn_estimate *e)
{
	/* windows a tick hit count more, each differently: take more until the mode is clear */
	int cap = samples * 8 > 120 ? samples * 8 : 120, n = 0, rc = -1;
	uint64_t *lo = calloc(cap, sizeof(*lo)), *hi = calloc(cap, sizeof(*hi));
	struct insn_window *wlo = calloc(cap, sizeof(*wlo)), *whi = calloc(cap, sizeof(*whi));

	memset(e, 0, sizeof(*e));
	if (!lo || !hi || !wlo || !whi || samples < 1 || k2 <= k1) {
		fprintf(stderr, "insn: bad estimate parameters\n");
		goto out;
	}
	while (n < cap) {
		if (window(fn, arg, k1, &wlo[n]) || window(fn, arg, k2, &whi[n]))
			goto out;
		lo[n] = wlo[n].count;
		hi[n] = whi[n].count;
		n++;
		if (n < samples)
			continue;
		summarize(lo, n, &e->lo);
		summarize(hi, n, &e->hi);
		if (clear_mode(&e->lo) && clear_mode(&e->hi))
			break;
	}
	e->clear = clear_mode(&e->lo) && clear_mode(&e->hi);
	e->k1 = k1;
	e->k2 = k2;
	e->per_rep = ((double)e->hi.mode - (double)e->lo.mode) / (k2 - k1);
	/* dispatch: of the undisturbed windows, as the counts */
	e->dispatch = wlo[0].dispatch;
	if (e->dispatch) {
		e->lookups_per_rep = per_rep_at_mode(e, wlo, whi, n,
						     offsetof(struct insn_window, lookups));
		e->misses_per_rep = per_rep_at_mode(e, wlo, whi, n,
						    offsetof(struct insn_window, misses));
		e->unchained_per_rep = per_rep_at_mode(e, wlo, whi, n,
						       offsetof(struct insn_window, unchained));
	}
	e->hazards = wlo[0].hazards;
	if (e->hazards)
		hazard_estimate(e, wlo, whi, n);
	rc = 0;
out:
	free(lo);
	free(hi);
	free(wlo);
	free(whi);
	return rc;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

void insn_median_spread(double *v, int n, double *median, double *spread)
{
	qsort(v, n, sizeof(*v), cmp_double);
	*median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	*spread = *median ? (v[n - 1] - v[0]) / *median : 0;
	if (*spread < 0)
		*spread = -*spread;
}

int insn_profile(insn_work_fn fn, void *arg, unsigned int reps, int tries,
		 struct insn_window *w)
{
	struct insn_window *all = calloc(tries, sizeof(*all));
	int best = -1, best_hits = 0, n = 0, rc = -1;

	if (!all || tries < 1) {
		fprintf(stderr, "insn: bad profile parameters\n");
		free(all);
		return -1;
	}
	for (; n < tries; n++) {
		int err;

		INSN_BEGIN_PROFILE();
		err = fn(arg, reps);
		INSN_END();
		if (insn_read(&all[n]))
			goto out;
		if (err) {
			fprintf(stderr, "insn: the profiled work failed (%d)\n", err);
			n++;
			goto out;
		}
	}
	for (int i = 0; i < n; i++) {
		int hits = 0;

		for (int j = 0; j < n; j++)
			hits += all[j].count == all[i].count;
		if (hits > best_hits || (hits == best_hits && all[i].count < all[best].count))
			best = i, best_hits = hits;
	}
	if (best_hits < 2) {
		fprintf(stderr, "insn: no two of %d profile windows counted the same\n", n);
		goto out;
	}
	*w = all[best];
	all[best].prof = NULL;
	rc = 0;
out:
	for (int i = 0; i < n; i++)
		insn_window_free(&all[i]);
	free(all);
	return rc;
}

struct ksym {
	uint64_t addr;
	char name[128];
};

static int cmp_ksym(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int cmp_sym_count(const void *a, const void *b)
{
	const struct insn_sym *x = a, *y = b;

	return x->count > y->count ? -1 : x->count < y->count ? 1 : strcmp(x->name, y->name);
}

/* Text symbols of /proc/kallsyms (modules and BPF programs too), by address. */
static struct ksym *load_kallsyms(size_t *n)
{
	FILE *f = fopen("/proc/kallsyms", "r");
	struct ksym *v = NULL;
	size_t cap = 0;
	char line[512];

	*n = 0;
	if (!f) {
		fprintf(stderr, "insn: /proc/kallsyms: %s\n", strerror(errno));
		return NULL;
	}
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a;
		char type, name[128], mod[128] = "";

		if (sscanf(line, "%llx %c %127s %127s", &a, &type, name, mod) < 3 || !a)
			continue;
		if (type != 't' && type != 'T' && type != 'w' && type != 'W')
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 65536;
			v = realloc(v, cap * sizeof(*v));
			if (!v) {
				fclose(f);
				fprintf(stderr, "insn: out of memory\n");
				return NULL;
			}
		}
		v[*n].addr = a;
		memcpy(v[*n].name, name, sizeof(name));
		(*n)++;
	}
	fclose(f);
	if (!*n) {
		fprintf(stderr, "insn: no text symbols in /proc/kallsyms (not root?)\n");
		free(v);
		return NULL;
	}
	qsort(v, *n, sizeof(*v), cmp_ksym);
	return v;
}

int insn_fold(const struct insn_window *w, struct insn_prof *p)
{
	size_t nk, cap = 0, *n = &p->n;
	struct ksym *k = load_kallsyms(&nk);
	struct insn_sym *out = NULL;

	p->sym = NULL;
	*n = 0;
	if (!k)
		return -1;
	for (size_t i = 0; i < w->nprof; i++) {
		uint64_t a = w->prof[i].addr;
		const char *name;
		size_t lo = 0, hi = nk, j;

		if (a < 0xffff800000000000ull) {
			name = "[user space]";
		} else {
			while (hi - lo > 1) {	/* last symbol at or below a */
				size_t mid = (lo + hi) / 2;

				if (k[mid].addr <= a)
					lo = mid;
				else
					hi = mid;
			}
			name = k[lo].addr <= a ? k[lo].name : "[kernel, before the first symbol]";
		}
		for (j = 0; j < *n && strcmp(out[j].name, name); j++)
			;
		if (j == *n) {
			if (*n == cap) {
				cap = cap ? cap * 2 : 256;
				out = realloc(out, cap * sizeof(*out));
				if (!out) {
					free(k);
					fprintf(stderr, "insn: out of memory\n");
					return -1;
				}
			}
			snprintf(out[j].name, sizeof(out[j].name), "%s", name);
			out[j].count = 0;
			(*n)++;
		}
		out[j].count += w->prof[i].count;
	}
	free(k);
	qsort(out, *n, sizeof(*out), cmp_sym_count);
	p->sym = out;
	return 0;
}

static int64_t prof_get(const struct insn_prof *p, const char *name)
{
	for (size_t i = 0; p && i < p->n; i++)
		if (!strcmp(p->sym[i].name, name))
			return p->sym[i].count;
	return 0;
}

int insn_prof_sub(const struct insn_prof *a, const struct insn_prof *b, struct insn_prof *out)
{
	out->n = 0;
	out->sym = calloc(a->n + b->n + 1, sizeof(*out->sym));
	if (!out->sym) {
		fprintf(stderr, "insn: out of memory\n");
		return -1;
	}
	for (size_t i = 0; i < a->n; i++) {
		int64_t c = a->sym[i].count - prof_get(b, a->sym[i].name);

		if (c) {
			out->sym[out->n] = a->sym[i];
			out->sym[out->n++].count = c;
		}
	}
	for (size_t i = 0; i < b->n; i++) {
		if (prof_get(a, b->sym[i].name) || !b->sym[i].count)
			continue;
		out->sym[out->n] = b->sym[i];
		out->sym[out->n++].count = -b->sym[i].count;
	}
	qsort(out->sym, out->n, sizeof(*out->sym), cmp_sym_count);
	return 0;
}

void insn_prof_free(struct insn_prof *p)
{
	free(p->sym);
	p->sym = NULL;
	p->n = 0;
}

int insn_profile_diff(insn_work_fn fn, void *arg, unsigned int k1, unsigned int k2,
		      struct insn_prof *out)
{
	struct insn_window w1 = { 0 }, w2 = { 0 };
	struct insn_prof p1 = { 0 }, p2 = { 0 };
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (!insn_profile(fn, arg, k1, 7, &w1) && !insn_profile(fn, arg, k2, 7, &w2) &&
	    !insn_fold(&w1, &p1) && !insn_fold(&w2, &p2))
		rc = insn_prof_sub(&p2, &p1, out);
	insn_prof_free(&p1);
	insn_prof_free(&p2);
	insn_window_free(&w1);
	insn_window_free(&w2);
	return rc;
}

struct prof_row {
	const char *name;
	double a, b;
};

static int cmp_prof_row(const void *x, const void *y)
{
	const struct prof_row *p = x, *q = y;
	double dp = p->a - p->b, dq = q->a - q->b;

	if (dp < 0)
		dp = -dp;
	if (dq < 0)
		dq = -dq;
	if (dp != dq)
		return dp > dq ? -1 : 1;
	return p->a > q->a ? -1 : p->a < q->a;
}

void insn_prof_print(FILE *f, const struct insn_prof *a, double adiv, const char *acol,
		     const struct insn_prof *b, double bdiv, const char *bcol, int top)
{
	struct prof_row *rows = calloc(a->n + b->n + 1, sizeof(*rows));
	double ta = 0, tb = 0, rest_a = 0, rest_b = 0;
	size_t n = 0;

	if (!rows) {
		fprintf(f, "(out of memory)\n");
		return;
	}
	for (size_t i = 0; i < a->n; i++)
		rows[n++] = (struct prof_row){ a->sym[i].name, a->sym[i].count / adiv,
					       prof_get(b, a->sym[i].name) / bdiv };
	for (size_t i = 0; i < b->n; i++)
		if (!prof_get(a, b->sym[i].name))
			rows[n++] = (struct prof_row){ b->sym[i].name, 0, b->sym[i].count / bdiv };
	qsort(rows, n, sizeof(*rows), cmp_prof_row);
	fprintf(f, "| symbol | %s | %s | difference |\n|---|---:|---:|---:|\n", acol, bcol);
	for (size_t i = 0; i < n; i++) {
		ta += rows[i].a;
		tb += rows[i].b;
		if ((int)i < top) {
			fprintf(f, "| `%s` | %.2f | %.2f | %+.2f |\n", rows[i].name, rows[i].a,
				rows[i].b, rows[i].a - rows[i].b);
		} else {
			rest_a += rows[i].a;
			rest_b += rows[i].b;
		}
	}
	if ((int)n > top)
		fprintf(f, "| (%zu more symbols) | %.2f | %.2f | %+.2f |\n", n - top, rest_a, rest_b,
			rest_a - rest_b);
	fprintf(f, "| **total** | %.2f | %.2f | %+.2f |\n", ta, tb, ta - tb);
	free(rows);
}
