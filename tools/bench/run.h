/* SPDX-License-Identifier: Apache-2.0 */
/*
 * run.h - the one run loop every benchmark measures with: N runs, in each
 * run every case once (interleaved, so a reference is measured beside the
 * rows compared with it), each case's sample kept per run, then rows of
 * medians and of paired ratios from them.
 *
 * A bench gives a table of cases (its own struct: the loop only asks for
 * a case's label), a function measuring one case in one run and, where it
 * needs them, a per-run setup (a new cache directory, a dump) and a filter
 * (selected by --only, its server up).  What a bench measures besides the
 * time it keeps in its own context, indexed by run and case.
 */
#ifndef FAULTLINE_BENCH_RUN_H
#define FAULTLINE_BENCH_RUN_H

#include <stdbool.h>
#include <stddef.h>

struct bench_table;

/* One case in one run. */
struct bench_sample {
	double sec;		/* the timed figure, seconds */
	bool ok;		/* it read (restored, dropped) the right data */
	double thp;		/* fraction THP-backed, < 0: not measured */
	double faults;		/* faults served, < 0: not counted */
	double copied;		/* bytes copied, < 0: not counted */
};

struct bench_loop {
	const char *bench;	/* its name, for the error line */
	int runs;
	int ncases;
	void *ctx;		/* the bench's own, passed to every hook */
	/* Case k's label (the error line names it). */
	const char *(*label)(void *ctx, int k);
	/* Measure case k in run r into *s (preset: sec 0, ok, the rest
	 * -1): 0 or -errno, which ends the loop. */
	int (*sample)(void *ctx, int r, int k, struct bench_sample *s);
	/* NULL, or before run r's cases: 0 or -errno. */
	int (*start)(void *ctx, int r);
	/* NULL, or is case k measured at all (else no samples, no row)? */
	bool (*wanted)(void *ctx, int k);
	struct bench_sample *s;	/* [r * ncases + k], bench_loop_run's */
};

/*
 * Every run, in each every wanted case in order.  On an error it prints
 * "faultline bench NAME: LABEL: why" and returns -errno; l->s is
 * bench_loop_free()'s either way.
 */
int bench_loop_run(struct bench_loop *l);
void bench_loop_free(struct bench_loop *l);
/* Did the loop measure case k? */
bool bench_loop_wanted(const struct bench_loop *l, int k);
/* Case k's sample in run r. */
const struct bench_sample *bench_loop_at(const struct bench_loop *l, int r,
					 int k);
/* Median over the runs of case k's time, seconds. */
double bench_loop_median(const struct bench_loop *l, int k);
/* Median of the values >= 0 of the double at off in case k's samples
 * (offsetof(struct bench_sample, copied)); -1: none. */
double bench_loop_field(const struct bench_loop *l, int k, size_t off);
/* Median over the runs of case k's time over case ref's (paired). */
double bench_loop_paired(const struct bench_loop *l, int k, int ref);
/*
 * Case k's row: its times (median, min, max), ok if every run was, the
 * lowest THP fraction, the median faults and bytes copied where counted.
 * Returns the row's index or -errno.
 */
int bench_loop_row(const struct bench_loop *l, struct bench_table *t, int k,
		   const char *key, const char *label, double cited);

#endif
