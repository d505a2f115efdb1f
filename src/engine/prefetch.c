// SPDX-License-Identifier: Apache-2.0
/*
 * prefetch.c - copy ahead of the client instead of in its way: the filler
 * threads (one per CPU, at most FILLERS_MAX) that fill the readahead
 * windows readahead.c queues, replay a working-set trace, and restore in
 * the background once faults pause (or the client is dense).
 *
 * Decision: faults come first.  A filler holds the engine lock shared in
 * bounded pieces, copies in runs of YIELD_RUN_BYTES and gives the lock up
 * as soon as a fault reader waits (FILL_YIELD); work is handed out in
 * pieces under pf.lock, so fillers never fill the same piece; removed
 * pages are never filled ahead (docs/architecture.md, Threading).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "engine/core.h"
#include "engine/fill.h"
#include "engine/worker.h"
#include "engine/prefetch.h"
#include "util/clock.h"
#include "kernel/uffd.h"

#define PIECE_BYTES	(512u << 10)	/* readahead work per lock hold */
#define BG_BYTES	(2u << 20)	/* background work per lock hold */
/* Fillers run a little below the client and its handler threads. */
#define FILLER_NICE	5
/* A prefetch run while faults come: a fault waits for one at most. */
#define YIELD_RUN_BYTES	(256u << 10)

void prefetch_forget(struct fl_engine *e, struct region *r)
{
	pthread_mutex_lock(&e->pf.lock);
	for (int i = 0; i < e->pf.njobs; i++) {
		if (e->pf.jobs[i].r != r)
			continue;
		memmove(&e->pf.jobs[i], &e->pf.jobs[i + 1],
			sizeof(*e->pf.jobs) * (size_t)(e->pf.njobs - i - 1));
		e->pf.njobs--;
		i--;
	}
	e->pf.bg_region = 0;
	e->pf.bg_page = 0;
	pthread_mutex_unlock(&e->pf.lock);
}

void prefetch_clip(struct fl_engine *e, struct region *r)
{
	pthread_mutex_lock(&e->pf.lock);
	for (int i = 0; i < e->pf.njobs; i++) {
		struct ra_job *j = &e->pf.jobs[i];

		if (j->r != r)
			continue;
		if (j->end > r->npages)
			j->end = r->npages;
		if (j->next < j->end)
			continue;
		memmove(j, j + 1, sizeof(*j) * (size_t)(e->pf.njobs - i - 1));
		e->pf.njobs--;
		i--;
	}
	if (r->ra.end > r->npages)	/* the stream starts over */
		r->ra.size = 0;
	pthread_mutex_unlock(&e->pf.lock);
}

void prefetch_regions_changed(struct fl_engine *e)
{
	pthread_mutex_lock(&e->pf.lock);
	e->pf.bg_region = 0;
	e->pf.bg_page = 0;
	e->pf.bg_gen++;		/* a scan begun before is stale */
	e->pf.bg_stopped = false;
	atomic_store(&e->restored, false);
	pthread_cond_broadcast(&e->pf.cond);
	pthread_mutex_unlock(&e->pf.lock);
}

/*
 * Pages of a piece were handed back missing (it yielded to a fault or an
 * event): a background scan that began before may have passed them busy
 * and must not call the restore complete.
 */
static void piece_yielded(struct fl_engine *e)
{
	pthread_mutex_lock(&e->pf.lock);
	e->pf.bg_gen++;
	pthread_mutex_unlock(&e->pf.lock);
}

/*
 * Fill the missing pages of [first, last) ahead of any fault.  Each run's
 * COPY wakes the range it filled: a fault that found a page busy here and
 * left it to us waits for that run, not for the whole piece.
 */
static int fill_ahead(struct fl_engine *e, struct worker *w, struct region *r,
		      uint64_t first, uint64_t last, _Atomic uint64_t *counter)
{
	if (first >= last)
		return 0;
	struct fill_ctx job = { .e = e, .w = w, .r = r, .how = FILL_YIELD,
				.counter = counter };

	/*
	 * While faults come: short runs, so that one waits little.  Before
	 * the first fault and once they have gone quiet: whole 2 MiB runs (a
	 * background restore of an idle client, 8 % faster here; and with
	 * MOVE, a first short run would split the staging huge page for
	 * good, and no later run would move a whole PMD).
	 */
	if (atomic_load(&e->st.faults) &&
	    now_ns() - atomic_load(&e->pf.last_fault_ns) < e->pf.quiet_ns)
		job.max_run = YIELD_RUN_BYTES;
	int ret = engine_fill_range(&job, first, last);

	if (ret == -EAGAIN || ret == -EINTR)
		piece_yielded(e);
	return ret;
}

/* Fill [a, b) of j's region but its marker. */
static int fill_around_marker(struct fl_engine *e, struct worker *w,
			      const struct ra_job *j, uint64_t a, uint64_t b)
{
	_Atomic uint64_t *c = &e->st.pages_prefetched;
	uint64_t m0 = j->marker, m1 = j->marker + j->marker_len;

	if (m1 <= a || m0 >= b)
		return fill_ahead(e, w, j->r, a, b, c);
	int ret = fill_ahead(e, w, j->r, a, m0 > a ? m0 : a, c);

	return ret ? ret : fill_ahead(e, w, j->r, m1 < b ? m1 : b, b, c);
}

/* Put the rest of a piece back first in line (pf.lock not held). */
static void requeue_front(struct fl_engine *e, const struct ra_job *j)
{
	pthread_mutex_lock(&e->pf.lock);
	if (e->pf.njobs < RA_JOBS) {	/* else background restore will do it */
		memmove(&e->pf.jobs[1], &e->pf.jobs[0],
			sizeof(*e->pf.jobs) * (size_t)e->pf.njobs++);
		e->pf.jobs[0] = *j;
	}
	pthread_mutex_unlock(&e->pf.lock);
}

/*
 * One piece of the oldest readahead job: PIECE_BYTES of data, contiguous
 * or in steps, taken off the job under pf.lock so that another filler goes
 * on with the next piece.  Engine lock held shared (so the job's region
 * stays).  Returns -EAGAIN when an event is pending or -EINTR when a fault
 * waits: the rest of the piece is queued again, first (what was filled is
 * skipped).
 */
static int readahead_piece(struct fl_engine *e, struct worker *w)
{
	pthread_mutex_lock(&e->pf.lock);
	if (!e->pf.njobs) {
		pthread_mutex_unlock(&e->pf.lock);
		return 0;
	}
	struct ra_job j = e->pf.jobs[0];
	uint64_t piece = region_pages(j.r, PIECE_BYTES);
	uint64_t stop = j.stride ? j.next + (piece > j.run ? piece / j.run : 1) *
				   j.stride : j.next + piece;
	uint64_t end = j.end < j.r->npages ? j.end : j.r->npages;

	if (stop > end)
		stop = end;
	e->pf.jobs[0].next = stop;
	if (stop == end)
		memmove(&e->pf.jobs[0], &e->pf.jobs[1],
			sizeof(*e->pf.jobs) * (size_t)--e->pf.njobs);
	pthread_mutex_unlock(&e->pf.lock);

	int ret = 0;
	uint64_t resume = j.next;	/* strided: the first step not done */

	if (!j.stride)
		ret = fill_around_marker(e, w, &j, j.next, stop);
	for (uint64_t a = j.next; j.stride && a < stop && !ret; a += j.stride) {
		resume = a;
		/* Each step is a run of its own: yield between them. */
		if (a > j.next && atomic_load(&e->readers_waiting))
			ret = -EINTR;
		else
			ret = fill_around_marker(e, w, &j, a,
						 a + j.run < j.r->npages ?
						 a + j.run : j.r->npages);
	}
	if (ret == -EAGAIN || ret == -EINTR) {
		/* The rest of the piece again, first (steps done stay done). */
		j.next = resume;
		j.end = stop;
		requeue_front(e, &j);
	}
	return ret;
}

/*
 * One piece of the replayed trace: up to BG_BYTES of the current run, in
 * every region that maps that part of the snapshot; -ENXIO while there is
 * no region (the fillers wait for one instead of spinning).  Engine lock
 * held shared.
 */
static int replay_piece(struct fl_engine *e, struct worker *w)
{
	uint64_t src_end = 0;	/* no region maps the snapshot beyond this */

	if (!e->regions.n)
		return -ENXIO;	/* nothing to replay into yet */
	for (int i = 0; i < e->regions.n; i++)
		if (e->regions.v[i]->src_off + e->regions.v[i]->len > src_end)
			src_end = e->regions.v[i]->src_off + e->regions.v[i]->len;
	pthread_mutex_lock(&e->pf.lock);
	/* A trace of another snapshot: what lies past every region is skipped. */
	while (e->pf.replay_next < e->pf.replay.n &&
	       e->pf.replay.runs[e->pf.replay_next].off + e->pf.replay_off >= src_end) {
		e->pf.replay_next++;
		e->pf.replay_off = 0;
	}
	if (e->pf.replay_next >= e->pf.replay.n) {
		pthread_mutex_unlock(&e->pf.lock);
		return 0;
	}
	size_t at = e->pf.replay_next;
	uint64_t at_off = e->pf.replay_off;
	struct trace_run run = e->pf.replay.runs[e->pf.replay_next];
	uint64_t off = run.off + e->pf.replay_off;
	uint64_t len = run.len - e->pf.replay_off;

	if (len > src_end - off) {	/* the run ends past every region */
		len = src_end - off;
		run.len = e->pf.replay_off + len;
	}

	if (len > BG_BYTES)
		len = BG_BYTES;
	e->pf.replay_off += len;
	/* Replay is activity: background restore waits until it is over. */
	atomic_store(&e->pf.last_fault_ns, now_ns());
	if (e->pf.replay_off >= run.len) {
		e->pf.replay_next++;
		e->pf.replay_off = 0;
	}
	pthread_mutex_unlock(&e->pf.lock);

	for (int i = 0; i < e->regions.n; i++) {
		struct region *r = e->regions.v[i];
		uint64_t lo = off > r->src_off ? off : r->src_off;
		uint64_t hi = off + len < r->src_off + r->len ?
			      off + len : r->src_off + r->len;

		if (lo >= hi)
			continue;
		uint64_t first = (lo - r->src_off) >> r->page_shift;
		uint64_t last = (hi - r->src_off + r->page_size - 1) >>
				r->page_shift;

		int ret = fill_ahead(e, w, r, first, last,
				     &e->st.pages_replayed);

		if (ret == -EAGAIN || ret == -EINTR) {
			/*
			 * An event or a fault is pending: do it again, unless
			 * another filler has gone back further already.
			 */
			pthread_mutex_lock(&e->pf.lock);
			if (at < e->pf.replay_next || (at == e->pf.replay_next &&
						    at_off < e->pf.replay_off)) {
				e->pf.replay_next = at;
				e->pf.replay_off = at_off;
			}
			pthread_mutex_unlock(&e->pf.lock);
			return ret;
		}
	}
	return 0;
}

/*
 * The first missing page from the cursor (ri, pg) on, wrapping round
 * once: its region's index and page in *ri, *pg, and 1; else 2 if pages
 * are still being filled or reset (busy: the restore is not complete
 * until they are), 0 if none.  Reads page states only (engine lock held shared).
 */
static int next_missing(struct fl_engine *e, int *ri, uint64_t *pg)
{
	bool busy = false;

	for (int scanned = 0; scanned <= e->regions.n; scanned++) {
		if (*ri >= e->regions.n) {
			*ri = 0;
			*pg = 0;
		}
		struct region *r = e->regions.v[*ri];
		enum page_state s = PG_PRESENT;

		while (*pg < r->npages &&
		       (s = region_get(r, *pg)) != PG_MISSING) {
			busy |= s == PG_BUSY || s == PG_RESET;
			(*pg)++;
		}
		if (*pg < r->npages)
			return 1;
		(*ri)++;
		*pg = 0;
	}
	return busy ? 2 : 0;
}

/*
 * One background piece: BG_BYTES from the next missing page after the
 * cursor, which moves past it before the fill (another filler takes the
 * next piece; pages a piece hands back are found when the cursor comes
 * round again).  Returns 1 while there is more, 2 when only pages being
 * filled are left (by another filler, or a fault), 0 when no region has
 * a page missing or busy, or -ENOMEM when the hugetlb pool is empty.
 * Engine lock held shared.
 */
static int background_piece(struct fl_engine *e, struct worker *w)
{
	int ri;
	uint64_t pg;

	if (!e->regions.n)
		return 0;
	for (;;) {
		pthread_mutex_lock(&e->pf.lock);
		int ri0 = e->pf.bg_region;
		uint64_t pg0 = e->pf.bg_page;

		pthread_mutex_unlock(&e->pf.lock);
		ri = ri0;
		pg = pg0;
		int found = next_missing(e, &ri, &pg);

		if (found != 1)
			return found;
		struct region *r = e->regions.v[ri];
		uint64_t end = pg + region_pages(r, BG_BYTES);

		if (end > r->npages)
			end = r->npages;
		/* Take the piece, unless another filler moved the cursor. */
		pthread_mutex_lock(&e->pf.lock);
		bool mine = e->pf.bg_region == ri0 && e->pf.bg_page == pg0;

		if (mine) {
			e->pf.bg_region = ri;
			e->pf.bg_page = end;
		}
		pthread_mutex_unlock(&e->pf.lock);
		if (!mine)
			continue;
		int ret = fill_ahead(e, w, r, pg, end, &e->st.pages_background);

		return ret == -ENOMEM ? -ENOMEM : 1;	/* pool empty: faults only */
	}
}

static void wait_ns(struct fl_engine *e, uint64_t ns)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)(ns / 1000000000ull);
	ts.tv_nsec += (long)(ns % 1000000000ull);
	if (ts.tv_nsec >= 1000000000l) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000l;
	}
	pthread_cond_timedwait(&e->pf.cond, &e->pf.lock, &ts);
}

static bool filler_stopped(struct fl_engine *e)
{
	return atomic_load(&e->stopping) || atomic_load(&e->finished);
}

/*
 * How long faults (and replay) must have paused before background
 * restore: the engine's quiet_ns once the client has faulted (not to
 * compete with it while it runs) or a trace is replayed (its working set
 * first), none before (nothing of it runs on that memory yet).  pf.lock
 * held.
 */
static uint64_t bg_quiet_ns(struct fl_engine *e)
{
	return atomic_load(&e->st.faults) || e->pf.replay.n ? e->pf.quiet_ns : 0;
}

/*
 * May filler w run background restore now?  After the quiet period, yes.
 * Before it, only the first filler, and only for a dense client (one that
 * waits on faults all over its memory, so the first filler's CPU is not
 * the client's): the others would take the CPU of a client that runs, and
 * delay its faults (fault-latency's touches during a restore).
 */
static bool bg_go(struct fl_engine *e, const struct worker *w,
		  uint64_t *wait)
{
	uint64_t since = now_ns() - atomic_load(&e->pf.last_fault_ns);
	uint64_t quiet = bg_quiet_ns(e);

	if (since >= quiet || (!w->filler && atomic_load(&e->pf.dense)))
		return true;
	*wait = quiet - since;
	return false;
}

enum fl_background fl_engine_background(struct fl_engine *e)
{
	enum fl_background st = FL_BACKGROUND_RUNNING;

	if (atomic_load(&e->restored))
		return FL_BACKGROUND_DONE;
	pthread_mutex_lock(&e->pf.lock);
	if (!e->pf.background || !e->pf.nfillers)
		st = FL_BACKGROUND_OFF;
	else if (e->pf.bg_stopped)
		st = FL_BACKGROUND_STOPPED;
	else if (now_ns() - atomic_load(&e->pf.last_fault_ns) < bg_quiet_ns(e) &&
		 !atomic_load(&e->pf.dense))
		st = FL_BACKGROUND_WAITING;
	pthread_mutex_unlock(&e->pf.lock);
	return st;
}

static void *filler(void *arg)
{
	struct worker *w = arg;
	struct fl_engine *e = w->e;

	/* Below the client's threads and the fault handlers (nice raised). */
	setpriority(PRIO_PROCESS, (id_t)gettid(), FILLER_NICE);
	pthread_mutex_lock(&e->pf.lock);
	while (!filler_stopped(e)) {
		/* Readahead (the first filler's) follows live faults: first. */
		bool ra = e->pf.njobs && !w->filler;
		uint64_t wait;

		if (ra || e->pf.replay_next < e->pf.replay.n) {
			pthread_mutex_unlock(&e->pf.lock);
			pthread_rwlock_rdlock(&e->lock);
			int ret = ra ? readahead_piece(e, w) :
				       replay_piece(e, w);

			pthread_rwlock_unlock(&e->lock);
			if (ret == -EAGAIN)
				usleep(100);	/* let a reader apply the event */
			pthread_mutex_lock(&e->pf.lock);
			if (ret == -ENXIO)	/* until a region is added */
				wait_ns(e, 1000000000ull);
			continue;
		}
		if (!e->pf.background || e->pf.bg_stopped ||
		    atomic_load(&e->restored)) {
			wait_ns(e, 1000000000ull);
			continue;
		}
		if (!bg_go(e, w, &wait)) {
			wait_ns(e, wait);
			continue;
		}
		uint64_t gen = e->pf.bg_gen;

		pthread_mutex_unlock(&e->pf.lock);
		pthread_rwlock_rdlock(&e->lock);
		int more = background_piece(e, w);

		pthread_rwlock_unlock(&e->lock);
		pthread_mutex_lock(&e->pf.lock);
		if (more < 0)		/* hugetlb pool empty: faults only */
			e->pf.bg_stopped = true;
		if (more == 2)		/* the last pieces are being filled */
			wait_ns(e, 1000000ull);
		if (more || gen != e->pf.bg_gen)	/* regions added meanwhile */
			continue;
		if (!atomic_load(&e->restored))
			engine_restored(e, now_ns());
	}
	pthread_mutex_unlock(&e->pf.lock);
	return NULL;
}

/* Fillers to run: one per CPU this process may use, at most FILLERS_MAX. */
static unsigned int fillers_wanted(void)
{
	cpu_set_t set;
	int n = sched_getaffinity(0, sizeof(set), &set) == 0 ?
		CPU_COUNT(&set) : 1;

	return n < 1 ? 1 : n > FILLERS_MAX ? FILLERS_MAX : (unsigned int)n;
}

void prefetch_init(struct fl_engine *e, const struct fl_engine_opts *opts)
{
	struct prefetch *pf = &e->pf;

	pf->readahead = !(opts->flags & FL_ENGINE_NO_PREFETCH);
	pf->background = !(opts->flags & FL_ENGINE_NO_BACKGROUND);
	pf->ra_max = opts->readahead_max ? opts->readahead_max :
		     FL_DEFAULT_READAHEAD;
	pf->quiet_ns = (uint64_t)(opts->quiet_ms ? opts->quiet_ms :
				  FL_DEFAULT_QUIET_MS) * 1000000ull;
	pthread_mutex_init(&pf->lock, NULL);
	pthread_cond_init(&pf->cond, NULL);
	trace_init(&pf->replay);
}

void prefetch_free(struct fl_engine *e)
{
	pthread_mutex_destroy(&e->pf.lock);
	pthread_cond_destroy(&e->pf.cond);
	trace_free(&e->pf.replay);
}

void prefetch_fault_read(struct fl_engine *e, uint64_t ns)
{
	atomic_store_explicit(&e->pf.last_fault_ns, ns, memory_order_relaxed);
}

int prefetch_replay(struct fl_engine *e, struct trace *t, bool running)
{
	pthread_mutex_lock(&e->pf.lock);
	trace_free(&e->pf.replay);
	e->pf.replay = *t;
	e->pf.replay_next = 0;
	e->pf.replay_off = 0;
	pthread_cond_broadcast(&e->pf.cond);
	bool idle = !e->pf.nfillers;

	pthread_mutex_unlock(&e->pf.lock);
	/* Started without anything for the fillers to do: they have now. */
	return running && idle ? prefetch_start(e) : 0;
}

int prefetch_start(struct fl_engine *e)
{
	unsigned int n = fillers_wanted();

	if (!e->pf.readahead && !e->pf.background && !e->pf.replay.n)
		return 0;	/* nothing for a filler to do */

	atomic_store(&e->pf.last_fault_ns, now_ns());
	while (e->pf.nfillers < n) {
		struct worker *w = engine_worker(e);
		int ret = ENOMEM;

		if (w) {
			w->filler = e->pf.nfillers;
			ret = pthread_create(&e->pf.fillers[e->pf.nfillers], NULL,
					     filler, w);
		}

		if (ret)	/* one filler is enough to restore */
			return e->pf.nfillers ? 0 : -ret;
		e->pf.nfillers++;
		atomic_store(&e->pf.filling, true);
	}
	return 0;
}

void prefetch_stop(struct fl_engine *e)
{
	if (!e->pf.nfillers)
		return;
	atomic_store(&e->pf.filling, false);
	pthread_mutex_lock(&e->pf.lock);
	pthread_cond_broadcast(&e->pf.cond);
	pthread_mutex_unlock(&e->pf.lock);
	for (unsigned int i = 0; i < e->pf.nfillers; i++)
		pthread_join(e->pf.fillers[i], NULL);
	e->pf.nfillers = 0;
}
