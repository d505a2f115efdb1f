// SPDX-License-Identifier: Apache-2.0
/*
 * engine_trace.c - working-set record and replay: a recording session
 * writes the chunks it faulted in, in order, as snapshot offsets; a replay
 * session fills exactly those (sorted, coalesced) before the client touches
 * them, so the client faults on none of them, every byte is right, and
 * pages removed before the replay are not filled by it.
 *
 * Decision: the client touches its memory only once the replay is over
 * (waited for up to a minute, a hang bound), so "no fault but the removed
 * run's" holds however the fillers were scheduled; "the fillers wait"
 * is CPU time against the wall time it was measured over.
 */
#include <errno.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <string.h>

#include "faultline.h"
#include "format/trace.h"
#include "tap.h"
#include "util.h"

#define SEED 0x7ace
#define LEN (64ull << 20)
#define NOFILL (FL_ENGINE_NO_PREFETCH | FL_ENGINE_NO_BACKGROUND)

#define BALLOON (16ull << 20)	/* a working-set run removed before replay */

/* What the cases share: the snapshot, its source, the trace, its record. */
static char *path;
static char trace[64];
static struct fl_source *src;
static struct fl_stats rec;	/* the recording session's counts */

/*
 * The working set: 1 MiB runs every 8 MiB, plus a few scattered pages.
 * With removed set, the run at BALLOON must read as zeros.
 */
static int touch(uint8_t *mem, int removed)
{
	int good = 1;

	for (uint64_t off = 0; off < LEN; off += 8 << 20)
		good &= same_as_file(mem + off, 1 << 20, off, SEED,
				     removed && off == BALLOON);
	for (uint64_t pg = 3; pg < LEN / PAGE; pg += 1531)
		good &= same_as_file(mem + pg * PAGE, PAGE, pg * PAGE, SEED,
				     removed && pg * PAGE - BALLOON < (1 << 20));
	return good;
}

static struct fl_engine *engine(struct fl_source *src, uint8_t *mem,
				unsigned int flags)
{
	struct fl_engine_opts o = { .uffd = -1, .flags = flags };
	struct fl_engine *e;
	struct fl_region_desc d = { .addr = (uintptr_t)mem, .len = LEN, .page_size = PAGE, .src_offset = 0, .flags = FL_REGION_REGISTER };

	if (fl_engine_create(&o, &e) < 0 || fl_engine_add_region(e, &d, src) < 0)
		BAIL("engine: %s", fl_last_error());
	return e;
}

/*
 * A trace replays in the order the guest first touched it: a stream of
 * faults merges into one run, a later range stays later even when it lies
 * lower in the snapshot, and a range touched again adds nothing.
 */
static int case_replay_order(void)
{
	static const uint64_t touches[][2] = {
		{ 1 << 20, 64 << 10 }, { (1 << 20) + (64 << 10), 64 << 10 },
		{ 0, 64 << 10 }, { 4 << 20, 64 << 10 },
		{ (1 << 20) - (64 << 10), 64 << 10 },	/* before the first run */
	};
	char order_path[64];
	struct trace in, out;
	bool order;

	snprintf(order_path, sizeof(order_path), "/tmp/fl-order-%d.trace", getpid());
	trace_init(&in);
	trace_init(&out);
	for (int i = 0; i < 5; i++)
		trace_add(&in, touches[i][0], touches[i][1]);
	if (trace_save(&in, order_path) < 0 || trace_load(&out, order_path) < 0)
		BAIL("trace save/load: %s", fl_last_error());
	order = out.n == 4 &&
		out.runs[0].off == 1 << 20 && out.runs[0].len == 128 << 10 &&
		out.runs[1].off == 0 && out.runs[2].off == 4 << 20 &&
		out.runs[3].off == (1 << 20) - (64 << 10);
	ok(order, "a trace loads in first-touch order, streams merged (%zu "
	   "runs, the first at %llu +%llu)", out.n,
	   out.n ? (unsigned long long)out.runs[0].off : 0,
	   out.n ? (unsigned long long)out.runs[0].len : 0);
	trace_free(&in);
	trace_free(&out);
	unlink(order_path);
	return 0;
}

/* Record. */
static int case_record(void)
{
	struct fl_engine *e;
	uint8_t *mem;

	mem = map_anon(LEN, 0);
	e = engine(src, mem, NOFILL);
	ok(fl_engine_save_trace(e, trace) == -EINVAL,
	   "save without recording: -EINVAL (%s)", fl_last_error());
	ok(fl_engine_record(e) == 0, "recording");
	fl_engine_start(e, 1);
	ok(touch(mem, 0), "recording session: every byte right");
	fl_engine_stop(e);
	fl_engine_stats(e, &rec);
	ok(fl_engine_save_trace(e, trace) == 0, "trace saved");
	fl_engine_destroy(e);
	munmap(mem, LEN);
	return 0;
}

/*
 * A replay loaded and started before any region is added: the
 * fillers wait for one (no CPU spent), then replay into it.
 */
static int case_replay_first(void)
{
	struct fl_stats st;
	struct fl_engine *e;
	uint8_t *mem;
	struct fl_engine_opts o = { .uffd = -1, .flags = NOFILL };
	struct fl_region_desc d = { .len = LEN, .page_size = PAGE,
				    .flags = FL_REGION_REGISTER };
	struct rusage r0, r1;

	mem = map_anon(LEN, 0);
	d.addr = (uintptr_t)mem;
	if (fl_engine_create(&o, &e) < 0 ||
	    fl_engine_replay(e, trace) < 0 || fl_engine_start(e, 1) < 0)
		BAIL("engine: %s", fl_last_error());
	struct timespec w0, w1;

	clock_gettime(CLOCK_MONOTONIC, &w0);
	getrusage(RUSAGE_SELF, &r0);
	usleep(300 * 1000);
	getrusage(RUSAGE_SELF, &r1);
	clock_gettime(CLOCK_MONOTONIC, &w1);
	long us = (r1.ru_utime.tv_sec - r0.ru_utime.tv_sec +
		   r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) * 1000000L +
		  r1.ru_utime.tv_usec - r0.ru_utime.tv_usec +
		  r1.ru_stime.tv_usec - r0.ru_stime.tv_usec;
	long wall = (w1.tv_sec - w0.tv_sec) * 1000000L +
		    (w1.tv_nsec - w0.tv_nsec) / 1000;

	/* a waiting filler spends nothing; load only takes CPU away */
	ok(us < wall / 3, "replay with no region yet: the fillers wait "
	   "(%ld us of CPU in %ld us)", us, wall);
	ok(fl_engine_add_region(e, &d, src) == 0, "a region added");
	for (int i = 0; i < 6000; i++) {
		fl_engine_stats(e, &st);
		if (st.pages_replayed >= rec.pages_copied)
			break;
		usleep(10000);
	}
	ok(st.pages_replayed >= rec.pages_copied && touch(mem, 0),
	   "... then the trace is replayed into it, every byte right "
	   "(%llu pages)", (unsigned long long)st.pages_replayed);
	fl_engine_destroy(e);
	munmap(mem, LEN);
	return 0;
}

/* Replay: the working set is filled before the client touches it. */
static int case_replay(void)
{
	struct fl_stats st;
	struct fl_engine *e;
	uint8_t *mem;

	mem = map_anon(LEN, 0);
	e = engine(src, mem, NOFILL);
	fl_engine_start(e, 1);
	/* Balloon before the replay starts (a REMOVE needs a reader). */
	madvise(mem + BALLOON, 1 << 20, MADV_DONTNEED);
	ok(fl_engine_replay(e, trace) == 0, "trace loaded into a running engine");
	for (int i = 0; i < 6000; i++) {
		fl_engine_stats(e, &st);
		if (st.pages_replayed >= rec.pages_copied - 256)
			break;
		usleep(10000);
	}
	ok(touch(mem, 1), "replay session: every byte right, removed run zeros");
	fl_engine_stop(e);
	fl_engine_stats(e, &st);
	ok(st.pages_replayed > 0, "pages replayed (%llu, recorded %llu)",
	   (unsigned long long)st.pages_replayed,
	   (unsigned long long)rec.pages_copied);
	/* The removed run still faults (as zeros): 16 chunks of 64 KiB. */
	ok(st.faults <= 16 + 2,
	   "replay: no faults but the removed run's (%llu; recording had %llu)",
	   (unsigned long long)st.faults, (unsigned long long)rec.faults);
	ok(st.pages_copied <= rec.pages_copied - 256,
	   "replay copied no more than the working set, removed run excluded (%llu <= %llu - 256)",
	   (unsigned long long)st.pages_copied,
	   (unsigned long long)rec.pages_copied);
	fl_engine_destroy(e);
	munmap(mem, LEN);
	return 0;
}

/* A file that is not a trace. */
static int case_not_trace(void)
{
	struct fl_stats st;
	struct fl_engine *e;
	uint8_t *mem;

	mem = map_anon(LEN, 0);
	e = engine(src, mem, NOFILL);
	ok(fl_engine_replay(e, path) == -EINVAL &&
	   strstr(fl_last_error(), "not a faultline trace"),
	   "a non-trace file is rejected (%s)", fl_last_error());
	FILE *f = fopen(trace, "r+b");

	fseek(f, 8, SEEK_SET);
	uint64_t big = 1ull << 40;

	fwrite(&big, 8, 1, f);
	fclose(f);
	ok(fl_engine_replay(e, trace) == -EINVAL &&
	   strstr(fl_last_error(), "truncated"),
	   "a truncated trace is rejected (%s)", fl_last_error());
	fl_engine_start(e, 1);
	usleep(300 * 1000);
	fl_engine_stats(e, &st);
	is_int(st.pages_replayed, 0, "... and nothing of it is replayed");
	fl_engine_destroy(e);
	munmap(mem, LEN);
	return 0;
}

/*
 * Traces whose every entry is dropped, or that have none (found by
 * fuzz/fuzz_trace.c: qsort(NULL, 0) under UBSan): empty replays.
 */
static int case_empty(void)
{
	struct fl_stats st;
	struct fl_engine *e;
	uint8_t *mem;
	static const char *const empties[] = {
		"fuzz/corpus/trace/crash-qsort-null-wrapped-entry",
		"fuzz/corpus/trace/empty", "fuzz/corpus/trace/all-dropped",
	};

	for (int i = 0; i < 3; i++) {
		mem = map_anon(LEN, 0);
		e = engine(src, mem, NOFILL);
		ok(fl_engine_replay(e, empties[i]) == 0,
		   "%s: loads as an empty trace (%s)", empties[i],
		   fl_last_error());
		fl_engine_start(e, 1);
		usleep(50 * 1000);
		fl_engine_stats(e, &st);
		is_int(st.pages_replayed, 0, "... and replays nothing");
		fl_engine_destroy(e);
		munmap(mem, LEN);
	}
	return 0;
}

/*
 * A trace of another, larger snapshot: its run past the end of every
 * region is skipped, not walked (which kept background restore from
 * ever starting); its run inside is replayed.
 */
static int case_past_end(void)
{
	struct fl_stats st;
	struct fl_engine *e;
	uint8_t *mem;
	FILE *f = fopen(trace, "wb");
	uint64_t runs[5] = { 2, 0, 1 << 20, LEN * 4, 1ull << 60 };

	fwrite("FLTRACE1", 8, 1, f);
	fwrite(runs, sizeof(runs), 1, f);
	fclose(f);
	mem = map_anon(LEN, 0);
	e = engine(src, mem, 0);
	ok(fl_engine_replay(e, trace) == 0, "a trace reaching past the "
	   "snapshot loads");
	fl_engine_start(e, 1);
	for (int i = 0; i < 500; i++) {
		fl_engine_stats(e, &st);
		if (st.restore_complete)
			break;
		usleep(10000);
	}
	ok(st.restore_complete && st.pages_replayed == (1 << 20) / PAGE,
	   "... its run inside is replayed (%llu pages), the rest restored "
	   "in the background", (unsigned long long)st.pages_replayed);
	ok(touch(mem, 0), "... every byte right");
	fl_engine_destroy(e);
	munmap(mem, LEN);
	return 0;
}

static const struct tap_case cases[] = {
	{ "replay order", case_replay_order },
	{ "record", case_record },
	{ "replay before a region", case_replay_first },
	{ "replay", case_replay },
	{ "not a trace", case_not_trace },
	{ "empty traces", case_empty },
	{ "a trace past the end", case_past_end },
};

int main(void)
{
	path = make_snapshot(LEN, SEED, NULL, 0);
	snprintf(trace, sizeof(trace), "/tmp/fl-trace-%d", getpid());
	fl_source_open(path, &src);
	TAP_RUN(cases);
	fl_source_put(src);
	unlink(trace);
	drop_snapshot(path);
	return done_testing();
}
