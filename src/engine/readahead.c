// SPDX-License-Identifier: Apache-2.0
/*
 * readahead.c - the policy that watches the fault stream, per region: the
 * adaptive chunk (how much a fault fills), readahead windows for
 * sequential and strided streams (queued for prefetch.c's fillers), and
 * when a client faulting all over is dense enough for background restore
 * to start at once.
 *
 * Decision: the policy is data and decisions only, made under the
 * prefetch lock after a fault is served; it never fills a page itself
 * (the fillers do), so a fault pays for a few comparisons, not a copy
 * (docs/architecture.md, Threading; docs/benchmarks.md has what each rule
 * measured).
 */
#include <pthread.h>

#include "engine/core.h"
#include "engine/readahead.h"

/*
 * Random faults on 1/DENSE_DIV of a region's chunks make a client dense.
 * 128 MiB touched at random: 16 faults of ~60 us before the restore
 * streams (at 1/32 it waited for 64); a sparse client counts once per run.
 */
#define DENSE_DIV	128
#define STRIDE_MAX	(64u << 20)	/* a larger stride is two random faults */

/*
 * Pages a fault on r fills: the caller's fixed chunk, else the adaptive
 * one, and the largest when other faults wait behind this one (queued >
 * 1): several client threads are held up on faults at once, and one
 * handler serving them a small chunk each is what bounds them (4 vCPUs
 * touching at random: 575 faults and 1.52x prepopulated at 64 KiB each).
 */
uint64_t readahead_fault_pages(const struct fl_engine *e, const struct region *r,
			      int queued)
{
	uint64_t base = region_pages(r, e->chunk);
	uint64_t cur = atomic_load_explicit(&r->ra.fault_pages,
					    memory_order_relaxed);

	if (e->chunk_fixed)
		return base;
	if (queued > 1)
		return region_pages(r, FL_MAX_CHUNK);
	return cur ? cur : base;
}

/* Faults arrive in order: the next one fills twice as much (pf.lock held). */
static void chunk_grow(struct fl_engine *e, struct region *r)
{
	uint64_t cur = readahead_fault_pages(e, r, 1);
	uint64_t base = region_pages(r, e->chunk);
	uint64_t max = region_pages(r, FL_MAX_CHUNK);

	cur = cur < base ? base : cur;
	atomic_store_explicit(&r->ra.fault_pages, cur * 2 < max ? cur * 2 : max,
			      memory_order_relaxed);
}

/*
 * A random fault: the next fills the engine's chunk, or for a dense
 * client only its own page when background restore runs beside its
 * faults (fillers running, background on and not stopped): it fills the
 * rest, and each page more would only make the fault wait longer.  Not
 * while a trace is replayed: the fillers are busy with it, and a fault
 * that outran the replay is better off filling 64 KiB (a random trace
 * replayed: 1.35x prepopulated so, 1.14x not).  pf.lock held.
 */
static void chunk_reset(struct fl_engine *e, struct region *r)
{
	bool beside = e->pf.background && !e->pf.bg_stopped &&
		      atomic_load(&e->pf.filling) && atomic_load(&e->pf.dense) &&
		      e->pf.replay_next >= e->pf.replay.n;

	atomic_store_explicit(&r->ra.fault_pages, beside ? 1 : 0,
			      memory_order_relaxed);
}

/* Queue window [start, end) (steps of run pages every stride; pf.lock held). */
static void queue_window(struct fl_engine *e, struct region *r, uint64_t start,
			 uint64_t size, uint64_t stride, uint64_t run)
{
	if (!e->pf.readahead || start >= r->npages || e->pf.njobs == RA_JOBS)
		return;
	uint64_t steps = stride ? size / run : 0;
	uint64_t end = stride ? start + steps * stride : start + size;

	if (end > r->npages)
		end = r->npages;
	r->ra.size = size;
	r->ra.end = end;
	r->ra.stride = stride;
	if (stride) {
		/* The middle step is left unfilled, all of it. */
		r->ra.marker = start + steps / 2 * stride;
		r->ra.marker_len = run;
	} else {
		r->ra.marker = start + (end - start) / 2;
		r->ra.marker_len = 1;
	}
	e->pf.jobs[e->pf.njobs++] = (struct ra_job){
		r, start, end, r->ra.marker, r->ra.marker_len, stride, run,
	};
	pthread_cond_broadcast(&e->pf.cond);
}

/*
 * A random fault.  Once random faults have hit 1/DENSE_DIV of a region's
 * chunks, the client is touching all of its memory in no order readahead
 * can follow: waiting for a quiet moment would only leave it faulting on
 * the rest, so background restore starts now.  Streams (sparse runs) count
 * once per run and never get there.  pf.lock held.
 */
static void random_fault(struct fl_engine *e, struct region *r, uint64_t chunk)
{
	if (++r->ra.random * DENSE_DIV * chunk > r->npages &&
	    !atomic_load(&e->pf.dense)) {
		atomic_store(&e->pf.dense, true);
		pthread_cond_broadcast(&e->pf.cond);
	}
}

/* The smallest power of two of pages at least n, within [lo, hi]. */
static uint64_t pow2_within(uint64_t n, uint64_t lo, uint64_t hi)
{
	uint64_t p = lo;

	while (p < n && p < hi)
		p *= 2;
	return p < hi ? p : hi;
}

/*
 * A fault that does not continue a stream: it starts one.  Three stream
 * starts the same distance apart, farther than a stream is long (a client
 * walking an array of large records, or touching 1 MiB every 16): a
 * strided window at that distance, each step as long as the last stream
 * went (a power of two, at most FL_MAX_CHUNK), which faults then fill too.
 * Anything else is random.  pf.lock held.
 */
static void stream_start(struct fl_engine *e, struct region *r,
			 uint64_t first, uint64_t chunk, uint64_t max)
{
	uint64_t delta = first > r->ra.stream ? first - r->ra.stream : 0;
	uint64_t extent = r->ra.prev_end - r->ra.stream;
	/* How long the last stream went, as a chunk. */
	uint64_t went = pow2_within(extent, region_pages(r, e->chunk),
				    region_pages(r, FL_MAX_CHUNK));

	if (delta > extent && delta == r->ra.delta &&
	    delta <= region_pages(r, STRIDE_MAX)) {
		uint64_t run = e->chunk_fixed ? chunk : went;

		if (!e->chunk_fixed)
			atomic_store_explicit(&r->ra.fault_pages, run,
					      memory_order_relaxed);
		queue_window(e, r, first + delta,
			     run * 4 < max ? run * 4 : max, delta, run);
	} else if (r->ra.stream_faults > 1 && !e->chunk_fixed) {
		/* After a stream of faults, the next is as long (at first). */
		atomic_store_explicit(&r->ra.fault_pages, went,
				      memory_order_relaxed);
	} else {
		/* Density counts the engine's chunks, whatever this one was. */
		random_fault(e, r, region_pages(r, e->chunk));
		chunk_reset(e, r);
	}
	r->ra.delta = delta;
	r->ra.stream = first;
	r->ra.stream_faults = 0;
}

/*
 * Called with the engine lock shared, after the fault's chunk [first,
 * last) of r is filled.  Three patterns, per region:
 *  - sequential: this chunk starts where the last one ended (the stream
 *    goes on);
 *  - strided: the last three streams started the same distance apart
 *    (stream_start());
 *  - random: anything else.
 * A fault on a window's marker (or, sequentially, right after the window)
 * queues the next window, twice as large, up to ra_max bytes of data
 * (with prefetch on).  The fault chunk doubles, up to FL_MAX_CHUNK, while
 * faults come in order (a fault inside a window the filler has not
 * reached is a client outrunning it: its own thread then copies more per
 * fault, beside the filler) and falls back to the engine's on a random one
 * (or to one page: chunk_reset()).
 */
void readahead_after_fault(struct fl_engine *e, struct region *r, uint64_t pg,
			  uint64_t first, uint64_t last)
{
	uint64_t chunk = last - first, max = region_pages(r, e->pf.ra_max);

	pthread_mutex_lock(&e->pf.lock);
	bool on_marker = pg >= r->ra.marker &&
			 pg < r->ra.marker + r->ra.marker_len;
	/* A step of the strided window that the filler has not reached. */
	bool in_step = r->ra.stride && r->ra.marker_len && first < r->ra.end &&
		       r->ra.end - first <= r->ra.size / r->ra.marker_len *
					    r->ra.stride &&
		       (r->ra.end - first) % r->ra.stride == 0;

	if (r->ra.size && (on_marker || (!r->ra.stride && first == r->ra.end))) {
		/* Progress through the window: queue the next, larger one. */
		uint64_t start = r->ra.end > last || r->ra.stride ?
				 r->ra.end : last;

		queue_window(e, r, start, r->ra.size * 2 < max ?
			     r->ra.size * 2 : max, r->ra.stride, chunk);
		if (!r->ra.stride)
			chunk_grow(e, r);
		else
			r->ra.stream = first;
	} else if (in_step) {
		/* The client outran the filler: still the stream, not random. */
		if (!r->ra.stride)
			chunk_grow(e, r);
		else
			r->ra.stream = first;
	} else if (r->ra.prev_end && first <= r->ra.prev_end &&
		   pg >= r->ra.prev_end) {
		/*
		 * Where the last chunk ended (this one, grown, may start
		 * before it: chunks are aligned): a sequential stream.  Its
		 * first window is four of the engine's chunks, not of this
		 * grown one: it doubles as the stream proves itself, and a
		 * stream that stops soon (1 MiB runs in random order) does
		 * not leave megabytes queued behind it.
		 */
		uint64_t size = 4 * region_pages(r, e->chunk);

		queue_window(e, r, last, size < max ? size : max, 0, chunk);
		chunk_grow(e, r);
	} else {
		stream_start(e, r, first, chunk, max);
	}
	r->ra.prev_end = last;
	r->ra.stream_faults++;
	pthread_mutex_unlock(&e->pf.lock);
}
