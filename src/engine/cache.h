/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache.h - a snapshot's pages once per host, in a memfd, filled from its
 * source on demand, with the fill map that is the only truth of what is
 * filled (cache.c).  Clone regions (region.h's cache) are served from it.
 */
#ifndef FAULTLINE_ENGINE_CACHE_H
#define FAULTLINE_ENGINE_CACHE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "faultline.h"

/* A page's state in the fill map: one byte, changed only atomically. */
enum cache_page {
	CACHE_EMPTY = 0,	/* never filled: its bytes are not the source's */
	CACHE_BUSY,		/* a thread is filling it: wait for it */
	CACHE_FILLED,		/* holds the source's bytes, for good */
};

struct fl_cache {
	atomic_int refs;
	unsigned int flags;		/* FL_CACHE_* */
	struct fl_source *src;
	uint64_t size, npages;		/* bytes (4 KiB multiple), pages */
	int memfd;			/* read-write, mode 0444 */
	uint8_t *map;			/* MAP_SHARED of memfd, the fills' */
	int uffd;			/* map registered MISSING: COPY into
					 * it; -1: pwrite only */
	_Atomic uint8_t *fill;		/* npages bytes, enum cache_page */
	pthread_mutex_t lock;		/* with done: fills ended */
	pthread_cond_t done;
	_Atomic uint64_t pages_fetched;	/* read from the source */
};

struct fl_cache *scache_get(struct fl_cache *c);
void scache_put(struct fl_cache *c);

/*
 * Make [off, off+len) of c (page aligned, len at most FL_MAX_CHUNK) all
 * filled: pages empty are read from the source into buf (FL_MAX_CHUNK
 * bytes) and written into the cache, pages another thread is filling are
 * waited for.  0 once every page is in the fill map; else the source's
 * (or the write's) -errno, the pages not filled left empty.
 */
int scache_fill(struct fl_cache *c, uint64_t off, uint64_t len, void *buf);

#endif
