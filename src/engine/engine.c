// SPDX-License-Identifier: Apache-2.0
/*
 * engine.c - an engine's life cycle and public API: create (adopting a
 * uffd or opening one), regions, traces, start, stop, detach, destroy.
 * The work itself is loop.c (faults and events), fill.c and prefetch.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/cache.h"
#include "engine/clone.h"
#include "engine/core.h"
#include "engine/fill.h"
#include "engine/fork.h"
#include "engine/gate.h"
#include "engine/worker.h"
#include "engine/loop.h"
#include "engine/prefetch.h"
#include "kernel/proc.h"
#include "source/source.h"
#include "util/error.h"
#include "util/zero.h"

/* Every FL_ENGINE_* flag this library knows: others are -EINVAL. */
#define ENGINE_FLAGS	(FL_ENGINE_OWN_UFFD | FL_ENGINE_NO_PREFETCH |	\
			 FL_ENGINE_NO_BACKGROUND | FL_ENGINE_MOVE |	\
			 FL_ENGINE_SHARED_STATE | FL_ENGINE_TAKEOVER |	\
			 FL_ENGINE_ADOPT | FL_ENGINE_CLIENT_PIDFD |	\
			 FL_ENGINE_CLIENT_REMOTE | FL_ENGINE_TRACK_SYNC)
#define REGION_FLAGS	(FL_REGION_REGISTER | FL_REGION_MINOR)

const char *fl_engine_error(struct fl_engine *e)
{
	return e->why;
}

/* ---- public API --------------------------------------------------------- */

/* Map the shared page-state file (FL_ENGINE_SHARED_STATE). */
static int map_state(struct fl_engine *e, int fd)
{
	struct stat st;
	void *p;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0)
		return fl_err(-EINVAL, "engine: state fd %d: not a non-empty "
			      "memory file", fd);
	p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		 fd, 0);
	if (p == MAP_FAILED)
		return fl_err(-errno, "engine: cannot map the state fd: %m");
	e->state_map = p;
	e->state_size = (uint64_t)st.st_size;
	return 0;
}

/* Put r's page states in the state map, after the regions added before. */
static int share_state(struct fl_engine *e, struct region *r)
{
	if (!e->state_map)
		return 0;
	if (r->npages > e->state_size - e->state_used)
		return fl_err(-ENOSPC, "region 0x%llx: the state fd has no room "
			      "for its %llu pages", (unsigned long long)r->addr,
			      (unsigned long long)r->npages);
	region_share_state(r, e->state_map + e->state_used, e->takeover);
	e->state_used += r->npages;
	return 0;
}

/*
 * The ABI (faultline.h): options grow out of reserved space, and the
 * three words that were padding before 0.5 are reserved words now.
 */
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(struct fl_engine_opts) == 120 &&
	       offsetof(struct fl_engine_opts, reserved_4) == 4 &&
	       offsetof(struct fl_engine_opts, reserved_28) == 28 &&
	       offsetof(struct fl_engine_opts, reserved_52) == 52 &&
	       offsetof(struct fl_engine_opts, reserved) == 56,
	       "fl_engine_opts keeps its size and layout");
#endif

/*
 * The options a caller may get wrong: the chunk size, or -EINVAL.  Space
 * and flags this library does not know must be zero: they are options of
 * a newer one, which this one would otherwise silently ignore.
 */
static int64_t check_opts(const struct fl_engine_opts *opts)
{
	uint64_t chunk = opts->chunk_size ? opts->chunk_size : FL_DEFAULT_CHUNK;

	if (!is_zero(opts->reserved, sizeof(opts->reserved)))
		return fl_err(-EINVAL, "engine options: reserved space is not "
			      "zero (options of a newer libfaultline than %s?)",
			      FL_VERSION);
	if (opts->reserved_4 || opts->reserved_28 || opts->reserved_52)
		return fl_err(-EINVAL, "engine options: reserved_%d is not "
			      "zero (an option of a newer libfaultline than "
			      "%s?)", opts->reserved_4 ? 4 :
			      opts->reserved_28 ? 28 : 52, FL_VERSION);
	if (opts->flags & ~ENGINE_FLAGS)
		return fl_err(-EINVAL, "engine flags 0x%x: unknown to "
			      "libfaultline %s", opts->flags & ~ENGINE_FLAGS,
			      FL_VERSION);
	if (opts->client_pid < 0 ||
	    ((opts->flags & FL_ENGINE_CLIENT_REMOTE) &&
	     opts->client_pid == getpid()))
		return fl_err(-EINVAL, "client_pid %d: must be 0 (this process, "
			      "or with FL_ENGINE_CLIENT_REMOTE another one, pid "
			      "unknown) or another process's pid",
			      opts->client_pid);

	if (chunk < 4096 || chunk > FL_MAX_CHUNK || (chunk & (chunk - 1)))
		return fl_err(-EINVAL,
			      "chunk size %llu: must be a power of two from 4096 to %u",
			      (unsigned long long)chunk, FL_MAX_CHUNK);
	if (opts->on_error != FL_ON_ERROR_POISON &&
	    opts->on_error != FL_ON_ERROR_KILL)
		return fl_err(-EINVAL, "on_error %d: must be poison or kill",
			      (int)opts->on_error);
	return (int64_t)chunk;
}

/* The engine with its policy, locks and eventfd; no uffd yet. */
static struct fl_engine *engine_alloc(const struct fl_engine_opts *opts,
				      uint64_t chunk)
{
	struct fl_engine *e = calloc(1, sizeof(*e));
	pthread_rwlockattr_t attr;

	if (!e)
		return NULL;
	e->uffd = -1;
	e->chunk = chunk;
	e->chunk_fixed = opts->chunk_size != 0;
	prefetch_init(e, opts);
	e->takeover = opts->flags & FL_ENGINE_TAKEOVER;
	pthread_mutex_init(&e->why_lock, NULL);
	pthread_mutex_init(&e->woken_lock, NULL);
	pthread_mutex_init(&e->process_lock, NULL);
	pthread_mutex_init(&e->reset_lock, NULL);
	e->scan_fd = -1;
	/* Fault readers (writers here) are never starved by fills. */
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr,
			PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&e->lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	e->on_error = opts->on_error;
	/* Internally -1 names the remote client of unknown pid (proc.h). */
	e->client_pid = opts->client_pid == 0 &&
			(opts->flags & FL_ENGINE_CLIENT_REMOTE) ? -1 :
			opts->client_pid;
	e->client_pidfd = -1;
	e->restored_fd = -1;
	e->pagemap_fd = -1;
	if (e->client_pid > 0 && e->client_pid != getpid()) {
		char path[40];

		snprintf(path, sizeof(path), "/proc/%d/pagemap", e->client_pid);
		e->pagemap_fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	e->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return e;
}

/*
 * Pin another process's client to a pidfd, so that the kill policy can
 * never reach a process that got its pid after the client was gone: the
 * caller's (FL_ENGINE_CLIENT_PIDFD; -1 there: none, never kill by pid),
 * or one opened now.  Without one (the client already gone, or pidfd_open
 * refused) pages that cannot be served are poisoned instead.
 */
static int pin_client(struct fl_engine *e, const struct fl_engine_opts *opts)
{
	int fd;

	if (opts->flags & FL_ENGINE_CLIENT_PIDFD) {
		if (e->client_pid <= 0)
			return fl_err(-EINVAL, "engine: a client_pidfd needs "
				      "the client's pid");
		if (opts->client_pidfd < 0)
			return 0;
		fd = fcntl(opts->client_pidfd, F_DUPFD_CLOEXEC, 3);
		if (fd < 0)
			return fl_err(-errno, "engine: client_pidfd %d: %m",
				      opts->client_pidfd);
		if (proc_pidfd_signal(fd, 0) == -EBADF) {
			close(fd);
			return fl_err(-EBADF, "engine: client_pidfd %d is not "
				      "a pidfd", opts->client_pidfd);
		}
		e->client_pidfd = fd;
		return 0;
	}
	if (e->client_pid <= 0 || e->client_pid == getpid())
		return 0;
	fd = proc_pidfd_open(e->client_pid);
	if (fd >= 0)
		e->client_pidfd = fd;
	return 0;
}

/*
 * Adopt another process's uffd: it must be one, with UFFDIO_API done, and
 * not ask for fork events (a forked child's uffd would arrive here and
 * nobody would serve it: its threads would sleep in their first fault).
 */
static int adopt_uffd(struct fl_engine *e, const struct fl_engine_opts *opts)
{
	int fl = fcntl(opts->uffd, F_GETFL);
	uint64_t feat = 0;

	if (fl < 0)
		return fl_err(-EBADF, "uffd %d: not an open fd", opts->uffd);
	int fr = uffd_fd_features(opts->uffd, &feat);

	if (fr == -ENOTTY || fr == -ENOTCONN)
		return fl_err(-EINVAL, "fd %d: %s", opts->uffd,
			      fr == -ENOTTY ? "not a userfaultfd" :
			      "a userfaultfd whose UFFDIO_API was never done");
	if (fr == 0 && (feat & UFFD_FEATURE_EVENT_FORK) && !e->on_fork)
		return fl_err(-EINVAL, "uffd %d asks for fork events "
			      "(UFFD_FEATURE_EVENT_FORK): a forked child's "
			      "memory would not be served", opts->uffd);
	fcntl(opts->uffd, F_SETFL, fl | O_NONBLOCK);
	e->uffd = opts->uffd;
	e->own_uffd = opts->flags & FL_ENGINE_OWN_UFFD;
	return 0;
}

/*
 * A uffd of this process, with every feature the kernel has: write
 * tracking's too (they change nothing until a range is registered for
 * write-protection, fl_engine_track_writes), WP_ASYNC unless the caller
 * wants the synchronous fallback (a uffd has one or the other for good).
 */
static int open_uffd(struct fl_engine *e, const struct fl_engine_opts *opts)
{
	uint64_t want = UFFD_WANT_FEATURES | UFFD_FEATURE_WP_HUGETLBFS_SHMEM;

	if (!(opts->flags & FL_ENGINE_TRACK_SYNC))
		want |= UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED;
	int fd = uffd_create(want, &e->features);

	if (fd < 0)
		return fl_err(fd, "cannot open a userfaultfd: %s",
			      uffd_strerror(fd));
	e->features &= want;	/* the kernel answers with all it has */
	e->uffd = fd;
	e->own_uffd = true;
	atomic_store(&e->use_move, (e->features & UFFD_FEATURE_MOVE) &&
				   (opts->flags & FL_ENGINE_MOVE));
	return 0;
}

/*
 * fd 0 is a userfaultfd: a caller of the days when .uffd = 0 adopted it
 * (before FL_ENGINE_ADOPT), whose zeroed options must not now create
 * another uffd nobody's faults go to.
 */
static bool fd0_is_uffd(void)
{
	uint64_t feat;
	int ret = uffd_fd_features(0, &feat);

	return ret == 0 || ret == -ENOTCONN;
}

/*
 * fl_engine_create has two versions in the shared object.  A caller built
 * against 0.5 or later binds to FAULTLINE_0.5, the default, whose
 * reserved_* words are checked like the rest of the reserved space.  One
 * built against 0.3 or 0.4 binds to FAULTLINE_0.3: those words were
 * padding to it, which a compiler need not zero, so they are ignored, as
 * they always were.  A static link takes the default.
 */
int fl_engine_create_0_5(const struct fl_engine_opts *opts,
			 struct fl_engine **out);
int fl_engine_create_0_3(const struct fl_engine_opts *opts,
			 struct fl_engine **out);
__asm__(".symver fl_engine_create_0_5, fl_engine_create@@FAULTLINE_0.5");
__asm__(".symver fl_engine_create_0_3, fl_engine_create@FAULTLINE_0.3");

int fl_engine_create_0_5(const struct fl_engine_opts *opts,
			 struct fl_engine **out)
{
	return fl_engine_create_forking(opts, NULL, NULL, out);
}

int fl_engine_create_0_3(const struct fl_engine_opts *opts,
			 struct fl_engine **out)
{
	struct fl_engine_opts o;

	if (!opts)
		return fl_engine_create_forking(NULL, NULL, NULL, out);
	o = *opts;
	o.reserved_4 = o.reserved_28 = o.reserved_52 = 0;
	return fl_engine_create_forking(&o, NULL, NULL, out);
}

int fl_engine_create_forking(const struct fl_engine_opts *opts,
			  fl_engine_fork_fn *fn, void *arg,
			  struct fl_engine **out)
{
	struct fl_engine_opts def = { .uffd = -1 };
	struct fl_engine *e;
	int ret;

	if (!out)
		return fl_err(-EINVAL, "engine: no output pointer");
	if (!opts)
		opts = &def;
	int64_t chunk = check_opts(opts);

	if (chunk < 0)
		return (int)chunk;
	if (fill_init() < 0)
		return fl_err(-ENOMEM, "engine: cannot map the zero buffer");
	e = engine_alloc(opts, (uint64_t)chunk);
	if (!e)
		return fl_err(-ENOMEM, "engine: out of memory");
	e->process_worker = worker_new(opts->flags & FL_ENGINE_MOVE);
	if (e->stopfd < 0 || !e->process_worker) {
		ret = e->stopfd < 0 ?
		      fl_err(-errno, "engine: cannot create an eventfd: %m") :
		      fl_err(-ENOMEM, "engine: cannot map a staging buffer");
		goto fail;
	}
	e->adopted = opts->flags & FL_ENGINE_ADOPT;
	e->on_fork = fn;
	e->fork_arg = arg;
	ret = pin_client(e, opts);
	if (ret < 0)
		goto fail;
	if (e->adopted)
		ret = adopt_uffd(e, opts);
	else if (opts->uffd > 0 || (opts->uffd == 0 && fd0_is_uffd()))
		ret = fl_err(-EINVAL, "engine: uffd %d given without "
			     "FL_ENGINE_ADOPT (0 or -1: create one)",
			     opts->uffd);
	else
		ret = open_uffd(e, opts);
	if (ret == 0 && (opts->flags & FL_ENGINE_SHARED_STATE))
		ret = map_state(e, opts->state_fd);
	if (ret < 0)
		goto fail;
	*out = e;
	return 0;
fail:
	if (e->uffd >= 0 && !(opts->flags & FL_ENGINE_ADOPT))	/* ours */
		close(e->uffd);
	if (e->stopfd >= 0)
		close(e->stopfd);
	if (e->pagemap_fd >= 0)
		close(e->pagemap_fd);
	if (e->client_pidfd >= 0)
		close(e->client_pidfd);
	worker_free(e->process_worker);
	free(e);
	return ret;
}

int fl_engine_uffd(const struct fl_engine *e)
{
	return e->uffd;
}

static int check_region(struct fl_engine *e, const struct fl_region_desc *d,
			struct fl_source *src)
{
	uint64_t ps = d->page_size;

	if (!is_zero(d->reserved, sizeof(d->reserved)))
		return fl_err(-EINVAL, "region 0x%llx: reserved space is not "
			      "zero (fields of a newer libfaultline than %s?)",
			      (unsigned long long)d->addr, FL_VERSION);
	if (d->flags & ~REGION_FLAGS)
		return fl_err(-EINVAL, "region flags 0x%x: unknown to "
			      "libfaultline %s", d->flags & ~REGION_FLAGS,
			      FL_VERSION);
	if (ps != 4096 && ps != HUGE_2M)
		return fl_err(-EINVAL, "region page_size %llu: must be 4096 or 2097152",
			      (unsigned long long)ps);
	if (!d->len || (d->addr | d->len) & (ps - 1))
		return fl_err(-EINVAL,
			      "region 0x%llx+%llu: address and length must be non-zero multiples of page_size %llu",
			      (unsigned long long)d->addr,
			      (unsigned long long)d->len,
			      (unsigned long long)ps);
	if (d->addr + d->len < d->addr)
		return fl_err(-EINVAL, "region 0x%llx+%llu: wraps around",
			      (unsigned long long)d->addr,
			      (unsigned long long)d->len);
	if ((d->flags & FL_REGION_MINOR) && (d->memfd < 0 || ps != 4096))
		return fl_err(-EINVAL,
			      "region 0x%llx: minor mode needs a memfd (got %d) and 4096-byte pages",
			      (unsigned long long)d->addr, d->memfd);
	if (d->src_offset > src->size || d->len > src->size - d->src_offset)
		return fl_err(-EINVAL,
			      "region offset %llu + size %llu: beyond the end of %s (%llu bytes)",
			      (unsigned long long)d->src_offset,
			      (unsigned long long)d->len, src->desc,
			      (unsigned long long)src->size);
	for (int i = 0; i < e->regions.n; i++) {
		struct region *r = e->regions.v[i];

		if (d->addr < r->addr + r->len && r->addr < d->addr + d->len)
			return fl_err(-EINVAL,
				      "region 0x%llx+%llu: overlaps region 0x%llx+%llu",
				      (unsigned long long)d->addr,
				      (unsigned long long)d->len,
				      (unsigned long long)r->addr,
				      (unsigned long long)r->len);
	}
	/*
	 * Memory whose pages are not what the region says (hugetlb described
	 * as 4 KiB, or the reverse) could never be filled: the kernel refuses
	 * every COPY into it.
	 */
	uint64_t mps = proc_page_size(e->client_pid, d->addr);

	if (mps && mps != ps)
		return fl_err(-EINVAL,
			      "region 0x%llx: page_size %llu, but the memory "
			      "there has %llu KiB pages",
			      (unsigned long long)d->addr,
			      (unsigned long long)ps,
			      (unsigned long long)(mps >> 10));
	return 0;
}

int engine_add_region(struct fl_engine *e, const struct fl_region_desc *rd,
		      struct fl_source *src, struct fl_cache *cache)
{
	struct fl_region_desc desc;
	const struct fl_region_desc *d = &desc;
	struct region *r;
	int ret;

	if (!e || !rd || !src)
		return fl_err(-EINVAL, "add_region: missing argument");
	desc = *rd;
	if (!desc.page_size)	/* a zeroed descriptor: 4 KiB pages */
		desc.page_size = 4096;
	pthread_rwlock_wrlock(&e->lock);
	ret = check_region(e, d, src);
	if (ret == 0 && atomic_load(&e->track) &&
	    ((d->flags & FL_REGION_MINOR) || cache))
		ret = fl_err(-EOPNOTSUPP, "region 0x%llx+%llu: shared memory "
			     "(FL_REGION_MINOR) while writes are tracked: a "
			     "reset would keep what its page cache holds",
			     (unsigned long long)d->addr,
			     (unsigned long long)d->len);
	if (ret == 0 && (d->flags & FL_REGION_REGISTER)) {
		ret = uffd_register(e->uffd, d->addr, d->len,
				    UFFDIO_REGISTER_MODE_MISSING |
				    (d->flags & FL_REGION_MINOR || cache ?
				     UFFDIO_REGISTER_MODE_MINOR : 0) |
				    (atomic_load(&e->track) ?
				     UFFDIO_REGISTER_MODE_WP : 0), NULL);
		if (ret < 0)
			fl_err(ret, "region 0x%llx+%llu: cannot register: %s",
			       (unsigned long long)d->addr,
			       (unsigned long long)d->len, strerror(-ret));
	}
	/*
	 * Whose memory it is is known unless the caller said it is another
	 * process's of unknown pid (FL_ENGINE_CLIENT_REMOTE, client_pid 0).
	 */
	if (ret == 0 && !(d->flags & FL_REGION_REGISTER) &&
	    e->client_pid >= 0 &&
	    proc_uffd_registered(e->client_pid, d->addr, d->len) == 0)
		ret = fl_err(-EINVAL, "region 0x%llx+%llu: not registered with "
			     "userfaultfd (no 'um' in its smaps VmFlags): "
			     "register it, or add it with FL_REGION_REGISTER",
			     (unsigned long long)d->addr,
			     (unsigned long long)d->len);
	if (ret == 0)
		ret = region_new(d, src, &r);
	if (ret == 0 && cache)
		r->cache = scache_get(cache);
	if (ret == 0 && ((ret = share_state(e, r)) < 0 ||
			 (atomic_load(&e->track) &&
			  (ret = region_track(r)) < 0)))
		region_free(r);
	if (ret == 0) {
		ret = region_insert(&e->regions, r);
		if (ret < 0)
			region_free(r);
		else
			prefetch_regions_changed(e);
	}
	pthread_rwlock_unlock(&e->lock);
	return ret;
}

int fl_engine_add_region(struct fl_engine *e, const struct fl_region_desc *rd,
			 struct fl_source *src)
{
	return engine_add_region(e, rd, src, NULL);
}

int fl_engine_record(struct fl_engine *e)
{
	if (e->rec)
		return 0;
	struct trace *t = malloc(sizeof(*t));

	if (!t)
		return -ENOMEM;
	trace_init(t);
	e->rec = t;
	return 0;
}

int fl_engine_save_trace(struct fl_engine *e, const char *path)
{
	if (!e->rec)
		return fl_err(-EINVAL, "trace %s: the engine is not recording",
			      path);
	return trace_save(e->rec, path);
}

int fl_engine_replay(struct fl_engine *e, const char *path)
{
	struct trace t;
	int ret;

	/* A trace that does not load leaves the one before as it was. */
	trace_init(&t);
	ret = trace_load(&t, path);
	if (ret < 0) {
		trace_free(&t);
		return ret;
	}
	return prefetch_replay(e, &t, e->threads != NULL);
}

int fl_engine_start(struct fl_engine *e, unsigned int nthreads)
{
	if (!nthreads || nthreads > 64)
		return fl_err(-EINVAL, "threads %u: must be 1 to 64", nthreads);
	if (e->threads)
		return fl_err(-EBUSY, "engine already started");
	if (atomic_load(&e->stopping))	/* its threads would exit at once */
		return fl_err(-EINVAL, "engine stopped: it does not start "
			      "again (fl_engine_process() still serves it)");
	e->threads = calloc(nthreads, sizeof(*e->threads));
	if (!e->threads)
		return -ENOMEM;
	e->start_ns = now_ns();
	for (unsigned int i = 0; i < nthreads; i++) {
		struct worker *w = engine_worker(e);
		int ret = w ? pthread_create(&e->threads[i], NULL,
					     engine_thread, w) : ENOMEM;

		if (ret) {
			fl_engine_stop(e);
			return fl_err(-ret, "cannot start engine thread");
		}
		e->nthreads++;
	}
	int ret = prefetch_start(e);

	if (ret < 0) {
		fl_engine_stop(e);
		return fl_err(ret, "cannot start the prefetch thread");
	}
	/* Taken over: faults the dead server read are asleep; fault again. */
	pthread_rwlock_rdlock(&e->lock);
	for (int i = 0; e->takeover && i < e->regions.n; i++)
		engine_wake(e, e->regions.v[i]->addr, e->regions.v[i]->len);
	pthread_rwlock_unlock(&e->lock);
	return 0;
}

int fl_engine_process(struct fl_engine *e)
{
	int total = 0, n;

	pthread_mutex_lock(&e->process_lock);
	do {
		n = engine_pump(e, e->process_worker);
		if (n > 0)
			total += n;
	} while (n > 0);
	pthread_mutex_unlock(&e->process_lock);
	return n < 0 ? n : total;
}

int fl_engine_stop(struct fl_engine *e)
{
	uint64_t one = 1;

	atomic_store(&e->stopping, true);
	prefetch_stop(e);
	if (write(e->stopfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		return -errno;
	for (unsigned int i = 0; i < e->nthreads; i++)
		pthread_join(e->threads[i], NULL);
	free(e->threads);
	e->threads = NULL;
	e->nthreads = 0;
	return 0;
}

int fl_engine_detach(struct fl_engine *e)
{
	uint64_t one = 1;

	atomic_store(&e->detached, true);
	atomic_store(&e->stopping, true);
	if (write(e->stopfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		return -errno;
	/* An ioctl under way is a COPY of at most FL_MAX_CHUNK: short. */
	while (atomic_load(&e->in_ioctl))
		sched_yield();
	return 0;
}

int fl_engine_progress(struct fl_engine *e, uint64_t *missing,
		       uint64_t *total)
{
	uint64_t m = 0, t = 0;

	if (pthread_rwlock_tryrdlock(&e->lock))
		return -EBUSY;
	for (int i = 0; i < e->regions.n; i++) {
		const struct region *r = e->regions.v[i];
		uint64_t c[PG_NSTATES];

		region_count(r, c);
		m += (c[PG_MISSING] + c[PG_BUSY] + c[PG_RESET]) <<
		     r->page_shift;
		t += r->len;
	}
	/*
	 * Nothing missing, although background restore never said so (faults
	 * and readahead filled it all, or it had no quiet moment): restored
	 * when the last run was filled.  Under the lock: a region added
	 * afterwards (write lock) clears it again.
	 */
	if (t && !m && !atomic_load(&e->restored)) {
		uint64_t at = atomic_load(&e->last_fill_ns);

		engine_restored(e, at ? at : now_ns());
	}
	pthread_rwlock_unlock(&e->lock);
	*missing = m;
	*total = t;
	return 0;
}

int fl_engine_wait(struct fl_engine *e, int timeout_ms)
{
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ull;
	uint64_t missing, total;

	for (;;) {
		if (fl_engine_progress(e, &missing, &total) == 0 && !missing)
			return 0;
		if (fl_engine_finished(e))
			return fl_err(-ESRCH, "engine: the client is gone (%s)",
				      fl_engine_finished(e) == FL_FINISHED_KILLED ?
				      "killed" : "exited");
		if (timeout_ms >= 0 && now_ns() >= deadline)
			return fl_err(-ETIMEDOUT, "engine: %llu of %llu bytes "
				      "still missing after %d ms",
				      (unsigned long long)missing,
				      (unsigned long long)total, timeout_ms);
		usleep(2000);
	}
}

enum fl_finished fl_engine_finished(const struct fl_engine *e)
{
	if (atomic_load(&e->killed))	/* set before the kill itself */
		return FL_FINISHED_KILLED;
	return atomic_load(&e->finished) ? FL_FINISHED_GONE : FL_FINISHED_NOT;
}

void fl_engine_destroy(struct fl_engine *e)
{
	if (!e)
		return;
	fl_engine_detach(e);
	fl_engine_stop(e);
	region_list_free(&e->regions, NULL, NULL);
	if (e->own_uffd)
		close(e->uffd);
	close(e->stopfd);
	if (e->pagemap_fd >= 0)
		close(e->pagemap_fd);
	if (e->client_pidfd >= 0)
		close(e->client_pidfd);
	while (e->workers) {	/* only now: see engine_worker() */
		struct worker *w = e->workers;

		e->workers = w->next;
		worker_free(w);
	}
	worker_free(e->process_worker);
	pthread_rwlock_destroy(&e->lock);
	pthread_mutex_destroy(&e->process_lock);
	pthread_mutex_destroy(&e->reset_lock);
	if (e->scratch)	/* the uffd is closed: no UNMAP event to wait for */
		munmap(e->scratch, RESET_SCRATCH);
	if (e->scan_fd >= 0)
		close(e->scan_fd);
	pthread_mutex_destroy(&e->why_lock);
	pthread_mutex_destroy(&e->woken_lock);
	prefetch_free(e);
	if (e->state_map)
		munmap((void *)e->state_map, e->state_size);
	if (e->rec) {
		trace_free(e->rec);
		free(e->rec);
	}
	free(e);
}

