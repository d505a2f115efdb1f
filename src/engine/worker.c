// SPDX-License-Identifier: Apache-2.0
/*
 * worker.c - the per-thread state fills use: a 2 MiB-aligned staging
 * buffer the source is read into, and the queue of faults read.
 *
 * Decision: a thread's worker belongs to the engine and is freed only
 * after the uffd is closed (engine_worker()): in-process, unmapping a
 * buffer can raise an UNMAP event nobody is left to read.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "engine/worker.h"

struct worker *worker_new(bool huge)
{
	struct worker *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	/*
	 * The read buffer is a 2 MiB-aligned staging area.  For MOVE it is
	 * THP-backed: the source reads into a huge page, and in-process
	 * engines MOVE it into place (a whole PMD when the run is one).
	 * Otherwise it is not: its first write would fault in a huge page,
	 * 5 ms under PVM (direct compaction, memory the host has not
	 * backed), in the middle of a fault.  Not inherited by fork, or MOVE
	 * would find its pages shared (EBUSY).
	 */
	uint8_t *p = mmap(NULL, 2 * FL_MAX_CHUNK, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		free(w);
		return NULL;
	}
	w->map = p;
	w->buf = (void *)(((uintptr_t)p + FL_MAX_CHUNK - 1) &
			  ~(uintptr_t)(FL_MAX_CHUNK - 1));
	madvise(w->buf, FL_MAX_CHUNK, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
	madvise(w->buf, FL_MAX_CHUNK, MADV_DONTFORK);
	return w;
}

void worker_free(struct worker *w)
{
	if (!w)
		return;
	munmap(w->map, 2 * FL_MAX_CHUNK);
	free(w->q);
	free(w);
}

/*
 * A worker for one of the engine's threads, owned by the engine and freed
 * by fl_engine_destroy() after the uffd is closed.  A thread must not
 * unmap its buffer on its way out: in-process, that munmap can raise an
 * UNMAP event on the engine's own uffd, and the threads that would read
 * it may already be gone (seen: fl_engine_destroy() hung joining such a
 * thread).  Called from API calls only, never concurrently.
 */
struct worker *engine_worker(struct fl_engine *e)
{
	struct worker *w = worker_new(atomic_load(&e->use_move));

	if (w) {
		w->e = e;
		w->next = e->workers;
		e->workers = w;
	}
	return w;
}
