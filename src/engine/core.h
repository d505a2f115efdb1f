/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core.h - the engine's state, shared by the files of src/engine/: the
 * engine, its workers, the fault queue and the fill flags.  No functions.
 */
#ifndef FAULTLINE_ENGINE_CORE_H
#define FAULTLINE_ENGINE_CORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/eventfd.h>

#include "faultline.h"
#include "engine/prefetch_state.h"
#include "engine/region.h"
#include "format/trace.h"
#include "kernel/uffd.h"
#include "util/clock.h"

#define MSG_BATCH	64	/* uffd messages read at once */
#define RESET_SCRATCH	(8ull << 20)	/* reset.c's MOVE target, bytes */
#define HUGE_2M		(2ull << 20)

struct engine_stats {
#define ENGINE_STATS_FIELD(name)	_Atomic uint64_t name;
	FL_STATS_COUNTERS(ENGINE_STATS_FIELD)
#undef ENGINE_STATS_FIELD
	_Atomic uint64_t lat_ns_sum, lat_ns_max;
	_Atomic uint64_t lat_hist[FL_LAT_BUCKETS];
};

struct worker;
struct fl_engine_child;

#define WOKEN_SLOTS 256

struct fl_engine {
	int uffd;
	bool own_uffd;
	uint64_t features;	/* negotiated; 0 if adopted (unknown) */
	uint64_t chunk;		/* bytes per fault: fixed, or where the
				 * adaptive chunk starts (prefetch.c) */
	bool chunk_fixed;	/* the caller chose it: never adapted */
	atomic_bool use_move;	/* in-process: MOVE from the read buffer */
	int on_error;
	int client_pid;		/* > 0: that process; 0: this one; -1:
				 * another of unknown pid (as proc.h takes
				 * it; FL_ENGINE_CLIENT_REMOTE) */
	int client_pidfd;	/* the client's pidfd, or -1: the only way
				 * another process is ever killed */
	int pagemap_fd;		/* /proc/client/pagemap (another process), or -1 */

	/*
	 * Readers: resolvers (bitmap check through COPY).  Writer: whoever
	 * reads the uffd and applies events.  Holding it exclusively across
	 * read() closes the window in which a COPY could land after a REMOVE
	 * was read but before it was applied (the kernel stops refusing
	 * COPY with EAGAIN as soon as the event is read).
	 */
	pthread_rwlock_t lock;
	struct region_list regions;	/* region.c */
	int resets;		/* resets begun, not ended (lock held) */
	uint64_t reset_seq;	/* resets ever begun (lock held) */
	uint64_t remap_seq;	/* REMAP and UNMAP events applied (lock held) */

	int stopfd;		/* eventfd: wakes pollers on stop */
	pthread_t *threads;
	unsigned int nthreads;
	atomic_bool stopping;
	atomic_bool finished;
	atomic_bool killed;		/* we SIGKILLed the client (policy) */
	bool adopted;			/* FL_ENGINE_ADOPT: the uffd is not ours */
	/*
	 * The ioctl gate (engine_fill, engine_wake): detached is set once
	 * the client is done with its memory; in_ioctl counts ioctls under
	 * way.  fl_engine_detach() waits for that count to drain, so after
	 * it no ioctl of this engine can land in memory the client has
	 * mapped anew (the kernel lets any uffd of an mm fill any of its
	 * registered VMAs).
	 */
	atomic_bool detached;
	atomic_int in_ioctl;

	/*
	 * Faults answered by a wake alone (the page was filled): a fault on
	 * the page read after that wake is a thread that really faults
	 * again, not a stale message (woken_lock; slots by page address).
	 */
	pthread_mutex_t woken_lock;
	struct { uint64_t addr, ns; } woken[WOKEN_SLOTS];

	struct worker *workers;		/* the threads' workers (engine_worker) */
	pthread_mutex_t process_lock;	/* fl_engine_process() callers */
	struct worker *process_worker;

	/* Prefetch, replay and background restore (prefetch.c's own). */
	struct prefetch pf;

	/* Restore progress: fillers, faults and progress scans say so. */
	atomic_bool restored;		/* nothing missing: background restore
					 * or a progress scan found so */
	uint64_t start_ns;		/* fl_engine_start() */
	_Atomic uint64_t restored_ns;	/* when restored last became true */
	_Atomic uint64_t last_fill_ns;	/* the last run filled, any path */
	pthread_mutex_t why_lock;	/* why */
	char why[1024];			/* first failure: fl_engine_error() */
	atomic_int readers_waiting;	/* fault readers waiting for the lock */

	/* Working-set traces (trace.c): record faults (replay: pf). */
	struct trace *rec;		/* non-NULL while recording */

	/* FL_ENGINE_SHARED_STATE: every region's page states, in order. */
	_Atomic uint8_t *state_map;
	uint64_t state_size, state_used;	/* bytes */
	bool takeover;

	/* fork.h: who takes a forked child's uffd (NULL: fork events refused). */
	int (*on_fork)(void *arg, struct fl_engine_child *c);
	void *fork_arg;
	int restored_fd;		/* an eventfd told once restored, or -1
					 * (fl_engine_notify_restored()) */

	/* Write tracking and reset to the snapshot (track.c, reset.c). */
	atomic_int track;		/* FL_TRACK_*, 0: off */
	int scan_fd;			/* /proc/self/pagemap (WP_ASYNC), or -1 */
	pthread_mutex_t reset_lock;	/* one fl_engine_reset() at a time */
	struct worker *reset_worker;	/* its eager refill's (engine_worker) */
	void *scratch;			/* reset.c: MOVE target, or NULL */

	struct engine_stats st;
};

/* A fault read, not yet served. */
struct pending {
	uint64_t addr;
	uint64_t t_read;	/* CLOCK_MONOTONIC ns when the fault was read */
	uint64_t t_seen;	/* ... when the read() that brought it began */
	bool wp;		/* a write-protect fault (track.c), no fill */
};

struct worker {
	struct fl_engine *e;	/* owner (engine_worker) */
	struct worker *next;	/* in e->workers */
	void *map;		/* the mapping buf lives in */
	void *buf;		/* FL_MAX_CHUNK bytes: the source reads here */
	struct pending *q;	/* faults read, not yet served */
	int qhead, qlen, qcap;
	struct uffd_msg msgs[MSG_BATCH];
	unsigned int filler;	/* fillers: 0, 1...; else 0 (prefetch.c) */
	const void *pop_map;	/* map_source(): offset 0 of the source */
	uint64_t pop_lo, pop_hi;	/* mapping last populated; its range */
};

static inline void stat_add(_Atomic uint64_t *c, uint64_t v)
{
	atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

/*
 * How to fill: a fault fills removed pages too (as zeros); prefetch fills
 * missing pages only.  Every fill wakes the threads waiting in its range.
 */
#define FILL_REMOVED	(1u << 0)
#define FILL_FROM_MAP	(1u << 2)	/* internal: COPY from source->map() */
#define FILL_BLOCK	(1u << 4)	/* internal: map whole source blocks */
/*
 * Prefetch: stop between two runs (-EINTR) when a fault reader waits for
 * the lock, so that a fault never waits for more than one run of somebody
 * else's prefetch (whose runs prefetch.c keeps short while faults come).
 */
#define FILL_YIELD	(1u << 3)

/*
 * Nothing missing since at (ns): say so, and tell whoever asked
 * (fl_engine_notify_restored(), fork.h).
 */
static inline void engine_restored(struct fl_engine *e, uint64_t at)
{
	atomic_store(&e->restored_ns, at);
	atomic_store(&e->restored, true);
	if (e->restored_fd >= 0)
		eventfd_write(e->restored_fd, 1);
}

#endif
