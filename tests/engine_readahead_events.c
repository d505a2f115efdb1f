// SPDX-License-Identifier: Apache-2.0
/*
 * engine_readahead_events.c - a readahead window queued over memory the
 * client then unmaps or moves away is never filled there: the engine
 * clips it to what is left of its region.  Pages removed after the cut
 * and the range MREMAP_DONTUNMAP leaves behind must read zeros.  And a
 * run across a VMA split (ENOENT for the whole run) is filled page by page.
 *
 * The client runs on a thread while the caller-driven engine (no filler)
 * applies its events; the filler starts only afterwards, so the window is
 * still queued when the region changes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "faultline.h"
#include "tap.h"
#include "util.h"

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif

#define SEED 0xc07
#define LEN (16ull << 20)

static uint8_t *mem, *moved;
static atomic_int done;

/* Chunk 0, then chunk 1: a window over pages [32, 96) is queued. */
static void start_stream(void)
{
	volatile uint8_t *m = mem;

	(void)m[0];
	(void)m[16 * PAGE];
}

/* Unmap pages [48, 64): the region keeps [0, 48), a new one has the rest. */
static void *cut_client(void *arg)
{
	(void)arg;
	start_stream();
	(void)((volatile uint8_t *)mem)[48 * PAGE];
	munmap(mem + 48 * PAGE, 16 * PAGE);
	madvise(mem + 80 * PAGE, PAGE, MADV_DONTNEED);	/* after the cut */
	atomic_store(&done, 1);
	return NULL;
}

/* Move pages [64, end) away, leaving the old range mapped (and empty). */
static void *dontunmap_client(void *arg)
{
	uint8_t *dst = map_anon(LEN - 64 * PAGE, 0);

	(void)arg;
	start_stream();
	moved = mremap(mem + 64 * PAGE, LEN - 64 * PAGE, LEN - 64 * PAGE,
		       MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, dst);
	atomic_store(&done, 1);
	return NULL;
}

/* Run client against a fresh engine; then let the filler run. */
static struct fl_engine *run(struct fl_source *src, void *(*client)(void *))
{
	struct fl_engine_opts o = { .uffd = -1, .chunk_size = 64 << 10,
				    .flags = FL_ENGINE_NO_BACKGROUND };
	struct fl_region_desc d = { .len = LEN, .page_size = PAGE,
				    .flags = FL_REGION_REGISTER };
	struct fl_engine *e;
	pthread_t t;

	mem = map_anon(LEN, 0);
	d.addr = (uintptr_t)mem;
	if (fl_engine_create(&o, &e) < 0 || fl_engine_add_region(e, &d, src) < 0)
		BAIL("engine: %s", fl_last_error());
	atomic_store(&done, 0);
	pthread_create(&t, NULL, client, NULL);
	while (!atomic_load(&done)) {
		struct pollfd p = { .fd = fl_engine_uffd(e), .events = POLLIN };

		poll(&p, 1, 10);
		fl_engine_process(e);
	}
	pthread_join(t, NULL);
	fl_engine_process(e);		/* the last events */
	if (fl_engine_start(e, 1) < 0)	/* the filler runs the window now */
		BAIL("start: %s", fl_last_error());
	usleep(300000);
	return e;
}

/*
 * A region split in two VMAs (madvise on part of it): a run across the
 * split fails whole with ENOENT; every page must still be restored.
 */
static void test_split(struct fl_source *src)
{
	struct fl_engine_opts o = { .uffd = -1, .quiet_ms = 1 };
	struct fl_region_desc d = { .len = LEN, .page_size = PAGE,
				    .flags = FL_REGION_REGISTER };
	struct fl_engine *e;
	struct fl_stats st = { 0 };

	mem = map_anon(LEN, 0);
	d.addr = (uintptr_t)mem;
	madvise(mem + LEN / 2 + 12 * 1024, LEN / 2 - 12 * 1024,
		MADV_NOHUGEPAGE);
	if (fl_engine_create(&o, &e) < 0 ||
	    fl_engine_add_region(e, &d, src) < 0 || fl_engine_start(e, 1) < 0)
		BAIL("engine: %s", fl_last_error());
	for (int i = 0; i < 300 && !st.restore_complete; i++) {
		usleep(10000);
		fl_engine_stats(e, &st);
	}
	ok(st.restore_complete && st.pages_background == LEN / PAGE,
	   "split VMA: background restore filled every page (%llu)",
	   (unsigned long long)st.pages_background);
	ok(same_as_file(mem, LEN, 0, SEED, 0),
	   "split VMA: every byte is the snapshot's");
	fl_engine_destroy(e);
	munmap(mem, LEN);
}

int main(void)
{
	char *path = make_snapshot(LEN, SEED, NULL, 0);
	struct fl_source *src;
	struct fl_engine *e;

	alarm(60);	/* a fault left to loop must fail the test, not hang it */
	if (fl_source_open(path, &src) < 0)
		BAIL("source: %s", fl_last_error());

	e = run(src, cut_client);
	ok(is_zero_mem(mem + 80 * PAGE, PAGE),
	   "unmap: a page removed after the cut reads zeros");
	ok(same_as_file(mem + 64 * PAGE, 16 * PAGE, 64 * PAGE, SEED, 0) &&
	   same_as_file(mem + 81 * PAGE, 15 * PAGE, 81 * PAGE, SEED, 0),
	   "unmap: the pages around it are the snapshot's");
	ok(same_as_file(mem, 48 * PAGE, 0, SEED, 0),
	   "unmap: what is left of the region is the snapshot's");
	fl_engine_destroy(e);
	munmap(mem, LEN);

	e = run(src, dontunmap_client);
	if (moved == MAP_FAILED)
		BAIL("mremap(MREMAP_DONTUNMAP): %s", strerror(errno));
	ok(is_zero_mem(mem + 64 * PAGE, 32 * PAGE),
	   "MREMAP_DONTUNMAP: the range left behind reads zeros");
	ok(same_as_file(moved, 32 * PAGE, 64 * PAGE, SEED, 0),
	   "MREMAP_DONTUNMAP: the moved range is the snapshot's");
	fl_engine_destroy(e);

	test_split(src);
	fl_source_put(src);
	drop_snapshot(path);
	return done_testing();
}
