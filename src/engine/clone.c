// SPDX-License-Identifier: Apache-2.0
/*
 * clone.c - clones of a snapshot cache: the clone's side (its private
 * mapping of the cache and its uffd) and the engine's (a clone region).
 *
 * Decision: a clone region is an ordinary region of the engine whose
 * pages come from the cache (fill.c asks cache.c to fill them, then maps
 * them with UFFDIO_CONTINUE), so the fault loop, workers, prefetch,
 * background restore and failure policy are the engine's own.  Its uffd
 * must not ask for EVENT_REMOVE: a clone drops its written pages with
 * MADV_DONTNEED, and each drop would wait for the handler to read it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/cache.h"
#include "engine/clone.h"
#include "kernel/uffd.h"
#include "util/error.h"

int fl_clone_map(int fd, uint64_t off, uint64_t len, void **addr, int *uffd)
{
	uint64_t feat = 0;
	void *m;
	int u, ret;

	if (fd < 0 || !len || ((off | len) & 4095) || !addr || !uffd)
		return fl_err(-EINVAL, "clone_map: bad argument (fd %d, "
			      "offset %llu, length %llu)", fd,
			      (unsigned long long)off,
			      (unsigned long long)len);
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd,
		 (off_t)off);
	if (m == MAP_FAILED)
		return fl_err(-errno, "clone_map: mmap of %llu bytes: %s",
			      (unsigned long long)len, strerror(errno));
	/* A child of the clone would hold pages nobody serves. */
	if (madvise(m, len, MADV_DONTFORK) < 0) {
		ret = fl_err(-errno, "clone_map: MADV_DONTFORK: %s",
			     strerror(errno));
		goto unmap;
	}
	u = uffd_create(UFFD_FEATURE_MINOR_SHMEM, &feat);
	if (u < 0) {
		ret = fl_err(u, "clone_map: userfaultfd: %s",
			     uffd_strerror(u));
		goto unmap;
	}
	ret = !(feat & UFFD_FEATURE_MINOR_SHMEM) ? -EOPNOTSUPP :
	      uffd_register(u, (uintptr_t)m, len, UFFDIO_REGISTER_MODE_MISSING |
			    UFFDIO_REGISTER_MODE_MINOR, NULL);
	if (ret < 0) {
		fl_err(ret, "clone_map: registering it MISSING | MINOR: %s "
		       "(a kernel without UFFD_FEATURE_MINOR_SHMEM?)",
		       strerror(-ret));
		close(u);
		goto unmap;
	}
	*addr = m;
	*uffd = u;
	return 0;
unmap:
	munmap(m, len);
	return ret;
}

/* Can the engine's uffd serve a clone?  0, or -errno with a line. */
static int check_uffd(struct fl_engine *e)
{
	uint64_t feat = 0;
	int ret = uffd_fd_features(fl_engine_uffd(e), &feat);

	if (ret < 0)
		return fl_err(ret, "clone region: the engine's uffd: %s",
			      strerror(-ret));
	if (feat & UFFD_FEATURE_EVENT_REMOVE)
		return fl_err(-EINVAL, "clone region: the engine's uffd asks "
			      "for UFFD_FEATURE_EVENT_REMOVE (each drop of a "
			      "clone's page would wait for it): make it with "
			      "fl_clone_map()");
	if (!(feat & UFFD_FEATURE_MINOR_SHMEM))
		return fl_err(-EOPNOTSUPP, "clone region: the engine's uffd "
			      "lacks UFFD_FEATURE_MINOR_SHMEM");
	return 0;
}

int fl_engine_add_clone_region(struct fl_engine *e, uint64_t addr,
			       uint64_t len, struct fl_cache *c,
			       uint64_t cache_off, unsigned int flags)
{
	struct fl_region_desc d = {
		.addr = addr, .len = len, .page_size = 4096,
		.src_offset = cache_off, .flags = flags,
	};
	int ret;

	if (!e || !c)
		return fl_err(-EINVAL, "add_clone_region: missing argument");
	if (flags & ~FL_REGION_REGISTER)
		return fl_err(-EINVAL, "clone region 0x%llx: flags 0x%x: only "
			      "FL_REGION_REGISTER", (unsigned long long)addr,
			      flags);
	if (cache_off > c->size || len > c->size - cache_off)
		return fl_err(-EINVAL, "clone region 0x%llx: cache offset "
			      "%llu + %llu beyond the cache (%llu bytes)",
			      (unsigned long long)addr,
			      (unsigned long long)cache_off,
			      (unsigned long long)len,
			      (unsigned long long)c->size);
	ret = check_uffd(e);
	return ret < 0 ? ret : engine_add_region(e, &d, c->src, c);
}
