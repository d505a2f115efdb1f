/*
 * engine.h - internals shared by the engine's files (engine.c, stats.c).
 */
#ifndef FAULTLINE_ENGINE_H
#define FAULTLINE_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "faultline.h"
#include "region.h"
#include "uffd.h"

struct engine_stats {
	_Atomic uint64_t faults, events, pages_copied, pages_zeroed;
	_Atomic uint64_t pages_poisoned, bytes_copied, eexist, eagain;
	_Atomic uint64_t source_errors, lat_ns_sum, lat_ns_max;
	_Atomic uint64_t lat_hist[FL_LAT_BUCKETS];
};

struct worker;

struct fl_engine {
	int uffd;
	bool own_uffd;
	uint64_t features;	/* negotiated; 0 if adopted (unknown) */
	uint64_t chunk;
	int on_error;
	int client_pid;

	/*
	 * Readers: resolvers (bitmap check through COPY).  Writer: whoever
	 * reads the uffd and applies events.  Holding it exclusively across
	 * read() closes the window in which a COPY could land after a REMOVE
	 * was read but before it was applied (the kernel stops refusing
	 * COPY with EAGAIN as soon as the event is read).
	 */
	pthread_rwlock_t lock;
	struct region **regions;
	int nregions, cap;

	int stopfd;		/* eventfd: wakes pollers on stop */
	pthread_t *threads;
	unsigned int nthreads;
	atomic_bool stopping;
	atomic_bool finished;

	pthread_mutex_t process_lock;	/* fl_engine_process() callers */
	struct worker *process_worker;

	struct engine_stats st;
};

void stats_record_latency(struct engine_stats *st, uint64_t ns);

#endif
