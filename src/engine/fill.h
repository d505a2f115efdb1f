/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fill.h - resolving claimed runs of pages (fill.c), through the ioctl
 * gate (gate.h) with a worker's buffers (worker.h).
 */
#ifndef FAULTLINE_ENGINE_FILL_H
#define FAULTLINE_ENGINE_FILL_H

#include "engine/core.h"

/* The zero buffer, once per process: 0 or -ENOMEM. */
int fill_init(void);

/*
 * What is being filled: set e, w, r, how, counter and max_run for
 * engine_fill_range(); fill_run() also needs the claimed run (pg, npg,
 * prior).  op and src are fill.c's, chosen per run.
 */
struct fill_ctx {
	struct fl_engine *e;
	struct worker *w;		/* its staging buffer, source mapping */
	struct region *r;
	unsigned int how;		/* FILL_* */
	_Atomic uint64_t *counter;	/* pages filled are counted here too */
	uint64_t max_run;		/* bytes per run; 0: FL_MAX_CHUNK */
	uint64_t pg, npg;		/* the claimed run of r */
	enum page_state prior;		/* its state before: handed back so */
	enum uffd_fill_op op;		/* how it is filled */
	uint64_t src;			/* COPY/MOVE from here (address), or 0 */
};

/* Fill [first, last) of job->r; the engine lock must be held (shared). */
int engine_fill_range(const struct fill_ctx *job, uint64_t first,
		      uint64_t last);
/* Resolve the claimed run of c (pg, npg, formerly prior). */
int fill_run(struct fill_ctx *c);
/* The page at page (ps bytes) as new memory reads: zeros, or its cache. */
int fill_zeros(struct fl_engine *e, uint64_t page, uint64_t ps);

#endif
