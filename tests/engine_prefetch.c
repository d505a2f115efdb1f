// SPDX-License-Identifier: Apache-2.0
/*
 * engine_prefetch.c - readahead and background restore fill the right bytes:
 * a linear client gets pages filled ahead of it (and every byte equal to the
 * snapshot), a strided client gets the chunks ahead at its stride and
 * nothing between them, a random client gets no readahead, an idle client
 * gets its
 * whole memory restored in the background, and removed pages are never
 * filled ahead of a fault.
 *
 * Decision: only what holds under any load is asserted (bytes, pages
 * copied once, nothing filled where it must not be, a restore that says
 * it is complete is).  How much readahead or background restore did
 * rather than the faults is the scheduler's to decide: those figures are
 * `faultline bench policy`'s.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "faultline.h"
#include "tap.h"
#include "util.h"

#define SEED 0xfe7c
#define LEN (64ull << 20)
#define STRIDE (256ull << 10)
#define RECORD (64ull << 10)	/* the default chunk */

/* What the cases share: the snapshot's source, one random sequence. */
static struct fl_source *src;
static unsigned int seed = 3;

static bool resident(void *p, size_t len)
{
	unsigned char v = 0;

	return mincore(p, len, &v) == 0 && (v & 1);
}

static struct fl_engine *serve(struct fl_source *src, uint8_t *mem,
			       unsigned int flags)
{
	struct fl_engine_opts o = { .uffd = -1, .flags = flags };
	struct fl_engine *e;
	struct fl_region_desc d = { .addr = (uintptr_t)mem, .len = LEN, .page_size = PAGE, .src_offset = 0, .flags = FL_REGION_REGISTER };

	if (fl_engine_create(&o, &e) < 0 || fl_engine_add_region(e, &d, src) < 0 ||
	    fl_engine_start(e, 1) < 0)
		BAIL("engine: %s", fl_last_error());
	return e;
}

static uint64_t now_ms_(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static struct fl_stats finish(struct fl_engine *e)
{
	struct fl_stats st;

	fl_engine_stop(e);
	fl_engine_stats(e, &st);
	fl_engine_destroy(e);
	return st;
}

/* Linear: readahead kicks in. */
static int case_linear(void)
{
	struct fl_stats st;
	uint8_t *mem;

	mem = map_anon(LEN, 0);
	uint64_t t0 = now_ms_(), miss = 1, all = 0;	/* before the start */
	struct fl_engine *e = serve(src, mem, FL_ENGINE_NO_BACKGROUND);

	ok(same_as_file(mem, LEN, 0, SEED, 0), "linear: every byte right");
	uint64_t took = now_ms_() - t0;

	/* No background restore: a progress scan tells it is complete. */
	fl_engine_stats(e, &st);
	int before = (int)st.restore_complete;

	/*
	 * A run a filler has just copied is marked filled a moment after the
	 * guest could read it, so a scan while the engine runs may still see
	 * it busy.  Stopped, no run is under way: one scan must find nothing
	 * missing, and say the restore complete, within the engine's life.
	 */
	fl_engine_stop(e);
	int r = fl_engine_progress(e, &miss, &all);
	uint64_t life = now_ms_() - t0;

	fl_engine_stats(e, &st);
	ok(!before && r == 0 && miss == 0 && all == LEN &&
	   st.restore_complete && st.restore_ms <= life,
	   "linear: restored by faults and readahead alone, a progress scan "
	   "says so: %d, %llu of %llu bytes missing, restore_ms %llu (the "
	   "guest took %llu ms, the engine lived %llu)", r,
	   (unsigned long long)miss, (unsigned long long)all,
	   (unsigned long long)st.restore_ms, (unsigned long long)took,
	   (unsigned long long)life);
	st = finish(e);
	diag("linear: %llu faults, %llu of %llu pages prefetched",
	     (unsigned long long)st.faults,
	     (unsigned long long)st.pages_prefetched,
	     (unsigned long long)(LEN / PAGE));
	is_int(st.pages_copied, LEN / PAGE, "linear: each page copied once");
	munmap(mem, LEN);
	return 0;
}

/*
 * Strided: a 64 KiB record every 256 KiB (four chunks apart), read
 * whole: a client that only touched one byte per step would outrun
 * any copier, and how far it got would be a race.
 */
static int case_strided(void)
{
	struct fl_engine *e;
	struct fl_stats st;
	uint8_t *mem;
	int good;

	mem = map_anon(LEN, 0);
	e = serve(src, mem, FL_ENGINE_NO_BACKGROUND);
	good = 1;
	for (uint64_t off = 0; off < LEN; off += STRIDE)
		good &= same_as_file(mem + off, RECORD, off, SEED, 0);
	ok(good, "strided: every record read right");
	st = finish(e);
	diag("strided: %llu faults for %llu records, %llu pages prefetched",
	     (unsigned long long)st.faults, (unsigned long long)(LEN / STRIDE),
	     (unsigned long long)st.pages_prefetched);
	is_int(st.pages_copied, LEN / STRIDE * 16,
	       "strided: the records and nothing between them");
	ok(!resident(mem + 128 * 1024, PAGE) &&
	   !resident(mem + LEN - STRIDE / 2, PAGE),
	   "strided: pages between the steps left alone");
	munmap(mem, LEN);
	return 0;
}

/* Random: no stream, no readahead. */
static int case_random(void)
{
	struct fl_engine *e;
	struct fl_stats st;
	uint8_t *mem;
	int good;

	mem = map_anon(LEN, 0);
	e = serve(src, mem, FL_ENGINE_NO_BACKGROUND);
	good = 1;

	for (int i = 0; i < 200; i++) {
		uint64_t pg = (uint64_t)rand_r(&seed) % (LEN / PAGE);

		good &= same_as_file(mem + pg * PAGE, PAGE, pg * PAGE, SEED, 0);
	}
	ok(good, "random: sampled pages right");
	st = finish(e);
	ok(st.pages_prefetched < st.pages_copied / 4,
	   "random: little readahead (%llu of %llu)",
	   (unsigned long long)st.pages_prefetched,
	   (unsigned long long)st.pages_copied);
	munmap(mem, LEN);
	return 0;
}

/*
 * Dense random with background restore on (the defaults): the
 * fillers stream the rest at once and give way to the faults, which
 * fill their own chunk only (never 2 MiB: a fault must not wait
 * behind a copy it did not need); a range removed before any touch
 * and one removed after its touch must read zeros, everything else
 * the snapshot.
 */
static int case_dense_random(void)
{
	struct fl_engine *e;
	struct fl_stats st;
	uint8_t *mem;
	int good;

	mem = map_anon(LEN, 0);
	e = serve(src, mem, 0);
	madvise(mem + (8 << 20), 1 << 20, MADV_DONTNEED);	/* untouched */
	good = same_as_file(mem + (20 << 20), 1 << 20, 20 << 20, SEED, 0);
	madvise(mem + (20 << 20), 1 << 20, MADV_DONTNEED);	/* touched */
	{
		uint64_t n = LEN / PAGE, *order = malloc(n * sizeof(*order));

		for (uint64_t i = 0; i < n; i++)
			order[i] = i;
		for (uint64_t i = n - 1; i > 0; i--) {
			uint64_t j = (uint64_t)rand_r(&seed) % (i + 1), t = order[i];

			order[i] = order[j];
			order[j] = t;
		}
		for (uint64_t i = 0; i < n; i++) {
			uint64_t off = order[i] * PAGE;
			bool removed = (off >> 20) == 8 || (off >> 20) == 20;

			good &= removed ? is_zero_mem(mem + off, PAGE) :
				same_as_file(mem + off, PAGE, off, SEED, 0);
		}
		free(order);
	}
	ok(good, "dense random: every page right, removed ranges zeros");
	st = finish(e);
	uint64_t by_faults = st.pages_copied + st.pages_zeroed -
			     st.pages_background - st.pages_prefetched;

	diag("dense random: background restore %llu pages, faults %llu pages "
	     "in %llu faults", (unsigned long long)st.pages_background,
	     (unsigned long long)by_faults, (unsigned long long)st.faults);
	ok(by_faults <= st.faults * 32,
	   "dense random: faults fill their chunk only (64 KiB, a page "
	   "once dense), doubled "
	   "now and then by two in a row (%llu pages in %llu faults)",
	   (unsigned long long)by_faults, (unsigned long long)st.faults);
	munmap(mem, LEN);
	return 0;
}

/* Idle: background restore completes the memory. */
static int case_background(void)
{
	struct fl_engine *e;
	struct fl_stats st;
	uint64_t t0;
	uint8_t *mem;

	mem = map_anon(LEN, 0);
	t0 = now_ms_();
	e = serve(src, mem, 0);
	ok(same_as_file(mem, PAGE, 0, SEED, 0), "background: first page");
	madvise(mem + (8 << 20), 1 << 20, MADV_DONTNEED);	/* balloon */
	/* a minute: however loaded, a restore that takes longer has hung */
	for (int i = 0; i < 6000; i++) {
		struct fl_stats s;

		fl_engine_stats(e, &s);
		if (s.restore_complete)
			break;
		usleep(10000);
	}
	fl_engine_stats(e, &st);
	ok(st.restore_complete && st.restore_ms <= now_ms_() - t0,
	   "background: restore completed while idle, restore_ms %llu within "
	   "the engine's life", (unsigned long long)st.restore_ms);
	diag("background: %llu faults (the first page's, maybe)",
	     (unsigned long long)st.faults);
	ok(st.pages_copied + st.pages_zeroed >= LEN / PAGE - 256,
	   "background: every page but the removed ones filled (%llu + %llu)",
	   (unsigned long long)st.pages_copied,
	   (unsigned long long)st.pages_zeroed);
	ok(is_zero_mem(mem + (8 << 20), 1 << 20),
	   "removed range, touched after the restore, reads zeros");
	uint64_t zeroed = st.pages_zeroed;

	st = finish(e);
	is_int(st.pages_zeroed - zeroed, 256,
	       "removed pages served as zero pages on touch");
	ok(same_as_file(mem, 8 << 20, 0, SEED, 0) &&
	   same_as_file(mem + (9 << 20), LEN - (9 << 20), 9 << 20, SEED, 0),
	   "background: every byte right");
	munmap(mem, LEN);
	return 0;
}

static const struct tap_case cases[] = {
	{ "linear", case_linear },
	{ "strided", case_strided },
	{ "random", case_random },
	{ "dense random", case_dense_random },
	{ "background", case_background },
};

int main(void)
{
	char *path = make_snapshot(LEN, SEED, NULL, 0);

	fl_source_open(path, &src);
	TAP_RUN(cases);
	fl_source_put(src);
	drop_snapshot(path);
	return done_testing();
}
