// SPDX-License-Identifier: Apache-2.0
/*
 * reset_table.c - `faultline bench reset`'s table from its runs: a row per
 * case with its own columns (pages, drop runs, us/MiB, first touch, the
 * engine's scan/drop/refill shares), paired ratios to the case it is
 * compared with, the facts and the targets met or not.
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
static double med(const struct reset_ctx *c, int ci, size_t f)
{
	double v[c->runs];

	for (int r = 0; r < c->runs; r++)
		v[r] = *(const double *)((const char *)&c->res[r][ci] + f);
	return bench_median(v, c->runs);
}

#define MED(c, ci, field)	med(c, ci, offsetof(struct meas, field))

/* Median over the runs of case a's time over case b's (paired); 0: none. */
static double paired(const struct reset_ctx *c, int a, int b)
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

static double paired_key(const struct reset_ctx *c, const char *a,
			 const char *b)
{
	return paired(c, reset_find_case(c, a), reset_find_case(c, b));
}

static void fill_row(struct reset_ctx *c, struct bench_table *t, int ci,
		     bool two)
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
static double pct_us(const struct reset_ctx *c, int ci, double p)
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
static bool grows(const struct reset_ctx *c, char layout, char *out, size_t cap)
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
		ci = reset_find_case(c, key);
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
static double growth(const struct reset_ctx *c, int ci)
{
	char key[40];

	snprintf(key, sizeof(key), "%s", c->cases[ci].key);
	memcpy(strstr(key, "_4x"), "_1x", 3);
	return paired_key(c, c->cases[ci].key, key);
}

static void add_facts(struct reset_ctx *c, struct bench_table *t)
{
	int l64 = reset_find_case(c, "lazy_64p");
	int e64 = reset_find_case(c, "eager_64p");
	int b64 = reset_find_case(c, "lazy_64p_busy");
	int pp = reset_find_case(c, "perpage_1pct_1x");
	int pl = reset_find_case(c, "plain_perpage_1pct");
	int l1 = reset_find_case(c, "lazy_1pct");
	int fu = reset_find_case(c, "full");
	int s1 = reset_find_set(c, "1pct");

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
		int a = reset_find_case(c, bz[i]), b;
		double v[c->runs];

		snprintf(key, sizeof(key), "%s_busy", bz[i]);
		b = reset_find_case(c, key);
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
static void add_targets(struct reset_ctx *c, struct bench_table *t)
{
	size_t len = 0, cap = sizeof(t->notes);
	double full = paired_key(c, "full", "lazy_1pct");
	double pp = paired_key(c, "perpage_1pct", "lazy_1pct");
	int l64 = reset_find_case(c, "lazy_64p");
	int e64 = reset_find_case(c, "eager_64p");
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

void reset_fill_table(struct reset_ctx *c, struct bench_table *t)
{
	int ref = reset_find_case(c, "full");

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

