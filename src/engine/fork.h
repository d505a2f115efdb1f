/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fork.h - what a server of CRIU's restored tasks needs of the engine
 * beyond faultline.h (fork.c): a client that forks while it is served
 * (their uffds ask for UFFD_FEATURE_EVENT_FORK) has each child's uffd,
 * with the parent's regions and page states as they are at the fork,
 * handed to whoever serves the child; and prefetch held back until the
 * client's memory is in place (a restorer sends its uffd before it maps
 * and registers its lazy memory: a fill there would meet no mapping).
 *
 * Decision: internal to the daemon, not in faultline.h: only a server of
 * several clients (a session per child) can take a child, and an engine
 * created without a handler still refuses a uffd with fork events, as
 * before, so that the Firecracker path keeps its guarantee.
 */
#ifndef FAULTLINE_ENGINE_FORK_H
#define FAULTLINE_ENGINE_FORK_H

#include <stdbool.h>

#include "faultline.h"

/*
 * A forked child, the handler's to keep: its uffd; state_fd, a memfd of
 * the page states of every region in order (one byte a page, as
 * FL_ENGINE_SHARED_STATE keeps them: an engine created over it with
 * FL_ENGINE_TAKEOVER starts where the parent was, a fill under way done
 * again); the regions (malloc'd), whose source is the parent's.
 */
struct engine_child {
	int uffd;
	int state_fd;
	int nregions;
	struct fl_region_desc *regions;
};

/*
 * Called on the engine thread that read the FORK event, engine lock held
 * (it must not call the engine): 0 if it took the child, else -errno and
 * the engine closes what it was given.
 */
typedef int engine_fork_fn(void *arg, struct engine_child *c);

/* fl_engine_create(), and an adopted uffd may ask for fork events. */
int engine_create_forking(const struct fl_engine_opts *opts,
			  engine_fork_fn *fn, void *arg,
			  struct fl_engine **out);

/*
 * Readahead and background restore as flags (FL_ENGINE_NO_PREFETCH,
 * FL_ENGINE_NO_BACKGROUND) say, from now on, for an engine created with
 * both off: 0, or -errno if no filler thread could start.
 */
int engine_prefetch_release(struct fl_engine *e, unsigned int flags);

/*
 * Is the client still there?  For a client of unknown pid (no pidfd to
 * watch): a ZEROPAGE of a page it has (it changes nothing: EEXIST), or
 * else of one no region describes (served as zeros anyway), fails with
 * ESRCH once its memory is gone, and the engine then finishes.  true
 * while it is there.
 */
bool engine_client_alive(struct fl_engine *e);

/*
 * A session that ends once its client is restored (CRIU's tasks) learns
 * it at once: efd (an eventfd the caller keeps open) is written 1 each
 * time the restore completes.  Set before fl_engine_start().
 */
void engine_notify_restored(struct fl_engine *e, int efd);

/* A FORK event's child, in e (loop.c, engine lock held exclusively). */
void engine_forked(struct fl_engine *e, int uffd);

#endif
