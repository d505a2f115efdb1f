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
#include "reset_bench.h"

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
static int run_full(struct reset_ctx *c, struct meas *r)
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
		r->ok = reset_region_ok(&m);
		if (!r->ok)
			reset_report_bad(&m, "full restore");
	}
	/* What the restore replaces: the old engine and memory go. */
	t3 = bench_now();
	reset_rmem_free(&m);
	t3 = bench_now() - t3;
	r->sec = t2 - t0 + t3;
	r->serve = t1 - t0 + t3;
	r->pages = (double)(c->len / PG);
	return ret;
}

static int run_case(struct reset_ctx *c, int ci, struct meas *r)
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
		reset_dirty(mm, s);
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
			r->ok = reset_plain_dropped(mm, s);
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
		sum_touch += reset_touch(mm, s);
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
		if (k->iters > 1 && !reset_set_ok(mm, s)) {
			r->ok = false;
			reset_report_bad(mm, k->label);
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
	if (r->ok && !reset_region_ok(mm)) {
		r->ok = false;
		reset_report_bad(mm, k->label);
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


/* ---- the benchmark ------------------------------------------------------ */

static const char *case_label(void *ctx, int i)
{
	return ((struct reset_ctx *)ctx)->cases[i].label;
}

static bool in_phase(void *ctx, int i)
{
	struct reset_ctx *c = ctx;

	return c->cases[i].phase == c->phase;
}

static int sample(void *ctx, int r, int i, struct bench_sample *s)
{
	struct reset_ctx *c = ctx;
	struct meas *m = &c->res[r][i];
	int ret = run_case(c, i, m);

	s->sec = m->sec;
	s->ok = m->ok;
	return ret;
}

/* Every run of every case of phase ph, the cases interleaved in each run. */
static int run_phase(struct reset_ctx *c, int ph)
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
static int setup_phase(struct reset_ctx *c, int ph)
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
	if (!c->src && (ret = reset_snapshot(c)) < 0)
		return ret;
	if (r1 && !c->r1.used &&
	    (ret = reset_rmem_setup(c->src, &c->r1, c->len, c->sum_len)) < 0)
		return ret;
	if (r4 && ((ret = reset_snapshot4(c)) < 0 ||
		   (ret = reset_rmem_setup(c->src4, &c->r4, c->big_len,
				     c->sum_big)) < 0))
		return ret;
	if (plain && (ret = reset_plain_setup(&c->plain, c->len)) < 0)
		return ret;
	return 0;
}

int bench_reset(const struct bench_opts *o, struct bench_table *t)
{
	struct reset_ctx *c = calloc(1, sizeof(*c));
	int ret;

	if (!c)
		return -ENOMEM;
	c->o = o;
	c->memfd = -1;
	c->len = o->size ? o->size : o->quick ? 64 * MIB : GIB;
	c->big_len = 4 * c->len;
	c->runs = o->runs;
	c->iters = o->quick ? 20 : 50;
	ret = reset_plan(c);
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
	reset_fill_table(c, t);
out:
	reset_rmem_free(&c->r1);
	reset_rmem_free(&c->r4);
	reset_rmem_free(&c->plain);
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

