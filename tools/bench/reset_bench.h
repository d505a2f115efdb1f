/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reset_bench.h - what the files of `faultline bench reset` share: the
 * dirty sets, the regions, the cases and one run's measurements
 * (reset.c runs them, reset_setup.c makes the snapshot, regions and the
 * plan of cases, reset_table.c turns the runs into the table).
 */
#ifndef FAULTLINE_BENCH_RESET_H
#define FAULTLINE_BENCH_RESET_H

#include <stdbool.h>
#include <stdint.h>
#include <xxhash.h>

#include "bench.h"
#include "faultline.h"

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

struct reset_ctx {
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


/* reset_setup.c */
int reset_snapshot(struct reset_ctx *c);
int reset_snapshot4(struct reset_ctx *c);
bool reset_region_ok(const struct rmem *m);
void reset_report_bad(const struct rmem *m, const char *what);
int reset_rmem_setup(struct fl_source *src, struct rmem *m, uint64_t len,
		      uint64_t sum);
int reset_plain_setup(struct rmem *m, uint64_t len);
void reset_rmem_free(struct rmem *m);
int reset_find_set(const struct reset_ctx *c, const char *key);
void reset_dirty(const struct rmem *m, const struct dset *s);
double reset_touch(const struct rmem *m, const struct dset *s);
bool reset_set_ok(const struct rmem *m, const struct dset *s);
bool reset_plain_dropped(const struct rmem *m, const struct dset *s);
int reset_find_case(const struct reset_ctx *c, const char *key);
int reset_plan(struct reset_ctx *c);
/* reset_table.c */
void reset_fill_table(struct reset_ctx *c, struct bench_table *t);

#endif
