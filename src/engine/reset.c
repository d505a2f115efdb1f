// SPDX-License-Identifier: Apache-2.0
/*
 * reset.c - take pages back to the snapshot: mark them RESET, drop them,
 * mark them MISSING, so that the next touch faults them in anew.
 *
 * Decision: the drop (MADV_DONTNEED) raises the same REMOVE event as a
 * client's balloon, which means zeros; so the pages are marked RESET
 * first, under the engine lock held exclusively (no fill under way, none
 * can claim them), and REMOVE leaves RESET pages alone.  The drop itself
 * runs without the lock: in-process it waits until a handler thread has
 * read its event, which needs the lock.  The state machine is in
 * region.h.
 *
 * Decision: RESET pages turn MISSING only when the last reset under way
 * ends, and then in every region, not only in the range that ended: a
 * REMAP applied while the drop waited may have carried RESET pages to
 * another address, and an end that looked only at its own range would
 * leave them RESET (never filled) with their faults asleep for good.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/gate.h"
#include "engine/prefetch.h"
#include "engine/reset.h"
#include "util/error.h"

int64_t engine_reset_begin(struct fl_engine *e, uint64_t addr, uint64_t len)
{
	uint64_t n = 0;

	pthread_rwlock_wrlock(&e->lock);
	e->resets++;
	for (int i = 0; i < e->regions.n; i++)
		n += region_reset_begin(e->regions.v[i], addr, addr + len);
	pthread_rwlock_unlock(&e->lock);
	return (int64_t)n;
}

int64_t engine_reset_end(struct fl_engine *e, uint64_t addr, uint64_t len)
{
	uint64_t n = 0;

	(void)addr;
	(void)len;
	pthread_rwlock_wrlock(&e->lock);
	if (e->resets > 0 && --e->resets == 0) {
		for (int i = 0; i < e->regions.n; i++) {
			struct region *r = e->regions.v[i];
			uint64_t k = region_reset_end(r, r->addr,
						      r->addr + r->len);

			/* A fault on a RESET page was left asleep: again. */
			if (k)
				engine_wake(e, r->addr, r->len);
			n += k;
		}
	}
	pthread_rwlock_unlock(&e->lock);
	if (n)	/* missing again: background restore is not done */
		prefetch_regions_changed(e);
	return (int64_t)n;
}

int64_t engine_reset_range(struct fl_engine *e, uint64_t addr, uint64_t len)
{
	if (e->client_pid != 0 && e->client_pid != getpid())
		return fl_err(-EOPNOTSUPP, "reset: the memory is another "
			      "process's (only an in-process engine can drop it)");
	int64_t n = engine_reset_begin(e, addr, len);

	if (madvise((void *)(uintptr_t)addr, len, MADV_DONTNEED) < 0) {
		int err = -errno;

		/* Not dropped: still mapped, a fill meets EEXIST (present). */
		engine_reset_end(e, addr, len);
		return fl_err(err, "reset 0x%llx+%llu: MADV_DONTNEED: %s",
			      (unsigned long long)addr,
			      (unsigned long long)len, strerror(-err));
	}
	engine_reset_end(e, addr, len);
	return n;
}
