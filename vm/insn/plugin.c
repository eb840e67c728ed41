// SPDX-License-Identifier: GPL-2.0
/*
 * bpfmux instruction counter: a QEMU TCG plugin (plugin API version 1, QEMU 7.2) that
 * counts the guest instructions each vCPU executes between two marker instructions the
 * guest itself executes, and optionally which guest addresses they ran at.
 *
 * Markers. The 7.2 API cannot read guest registers and sees neither port I/O nor
 * interrupts, but it gives every translated instruction's bytes. A marker is the
 * 7-byte no-op `nopl 0x42504d00+ID(%rax)` (0f 1f 80 ID 4d 50 42): architecturally a
 * NOP (no memory access, no flags), so a program that carries markers behaves the same
 * without the plugin. ID (one byte):
 *   1  BEGIN          start a window on this vCPU
 *   3  BEGIN_PROFILE  start a window that also records the instructions' addresses
 *   2  END            end this vCPU's window and append its record to the output file
 * A window counts the instructions this vCPU executed from the BEGIN marker (included)
 * to the END marker (excluded): everything the vCPU ran in between, interrupts and
 * other tasks included. Two adjacent markers give 1.
 *
 * Output (out=PATH, appended; one write(2) per record, so a reader in the guest sees a
 * whole record as soon as the END marker has executed):
 *   window VCPU COUNT NPROF LOOKUPS MISSES UNCHAINED TRANSLATED[ HAZARDS]\n
 *                                       then NPROF lines "VADDR_HEX EXECUTIONS\n"
 *   HAZARDS (hazards=on only): INDIRECT CALLS RETS RETMISS ILINES DLINES ISITES
 *                              ITARGETS MAXTARGETS FULL
 *   error VCPU TEXT\n                   (END without BEGIN, a second profile, ...)
 *
 * Counting. Each translation block (TB) gets an execution callback that adds the
 * block's instruction count to the running vCPU's counter (a callback, not an inline
 * add: 7.2's inline ops take one fixed address for all vCPUs and are not atomic, so
 * they cannot count per vCPU). A marker in the middle of a block corrects for the
 * block's instructions after it. A block left early by an exception (a page fault
 * inside it) is counted whole: windows meant to be exact must not fault.
 *
 * The 7.2 page-crossing quirk: when an instruction that is not a block's first
 * crosses into the next page, the x86 translator drops it and ends the block before
 * it, but the plugin's view of the block keeps it as its last instruction (it is then
 * also the first of the next block). Counted per block it would be counted twice. Such
 * a last instruction starts in the last 14 bytes of a page; it is left out of the
 * block's count and counted by its own instruction callback instead, which QEMU emits
 * only for instructions actually translated, so a dropped one never fires.
 *
 * Dispatch. Wall time under TCG also depends on how the vCPU gets from one block to
 * the next. A direct branch, or falling through, to a block that starts on the page of
 * the current block's first instruction is chained: generated code jumps straight to
 * generated code. Every other transition (ret, an indirect call or jump, a branch to
 * another page, an interrupt, a block ended by a system instruction) is a lookup: QEMU
 * hashes the target's virtual address into a per-vCPU cache of 4096 recently found
 * blocks, and on a miss translates the address and searches its global hash table, far
 * dearer than a hit. The cache's hash keeps a page's addresses in one
 * group of 64 entries (so that a TLB flush of a page clears one group): two hot targets
 * of one page collide with a chance of 1 in 64 and then miss on every pass. And QEMU
 * never chains a jump into a block that spans two pages (one whose first instruction
 * crosses a page end, see the quirk below): every entry by a direct branch or by falling
 * through goes back to its main loop. A window reports its LOOKUPS, the MISSES of a
 * model of the jump cache (QEMU 7.2's hash, updated on every lookup; it does not know of
 * QEMU's own flushes, after which real misses are more) and the UNCHAINED entries: layout
 * properties of the code, which its instruction count does not see. TRANSLATED is the
 * number of blocks translated while the window was open, by any vCPU: in a loop that ran
 * before, code being rewritten or flushed.
 *
 * Hazards (hazards=on; off by default: it adds a callback to every memory access). What
 * a call costs on hardware beyond its instructions, from the same instruction bytes:
 *   INDIRECT    indirect branches executed: ff /2 /3 (call) and ff /4 /5 (jmp) through a
 *               register or memory, any prefixes (REX, segment, notrack, ...). A thunk is
 *               counted where the indirect transfer happens: the `jmp *%reg` of a plain or
 *               lfence thunk, and for a retpoline (`call 1f; ...; 1: mov %reg,(%rsp);
 *               ret`, its ret also reached through `jmp` to a return thunk) the ret that
 *               consumes the rewritten return address. The retpoline is found by its
 *               pattern: a call whose target block begins with `mov %reg,(%rsp)` marks
 *               the return-stack entry it pushed; the ret that pops it is an indirect
 *               branch whose site is that call.
 *   CALLS RETS  calls (e8, ff /2 /3) and near returns (c3, c2 iw, any prefixes) executed
 *   RETMISS     returns a modelled return stack mispredicts: 16 entries per vCPU,
 *               circular (the 17th call overwrites the oldest), pushed by every call with
 *               the address after it, popped by every near return; a miss is a return to
 *               another address than the popped one, or with nothing to pop (more returns
 *               than remembered calls). The model runs all the time, not only in windows.
 *   ILINES      distinct 64-byte lines (virtual addresses) holding bytes of instructions
 *               the window executed
 *   DLINES      distinct 64-byte lines (virtual addresses) the window's loads and stores
 *               touched (an access across a line end touches both)
 *   ISITES      distinct indirect sites (addresses) the window executed, ITARGETS distinct
 *               (site, target) pairs, MAXTARGETS the most distinct targets of one site
 *   FULL        bits: 1 the instruction-line set, 2 the data-line set, 4 the site table
 *               overflowed (LINES_MAX lines, SITES_MAX sites or pairs); the values
 *               are then lower bounds
 * A block's branch is its last instruction (QEMU ends a block at every call, return and
 * jump). It is retired when the vCPU's next block starts, whose address is the branch's
 * target: so an interrupt taken right after a return or an indirect branch makes the
 * handler look like the target (a false miss, a false target), and exceptions and
 * interrupts neither push nor pop the model's stack (the handler's own calls and returns
 * do). Windows that an interrupt hit are approximate, as their counts are.
 *
 * Arguments: out=PATH (required), hazards=on|off (default off).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

#define MARK_BEGIN 1
#define MARK_END 2
#define MARK_BEGIN_PROFILE 3
#define PAGE 4096u
#define MAX_INSN 15u
#define JC_BITS 12	/* QEMU 7.2's per-vCPU jump cache: 4096 entries */
#define JC_PAGE_BITS (JC_BITS / 2)
#define WINDOW_LINE 512	/* room for a "window" line */
#define RSB_SIZE 16	/* hazards: the modelled return stack's entries */
#define LINE_SHIFT 6	/* 64-byte cache lines */
#define LINES_MAX (1u << 17)	/* hazards: lines a window's set holds (8 MiB) */
#define SITES_MAX (1u << 14)	/* ... indirect sites and (site, target) pairs */

/* What a block's last instruction does (hazards, and "Dispatch": indirect or not). */
enum br {
	BR_NONE, BR_CALL,
	BR_CALL_IND, BR_JMP_IND, BR_RET, BR_RET_FAR, BR_IRET,	/* indirect: after BR_CALL */
};

/* One translation of a block. Never freed: 7.2 tells plugins nothing about flushes. */
struct block {
	uint32_t n;		/* instructions counted by the block callback */
	uint32_t ninsns;	/* all instructions of the translation (incl. a dropped one) */
	uint32_t indirect;	/* it ends in ret or an indirect jump or call */
	uint32_t two_pages;	/* its instructions span two pages */
	uint64_t gen;		/* profile generation this block's counts belong to */
	uint64_t execs;		/* executions while the profiling vCPU was in a window */
	uint64_t last_execs;	/* executions of a page-crossing last instruction */
	uint8_t br;		/* enum br of its last instruction */
	uint8_t poline;		/* it begins with `mov %reg,(%rsp)`: a retpoline's */
	uint64_t br_next;	/* the address after its last instruction */
	uint8_t *isize;		/* hazards: length of each instruction (after vaddr[]) */
	uint64_t vaddr[];	/* address of each instruction */
};

/*
 * A bounded set of keys (a, b), each with a counter: the lines, sites and (site, target)
 * pairs of one window. Cleared at BEGIN through the list of slots in use.
 */
struct lset {
	uint64_t *a, *b;	/* a == EMPTY: a free slot */
	uint32_t *val;
	uint32_t *used;		/* the slots in use, n of them */
	uint32_t n, max, mask;	/* entries, at most max, in 2 * max slots */
	int full;		/* an insertion was refused: counts are lower bounds */
};

#define EMPTY (~0ull)

/* One return-stack entry: the predicted address, the call that pushed it. */
struct rse {
	uint64_t ret, site;
	int poline;		/* the call entered a retpoline: its ret is an indirect branch */
};

/* Hazard state of a vCPU (hazards=on). */
struct hz {
	uint64_t indirect, calls, rets, retmiss;	/* running totals */
	uint64_t indirect0, calls0, rets0, retmiss0;	/* ... at BEGIN */
	struct rse rsb[RSB_SIZE];
	unsigned int top, depth;	/* the newest entry; valid entries (<= RSB_SIZE) */
	int last_ran;		/* the current block's page-crossing last instruction ran */
	int64_t ifrom;		/* the current block's first instruction in the window, or -1 */
	uint64_t dlast;		/* the data line added last */
	struct lset ilines, dlines, sites, pairs;
	uint32_t max_targets;
};

/* A marker or a page-crossing last instruction: what its callback needs. */
struct site {
	struct block *b;
	uint32_t idx;		/* position in the block */
	uint8_t mark;		/* 0: not a marker */
	uint8_t last;		/* the block's possibly dropped last instruction */
};

struct vcpu {
	uint64_t count;		/* instructions executed */
	uint64_t begin;		/* count at this window's BEGIN; valid if open */
	uint64_t lookups, misses, unchained;	/* see "Dispatch" at the top */
	uint64_t lookups0, misses0, unchained0;	/* ... at BEGIN */
	uint64_t trans0;	/* translations (all vCPUs) at BEGIN */
	struct block *prev;	/* the block this vCPU executed last */
	uint64_t *jc;		/* model of QEMU's jump cache: a target address per entry */
	int open;
	int profiling;
	struct block *pblock;	/* the profile window's BEGIN block and position */
	uint32_t pidx;
	int plast;		/* ... which is the block's page-crossing last one */
	struct hz *hz;		/* hazards=on */
	char pad[64];
};

static struct vcpu *vcpus;
static int nvcpus;
static int out_fd = -1;
static int hazards;	/* hazards=on */
/* blocks translated so far, by every vCPU (the 7.2 API does not say which) */
static uint64_t ntrans;

/* The profile: one vCPU at a time; blocks it ran, found through their generation. */
static int prof_vcpu = -1;
static uint64_t prof_gen;
static struct block **touched;
static size_t ntouched, touched_cap;

static void die_oom(void)
{
	static const char msg[] = "bpfmux insn plugin: out of memory\n";

	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

static void emit(const char *buf, size_t len)
{
	while (len) {
		ssize_t w = write(out_fd, buf, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;	/* the guest reader will report the missing record */
		buf += w;
		len -= w;
	}
}

static void touch(struct block *b)
{
	if (b->gen == prof_gen)
		return;
	b->gen = prof_gen;
	b->execs = 0;
	b->last_execs = 0;
	if (ntouched == touched_cap) {
		touched_cap = touched_cap ? touched_cap * 2 : 4096;
		touched = realloc(touched, touched_cap * sizeof(*touched));
		if (!touched)
			die_oom();
	}
	touched[ntouched++] = b;
}

/* QEMU 7.2's tb_jmp_cache_hash_func() for 4 KiB pages (the arithmetic, not its code) */
static unsigned int jc_index(uint64_t pc)
{
	uint64_t t = pc ^ (pc >> (12 - JC_PAGE_BITS));
	unsigned int page_part = (t >> (12 - JC_PAGE_BITS)) & (((1u << JC_BITS) - 1) &
								~((1u << JC_PAGE_BITS) - 1));

	return page_part | (t & ((1u << JC_PAGE_BITS) - 1));
}

/* How the vCPU got from block @p to block @b (see "Dispatch"). */
static void dispatch(struct vcpu *v, const struct block *p, const struct block *b)
{
	uint64_t pc = b->vaddr[0];
	unsigned int i;

	if (!p->indirect && (p->vaddr[0] >> 12) == (pc >> 12)) {
		/* a direct branch or fall-through on the page: chained, unless ... */
		v->unchained += b->two_pages;
		return;
	}
	v->lookups++;
	i = jc_index(pc);
	if (v->jc[i] != pc) {
		v->misses++;
		v->jc[i] = pc;
	}
}

static void lset_init(struct lset *s, uint32_t max)
{
	size_t slots = 2 * (size_t)max;	/* at most half full */

	s->a = malloc(slots * sizeof(*s->a));
	s->b = malloc(slots * sizeof(*s->b));
	s->val = malloc(slots * sizeof(*s->val));
	s->used = malloc(max * sizeof(*s->used));
	if (!s->a || !s->b || !s->val || !s->used)
		die_oom();
	memset(s->a, 0xff, slots * sizeof(*s->a));
	s->n = 0;
	s->max = max;
	s->mask = slots - 1;
	s->full = 0;
}

static void lset_clear(struct lset *s)
{
	for (uint32_t i = 0; i < s->n; i++)
		s->a[s->used[i]] = EMPTY;
	s->n = 0;
	s->full = 0;
}

/* The counter of (a, b), added at 0 if new (*added = 1); NULL if the set is full. */
static uint32_t *lset_add(struct lset *s, uint64_t a, uint64_t b, int *added)
{
	uint64_t h = (a ^ (b * 0xc2b2ae3d27d4eb4full)) * 0x9e3779b97f4a7c15ull;
	uint32_t i = (h >> 32) & s->mask;

	*added = 0;
	for (;; i = (i + 1) & s->mask) {
		if (s->a[i] == a && s->b[i] == b)
			return &s->val[i];
		if (s->a[i] == EMPTY)
			break;
	}
	if (s->n == s->max) {
		s->full = 1;
		return NULL;
	}
	s->a[i] = a;
	s->b[i] = b;
	s->val[i] = 0;
	s->used[s->n++] = i;
	*added = 1;
	return &s->val[i];
}

static void add_line(struct lset *s, uint64_t line)
{
	int added;

	lset_add(s, line, 0, &added);
}

/* The instruction lines of @b's instructions [from, to) (an instruction may span two). */
static void add_ilines(struct hz *h, const struct block *b, uint32_t from, uint32_t to)
{
	uint64_t last = EMPTY;

	for (uint32_t i = from; i < to; i++) {
		uint64_t l0 = b->vaddr[i] >> LINE_SHIFT;
		uint64_t l1 = (b->vaddr[i] + b->isize[i] - 1) >> LINE_SHIFT;

		if (l0 != last)
			add_line(&h->ilines, l0);
		if (l1 != l0)
			add_line(&h->ilines, l1);
		last = l1;
	}
}

/* A window begins: the hazard sets start empty, the totals are remembered. */
static void hz_begin(struct hz *h, uint32_t idx)
{
	h->indirect0 = h->indirect;
	h->calls0 = h->calls;
	h->rets0 = h->rets;
	h->retmiss0 = h->retmiss;
	lset_clear(&h->ilines);
	lset_clear(&h->dlines);
	lset_clear(&h->sites);
	lset_clear(&h->pairs);
	h->max_targets = 0;
	h->dlast = EMPTY;
	h->ifrom = idx;
}

/* An indirect branch from @site to @to. */
static void indirect(struct vcpu *v, uint64_t site, uint64_t to)
{
	struct hz *h = v->hz;
	uint32_t *n;
	int added;

	h->indirect++;
	if (!v->open)
		return;
	if (!lset_add(&h->pairs, site, to, &added) || !added)
		return;
	n = lset_add(&h->sites, site, 0, &added);
	if (n && ++*n > h->max_targets)
		h->max_targets = *n;
}

/*
 * Block @p, which this vCPU just ran, is followed by block @b: @p's instructions go into
 * the window's line set (those in the window), and its branch is modelled, with @b's
 * first address as its target (see "Hazards" at the top).
 */
static void retire(struct vcpu *v, const struct block *p, const struct block *b)
{
	struct hz *h = v->hz;
	uint32_t end = p->n + (p->n < p->ninsns && h->last_ran);
	uint64_t to = b->vaddr[0];
	struct rse *e;

	if (h->ifrom >= 0)
		add_ilines(h, p, h->ifrom, end);
	h->last_ran = 0;
	h->ifrom = v->open ? 0 : -1;
	if (end < p->ninsns)
		return;	/* its page-crossing last instruction was dropped: no branch */
	switch (p->br) {
	case BR_CALL_IND:
		indirect(v, p->vaddr[p->ninsns - 1], to);
		/* fall through */
	case BR_CALL:
		h->calls++;
		h->top = (h->top + 1) % RSB_SIZE;
		h->rsb[h->top] = (struct rse){ p->br_next, p->vaddr[p->ninsns - 1], b->poline };
		if (h->depth < RSB_SIZE)
			h->depth++;
		return;
	case BR_JMP_IND:
		indirect(v, p->vaddr[p->ninsns - 1], to);
		return;
	case BR_RET:
		h->rets++;
		if (!h->depth) {
			h->retmiss++;
			return;
		}
		e = &h->rsb[h->top];
		h->top = (h->top + RSB_SIZE - 1) % RSB_SIZE;
		h->depth--;
		h->retmiss += e->ret != to;
		if (e->poline)
			indirect(v, e->site, to);
		return;
	}
}

/* hazards=on: every load and store (the data lines of an open window). */
static void on_mem(unsigned int cpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata)
{
	struct vcpu *v = &vcpus[cpu];
	struct hz *h = v->hz;
	uint64_t l0, l1;

	(void)udata;
	if (!v->open)
		return;
	l0 = vaddr >> LINE_SHIFT;
	l1 = (vaddr + (1u << qemu_plugin_mem_size_shift(info)) - 1) >> LINE_SHIFT;
	if (l0 != h->dlast)
		add_line(&h->dlines, l0);
	if (l1 != l0)
		add_line(&h->dlines, l1);
	h->dlast = l1;
}

static void on_block(unsigned int cpu, void *udata)
{
	struct block *b = udata;
	struct vcpu *v = &vcpus[cpu];

	if (v->prev) {
		dispatch(v, v->prev, b);
		if (v->hz)
			retire(v, v->prev, b);
	}
	v->prev = b;
	v->count += b->n;
	if ((int)cpu == prof_vcpu) {
		touch(b);
		b->execs++;
	}
}

/* A page-crossing last instruction that was really translated: count it here. */
static void on_last(unsigned int cpu, void *udata)
{
	struct site *s = udata;

	vcpus[cpu].count++;
	if (vcpus[cpu].hz)
		vcpus[cpu].hz->last_ran = 1;
	if ((int)cpu == prof_vcpu) {
		touch(s->b);
		s->b->last_execs++;
	}
}

/* Addresses and executions of the profiled window, folded per address (open addressing). */
struct hist {
	uint64_t *addr;
	int64_t *cnt;
	unsigned char *busy;
	size_t cap, used;
};

static void hist_add(struct hist *h, uint64_t a, int64_t c)
{
	size_t i;

	if (!c)
		return;
	if ((h->used + 1) * 2 > h->cap) {
		struct hist n = { .cap = h->cap ? h->cap * 2 : 4096 };

		n.addr = calloc(n.cap, sizeof(*n.addr));
		n.cnt = calloc(n.cap, sizeof(*n.cnt));
		n.busy = calloc(n.cap, 1);
		if (!n.addr || !n.cnt || !n.busy)
			die_oom();
		for (i = 0; i < h->cap; i++)
			if (h->busy[i])
				hist_add(&n, h->addr[i], h->cnt[i]);
		free(h->addr);
		free(h->cnt);
		free(h->busy);
		*h = n;
	}
	for (i = (a * 0x9e3779b97f4a7c15ull) >> 40 & (h->cap - 1);; i = (i + 1) & (h->cap - 1)) {
		if (h->busy[i] && h->addr[i] == a) {
			h->cnt[i] += c;
			return;
		}
		if (!h->busy[i]) {
			h->busy[i] = 1;
			h->addr[i] = a;
			h->cnt[i] = c;
			h->used++;
			return;
		}
	}
}

/* The "window ..." line of the window of @v that just ended (with its newline). */
static int window_line(char *buf, size_t cap, struct vcpu *v, unsigned int cpu, uint64_t count,
		       size_t nprof)
{
	struct hz *h = v->hz;
	int len;

	len = snprintf(buf, cap, "window %u %" PRIu64 " %zu %" PRIu64 " %" PRIu64 " %" PRIu64
		       " %" PRIu64, cpu, count, nprof, v->lookups - v->lookups0,
		       v->misses - v->misses0, v->unchained - v->unchained0,
		       __atomic_load_n(&ntrans, __ATOMIC_RELAXED) - v->trans0);
	if (h)
		len += snprintf(buf + len, cap - len, " %" PRIu64 " %" PRIu64 " %" PRIu64 " %"
				PRIu64 " %u %u %u %u %u %d", h->indirect - h->indirect0,
				h->calls - h->calls0, h->rets - h->rets0,
				h->retmiss - h->retmiss0, h->ilines.n, h->dlines.n, h->sites.n,
				h->pairs.n, h->max_targets,
				h->ilines.full | h->dlines.full << 1 |
				(h->sites.full | h->pairs.full) << 2);
	len += snprintf(buf + len, cap - len, "\n");
	return len;
}

/*
 * The profile of the window that ends at @b[@idx]: every touched block's executions
 * per address, plus the BEGIN block's instructions from the marker on (its execution
 * started before the window), minus the END block's from the marker on (counted whole,
 * run only up to the marker). Returns the record's text (malloc'ed) and its length.
 */
static char *profile_text(struct vcpu *v, struct block *b, uint32_t idx, uint64_t count,
			  unsigned int cpu, size_t *len)
{
	struct hist h = { 0 };
	size_t cap, off, i, k, nonzero = 0;
	char *buf;

	for (k = 0; k < ntouched; k++) {
		struct block *t = touched[k];

		for (i = 0; i < t->n; i++)
			hist_add(&h, t->vaddr[i], t->execs);
		if (t->n < t->ninsns)
			hist_add(&h, t->vaddr[t->n], t->last_execs);
	}
	for (i = v->pidx; i < v->pblock->n; i++)
		hist_add(&h, v->pblock->vaddr[i], 1);
	if (v->plast)
		hist_add(&h, v->pblock->vaddr[v->pidx], 1);
	for (i = idx; i < b->n; i++)
		hist_add(&h, b->vaddr[i], -1);
	for (i = 0; i < h.cap; i++)
		nonzero += h.busy[i] && h.cnt[i];
	cap = WINDOW_LINE + nonzero * 40;
	buf = malloc(cap);
	if (!buf)
		die_oom();
	off = window_line(buf, cap, v, cpu, count, nonzero);
	for (i = 0; i < h.cap; i++)
		if (h.busy[i] && h.cnt[i])
			off += snprintf(buf + off, cap - off, "%" PRIx64 " %" PRId64 "\n", h.addr[i],
					h.cnt[i]);
	free(h.addr);
	free(h.cnt);
	free(h.busy);
	*len = off;
	return buf;
}

static void on_mark(unsigned int cpu, void *udata)
{
	struct site *s = udata;
	struct vcpu *v = &vcpus[cpu];
	/* instructions before this one: the block callback already added all b->n */
	uint64_t here = v->count - s->b->n + s->idx;
	char line[WINDOW_LINE];
	int len;

	if (s->last) {	/* not in b->n: count it now (here stays correct: idx == n) */
		v->count++;
		if (v->hz)
			v->hz->last_ran = 1;
	}
	switch (s->mark) {
	case MARK_BEGIN:
	case MARK_BEGIN_PROFILE:
		if (v->profiling) {	/* a window restarted: its profile is void */
			prof_vcpu = -1;
			v->profiling = 0;
		}
		v->open = 1;
		v->begin = here;
		v->lookups0 = v->lookups;
		v->misses0 = v->misses;
		v->unchained0 = v->unchained;
		v->trans0 = __atomic_load_n(&ntrans, __ATOMIC_RELAXED);
		if (v->hz)
			hz_begin(v->hz, s->idx);
		if (s->mark == MARK_BEGIN_PROFILE) {
			if (prof_vcpu >= 0) {
				len = snprintf(line, sizeof(line),
					       "error %u a profile window is open on vCPU %d\n", cpu,
					       prof_vcpu);
				emit(line, len);
				v->open = 0;
				return;
			}
			prof_vcpu = cpu;
			prof_gen++;
			ntouched = 0;
			v->profiling = 1;
			v->pblock = s->b;
			v->pidx = s->idx;
			v->plast = s->last;
			/* this block's execution began before the window: not counted */
		}
		return;
	case MARK_END:
		if (!v->open) {
			len = snprintf(line, sizeof(line), "error %u END without BEGIN\n", cpu);
			emit(line, len);
			return;
		}
		v->open = 0;
		if (v->hz && v->hz->ifrom >= 0) {	/* this block's lines up to END */
			add_ilines(v->hz, s->b, v->hz->ifrom, s->idx);
			v->hz->ifrom = -1;
		}
		if (v->profiling) {
			size_t n;
			char *buf;

			/* the END block's execution is in the touched list already */
			buf = profile_text(v, s->b, s->idx, here - v->begin, cpu, &n);
			prof_vcpu = -1;
			v->profiling = 0;
			emit(buf, n);
			free(buf);
			return;
		}
		len = window_line(line, sizeof(line), v, cpu, here - v->begin, 0);
		emit(line, len);
		return;
	default:
		len = snprintf(line, sizeof(line), "error %u unknown marker id %u\n", cpu, s->mark);
		emit(line, len);
	}
}

static int marker_id(const struct qemu_plugin_insn *insn)
{
	static const unsigned char pre[3] = { 0x0f, 0x1f, 0x80 }, post[3] = { 0x4d, 0x50, 0x42 };
	const unsigned char *p = qemu_plugin_insn_data(insn);

	if (qemu_plugin_insn_size(insn) != 7 || memcmp(p, pre, 3) || memcmp(p + 4, post, 3))
		return 0;
	return p[3] ? p[3] : -1;
}

/* A legacy prefix (operand/address size, segment, lock, rep) or REX. */
static int is_prefix(unsigned char c)
{
	return c == 0x66 || c == 0x67 || c == 0xf0 || c == 0xf2 || c == 0xf3 || c == 0x26 ||
	       c == 0x2e || c == 0x36 || c == 0x3e || c == 0x64 || c == 0x65 || (c & 0xf0) == 0x40;
}

/* What @insn is as a branch (enum br), its prefixes skipped. */
static int branch_of(const struct qemu_plugin_insn *insn)
{
	const unsigned char *p = qemu_plugin_insn_data(insn);
	size_t n = qemu_plugin_insn_size(insn), i = 0;
	unsigned int reg;

	while (i < n && is_prefix(p[i]))
		i++;
	if (i >= n)
		return BR_NONE;
	switch (p[i]) {
	case 0xe8:
		return BR_CALL;
	case 0xc3:
	case 0xc2:
		return BR_RET;
	case 0xcb:
	case 0xca:
		return BR_RET_FAR;
	case 0xcf:
		return BR_IRET;
	case 0xff:
		if (i + 1 >= n)
			return BR_NONE;
		reg = (p[i + 1] >> 3) & 7;
		/* /3 and /5 (far) take a memory operand only */
		if ((reg == 3 || reg == 5) && (p[i + 1] >> 6) == 3)
			return BR_NONE;
		if (reg == 2 || reg == 3)
			return BR_CALL_IND;
		if (reg == 4 || reg == 5)
			return BR_JMP_IND;
		return BR_NONE;
	}
	return BR_NONE;
}

/* `mov %reg,(%rsp)` (REX.W [R] 89 /r, ModRM rm=SIB, SIB base=rsp no index): a retpoline */
static int is_poline_mov(const struct qemu_plugin_insn *insn)
{
	const unsigned char *p = qemu_plugin_insn_data(insn);

	return qemu_plugin_insn_size(insn) == 4 && (p[0] == 0x48 || p[0] == 0x4c) &&
	       p[1] == 0x89 && (p[2] & 0xc7) == 0x04 && p[3] == 0x24;
}

static struct site *new_site(struct block *b, uint32_t idx, int mark, int last)
{
	struct site *s = malloc(sizeof(*s));

	if (!s)
		die_oom();
	*s = (struct site){ .b = b, .idx = idx, .mark = mark, .last = last };
	return s;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t n = qemu_plugin_tb_n_insns(tb), i;
	struct block *b = malloc(sizeof(*b) + n * (sizeof(b->vaddr[0]) + 1));
	struct qemu_plugin_insn *lastinsn = qemu_plugin_tb_get_insn(tb, n - 1);
	int last = 0;

	(void)id;

	__atomic_fetch_add(&ntrans, 1, __ATOMIC_RELAXED);
	if (!b)
		die_oom();
	b->ninsns = n;
	b->gen = 0;
	b->isize = (uint8_t *)&b->vaddr[n];
	for (i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);

		b->vaddr[i] = qemu_plugin_insn_vaddr(insn);
		b->isize[i] = qemu_plugin_insn_size(insn);
		if (hazards)	/* the data lines of a window */
			qemu_plugin_register_vcpu_mem_cb(insn, on_mem, QEMU_PLUGIN_CB_NO_REGS,
							 QEMU_PLUGIN_MEM_RW, NULL);
	}
	/* a last instruction that may cross into the next page (see the top comment) */
	if (n > 1 && (b->vaddr[n - 1] & (PAGE - 1)) > PAGE - MAX_INSN)
		last = 1;
	b->n = n - last;
	b->br = branch_of(lastinsn);
	b->br_next = b->vaddr[n - 1] + b->isize[n - 1];
	b->poline = is_poline_mov(qemu_plugin_tb_get_insn(tb, 0));
	/* a dropped last instruction: the block falls through into the next page */
	b->indirect = !last && b->br > BR_CALL;
	b->two_pages = (b->vaddr[0] & (PAGE - 1)) +
		       qemu_plugin_insn_size(qemu_plugin_tb_get_insn(tb, 0)) > PAGE ||
		       (b->vaddr[0] ^ b->vaddr[b->n - 1]) >= PAGE;
	qemu_plugin_register_vcpu_tb_exec_cb(tb, on_block, QEMU_PLUGIN_CB_NO_REGS, b);
	for (i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		int mark = marker_id(insn), is_last = last && i == n - 1;

		if (mark)
			qemu_plugin_register_vcpu_insn_exec_cb(insn, on_mark, QEMU_PLUGIN_CB_NO_REGS,
							       new_site(b, i, mark < 0 ? 0 : mark,
									is_last));
		else if (is_last)
			qemu_plugin_register_vcpu_insn_exec_cb(insn, on_last, QEMU_PLUGIN_CB_NO_REGS,
							       new_site(b, i, 0, 1));
	}
}

static void usage_error(const char *why)
{
	fprintf(stderr, "bpfmux insn plugin: %s (arguments: out=PATH [hazards=on|off])\n", why);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
					   int argc, char **argv)
{
	const char *out = NULL;

	for (int i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "out=", 4)) {
			out = argv[i] + 4;
		} else if (!strcmp(argv[i], "hazards=on")) {
			hazards = 1;
		} else if (!strcmp(argv[i], "hazards=off")) {
			hazards = 0;
		} else {
			char why[256];

			snprintf(why, sizeof(why), "unknown argument '%s'", argv[i]);
			usage_error(why);
			return 1;
		}
	}
	if (!out || !*out) {
		usage_error("no output file");
		return 1;
	}
	if (!info->system_emulation || strcmp(info->target_name, "x86_64")) {
		fprintf(stderr, "bpfmux insn plugin: needs qemu-system-x86_64 (this is %s%s)\n",
			info->target_name, info->system_emulation ? "" : ", user mode");
		return 1;
	}
	out_fd = open(out, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (out_fd < 0) {
		fprintf(stderr, "bpfmux insn plugin: %s: %s\n", out, strerror(errno));
		return 1;
	}
	nvcpus = info->system.max_vcpus;
	vcpus = calloc(nvcpus, sizeof(*vcpus));
	if (!vcpus)
		die_oom();
	for (int i = 0; i < nvcpus; i++) {
		vcpus[i].jc = calloc(1u << JC_BITS, sizeof(*vcpus[i].jc));
		if (!vcpus[i].jc)
			die_oom();
		if (!hazards)
			continue;
		vcpus[i].hz = calloc(1, sizeof(*vcpus[i].hz));
		if (!vcpus[i].hz)
			die_oom();
		lset_init(&vcpus[i].hz->ilines, LINES_MAX);
		lset_init(&vcpus[i].hz->dlines, LINES_MAX);
		lset_init(&vcpus[i].hz->sites, SITES_MAX);
		lset_init(&vcpus[i].hz->pairs, SITES_MAX);
		vcpus[i].hz->ifrom = -1;
	}
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
	return 0;
}
