// SPDX-License-Identifier: Apache-2.0
/*
 * loop.c - the fault loop: read a batch of uffd messages with the engine
 * lock held exclusively, apply its events, then serve its faults (the
 * faulting chunk, through fill.c) with the lock shared.
 *
 * A fault on a page already filled is answered by a wake alone unless it
 * is proven fresh: by then another uffd may serve that address.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include "engine/core.h"
#include "engine/fill.h"
#include "engine/gate.h"
#include "engine/fork.h"
#include "engine/loop.h"
#include "engine/prefetch.h"
#include "engine/readahead.h"
#include "engine/stats.h"
#include "engine/track.h"
#include "kernel/proc.h"
#include "util/error.h"

static int queue_reserve(struct worker *w, int n)
{
	if (w->qhead && w->qhead == w->qlen)
		w->qhead = w->qlen = 0;
	if (w->qcap - w->qlen >= n)
		return 0;
	int cap = w->qcap ? w->qcap : MSG_BATCH;

	while (cap - w->qlen < n)
		cap *= 2;
	struct pending *q = realloc(w->q, sizeof(*q) * (size_t)cap);

	if (!q)
		return -ENOMEM;
	w->q = q;
	w->qcap = cap;
	return 0;
}

/* ---- events ------------------------------------------------------------- */

/* A region leaves the list: no queued work may name it any more. */
static void drop_region(void *arg, struct region *r)
{
	prefetch_forget(arg, r);
	region_free(r);
}

/*
 * After UNMAP or REMAP: regions may be shorter (no readahead past their
 * end) or new (split off: background restore starts over).
 */
static void regions_changed(struct fl_engine *e, unsigned int added)
{
	for (int i = 0; i < e->regions.n; i++)
		prefetch_clip(e, e->regions.v[i]);
	if (added != e->regions.added)
		prefetch_regions_changed(e);
}

/* Called with the engine lock held exclusively. */
static void apply_event(struct fl_engine *e, const struct uffd_msg *m)
{
	stat_add(&e->st.events, 1);
	unsigned int added = e->regions.added;

	switch (m->event) {
	case UFFD_EVENT_REMOVE:
		region_list_removed(&e->regions, m->arg.remove.start,
				    m->arg.remove.end);
		break;
	case UFFD_EVENT_UNMAP:
		e->remap_seq++;	/* reset.c: RESET pages may have moved */
		region_list_cut(&e->regions, m->arg.remove.start,
				m->arg.remove.end, drop_region, e);
		regions_changed(e, added);
		break;
	case UFFD_EVENT_REMAP:
		e->remap_seq++;
		region_list_move(&e->regions, m->arg.remap.from,
				 m->arg.remap.to, m->arg.remap.len,
				 drop_region, e);
		regions_changed(e, added);
		break;
	case UFFD_EVENT_FORK:
		/*
		 * To the fork handler (fork.c); without one, refused at
		 * create: should one come anyway, the child's uffd is not
		 * kept open in this process for ever.
		 */
		engine_forked(e, (int)m->arg.fork.ufd);
		break;
	default:
		break;
	}
}

/*
 * Read one batch: apply its events, queue its faults.  Returns messages read
 * (0 if none were pending) or -errno.
 */
static int read_msgs(struct fl_engine *e, struct worker *w)
{
	/* Room first: a message read from the kernel must never be lost. */
	int ret = queue_reserve(w, MSG_BATCH);

	if (ret < 0)
		return ret;
	atomic_fetch_add(&e->readers_waiting, 1);
	pthread_rwlock_wrlock(&e->lock);
	atomic_fetch_sub(&e->readers_waiting, 1);
	uint64_t seen = now_ns();
	int n = uffd_read(e->uffd, w->msgs, MSG_BATCH);
	uint64_t t = now_ns();

	for (int i = 0; i < n; i++) {
		const struct uffd_msg *m = &w->msgs[i];

		if (m->event != UFFD_EVENT_PAGEFAULT) {
			apply_event(e, m);
			continue;
		}
		bool wp = m->arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP;

		if (!wp) {	/* a first write is not a page to fill */
			stat_add(&e->st.faults, 1);
			prefetch_fault_read(e, t);
		}
		w->q[w->qlen++] = (struct pending){ m->arg.pagefault.address,
						     t, seen, wp };
	}
	pthread_rwlock_unlock(&e->lock);
	return n;
}

/* ---- faults ------------------------------------------------------------- */

static unsigned int woken_slot(uint64_t addr)
{
	return (unsigned int)(((addr >> 12) * 0x9e3779b97f4a7c15ull) >> 56) %
	       WOKEN_SLOTS;
}

/* Note that the fault on the page at addr was answered by a wake alone. */
static void wake_filled(struct fl_engine *e, uint64_t addr, uint64_t len)
{
	unsigned int i = woken_slot(addr);

	engine_wake(e, addr, len);
	pthread_mutex_lock(&e->woken_lock);
	e->woken[i].addr = addr;
	e->woken[i].ns = now_ns();	/* after the wake returned */
	pthread_mutex_unlock(&e->woken_lock);
}

/*
 * Did the read that brought p begin after a wake of its page?  Every
 * fault pending on that page when it was woken left the queue with the
 * wake, so p is a thread that touched the page afterwards and found it
 * empty, in memory registered with this uffd (its fault came here).
 */
static bool refault_proven(struct fl_engine *e, uint64_t addr,
			   const struct pending *p)
{
	unsigned int i = woken_slot(addr);
	bool yes;

	pthread_mutex_lock(&e->woken_lock);
	yes = e->woken[i].addr == addr && p->t_seen > e->woken[i].ns;
	if (yes)
		e->woken[i].addr = 0;
	pthread_mutex_unlock(&e->woken_lock);
	return yes;
}

/*
 * A fault on a page the engine filled, or found unmapped (gone).  Nearly
 * always a stale message: a second thread's fault on the page, or one
 * read before the fill that has woken its thread since.  By now the client
 * may have unmapped that memory and mapped new memory at the same address
 * that another uffd serves (the kernel lets any uffd of the process fill
 * it): so the answer is a wake alone, never a fill.  A thread that really
 * finds the page empty here faults again, after the wake: that fault is
 * filled from the source, as the region describes the page (it was
 * emptied without an event, or mapped anew and registered here again).
 * Zeros are only ever the answer to a REMOVE event.
 */
static int answer_filled(struct fl_engine *e, struct worker *w,
			 struct region *r, uint64_t pg, const struct pending *p)
{
	uint64_t addr = region_page_addr(r, pg);
	enum page_state s = region_get(r, pg);

	if (!refault_proven(e, addr, p) || !region_claim(r, pg, s)) {
		wake_filled(e, addr, r->page_size);
		return 0;
	}
	struct fill_ctx c = { .e = e, .w = w, .r = r, .pg = pg, .npg = 1,
			      .prior = s };

	return fill_run(&c);
}

/*
 * A fault on registered memory no region describes (a VMA grown by
 * mremap, a range left by MREMAP_DONTUNMAP): it has no snapshot data, so it
 * reads as that memory reads when new: zeros, or for shared memory whose
 * page cache has the page (a minor fault) that page; in hugetlb memory a
 * whole huge page.  As for a filled page, only a fault proven fresh is
 * filled (a stale one may be about memory another uffd serves now); the
 * first is answered by a wake.
 */
static int fill_unknown(struct fl_engine *e, const struct pending *p)
{
	uint64_t ps = proc_page_size(e->client_pid, p->addr);
	uint64_t page;
	int ret;

	if (ps < 4096 || ps > HUGE_2M)
		ps = 4096;
	page = p->addr & ~(ps - 1);
	if (!refault_proven(e, page, p)) {
		wake_filled(e, page, ps);
		return 0;
	}
	ret = fill_zeros(e, page, ps);
	if (ret < 0 && ret != -EAGAIN && ret != -ESRCH)
		engine_wake(e, page, ps);
	return ret;
}

/*
 * Serve one fault: its chunk, then make sure its thread is woken.  Other
 * faults already waiting behind it (queued > 1: several client threads
 * wait on this engine at once) make it fill the largest chunk.
 */
static int serve_fault(struct fl_engine *e, struct worker *w,
		       const struct pending *p, int queued)
{
	int ret = 0;

	if (p->wp)
		return track_wp_fault(e, p->addr);
	pthread_rwlock_rdlock(&e->lock);
	struct region *r = region_find(&e->regions, p->addr);

	if (!r) {
		/*
		 * Registered memory no region describes (a VMA grown by
		 * mremap, a range left by MREMAP_DONTUNMAP): it has no
		 * snapshot data, so it reads as zeros, as anonymous memory
		 * does.  A bare wake would only make the thread fault again,
		 * forever.
		 */
		int ret = fill_unknown(e, p);

		pthread_rwlock_unlock(&e->lock);
		return ret == -EAGAIN || ret == -ESRCH ? ret : 0;
	}
	uint64_t pg = region_page(r, p->addr);
	uint64_t per = readahead_fault_pages(e, r, queued);
	uint64_t first = pg & ~(per - 1);
	uint64_t last = first + per < r->npages ? first + per : r->npages;

	enum page_state s = region_get(r, pg);

	if (s == PG_PRESENT || s == PG_GONE)
		ret = answer_filled(e, w, r, pg, p);
	else
		ret = engine_fill_range(&(struct fill_ctx){ .e = e, .w = w,
					.r = r, .how = FILL_REMOVED },
					first, last);
	if (ret == 0 && e->rec)
		trace_add(e->rec, r->src_off + (first << r->page_shift),
			  (last - first) << r->page_shift);
	if (ret == 0)
		readahead_after_fault(e, r, pg, first, last);
	/* r may be gone once the lock is dropped: keep what is needed. */
	uint64_t pgaddr = region_page_addr(r, pg), psz = r->page_size;

	pthread_rwlock_unlock(&e->lock);
	if (ret == -ENOMEM) {
		/*
		 * No page to fill it with (an empty hugetlb pool): SIGBUS, as
		 * the kernel itself answers such a fault.  Waking the thread
		 * would only make it fault again, forever.
		 */
		uint64_t done;

		fl_err(ret, "0x%llx: out of memory (hugetlb pool empty?)",
		       (unsigned long long)p->addr);
		note_failure(e);
		stat_add(&e->st.pages_poisoned, 1);
		engine_fill(e, UFFD_OP_POISON, pgaddr, 0, psz, &done);
		ret = 0;
	} else if (ret == 0) {
		stats_record_latency(&e->st, now_ns() - p->t_read);
	} else if (ret != -EAGAIN && ret != -ESRCH) {
		/* VMA gone (ENOENT) or a bug: never leave the thread asleep. */
		engine_wake(e, pgaddr, psz);
		ret = 0;
	}
	return ret;
}

/* Read what is pending and serve it all.  Returns messages read or -errno. */
int engine_pump(struct fl_engine *e, struct worker *w)
{
	int total = read_msgs(e, w);

	if (total < 0)
		return total;
	while (w->qhead < w->qlen) {
		int ret = serve_fault(e, w, &w->q[w->qhead],
				      w->qlen - w->qhead);

		if (ret == -EAGAIN) {
			/* An event is pending: apply it, then retry. */
			int n = read_msgs(e, w);

			if (n < 0)
				return n;
			if (n == 0)
				sched_yield();
			total += n;
			continue;
		}
		w->qhead++;
		if (ret == -ESRCH) {
			w->qhead = w->qlen = 0;
			return -ESRCH;
		}
	}
	w->qhead = w->qlen = 0;
	return total;
}

void *engine_thread(void *arg)
{
	struct worker *w = arg;
	struct fl_engine *e = w->e;

	while (!atomic_load(&e->stopping) && !atomic_load(&e->finished)) {
		struct pollfd pfd[2] = {
			{ .fd = e->uffd, .events = POLLIN },
			{ .fd = e->stopfd, .events = POLLIN },
		};

		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[1].revents)
			break;
		if (pfd[0].revents & (POLLERR | POLLHUP | POLLNVAL)) {
			engine_finish(e);
			break;
		}
		if (engine_pump(e, w) == -ESRCH)
			break;
	}
	return NULL;
}
