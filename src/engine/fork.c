// SPDX-License-Identifier: Apache-2.0
/*
 * fork.c - a FORK event: the child's uffd and a copy of the parent's
 * regions and page states, handed to the engine's fork handler (fork.h).
 *
 * Decision: the states are copied when the event is read, under the
 * engine lock held exclusively: the kernel has copied the parent's pages
 * by then, so a page PRESENT here is there in the child; a fill under way
 * (BUSY) is done again by the child's engine (EEXIST tells it the page
 * came along); a REMOVED page reads zeros in both.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/core.h"
#include "engine/fork.h"
#include "engine/gate.h"
#include "engine/prefetch.h"
#include "engine/region.h"
#include "util/error.h"
#include "util/io.h"

/* The regions' descriptions and a memfd of their states, in order. */
static int snapshot(struct fl_engine *e, struct fl_engine_child *c)
{
	uint64_t pages = 0, at = 0;
	int ret = 0;

	c->regions = calloc(e->regions.n ? e->regions.n : 1,
			    sizeof(*c->regions));
	if (!c->regions)
		return -ENOMEM;
	for (int i = 0; i < e->regions.n; i++) {
		const struct region *r = e->regions.v[i];

		c->regions[i] = (struct fl_region_desc){
			.addr = r->addr, .len = r->len,
			.page_size = r->page_size, .src_offset = r->src_off };
		pages += r->npages;
	}
	c->nregions = e->regions.n;
	c->state_fd = memfd_create("faultline-fork-state", MFD_CLOEXEC);
	if (c->state_fd < 0 || ftruncate(c->state_fd, (off_t)(pages ? pages : 1)))
		ret = -errno;
	for (int i = 0; i < e->regions.n && !ret; i++) {
		const struct region *r = e->regions.v[i];

		/* Atomic bytes, read as plain ones: the lock keeps them still. */
		ret = pwrite_full(c->state_fd, (const void *)r->state,
				  r->npages, at);
		at += r->npages;
	}
	return ret;
}

int fl_engine_prefetch_release(struct fl_engine *e, unsigned int flags)
{
	pthread_mutex_lock(&e->pf.lock);
	e->pf.readahead = !(flags & FL_ENGINE_NO_PREFETCH);
	e->pf.background = !(flags & FL_ENGINE_NO_BACKGROUND);
	pthread_cond_broadcast(&e->pf.cond);
	pthread_mutex_unlock(&e->pf.lock);
	return e->nthreads ? prefetch_start(e) : 0;
}

int fl_engine_client_alive(struct fl_engine *e)
{
	uint64_t addr = 0, done;
	bool found = false;

	/* The engine's state (core.h), not engine.c's API: no call back up. */
	if (atomic_load(&e->killed) || atomic_load(&e->finished))
		return false;
	pthread_rwlock_rdlock(&e->lock);
	for (int i = 0; i < e->regions.n && !found; i++) {
		const struct region *r = e->regions.v[i];

		for (uint64_t pg = 0; pg < r->npages && !found; pg++) {
			if (region_get(r, pg) != PG_PRESENT ||
			    r->page_size != 4096)
				continue;
			addr = region_page_addr(r, pg);
			found = true;
		}
	}
	/*
	 * None yet: a page no region describes, which this engine would
	 * serve as zeros anyway (fill_unknown), so a ZEROPAGE there is
	 * right whatever it is (ENOENT where nothing is mapped).
	 */
	if (!found)
		addr = 1u << 20;
	while (!found && !(found = !region_find(&e->regions, addr)))
		addr += 1u << 20;
	int ret = engine_fill(e, UFFD_OP_ZEROPAGE, addr, 0, 4096, &done);

	pthread_rwlock_unlock(&e->lock);
	if (ret == -ESRCH && !atomic_load(&e->detached)) {
		engine_finish(e);
		return false;
	}
	return true;
}

void engine_forked(struct fl_engine *e, int uffd)
{
	struct fl_engine_child c = { .uffd = uffd, .state_fd = -1 };
	int ret = e->on_fork ? snapshot(e, &c) : -ENOTSUP;

	if (ret == 0)
		ret = e->on_fork(e->fork_arg, &c);
	if (ret == 0)
		return;
	/*
	 * Nobody serves the child: its registered memory is its own once
	 * the uffd closes (never filled wrong, but zeros where the parent
	 * had lazy pages).  Say so.
	 */
	fl_err(ret, "a forked child's memory is not served: %s",
	       strerror(-ret));
	close(uffd);
	if (c.state_fd >= 0)
		close(c.state_fd);
	free(c.regions);
}

void fl_engine_notify_restored(struct fl_engine *e, int efd)
{
	e->restored_fd = efd;
}
