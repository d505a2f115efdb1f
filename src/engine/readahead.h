/* SPDX-License-Identifier: Apache-2.0 */
/*
 * readahead.h - the fault stream's policy (readahead.c), for the fault
 * loop.
 */
#ifndef FAULTLINE_ENGINE_READAHEAD_H
#define FAULTLINE_ENGINE_READAHEAD_H

#include "engine/core.h"

/*
 * Pages a fault on r fills, queued faults waiting with it (the adaptive
 * chunk; engine lock shared).
 */
uint64_t readahead_fault_pages(const struct fl_engine *e,
			       const struct region *r, int queued);
/*
 * A fault on page pg of r was served by filling [first, last): follow
 * the stream, queue a window, grow or reset the chunk (engine lock shared).
 */
void readahead_after_fault(struct fl_engine *e, struct region *r, uint64_t pg,
			   uint64_t first, uint64_t last);

#endif
