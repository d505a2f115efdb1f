/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fill.h - resolving claimed runs of pages (fill.c): the engine's only way
 * to the kernel's fills and wakes, and the workers whose buffers they use.
 */
#ifndef FAULTLINE_ENGINE_FILL_H
#define FAULTLINE_ENGINE_FILL_H

#include "engine/core.h"

/* The zero buffer, once per process: 0 or -ENOMEM. */
int fill_init(void);

struct worker *worker_new(bool huge);
void worker_free(struct worker *w);
/* A worker owned by e, freed by fl_engine_destroy(). */
struct worker *engine_worker(struct fl_engine *e);

/* Every fill, poison and wake passes this gate (fl_engine_detach). */
int engine_fill(struct fl_engine *e, enum uffd_fill_op op, uint64_t dst,
		uint64_t src, uint64_t len, uint64_t *done);
int engine_wake(struct fl_engine *e, uint64_t start, uint64_t len);

/* The client is gone or must go: the engine's threads end. */
void engine_finish(struct fl_engine *e);
/* Keep this thread's last error as the engine's first failure, if none yet. */
void note_failure(struct fl_engine *e);

/* Fill [first, last) of r; the engine lock must be held (shared). */
int engine_fill_range(struct fl_engine *e, struct worker *w, struct region *r,
		      uint64_t first, uint64_t last, unsigned int how,
		      _Atomic uint64_t *counter);
/* Resolve the claimed run [pg, pg+npg), formerly in state prior. */
int fill_run(struct fl_engine *e, struct worker *w, struct region *r,
	     uint64_t pg, uint64_t npg, enum page_state prior, unsigned int how,
	     _Atomic uint64_t *counter);
/* The page at page (ps bytes) as new memory reads: zeros, or its cache. */
int fill_zeros(struct fl_engine *e, uint64_t page, uint64_t ps);

#endif
