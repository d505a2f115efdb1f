// SPDX-License-Identifier: Apache-2.0
/*
 * track.c - write tracking for reset to the snapshot: which pages of an
 * in-process engine's regions were written since they were filled.
 *
 * Decision: the kernel's record first.  With UFFD_FEATURE_WP_ASYNC the
 * kernel resolves the first write to a write-protected page itself and
 * PAGEMAP_SCAN reads the written ranges and re-protects them in one walk
 * (Linux 6.7); without it each first write is a write-protect fault the
 * engine's threads record in the region's dirty map and resolve.  Either
 * way a page is filled write-protected (gate.c), so "written" means
 * "differs from the snapshot"; what the kernel cannot know (pages filled
 * before tracking began, pages the client discarded) is marked in the
 * dirty map, so the baseline stays the snapshot.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/gate.h"
#include "engine/track.h"
#include "kernel/proc.h"
#include "util/error.h"

#define SCAN_VEC	512	/* ranges read per PAGEMAP_SCAN call */

static int runs_add(struct runs *rs, uint64_t addr, uint64_t len)
{
	if (rs->n && rs->v[rs->n - 1].addr + rs->v[rs->n - 1].len == addr) {
		rs->v[rs->n - 1].len += len;
		return 0;
	}
	if (rs->n == rs->cap) {
		size_t cap = rs->cap ? rs->cap * 2 : 256;
		struct run *v = realloc(rs->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		rs->v = v;
		rs->cap = cap;
	}
	rs->v[rs->n++] = (struct run){ addr, len };
	return 0;
}

static int run_cmp(const void *a, const void *b)
{
	const struct run *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

void runs_merge(struct runs *rs)
{
	size_t out = 0;

	if (!rs->n)
		return;
	qsort(rs->v, rs->n, sizeof(*rs->v), run_cmp);
	for (size_t i = 1; i < rs->n; i++) {
		struct run *last = &rs->v[out];
		uint64_t end = last->addr + last->len;

		if (rs->v[i].addr <= end) {
			uint64_t e2 = rs->v[i].addr + rs->v[i].len;

			if (e2 > end)
				last->len = e2 - last->addr;
		} else {
			rs->v[++out] = rs->v[i];
		}
	}
	rs->n = out + 1;
}

/* The written ranges of r from the kernel, re-protected as they are read. */
static int scan_written(struct fl_engine *e, struct region *r,
			struct runs *rs)
{
	struct page_region vec[SCAN_VEC];
	uint64_t at = r->addr, end = r->addr + r->len;

	while (at < end) {
		uint64_t next = end;
		int n = proc_scan_written(e->scan_fd, at, end, vec, SCAN_VEC,
					  true, &next);

		if (n < 0)
			return fl_err(n, "reset: PAGEMAP_SCAN of 0x%llx+%llu: %s",
				      (unsigned long long)at,
				      (unsigned long long)(end - at),
				      strerror(-n));
		for (int i = 0; i < n; i++)
			if (runs_add(rs, vec[i].start,
				     vec[i].end - vec[i].start) < 0)
				return -ENOMEM;
		if (next <= at)
			break;
		at = next;
	}
	return 0;
}

/* Pages of r to drop whatever the kernel says (the dirty map), cleared. */
static int take_dirty(struct region *r, struct runs *rs)
{
	for (uint64_t i = 0; atomic_load(&r->ndirty) && i < r->npages; i++) {
		if (!atomic_load_explicit(&r->dirty[i], memory_order_relaxed) ||
		    !atomic_exchange(&r->dirty[i], 0))
			continue;
		atomic_fetch_sub(&r->ndirty, 1);
		if (region_get(r, i) == PG_GONE)	/* no mapping to drop */
			continue;
		if (runs_add(rs, region_page_addr(r, i), r->page_size) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* Without tracking: every page filled or discarded. */
static int take_filled(struct region *r, struct runs *rs)
{
	for (uint64_t i = 0; i < r->npages; i++) {
		enum page_state s = region_get(r, i);

		if (s == PG_MISSING || s == PG_GONE || s == PG_RESET)
			continue;
		if (runs_add(rs, region_page_addr(r, i), r->page_size) < 0)
			return -ENOMEM;
	}
	return 0;
}

int track_collect(struct fl_engine *e, struct region *r, struct runs *rs)
{
	int mode = atomic_load(&e->track);

	if (!mode || !r->dirty)
		return take_filled(r, rs);
	if (mode == FL_TRACK_WP_ASYNC) {
		int ret = scan_written(e, r, rs);

		if (ret < 0)
			return ret;
	}
	return take_dirty(r, rs);
}

int track_wp_fault(struct fl_engine *e, uint64_t addr)
{
	pthread_rwlock_rdlock(&e->lock);
	struct region *r = region_find(&e->regions, addr);
	uint64_t ps = r ? r->page_size : 4096;
	uint64_t page = addr & ~(ps - 1);

	/* Marked before the write can happen: a reset from now on sees it. */
	if (r)
		region_set_dirty(r, region_page(r, page));
	pthread_rwlock_unlock(&e->lock);
	/* Counted first: the writer may read the stats once it is woken. */
	stat_add(&e->st.wp_faults, 1);
	/* Unprotected, and its writer woken, even if no region knows it. */
	int ret = engine_unprotect(e, page, ps);

	if (ret == -EAGAIN || ret == -ESRCH) {
		atomic_fetch_sub(&e->st.wp_faults, 1);	/* not resolved */
		return ret;
	}
	if (ret < 0)	/* a bug or a page gone: never leave it asleep */
		engine_wake(e, page, ps);
	return 0;
}

/* ---- starting ------------------------------------------------------------ */

/*
 * Does PAGEMAP_SCAN work here, on this engine's write-protected memory
 * (asked once its regions are registered for write-protection)?  A
 * kernel without the ioctl says ENOTTY, one without WP_ASYNC EINVAL.
 * Opens /proc/self/pagemap for it.  0 or -errno.
 */
static int scan_works(struct fl_engine *e)
{
	struct page_region v;
	uint64_t next;

	if (e->scan_fd < 0)
		e->scan_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (e->scan_fd < 0)
		return -errno;
	if (!e->regions.n)
		return 0;
	const struct region *r = e->regions.v[0];
	int ret = proc_scan_written(e->scan_fd, r->addr,
				    r->addr + r->page_size, &v, 1, false, &next);

	return ret < 0 ? ret : 0;
}

/* The mechanism to use, before any region is registered for it. */
static int choose(struct fl_engine *e)
{
	if (e->adopted || (e->client_pid != 0 && e->client_pid != getpid()))
		return fl_err(-EOPNOTSUPP, "track writes: the memory is "
			      "another process's (only an in-process engine "
			      "can drop its pages at a reset)");
	for (int i = 0; i < e->regions.n; i++) {
		struct region *r = e->regions.v[i];

		if (r->memfd >= 0 || r->cache)
			return fl_err(-EOPNOTSUPP, "track writes: region "
				      "0x%llx is shared memory "
				      "(FL_REGION_MINOR, or a clone): a "
				      "reset would keep what its page cache "
				      "holds",
				      (unsigned long long)r->addr);
		if (r->page_size >= HUGE_2M &&
		    !(e->features & UFFD_FEATURE_WP_HUGETLBFS_SHMEM))
			return fl_err(-EOPNOTSUPP, "track writes: region "
				      "0x%llx is hugetlb, and this kernel "
				      "cannot write-protect hugetlb pages "
				      "(no UFFD_FEATURE_WP_HUGETLBFS_SHMEM)",
				      (unsigned long long)r->addr);
	}
	return e->features & UFFD_FEATURE_WP_ASYNC ? FL_TRACK_WP_ASYNC :
	       FL_TRACK_WP_SYNC;
}

/* Register every region for write-protection too (MISSING stays). */
static int register_wp(struct fl_engine *e)
{
	for (int i = 0; i < e->regions.n; i++) {
		struct region *r = e->regions.v[i];
		int ret = uffd_register(e->uffd, r->addr, r->len,
					UFFDIO_REGISTER_MODE_MISSING |
					UFFDIO_REGISTER_MODE_WP, NULL);

		if (ret < 0)
			return fl_err(ret, "track writes: cannot register "
				      "0x%llx+%llu for write-protection: %s",
				      (unsigned long long)r->addr,
				      (unsigned long long)r->len,
				      strerror(-ret));
		if ((ret = region_track(r)) < 0)
			return fl_err(ret, "track writes: out of memory");
	}
	return 0;
}

int fl_engine_track_writes(struct fl_engine *e)
{
	if (!e)
		return fl_err(-EINVAL, "track writes: no engine");
	pthread_rwlock_wrlock(&e->lock);	/* no fill under way */
	int mode = atomic_load(&e->track);

	if (mode)
		goto out;
	mode = choose(e);
	if (mode > 0) {
		int ret = register_wp(e);

		mode = ret < 0 ? ret : mode;
	}
	if (mode == FL_TRACK_WP_ASYNC) {
		int ret = scan_works(e);

		if (ret < 0)
			mode = fl_err(-EOPNOTSUPP, "track writes: the uffd has "
				      "WP_ASYNC but PAGEMAP_SCAN fails (%s): "
				      "create the engine with "
				      "FL_ENGINE_TRACK_SYNC", strerror(-ret));
	}
	if (mode > 0) {
		atomic_store(&e->use_move, false);	/* MOVE has no WP mode */
		atomic_store(&e->track, mode);
		atomic_store(&e->st.write_tracking, (uint64_t)mode);
	}
out:
	pthread_rwlock_unlock(&e->lock);
	return mode;
}
