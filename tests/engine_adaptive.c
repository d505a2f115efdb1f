// SPDX-License-Identifier: Apache-2.0
/*
 * engine_adaptive.c - the adaptive policy serves exactly the snapshot: one
 * table of access patterns (linear, random, mixed runs and jumps) run with
 * the defaults (adaptive chunk, readahead, background restore on every
 * filler) and with the adaptive chunk alone; every byte is checked.  Then
 * what the policy decides: the chunk grows for a linear client and stays
 * small for a random one, a stream after a stream starts as long as it,
 * faults queued behind others fill 2 MiB, a fixed chunk never changes, and
 * readahead never fills past its region into the next one.  And with
 * several fillers, a restore said complete is: destroyed at that moment,
 * the memory holds every byte.
 *
 * Decision: a policy point runs without fillers (FL_ENGINE_NO_PREFETCH |
 * NO_BACKGROUND, or the caller driving the engine), where what a fault
 * fills depends on the faults alone, never on how the scheduler ran a
 * filler beside them.  With fillers, only bytes are asserted; what the
 * fillers did instead of the faults is `faultline bench policy`'s.
 */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "faultline.h"
#include "load.h"
#include "tap.h"
#include "util.h"

#define SEED 0xada9
#define LEN (64ull << 20)
#define NPAGES (LEN / PAGE)
#define NOFILL (FL_ENGINE_NO_PREFETCH | FL_ENGINE_NO_BACKGROUND)

enum pattern { P_LINEAR, P_RANDOM, P_MIXED, P_N };

static const char *const pattern_name[P_N] = { "linear", "random", "mixed" };

/* The order pages are touched in: n page indices, each page once. */
static uint64_t *touch_order(enum pattern p, unsigned int *seed)
{
	uint64_t *o = malloc(NPAGES * sizeof(*o));

	for (uint64_t i = 0; i < NPAGES; i++)
		o[i] = i;
	if (p == P_LINEAR)
		return o;
	/*
	 * Random: a permutation of pages.  Mixed: of 256 KiB runs, each
	 * touched in order: streams that keep starting somewhere else.
	 */
	uint64_t unit = p == P_RANDOM ? 1 : 64, n = NPAGES / unit;

	for (uint64_t i = n - 1; i > 0; i--) {
		uint64_t j = (uint64_t)rand_r(seed) % (i + 1);

		for (uint64_t k = 0; k < unit; k++) {
			uint64_t t = o[i * unit + k];

			o[i * unit + k] = o[j * unit + k];
			o[j * unit + k] = t;
		}
	}
	return o;
}

static struct fl_engine *serve(struct fl_source *src, uint8_t *mem,
			       uint64_t chunk, unsigned int flags)
{
	struct fl_engine_opts o = { .uffd = -1, .chunk_size = chunk,
				    .flags = flags };
	struct fl_region_desc d = { .addr = (uintptr_t)mem, .len = LEN,
				    .page_size = PAGE,
				    .flags = FL_REGION_REGISTER };
	struct fl_engine *e;

	if (fl_engine_create(&o, &e) < 0 || fl_engine_add_region(e, &d, src) < 0 ||
	    fl_engine_start(e, 1) < 0)
		BAIL("engine: %s", fl_last_error());
	return e;
}

static struct fl_stats finish(struct fl_engine *e)
{
	struct fl_stats st;

	fl_engine_stats(e, &st);
	fl_engine_destroy(e);
	return st;
}

/* Touch every page in the pattern's order, checking each; then the whole. */
static bool touch_all(uint8_t *mem, enum pattern p, unsigned int *seed)
{
	uint64_t *o = touch_order(p, seed);
	bool good = true;

	for (uint64_t i = 0; i < NPAGES; i++)
		good &= same_as_file(mem + o[i] * PAGE, PAGE, o[i] * PAGE,
				     SEED, 0);
	free(o);
	return good && same_as_file(mem, LEN, 0, SEED, 0);
}

/* Pages filled by faults: everything but what the fillers did. */
static uint64_t by_faults(const struct fl_stats *st)
{
	return st->pages_copied + st->pages_zeroed - st->pages_prefetched -
	       st->pages_background - st->pages_replayed;
}

static void exactness(struct fl_source *src, unsigned int *seed)
{
	static const struct {
		unsigned int flags;
		const char *name;
	} modes[] = {
		{ 0, "defaults" },
		{ NOFILL, "adaptive chunk alone" },
	};

	for (size_t m = 0; m < sizeof(modes) / sizeof(*modes); m++) {
		for (int p = 0; p < P_N; p++) {
			uint8_t *mem = map_anon(LEN, 0);
			struct fl_engine *e = serve(src, mem, 0, modes[m].flags);
			bool good = touch_all(mem, p, seed);
			struct fl_stats st = finish(e);

			ok(good, "%s, %s: every byte the snapshot's (%llu "
			   "faults)", pattern_name[p], modes[m].name,
			   (unsigned long long)st.faults);
			munmap(mem, LEN);
		}
	}
}

/* The chunk a fault fills grows for streams, not for random touches. */
static void chunk_policy(struct fl_source *src, unsigned int *seed)
{
	uint8_t *mem = map_anon(LEN, 0);
	struct fl_engine *e = serve(src, mem, 0, NOFILL);

	touch_all(mem, P_LINEAR, seed);
	struct fl_stats st = finish(e);

	/* 64 KiB chunks would be 1024 faults; doubling to 2 MiB, ~37. */
	ok(st.faults <= 64, "linear: the chunk grows (%llu faults)",
	   (unsigned long long)st.faults);
	munmap(mem, LEN);

	mem = map_anon(LEN, 0);
	e = serve(src, mem, 0, NOFILL);
	touch_all(mem, P_RANDOM, seed);
	st = finish(e);
	ok(by_faults(&st) <= st.faults * 32,
	   "random: the chunk stays near 64 KiB (%llu pages, %llu faults)",
	   (unsigned long long)by_faults(&st), (unsigned long long)st.faults);
	munmap(mem, LEN);

	mem = map_anon(LEN, 0);
	e = serve(src, mem, 64 << 10, NOFILL);
	touch_all(mem, P_LINEAR, seed);
	st = finish(e);
	is_int(st.faults, LEN / (64 << 10),
	       "linear, --chunk 64K: a fixed chunk never grows");
	munmap(mem, LEN);
}

/*
 * Random touches with the defaults: once faults have hit enough of the
 * region to call the client dense, background restore runs beside them
 * and each random fault fills its own page alone (the first few, before
 * that, fill 64 KiB).  How many faults the client takes before the
 * restore outruns it, and what they fill, is the scheduler's: bench
 * policy's dense_random row.  Here: one run, every byte, and no fault
 * filling more than the biggest chunk a random fault may (2 MiB).
 */
static void dense_policy(struct fl_source *src, unsigned int *seed)
{
	uint8_t *mem = map_anon(LEN, 0);
	struct fl_engine *e = serve(src, mem, 0, 0);
	bool good = touch_all(mem, P_RANDOM, seed);
	struct fl_stats st = finish(e);

	munmap(mem, LEN);
	ok(good, "dense: every byte the snapshot's");
	ok(by_faults(&st) <= st.faults * 512,
	   "dense: faults beside background restore fill 2 MiB at most each "
	   "(%llu pages in %llu faults)",
	   (unsigned long long)by_faults(&st), (unsigned long long)st.faults);
}

/*
 * The same touches with the caller driving the engine (fl_engine_process:
 * no filler, so no background restore beside the faults): a dense
 * client's faults keep filling 64 KiB, or it would fault on every page.
 */
static void dense_driven(struct fl_source *src, unsigned int *seed)
{
	struct fl_engine_opts o = { .uffd = -1 };
	struct fl_region_desc d = { .addr = 0, .len = LEN, .page_size = PAGE,
				    .flags = FL_REGION_REGISTER };
	uint8_t *mem = map_anon(LEN, 0);
	struct caller_loop l = { .stop = 0 };
	pthread_t th;

	d.addr = (uintptr_t)mem;
	if (fl_engine_create(&o, &l.e) < 0 ||
	    fl_engine_add_region(l.e, &d, src) < 0)
		BAIL("engine: %s", fl_last_error());
	pthread_create(&th, NULL, caller_loop_main, &l);
	bool good = touch_all(mem, P_RANDOM, seed);

	atomic_store(&l.stop, 1);
	pthread_join(th, NULL);
	struct fl_stats st = finish(l.e);

	ok(good, "dense, caller-driven: every byte the snapshot's");
	ok(by_faults(&st) >= st.faults * 8,
	   "dense, caller-driven: no filler beside, faults fill 64 KiB (%llu "
	   "pages in %llu faults)", (unsigned long long)by_faults(&st),
	   (unsigned long long)st.faults);
	munmap(mem, LEN);
}

/*
 * 1 MiB every 16 MiB, each touched in order (no prefetch, no background):
 * the first stream takes a few faults while the chunk grows; each later
 * stream starts with a chunk as long as the last one went, one fault.
 */
static void stream_policy(struct fl_source *src)
{
	uint8_t *mem = map_anon(LEN, 0);
	struct fl_engine *e = serve(src, mem, 0, NOFILL);
	bool good = true;

	for (uint64_t off = 0; off < LEN; off += 16 << 20)
		for (uint64_t pg = 0; pg < 256; pg++)
			good &= same_as_file(mem + off + pg * PAGE, PAGE,
					     off + pg * PAGE, SEED, 0);
	struct fl_stats st = finish(e);

	ok(good, "streams: every byte the snapshot's");
	/* 5 for the first; growing again from 64 KiB, each other takes 3. */
	ok(st.faults <= 5 + 3 * 2, "streams: a stream as long as the last "
	   "starts whole (%llu faults)", (unsigned long long)st.faults);
	munmap(mem, LEN);

	/*
	 * A stream that starts off a chunk boundary (192 KiB in): a grown,
	 * aligned chunk starts before where the last one ended, and that is
	 * still the stream (48, 64, 96, 128, 192, 256: six faults).
	 */
	mem = map_anon(LEN, 0);
	e = serve(src, mem, 0, NOFILL);
	good = same_as_file(mem + 48 * PAGE, 256 * PAGE, 48 * PAGE, SEED, 0);
	st = finish(e);
	ok(good && st.faults <= 6, "streams: one off a chunk boundary keeps "
	   "growing (%llu faults)", (unsigned long long)st.faults);
	munmap(mem, LEN);
}

struct toucher {
	uint8_t *mem;
	unsigned int seed;
	bool good;
};

static void *touch_random(void *arg)
{
	struct toucher *t = arg;

	t->good = true;
	for (int i = 0; i < 2048; i++) {
		uint64_t pg = (uint64_t)rand_r(&t->seed) % NPAGES;

		t->good &= same_as_file(t->mem + pg * PAGE, PAGE, pg * PAGE,
					SEED, 0);
	}
	return NULL;
}

/*
 * Four threads touching at random (no prefetch, no background): faults
 * that wait behind another are filled 2 MiB at a time.  How many waited
 * behind another is the scheduler's (bench policy's queued4 row: pages
 * per fault); here every byte, and no fault filling more than 2 MiB.
 */
static void queued_policy(struct fl_source *src)
{
	uint8_t *mem = map_anon(LEN, 0);
	struct fl_engine *e = serve(src, mem, 0, NOFILL);
	struct toucher t[4];
	pthread_t th[4];
	bool good = true;

	for (int i = 0; i < 4; i++) {
		t[i] = (struct toucher){ mem, 0x5eed + (unsigned int)i, false };
		pthread_create(&th[i], NULL, touch_random, &t[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		good &= t[i].good;
	}
	struct fl_stats st = finish(e);

	ok(good, "queued faults: every byte the snapshot's");
	ok(by_faults(&st) <= st.faults * 512, "queued faults: 2 MiB at most "
	   "a fault (%llu pages in %llu faults)",
	   (unsigned long long)by_faults(&st), (unsigned long long)st.faults);
	munmap(mem, LEN);
}

static bool none_resident(const uint8_t *p, uint64_t len)
{
	unsigned char *v = malloc(len / PAGE);
	bool none = mincore((void *)p, len, v) == 0;

	for (uint64_t i = 0; none && i < len / PAGE; i++)
		none = !(v[i] & 1);
	free(v);
	return none;
}

/*
 * Two regions back to back in one registered mapping, the first an odd
 * number of pages long, the second from elsewhere in the snapshot: a
 * linear stream through the first, with readahead on, fills nothing of the
 * second, and each reads its own part of the snapshot.
 */
static void readahead_bounds(struct fl_source *src)
{
	const uint64_t a_len = (16ull << 20) + 3 * PAGE, b_off = 32ull << 20;
	uint8_t *mem = map_anon(LEN, 0);
	struct fl_engine_opts o = { .uffd = -1,
				    .flags = FL_ENGINE_NO_BACKGROUND };
	struct fl_region_desc a = { .addr = (uintptr_t)mem, .len = a_len,
				    .page_size = PAGE,
				    .flags = FL_REGION_REGISTER };
	struct fl_region_desc b = { .addr = (uintptr_t)mem + a_len,
				    .len = 8ull << 20, .page_size = PAGE,
				    .src_offset = b_off,
				    .flags = FL_REGION_REGISTER };
	struct fl_engine *e;

	if (fl_engine_create(&o, &e) < 0 || fl_engine_add_region(e, &a, src) < 0 ||
	    fl_engine_add_region(e, &b, src) < 0 || fl_engine_start(e, 1) < 0)
		BAIL("engine: %s", fl_last_error());
	bool good = true;

	for (uint64_t off = 0; off < a_len; off += PAGE)
		good &= same_as_file(mem + off, PAGE, off, SEED, 0);
	ok(good, "readahead bounds: the first region's bytes");
	/* Let the last windows finish: nothing is queued past a region. */
	usleep(200000);
	ok(none_resident(mem + a_len, b.len),
	   "readahead bounds: nothing of the next region filled");
	struct fl_stats st;

	fl_engine_stats(e, &st);
	/* how much was read ahead is the scheduler's; where is not */
	ok(st.pages_prefetched + by_faults(&st) <= a_len / PAGE,
	   "readahead bounds: %llu pages read ahead, all in the region",
	   (unsigned long long)st.pages_prefetched);
	ok(same_as_file(mem + a_len, b.len, b_off, SEED, 0),
	   "readahead bounds: the next region's own bytes");
	finish(e);
	munmap(mem, LEN);
}

/*
 * An idle client restored in the background by every filler: the moment
 * restore_complete says so, destroy the engine (pages not filled by then
 * would read zeros) and check every byte.  A filler whose scan finds only
 * pages another filler is still copying must not call it complete.
 */
static void complete_means_complete(struct fl_source *src)
{
	bool good = true;

	/*
	 * Whole 2 MiB runs (quiet from the start), read into the staging
	 * buffer before the MOVE: the widest window between a run's claim
	 * and its ioctl.
	 */
	struct fl_engine_opts o = { .uffd = -1, .quiet_ms = 1,
				    .flags = FL_ENGINE_NO_PREFETCH |
					     FL_ENGINE_MOVE };
	struct fl_region_desc d = { .len = LEN, .page_size = PAGE,
				    .flags = FL_REGION_REGISTER };

	for (int round = 0; round < 8 && good; round++) {
		uint8_t *mem = map_anon(LEN, 0);
		struct fl_engine *e;
		struct fl_stats st;

		d.addr = (uintptr_t)mem;
		if (fl_engine_create(&o, &e) < 0 ||
		    fl_engine_add_region(e, &d, src) < 0 ||
		    fl_engine_start(e, 1) < 0)
			BAIL("engine: %s", fl_last_error());

		do {
			fl_engine_stats(e, &st);
		} while (!st.restore_complete && !usleep(100));
		fl_engine_destroy(e);
		good = same_as_file(mem, LEN, 0, SEED, 0);
		munmap(mem, LEN);
	}
	ok(good, "restore_complete: destroyed then, every byte is there");
}

int main(void)
{
	unsigned int seed = 0xada9;
	struct fl_source *src;
	char *path;

	load_start();		/* first: the spinners fork an empty process */
	path = make_snapshot(LEN, SEED, NULL, 0);
	if (fl_source_open(path, &src) < 0)
		BAIL("source: %s", fl_last_error());
	exactness(src, &seed);
	chunk_policy(src, &seed);
	dense_policy(src, &seed);
	dense_driven(src, &seed);
	stream_policy(src);
	queued_policy(src);
	readahead_bounds(src);
	complete_means_complete(src);
	fl_source_put(src);
	drop_snapshot(path);
	return done_testing();
}
