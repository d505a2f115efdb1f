// SPDX-License-Identifier: Apache-2.0
/*
 * engine_move.c - the in-process zero-copy path (FL_ENGINE_MOVE): pages read
 * into the THP staging buffer are moved into place with UFFDIO_MOVE.  Every
 * byte equals the snapshot, zero and removed pages read as zeros, EEXIST is
 * still woken, and the pages really were moved.
 */
#include <pthread.h>

#include "faultline.h"
#include "tap.h"
#include "util.h"

#define LEN (32ull << 20)

struct toucher {
	uint8_t *mem;
	unsigned int seed;
	int bad;
};

static void *touch(void *arg)
{
	struct toucher *t = arg;

	for (int i = 0; i < 2000; i++) {
		uint64_t pg = (uint64_t)rand_r(&t->seed) % (LEN / PAGE);

		int zero = pg * PAGE >= (4 << 20) && pg * PAGE < (6 << 20);

		t->bad += !same_as_file(t->mem + pg * PAGE, PAGE, pg * PAGE,
					0x30, zero);
	}
	return NULL;
}

int main(void)
{
	uint64_t zeros[] = { 4 << 20, 2 << 20 };
	char *path = make_snapshot(LEN, 0x30, zeros, 1);
	struct fl_source *src;
	struct fl_engine *e;
	struct fl_stats st;
	uint8_t *mem = map_anon(LEN, 0);
	struct fl_engine_opts o = { .uffd = -1, .chunk_size = 2 << 20,
				    .flags = FL_ENGINE_MOVE };

	fl_source_open(path, &src);
	ok(fl_engine_create(&o, &e) == 0, "engine with MOVE");
	struct fl_region_desc d = { .addr = (uintptr_t)mem, .len = LEN, .page_size = PAGE, .src_offset = 0, .flags = FL_REGION_REGISTER };

	fl_engine_add_region(e, &d, src);
	fl_engine_start(e, 2);

	struct toucher t[3];
	pthread_t th[3];
	int bad = 0;

	for (int i = 0; i < 3; i++) {
		t[i] = (struct toucher){ mem, 7u * i + 1, 0 };
		pthread_create(&th[i], NULL, touch, &t[i]);
	}
	for (int i = 0; i < 3; i++) {
		pthread_join(th[i], NULL);
		bad += t[i].bad;
	}
	is_int(bad, 0, "random multi-threaded access: no wrong page");
	ok(is_zero_mem(mem + (4 << 20), 2 << 20), "zero range reads zeros");
	madvise(mem + (8 << 20), 1 << 20, MADV_DONTNEED);
	ok(is_zero_mem(mem + (8 << 20), 1 << 20), "removed range reads zeros");
	ok(same_as_file(mem, 4 << 20, 0, 0x30, 0) &&
	   same_as_file(mem + (6 << 20), 2 << 20, 6 << 20, 0x30, 0) &&
	   same_as_file(mem + (9 << 20), LEN - (9 << 20), 9 << 20, 0x30, 0),
	   "every other byte equals the snapshot");
	fl_engine_stop(e);
	fl_engine_stats(e, &st);
	ok(st.pages_moved > 0 && st.pages_moved <= st.pages_copied,
	   "pages were moved, not copied (%llu of %llu)",
	   (unsigned long long)st.pages_moved,
	   (unsigned long long)st.pages_copied);
	fl_engine_destroy(e);
	munmap(mem, LEN);
	fl_source_put(src);
	drop_snapshot(path);
	return done_testing();
}
