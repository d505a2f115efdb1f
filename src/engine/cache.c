// SPDX-License-Identifier: Apache-2.0
/*
 * cache.c - a snapshot cache: the snapshot's pages once per host in a
 * memfd that clones map privately, filled from any source on demand.
 *
 * Decisions: the fill map (a byte per page: empty, busy, filled, changed
 * by compare-and-swap) is the only truth of what is filled, since anyone
 * who can map the memfd can plant zero pages in its holes: presence in
 * the page cache proves nothing.  A page is marked filled only after all
 * of its bytes are in the memfd, so a CONTINUE never maps a page whose
 * bytes are incomplete; a thread that finds a page busy waits for that
 * fill instead of reading the source again.  Bytes go in by UFFDIO_COPY
 * into the cache's own MISSING-registered shared mapping (measured faster
 * than pwrite: docs/clones.md); a page planted meanwhile makes the COPY
 * fail with EEXIST, and its bytes are then written with pwrite.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/cache.h"
#include "kernel/uffd.h"
#include "source/source.h"
#include "util/error.h"
#include "util/zero.h"

#define CPAGE		4096ull
#define CACHE_FLAGS	FL_CACHE_PWRITE

/* The cache's own uffd over its shared mapping, or -1 (pwrite then). */
static int scache_uffd(struct fl_cache *c)
{
	uint64_t feat = 0;
	int fd = uffd_create(UFFD_FEATURE_MISSING_SHMEM, &feat);

	if (fd < 0)
		return -1;
	if (!(feat & UFFD_FEATURE_MISSING_SHMEM) ||
	    uffd_register(fd, (uintptr_t)c->map, c->size,
			  UFFDIO_REGISTER_MODE_MISSING, NULL) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int scache_open(struct fl_cache *c)
{
	c->memfd = memfd_create("faultline-cache", MFD_CLOEXEC);
	if (c->memfd < 0)
		return fl_err(-errno, "cache of %s: memfd_create: %s",
			      c->src->desc, strerror(errno));
	/* Clients of another uid can never open it for writing. */
	if (ftruncate(c->memfd, (off_t)c->size) < 0 ||
	    fchmod(c->memfd, 0444) < 0)
		return fl_err(-errno, "cache of %s (%llu bytes): %s",
			      c->src->desc, (unsigned long long)c->size,
			      strerror(errno));
	void *m = mmap(NULL, c->size, PROT_READ | PROT_WRITE, MAP_SHARED,
		       c->memfd, 0);

	if (m == MAP_FAILED)
		return fl_err(-errno, "cache of %s: mmap: %s", c->src->desc,
			      strerror(errno));
	c->map = m;
	/* Never in a child's copy of this process: the fills are ours. */
	madvise(m, c->size, MADV_DONTFORK);
	c->fill = calloc(c->npages, 1);
	if (!c->fill)
		return fl_err(-ENOMEM, "cache of %s: out of memory",
			      c->src->desc);
	c->uffd = c->flags & FL_CACHE_PWRITE ? -1 : scache_uffd(c);
	return 0;
}

int fl_cache_create(struct fl_source *src, const struct fl_cache_opts *opts,
		    struct fl_cache **out)
{
	struct fl_cache_opts o = { 0 };
	struct fl_cache *c;
	int ret;

	if (!src || !out)
		return fl_err(-EINVAL, "cache_create: missing argument");
	if (opts)
		o = *opts;
	if ((o.flags & ~CACHE_FLAGS) || o.reserved32 ||
	    !is_zero(o.reserved, sizeof(o.reserved)))
		return fl_err(-EINVAL, "cache_create: unknown flags or "
			      "reserved options not zero");
	if (!src->size)
		return fl_err(-EINVAL, "cache of %s: the source is empty",
			      src->desc);
	c = calloc(1, sizeof(*c));
	if (!c)
		return fl_err(-ENOMEM, "cache_create: out of memory");
	atomic_init(&c->refs, 1);
	c->flags = o.flags;
	c->src = fl_source_get(src);
	c->size = (src->size + CPAGE - 1) & ~(CPAGE - 1);
	c->npages = c->size / CPAGE;
	c->memfd = c->uffd = -1;
	c->map = MAP_FAILED;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->done, NULL);
	ret = scache_open(c);
	if (ret < 0) {
		scache_put(c);
		return ret;
	}
	*out = c;
	return 0;
}

struct fl_cache *scache_get(struct fl_cache *c)
{
	atomic_fetch_add(&c->refs, 1);
	return c;
}

void scache_put(struct fl_cache *c)
{
	if (!c || atomic_fetch_sub(&c->refs, 1) != 1)
		return;
	if (c->uffd >= 0)
		close(c->uffd);
	if (c->map != MAP_FAILED)
		munmap(c->map, c->size);
	if (c->memfd >= 0)
		close(c->memfd);
	free((void *)c->fill);
	pthread_cond_destroy(&c->done);
	pthread_mutex_destroy(&c->lock);
	fl_source_put(c->src);
	free(c);
}

void fl_cache_destroy(struct fl_cache *c)
{
	scache_put(c);
}

int fl_cache_fd(const struct fl_cache *c)
{
	return c ? c->memfd : -EINVAL;
}

uint64_t fl_cache_size(const struct fl_cache *c)
{
	return c ? c->size : 0;
}

int fl_cache_open_ro(const struct fl_cache *c)
{
	char path[64];
	int fd;

	if (!c)
		return fl_err(-EINVAL, "cache_open_ro: no cache");
	snprintf(path, sizeof(path), "/proc/self/fd/%d", c->memfd);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fl_err(-errno, "cache of %s: reopening it read-only: %s",
			      c->src->desc, strerror(errno));
	return fd;
}

int64_t fl_cache_filled(const struct fl_cache *c, uint64_t off, uint64_t len)
{
	int64_t n = 0;

	if (!c || off > c->size || len > c->size - off)
		return fl_err(-EINVAL, "cache_filled: range %llu+%llu beyond "
			      "the cache", (unsigned long long)off,
			      (unsigned long long)len);
	for (uint64_t pg = off / CPAGE; pg < (off + len + CPAGE - 1) / CPAGE;
	     pg++)
		n += atomic_load_explicit(&c->fill[pg], memory_order_acquire) ==
		     CACHE_FILLED;
	return n;
}

/* Pages [pg, pg+n) leave busy for state s; waiters are told. */
static void scache_end(struct fl_cache *c, uint64_t pg, uint64_t n,
		      enum cache_page s)
{
	for (uint64_t i = pg; i < pg + n; i++)
		atomic_store_explicit(&c->fill[i], s, memory_order_release);
	pthread_mutex_lock(&c->lock);
	pthread_cond_broadcast(&c->done);
	pthread_mutex_unlock(&c->lock);
}

/* Wait until page pg is no longer busy (filled, or handed back). */
static void scache_wait(struct fl_cache *c, uint64_t pg)
{
	pthread_mutex_lock(&c->lock);
	while (atomic_load_explicit(&c->fill[pg], memory_order_acquire) ==
	       CACHE_BUSY)
		pthread_cond_wait(&c->done, &c->lock);
	pthread_mutex_unlock(&c->lock);
}

/* pwrite [off, off+len) of the cache from buf: 0 or -errno. */
static int scache_pwrite(struct fl_cache *c, const uint8_t *buf, uint64_t off,
			uint64_t len)
{
	while (len) {
		ssize_t n = pwrite(c->memfd, buf, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		buf += n;
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return 0;
}

/*
 * Write buf into [off, off+len) of the cache: UFFDIO_COPY into the shared
 * mapping, a page that is there already (planted, EEXIST) by pwrite over
 * it, whatever else the COPY refuses by pwrite too.
 */
static int scache_write(struct fl_cache *c, const uint8_t *buf, uint64_t off,
		       uint64_t len)
{
	uint64_t pos = 0;

	while (c->uffd >= 0 && pos < len) {
		uint64_t done = 0;
		int ret = uffd_copy(c->uffd, (uintptr_t)c->map + off + pos,
				    buf + pos, len - pos, 0, &done);

		pos += done;
		if (ret == 0)
			return 0;
		if (ret != -EEXIST)
			break;
		ret = scache_pwrite(c, buf + pos, off + pos, CPAGE);
		if (ret < 0)
			return ret;
		pos += CPAGE;
	}
	return pos < len ? scache_pwrite(c, buf + pos, off + pos, len - pos) : 0;
}

/* Fill the claimed pages [pg, pg+n): read, write, mark filled. */
static int scache_fill_claimed(struct fl_cache *c, uint64_t pg, uint64_t n,
			      uint8_t *buf)
{
	uint64_t off = pg * CPAGE, len = n * CPAGE;
	uint64_t have = off + len > c->src->size ? c->src->size - off : len;
	int ret;

	fl_err_clear();	/* a failure's cause is the read's own */
	ret = c->src->ops->read(c->src, buf, have, off);
	if (ret == 0 && have < len)	/* the last page's tail */
		memset(buf + have, 0, len - have);
	if (ret == 0) {
		ret = scache_write(c, buf, off, len);
		if (ret < 0)
			fl_err(ret, "cache of %s: writing offset %llu: %s",
			       c->src->desc, (unsigned long long)off,
			       strerror(-ret));
	}
	if (ret < 0) {
		scache_end(c, pg, n, CACHE_EMPTY);
		return ret;
	}
	atomic_fetch_add_explicit(&c->pages_fetched, n, memory_order_relaxed);
	scache_end(c, pg, n, CACHE_FILLED);
	return 0;
}

int scache_fill(struct fl_cache *c, uint64_t off, uint64_t len, void *buf)
{
	uint64_t pg = off / CPAGE, end = (off + len + CPAGE - 1) / CPAGE;

	if (end > c->npages)
		return fl_err(-EINVAL, "cache of %s: offset %llu+%llu beyond "
			      "it", c->src->desc, (unsigned long long)off,
			      (unsigned long long)len);
	while (pg < end) {
		uint8_t s = atomic_load_explicit(&c->fill[pg],
						 memory_order_acquire);

		if (s == CACHE_FILLED) {
			pg++;
			continue;
		}
		if (s == CACHE_BUSY) {
			scache_wait(c, pg);
			continue;
		}
		uint64_t j = pg;
		uint8_t want = CACHE_EMPTY;

		while (j < end && atomic_compare_exchange_strong(
				&c->fill[j], &want, CACHE_BUSY)) {
			j++;
			want = CACHE_EMPTY;
		}
		if (j == pg)
			continue;	/* lost the race: look again */
		int ret = scache_fill_claimed(c, pg, j - pg, buf);

		if (ret < 0)
			return ret;
		pg = j;
	}
	return 0;
}
