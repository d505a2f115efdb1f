// SPDX-License-Identifier: Apache-2.0
/*
 * run.c - the run loop of run.h: runs x cases -> samples -> rows.  The
 * cases of one run are measured back to back, so what a row is compared
 * with ran beside it under the same load; ratios are the medians of the
 * per-run ratios for that reason.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "run.h"

bool bench_loop_wanted(const struct bench_loop *l, int k)
{
	return !l->wanted || l->wanted(l->ctx, k);
}

const struct bench_sample *bench_loop_at(const struct bench_loop *l, int r,
					 int k)
{
	return &l->s[r * l->ncases + k];
}

static int run_case(struct bench_loop *l, int r, int k)
{
	struct bench_sample *s = &l->s[r * l->ncases + k];
	int ret;

	*s = (struct bench_sample){ .ok = true, .thp = -1, .faults = -1,
				    .copied = -1 };
	ret = l->sample(l->ctx, r, k, s);
	if (ret < 0)
		fprintf(stderr, "faultline bench %s: %s: %s\n", l->bench,
			l->label(l->ctx, k), strerror(-ret));
	return ret;
}

int bench_loop_run(struct bench_loop *l)
{
	int ret = 0;

	l->s = calloc((size_t)l->runs * (size_t)l->ncases, sizeof(*l->s));
	if (!l->s)
		return -ENOMEM;
	for (int r = 0; r < l->runs && !ret; r++) {
		if (l->start && (ret = l->start(l->ctx, r)) < 0)
			break;
		for (int k = 0; k < l->ncases && !ret; k++)
			if (bench_loop_wanted(l, k))
				ret = run_case(l, r, k);
	}
	return ret;
}

void bench_loop_free(struct bench_loop *l)
{
	free(l->s);
	l->s = NULL;
}

double bench_loop_field(const struct bench_loop *l, int k, size_t off)
{
	double v[l->runs > 0 ? l->runs : 1];
	int n = 0;

	for (int r = 0; r < l->runs; r++) {
		double x = *(const double *)((const char *)
					     bench_loop_at(l, r, k) + off);

		if (x >= 0)
			v[n++] = x;
	}
	return n ? bench_median(v, n) : -1;
}

double bench_loop_median(const struct bench_loop *l, int k)
{
	return bench_loop_field(l, k, offsetof(struct bench_sample, sec));
}

double bench_loop_paired(const struct bench_loop *l, int k, int ref)
{
	double a[l->runs > 0 ? l->runs : 1], b[l->runs > 0 ? l->runs : 1];

	for (int r = 0; r < l->runs; r++) {
		a[r] = bench_loop_at(l, r, k)->sec;
		b[r] = bench_loop_at(l, r, ref)->sec;
	}
	return bench_paired_ratio(a, b, l->runs);
}

int bench_loop_row(const struct bench_loop *l, struct bench_table *t, int k,
		   const char *key, const char *label, double cited)
{
	double v[l->runs > 0 ? l->runs : 1], thp = -1;
	bool ok = true;
	int row;

	for (int r = 0; r < l->runs; r++) {
		const struct bench_sample *s = bench_loop_at(l, r, k);

		v[r] = s->sec;
		ok &= s->ok;
		if (thp < 0 || s->thp < thp)
			thp = s->thp;
	}
	row = bench_add_row(t, key, label, v, l->runs, ok, cited);
	if (row < 0)
		return row;
	t->rows[row].thp_frac = thp;
	t->rows[row].faults = bench_loop_field(l, k,
				offsetof(struct bench_sample, faults));
	t->rows[row].copied = bench_loop_field(l, k,
				offsetof(struct bench_sample, copied));
	return row;
}
