// SPDX-License-Identifier: Apache-2.0
/*
 * reset.c - take pages back to the snapshot: mark them RESET, drop them,
 * mark them MISSING, so that the next touch faults them in anew.
 *
 * Decision: the drop (MADV_DONTNEED) raises the same REMOVE event as a
 * client's balloon, which means zeros; so the pages are marked RESET
 * first, under the engine lock held exclusively (no fill under way, none
 * can claim them), and REMOVE leaves RESET pages alone.  The drop itself
 * runs without the lock: in-process it waits until a handler thread has
 * read its event, which needs the lock.  The state machine is in
 * region.h.
 *
 * Decision: RESET pages turn MISSING only when the last reset under way
 * ends, and then in every region, not only in the range that ended: a
 * REMAP applied while the drop waited may have carried RESET pages to
 * another address, and an end that looked only at its own range would
 * leave them RESET (never filled) with their faults asleep for good.
 * fl_engine_reset() walks only its own runs when it can tell nothing of
 * the kind happened (end_runs()).
 *
 * Decision: fl_engine_reset() drops one contiguous run per range, never a
 * page at a time (each drop is a TLB flush, an IPI per CPU the process
 * runs on).  Each MADV_DONTNEED raises a REMOVE event an engine thread
 * must read before the call goes on, a round trip that costs more than
 * the flush (bench reset: 43 us a page, 1.7 without the event), so small
 * runs are moved out (UFFDIO_MOVE, no event) into a scratch area emptied by
 * one drop per RESET_SCRATCH bytes; the rest go DROP_BATCH ranges per
 * process_madvise() where the kernel takes MADV_DONTNEED for this
 * process (Linux 6.13).  docs/architecture.md, "Write tracking and reset".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "engine/fill.h"
#include "engine/gate.h"
#include "engine/prefetch.h"
#include "engine/reset.h"
#include "engine/track.h"
#include "engine/worker.h"
#include "util/error.h"

#define DROP_BATCH	1024	/* ranges per process_madvise (UIO_MAXIOV) */
#define MOVE_RUN	(64u << 10)	/* runs moved out rather than dropped */

int64_t engine_reset_begin(struct fl_engine *e, uint64_t addr, uint64_t len)
{
	uint64_t n = 0;

	pthread_rwlock_wrlock(&e->lock);
	e->resets++;
	e->reset_seq++;
	for (int i = 0; i < e->regions.n; i++)
		n += region_reset_begin(e->regions.v[i], addr, addr + len);
	pthread_rwlock_unlock(&e->lock);
	return (int64_t)n;
}

/*
 * RESET pages become MISSING: those of rs's runs, or with rs NULL every
 * one of every region; each region that had some is woken once (a fault
 * on a RESET page was left asleep).  Engine lock held exclusively.
 * Returns the pages changed.
 */
static uint64_t end_pages(struct fl_engine *e, const struct runs *rs)
{
	uint64_t n = 0;

	for (int j = 0; j < e->regions.n; j++) {
		struct region *r = e->regions.v[j];
		uint64_t k = rs ? 0 : region_reset_end(r, r->addr,
						      r->addr + r->len);

		for (size_t i = 0; rs && i < rs->n; i++)
			k += region_reset_end(r, rs->v[i].addr,
					      rs->v[i].addr + rs->v[i].len);
		if (k)
			engine_wake(e, r->addr, r->len);
		n += k;
	}
	return n;
}

int64_t engine_reset_end(struct fl_engine *e, uint64_t addr, uint64_t len)
{
	uint64_t n = 0;

	(void)addr;
	(void)len;
	pthread_rwlock_wrlock(&e->lock);
	if (e->resets > 0 && --e->resets == 0)
		n = end_pages(e, NULL);
	pthread_rwlock_unlock(&e->lock);
	if (n)	/* missing again: background restore is not done */
		prefetch_regions_changed(e);
	return (int64_t)n;
}

static int drop_one(const struct run *r)
{
	if (madvise((void *)(uintptr_t)r->addr, r->len, MADV_DONTNEED) == 0)
		return 0;
	int err = -errno;

	return fl_err(err, "reset 0x%llx+%llu: MADV_DONTNEED: %s",
		      (unsigned long long)r->addr, (unsigned long long)r->len,
		      strerror(-err));
}

static bool in_process(const struct fl_engine *e)
{
	return !e->adopted && (e->client_pid == 0 || e->client_pid == getpid());
}

int64_t engine_reset_range(struct fl_engine *e, uint64_t addr, uint64_t len)
{
	if (!in_process(e))
		return fl_err(-EOPNOTSUPP, "reset: the memory is another "
			      "process's (only an in-process engine can drop it)");
	int64_t n = engine_reset_begin(e, addr, len);
	int err = drop_one(&(struct run){ addr, len });

	/* Not dropped: still mapped, a fill meets EEXIST (present). */
	engine_reset_end(e, addr, len);
	return err < 0 ? err : n;
}

/*
 * What a reset of runs saw when it began: whether it was alone, and the
 * counts that tell, at its end, whether another reset or a REMAP or
 * UNMAP came meanwhile.
 */
struct reset_mark {
	bool alone;
	uint64_t reset_seq, remap_seq;
};

/* Every run of rs becomes RESET, under one hold of the lock. */
static int64_t begin_runs(struct fl_engine *e, const struct runs *rs,
			  struct reset_mark *m)
{
	uint64_t n = 0;

	pthread_rwlock_wrlock(&e->lock);
	m->alone = e->resets == 0;
	e->resets++;
	m->reset_seq = ++e->reset_seq;
	m->remap_seq = e->remap_seq;
	for (size_t i = 0; i < rs->n; i++)
		for (int j = 0; j < e->regions.n; j++)
			n += region_reset_begin(e->regions.v[j], rs->v[i].addr,
						rs->v[i].addr + rs->v[i].len);
	pthread_rwlock_unlock(&e->lock);
	return (int64_t)n;
}

/*
 * End the reset of rs.  Alone from its beginning to its end, with no
 * REMAP or UNMAP meanwhile, its RESET pages are where its runs say: only
 * those are made MISSING (a walk of the runs, not of every page of every
 * region).  Otherwise engine_reset_end() ends them
 * wherever they went, and any other reset's with them.
 */
static void end_runs(struct fl_engine *e, const struct runs *rs,
		     const struct reset_mark *m)
{
	uint64_t n = 0;

	pthread_rwlock_wrlock(&e->lock);
	if (!m->alone || e->resets != 1 || e->reset_seq != m->reset_seq ||
	    e->remap_seq != m->remap_seq) {
		pthread_rwlock_unlock(&e->lock);
		engine_reset_end(e, 0, 0);
		return;
	}
	e->resets = 0;
	n = end_pages(e, rs);
	pthread_rwlock_unlock(&e->lock);
	if (n)	/* missing again: background restore is not done */
		prefetch_regions_changed(e);
}

/*
 * Ranges [i, i + n) of rs in one process_madvise(): 0 when all were
 * dropped, else -errno (the caller drops them one by one).
 */
static int drop_batch(int pidfd, const struct runs *rs, size_t i, size_t n)
{
	struct iovec iov[DROP_BATCH];
	uint64_t want = 0;

	for (size_t k = 0; k < n; k++) {
		iov[k].iov_base = (void *)(uintptr_t)rs->v[i + k].addr;
		iov[k].iov_len = rs->v[i + k].len;
		want += rs->v[i + k].len;
	}
	long got = syscall(SYS_process_madvise, pidfd, iov, n, MADV_DONTNEED,
			   0u);

	if (got < 0)
		return -errno;
	return (uint64_t)got == want ? 0 : -EAGAIN;
}

/*
 * The scratch area small runs are moved into (e->scratch, RESET_SCRATCH
 * bytes, registered with the engine's uffd as MOVE wants its target to
 * be): mapped at the first reset that can use it.  NULL if it cannot.
 */
static void *scratch(struct fl_engine *e)
{
	if (e->scratch || !(e->features & UFFD_FEATURE_MOVE))
		return e->scratch;
	void *p = mmap(NULL, RESET_SCRATCH, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	madvise(p, RESET_SCRATCH, MADV_NOHUGEPAGE);
	if (uffd_register(e->uffd, (uintptr_t)p, RESET_SCRATCH,
			  UFFDIO_REGISTER_MODE_MISSING, NULL) < 0) {
		munmap(p, RESET_SCRATCH);
		return NULL;
	}
	e->scratch = p;
	return p;
}

/*
 * Move the small runs of rs (4 KiB pages, at most MOVE_RUN bytes) out
 * into the scratch area, which one MADV_DONTNEED empties whenever it is
 * full: a REMOVE event (a round trip through an engine thread) per
 * RESET_SCRATCH bytes instead of one per run.  UFFDIO_MOVE raises no
 * event and leaves the source empty, as a drop would.  moved[i] says
 * which runs went; the others (or a run MOVE refused: a page shared
 * after a fork, a pte it cannot take) are the caller's to drop.
 */
static void move_out(struct fl_engine *e, const struct runs *rs, bool *moved)
{
	uint8_t *s = scratch(e);
	uint64_t used = 0, done;

	for (size_t i = 0; s && i < rs->n; i++) {
		const struct run *r = &rs->v[i];

		if (r->len > MOVE_RUN)	/* one drop is cheaper (hugetlb too) */
			continue;
		if (used + r->len > RESET_SCRATCH) {
			madvise(s, used, MADV_DONTNEED);
			used = 0;
		}
		int ret = uffd_fill(e->uffd, UFFD_OP_MOVE, (uintptr_t)s + used,
				    r->addr, r->len,
				    UFFDIO_MOVE_MODE_DONTWAKE |
				    UFFDIO_MOVE_MODE_ALLOW_SRC_HOLES, &done);

		used += done;
		moved[i] = ret == 0;
	}
	if (s && used)
		madvise(s, used, MADV_DONTNEED);
}

/* Drop every run of rs: 0, or the first failure (-errno). */
static int drop_runs(const struct runs *rs)
{
	static atomic_bool no_batch;	/* this kernel refused it once */
	int pidfd = atomic_load(&no_batch) ? -1 :
		    (int)syscall(SYS_pidfd_open, getpid(), 0u);
	int ret = 0;

	for (size_t i = 0; i < rs->n; i += DROP_BATCH) {
		size_t n = rs->n - i < DROP_BATCH ? rs->n - i : DROP_BATCH;
		int err = pidfd >= 0 ? drop_batch(pidfd, rs, i, n) : -EINVAL;

		if (err == -EINVAL || err == -ENOSYS || err == -EPERM)
			atomic_store(&no_batch, true);
		/* Not all of them: each again (a second drop is harmless). */
		for (size_t k = 0; err < 0 && k < n; k++) {
			int r = drop_one(&rs->v[i + k]);

			ret = ret ? ret : r;
		}
	}
	if (pidfd >= 0)
		close(pidfd);
	return ret;
}

/* Small runs moved out, the rest dropped: 0, or -errno. */
static int drop(struct fl_engine *e, const struct runs *rs)
{
	bool *moved = calloc(rs->n, sizeof(*moved));
	struct runs rest = { 0 };
	int ret = 0;

	if (!moved)
		return drop_runs(rs);
	move_out(e, rs, moved);
	rest.v = malloc(rs->n * sizeof(*rest.v));
	for (size_t i = 0; rest.v && i < rs->n; i++)
		if (!moved[i])
			rest.v[rest.n++] = rs->v[i];
	ret = drop_runs(rest.v ? &rest : rs);
	free(rest.v);
	free(moved);
	return ret;
}

/* Fill every run of rs again from the snapshot (FL_RESET_EAGER). */
static int refill_runs(struct fl_engine *e, const struct runs *rs)
{
	if (!e->reset_worker && !(e->reset_worker = engine_worker(e)))
		return fl_err(-ENOMEM, "reset: cannot map a staging buffer");
	int ret = 0;

	pthread_rwlock_rdlock(&e->lock);
	for (size_t i = 0; i < rs->n && !ret; i++) {
		uint64_t a = rs->v[i].addr, end = a + rs->v[i].len;
		struct region *r;

		/* A run may span regions that touch; none: unmapped since. */
		for (; a < end && (r = region_find(&e->regions, a)); ) {
			uint64_t last = end < r->addr + r->len ? end :
					r->addr + r->len;
			struct fill_ctx job = { .e = e, .w = e->reset_worker,
						.r = r };
			int err = engine_fill_range(&job, region_page(r, a),
						    region_page(r, last - 1) + 1);

			/* Unmapped, or an event first: left to their faults. */
			if (err < 0 && err != -ENOENT && err != -EAGAIN)
				ret = err;
			a = last;
		}
	}
	pthread_rwlock_unlock(&e->lock);
	return ret;
}

static int reset_locked(struct fl_engine *e, unsigned int flags)
{
	struct runs rs = { 0 };
	uint64_t t0 = now_ns();
	int ret = 0;

	pthread_rwlock_rdlock(&e->lock);
	for (int i = 0; i < e->regions.n && !ret; i++) {
		const struct region *r = e->regions.v[i];

		ret = r->memfd < 0 && !r->cache ? track_collect(e, e->regions.v[i], &rs) :
		      fl_err(-EOPNOTSUPP, "reset: region 0x%llx is shared "
			     "memory (FL_REGION_MINOR, or a clone): its "
			     "page cache would keep what was written",
			     (unsigned long long)r->addr);
	}
	pthread_rwlock_unlock(&e->lock);
	runs_merge(&rs);
	uint64_t t1 = now_ns();
	int64_t n = 0;

	if (ret == 0 && rs.n) {
		struct reset_mark m;

		n = begin_runs(e, &rs, &m);
		ret = drop(e, &rs);
		end_runs(e, &rs, &m);
	}
	uint64_t t2 = now_ns();

	if (ret == 0 && rs.n && (flags & FL_RESET_EAGER))
		ret = refill_runs(e, &rs);
	uint64_t t3 = now_ns();

	stat_add(&e->st.resets, 1);
	stat_add(&e->st.pages_reset, (uint64_t)n);
	stat_add(&e->st.reset_runs, rs.n);
	stat_add(&e->st.reset_scan_ns, t1 - t0);
	stat_add(&e->st.reset_drop_ns, t2 - t1);
	if (flags & FL_RESET_EAGER)
		stat_add(&e->st.reset_refill_ns, t3 - t2);
	free(rs.v);
	return ret < 0 ? ret : (int)n;
}

int fl_engine_reset(struct fl_engine *e, unsigned int flags)
{
	if (!e)
		return fl_err(-EINVAL, "reset: no engine");
	if (flags & ~FL_RESET_EAGER)
		return fl_err(-EINVAL, "reset: unknown flags 0x%x",
			      flags & ~FL_RESET_EAGER);
	if (!in_process(e))
		return fl_err(-EOPNOTSUPP, "reset: the memory is another "
			      "process's (only an in-process engine can drop "
			      "it)");
	if (atomic_load(&e->detached))
		return fl_err(-ESRCH, "reset: the engine is detached");
	if (!e->nthreads || atomic_load(&e->stopping))
		return fl_err(-EINVAL, "reset: the engine's threads are not "
			      "running (fl_engine_start): each drop waits for "
			      "one of them to read its REMOVE event");
	pthread_mutex_lock(&e->reset_lock);
	int ret = reset_locked(e, flags);

	pthread_mutex_unlock(&e->reset_lock);
	return ret;
}
