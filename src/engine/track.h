/* SPDX-License-Identifier: Apache-2.0 */
/*
 * track.h - which pages of an in-process engine's regions were written
 * (track.c): the mechanism fl_engine_track_writes() chose, and what the
 * reset (reset.c) asks of it.
 */
#ifndef FAULTLINE_ENGINE_TRACK_H
#define FAULTLINE_ENGINE_TRACK_H

#include "engine/core.h"

/*
 * A write-protect fault read from the uffd (the synchronous mechanism):
 * the page is marked dirty and its protection lifted, which wakes the
 * writer.  0; -EAGAIN while an event is pending (the kernel refuses the
 * change until it is read: the caller applies it and comes back);
 * -ESRCH once the client is gone.  Engine lock not held.
 */
int track_wp_fault(struct fl_engine *e, uint64_t addr);

/* A run of pages to reset: [addr, addr + len). */
struct run {
	uint64_t addr, len;
};

struct runs {
	struct run *v;
	size_t n, cap;
};

/*
 * The pages of r that must be dropped at this reset, appended to rs:
 * written ones (PAGEMAP_SCAN, re-protected in the same walk, or the
 * dirty map's record), discarded ones and those filled before tracking
 * began (the dirty map); without tracking every page filled or
 * discarded.  The dirty marks taken are cleared.  Engine lock held
 * shared.  0 or -errno.
 */
int track_collect(struct fl_engine *e, struct region *r, struct runs *rs);

/* Sort rs by address and merge runs that touch or overlap. */
void runs_merge(struct runs *rs);

#endif
