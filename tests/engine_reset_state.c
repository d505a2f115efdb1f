// SPDX-License-Identifier: Apache-2.0
/*
 * engine_reset_state.c - the region state transition a reset needs:
 * PRESENT back to MISSING through RESET, distinct from REMOVED.  A page
 * reset (internal API + MADV_DONTNEED) reads the snapshot's bytes again
 * at its next touch; a page dropped by a plain MADV_DONTNEED (a balloon)
 * reads zeros; a removed page that is then reset reads the snapshot; a
 * thread that faults on a page while it is being reset is woken and reads
 * the snapshot; two resets at once end together; a REMAP during a
 * reset carries RESET pages away and its end still finds them.
 * In-process engine, internal headers (-Isrc).  Every
 * point is bytes or a state, never a timing: it holds under FL_LOAD=1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>

#include "faultline.h"
#include "load.h"
#include "tap.h"
#include "util.h"
#include "engine/core.h"
#include "engine/reset.h"

#define SEED	0x5e5e
#define LEN	(1ull << 20)
#define DIRTY	0xababababababababull

static struct fl_engine *e;
static uint8_t *mem;

/*
 * The state of page pg, once the events read so far are applied and the
 * fills under way are done (a fill wakes its thread before it marks the
 * page present): the lock held exclusively waits for both.
 */
static enum page_state state_of(uint64_t pg)
{
	pthread_rwlock_wrlock(&e->lock);
	struct region *r = region_find(&e->regions,
				       (uintptr_t)mem + pg * PAGE);
	enum page_state s = r ? region_get(r, region_page(r,
				(uintptr_t)mem + pg * PAGE)) : PG_NSTATES;

	pthread_rwlock_unlock(&e->lock);
	return s;
}

static uint8_t *page(uint64_t pg)
{
	return mem + pg * PAGE;
}

/* Touch page pg (it faults in), then write over it. */
static void dirty(uint64_t pg)
{
	volatile uint64_t *w = (volatile uint64_t *)page(pg);

	(void)w[0];
	for (uint64_t i = 0; i < PAGE / 8; i++)
		w[i] = DIRTY;
}

static int snapshot_at(uint64_t pg, uint64_t n)
{
	return same_as_file(page(pg), n * PAGE, pg * PAGE, SEED, 0);
}

struct reader {
	uint64_t pg;
	const uint8_t *at;	/* NULL: page(pg) */
	int same;
	int done;
};

static void *read_page(void *arg)
{
	struct reader *rd = arg;

	rd->same = rd->at ? same_as_file(rd->at, PAGE, rd->pg * PAGE, SEED, 0)
			  : snapshot_at(rd->pg, 1);
	__atomic_store_n(&rd->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* 1. A reset: begin, the drop, end; the next touch reads the snapshot. */
static int case_reset(void)
{
	dirty(0);
	ok(state_of(0) == PG_PRESENT && !snapshot_at(0, 1),
	   "a page filled, then written: present, not the snapshot");
	ok(engine_reset_begin(e, (uintptr_t)page(0), PAGE) == 1 &&
	   state_of(0) == PG_RESET, "reset begun: the page is RESET");
	ok(madvise(page(0), PAGE, MADV_DONTNEED) == 0 &&
	   state_of(0) == PG_RESET, "its MADV_DONTNEED (a REMOVE event) "
	   "leaves it RESET, not REMOVED");
	ok(engine_reset_end(e, (uintptr_t)page(0), PAGE) == 1 &&
	   state_of(0) == PG_MISSING, "reset ended: MISSING");
	ok(snapshot_at(0, 1) && state_of(0) == PG_PRESENT,
	   "touched again: the snapshot's bytes, not zeros nor the write");
	return 0;
}

/* 2. A plain MADV_DONTNEED (the client's balloon): zeros. */
static int case_balloon(void)
{
	dirty(1);
	ok(madvise(page(1), PAGE, MADV_DONTNEED) == 0 &&
	   state_of(1) == PG_REMOVED, "a plain MADV_DONTNEED: REMOVED");
	ok(same_as_file(page(1), PAGE, 0, 0, 1),
	   "touched again: zeros, as the kernel says a dropped page reads");
	return 0;
}

/* 3. Removed by the client, then reset: the snapshot again. */
static int case_removed_then_reset(void)
{
	dirty(2);
	madvise(page(2), PAGE, MADV_DONTNEED);
	ok(state_of(2) == PG_REMOVED, "a page removed by the client");
	ok(engine_reset_range(e, (uintptr_t)page(2), PAGE) == 1 &&
	   state_of(2) == PG_MISSING && snapshot_at(2, 1),
	   "reset (engine_reset_range): MISSING, then the snapshot's bytes");
	return 0;
}

/* 4. A thread faulting on a page being reset waits, then reads it. */
static int case_fault_during_reset(void)
{
	struct reader rd = { .pg = 3 };
	pthread_t th;

	dirty(3);
	engine_reset_begin(e, (uintptr_t)page(3), PAGE);
	madvise(page(3), PAGE, MADV_DONTNEED);
	pthread_create(&th, NULL, read_page, &rd);
	usleep(20000);	/* let it fault on the RESET page (not required) */
	engine_reset_end(e, (uintptr_t)page(3), PAGE);
	for (int i = 0; i < 10000 && !__atomic_load_n(&rd.done,
						       __ATOMIC_ACQUIRE); i++)
		usleep(1000);
	ok(__atomic_load_n(&rd.done, __ATOMIC_ACQUIRE) && rd.same,
	   "a fault during the reset is woken at its end and reads the "
	   "snapshot (no hang)");
	if (__atomic_load_n(&rd.done, __ATOMIC_ACQUIRE))
		pthread_join(th, NULL);
	else
		BAIL("the reader hangs on a reset page");
	return 0;
}

/* 5. A run of pages, some never touched: all the snapshot again. */
static int case_run(void)
{
	for (uint64_t pg = 8; pg < 24; pg += 2)
		dirty(pg);
	ok(engine_reset_range(e, (uintptr_t)page(8), 16 * PAGE) == 16 &&
	   snapshot_at(8, 16), "16 pages reset, half of them written, half "
	   "never touched: every one the snapshot's bytes");
	uint64_t m0, m1, total;

	/* The last fill may still be marking its page (it woke us first). */
	state_of(0);
	/* -EBUSY while a reader applies events: ask again. */
	while (fl_engine_progress(e, &m0, &total) == -EBUSY)
		usleep(1000);
	engine_reset_begin(e, (uintptr_t)page(0), PAGE);
	while (fl_engine_progress(e, &m1, &total) == -EBUSY)
		usleep(1000);
	ok(m1 == m0 + PAGE,
	   "progress counts a page being reset as missing (%llu -> %llu)",
	   (unsigned long long)m0, (unsigned long long)m1);
	madvise(page(0), PAGE, MADV_DONTNEED);
	engine_reset_end(e, (uintptr_t)page(0), PAGE);
	ok(snapshot_at(0, 1), "reset a second time: the snapshot again");
	return 0;
}

/* 6. Two resets at once: pages turn MISSING when the last one ends. */
static int case_two_resets(void)
{
	dirty(30);
	dirty(31);
	engine_reset_begin(e, (uintptr_t)page(30), PAGE);
	engine_reset_begin(e, (uintptr_t)page(31), PAGE);
	madvise(page(30), 2 * PAGE, MADV_DONTNEED);
	ok(engine_reset_end(e, (uintptr_t)page(30), PAGE) == 0 &&
	   state_of(30) == PG_RESET && state_of(31) == PG_RESET,
	   "two resets under way, one ends: both pages still RESET");
	ok(engine_reset_end(e, (uintptr_t)page(31), PAGE) == 2 &&
	   snapshot_at(30, 2), "the last ends: both MISSING, then the "
	   "snapshot's bytes");
	return 0;
}

/*
 * 7. A REMAP while a reset's drop is under way carries RESET pages
 * elsewhere: the reset's end finds them there (by state, not by
 * address), and a touch at the new address reads the snapshot.
 */
static int case_remap(void)
{
	pthread_t th;
	struct reader rm = { .pg = 40 };
	uint8_t *hole = map_anon(2 * PAGE, 0);

	dirty(40);
	dirty(41);
	engine_reset_begin(e, (uintptr_t)page(40), 2 * PAGE);
	madvise(page(40), 2 * PAGE, MADV_DONTNEED);
	uint8_t *moved = mremap(page(40), 2 * PAGE, 2 * PAGE,
				MREMAP_MAYMOVE | MREMAP_FIXED, hole);

	if (moved == MAP_FAILED)
		BAIL("mremap: %s", strerror(errno));
	rm.at = moved;
	ok(engine_reset_end(e, (uintptr_t)page(40), 2 * PAGE) == 2,
	   "a REMAP during the reset: its end makes the moved pages MISSING");
	pthread_create(&th, NULL, read_page, &rm);
	for (int i = 0; i < 10000 && !__atomic_load_n(&rm.done,
						       __ATOMIC_ACQUIRE); i++)
		usleep(1000);
	ok(__atomic_load_n(&rm.done, __ATOMIC_ACQUIRE) && rm.same &&
	   same_as_file(moved + PAGE, PAGE, 41 * PAGE, SEED, 0),
	   "touched at their new address: the snapshot's bytes, no hang");
	if (__atomic_load_n(&rm.done, __ATOMIC_ACQUIRE))
		pthread_join(th, NULL);
	else
		BAIL("a reader hangs on a page moved while being reset");
	munmap(moved, 2 * PAGE);
	return 0;
}

static const struct tap_case cases[] = {
	{ "a reset", case_reset },
	{ "a balloon", case_balloon },
	{ "removed, then reset", case_removed_then_reset },
	{ "a fault during a reset", case_fault_during_reset },
	{ "a run of pages", case_run },
	{ "two resets at once", case_two_resets },
	{ "a REMAP during a reset", case_remap },
};

int main(void)
{
	struct fl_engine_opts o = { .chunk_size = PAGE,
		.flags = FL_ENGINE_NO_PREFETCH | FL_ENGINE_NO_BACKGROUND };
	char *path = make_snapshot(LEN, SEED, NULL, 0);
	struct fl_source *src;

	load_start();
	mem = map_anon(LEN, 0);
	madvise(mem, LEN, MADV_NOHUGEPAGE);
	struct fl_region_desc d = { .addr = (uintptr_t)mem, .len = LEN,
				    .flags = FL_REGION_REGISTER };

	if (fl_source_open(path, &src) < 0 || fl_engine_create(&o, &e) < 0 ||
	    fl_engine_add_region(e, &d, src) < 0 || fl_engine_start(e, 1) < 0)
		BAIL("engine setup: %s", fl_last_error());

	TAP_RUN(cases);
	fl_engine_destroy(e);
	fl_source_put(src);
	munmap(mem, LEN);
	drop_snapshot(path);
	return done_testing();
}
