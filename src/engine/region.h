/* SPDX-License-Identifier: Apache-2.0 */
/*
 * region.h - one registered range of a client's address space and the state
 * of each of its pages.
 *
 * The state map keeps one byte per page, changed only with atomic
 * operations: a resolver claims pages by compare-and-swap to BUSY, so two
 * threads never fill the same page, and events mark pages REMOVED.  A byte
 * per page costs 0.025 % of the memory served and needs no
 * read-modify-write of shared words.
 *
 * Decision: a page dropped by a reset (back to the snapshot) and a page
 * the client discarded (a balloon: zeros) are different states, since
 * the kernel reports both with the same REMOVE event.  A reset marks its
 * pages RESET before it drops them, and REMOVE leaves RESET pages alone.
 *
 * Transitions (anything not listed does not happen):
 *
 *   from      to        by
 *   MISSING   BUSY      a resolver claims it (fault, prefetch, background)
 *   REMOVED   BUSY      a fault claims it (prefetch never does)
 *   PRESENT,  BUSY      a fault proven fresh (loop.c answer_filled)
 *   GONE
 *   BUSY      PRESENT   filled (COPY, ZEROPAGE, CONTINUE, MOVE), EEXIST,
 *                       or poisoned
 *   BUSY      GONE      the fill met ENOENT (no mapping there)
 *   BUSY      MISSING,  handed back as it was (EAGAIN, ESRCH, a yield)
 *             REMOVED
 *   MISSING,  REMOVED   a REMOVE event (MADV_DONTNEED/REMOVE by the
 *   PRESENT,            client): reads as zeros at its next fault
 *   GONE
 *   MISSING,  RESET     region_reset_begin(): a reset takes it back to the
 *   PRESENT,            snapshot (engine lock held exclusively, so no
 *   REMOVED             page is BUSY); not claimable, and a REMOVE event
 *                       (the reset's own MADV_DONTNEED) leaves it RESET
 *   RESET     MISSING   region_reset_end(), after the drop: the next fault
 *                       fills it from the snapshot
 *   BUSY,     MISSING   taken over from a dead server (region_share_state)
 *   RESET
 */
#ifndef FAULTLINE_REGION_H
#define FAULTLINE_REGION_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "faultline.h"
#include "engine/prefetch_state.h"

enum page_state {
	PG_MISSING = 0,	/* not yet filled: serve from the source */
	PG_BUSY,	/* claimed by a resolver, being filled */
	PG_PRESENT,	/* filled (or populated by the process itself) */
	PG_REMOVED,	/* discarded (a REMOVE event): reads as zeros */
	PG_GONE,	/* no mapping at the last fill (ENOENT): not filled
			 * ahead; a fault proven fresh fills it from the
			 * source */
	PG_RESET,	/* being reset to the snapshot: dropped, not filled
			 * until region_reset_end() makes it MISSING */
	PG_NSTATES
};

struct region {
	uint64_t addr;		/* current host address (REMAP moves it) */
	uint64_t len;
	uint64_t page_size;
	unsigned int page_shift;
	uint64_t npages;
	uint64_t src_off;	/* source offset of the region's first byte */
	int memfd;		/* minor mode: the shared memory file; or -1 */
	uint64_t memfd_off;	/* its offset of the region's first byte */
	struct fl_source *src;
	struct fl_cache *cache;	/* a clone region: served from it (its
				 * offsets are src_off's), or NULL */
	_Atomic uint8_t *state;	/* npages bytes, enum page_state */
	bool shared_state;	/* state lives in the engine's state map */
	/*
	 * While writes are tracked (region_track): a byte per page, 1 for a
	 * page that must be dropped at the next reset whatever the kernel
	 * says of its writes (filled before tracking began, discarded by
	 * the client, or written: the synchronous mechanism's record).
	 */
	_Atomic uint8_t *dirty;
	_Atomic uint64_t ndirty;	/* pages marked in it: 0, not walked */

	struct ra_state ra;	/* prefetch.c's: the readahead stream */
};

int region_new(const struct fl_region_desc *d, struct fl_source *src,
	       struct region **out);
void region_free(struct region *r);

static inline bool region_contains(const struct region *r, uint64_t addr)
{
	return addr >= r->addr && addr - r->addr < r->len;
}

static inline uint64_t region_page(const struct region *r, uint64_t addr)
{
	return (addr - r->addr) >> r->page_shift;
}

/* Pages in bytes of r, at least one. */
static inline uint64_t region_pages(const struct region *r, uint64_t bytes)
{
	uint64_t n = bytes >> r->page_shift;

	return n ? n : 1;
}

static inline uint64_t region_page_addr(const struct region *r, uint64_t pg)
{
	return r->addr + (pg << r->page_shift);
}

static inline enum page_state region_get(const struct region *r, uint64_t pg)
{
	return (enum page_state)atomic_load_explicit(&r->state[pg],
						     memory_order_acquire);
}

static inline void region_set(struct region *r, uint64_t pg, uint64_t n,
			      enum page_state s)
{
	for (uint64_t i = pg; i < pg + n; i++)
		atomic_store_explicit(&r->state[i], s, memory_order_release);
}

/* Claim page pg if it is in state from: true if this caller now owns it. */
static inline bool region_claim(struct region *r, uint64_t pg,
				enum page_state from)
{
	uint8_t want = (uint8_t)from;

	return atomic_compare_exchange_strong(&r->state[pg], &want, PG_BUSY);
}

/*
 * Keep r's page states in mem (npages bytes of a shared mapping that
 * outlives this process): taken over as they are when keep (a fill under
 * way becomes missing), else all missing.
 */
void region_share_state(struct region *r, _Atomic uint8_t *mem, bool keep);

/*
 * Mark [start, end) of the address space removed (pages being reset
 * excepted); returns pages marked.
 */
uint64_t region_mark_removed(struct region *r, uint64_t start, uint64_t end);

/*
 * mremap moved [start, start+len) to new_addr.  If that is all of r, r is
 * moved and 1 returned.  Otherwise *out is a new region for the moved part
 * (same source offsets and page states; the caller cuts the old range out
 * of r with region_cut).  0 if r is not concerned, or -errno.
 */
int region_remap(struct region *r, uint64_t start, uint64_t len,
		 uint64_t new_addr, struct region **out);

/*
 * Take [start, end) out of r (unmapped, or moved away): r keeps what lies
 * before it, and what lies after becomes a new region *tail, so regions
 * never overlap what the client maps next.  Returns 1 if nothing of r is
 * left before the range (the caller drops r; *tail may still be set).
 */
int region_cut(struct region *r, uint64_t start, uint64_t end,
	       struct region **tail);

/*
 * A reset of [start, end) of the address space: region_reset_begin()
 * makes its MISSING, PRESENT and REMOVED pages RESET (GONE pages have no
 * mapping to drop), engine lock held exclusively; the caller drops them
 * (MADV_DONTNEED) without the lock; region_reset_end() makes them
 * MISSING.  Each returns the pages it changed.
 */
uint64_t region_reset_begin(struct region *r, uint64_t start, uint64_t end);
uint64_t region_reset_end(struct region *r, uint64_t start, uint64_t end);

/*
 * Start tracking r: its dirty map, with every page filled or discarded
 * so far marked (they may have been written untracked).  Engine lock
 * held exclusively.  0 or -ENOMEM.
 */
int region_track(struct region *r);

static inline void region_set_dirty(struct region *r, uint64_t pg)
{
	if (r->dirty && !atomic_exchange(&r->dirty[pg], 1))
		atomic_fetch_add(&r->ndirty, 1);
}

/* Number of pages in each state (for stats and tests). */
void region_count(const struct region *r, uint64_t counts[PG_NSTATES]);

/*
 * The engine's regions: never overlapping, in no order.  Changed only with
 * the engine lock held exclusively; a region leaving the list (cut away
 * whole, or the list freed) is handed to drop(arg, r), which must forget
 * it (queued work naming it) and region_free() it.
 */
struct region_list {
	struct region **v;
	int n, cap;
	unsigned int added;	/* bumped by every insert (splits too) */
};

typedef void region_drop_fn(void *arg, struct region *r);

/* The region containing addr, or NULL. */
struct region *region_find(const struct region_list *l, uint64_t addr);
/* Add r: 0, or -ENOMEM (r is then still the caller's). */
int region_insert(struct region_list *l, struct region *r);
/*
 * UNMAP: cut [start, end) out of every region (each shrinks, splits in
 * two or goes), so that none covers memory the client may map anew.
 */
void region_list_cut(struct region_list *l, uint64_t start, uint64_t end,
		     region_drop_fn *drop, void *arg);
/*
 * REMAP: [from, from+len) moved to to.  A region wholly inside moves; one
 * partly inside is split: the moved part becomes a new region at its new
 * address, and the old range is cut out of what stayed.
 */
void region_list_move(struct region_list *l, uint64_t from, uint64_t to,
		      uint64_t len, region_drop_fn *drop, void *arg);
/* REMOVE: [start, end) of every region discarded (region_mark_removed). */
void region_list_removed(struct region_list *l, uint64_t start, uint64_t end);
/* Drop every region (drop NULL: region_free) and the list's storage. */
void region_list_free(struct region_list *l, region_drop_fn *drop, void *arg);

#endif
