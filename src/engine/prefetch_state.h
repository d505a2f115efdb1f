/* SPDX-License-Identifier: Apache-2.0 */
/*
 * prefetch_state.h - the state of prefetch.c, and nothing else: a
 * region's readahead stream (struct ra_state, in each region) and the
 * engine's prefetch, replay and background restore (struct prefetch, in
 * the engine).
 *
 * Decision: the structs live apart from the region and the engine they
 * are embedded in, and only readahead.c and prefetch.c touch their
 * fields; the rest of the engine goes through their headers' functions.  Embedded, not
 * allocated, so a region split by an event needs no allocation for it.
 */
#ifndef FAULTLINE_ENGINE_PREFETCH_STATE_H
#define FAULTLINE_ENGINE_PREFETCH_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/trace.h"

/* A region's readahead stream, under the engine's prefetch lock; pages. */
struct ra_state {
	uint64_t stream;	/* where the last fault's stream started (a
				 * run of faults each where the last ended) */
	uint64_t stream_faults;	/* faults in that stream so far */
	uint64_t prev_end;	/* the end of the last fault's chunk */
	uint64_t delta;		/* distance between the last two streams' starts */
	uint64_t end;		/* end of the current readahead window */
	uint64_t size;		/* pages it fills */
	uint64_t stride;	/* 0: contiguous; else its steps' distance */
	uint64_t marker;	/* pages left unfilled: a fault there = progress */
	uint64_t marker_len;
	uint64_t random;	/* faults that started no stream (density) */
	/*
	 * Pages a fault fills (adaptive chunk; 0: the engine's): grown while
	 * faults arrive in order, back to the engine's chunk (or one page,
	 * chunk_reset()) on a random one.  Written under the lock, read by
	 * faults without it.
	 */
	_Atomic uint64_t fault_pages;
};

struct region;

/*
 * A readahead window queued for the filler thread (pages of r): [next,
 * end), or with a stride, run pages every stride pages from next; the
 * marker_len pages at marker are left for the client to fault on.
 */
struct ra_job {
	struct region *r;
	uint64_t next, end, marker, marker_len;
	uint64_t stride, run;
};

#define RA_JOBS 16
#define FILLERS_MAX 2	/* filler threads: one per CPU, at most this */

/* Prefetch, trace replay and background restore of one engine. */
struct prefetch {
	bool readahead, background;	/* enabled (FL_ENGINE_NO_*) */
	uint64_t ra_max;		/* largest readahead window, bytes */
	uint64_t quiet_ns;		/* background waits this long after a fault */
	pthread_mutex_t lock;		/* all of this, every region's ra */
	pthread_cond_t cond;
	struct ra_job jobs[RA_JOBS];
	int njobs;
	unsigned int nfillers;		/* running */
	atomic_bool filling;		/* fillers run (faults read it) */
	pthread_t fillers[FILLERS_MAX];
	_Atomic uint64_t last_fault_ns;	/* a fault read, or a replay piece */
	int bg_region;			/* background cursor */
	uint64_t bg_page;
	uint64_t bg_gen;		/* regions changed: bumped */
	bool bg_stopped;		/* hugetlb pool empty: faults only */
	atomic_bool dense;		/* a client faults all over: stream now */

	/* Working-set replay (trace.c): runs to fill, in order. */
	struct trace replay;		/* sorted, coalesced runs to fill */
	size_t replay_next;		/* cursor into replay.runs */
	uint64_t replay_off;		/* bytes of that run already done */
};

#endif
