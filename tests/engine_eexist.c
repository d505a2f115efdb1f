// SPDX-License-Identifier: Apache-2.0
/*
 * engine_eexist.c - a page populated behind the engine's back while a fault
 * on it is in flight (the process, or another handler, got there first):
 * COPY fails with EEXIST, and the engine must WAKE the faulting thread, or
 * it sleeps forever.  Also: the rest of the chunk is still served.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>

#include "faultline.h"
#include "load.h"
#include "tap.h"
#include "util.h"
#include "kernel/uffd.h"

#define SEED 0xee

struct reader {
	volatile uint64_t *p;
	uint64_t got;
	int done;
};

static void *read_page(void *arg)
{
	struct reader *r = arg;

	r->got = *r->p;
	__atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static int wait_done(struct reader *r, int ms)
{
	for (int i = 0; i < ms && !__atomic_load_n(&r->done, __ATOMIC_ACQUIRE); i++)
		usleep(1000);
	return __atomic_load_n(&r->done, __ATOMIC_ACQUIRE);
}

int main(void)
{
	uint64_t len = 4 << 20;
	struct fl_source *src;
	struct fl_engine *e;
	struct fl_stats st;
	static uint64_t mine[PAGE / 8] __attribute__((aligned(4096)));
	pthread_t th;
	uint8_t *mem;
	char *path;

	load_start();
	path = make_snapshot(len, SEED, NULL, 0);
	mem = map_anon(len, 0);
	fl_source_open(path, &src);
	/*
	 * No prefetch, no background, a fixed 64 KiB chunk (a growing one
	 * would swallow the next pages): only a fault's chunk fills a page,
	 * so the loop below meets a page we populated first in every chunk.
	 */
	struct fl_engine_opts o = { .uffd = -1, .chunk_size = 64 << 10,
				    .flags = FL_ENGINE_NO_PREFETCH |
					     FL_ENGINE_NO_BACKGROUND };

	if (fl_engine_create(&o, &e) < 0)
		BAIL("engine: %s", fl_last_error());
	struct fl_region_desc d = { .addr = (uintptr_t)mem, .len = len, .page_size = PAGE, .src_offset = 0, .flags = FL_REGION_REGISTER };
	fl_engine_add_region(e, &d, src);

	/* A thread faults on page 5; nobody serves it yet. */
	struct reader r = { (volatile uint64_t *)(mem + 5 * PAGE), 0, 0 };
	struct pollfd p = { .fd = fl_engine_uffd(e), .events = POLLIN };

	pthread_create(&th, NULL, read_page, &r);
	ok(poll(&p, 1, 5000) == 1, "fault pending on the uffd");

	/* The page gets populated behind the engine's back, nobody woken. */
	for (int i = 0; i < (int)(PAGE / 8); i++)
		mine[i] = 0x1111111111111111ull;
	uint64_t done;
	int ret = uffd_copy(fl_engine_uffd(e), (uintptr_t)mem + 5 * PAGE, mine,
			    PAGE, UFFDIO_COPY_MODE_DONTWAKE, &done);

	ok(ret == 0 && done == PAGE, "page populated with DONTWAKE (%d)", ret);
	usleep(20000);
	ok(!__atomic_load_n(&r.done, __ATOMIC_ACQUIRE),
	   "faulting thread still asleep before the engine runs");

	ok(fl_engine_process(e) >= 1, "engine processed the fault");
	ok(wait_done(&r, 5000), "faulting thread woken after EEXIST");
	if (r.done)
		pthread_join(th, NULL);
	is_int(r.got, 0x1111111111111111ull, "the process's own data is kept");
	ok(same_as_file(mem, 5 * PAGE, 0, SEED, 0) &&
	   same_as_file(mem + 6 * PAGE, (64 << 10) - 6 * PAGE, 6 * PAGE, SEED, 0),
	   "the rest of the chunk was still served from the snapshot");
	fl_engine_stats(e, &st);
	is_int(st.eexist, 1, "one EEXIST counted");

	/*
	 * Same again with the engine's own threads running.  Our COPY lands
	 * (0: the page holds ours) or an earlier chunk filled the page first
	 * (-EEXIST: the snapshot's); the neighbour always reads the snapshot.
	 */
	fl_engine_start(e, 2);
	int wrong = 0, ours = 0;

	for (int k = 0; k < 200; k++) {
		uint64_t pg = 64 + (uint64_t)k * 4;

		ret = uffd_copy(fl_engine_uffd(e), (uintptr_t)mem + pg * PAGE,
				mine, PAGE, UFFDIO_COPY_MODE_DONTWAKE, &done);
		struct reader rr = { (volatile uint64_t *)(mem + pg * PAGE + PAGE), 0, 0 };

		pthread_create(&th, NULL, read_page, &rr);
		if (!wait_done(&rr, 30000)) {
			ok(0, "200 faults next to pages populated behind our "
			   "back: the one on page %llu hung",
			   (unsigned long long)pg + 1);
			BAIL("thread hung on page %llu",
			     (unsigned long long)pg + 1);
		}
		pthread_join(th, NULL);
		ours += ret == 0;
		wrong += rr.got != pattern_word((pg + 1) * PAGE, SEED);
		if (ret == 0)
			wrong += *(volatile uint64_t *)(mem + pg * PAGE) !=
				 0x1111111111111111ull;
		else if (ret == -EEXIST)
			wrong += !same_as_file(mem + pg * PAGE, PAGE,
					       pg * PAGE, SEED, 0);
		else
			wrong++;
	}
	/* one of ours per 64 KiB chunk: pages 64, 80, ... 848 */
	ok(!wrong && ours == 50, "200 faults next to pages populated behind "
	   "our back: none hung, every page ours or the snapshot's as its "
	   "COPY said (%d of ours, want 50; %d wrong)", ours, wrong);
	fl_engine_destroy(e);
	fl_source_put(src);
	munmap(mem, len);
	drop_snapshot(path);
	return done_testing();
}
