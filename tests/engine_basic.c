// SPDX-License-Identifier: Apache-2.0
/*
 * engine_basic.c - every page equals the snapshot under random
 * multi-threaded access, for several chunk sizes; chunks at region edges and
 * at the end of the file; zero chunks; the caller-driven loop.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>

#include "faultline.h"
#include "tap.h"
#include "util.h"

#define SEED 0x5eed

struct toucher {
	uint8_t *mem;
	uint64_t len, off;
	unsigned int seed;
	int bad;
};

static void *touch_random(void *arg)
{
	struct toucher *t = arg;
	uint64_t npages = t->len / PAGE;

	for (uint64_t i = 0; i < npages; i++) {
		uint64_t pg = (uint64_t)rand_r(&t->seed) % npages;

		if (!same_as_file(t->mem + pg * PAGE, PAGE, t->off + pg * PAGE,
				  SEED, 0))
			t->bad++;
	}
	return NULL;
}

/* Serve len bytes at file offset off with chunk bytes, 4 touching threads. */
static void random_access(struct fl_source *src, uint64_t len, uint64_t off,
			  uint64_t chunk, unsigned int threads)
{
	struct fl_engine_opts o = { .uffd = -1, .chunk_size = chunk };
	struct fl_engine *e;
	uint8_t *mem = map_anon(len, 0);
	struct toucher t[4];
	pthread_t th[4];
	struct fl_stats st;
	int bad = 0;

	fl_engine_create(&o, &e);
	struct fl_region_desc d = { .addr = (uintptr_t)mem, .len = len, .page_size = PAGE, .src_offset = off, .flags = FL_REGION_REGISTER };
	int ret = fl_engine_add_region(e, &d, src);

	fl_engine_start(e, threads);
	for (int i = 0; i < 4; i++) {
		t[i] = (struct toucher){ mem, len, off, 17u * i + 1, 0 };
		pthread_create(&th[i], NULL, touch_random, &t[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		bad += t[i].bad;
	}
	int all = same_as_file(mem, len, off, SEED, 0);

	fl_engine_stop(e);	/* stats settle after the wake */
	fl_engine_stats(e, &st);
	ok(ret == 0 && bad == 0 && all,
	   "chunk %llu, %u engine threads: %d wrong pages, full compare %s",
	   (unsigned long long)chunk, threads, bad, all ? "equal" : "DIFFERS");
	ok(st.pages_copied == len / PAGE,
	   "chunk %llu: every page copied exactly once (%llu of %llu)",
	   (unsigned long long)chunk, (unsigned long long)st.pages_copied,
	   (unsigned long long)(len / PAGE));
	fl_engine_destroy(e);
	munmap(mem, len);
}

static void edges(struct fl_source *src, uint64_t fsize)
{
	/* A region of 37 pages ending exactly at the end of the file. */
	uint64_t len = 37 * PAGE, off = fsize - len;
	struct fl_engine_opts o = { .uffd = -1, .chunk_size = 2 << 20 };
	struct fl_engine *e;
	uint8_t *mem = map_anon(len, 0);
	struct fl_stats st;

	fl_engine_create(&o, &e);
	struct fl_region_desc d = { .addr = (uintptr_t)mem, .len = len, .page_size = PAGE, .src_offset = off, .flags = FL_REGION_REGISTER };
	fl_engine_add_region(e, &d, src);
	fl_engine_start(e, 1);
	int last = same_as_file(mem + len - PAGE, PAGE, off + len - PAGE,
				SEED, 0);

	fl_engine_stop(e);
	fl_engine_stats(e, &st);
	ok(last, "last page of a region ending at EOF is right");
	is_int(st.pages_copied, 37, "2M chunk clipped to the 37-page region");
	ok(same_as_file(mem, len, off, SEED, 0), "whole edge region right");
	fl_engine_destroy(e);
	munmap(mem, len);
}

static void zero_chunks(void)
{
	/* 1 MiB of data, then 1 MiB of zeros, then one data page. */
	uint64_t zeros[] = { 1 << 20, 1 << 20 };
	uint64_t len = (2 << 20) + PAGE;
	char *path = make_snapshot(len, SEED, zeros, 1);
	struct fl_source *src;
	/*
	 * Faults only: a background run over data and zeros together is
	 * one COPY (right, but not what this counts), and when it starts
	 * depends on the machine's speed (it failed this test once, under
	 * TSan in CI).
	 */
	struct fl_engine_opts o = { .uffd = -1, .chunk_size = 256 << 10,
		.flags = FL_ENGINE_NO_PREFETCH | FL_ENGINE_NO_BACKGROUND };
	struct fl_engine *e;
	uint8_t *mem = map_anon(len, 0);
	struct fl_stats st;

	fl_source_open(path, &src);
	fl_engine_create(&o, &e);
	struct fl_region_desc d = { .addr = (uintptr_t)mem, .len = len, .page_size = PAGE, .src_offset = 0, .flags = FL_REGION_REGISTER };
	fl_engine_add_region(e, &d, src);
	fl_engine_start(e, 1);
	ok(is_zero_mem(mem + (1 << 20), 1 << 20), "zero range reads zero");
	ok(same_as_file(mem, 1 << 20, 0, SEED, 0) &&
	   same_as_file(mem + (2 << 20), PAGE, 2 << 20, SEED, 0),
	   "data around the zero range is right");
	fl_engine_stop(e);
	fl_engine_stats(e, &st);
	is_int(st.pages_zeroed, 256, "zero chunks resolved with ZEROPAGE");
	is_int(st.bytes_copied, (1 << 20) + PAGE, "no zero byte was copied");
	fl_engine_destroy(e);
	fl_source_put(src);
	munmap(mem, len);
	drop_snapshot(path);
}

static void caller_driven(struct fl_source *src)
{
	uint64_t len = 8 << 20;
	struct fl_engine *e;
	uint8_t *mem = map_anon(len, 0);
	struct caller_loop l;
	pthread_t th;

	fl_engine_create(NULL, &e);
	struct fl_region_desc d = { .addr = (uintptr_t)mem, .len = len, .page_size = PAGE, .src_offset = 4 << 20, .flags = FL_REGION_REGISTER };
	fl_engine_add_region(e, &d, src);
	l.e = e;
	atomic_init(&l.stop, 0);
	pthread_create(&th, NULL, caller_loop_main, &l);
	ok(same_as_file(mem, len, 4 << 20, SEED, 0),
	   "caller-driven loop (fd + process) serves every byte");
	atomic_store(&l.stop, 1);
	pthread_join(th, NULL);
	ok(fl_engine_process(e) == 0, "process with nothing pending returns 0");

	/* Restored by the caller's loop, before any engine thread started. */
	uint64_t miss = 1, all = 0;
	struct fl_stats st;

	fl_engine_progress(e, &miss, &all);
	ok(fl_engine_start(e, 1) == 0 && fl_engine_stats(e, &st) == 0 &&
	   miss == 0 && st.restore_complete && st.restore_ms == 0,
	   "restored before the threads started: restore_ms %llu (0)",
	   (unsigned long long)st.restore_ms);
	fl_engine_destroy(e);
	munmap(mem, len);
}

/*
 * fl_engine_wait(): the restore completes with no fault at all (background
 * restore), every byte right after; percentiles never exceed the max.
 */
static void wait_restored(struct fl_source *src)
{
	uint64_t len = 16 << 20;
	uint8_t *mem = map_anon(len, 0);
	struct fl_engine_opts o = { .quiet_ms = 1 };
	struct fl_region_desc d = { .addr = (uintptr_t)mem, .len = len,
				    .page_size = 4096,
				    .flags = FL_REGION_REGISTER };
	struct fl_engine *e;
	struct fl_stats st;
	int ret;

	if (!mem || fl_engine_create(&o, &e) < 0 ||
	    fl_engine_add_region(e, &d, src) < 0 || fl_engine_start(e, 1) < 0)
		BAIL("wait: %s", fl_last_error());
	ret = fl_engine_wait(e, 20000);
	fl_engine_stats(e, &st);
	ok(ret == 0 && st.restore_complete && st.faults == 0,
	   "fl_engine_wait: the restore completed with no fault (%d, %llu "
	   "faults)", ret, (unsigned long long)st.faults);
	ok(same_as_file(mem, len, 0, SEED, 0), "fl_engine_wait: every byte "
	   "there once it returns");
	st = (struct fl_stats){ .lat_ns_max = 1500 };
	st.lat_hist[10] = 5;	/* [1024, 2048) ns */
	is_int(fl_stats_percentile(&st, 99), 1500, "a percentile is at most "
	       "the largest latency seen");
	fl_engine_destroy(e);
	munmap(mem, len);
}

int main(void)
{
	uint64_t fsize = 64 << 20;
	char *path = make_snapshot(fsize, SEED, NULL, 0);
	struct fl_source *src;

	if (fl_source_open(path, &src) < 0)
		BAIL("cannot open %s", path);
	is_int(fl_source_size(src), fsize, "source size");
	random_access(src, 32 << 20, 0, 4096, 1);
	random_access(src, 32 << 20, 8 << 20, 64 << 10, 2);
	random_access(src, 32 << 20, 32 << 20, 2 << 20, 3);
	edges(src, fsize);
	zero_chunks();
	caller_driven(src);
	wait_restored(src);
	fl_source_put(src);
	drop_snapshot(path);
	return done_testing();
}
