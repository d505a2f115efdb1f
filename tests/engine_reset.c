// SPDX-License-Identifier: Apache-2.0
/*
 * engine_reset.c - the public reset to the snapshot: write tracking
 * (fl_engine_track_writes) and fl_engine_reset, lazy and FL_RESET_EAGER,
 * on an in-process engine serving a snapshot whose pages all differ.
 * One table of cases, each run with both tracking mechanisms: the
 * kernel's best (WP_ASYNC + PAGEMAP_SCAN on 6.7+) and the synchronous
 * write-protect faults FL_ENGINE_TRACK_SYNC forces.  After every reset
 * every page reads the snapshot's bytes; a lazy reset leaves pages never
 * written mapped and drops the written ones (mincore), each first write
 * one write-protect fault under WP_SYNC and none under WP_ASYNC (stats
 * wp_faults), an eager one maps them again before it returns; the reset
 * counters; tracking started late, pages the client discarded, 4 threads
 * writing at random for 200 rounds, readers faulting while resets run
 * (never a byte that is neither the snapshot nor what was written, never
 * a hang), 2 MiB hugetlb pages (tracked, or refused saying why), a reset
 * without tracking, and the refusals (FL_REGION_MINOR, a remote client,
 * an unknown flag).
 *
 * Decision: the table is run across the two mechanisms as the kernel's
 * tools/testing/selftests/mm/uffd-unit-tests.c runs its cases across
 * memory types (tests/engine_mem.c does the same): a mechanism the kernel
 * does not have skips its cases, saying why.  No point asserts a time;
 * every wait is bounded (SIGALRM per case, bounded joins): it runs under
 * FL_LOAD.  FL_SEED=N repeats the random rounds of a failed run;
 * FL_CASE=text runs only the cases whose name (with the mechanism's, as
 * the "# ..." lines print it) contains text.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <time.h>

#include "faultline.h"
#include "huge_lock.h"
#include "hugetlb.h"
#include "kernel/uffd.h"
#include "load.h"
#include "tap.h"
#include "util.h"

#define SEED		0x7e5e
#define LEN		(4ull << 20)	/* the region: 1024 pages */
#define NPAGES		(LEN / PAGE)
#define HLEN		(4 * HPAGE)	/* the hugetlb region, 4 pages */
#define SNAP_LEN	(8ull << 20)	/* covers both */
#define HUGE_POOL	8		/* 2 MiB pages reserved: twice HLEN */
#define CASE_SECS	120		/* a case on a mechanism, at most */
#define JOIN_SECS	60		/* a thread taking longer hangs */
#define DIRTY		0xababababababababull
#define ROUNDS		200		/* random rounds (case 5): FL_RESET_ROUNDS */
#define QUIET		(FL_ENGINE_NO_PREFETCH | FL_ENGINE_NO_BACKGROUND)

static struct fl_source *src;
static struct uffd_caps caps;
static unsigned int seed;
static const char *volatile running = "setup";
static char *snap;		/* the snapshot file, removed at any exit */

/* A tracking mechanism: the engine flag that asks for it, and what it gave. */
struct mode {
	const char *name;
	unsigned int flags;	/* FL_ENGINE_* */
	int mech;		/* FL_TRACK_* the probe got, or -errno */
	char why[256];		/* why its tracked cases skip, or "" */
};

static struct mode modes[] = {
	{ "default", 0, 0, "" },
	{ "TRACK_SYNC", FL_ENGINE_TRACK_SYNC, 0, "" },
};

#define NMODES	(int)(sizeof(modes) / sizeof(*modes))

static const char *mech_name(int mech)
{
	return mech == FL_TRACK_WP_ASYNC ? "WP_ASYNC" :
	       mech == FL_TRACK_WP_SYNC ? "WP_SYNC" :
	       mech == 0 ? "off" : "refused";
}

/* One engine serving one region of this process's memory. */
struct env {
	const struct mode *m;
	struct fl_engine *e;
	uint8_t *mem;
	uint64_t len, page, n;	/* bytes, page size, pages */
};

static void env_open(struct env *v, const struct mode *m, unsigned int flags,
		     uint64_t chunk, uint64_t len, int huge,
		     unsigned int threads)
{
	struct fl_engine_opts o = { .chunk_size = chunk,
				    .flags = m->flags | flags };
	struct fl_region_desc d = { .len = len,
		.page_size = huge ? HPAGE : PAGE, .flags = FL_REGION_REGISTER };

	v->m = m;
	v->len = len;
	v->page = huge ? HPAGE : PAGE;
	v->n = len / v->page;
	v->mem = map_anon(len, huge);
	if (!v->mem)
		BAIL("%s: cannot map %llu bytes%s", running,
		     (unsigned long long)len, huge ? " of hugetlb" : "");
	/* 4 KiB pages stay 4 KiB pages: mincore and the runs are per page */
	if (!huge)
		madvise(v->mem, len, MADV_NOHUGEPAGE);
	d.addr = (uintptr_t)v->mem;
	if (fl_engine_create(&o, &v->e) < 0 ||
	    fl_engine_add_region(v->e, &d, src) < 0 ||
	    fl_engine_start(v->e, threads) < 0)
		BAIL("%s: engine setup: %s", running, fl_last_error());
}

/* The engine first: its memory is unmapped once nobody serves it. */
static void env_close(struct env *v)
{
	fl_engine_destroy(v->e);
	munmap(v->mem, v->len);
}

static uint8_t *page_at(const struct env *v, uint64_t pg)
{
	return v->mem + pg * v->page;
}

static void touch(const struct env *v, uint64_t pg)
{
	(void)*(volatile uint8_t *)page_at(v, pg);
}

static void touch_all(const struct env *v)
{
	for (uint64_t pg = 0; pg < v->n; pg++)
		touch(v, pg);
}

/* One word of page pg made anything but the snapshot's. */
static void scribble(const struct env *v, uint64_t pg, uint64_t word)
{
	uint64_t *w = (uint64_t *)page_at(v, pg);

	word %= v->page / 8;
	__atomic_store_n(&w[word], ~pattern_word(pg * v->page + word * 8, SEED),
			 __ATOMIC_RELAXED);
}

/*
 * All of page pg written with DIRTY, word by word (relaxed atomic stores:
 * readers run beside it on purpose, and ThreadSanitizer is told so).
 */
static void dirty(const struct env *v, uint64_t pg)
{
	uint64_t *w = (uint64_t *)page_at(v, pg);

	for (uint64_t i = 0; i < v->page / 8; i++)
		__atomic_store_n(&w[i], DIRTY, __ATOMIC_RELAXED);
}

/* What page pg reads where it first differs from the snapshot. */
static void describe(const struct env *v, uint64_t pg, char *why, size_t n)
{
	const volatile uint64_t *w = (const volatile uint64_t *)page_at(v, pg);

	for (uint64_t i = 0; i < v->page / 8; i++) {
		uint64_t want = pattern_word(pg * v->page + i * 8, SEED);
		uint64_t got = w[i];

		if (got != want) {
			snprintf(why, n, "page %llu word %llu reads 0x%llx, "
				 "the snapshot 0x%llx%s",
				 (unsigned long long)pg, (unsigned long long)i,
				 (unsigned long long)got,
				 (unsigned long long)want,
				 is_zero_mem(page_at(v, pg), v->page) ?
				 " (the page is all zeros)" : "");
			return;
		}
	}
	snprintf(why, n, "page %llu differed, then read right",
		 (unsigned long long)pg);
}

/* Pages that differ from the snapshot; the first one described in why. */
static uint64_t wrong_pages(const struct env *v, char *why, size_t n)
{
	uint64_t bad = 0;

	snprintf(why, n, "none");
	for (uint64_t pg = 0; pg < v->n; pg++)
		if (!same_as_file(page_at(v, pg), v->page, pg * v->page,
				  SEED, 0) && !bad++)
			describe(v, pg, why, n);
	return bad;
}

/* Every page the snapshot's: one point. */
static int all_snapshot(const struct env *v, const char *c, const char *what)
{
	char why[200];
	uint64_t bad = wrong_pages(v, why, sizeof(why));

	return ok(bad == 0, "%s: %s: %s: every page reads the snapshot "
		  "(%llu wrong; first: %s)", c, v->m->name, what,
		  (unsigned long long)bad, why);
}

/* mincore of the region: one byte per page of the region's page size. */
static void incore(const struct env *v, uint8_t *res)
{
	static unsigned char vec[SNAP_LEN / PAGE];
	uint64_t per = v->page / PAGE;

	if (mincore(v->mem, v->len, vec) < 0)
		BAIL("%s: mincore: %s", running, strerror(errno));
	for (uint64_t pg = 0; pg < v->n; pg++)
		res[pg] = vec[pg * per] & 1;
}

/* Pages marked in set, and the contiguous runs they make. */
static uint64_t count(const uint8_t *set, uint64_t n, uint64_t *runs)
{
	uint64_t k = 0, r = 0;

	for (uint64_t pg = 0; pg < n; pg++) {
		if (!set[pg])
			continue;
		k++;
		if (!pg || !set[pg - 1])
			r++;
	}
	if (runs)
		*runs = r;
	return k;
}

/*
 * Of the pages in set, how many are resident; of those not in it, how
 * many are not: what a reset left mapped and what it dropped.
 */
static void residency(const struct env *v, const uint8_t *set,
		      uint64_t *set_in, uint64_t *rest_out)
{
	static uint8_t res[NPAGES];

	incore(v, res);
	*set_in = *rest_out = 0;
	for (uint64_t pg = 0; pg < v->n; pg++) {
		if (set[pg] && res[pg])
			++*set_in;
		if (!set[pg] && !res[pg])
			++*rest_out;
	}
}

static void stats(const struct env *v, struct fl_stats *s)
{
	if (fl_engine_stats(v->e, s) < 0)
		BAIL("%s: stats: %s", running, fl_last_error());
}

/* Start tracking: the mechanism the probe found (one point). */
static int track(const struct env *v, const char *c)
{
	int r = fl_engine_track_writes(v->e);

	ok(r == v->m->mech, "%s: %s: tracking by %s (%d; %s)", c, v->m->name,
	   mech_name(r), r, r < 0 ? fl_last_error() : "ok");
	return r;
}

/*
 * The counters of one reset that returned r pages, from s0 to s1: one
 * more reset, r pages and between 1 and r runs (at least wruns of them
 * when exactly the wruns runs written were dropped), the mechanism; and
 * a lazy one adds nothing to reset_refill_ns (the header: time spent
 * "(FL_RESET_EAGER) filling them again").
 */
static void reset_stats(const struct env *v, const char *c,
			const struct fl_stats *s0, const struct fl_stats *s1,
			int r, uint64_t nw, uint64_t wruns, unsigned int flags)
{
	uint64_t runs = s1->reset_runs - s0->reset_runs;
	int sane = s1->resets == s0->resets + 1 && r >= 0 &&
		   s1->pages_reset - s0->pages_reset == (uint64_t)r &&
		   (r == 0 ? runs == 0 : runs >= 1 && runs <= (uint64_t)r) &&
		   ((uint64_t)r != nw || runs >= wruns) &&
		   s1->write_tracking == (uint64_t)(v->m->mech > 0 ?
						    v->m->mech : 0);

	ok(sane, "%s: %s: stats: resets +%llu, pages_reset +%llu (returned "
	   "%d), reset_runs +%llu (%llu runs written), write_tracking %llu",
	   c, v->m->name, (unsigned long long)(s1->resets - s0->resets),
	   (unsigned long long)(s1->pages_reset - s0->pages_reset), r,
	   (unsigned long long)runs, (unsigned long long)wruns,
	   (unsigned long long)s1->write_tracking);
	/* what it counts, not how long it took: nothing refilled, no time */
	if (!(flags & FL_RESET_EAGER))
		ok(s1->reset_refill_ns == s0->reset_refill_ns, "%s: %s: a "
		   "lazy reset refills nothing: reset_refill_ns +%llu (0)", c,
		   v->m->name, (unsigned long long)(s1->reset_refill_ns -
						    s0->reset_refill_ns));
	diag("%s: %s: scan %llu ns, drop %llu ns, refill %llu ns (summed)",
	     c, v->m->name, (unsigned long long)s1->reset_scan_ns,
	     (unsigned long long)s1->reset_drop_ns,
	     (unsigned long long)s1->reset_refill_ns);
}

/* ---- threads with bounded joins ----------------------------------------- */

struct worker {
	pthread_t th;
	atomic_int done;
};

static void join_within(struct worker *w, const char *what)
{
	for (int i = 0; i < JOIN_SECS * 1000 && !atomic_load(&w->done); i++)
		usleep(1000);
	if (!atomic_load(&w->done))
		BAIL("%s: %s: still running after %d s (hung in a fault?)",
		     running, what, JOIN_SECS);
	pthread_join(w->th, NULL);
}

/* ---- 1. lazy reset ------------------------------------------------------ */

/*
 * Tracking first, then every page filled (reads: nothing written), then
 * every step-th page written one word and a run of 64 pages written
 * whole; a lazy reset.  Twice, the second time over pages the first
 * dropped and a read filled again.
 */
static void case_lazy(const struct mode *m)
{
	static uint8_t wr[NPAGES];
	static const uint64_t step[2] = { 37, 41 }, run[2] = { 300, 700 };
	const char *c = "lazy";
	struct fl_stats sw, s0, s1;
	struct env v;

	env_open(&v, m, QUIET, 0, LEN, 0, 1);
	track(&v, c);
	touch_all(&v);
	for (int round = 0; round < 2; round++) {
		uint64_t nw, wruns, in, out;
		char *json;
		int r;

		memset(wr, 0, sizeof(wr));
		stats(&v, &sw);
		for (uint64_t pg = round; pg < v.n; pg += step[round]) {
			wr[pg] = 1;
			scribble(&v, pg, pg * 7);
		}
		for (uint64_t pg = run[round]; pg < run[round] + 64; pg++) {
			wr[pg] = 1;
			dirty(&v, pg);
		}
		nw = count(wr, v.n, &wruns);
		stats(&v, &s0);
		/* one thread: each page's first write is one fault, or none */
		ok(s0.wp_faults - sw.wp_faults ==
		   (m->mech == FL_TRACK_WP_SYNC ? nw : 0) &&
		   s0.faults == sw.faults, "%s: %s: round %d: %llu pages "
		   "written: %llu write-protect faults, %llu faults", c,
		   m->name, round, (unsigned long long)nw,
		   (unsigned long long)(s0.wp_faults - sw.wp_faults),
		   (unsigned long long)(s0.faults - sw.faults));
		r = fl_engine_reset(v.e, 0);
		stats(&v, &s1);
		ok(r >= 0 && (uint64_t)r >= nw, "%s: %s: round %d: reset "
		   "returns %d pages, %llu written (%s)", c, m->name, round, r,
		   (unsigned long long)nw, r < 0 ? fl_last_error() : "ok");
		reset_stats(&v, c, &s0, &s1, r, nw, wruns, 0);
		residency(&v, wr, &in, &out);
		ok(in == 0, "%s: %s: round %d: written pages dropped, not "
		   "resident before a touch (%llu of %llu resident)", c,
		   m->name, round, (unsigned long long)in,
		   (unsigned long long)nw);
		ok(out == 0, "%s: %s: round %d: pages never written stayed "
		   "mapped (%llu of %llu not resident)", c, m->name, round,
		   (unsigned long long)out, (unsigned long long)(v.n - nw));
		all_snapshot(&v, c, round ? "second reset" : "first reset");
		if (round)
			continue;
		json = fl_stats_json(&s1);
		ok(json && strstr(json, "\"write_tracking\"") &&
		   strstr(json, "\"pages_reset\"") &&
		   strstr(json, "\"reset_refill_ns\""), "%s: %s: the stats' "
		   "JSON has the reset counters", c, m->name);
		free(json);
	}
	env_close(&v);
}

/* ---- 2. eager reset ----------------------------------------------------- */

/*
 * As lazy, with FL_RESET_EAGER: the written pages are mapped again, with
 * the snapshot's bytes, before it returns (resident, and reading them
 * faults no more).  Then pages it filled again are written and reset
 * lazily: its fills are tracked like any other.
 */
static void case_eager(const struct mode *m)
{
	static uint8_t wr[NPAGES], none[NPAGES];
	const char *c = "eager";
	struct fl_stats s0, s1, s2;
	uint64_t nw, wruns, in, out;
	struct env v;
	int r;

	env_open(&v, m, QUIET, 0, LEN, 0, 1);
	track(&v, c);
	touch_all(&v);
	memset(wr, 0, sizeof(wr));
	for (uint64_t pg = 3; pg < v.n; pg += 37) {
		wr[pg] = 1;
		scribble(&v, pg, pg);
	}
	for (uint64_t pg = 500; pg < 600; pg++) {
		wr[pg] = 1;
		dirty(&v, pg);
	}
	nw = count(wr, v.n, &wruns);
	stats(&v, &s0);
	r = fl_engine_reset(v.e, FL_RESET_EAGER);
	stats(&v, &s1);
	ok(r >= 0 && (uint64_t)r >= nw, "%s: %s: reset returns %d pages, "
	   "%llu written (%s)", c, m->name, r, (unsigned long long)nw,
	   r < 0 ? fl_last_error() : "ok");
	reset_stats(&v, c, &s0, &s1, r, nw, wruns, FL_RESET_EAGER);
	residency(&v, none, &in, &out);
	ok(out == 0, "%s: %s: every page resident before any touch (%llu "
	   "not)", c, m->name, (unsigned long long)out);
	all_snapshot(&v, c, "eager reset");
	stats(&v, &s2);
	ok(s2.faults == s1.faults, "%s: %s: reading them all faulted %llu "
	   "times (0: the reset had filled them)", c, m->name,
	   (unsigned long long)(s2.faults - s1.faults));

	/* Pages the eager reset filled, written again: tracked. */
	memset(wr, 0, sizeof(wr));
	for (uint64_t pg = 540; pg < 560; pg++) {
		wr[pg] = 1;
		scribble(&v, pg, 511);
	}
	wr[3 + 37] = 1;
	dirty(&v, 3 + 37);
	nw = count(wr, v.n, NULL);
	r = fl_engine_reset(v.e, 0);
	residency(&v, wr, &in, &out);
	ok(r >= 0 && (uint64_t)r >= nw && in == 0 && out == 0,
	   "%s: %s: pages the eager reset filled, written: a lazy reset "
	   "drops them (%d of %llu; %llu resident, %llu others dropped)", c,
	   m->name, r, (unsigned long long)nw, (unsigned long long)in,
	   (unsigned long long)out);
	all_snapshot(&v, c, "lazy reset after an eager one");
	env_close(&v);
}

/* ---- 3. tracking started late ------------------------------------------- */

/*
 * Pages filled and written before fl_engine_track_writes: the next reset
 * drops every page filled before it (they may have been written
 * untracked), the written ones with them.  Then the background restore
 * fills the region again (its fills must be tracked too), pages it filled
 * are written, and a reset drops those and not the whole region.
 */
static void case_late(const struct mode *m)
{
	static uint8_t wr[NPAGES];
	const char *c = "late tracking";
	struct env v;
	uint64_t nw, nc;
	int r, w;

	env_open(&v, m, 0, 0, LEN, 0, 1);
	touch_all(&v);
	memset(wr, 0, sizeof(wr));
	for (uint64_t pg = 5; pg < v.n; pg += 53) {	/* untracked */
		wr[pg] = 1;
		dirty(&v, pg);
	}
	track(&v, c);
	for (uint64_t pg = 7; pg < v.n; pg += 31) {	/* tracked */
		wr[pg] = 1;
		scribble(&v, pg, 3);
	}
	nw = count(wr, v.n, NULL);
	r = fl_engine_reset(v.e, 0);
	ok(r >= 0 && (uint64_t)r >= nw, "%s: %s: reset returns %d pages, "
	   "%llu written before and after tracking started", c, m->name, r,
	   (unsigned long long)nw);
	ok(r == (int)v.n, "%s: %s: every page filled before tracking was "
	   "dropped (%d of %llu)", c, m->name, r, (unsigned long long)v.n);
	/* the background restore fills it all again: wait for it (bounded) */
	w = fl_engine_wait(v.e, JOIN_SECS * 1000);
	ok(w == 0, "%s: %s: the background restore filled the region again "
	   "(%d)", c, m->name, w);
	all_snapshot(&v, c, "pages written before tracking");

	memset(wr, 0, sizeof(wr));
	for (uint64_t pg = 0; pg < v.n; pg += 19) {
		wr[pg] = 1;
		scribble(&v, pg, pg >> 2);
	}
	nc = count(wr, v.n, NULL);
	r = fl_engine_reset(v.e, 0);
	ok(r >= 0 && (uint64_t)r >= nc && (uint64_t)r < v.n, "%s: %s: pages "
	   "the background restore filled, written: reset returns %d "
	   "(%llu written, fewer than the %llu pages)", c, m->name, r,
	   (unsigned long long)nc, (unsigned long long)v.n);
	all_snapshot(&v, c, "pages the background restore filled");
	env_close(&v);
}

/* ---- 4. pages the client discarded -------------------------------------- */

/*
 * While tracking: a run discarded (MADV_DONTNEED) and read (zeros), some
 * of it written after; another discarded and never touched; pages
 * written.  All the snapshot after a lazy reset; then a run discarded
 * and reset eagerly: resident again, the snapshot.
 */
static void case_discard(const struct mode *m)
{
	static uint8_t wr[NPAGES];
	const char *c = "discarded";
	uint64_t nw, in, out;
	struct env v;
	int r;

	env_open(&v, m, QUIET, 0, LEN, 0, 1);
	track(&v, c);
	touch_all(&v);
	memset(wr, 0, sizeof(wr));
	for (uint64_t pg = 11; pg < v.n; pg += 29) {
		wr[pg] = 1;
		scribble(&v, pg, 100);
	}
	if (madvise(page_at(&v, 100), 64 * PAGE, MADV_DONTNEED) < 0 ||
	    madvise(page_at(&v, 600), 40 * PAGE, MADV_DONTNEED) < 0)
		BAIL("%s: madvise: %s", running, strerror(errno));
	memset(wr + 100, 1, 64);
	memset(wr + 600, 1, 40);
	ok(is_zero_mem(page_at(&v, 100), 32 * PAGE), "%s: %s: discarded "
	   "pages read zeros before the reset", c, m->name);
	for (uint64_t pg = 110; pg < 115; pg++)
		dirty(&v, pg);
	nw = count(wr, v.n, NULL);
	r = fl_engine_reset(v.e, 0);
	ok(r >= 0 && (uint64_t)r >= nw, "%s: %s: reset returns %d pages, "
	   "%llu written or discarded", c, m->name, r, (unsigned long long)nw);
	residency(&v, wr, &in, &out);
	ok(in == 0 && out == 0, "%s: %s: discarded and written pages not "
	   "resident, the others mapped (%llu resident, %llu dropped)", c,
	   m->name, (unsigned long long)in, (unsigned long long)out);
	all_snapshot(&v, c, "discarded, read, written, untouched");

	if (madvise(page_at(&v, 300), 100 * PAGE, MADV_DONTNEED) < 0)
		BAIL("%s: madvise: %s", running, strerror(errno));
	memset(wr, 0, sizeof(wr));
	memset(wr + 300, 1, 100);
	r = fl_engine_reset(v.e, FL_RESET_EAGER);
	residency(&v, wr, &in, &out);
	ok(r >= 100 && in == 100, "%s: %s: discarded, eager reset: returns "
	   "%d, %llu of the 100 pages resident before a touch", c, m->name,
	   r, (unsigned long long)in);
	all_snapshot(&v, c, "discarded, eager reset");
	env_close(&v);
}

/* ---- 5. threads writing at random --------------------------------------- */

struct writer {
	struct worker w;
	const struct env *v;
	uint8_t *hit;		/* pages written or discarded this round */
	unsigned int seed;
	int discard;		/* may discard a run too */
};

static void *write_random(void *arg)
{
	struct writer *t = arg;
	const struct env *v = t->v;
	int k = 1 + rand_r(&t->seed) % 48;

	for (int i = 0; i < k; i++) {
		uint64_t pg = (uint64_t)rand_r(&t->seed) % v->n;
		int how = rand_r(&t->seed) % 8;

		if (how == 0 && t->discard) {
			uint64_t len = 1 + rand_r(&t->seed) % 16;

			if (pg + len > v->n)
				len = v->n - pg;
			for (uint64_t j = 0; j < len; j++)
				__atomic_store_n(&t->hit[pg + j], 1,
						 __ATOMIC_RELAXED);
			madvise(page_at(v, pg), len * PAGE, MADV_DONTNEED);
			continue;
		}
		__atomic_store_n(&t->hit[pg], 1, __ATOMIC_RELAXED);
		if (how < 4)
			scribble(v, pg, (uint64_t)rand_r(&t->seed));
		else
			dirty(v, pg);
	}
	atomic_store(&t->w.done, 1);
	return NULL;
}

/*
 * A reader during a random round's reset: it faults the pages no writer
 * of the round hit (the others may hold a writer's bytes until the reset
 * takes them), from its own first page on, and each must read the
 * snapshot's bytes throughout, whatever the reset is doing to them.
 */
struct round_reader {
	struct worker w;
	const struct env *v;
	const uint8_t *hit;
	uint64_t from;
	atomic_int stop;
	uint64_t bad;
	char why[160];
};

static void *read_unhit(void *arg)
{
	struct round_reader *rd = arg;
	const struct env *v = rd->v;

	do {
		for (uint64_t k = 0; k < v->n && !rd->bad; k++) {
			uint64_t pg = (k + rd->from) % v->n;
			const uint64_t *w = (const uint64_t *)page_at(v, pg);

			if (rd->hit[pg])
				continue;
			for (uint64_t i = 0; i < PAGE / 8; i++) {
				uint64_t want = pattern_word(pg * PAGE + i * 8,
							     SEED);
				uint64_t got = __atomic_load_n(&w[i],
							       __ATOMIC_RELAXED);

				if (got == want)
					continue;
				rd->bad++;
				snprintf(rd->why, sizeof(rd->why), "page %llu "
					 "word %llu read 0x%llx, the snapshot "
					 "0x%llx", (unsigned long long)pg,
					 (unsigned long long)i,
					 (unsigned long long)got,
					 (unsigned long long)want);
				break;
			}
		}
	} while (!atomic_load(&rd->stop));
	atomic_store(&rd->w.done, 1);
	return NULL;
}

/* The rounds of case 5: FL_RESET_ROUNDS (make check-reset: 1000). */
static int random_rounds(void)
{
	const char *e = getenv("FL_RESET_ROUNDS");

	return e && atoi(e) > 0 ? atoi(e) : ROUNDS;
}

/*
 * Rounds: 4 threads write (a word, a page, or discard a run) at random,
 * then a reset, lazy or eager at random, with 2 readers faulting the
 * pages nobody hit while it runs (round_reader), returns at least the
 * pages hit and leaves every page the snapshot's.  Prefetch and the
 * background restore run meanwhile.
 */
static void case_random(const struct mode *m)
{
	static uint8_t hit[NPAGES];
	const char *c = "random writers";
	unsigned int s = seed;
	int short_round = -1, bad_round = -1, nshort = 0, nbad = 0;
	char why[240] = "none", shortwhy[160] = "none", tmp[200], what[64];
	char readwhy[200] = "none";
	int rounds = random_rounds(), read_round = -1, nread = 0;
	uint64_t sum = 0;
	struct fl_stats s0, s1;
	struct env v;

	env_open(&v, m, 0, 0, LEN, 0, 2);
	track(&v, c);
	stats(&v, &s0);
	for (int round = 0; round < rounds; round++) {
		struct round_reader rd[2];
		struct writer t[4];
		unsigned int flags = rand_r(&s) % 2 ? FL_RESET_EAGER : 0;
		uint64_t nh;
		int r;

		memset(hit, 0, sizeof(hit));
		for (int i = 0; i < 4; i++) {
			t[i] = (struct writer){ .v = &v, .hit = hit,
				.seed = rand_r(&s), .discard = i == 0 };
			atomic_init(&t[i].w.done, 0);
			if (pthread_create(&t[i].w.th, NULL, write_random,
					   &t[i]))
				BAIL("%s: pthread_create", running);
		}
		snprintf(what, sizeof(what), "a writer of round %d", round);
		for (int i = 0; i < 4; i++)
			join_within(&t[i].w, what);
		nh = count(hit, v.n, NULL);
		for (int i = 0; i < 2; i++) {
			rd[i] = (struct round_reader){ .v = &v, .hit = hit,
				.from = rand_r(&s) % v.n };
			atomic_init(&rd[i].w.done, 0);
			atomic_init(&rd[i].stop, 0);
			if (pthread_create(&rd[i].w.th, NULL, read_unhit,
					   &rd[i]))
				BAIL("%s: pthread_create", running);
		}
		r = fl_engine_reset(v.e, flags);
		snprintf(what, sizeof(what), "a reader of round %d", round);
		for (int i = 0; i < 2; i++) {
			atomic_store(&rd[i].stop, 1);
			join_within(&rd[i].w, what);
			if (rd[i].bad && !nread++) {
				read_round = round;
				snprintf(readwhy, sizeof(readwhy), "during a %s "
					 "reset: %s", flags ? "eager" : "lazy",
					 rd[i].why);
			}
		}
		if (r < 0 || (uint64_t)r < nh) {
			if (!nshort++) {
				short_round = round;
				snprintf(shortwhy, sizeof(shortwhy), "%s reset "
					 "returned %d, %llu pages hit (%s)",
					 flags ? "eager" : "lazy", r,
					 (unsigned long long)nh,
					 r < 0 ? fl_last_error() : "ok");
			}
		} else {
			sum += (uint64_t)r;
		}
		if (wrong_pages(&v, tmp, sizeof(tmp)) && !nbad++) {
			bad_round = round;
			snprintf(why, sizeof(why), "after a %s reset: %s",
				 flags ? "eager" : "lazy", tmp);
		}
	}
	stats(&v, &s1);
	ok(nbad == 0, "%s: %s: %d rounds of 4 threads, then a reset: %d "
	   "rounds left a page not the snapshot (first: round %d, %s)", c,
	   m->name, rounds, nbad, bad_round, why);
	ok(nread == 0, "%s: %s: 2 readers faulting during each reset read "
	   "the snapshot in every page no writer hit (%d rounds did not; "
	   "first: round %d, %s)", c, m->name, nread, read_round, readwhy);
	ok(nshort == 0, "%s: %s: every reset returned at least the pages hit "
	   "(%d did not; first: round %d, %s)", c, m->name, nshort,
	   short_round, shortwhy);
	ok(s1.resets - s0.resets == (uint64_t)rounds &&
	   (nshort || s1.pages_reset - s0.pages_reset == sum),
	   "%s: %s: stats: %llu resets, %llu pages reset (returned %llu)", c,
	   m->name, (unsigned long long)(s1.resets - s0.resets),
	   (unsigned long long)(s1.pages_reset - s0.pages_reset),
	   (unsigned long long)sum);
	env_close(&v);
}

/* ---- 6. resets while readers fault -------------------------------------- */

/* The pages main writes during case 6; the others nobody writes. */
static int written_page(uint64_t pg)
{
	return pg % 4 == 0;
}

struct reader {
	struct worker w;
	const struct env *v;
	int of_written;		/* reads the written pages (DIRTY too) */
	atomic_int stop;
	atomic_ulong passes;	/* whole passes over its pages */
	uint64_t bad;		/* words that were neither */
	char why[200];		/* the first of them */
};

/* Every word of its pages, again and again: the snapshot (or DIRTY). */
static void *read_loop(void *arg)
{
	struct reader *rd = arg;
	const struct env *v = rd->v;

	while (!atomic_load(&rd->stop)) {
		for (uint64_t pg = 0; pg < v->n; pg++) {
			const uint64_t *w;

			if (written_page(pg) != rd->of_written)
				continue;
			w = (const uint64_t *)page_at(v, pg);
			for (uint64_t i = 0; i < PAGE / 8; i++) {
				uint64_t want = pattern_word(pg * PAGE + i * 8,
							     SEED);
				uint64_t got = __atomic_load_n(&w[i],
							       __ATOMIC_RELAXED);

				if (got == want ||
				    (rd->of_written && got == DIRTY))
					continue;
				if (!rd->bad++)
					snprintf(rd->why, sizeof(rd->why),
						 "page %llu word %llu read "
						 "0x%llx, the snapshot 0x%llx",
						 (unsigned long long)pg,
						 (unsigned long long)i,
						 (unsigned long long)got,
						 (unsigned long long)want);
				break;
			}
		}
		atomic_fetch_add(&rd->passes, 1);
	}
	atomic_store(&rd->w.done, 1);
	return NULL;
}

/*
 * Two whole passes of every reader from now: every page it reads was
 * read after what came before (a reset).  Bounded: a reader that makes
 * no progress hangs in a fault.
 */
static void readers_pass(struct reader *rd, int n)
{
	for (int i = 0; i < n; i++) {
		unsigned long p0 = atomic_load(&rd[i].passes);
		int t;

		for (t = 0; t < JOIN_SECS * 1000 &&
			    atomic_load(&rd[i].passes) < p0 + 2; t++)
			usleep(1000);
		if (atomic_load(&rd[i].passes) < p0 + 2)
			BAIL("%s: a reader made no progress in %d s (hung in "
			     "a fault on a page being reset?)", running,
			     JOIN_SECS);
	}
}

/*
 * Two threads read all the time: one the pages nobody writes, one the
 * pages main writes (whole, with DIRTY) between resets.  First resets
 * without tracking, each dropping every filled page, the unwritten ones
 * read meanwhile among them; then tracking starts under the readers, and
 * resets drop what main wrote.  Lazy and eager in turn.  The reader of
 * unwritten pages reads only the snapshot, the other only the snapshot or
 * DIRTY: never zeros, whatever a fault meets.
 */
static void case_readers(const struct mode *m)
{
	const char *c = "reset under readers";
	char fail[200] = "none";
	unsigned int s = seed ^ 0x5eed;
	struct reader rd[2];
	int nfail = 0, resets = 0;
	struct env v;

	env_open(&v, m, 0, 0, LEN, 0, 1);
	touch_all(&v);
	for (int i = 0; i < 2; i++) {
		rd[i] = (struct reader){ .v = &v, .of_written = i == 1 };
		atomic_init(&rd[i].w.done, 0);
		atomic_init(&rd[i].stop, 0);
		atomic_init(&rd[i].passes, 0);
		if (pthread_create(&rd[i].w.th, NULL, read_loop, &rd[i]))
			BAIL("%s: pthread_create", running);
	}
	for (int round = 0; round < 40; round++, resets++) {
		int r = fl_engine_reset(v.e, round % 2 ? FL_RESET_EAGER : 0);

		if (r < 0 && !nfail++)
			snprintf(fail, sizeof(fail), "untracked round %d: %d "
				 "(%s)", round, r, fl_last_error());
		readers_pass(rd, 2);
	}
	track(&v, c);
	for (int round = 0; round < 120; round++, resets++) {
		static uint8_t wr[NPAGES];
		uint64_t nw;
		int r;

		memset(wr, 0, sizeof(wr));
		for (int i = 0; i < 32; i++) {
			uint64_t pg = (uint64_t)rand_r(&s) % (v.n / 4) * 4;

			wr[pg] = 1;
			dirty(&v, pg);
		}
		nw = count(wr, v.n, NULL);
		r = fl_engine_reset(v.e, round % 2 ? 0 : FL_RESET_EAGER);
		if ((r < 0 || (uint64_t)r < nw) && !nfail++)
			snprintf(fail, sizeof(fail), "tracked round %d: %d, "
				 "%llu pages written (%s)", round, r,
				 (unsigned long long)nw,
				 r < 0 ? fl_last_error() : "ok");
		readers_pass(rd, 2);
	}
	for (int i = 0; i < 2; i++) {
		atomic_store(&rd[i].stop, 1);
		join_within(&rd[i].w, "a reader");
	}
	ok(nfail == 0, "%s: %s: %d resets, each returned at least the pages "
	   "written (%d did not; first: %s)", c, m->name, resets, nfail,
	   fail);
	ok(rd[0].bad == 0, "%s: %s: pages nobody writes, read through %d "
	   "resets (%lu passes): only the snapshot (%llu wrong words; "
	   "first: %s)", c, m->name, resets, atomic_load(&rd[0].passes),
	   (unsigned long long)rd[0].bad, rd[0].bad ? rd[0].why : "none");
	ok(rd[1].bad == 0, "%s: %s: pages written between resets, read "
	   "through them (%lu passes): only the snapshot or what was "
	   "written (%llu other words; first: %s)", c, m->name,
	   atomic_load(&rd[1].passes), (unsigned long long)rd[1].bad,
	   rd[1].bad ? rd[1].why : "none");
	all_snapshot(&v, c, "after the last reset");
	env_close(&v);
}

/* ---- 7. hugetlb --------------------------------------------------------- */

/*
 * 4 huge pages: tracked (by the mechanism asked for: TRACK_SYNC forces
 * the synchronous one) and reset like 4 KiB pages, written ones dropped
 * and the others kept; or tracking refused with -errno and a reason, and
 * a reset without it still takes every page back.  Either is right; the
 * test says which happened.
 */
static void huge_run(const struct mode *m)
{
	static const uint8_t wr[HLEN / HPAGE] = { 0, 1, 0, 1 };
	const char *c = "hugetlb 2M";
	char err[256];
	uint64_t in, out;
	struct fl_stats st;
	struct env v;
	int t, r;

	env_open(&v, m, QUIET, 0, HLEN, 1, 1);
	touch_all(&v);
	t = fl_engine_track_writes(v.e);
	snprintf(err, sizeof(err), "%s", fl_last_error());
	stats(&v, &st);
	if (t < 0) {
		diag("%s: %s: tracking refused: %d (%s)", c, m->name, t, err);
		ok(err[0] && st.write_tracking == 0, "%s: %s: tracking "
		   "refused with %d and a reason (%s), write_tracking %llu",
		   c, m->name, t, err,
		   (unsigned long long)st.write_tracking);
		scribble(&v, 1, 77);
		dirty(&v, 3);
		r = fl_engine_reset(v.e, 0);
		ok(r >= 2, "%s: %s: untracked, a reset drops the filled "
		   "pages: returns %d (%s)", c, m->name, r,
		   r < 0 ? fl_last_error() : "ok");
		all_snapshot(&v, c, "untracked reset");
		env_close(&v);
		return;
	}
	diag("%s: %s: tracked by %s", c, m->name, mech_name(t));
	ok((m->flags & FL_ENGINE_TRACK_SYNC) ? t == FL_TRACK_WP_SYNC :
	   t == FL_TRACK_WP_ASYNC || t == FL_TRACK_WP_SYNC,
	   "%s: %s: tracked by %s (%d), write_tracking %llu", c, m->name,
	   mech_name(t), t, (unsigned long long)st.write_tracking);
	/* filled before tracking: all dropped at this first reset */
	r = fl_engine_reset(v.e, 0);
	ok(r >= 1, "%s: %s: the pages filled before tracking reset (%d)", c,
	   m->name, r);
	all_snapshot(&v, c, "first reset");
	scribble(&v, 1, 77);
	dirty(&v, 3);
	r = fl_engine_reset(v.e, 0);
	residency(&v, wr, &in, &out);
	ok(r >= 2 && in == 0 && out == 0, "%s: %s: 2 of 4 huge pages written, "
	   "lazy reset: returns %d; %llu written resident, %llu others "
	   "dropped", c, m->name, r, (unsigned long long)in,
	   (unsigned long long)out);
	all_snapshot(&v, c, "lazy reset");
	dirty(&v, 2);
	r = fl_engine_reset(v.e, FL_RESET_EAGER);
	residency(&v, (const uint8_t[HLEN / HPAGE]){ 1, 1, 1, 1 }, &in, &out);
	ok(r >= 1 && in == 4, "%s: %s: eager reset: returns %d, %llu of 4 "
	   "resident before a touch", c, m->name, r, (unsigned long long)in);
	all_snapshot(&v, c, "eager reset");
	env_close(&v);
}

/*
 * The pool is the host's: the case runs under its lock (huge_lock.h), its
 * pages reserved and given back under it.
 */
static void case_huge(const struct mode *m)
{
	char err[256];
	int r;

	r = huge_lock();
	if (r == 0)
		r = huge_reserve(HUGE_POOL);
	if (r < 0) {
		snprintf(err, sizeof(err), "hugetlb 2M: %s: cannot reserve %d "
			 "2 MiB pages: %s", m->name, HUGE_POOL, strerror(-r));
		skip_missing(1, "hugetlb pages", err);
	} else {
		huge_run(m);
	}
	huge_unlock();
}

/* ---- 8. without tracking ------------------------------------------------ */

/*
 * No fl_engine_track_writes: a reset drops every page filled so far (one
 * 4 KiB page per fault here: no prefetch, no background, chunk 4 KiB).
 */
static void case_untracked(const struct mode *m)
{
	static uint8_t even[NPAGES], none[NPAGES];
	const char *c = "untracked";
	struct fl_stats s0, s1;
	uint64_t in, out, runs;
	struct env v;
	int r;

	env_open(&v, m, QUIET, PAGE, LEN, 0, 1);
	touch_all(&v);
	for (uint64_t pg = 0; pg < v.n; pg += 13)
		scribble(&v, pg, pg);
	for (uint64_t pg = 200; pg < 232; pg++)
		dirty(&v, pg);
	stats(&v, &s0);
	r = fl_engine_reset(v.e, 0);
	stats(&v, &s1);
	runs = s1.reset_runs - s0.reset_runs;
	ok(r == (int)v.n, "%s: %s: every filled page dropped: returns %d of "
	   "%llu (%s)", c, m->name, r, (unsigned long long)v.n,
	   r < 0 ? fl_last_error() : "ok");
	ok(s1.write_tracking == 0 && s1.resets == s0.resets + 1 && r >= 0 &&
	   s1.pages_reset - s0.pages_reset == (uint64_t)r && runs >= 1 &&
	   runs <= (uint64_t)r, "%s: %s: stats: write_tracking %llu, resets "
	   "+%llu, pages_reset +%llu, reset_runs +%llu", c, m->name,
	   (unsigned long long)s1.write_tracking,
	   (unsigned long long)(s1.resets - s0.resets),
	   (unsigned long long)(s1.pages_reset - s0.pages_reset),
	   (unsigned long long)runs);
	residency(&v, none, &in, &out);
	ok(out == v.n, "%s: %s: no page resident before a touch (%llu of "
	   "%llu)", c, m->name, (unsigned long long)(v.n - out),
	   (unsigned long long)v.n);
	all_snapshot(&v, c, "lazy reset");

	/* Half the pages filled (one fault each), some written: eager. */
	fl_engine_reset(v.e, 0);
	memset(even, 0, sizeof(even));
	for (uint64_t pg = 0; pg < v.n; pg += 2) {
		even[pg] = 1;
		touch(&v, pg);
		if (pg % 10 == 0)
			dirty(&v, pg);
	}
	r = fl_engine_reset(v.e, FL_RESET_EAGER);
	residency(&v, even, &in, &out);
	ok(r == (int)(v.n / 2) && in == v.n / 2, "%s: %s: half filled, eager "
	   "reset: returns %d of %llu, %llu of them resident", c, m->name, r,
	   (unsigned long long)(v.n / 2), (unsigned long long)in);
	all_snapshot(&v, c, "eager reset");
	env_close(&v);
}

/* ---- 9. refusals -------------------------------------------------------- */

/* r must be -EOPNOTSUPP with a reason (one point). */
static void refused(int r, const char *c, const struct mode *m,
		    const char *what)
{
	char err[256];

	snprintf(err, sizeof(err), "%s", fl_last_error());
	ok(r == -EOPNOTSUPP && err[0], "%s: %s: %s: -EOPNOTSUPP saying why "
	   "(%d: %s)", c, m->name, what, r, err);
}

/*
 * Not this library's to reset: a MINOR region (its page cache would keep
 * what was written) and a remote client's memory; and a reset flag this
 * library does not know.
 */
static void case_refused(const struct mode *m)
{
	const char *c = "refusals";
	struct fl_engine_opts o = { .flags = m->flags };
	struct fl_region_desc d = { .len = 1 << 20, .page_size = PAGE };
	struct fl_engine *e;
	struct fl_stats st;
	struct env v;
	uint8_t *p;
	int fd, r;

	fd = memfd_create("fl-reset", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, 1 << 20) < 0)
		BAIL("%s: memfd: %s", running, strerror(errno));
	p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		BAIL("%s: mmap: %s", running, strerror(errno));
	d.addr = (uintptr_t)p;
	d.flags = FL_REGION_REGISTER | FL_REGION_MINOR;
	d.memfd = fd;
	if (fl_engine_create(&o, &e) < 0 ||
	    fl_engine_add_region(e, &d, src) < 0 ||
	    fl_engine_start(e, 1) < 0)
		BAIL("%s: MINOR engine: %s", running, fl_last_error());
	(void)*(volatile uint8_t *)p;
	refused(fl_engine_track_writes(e), c, m,
		"a FL_REGION_MINOR region: fl_engine_track_writes");
	/* written: a reset that went ahead would leave this in the memfd */
	memset(p, 0xab, PAGE);
	r = fl_engine_reset(e, 0);
	refused(r, c, m, "a FL_REGION_MINOR region: fl_engine_reset");
	if (r >= 0)
		diag("%s: %s: MINOR: the reset went ahead (%d pages); a page "
		     "written before it reads %s", c, m->name, r,
		     same_as_file(p, PAGE, 0, SEED, 0) ? "the snapshot" :
		     *(volatile uint64_t *)p == DIRTY ? "what was written "
		     "(the page cache kept it)" : "neither");
	fl_engine_stats(e, &st);
	is_int(st.write_tracking, 0, "refusals: MINOR: write_tracking stays 0");
	fl_engine_destroy(e);
	munmap(p, 1 << 20);
	close(fd);

	/* A client whose memory this process cannot drop. */
	p = map_anon(1 << 20, 0);
	o.uffd = -1;
	o.flags = m->flags | FL_ENGINE_CLIENT_REMOTE;
	d = (struct fl_region_desc){ .addr = (uintptr_t)p, .len = 1 << 20,
				     .page_size = PAGE };
	if (!p || fl_engine_create(&o, &e) < 0 ||
	    fl_engine_add_region(e, &d, src) < 0 || fl_engine_start(e, 1) < 0)
		BAIL("%s: remote engine: %s", running, fl_last_error());
	refused(fl_engine_track_writes(e), c, m,
		"a remote client: fl_engine_track_writes");
	refused(fl_engine_reset(e, 0), c, m,
		"a remote client: fl_engine_reset");
	fl_engine_destroy(e);
	munmap(p, 1 << 20);

	env_open(&v, m, QUIET, 0, LEN, 0, 1);
	r = fl_engine_reset(v.e, 1u << 31);
	ok(r == -EINVAL && fl_last_error()[0], "%s: %s: a reset flag this "
	   "library does not know: -EINVAL (%d: %s)", c, m->name, r,
	   fl_last_error());
	env_close(&v);
}

/* ---- the table ---------------------------------------------------------- */

struct reset_case {
	const char *name;
	void (*fn)(const struct mode *m);
	int tracked;	/* needs the mechanism: skipped where refused */
};

static const struct reset_case cases[] = {
	{ "lazy reset", case_lazy, 1 },
	{ "eager reset", case_eager, 1 },
	{ "tracking started late", case_late, 1 },
	{ "discarded pages", case_discard, 1 },
	{ "hugetlb 2M", case_huge, 0 },
	{ "without tracking", case_untracked, 0 },
	{ "refusals", case_refused, 0 },
	/* the long ones last: a hang there bails out after the rest ran */
	{ "reset under readers", case_readers, 1 },
	{ "random writers", case_random, 1 },
};

/*
 * What each mechanism gives on this kernel: the default is WP_ASYNC where
 * the kernel has it (with PAGEMAP_SCAN, 6.7+), else WP_SYNC; TRACK_SYNC
 * is WP_SYNC.  A kernel without write-protect faults refuses, saying why,
 * and that mechanism's cases are skipped.
 */
static void probe(struct mode *m)
{
	int wp = !!(caps.features & UFFD_FEATURE_PAGEFAULT_FLAG_WP);
	int want = (m->flags & FL_ENGINE_TRACK_SYNC) ||
		   !(caps.features & UFFD_FEATURE_WP_ASYNC) ?
		   FL_TRACK_WP_SYNC : FL_TRACK_WP_ASYNC;
	struct fl_stats st;
	struct env v;
	int r;

	env_open(&v, m, QUIET, 0, LEN, 0, 1);
	r = fl_engine_track_writes(v.e);
	m->mech = r;
	if (r < 0)
		snprintf(m->why, sizeof(m->why), "%s: tracking refused: %d "
			 "(%s)", m->name, r, fl_last_error());
	stats(&v, &st);
	if (wp)
		ok(r == want && st.write_tracking == (uint64_t)want,
		   "%s: fl_engine_track_writes gives %s (%d), write_tracking "
		   "%llu (want %s)", m->name, mech_name(r), r,
		   (unsigned long long)st.write_tracking, mech_name(want));
	else
		ok(r < 0 && m->why[0], "%s: no write-protect faults in this "
		   "kernel: %s", m->name, m->why);
	env_close(&v);
}

static void on_signal(int sig)
{
	char line[200];
	int n = snprintf(line, sizeof(line), "Bail out! %s: %s\n", running,
			 sig == SIGALRM ? "timed out (a reset or a fault "
			 "hangs)" : "killed");

	if (write(1, line, n) < 0)
		n = 0;
	if (snap)
		unlink(snap);
	huge_restore();
	signal(sig, SIG_DFL);
	if (sig == SIGALRM)
		_exit(255);
	raise(sig);
}

/* A bail out (exit) leaves no snapshot behind either. */
static void drop_snap(void)
{
	if (snap)
		drop_snapshot(snap);
	snap = NULL;
}

int main(void)
{
	static char name[128];
	const char *fs = getenv("FL_SEED"), *only = getenv("FL_CASE");

	load_start();	/* first: spinners fork from an empty process */
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGALRM, on_signal);
	alarm(CASE_SECS);
	seed = fs && *fs ? (unsigned int)strtoul(fs, NULL, 0) :
	       (unsigned int)time(NULL) ^ (unsigned int)getpid();
	diag("seed %u (FL_SEED=%u repeats the random rounds)", seed, seed);
	snap = make_snapshot(SNAP_LEN, SEED, NULL, 0);
	atexit(drop_snap);
	if (fl_source_open(snap, &src) < 0)
		BAIL("source: %s", fl_last_error());
	if (uffd_query(&caps) < 0)
		caps.features = 0;
	for (int i = 0; i < NMODES; i++)
		probe(&modes[i]);
	for (size_t c = 0; c < sizeof(cases) / sizeof(*cases); c++) {
		for (int i = 0; i < NMODES; i++) {
			const struct mode *m = &modes[i];

			snprintf(name, sizeof(name), "%s (%s)", cases[c].name,
				 m->name);
			if (only && *only && !strstr(name, only))
				continue;
			if (cases[c].tracked && m->mech <= 0) {
				char why[400];

				snprintf(why, sizeof(why), "%s: %s", name,
					 m->why);
				skip(1, why);
				continue;
			}
			running = name;
			diag("%s", name);
			alarm(CASE_SECS);
			cases[c].fn(m);
		}
	}
	alarm(0);
	fl_source_put(src);
	drop_snap();
	return done_testing();
}
