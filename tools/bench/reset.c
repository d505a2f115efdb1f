// SPDX-License-Identifier: Apache-2.0
/*
 * reset.c - `faultline bench reset`: take a region restored in-process
 * back to its snapshot after a writer dirtied D of it, with
 * fl_engine_reset() (lazy and eager) and the ways around it: one
 * MADV_DONTNEED per dirty page, one over the whole region, and a new
 * engine over fresh memory (a full restore); alone and with a second
 * thread busy on the other CPU (each TLB flush an IPI), in a 1 GiB region
 * and one 4x larger with the same dirty pages.  Cited: the arm64 KVM
 * thread on flushing unmap_stage2_range by range (1.2 s per page, 16 ms
 * ranged, for 192 GiB) and ignition's snapshot fuzzer on Apple's
 * Hypervisor.framework (~50 dirty 16 KiB pages reset in 36 us p50).
 *
 * Decisions: the snapshot is a memfd holding the bench pattern (no disk
 * in the way); the engines run without background restore, so a lazy
 * reset stays lazy until a page is touched and the first touch can be
 * timed.  The per-page and whole-region references drop engine-registered
 * memory (each drop pays the REMOVE event the engine's thread must read)
 * between the engine's internal reset_begin/reset_end, which is what
 * makes a dropped page read the snapshot again instead of zeros; they
 * are timed with that bookkeeping.  After every case the whole region
 * must hash (XXH3) to the pattern; a mismatch is reported at once and
 * makes the command exit 1.
 *
 * Decision: two phases.  Under shadow paging a fill or a flush costs more
 * the more this process has mapped (a full restore took twice as long
 * with the 4x region beside it), so the main cases run with the 1x region
 * alone; the 4x region and the plain memory come after, and the rows that
 * compare with them are measured again beside them ("1x region").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

#include "bench.h"
#include "run.h"
#include "faultline.h"
#include "engine/reset.h"

#define PG	4096ull

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ	22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE	23
#endif

/* The anchor's figures (ignition, Apple M3, 2026-06-14). */
#define ANCHOR_P50_US	36.0
/* The cited rollback: 192 GiB, 1.2 s per page, 16 ms ranged, as us/MiB. */
#define CITED_PERPAGE	(1.2e6 / (192.0 * 1024))
#define CITED_RANGED	(16e3 / (192.0 * 1024))

enum method {
	M_LAZY,		/* fl_engine_reset(e, 0) */
	M_EAGER,	/* fl_engine_reset(e, FL_RESET_EAGER) */
	M_PERPAGE,	/* one MADV_DONTNEED per dirty page, engine memory */
	M_PLAIN,	/* the same on memory no uffd has registered */
	M_WHOLE,	/* one MADV_DONTNEED of the region, lazy refill */
	M_FULL,		/* a new engine over fresh memory, every page in */
};

/* A dirty set: the pages the writer dirties, as offsets in the region. */
struct dset {
	char key[16];		/* "16m_s" */
	char name[32];		/* "16 MiB scattered" */
	uint64_t bytes;
	uint64_t npages;
	uint64_t *off;		/* ascending */
	bool scattered;		/* 4 KiB pages, none adjacent */
};

/* A region restored by an engine that tracks writes (or plain memory). */
struct rmem {
	uint8_t *mem;
	uint64_t len;
	struct fl_engine *e;
	uint64_t sum;		/* XXH3 of the pattern for [0, len) */
	int track;		/* FL_TRACK_* */
	bool used;
};

struct rcase {
	char key[40];
	char label[48];
	int set;		/* index in ctx.sets; -1: none (full) */
	enum method m;
	bool busy;
	bool big;		/* the 4x region */
	int phase;		/* 1: the 1x region alone; 2: with the others */
	int iters;		/* resets per run (p50 of them), else 1 */
	int row;		/* its table row */
};

/* One run of one case. */
struct meas {
	double sec;		/* the timed operation; iters: its p50 */
	double mean;		/* iters: the mean, else sec */
	double sec2;		/* M_WHOLE: drop, first touch, refill all */
	double touch;		/* first touch of the dirty pages, s/page */
	double scan, drop, refill;	/* s, the engine's reset counters */
	double pages, runs;	/* pages dropped, drop runs (or calls) */
	double serve;		/* M_FULL: until the engine serves, + unmap */
	double write;		/* the writer's dirtying, s/page */
	bool ok;
};

#define MAX_SETS	12
#define MAX_CASES	56

struct ctx {
	const struct bench_opts *o;
	uint64_t len, big_len;
	int memfd;
	struct fl_source *src, *src4;	/* [0, len) and [0, big_len) */
	uint64_t sum_len, sum_big;
	XXH3_state_t *st4;		/* the hash of [0, len), to go on */
	struct rmem r1, r4, plain;
	int nsets;
	struct dset sets[MAX_SETS];
	int ncases;
	struct rcase cases[MAX_CASES];
	int runs, iters;
	int phase;			/* the phase being measured */
	struct meas (*res)[MAX_CASES];	/* [run][case] */
	double *isamp[MAX_CASES];	/* iters > 1: every reset, s */
	int nisamp[MAX_CASES];
};

/* ---- the snapshot ------------------------------------------------------- */

static int open_source(struct ctx *c, struct fl_source **out)
{
	char path[64];
	int ret;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", c->memfd);
	ret = fl_source_open(path, out);
	if (ret < 0)
		fprintf(stderr, "faultline bench reset: %s\n", fl_last_error());
	return ret;
}

/*
 * A memfd holding the pattern for [0, len), opened as a source through
 * /proc/self/fd, and its XXH3.
 */
static int make_source(struct ctx *c)
{
	size_t bs = 2 * MIB;
	uint8_t *buf = malloc(bs);
	int ret = 0;

	c->st4 = XXH3_createState();
	if (!c->st4 || !buf) {
		ret = -ENOMEM;
		goto out;
	}
	c->memfd = memfd_create("faultline-bench-reset", MFD_CLOEXEC);
	if (c->memfd < 0 || ftruncate(c->memfd, (off_t)c->len) < 0) {
		ret = -errno;
		goto out;
	}
	XXH3_64bits_reset(c->st4);
	for (uint64_t off = 0; off < c->len; off += bs) {
		size_t n = c->len - off < bs ? c->len - off : bs;

		bench_pattern(buf, n, off);
		if (pwrite(c->memfd, buf, n, (off_t)off) != (ssize_t)n) {
			ret = errno ? -errno : -EIO;
			goto out;
		}
		XXH3_64bits_update(c->st4, buf, n);
	}
	c->sum_len = XXH3_64bits_digest(c->st4);
	ret = open_source(c, &c->src);
out:
	free(buf);
	return ret;
}

/*
 * The 4x region's snapshot: the same file grown to big_len, the rest a
 * hole (zeros: writing 3 GiB more of pattern into fresh page cache costs
 * this machine ~2 s a GiB, and the reset does not look at contents).
 */
static int make_source4(struct ctx *c)
{
	size_t bs = 2 * MIB;
	uint8_t *zero = calloc(1, bs);

	if (!zero)
		return -ENOMEM;
	if (ftruncate(c->memfd, (off_t)c->big_len) < 0) {
		free(zero);
		return -errno;
	}
	for (uint64_t off = c->len; off < c->big_len; off += bs)
		XXH3_64bits_update(c->st4, zero, bs);
	c->sum_big = XXH3_64bits_digest(c->st4);
	free(zero);
	return open_source(c, &c->src4);
}

/* ---- regions ------------------------------------------------------------ */

static bool region_ok(const struct rmem *m)
{
	return bench_sum(m->mem, m->len) == m->sum;
}

/* The first page of m that differs from the pattern, or m->len. */
static uint64_t first_bad(const struct rmem *m)
{
	uint8_t want[PG];

	for (uint64_t off = 0; off < m->len; off += PG) {
		bench_pattern(want, PG, off);
		if (memcmp(m->mem + off, want, PG))
			return off;
	}
	return m->len;
}

/* Say loudly which page is wrong, and what it holds. */
static void report_bad(const struct rmem *m, const char *what)
{
	uint64_t off = first_bad(m);

	if (off == m->len) {
		fprintf(stderr, "faultline bench reset: %s: region hash wrong "
			"but every page matches on a second look\n", what);
		return;
	}
	fprintf(stderr, "faultline bench reset: %s: WRONG BYTES: page at "
		"offset 0x%llx of the %llu MiB region differs from the "
		"snapshot (word 0: %016llx, want %016llx; word 1: %016llx)\n",
		what, (unsigned long long)off,
		(unsigned long long)(m->len / MIB),
		(unsigned long long)*(uint64_t *)(m->mem + off),
		(unsigned long long)~(off >> 12),
		(unsigned long long)*(uint64_t *)(m->mem + off + 8));
}

/*
 * A region of len bytes served from c->src by an engine that tracks
 * writes, every page in (write-protected) and checked.
 */
static int rmem_setup(struct fl_source *src, struct rmem *m, uint64_t len,
		      uint64_t sum)
{
	struct fl_engine_opts eo = { .uffd = -1,
				     .flags = FL_ENGINE_NO_BACKGROUND };
	struct fl_region_desc d = { .len = len, .page_size = PG,
				    .flags = FL_REGION_REGISTER };
	int ret;

	m->len = len;
	m->sum = sum;
	m->mem = bench_map(len);
	if (!m->mem)
		return -ENOMEM;
	madvise(m->mem, len, MADV_NOHUGEPAGE);
	d.addr = (uintptr_t)m->mem;
	ret = fl_engine_create(&eo, &m->e);
	ret = ret ? ret : fl_engine_add_region(m->e, &d, src);
	if (!ret) {
		ret = fl_engine_track_writes(m->e);
		if (ret > 0)
			m->track = ret;
	}
	ret = ret < 0 ? ret : fl_engine_start(m->e, 1);
	if (ret < 0) {
		fprintf(stderr, "faultline bench reset: %s\n", fl_last_error());
		return ret;
	}
	/* Every page in, by faults in order (the engine's chunks grow). */
	if (madvise(m->mem, len, MADV_POPULATE_READ) < 0)
		return -errno;
	ret = fl_engine_reset(m->e, 0);
	if (ret != 0) {
		fprintf(stderr, "faultline bench reset: a reset after the "
			"restore, nothing written, reset %d pages%s%s\n", ret,
			ret < 0 ? ": " : "", ret < 0 ? fl_last_error() : "");
		return ret < 0 ? ret : -EPROTO;
	}
	if (!region_ok(m)) {
		report_bad(m, "the restore before any reset");
		return -EPROTO;
	}
	m->used = true;
	return 0;
}

/* Plain anonymous memory of len bytes, populated (the M_PLAIN case). */
static int plain_setup(struct rmem *m, uint64_t len)
{
	m->len = len;
	m->mem = bench_map(len);
	if (!m->mem)
		return -ENOMEM;
	madvise(m->mem, len, MADV_NOHUGEPAGE);
	m->used = true;
	return bench_prefault(m->mem, len);
}

static void rmem_free(struct rmem *m)
{
	if (m->e)
		fl_engine_destroy(m->e);
	bench_unmap(m->mem, m->len);
	memset(m, 0, sizeof(*m));
}

/* ---- dirty sets --------------------------------------------------------- */

static int add_set(struct ctx *c, uint64_t bytes, bool scattered,
		   const char *key, const char *name)
{
	struct dset *s = &c->sets[c->nsets];
	uint64_t span = c->len / PG;

	if (c->nsets >= MAX_SETS)
		return -ENOSPC;
	s->bytes = bytes;
	s->npages = bytes / PG;
	s->scattered = scattered;
	snprintf(s->key, sizeof(s->key), "%s", key);
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->off = malloc(s->npages * sizeof(*s->off));
	if (!s->off)
		return -ENOMEM;
	/*
	 * Scattered: evenly spread over the region, no two adjacent (each
	 * page a run of its own, the worst case for batching); contiguous:
	 * one run from a quarter into the region.
	 */
	for (uint64_t i = 0; i < s->npages; i++)
		s->off[i] = scattered ? (i * span / s->npages) * PG :
			    (span / 4) * PG + i * PG;
	return c->nsets++;
}

static int find_set(const struct ctx *c, const char *key)
{
	for (int i = 0; i < c->nsets; i++)
		if (!strcmp(c->sets[i].key, key))
			return i;
	return -1;
}

static void dirty(const struct rmem *m, const struct dset *s)
{
	/* Word 1 of a pattern page is never zero. */
	for (uint64_t i = 0; i < s->npages; i++)
		*(volatile uint64_t *)(m->mem + s->off[i] + 8) = 0;
}

/* Read a word of every dirty page, in order: seconds per page. */
static double touch(const struct rmem *m, const struct dset *s)
{
	double t0 = bench_now();

	for (uint64_t i = 0; i < s->npages; i++)
		(void)*(volatile uint64_t *)(m->mem + s->off[i]);
	return (bench_now() - t0) / (double)s->npages;
}

/* The dirty pages hold the snapshot again. */
static bool set_ok(const struct rmem *m, const struct dset *s)
{
	uint8_t want[PG];

	for (uint64_t i = 0; i < s->npages; i++) {
		bench_pattern(want, PG, s->off[i]);
		if (memcmp(m->mem + s->off[i], want, PG))
			return false;
	}
	return true;
}

/* M_PLAIN: every dropped page gone (mincore) and reading zeros. */
static bool plain_dropped(const struct rmem *m, const struct dset *s)
{
	unsigned char v;

	for (uint64_t i = 0; i < s->npages; i++) {
		const uint64_t *w = (const uint64_t *)(m->mem + s->off[i]);

		if (mincore((void *)w, PG, &v) < 0 || (v & 1))
			return false;
		for (int k = 0; k < 512; k++)
			if (w[k])
				return false;
	}
	return true;
}

/* ---- the cases ---------------------------------------------------------- */

static void add_case(struct ctx *c, const char *set, enum method m,
		     bool busy, bool big, int phase)
{
	static const char *const mkey[] = {
		[M_LAZY] = "lazy", [M_EAGER] = "eager",
		[M_PERPAGE] = "perpage", [M_PLAIN] = "plain_perpage",
		[M_WHOLE] = "whole", [M_FULL] = "full",
	};
	static const char *const mlabel[] = {
		[M_LAZY] = "reset lazy", [M_EAGER] = "reset eager",
		[M_PERPAGE] = "DONTNEED per page",
		[M_PLAIN] = "DONTNEED/page, no uffd",
		[M_WHOLE] = "DONTNEED all, drop",
		[M_FULL] = "full restore (new engine)",
	};
	struct rcase *k = &c->cases[c->ncases];
	int si = set ? find_set(c, set) : -1;
	char key[40], name[32] = "";

	if (set && si < 0)
		return;
	if (c->ncases >= MAX_CASES) {
		fprintf(stderr, "faultline bench reset: more than %d cases\n",
			MAX_CASES);
		return;
	}
	if (set)
		memcpy(name, c->sets[si].name, sizeof(name));
	const char *rg = big ? "_4x" : phase == 2 && m != M_PLAIN ? "_1x" : "";

	snprintf(key, sizeof(key), "%s%s%s%s%s", mkey[m], set ? "_" : "",
		 set ? set : "", rg, busy ? "_busy" : "");
	if (!bench_selected(c->o, key))
		return;
	memset(k, 0, sizeof(*k));
	memcpy(k->key, key, sizeof(key));
	snprintf(k->label, sizeof(k->label), "%s%s%s%s%s", mlabel[m],
		 set ? ", " : "", name,
		 big ? ", 4x region" : *rg ? ", 1x region" : "",
		 busy ? ", busy" : "");
	k->set = si;
	k->phase = phase;
	k->m = m;
	k->busy = busy;
	k->big = big;
	k->iters = set && !strcmp(set, "64p") &&
		   (m == M_LAZY || m == M_EAGER) ? c->iters : 1;
	c->ncases++;
}

static int find_case(const struct ctx *c, const char *key)
{
	for (int i = 0; i < c->ncases; i++)
		if (!strcmp(c->cases[i].key, key))
			return i;
	return -1;
}

/* The dirty sets and the cases, for region size c->len. */
static int plan(struct ctx *c)
{
	static const uint64_t dlist[] = { 1 * MIB, 16 * MIB, 128 * MIB,
					  512 * MIB };
	uint64_t pct = c->len / PG / 100;
	char key[24], name[48];
	int ret;

	if ((ret = add_set(c, 64 * PG, true, "64p", "64 pages")) < 0 ||
	    (ret = add_set(c, pct * PG, true, "1pct", "1% scattered")) < 0)
		return ret;
	for (size_t i = 0; i < sizeof(dlist) / sizeof(*dlist); i++) {
		uint64_t d = dlist[i];

		if (d > c->len / 2 || (c->o->quick && d > 16 * MIB))
			continue;
		for (int s = 0; s < 2; s++) {
			snprintf(key, sizeof(key), "%llum_%c",
				 (unsigned long long)(d / MIB), s ? 's' : 'c');
			snprintf(name, sizeof(name), "%llu MiB %s",
				 (unsigned long long)(d / MIB),
				 s ? "scattered" : "contiguous");
			if ((ret = add_set(c, d, s, key, name)) < 0)
				return ret;
		}
	}

	/* Phase 1: the 1x region alone (and a full restore's memory). */
	add_case(c, NULL, M_FULL, false, false, 1);	/* the reference */
	add_case(c, "64p", M_LAZY, false, false, 1);
	add_case(c, "64p", M_EAGER, false, false, 1);
	add_case(c, "1pct", M_LAZY, false, false, 1);
	add_case(c, "1pct", M_EAGER, false, false, 1);
	add_case(c, "1pct", M_PERPAGE, false, false, 1);
	add_case(c, "1pct", M_WHOLE, false, false, 1);
	for (int i = 2; i < c->nsets; i++) {
		add_case(c, c->sets[i].key, M_LAZY, false, false, 1);
		add_case(c, c->sets[i].key, M_EAGER, false, false, 1);
		if (c->sets[i].bytes <= 16 * MIB)
			add_case(c, c->sets[i].key, M_PERPAGE, false, false, 1);
	}
	/* A second thread of this process busy on the other CPU. */
	add_case(c, NULL, M_FULL, true, false, 1);
	add_case(c, "64p", M_LAZY, true, false, 1);
	add_case(c, "1pct", M_LAZY, true, false, 1);
	add_case(c, "1pct", M_EAGER, true, false, 1);
	add_case(c, "1pct", M_PERPAGE, true, false, 1);
	add_case(c, "1pct", M_WHOLE, true, false, 1);
	add_case(c, "128m_c", M_LAZY, true, false, 1);
	add_case(c, "128m_s", M_LAZY, true, false, 1);
	/*
	 * Phase 2: the 1x region beside one 4x as large (the same dirty
	 * pages in both, measured side by side) and plain memory for the
	 * drops without a uffd.
	 */
	static const char *const grow[] = { "64p", "1pct", "16m_s", "128m_c" };

	for (size_t i = 0; i < sizeof(grow) / sizeof(*grow); i++) {
		const char *g = grow[i];

		if (c->o->quick && !strcmp(g, "128m_c"))
			g = "16m_c";
		add_case(c, g, M_LAZY, false, false, 2);
		add_case(c, g, M_LAZY, false, true, 2);
	}
	add_case(c, "1pct", M_EAGER, false, false, 2);
	add_case(c, "1pct", M_EAGER, false, true, 2);
	add_case(c, "1pct", M_PERPAGE, false, false, 2);
	add_case(c, "1pct", M_PLAIN, false, false, 2);
	return 0;
}

/* ---- one run of a case -------------------------------------------------- */

static void stats_delta(const struct fl_stats *a, const struct fl_stats *b,
			struct meas *r)
{
	r->scan += (double)(b->reset_scan_ns - a->reset_scan_ns) / 1e9;
	r->drop += (double)(b->reset_drop_ns - a->reset_drop_ns) / 1e9;
	r->refill += (double)(b->reset_refill_ns - a->reset_refill_ns) / 1e9;
	r->pages += (double)(b->pages_reset - a->pages_reset);
	r->runs += (double)(b->reset_runs - a->reset_runs);
}

/* The timed operation of m on region mm and set s: seconds or -errno. */
static double op(struct rmem *mm, const struct dset *s, enum method m)
{
	uintptr_t base = (uintptr_t)mm->mem;
	double t0 = bench_now();
	int ret = 0;

	switch (m) {
	case M_LAZY:
	case M_EAGER:
		ret = fl_engine_reset(mm->e, m == M_EAGER ? FL_RESET_EAGER : 0);
		if (ret >= 0)
			ret = 0;
		else
			fprintf(stderr, "faultline bench reset: "
				"fl_engine_reset: %s\n", fl_last_error());
		break;
	case M_PERPAGE:
		/*
		 * Mark them reset (so the REMOVE each drop raises leaves
		 * them to be filled from the snapshot), drop each with its
		 * own call, then turn them missing: the engine counts
		 * resets under way, so one end per begin (all but the last
		 * only count down).
		 */
		for (uint64_t i = 0; i < s->npages; i++)
			engine_reset_begin(mm->e, base + s->off[i], PG);
		for (uint64_t i = 0; i < s->npages && !ret; i++)
			if (madvise(mm->mem + s->off[i], PG, MADV_DONTNEED))
				ret = -errno;
		for (uint64_t i = 0; i < s->npages; i++)
			engine_reset_end(mm->e, base, PG);
		break;
	case M_PLAIN:
		for (uint64_t i = 0; i < s->npages && !ret; i++)
			if (madvise(mm->mem + s->off[i], PG, MADV_DONTNEED))
				ret = -errno;
		break;
	case M_WHOLE: {
		int64_t n = engine_reset_range(mm->e, base, mm->len);

		ret = n < 0 ? (int)n : 0;
		break;
	}
	default:
		ret = -EINVAL;
	}
	return ret < 0 ? ret : bench_now() - t0;
}

/* M_FULL: a new engine over fresh memory until every page is in. */
static int run_full(struct ctx *c, struct meas *r)
{
	struct fl_engine_opts eo = { .uffd = -1 };
	struct fl_region_desc d = { .len = c->len, .page_size = PG,
				    .flags = FL_REGION_REGISTER };
	struct rmem m = { .len = c->len, .sum = c->sum_len };
	double t0 = bench_now(), t1, t2, t3;
	int ret;

	m.mem = bench_map(c->len);
	if (!m.mem)
		return -ENOMEM;
	madvise(m.mem, c->len, MADV_NOHUGEPAGE);
	d.addr = (uintptr_t)m.mem;
	ret = fl_engine_create(&eo, &m.e);
	ret = ret ? ret : fl_engine_add_region(m.e, &d, c->src);
	ret = ret ? ret : fl_engine_start(m.e, 1);
	t1 = bench_now();
	ret = ret ? ret : fl_engine_wait(m.e, 120000);
	t2 = bench_now();
	if (ret < 0) {
		fprintf(stderr, "faultline bench reset: full restore: %s\n",
			fl_last_error());
	} else {
		r->ok = region_ok(&m);
		if (!r->ok)
			report_bad(&m, "full restore");
	}
	/* What the restore replaces: the old engine and memory go. */
	t3 = bench_now();
	rmem_free(&m);
	t3 = bench_now() - t3;
	r->sec = t2 - t0 + t3;
	r->serve = t1 - t0 + t3;
	r->pages = (double)(c->len / PG);
	return ret;
}

static int run_case(struct ctx *c, int ci, struct meas *r)
{
	struct rcase *k = &c->cases[ci];
	struct rmem *mm = k->m == M_PLAIN ? &c->plain : k->big ? &c->r4 :
			  &c->r1;
	const struct dset *s = k->set >= 0 ? &c->sets[k->set] : NULL;
	struct bench_busy busy = { 0 };
	struct fl_stats a, b;
	double sum_touch = 0, t;
	int ret = 0;

	memset(r, 0, sizeof(*r));
	r->ok = true;
	if (k->m == M_FULL) {
		if (k->busy && (ret = bench_busy_start(&busy)) < 0)
			return ret;
		ret = run_full(c, r);
		bench_busy_stop(&busy);
		return ret;
	}
	if (k->busy && (ret = bench_busy_start(&busy)) < 0)
		return ret;
	for (int it = 0; it < k->iters; it++) {
		t = bench_now();
		dirty(mm, s);
		r->write += (bench_now() - t) / (double)s->npages;
		if (mm->e)
			fl_engine_stats(mm->e, &a);
		t = op(mm, s, k->m);
		if (t < 0) {
			bench_busy_stop(&busy);
			return (int)t;
		}
		if (mm->e) {
			fl_engine_stats(mm->e, &b);
			stats_delta(&a, &b, r);
		}
		if (k->iters > 1)
			c->isamp[ci][c->nisamp[ci]++] = t;
		else
			r->sec = t;
		if (k->m == M_PLAIN) {
			r->ok = plain_dropped(mm, s);
			if (!r->ok)
				fprintf(stderr, "faultline bench reset: %s: a "
					"dropped page is still there or not "
					"zero\n", k->label);
			r->pages = r->runs = (double)s->npages;
			/* Present again for the next run. */
			if (bench_prefault(mm->mem, mm->len) < 0)
				return -errno;
			return 0;
		}
		sum_touch += touch(mm, s);
		/* What a user of one drop pays next: every page again. */
		if (k->m == M_WHOLE && !k->busy) {
			double t4 = bench_now();

			if (madvise(mm->mem, mm->len, MADV_POPULATE_READ) < 0)
				return -errno;
			r->sec2 = t + sum_touch * (double)s->npages +
				  bench_now() - t4;
		}
		if (k->m == M_WHOLE) {
			r->pages = (double)(mm->len / PG);
			r->runs = 1;
		} else if (k->m == M_PERPAGE) {
			r->pages = r->runs = (double)s->npages;
		}
		if (k->iters > 1 && !set_ok(mm, s)) {
			r->ok = false;
			report_bad(mm, k->label);
			break;
		}
	}
	bench_busy_stop(&busy);
	r->mean = r->sec;
	r->touch = sum_touch / k->iters;
	r->write /= k->iters;
	if (k->iters > 1) {
		double *v = c->isamp[ci] + c->nisamp[ci] - k->iters;
		double tmp[k->iters];

		memcpy(tmp, v, sizeof(tmp));
		r->sec = bench_median(tmp, k->iters);
		/* Shares of the mean (ratios of sums), not of the p50. */
		r->mean = 0;
		for (int it = 0; it < k->iters; it++)
			r->mean += v[it] / k->iters;
		r->scan /= k->iters;
		r->drop /= k->iters;
		r->refill /= k->iters;
		r->pages /= k->iters;
		r->runs /= k->iters;
	}
	if (r->ok && !region_ok(mm)) {
		r->ok = false;
		report_bad(mm, k->label);
	}
	/*
	 * The references dropped pages behind the write tracking's back: a
	 * reset now finds what it still holds as written (none with
	 * WP_ASYNC, whose bits went with the pages).  Then every page in
	 * again, so the next case starts where this one did.
	 */
	if (k->m == M_PERPAGE || k->m == M_WHOLE) {
		ret = fl_engine_reset(mm->e, 0);
		if (ret > 0 && madvise(mm->mem, mm->len, MADV_POPULATE_READ))
			return -errno;
		if (ret < 0)
			return ret;
		ret = 0;
	}
	return ret;
}

/* ---- the table ---------------------------------------------------------- */

enum col { C_PAGES, C_RUNS, C_USMIB, C_TOUCH, C_SCAN, C_DROP, C_REFILL,
	   C_N };

static const struct bench_col cols[C_N] = {
	[C_PAGES] = { "pages_dropped", "pages", "%*.0f", 7 },
	[C_RUNS] = { "drop_runs", "runs", "%*.0f", 6 },
	[C_USMIB] = { "us_per_dirty_mib", "us/MiB", "%*.1f", 9 },
	[C_TOUCH] = { "first_touch_us_per_page", "touch us", "%*.2f", 8 },
	[C_SCAN] = { "scan_pct", "scan%", "%*.1f", 6 },
	[C_DROP] = { "drop_pct", "drop%", "%*.1f", 6 },
	[C_REFILL] = { "refill_pct", "refill%", "%*.1f", 7 },
};

/* Median over the runs of field f of case ci. */
static double med(const struct ctx *c, int ci, size_t f)
{
	double v[c->runs];

	for (int r = 0; r < c->runs; r++)
		v[r] = *(const double *)((const char *)&c->res[r][ci] + f);
	return bench_median(v, c->runs);
}

#define MED(c, ci, field)	med(c, ci, offsetof(struct meas, field))

/* Median over the runs of case a's time over case b's (paired); 0: none. */
static double paired(const struct ctx *c, int a, int b)
{
	double va[c->runs], vb[c->runs];

	if (a < 0 || b < 0)
		return 0;
	for (int r = 0; r < c->runs; r++) {
		va[r] = c->res[r][a].sec;
		vb[r] = c->res[r][b].sec;
	}
	return bench_paired_ratio(va, vb, c->runs);
}

static double paired_key(const struct ctx *c, const char *a, const char *b)
{
	return paired(c, find_case(c, a), find_case(c, b));
}

static void fill_row(struct ctx *c, struct bench_table *t, int ci, bool two)
{
	struct rcase *k = &c->cases[ci];
	const struct dset *s = k->set >= 0 ? &c->sets[k->set] : NULL;
	double v[c->runs * (k->iters > 1 ? k->iters : 1)];
	int n = 0, row;
	bool ok = true;
	/* The table outlives c: its rows' names live here. */
	static char lab[2][MAX_CASES][64], key[2][MAX_CASES][48];

	for (int r = 0; r < c->runs; r++)
		ok &= c->res[r][ci].ok;
	if (k->iters > 1) {
		memcpy(v, c->isamp[ci], sizeof(double) * c->nisamp[ci]);
		n = c->nisamp[ci];
	} else {
		for (int r = 0; r < c->runs; r++)
			v[n++] = two ? c->res[r][ci].sec2 : c->res[r][ci].sec;
	}
	if (two) {
		snprintf(key[1][ci], sizeof(key[1][ci]), "%s_refill", k->key);
		snprintf(lab[1][ci], sizeof(lab[1][ci]), "DONTNEED all+refill, "
			 "%s%s", s ? s->name : "", k->busy ? ", busy" : "");
	} else {
		snprintf(key[0][ci], sizeof(key[0][ci]), "%s", k->key);
		snprintf(lab[0][ci], sizeof(lab[0][ci]), "%s", k->label);
	}
	row = bench_add_row(t, key[two][ci], lab[two][ci], v, n, ok, -1);
	if (!two)
		k->row = row;
	if (row < 0)
		return;

	struct bench_row *br = &t->rows[row];
	double sec = br->sec;

	br->col[C_PAGES] = MED(c, ci, pages);
	if (k->m != M_FULL)
		br->col[C_RUNS] = MED(c, ci, runs);
	if (s)
		br->col[C_USMIB] = sec * 1e6 / ((double)s->bytes / MIB);
	if (s && !two && k->m != M_PLAIN)
		br->col[C_TOUCH] = MED(c, ci, touch) * 1e6;
	if (k->m == M_LAZY || k->m == M_EAGER) {
		double mean = MED(c, ci, mean);

		br->col[C_SCAN] = MED(c, ci, scan) / mean * 100;
		br->col[C_DROP] = MED(c, ci, drop) / mean * 100;
		br->col[C_REFILL] = MED(c, ci, refill) / mean * 100;
	}
	if (k->busy || k->phase != 1)
		return;
	if (k->m == M_PERPAGE) {
		br->cited = CITED_PERPAGE;
		br->cited_note = "us/MiB: per-page flush, 1.2 s/192 GiB";
	} else if (k->m == M_LAZY && s && !s->scattered &&
		   s->bytes == c->sets[c->nsets - 1].bytes) {
		br->cited = CITED_RANGED;
		br->cited_note = "us/MiB: ranged flush, 16 ms/192 GiB";
	} else if (k->iters > 1) {
		br->cited = ANCHOR_P50_US / 1e3;
		br->cited_note = "ms p50 (0.060 p99): ~50 16 KiB pages, "
				 "128 MiB guest";
	}
}

/* Percentile p of case ci's resets (iters > 1), in us. */
static double pct_us(const struct ctx *c, int ci, double p)
{
	int n = ci >= 0 ? c->nisamp[ci] : 0;
	double v[n > 0 ? n : 1];

	if (n <= 0)
		return NAN;
	memcpy(v, c->isamp[ci], sizeof(double) * n);
	bench_median(v, n);	/* sorts */
	return v[(int)((n - 1) * p / 100 + 0.5)] * 1e6;
}

static void kv(struct bench_table *t, const char *fmt, const char *a,
	       double val)
{
	static char keys[BENCH_MAX_KV][48];

	if (t->nkv >= BENCH_MAX_KV || isnan(val))
		return;
	snprintf(keys[t->nkv], sizeof(keys[0]), fmt, a);
	bench_add_kv(t, keys[t->nkv], val);
}

/* Lazy reset times over D, in order: strictly growing? */
static bool grows(const struct ctx *c, char layout, char *out, size_t cap)
{
	double last = 0;
	bool up = true;
	size_t len = 0;

	out[0] = 0;
	for (int i = 2; i < c->nsets; i++) {
		const struct dset *s = &c->sets[i];
		char key[40];
		int ci;

		if (s->key[strlen(s->key) - 1] != layout)
			continue;
		snprintf(key, sizeof(key), "lazy_%s", s->key);
		ci = find_case(c, key);
		if (ci < 0)
			continue;
		double v = MED(c, ci, sec);

		up &= v > last;
		last = v;
		len += snprintf(out + len, cap - len, "%s%.3g", len ? " < " :
				"", v * 1e3);
		if (len >= cap)
			break;
	}
	return up && len;
}

/* Case ci (a 4x one) over its 1x partner, paired; 0: none. */
static double growth(const struct ctx *c, int ci)
{
	char key[40];

	snprintf(key, sizeof(key), "%s", c->cases[ci].key);
	memcpy(strstr(key, "_4x"), "_1x", 3);
	return paired_key(c, c->cases[ci].key, key);
}

static void add_facts(struct ctx *c, struct bench_table *t)
{
	int l64 = find_case(c, "lazy_64p"), e64 = find_case(c, "eager_64p");
	int b64 = find_case(c, "lazy_64p_busy");
	int pp = find_case(c, "perpage_1pct_1x"), pl = find_case(c,
		"plain_perpage_1pct"), l1 = find_case(c, "lazy_1pct");
	int fu = find_case(c, "full");
	int s1 = find_set(c, "1pct");

	kv(t, "write_tracking%s", "", c->r1.track ? c->r1.track : c->r4.track);
	kv(t, "lazy_64p_p50_us%s", "", pct_us(c, l64, 50));
	kv(t, "lazy_64p_p99_us%s", "", pct_us(c, l64, 99));
	kv(t, "eager_64p_p50_us%s", "", pct_us(c, e64, 50));
	kv(t, "eager_64p_p99_us%s", "", pct_us(c, e64, 99));
	kv(t, "lazy_64p_busy_p50_us%s", "", pct_us(c, b64, 50));
	kv(t, "lazy_64p_busy_p99_us%s", "", pct_us(c, b64, 99));
	if (fu >= 0)
		kv(t, "full_restore_until_serving_ms%s", "",
		   MED(c, fu, serve) * 1e3);
	if (l1 >= 0)
		kv(t, "first_write_after_reset_us_per_page%s", "",
		   MED(c, l1, write) * 1e6);
	if (pp >= 0 && pl >= 0 && s1 >= 0) {
		double v[c->runs];

		for (int r = 0; r < c->runs; r++)
			v[r] = c->res[r][pp].sec - c->res[r][pl].sec;
		kv(t, "remove_event_us_per_drop%s", "", bench_median(v,
		   c->runs) * 1e6 / (double)c->sets[s1].npages);
	}
	/* What the busy thread adds per page dropped: its IPIs. */
	static const char *const bz[] = { "lazy_1pct", "perpage_1pct" };

	for (size_t i = 0; s1 >= 0 && i < sizeof(bz) / sizeof(*bz); i++) {
		char key[40];
		int a = find_case(c, bz[i]), b;
		double v[c->runs];

		snprintf(key, sizeof(key), "%s_busy", bz[i]);
		b = find_case(c, key);
		if (a < 0 || b < 0)
			continue;
		for (int r = 0; r < c->runs; r++)
			v[r] = c->res[r][b].sec - c->res[r][a].sec;
		kv(t, "busy_extra_us_per_page_%s", bz[i], bench_median(v,
		   c->runs) * 1e6 / (double)c->sets[s1].npages);
	}
	for (int i = 0; i < c->ncases; i++) {
		const struct rcase *k = &c->cases[i];

		if (k->big)
			kv(t, "%s_over_1x", k->key, growth(c, i));
	}
}

/* The targets line, computed from this run's paired ratios. */
static void add_targets(struct ctx *c, struct bench_table *t)
{
	size_t len = 0, cap = sizeof(t->notes);
	double full = paired_key(c, "full", "lazy_1pct");
	double pp = paired_key(c, "perpage_1pct", "lazy_1pct");
	int l64 = find_case(c, "lazy_64p"), e64 = find_case(c, "eager_64p");
	char gc[128], gs[128];
	bool okc = grows(c, 'c', gc, sizeof(gc));
	bool oks = grows(c, 's', gs, sizeof(gs));
	double worst = 0;
	char *n = t->notes;

#define NOTE(...)	do { if (len < cap) len += snprintf(n + len, \
				cap - len, __VA_ARGS__); } while (0)
	NOTE("targets (median of paired per-run ratios):");
	if (full > 0)
		NOTE(" 1%% scattered, full restore / lazy reset >= 20x: "
		     "%.1fx, %s;", full, full >= 20 ? "met" : "NOT met");
	if (pp > 0)
		NOTE(" per-page drops / lazy reset >= 5x: %.1fx, %s;", pp,
		     pp >= 5 ? "met" : "NOT met");
	if (l64 >= 0)
		NOTE(" 64 pages: lazy p50 %.0f us (p99 %.0f)", pct_us(c, l64,
		     50), pct_us(c, l64, 99));
	if (e64 >= 0)
		NOTE(", eager p50 %.0f us (p99 %.0f)", pct_us(c, e64, 50),
		     pct_us(c, e64, 99));
	if (l64 >= 0 || e64 >= 0)
		NOTE(" beside 36 us p50 (60 p99) cited;");
	if (gc[0])
		NOTE(" lazy grows with D, contiguous (ms) %s: %s;", gc,
		     okc ? "met" : "NOT met");
	if (gs[0])
		NOTE(" scattered %s: %s;", gs, oks ? "met" : "NOT met");
	for (int i = 0; i < c->ncases; i++) {
		const struct rcase *k = &c->cases[i];
		double r = k->big && k->m == M_LAZY ? growth(c, i) : 0;

		if (r <= 0)
			continue;
		NOTE("%s %s %.2fx", worst ? "," : " 4x region / 1x, same dirty "
		     "pages, lazy, each <= 1.5x:", c->sets[k->set].name, r);
		if (r > worst)
			worst = r;
	}
	if (worst > 0)
		NOTE(": %s", worst <= 1.5 ? "met" : "NOT met");
	NOTE("\n"
	     "reference: full restore, a new engine over fresh memory until "
	     "every page is in, plus unmapping the old (its ratio to a row: "
	     "vs ref).\n"
	     "reset lazy/eager: fl_engine_reset() alone (eager: the pages "
	     "filled again before it returns); pages, runs, scan/drop/refill "
	     "%%: its counters.\n"
	     "DONTNEED per page: one madvise per dirty page on the engine's "
	     "memory, its REMOVE event read by the engine's thread, with the "
	     "reset bookkeeping that makes a dropped page read the snapshot; "
	     "no uffd: the same calls on plain memory (drop only).\n"
	     "DONTNEED all: one madvise over the whole region (drop); "
	     "all+refill: that, the dirty pages touched and every page read "
	     "back in.\n"
	     "touch us: the first read of each dirty page after it, per page. "
	     "busy: a second thread of this process writing its own 4 MiB on "
	     "the other CPU.\n"
	     "1x/4x region: measured after the rest, side by side, with the "
	     "1x region, one 4x as large (the same dirty pages; its snapshot "
	     "past 1x a hole) and the plain memory mapped.\n"
	     "Every case: the whole region hashed against the snapshot "
	     "afterwards.");
#undef NOTE
}

static void fill_table(struct ctx *c, struct bench_table *t)
{
	int ref = find_case(c, "full");

	snprintf(t->title_buf, sizeof(t->title_buf), "take a region restored "
		 "in-process back to its snapshot: fl_engine_reset vs "
		 "per-page drops, one drop, a full restore");
	t->title = t->title_buf;
	t->cited = "Zhenyu Ye, \"arm64: kvm: flush tlbs by range in "
		   "unmap_stage2_range function\" (kernel mailing list, 2020): "
		   "192 GiB rolled back, 1.2 s flushed per page, 16 ms by "
		   "range; ignition's snapshot fuzzer on Hypervisor.framework "
		   "(Apple M3, 2026): ~50 dirty 16 KiB pages of a 128 MiB "
		   "guest reset in 36 us p50, 60 us p99";
	t->cited_unit = "(unit in note)";
	t->unit = "ms";
	t->ratio_prec = 4;	/* most rows are a small part of the ref */
	t->bytes = c->len;
	t->runs = c->runs;
	t->ncols = C_N;
	memcpy(t->cols, cols, sizeof(cols));
	for (int i = 0; i < c->ncases; i++) {
		fill_row(c, t, i, false);
		if (c->cases[i].m == M_WHOLE && !c->cases[i].busy)
			fill_row(c, t, i, true);
	}
	t->ref = ref >= 0 ? c->cases[ref].row : 0;
	add_facts(c, t);
	add_targets(c, t);
}

/* ---- the benchmark ------------------------------------------------------ */

static const char *case_label(void *ctx, int i)
{
	return ((struct ctx *)ctx)->cases[i].label;
}

static bool in_phase(void *ctx, int i)
{
	struct ctx *c = ctx;

	return c->cases[i].phase == c->phase;
}

static int sample(void *ctx, int r, int i, struct bench_sample *s)
{
	struct ctx *c = ctx;
	struct meas *m = &c->res[r][i];
	int ret = run_case(c, i, m);

	s->sec = m->sec;
	s->ok = m->ok;
	return ret;
}

/* Every run of every case of phase ph, the cases interleaved in each run. */
static int run_phase(struct ctx *c, int ph)
{
	struct bench_loop l = {
		.bench = "reset", .runs = c->runs, .ncases = c->ncases,
		.ctx = c, .label = case_label, .sample = sample,
		.wanted = in_phase,
	};
	int ret;

	c->phase = ph;
	ret = bench_loop_run(&l);
	bench_loop_free(&l);
	return ret;
}

/* What phase ph needs, set up (phase 2 on top of phase 1's). */
static int setup_phase(struct ctx *c, int ph)
{
	bool r1 = false, r4 = false, plain = false, any = false;
	int ret = 0;

	for (int i = 0; i < c->ncases; i++) {
		const struct rcase *k = &c->cases[i];

		if (k->phase != ph)
			continue;
		any = true;
		r1 |= !k->big && k->m != M_PLAIN && k->m != M_FULL;
		r4 |= k->big;
		plain |= k->m == M_PLAIN;
	}
	if (!any)
		return 0;
	if (!c->src && (ret = make_source(c)) < 0)
		return ret;
	if (r1 && !c->r1.used &&
	    (ret = rmem_setup(c->src, &c->r1, c->len, c->sum_len)) < 0)
		return ret;
	if (r4 && ((ret = make_source4(c)) < 0 ||
		   (ret = rmem_setup(c->src4, &c->r4, c->big_len,
				     c->sum_big)) < 0))
		return ret;
	if (plain && (ret = plain_setup(&c->plain, c->len)) < 0)
		return ret;
	return 0;
}

int bench_reset(const struct bench_opts *o, struct bench_table *t)
{
	struct ctx *c = calloc(1, sizeof(*c));
	int ret;

	if (!c)
		return -ENOMEM;
	c->o = o;
	c->memfd = -1;
	c->len = o->size ? o->size : o->quick ? 64 * MIB : GIB;
	c->big_len = 4 * c->len;
	c->runs = o->runs;
	c->iters = o->quick ? 20 : 50;
	ret = plan(c);
	if (ret < 0)
		goto out;
	if (!c->ncases) {
		t->skipped = "--only selected no case";
		goto out;
	}
	for (int i = 0; i < c->ncases; i++) {
		if (c->cases[i].iters <= 1)
			continue;
		c->isamp[i] = calloc((size_t)(c->runs * c->cases[i].iters),
				     sizeof(double));
		if (!c->isamp[i]) {
			ret = -ENOMEM;
			goto out;
		}
	}
	c->res = calloc((size_t)c->runs, sizeof(*c->res));
	if (!c->res) {
		ret = -ENOMEM;
		goto out;
	}
	for (int ph = 1; ph <= 2; ph++) {
		ret = setup_phase(c, ph);
		if (ret == -EOPNOTSUPP) {
			static char why[200];

			snprintf(why, sizeof(why), "no write tracking here: %s",
				 fl_last_error());
			t->skipped = why;
			ret = 0;
			goto out;
		}
		if (ret < 0 || (ret = run_phase(c, ph)) < 0)
			goto out;
	}
	fill_table(c, t);
out:
	rmem_free(&c->r1);
	rmem_free(&c->r4);
	rmem_free(&c->plain);
	if (c->src)
		fl_source_put(c->src);
	if (c->src4)
		fl_source_put(c->src4);
	if (c->memfd >= 0)
		close(c->memfd);
	XXH3_freeState(c->st4);
	for (int i = 0; i < c->nsets; i++)
		free(c->sets[i].off);
	for (int i = 0; i < MAX_CASES; i++)
		free(c->isamp[i]);
	free(c->res);
	free(c);
	return ret;
}
