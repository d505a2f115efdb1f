/*
 * engine.c - reads userfaultfd messages and resolves faults from regions'
 * sources.
 *
 * Flow: uffd message -> event applied / fault queued -> region state map ->
 * source -> kernel layer -> wake.  Each worker (an engine thread, or the
 * caller of fl_engine_process) reads a batch of messages with the engine
 * lock held exclusively, applies every event in it, then serves the batch's
 * faults with the lock shared.  A fault is served by filling its chunk: runs
 * of pages claimed in the state map (so no page is filled twice), each run
 * resolved with one uffd_fill() operation (fill_run() picks it): ZEROPAGE,
 * or a zeroed copy on hugetlb, when the run is removed, a source hole or all
 * zero; CONTINUE after one write into the page cache for shared memory in
 * minor mode; COPY straight from the source's mapping (one copy) or from the
 * worker's staging buffer; MOVE out of that buffer in-process when enabled.
 * Readahead, trace replay and background restore (prefetch.c) fill through
 * the same path.
 *
 * Kernel rules folded in (KERNEL-FACTS.md): EEXIST -> mark present and WAKE;
 * EAGAIN -> un-claim, read and apply pending events, retry; ESRCH -> the
 * client is gone, the engine finishes; a source that cannot produce a page
 * -> POISON it (SIGBUS in the faulting thread) or kill the client.  Every
 * ioctl passes one gate that fl_engine_detach() closes, and a fault on a
 * page already filled is answered by a wake alone unless it is proven
 * fresh: another uffd may serve that address by now (architecture.md).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "error.h"
#include "source.h"

#define MSG_BATCH	64
#define PROBE_BYTES	256	/* read to tell a data run from a zero run */
#define HUGE_2M		(2ull << 20)
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ	22	/* Linux 5.14 */
#endif

struct pending {
	uint64_t addr;
	uint64_t t_read;	/* CLOCK_MONOTONIC ns when the fault was read */
	uint64_t t_seen;	/* ... when the read() that brought it began */
};

struct worker {
	struct fl_engine *e;	/* owner (engine_worker) */
	struct worker *next;	/* in e->workers */
	void *map;		/* the mapping buf lives in */
	void *buf;		/* FL_MAX_CHUNK bytes: the source reads here */
	struct pending *q;	/* faults read, not yet served */
	int qhead, qlen, qcap;
	struct uffd_msg msgs[MSG_BATCH];
	const struct fl_source *pop_src;	/* source blocks last mapped */
	uint64_t pop_lo, pop_hi;		/* (map_source) */
};

static const void *zero_buf;	/* FL_MAX_CHUNK bytes of zeros, read-only */
static pthread_once_t zero_once = PTHREAD_ONCE_INIT;

static void zero_init(void)
{
	/*
	 * Populated: a COPY from a source page that is not mapped takes the
	 * kernel's retry path, which on hugetlb holds two huge pages at
	 * once; with the pool sized exactly to the guest that fails with
	 * ENOMEM.
	 */
	void *p = mmap(NULL, FL_MAX_CHUNK, PROT_READ,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	zero_buf = p == MAP_FAILED ? NULL : p;
}

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool is_zero(const void *p, size_t len)
{
	const unsigned char *c = p;

	return len == 0 || (c[0] == 0 && !memcmp(c, c + 1, len - 1));
}

static void stat_add(_Atomic uint64_t *c, uint64_t v)
{
	atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

/* ---- the ioctl gate ----------------------------------------------------- */

static bool gate_enter(struct fl_engine *e)
{
	atomic_fetch_add(&e->in_ioctl, 1);
	if (!atomic_load(&e->detached))
		return true;
	atomic_fetch_sub(&e->in_ioctl, 1);
	return false;
}

/*
 * Every fill, poison and wake of the engine passes here: once the engine
 * is detached it answers -ESRCH (the client is gone) without an ioctl.
 */
int engine_fill(struct fl_engine *e, enum uffd_fill_op op, uint64_t dst,
		uint64_t src, uint64_t len, uint64_t mode, uint64_t *done)
{
	*done = 0;
	if (!gate_enter(e))
		return -ESRCH;
	int ret = uffd_fill(e->uffd, op, dst, src, len, mode, done);

	atomic_fetch_sub(&e->in_ioctl, 1);
	return ret;
}

int engine_wake(struct fl_engine *e, uint64_t start, uint64_t len)
{
	if (!gate_enter(e))
		return -ESRCH;
	int ret = uffd_wake(e->uffd, start, len);

	atomic_fetch_sub(&e->in_ioctl, 1);
	return ret;
}

/* ---- workers ------------------------------------------------------------ */

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
struct fl_engine *worker_engine(const struct worker *w)
{
	return w->e;
}

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

/* Make room for n more queued faults. */
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

static void drop_region(struct fl_engine *e, int i)
{
	prefetch_forget(e, e->regions[i]);
	region_free(e->regions[i]);
	e->regions[i] = e->regions[--e->nregions];
}

static int add_region_locked(struct fl_engine *e, struct region *r)
{
	if (e->nregions == e->cap) {
		int cap = e->cap ? e->cap * 2 : 8;
		struct region **v = realloc(e->regions, sizeof(*v) * (size_t)cap);

		if (!v)
			return -ENOMEM;
		e->regions = v;
		e->cap = cap;
	}
	e->regions[e->nregions++] = r;
	prefetch_regions_changed(e);
	return 0;
}

/* Add r, or free it if there is no room. */
static void add_or_free(struct fl_engine *e, struct region *r)
{
	if (r && add_region_locked(e, r) < 0)
		region_free(r);
}

/*
 * Cut [start, end) out of every region (UNMAP, or the old range of a
 * REMAP): regions shrink, split or go, so none covers memory the client
 * may map anew there.
 */
static void apply_cut(struct fl_engine *e, uint64_t start, uint64_t end)
{
	/* Tails appended here lie past the range: cutting them is a no-op. */
	for (int i = 0; i < e->nregions; i++) {
		struct region *tail;
		int gone = region_cut(e->regions[i], start, end, &tail);

		add_or_free(e, tail);
		if (gone == 1)
			drop_region(e, i--);	/* the last one takes slot i */
		else
			prefetch_clip(e, e->regions[i]);	/* may be shorter */
	}
}

static void apply_remap(struct fl_engine *e, uint64_t from, uint64_t to,
			uint64_t len)
{
	int n = e->nregions;

	/* First the moved parts, at their new addresses... */
	for (int i = 0; i < n; i++) {
		struct region *nr;

		if (region_remap(e->regions[i], from, len, to, &nr) == 0)
			add_or_free(e, nr);
	}
	/* ...then what stayed behind no longer covers the old range. */
	apply_cut(e, from, from + len);
}

/* Called with the engine lock held exclusively. */
static void apply_event(struct fl_engine *e, const struct uffd_msg *m)
{
	stat_add(&e->st.events, 1);
	switch (m->event) {
	case UFFD_EVENT_REMOVE:
		for (int i = 0; i < e->nregions; i++)
			region_mark_removed(e->regions[i], m->arg.remove.start,
					    m->arg.remove.end);
		break;
	case UFFD_EVENT_UNMAP:
		apply_cut(e, m->arg.remove.start, m->arg.remove.end);
		break;
	case UFFD_EVENT_REMAP:
		apply_remap(e, m->arg.remap.from, m->arg.remap.to,
			    m->arg.remap.len);
		break;
	case UFFD_EVENT_FORK:
		/*
		 * Refused at create; should one come anyway, do not keep the
		 * child's uffd open in this process for ever.
		 */
		close((int)m->arg.fork.ufd);
		break;
	default:
		break;
	}
}

/*
 * Read one batch: apply its events, queue its faults.  Returns messages read
 * (0 if none were pending) or -errno.
 */
static int read_batch(struct fl_engine *e, struct worker *w)
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
		stat_add(&e->st.faults, 1);
		atomic_store_explicit(&e->last_fault_ns, t, memory_order_relaxed);
		w->q[w->qlen++] = (struct pending){ m->arg.pagefault.address,
						     t, seen };
	}
	pthread_rwlock_unlock(&e->lock);
	return n;
}

/* ---- resolving ---------------------------------------------------------- */

static struct region *find_region(struct fl_engine *e, uint64_t addr)
{
	for (int i = 0; i < e->nregions; i++)
		if (region_contains(e->regions[i], addr))
			return e->regions[i];
	return NULL;
}

static void finish(struct fl_engine *e)
{
	atomic_store(&e->finished, true);
	uint64_t one = 1;

	if (write(e->stopfd, &one, sizeof(one)) < 0) {
		/* the counter cannot overflow with one write per finish */
	}
}

static int fail_pages(struct fl_engine *e, struct region *r, uint64_t pg,
		      uint64_t npg);
static uint64_t mapped_page_size(pid_t pid, uint64_t addr);

/*
 * The source cannot produce [pg, pg+npg): never serve it wrong.  Poison
 * it (SIGBUS in the faulting thread) or kill the client, by policy.
 */
static int source_failed(struct fl_engine *e, struct region *r, uint64_t pg,
			 uint64_t npg, int err)
{
	stat_add(&e->st.source_errors, 1);
	fl_err(err, "source %s: cannot read offset %llu (+%llu): %s",
	       r->src->desc,
	       (unsigned long long)(r->src_off + (pg << r->page_shift)),
	       (unsigned long long)(npg << r->page_shift), strerror(-err));
	return fail_pages(e, r, pg, npg);
}

/* Keep the first failure's message (this thread's last error) for later. */
static void note_failure(struct fl_engine *e)
{
	pthread_mutex_lock(&e->why_lock);
	if (!e->why[0])
		snprintf(e->why, sizeof(e->why), "%s", fl_last_error());
	pthread_mutex_unlock(&e->why_lock);
}

const char *fl_engine_error(struct fl_engine *e)
{
	return e->why;
}

/*
 * Pages that cannot be served, ever: POISON them (SIGBUS in a thread that
 * touches one) or kill the client, by the engine's on_error policy.  They
 * are never left for a fault or background restore to retry.
 */
static int fail_pages(struct fl_engine *e, struct region *r, uint64_t pg,
		      uint64_t npg)
{
	note_failure(e);
	bool poison = e->on_error == FL_ON_ERROR_POISON || e->client_pid <= 0;
	uint64_t step = npg;	/* pages per POISON: 1 after an ENOENT */

	while (poison && npg) {
		uint64_t addr = region_page_addr(r, pg), done = 0;
		uint64_t n = step < npg ? step : npg;
		int ret = engine_fill(e, UFFD_OP_POISON, addr,
				      0, n << r->page_shift, 0, &done);
		uint64_t k = done >> r->page_shift;

		region_set(r, pg, k, PG_PRESENT);
		stat_add(&e->st.pages_poisoned, k);
		pg += k;
		npg -= k;
		if (ret == 0)
			continue;
		if (ret == -EAGAIN) {	/* events pending: apply, then again */
			region_set(r, pg, npg, PG_MISSING);
			stat_add(&e->st.eagain, 1);
			return -EAGAIN;
		}
		if (ret == -ENOENT && step > 1) {	/* across a VMA's end */
			step = 1;
			continue;
		}
		if (ret == -ENOENT || ret == -EEXIST) {
			/* No mapping there any more, or populated meanwhile. */
			region_set(r, pg, 1, ret == -ENOENT ? PG_GONE :
				   PG_PRESENT);
			if (ret == -EEXIST)	/* its sleeper: this page's */
				engine_wake(e, region_page_addr(r, pg),
					    r->page_size);
			pg++;
			npg--;
			continue;
		}
		if (ret == -ESRCH)
			break;
		fl_err(ret, "0x%llx: cannot poison it either: %s",
		       (unsigned long long)addr, strerror(-ret));
		break;
	}
	if (!npg)
		return 0;
	/* Poisoning impossible (or not the policy): the client must go. */
	if (e->client_pid > 0)
		kill(e->client_pid, SIGKILL);
	region_set(r, pg, npg, PG_MISSING);
	finish(e);
	return -ESRCH;
}

static int fill_claimed(struct fl_engine *e, struct region *r, uint64_t pg,
			uint64_t npg, enum uffd_fill_op op, uint64_t src,
			enum page_state prior, unsigned int how,
			_Atomic uint64_t *counter);

/*
 * Is the page at addr mapped in the client?  1 or 0; -1 if that cannot be
 * told (another process whose pagemap we may not read).
 */
static int resident(const struct fl_engine *e, uint64_t addr)
{
	unsigned char v = 0;
	uint64_t ent;

	if (e->pagemap_fd >= 0)
		return pread(e->pagemap_fd, &ent, sizeof(ent),
			     (off_t)(addr / 4096 * sizeof(ent))) ==
		       (ssize_t)sizeof(ent) ? (int)(ent >> 63) : -1;
	if (e->client_pid != 0 && e->client_pid != getpid())
		return -1;	/* another process: not our address space */
	return mincore((void *)(uintptr_t)addr, 4096, &v) == 0 && (v & 1);
}

/*
 * Fill the claimed pages [pg, end) one at a time (src: the source of pg).
 * Stops at an error that is not about the page itself, handing the rest
 * back as prior.
 */
static int fill_pagewise(struct fl_engine *e, struct region *r, uint64_t pg,
			 uint64_t end, enum uffd_fill_op op, uint64_t src,
			 enum page_state prior, unsigned int how,
			 _Atomic uint64_t *counter)
{
	for (uint64_t p = pg; p < end; p++) {
		uint64_t s = src ? src + ((p - pg) << r->page_shift) : 0;
		int ret = fill_claimed(e, r, p, 1, op, s, prior, how, counter);

		if (ret == -EAGAIN || ret == -ESRCH || ret == -EFAULT ||
		    ret == -ENOMEM) {
			region_set(r, p + 1, end - p - 1, prior);
			return ret;
		}
	}
	return 0;
}

/*
 * Resolve the claimed pages [pg, pg+npg) of r with op (src: where COPY or
 * MOVE take the bytes from).  Pages not filled are handed back in state
 * prior.
 */
static int fill_claimed(struct fl_engine *e, struct region *r, uint64_t pg,
			uint64_t npg, enum uffd_fill_op op, uint64_t src,
			enum page_state prior, unsigned int how,
			_Atomic uint64_t *counter)
{
	uint64_t mode = how & FILL_DONTWAKE ? UFFDIO_COPY_MODE_DONTWAKE : 0;
	uint64_t base = region_page_addr(r, pg), len = npg << r->page_shift;
	bool zero = op == UFFD_OP_ZEROPAGE || src == (uintptr_t)zero_buf;
	uint64_t off = 0;
	int ret = 0;

	while (off < len) {
		uint64_t done = 0;

		ret = engine_fill(e, op, base + off, src ? src + off : 0,
				  len - off, mode, &done);
		if (op == UFFD_OP_MOVE && done == 0 && ret != 0 &&
		    ret != -EEXIST && ret != -EAGAIN && ret != -ESRCH) {
			/* Not movable here (shmem, EBUSY...): copy from now on. */
			atomic_store(&e->use_move, false);
			op = UFFD_OP_COPY;
			continue;
		}
		uint64_t first = (off >> r->page_shift) + pg;
		uint64_t n = done >> r->page_shift;

		region_set(r, first, n, PG_PRESENT);
		atomic_store_explicit(&e->last_fill_ns, now_ns(),
				      memory_order_relaxed);
		stat_add(zero ? &e->st.pages_zeroed : &e->st.pages_copied, n);
		if (!zero && op != UFFD_OP_CONTINUE)	/* CONTINUE copies nothing */
			stat_add(&e->st.bytes_copied, done);
		if (op == UFFD_OP_MOVE)
			stat_add(&e->st.pages_moved, n);
		if (counter)
			stat_add(counter, n);
		off += done;
		if (ret != -EEXIST)
			break;
		/*
		 * Into hugetlb memory with the pool empty, this kernel (6.18)
		 * answers EEXIST, not ENOMEM: believe it only if the page is
		 * there, or the thread would fault on it forever.
		 */
		if (r->page_size >= HUGE_2M && resident(e, base + off) == 0) {
			ret = -ENOMEM;
			break;
		}
		/* Populated behind our back: it is present; wake its waiters. */
		stat_add(&e->st.eexist, 1);
		region_set(r, first + n, 1, PG_PRESENT);
		engine_wake(e, base + off, r->page_size);
		off += r->page_size;
		ret = 0;
	}
	if (ret == 0)
		return 0;

	uint64_t left = (off >> r->page_shift) + pg;

	/* The source mapping failed under the kernel's copy (truncated). */
	if (ret == -EFAULT && (how & FILL_FROM_MAP))
		return source_failed(e, r, left, pg + npg - left, -EIO);
	/*
	 * ENOENT is the answer for the whole range when it does not lie in
	 * one registered VMA: a run across a VMA's end (the rest unmapped, or
	 * the region split by mprotect or madvise).  Find out page by page
	 * which pages have no mapping; the others are filled.
	 */
	if (ret == -ENOENT && pg + npg - left > 1)
		return fill_pagewise(e, r, left, pg + npg, op,
				     src ? src + off : 0,
				     prior, how, counter);
	/*
	 * Anything else the kernel refuses for good (EINVAL: the memory is
	 * not what the region says, e.g. hugetlb pages described as 4 KiB;
	 * EPERM, ENOSPC...) would be refused again on every fault and every
	 * background pass: fail those pages as a source error does (SIGBUS
	 * or the client killed, and a message), never loop on them.
	 */
	if (ret != -ENOENT && ret != -EAGAIN && ret != -ESRCH &&
	    ret != -ENOMEM && ret != -EFAULT) {
		fl_err(ret, "0x%llx+%llu: the kernel refuses to fill it: %s",
		       (unsigned long long)(base + off),
		       (unsigned long long)((pg + npg - left) << r->page_shift),
		       strerror(-ret));
		return fail_pages(e, r, left, pg + npg - left);
	}
	/*
	 * ENOENT for one page: no registered mapping there any more
	 * (unmapped without an UNMAP event: Firecracker does not ask for
	 * them).  Gone: background restore must not retry it forever, and
	 * no event said it reads zeros.
	 */
	region_set(r, left, pg + npg - left,
		   ret == -ENOENT ? PG_GONE : prior);
	/*
	 * Another worker may have skipped a fault on these pages because
	 * they were ours (busy): wake them, the threads fault again and the
	 * faults are read anew.  A spurious wake is harmless.
	 */
	if (ret != -ESRCH)
		engine_wake(e, region_page_addr(r, left),
			    (pg + npg - left) << r->page_shift);
	if (ret == -EAGAIN)
		stat_add(&e->st.eagain, 1);
	else if (ret == -ESRCH)
		finish(e);
	return ret;
}

/* Is [off, off+len) of the shared memory file all in its page cache? */
static bool memfd_cached(int fd, uint64_t off, size_t len)
{
	off_t hole = lseek(fd, (off_t)off, SEEK_HOLE);

	return hole >= 0 && (uint64_t)hole >= off + len;
}

/*
 * Write buf into the holes of [off, off+len) of the memfd's page cache.
 * Returns the bytes written.
 */
static int64_t memfd_fill(int fd, const uint8_t *buf, uint64_t off, size_t len)
{
	int64_t written = 0;
	uint64_t end = off + len, pos = off;

	while (pos < end) {
		off_t hole = lseek(fd, (off_t)pos, SEEK_HOLE);

		if (hole < 0)
			return -errno;
		if ((uint64_t)hole >= end)
			break;
		off_t data = lseek(fd, hole, SEEK_DATA);
		uint64_t stop = data < 0 || (uint64_t)data > end ? end :
				(uint64_t)data;
		ssize_t n = pwrite(fd, buf + (hole - (off_t)off),
				   stop - (uint64_t)hole, hole);

		if (n < 0)
			return -errno;
		pos = (uint64_t)hole + (uint64_t)n;
		written += n;
	}
	return written;
}

/*
 * MADV_POPULATE_READ the 2 MiB blocks of the source around [off, off+len)
 * (map is the source's mapping of off), once per block and worker: a
 * background piece comes in several runs of the same block.  Each time
 * (again) for hugetlb, where a source page evicted since would mean ENOMEM.
 */
static int map_source(struct worker *w, const struct fl_source *src,
		      const void *map, uint64_t off, size_t len, bool again)
{
	uint64_t lo = off & ~(HUGE_2M - 1);
	uint64_t hi = (off + len + HUGE_2M - 1) & ~(HUGE_2M - 1);
	const uint8_t *base = (const uint8_t *)map - off;

	if (hi > src->size)
		hi = (src->size + 4095) & ~4095ull;
	if (!again && w->pop_src == src && lo >= w->pop_lo && hi <= w->pop_hi)
		return 0;
	if (madvise((void *)(base + lo), hi - lo, MADV_POPULATE_READ) < 0) {
		w->pop_src = NULL;
		return -errno;
	}
	w->pop_src = src;
	w->pop_lo = lo;
	w->pop_hi = hi;
	return 0;
}

static int run_failed(struct fl_engine *e, struct worker *w, struct region *r,
		      uint64_t pg, uint64_t npg, enum page_state prior,
		      unsigned int how, _Atomic uint64_t *counter, int err);

/*
 * Resolve the claimed run [pg, pg+npg), all of them formerly prior, by the
 * cheapest means: zero pages for removed pages, holes and all-zero data;
 * for shared-memory regions (minor mode) one write into the page cache and
 * UFFDIO_CONTINUE; MOVE out of the staging buffer in-process when enabled;
 * COPY otherwise.
 */
static int fill_run(struct fl_engine *e, struct worker *w, struct region *r,
		    uint64_t pg, uint64_t npg, enum page_state prior,
		    unsigned int how, _Atomic uint64_t *counter)
{
	struct fl_source *src = r->src;
	uint64_t off = r->src_off + (pg << r->page_shift);
	uint64_t moff = r->memfd_off + (pg << r->page_shift);
	size_t len = (size_t)(npg << r->page_shift);
	bool zero = prior == PG_REMOVED;
	int ret;

	/* Shared memory keeps its page cache across MADV_DONTNEED. */
	if (r->memfd >= 0 && memfd_cached(r->memfd, moff, len))
		return fill_claimed(e, r, pg, npg, UFFD_OP_CONTINUE, 0, prior,
				    how, counter);
	if (!zero && src->ops->hole && src->ops->hole(src, off, len))
		zero = true;
	const void *map = zero || r->memfd >= 0 || atomic_load(&e->use_move) ||
			  !src->ops->map ? NULL : src->ops->map(src, off, len);

	/*
	 * Map the source pages before the COPY reads them: one call maps a
	 * whole large folio of the page cache with one PMD (ext4 and xfs
	 * cache a memory file in 2 MiB folios), where the COPY would fault
	 * them in 4 KiB at a time (a random 64 KiB fault: 45 us instead of
	 * 50-100 here).  Into hugetlb pages it is needed: a COPY from
	 * unmapped source pages takes the kernel's retry path, which holds
	 * two huge pages at once and fails with ENOMEM when the pool is sized
	 * to the guest.  A failure (a truncated file) falls back to pread,
	 * which reports it.
	 */
	if (map && map_source(w, src, map, off, len,
			      r->page_size >= HUGE_2M) < 0)
		map = NULL;

	if (map) {
		/*
		 * One copy: the kernel copies from the mapping.  Only the first
		 * bytes are read here, to tell data from a zero run; a run
		 * whose start is zero is read in full below and checked.
		 */
		size_t probe = len < PROBE_BYTES ? len : PROBE_BYTES;
		uint8_t head[PROBE_BYTES];

		/*
		 * Not into the staging buffer: its first write faults in a
		 * huge page, 5 ms under PVM (direct compaction, and a host
		 * that has not backed the memory) on a fault that needs none.
		 */
		ret = src->ops->read(src, head, probe, off);
		if (ret < 0)
			return run_failed(e, w, r, pg, npg, prior, how, counter, ret);
		if (!is_zero(head, probe))
			return fill_claimed(e, r, pg, npg, UFFD_OP_COPY,
					    (uintptr_t)map, prior,
					    how | FILL_FROM_MAP, counter);
	}
	if (!zero) {
		ret = src->ops->read(src, w->buf, len, off);
		if (ret < 0)
			return run_failed(e, w, r, pg, npg, prior, how, counter, ret);
		zero = is_zero(w->buf, len);
	}
	if (zero && r->page_size >= HUGE_2M)	/* no ZEROPAGE on hugetlbfs */
		return fill_claimed(e, r, pg, npg, UFFD_OP_COPY,
				    (uintptr_t)zero_buf, prior, how, counter);
	if (zero)
		return fill_claimed(e, r, pg, npg, UFFD_OP_ZEROPAGE, 0, prior,
				    how, counter);
	if (r->memfd >= 0) {
		int64_t n = memfd_fill(r->memfd, w->buf, moff, len);

		if (n < 0)
			return run_failed(e, w, r, pg, npg, prior, how, counter, (int)n);
		stat_add(&e->st.bytes_copied, (uint64_t)n);
		return fill_claimed(e, r, pg, npg, UFFD_OP_CONTINUE, 0, prior,
				    how, counter);
	}
	return fill_claimed(e, r, pg, npg,
			    r->page_size < HUGE_2M && atomic_load(&e->use_move) ?
			    UFFD_OP_MOVE : UFFD_OP_COPY,
			    (uintptr_t)w->buf, prior, how, counter);
}

/*
 * The source could not produce the run [pg, pg+npg): fill it page by page
 * until a page fails too, so that the readable pages before the failure (a
 * file truncated mid-chunk) are served, not failed with it; from that page
 * on the run fails at once.
 */
static int run_failed(struct fl_engine *e, struct worker *w, struct region *r,
		      uint64_t pg, uint64_t npg, enum page_state prior,
		      unsigned int how, _Atomic uint64_t *counter, int err)
{
	if (npg == 1)
		return source_failed(e, r, pg, 1, err);
	for (uint64_t i = 0; i < npg; i++) {
		uint64_t errs = atomic_load(&e->st.source_errors);
		int ret = fill_run(e, w, r, pg + i, 1, prior, how, counter);

		if (ret < 0 && ret != -ENOENT) {
			region_set(r, pg + i + 1, npg - i - 1, prior);
			return ret;
		}
		/*
		 * This page failed as well: the rest would too (the end of
		 * the file, a server that answers errors) and each try could
		 * take a remote source's whole retry budget.  Fail them now.
		 */
		if (atomic_load(&e->st.source_errors) != errs)
			return i + 1 < npg ?
			       source_failed(e, r, pg + i + 1, npg - i - 1,
					     err) : 0;
	}
	return 0;
}

/*
 * Fill every missing (and, for faults, removed) page of [first, last) in
 * runs.  Pages busy in another worker are left to it: its COPY wakes our
 * faulting thread too.  Prefetch never fills removed pages: the memory was
 * given back (balloon) and stays unpopulated until touched.
 */
int engine_fill_range(struct fl_engine *e, struct worker *w, struct region *r,
		      uint64_t first, uint64_t last, unsigned int how,
		      _Atomic uint64_t *counter)
{
	uint64_t i = first;
	bool ran = false;
	uint64_t max_bytes = FL_MAX_CHUNK;

	/*
	 * Prefetch while faults come: short runs, so that one waits little.
	 * Once they have gone quiet: whole 2 MiB runs (a background restore
	 * of an idle client, 8 % faster here).
	 */
	if ((how & FILL_YIELD) &&
	    now_ns() - atomic_load(&e->last_fault_ns) < e->quiet_ns)
		max_bytes = YIELD_RUN_BYTES;

	while (i < last) {
		enum page_state s = region_get(r, i);

		if (s != PG_MISSING && (s != PG_REMOVED || !(how & FILL_REMOVED))) {
			i++;
			continue;
		}
		if ((how & FILL_YIELD) && ran &&
		    atomic_load(&e->readers_waiting))
			return -EINTR;
		/* A run never exceeds the staging and zero buffers. */
		uint64_t max = max_bytes >> r->page_shift ?
			       max_bytes >> r->page_shift : 1;
		uint64_t j = i;

		while (j < last && j - i < max && region_claim(r, j, s))
			j++;
		if (j == i)
			continue;	/* lost the race: look again */
		int ret = fill_run(e, w, r, i, j - i, s, how, counter);

		/*
		 * ENOENT: those pages have no mapping any more (now marked
		 * gone); the rest of the range still needs filling - the
		 * faulting page may be further on.
		 */
		if (ret < 0 && ret != -ENOENT)
			return ret;
		ran = true;
		i = j;
	}
	return 0;
}

/* The woken[] slot of the page at addr. */
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
	return fill_run(e, w, r, pg, 1, s, 0, NULL);
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
	uint64_t ps = mapped_page_size(e->client_pid, p->addr), done;
	uint64_t page;
	int ret;

	if (ps < 4096 || ps > HUGE_2M)
		ps = 4096;
	page = p->addr & ~(ps - 1);
	if (!refault_proven(e, page, p)) {
		wake_filled(e, page, ps);
		return 0;
	}
	ret = ps >= HUGE_2M ?	/* no ZEROPAGE on hugetlbfs */
	      engine_fill(e, UFFD_OP_COPY, page, (uintptr_t)zero_buf, ps, 0,
			  &done) :
	      engine_fill(e, UFFD_OP_ZEROPAGE, page, 0, ps, 0, &done);
	if (ret == -EEXIST)	/* in the page cache: map it */
		ret = engine_fill(e, UFFD_OP_CONTINUE, page, 0, ps, 0, &done);
	if (ret < 0 && ret != -EAGAIN && ret != -ESRCH)
		engine_wake(e, page, ps);
	return ret;
}

/* Serve one fault: its chunk, then make sure its thread is woken. */
static int serve(struct fl_engine *e, struct worker *w, const struct pending *p)
{
	int ret = 0;

	pthread_rwlock_rdlock(&e->lock);
	struct region *r = find_region(e, p->addr);

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
	uint64_t chunk = e->chunk > r->page_size ? e->chunk : r->page_size;
	/*
	 * A client faulting all over its memory (background restore already
	 * streaming it) gets 2 MiB per fault: while it waits, its CPU copies
	 * beside the filler, and it faults again far later.
	 */
	if (e->background && atomic_load(&e->dense))
		chunk = FL_MAX_CHUNK;
	uint64_t pg = region_page(r, p->addr);
	uint64_t per = chunk >> r->page_shift;
	uint64_t first = pg & ~(per - 1);
	uint64_t last = first + per < r->npages ? first + per : r->npages;

	enum page_state s = region_get(r, pg);

	if (s == PG_PRESENT || s == PG_GONE)
		ret = answer_filled(e, w, r, pg, p);
	else
		ret = engine_fill_range(e, w, r, first, last, FILL_REMOVED,
					NULL);
	if (ret == 0 && e->rec)
		trace_add(e->rec, r->src_off + (first << r->page_shift),
			  (last - first) << r->page_shift);
	if (ret == 0 && e->prefetch)
		prefetch_after_fault(e, r, pg, first, last);
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
		stat_add(&e->st.pages_poisoned, 1);
		engine_fill(e, UFFD_OP_POISON, pgaddr, 0, psz, 0, &done);
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
static int pump(struct fl_engine *e, struct worker *w)
{
	int total = read_batch(e, w);

	if (total < 0)
		return total;
	while (w->qhead < w->qlen) {
		int ret = serve(e, w, &w->q[w->qhead]);

		if (ret == -EAGAIN) {
			/* An event is pending: apply it, then retry. */
			int n = read_batch(e, w);

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

static void *engine_thread(void *arg)
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
			finish(e);
			break;
		}
		if (pump(e, w) == -ESRCH)
			break;
	}
	return NULL;
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

int fl_engine_create(const struct fl_engine_opts *opts, struct fl_engine **out)
{
	struct fl_engine_opts def = { .uffd = -1 };
	struct fl_engine *e;
	int ret;

	if (!out)
		return fl_err(-EINVAL, "engine: no output pointer");
	if (!opts)
		opts = &def;
	uint64_t chunk = opts->chunk_size ? opts->chunk_size : FL_DEFAULT_CHUNK;

	if (chunk < 4096 || chunk > FL_MAX_CHUNK || (chunk & (chunk - 1)))
		return fl_err(-EINVAL,
			      "chunk size %llu: must be a power of two from 4096 to %u",
			      (unsigned long long)chunk, FL_MAX_CHUNK);
	if (opts->on_error != FL_ON_ERROR_POISON &&
	    opts->on_error != FL_ON_ERROR_KILL)
		return fl_err(-EINVAL, "on_error %d: must be poison or kill",
			      opts->on_error);
	pthread_once(&zero_once, zero_init);
	if (!zero_buf)
		return fl_err(-ENOMEM, "engine: cannot map the zero buffer");

	e = calloc(1, sizeof(*e));
	if (!e)
		return fl_err(-ENOMEM, "engine: out of memory");
	e->chunk = chunk;
	e->prefetch = !(opts->flags & FL_ENGINE_NO_PREFETCH);
	e->background = !(opts->flags & FL_ENGINE_NO_BACKGROUND);
	e->ra_max = opts->readahead_max ? opts->readahead_max : FL_DEFAULT_READAHEAD;
	e->quiet_ns = (uint64_t)(opts->quiet_ms ? opts->quiet_ms :
				 FL_DEFAULT_QUIET_MS) * 1000000ull;
	pthread_mutex_init(&e->ra_lock, NULL);
	pthread_mutex_init(&e->why_lock, NULL);
	pthread_mutex_init(&e->woken_lock, NULL);
	pthread_cond_init(&e->ra_cond, NULL);
	trace_init(&e->replay);
	e->on_error = opts->on_error;
	e->client_pid = opts->client_pid;
	e->pagemap_fd = -1;
	if (e->client_pid > 0 && e->client_pid != getpid()) {
		char path[40];

		snprintf(path, sizeof(path), "/proc/%d/pagemap", e->client_pid);
		e->pagemap_fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	pthread_rwlockattr_t attr;

	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr,
			PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&e->lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	pthread_mutex_init(&e->process_lock, NULL);
	e->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	e->process_worker = worker_new(opts->flags & FL_ENGINE_MOVE);
	if (e->stopfd < 0 || !e->process_worker) {
		ret = e->stopfd < 0 ?
		      fl_err(-errno, "engine: cannot create an eventfd: %m") :
		      fl_err(-ENOMEM, "engine: cannot map a staging buffer");
		goto fail;
	}

	if (opts->uffd >= 0) {
		int fl = fcntl(opts->uffd, F_GETFL);

		if (fl < 0) {
			ret = fl_err(-EBADF, "uffd %d: not an open fd",
				     opts->uffd);
			goto fail;
		}
		/*
		 * A uffd that asks for fork events would hand us a forked
		 * child's uffd we do not serve: that child's threads would
		 * sleep in their first fault for ever.  Refuse it up front.
		 */
		uint64_t feat = 0;
		int fr = uffd_fd_features(opts->uffd, &feat);

		if (fr == -ENOTTY || fr == -ENOTCONN) {
			ret = fl_err(-EINVAL, "fd %d: %s", opts->uffd,
				     fr == -ENOTTY ? "not a userfaultfd" :
				     "a userfaultfd whose UFFDIO_API was "
				     "never done");
			goto fail;
		}
		if (fr == 0 && (feat & UFFD_FEATURE_EVENT_FORK)) {
			ret = fl_err(-EINVAL, "uffd %d asks for fork events "
				     "(UFFD_FEATURE_EVENT_FORK): a forked "
				     "child's memory would not be served",
				     opts->uffd);
			goto fail;
		}
		fcntl(opts->uffd, F_SETFL, fl | O_NONBLOCK);
		e->uffd = opts->uffd;
		e->own_uffd = opts->flags & FL_ENGINE_OWN_UFFD;
	} else {
		e->uffd = uffd_create(UFFD_WANT_FEATURES, &e->features);
		if (e->uffd < 0) {
			ret = fl_err(e->uffd, "cannot open a userfaultfd: %s",
				     strerror(-e->uffd));
			goto fail;
		}
		e->own_uffd = true;
		atomic_store(&e->use_move,
			     (e->features & UFFD_FEATURE_MOVE) &&
			     (opts->flags & FL_ENGINE_MOVE));
	}
	if (opts->flags & FL_ENGINE_SHARED_STATE) {
		ret = map_state(e, opts->state_fd);
		if (ret < 0)
			goto fail;
	}
	e->takeover = opts->flags & FL_ENGINE_TAKEOVER;
	*out = e;
	return 0;
fail:
	if (e->stopfd >= 0)
		close(e->stopfd);
	if (e->pagemap_fd >= 0)
		close(e->pagemap_fd);
	worker_free(e->process_worker);
	free(e);
	return ret;
}

int fl_engine_uffd(const struct fl_engine *e)
{
	return e->uffd;
}

/*
 * The page size of the mapping at addr in process pid (0: this one), from
 * its smaps: KernelPageSize in bytes, or 0 when that cannot be told (no
 * mapping there, or a process whose smaps we may not read).
 */
static uint64_t mapped_page_size(pid_t pid, uint64_t addr)
{
	char path[40], line[256];
	unsigned long long lo, hi, kb;
	bool in = false;
	uint64_t ps = 0;
	FILE *f;

	if (pid < 0)	/* another process we cannot name: unknown */
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/smaps", pid > 0 ? pid : getpid());
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (!ps && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx-%llx ", &lo, &hi) == 2)	/* a VMA */
			in = addr >= lo && addr < hi;
		else if (in && sscanf(line, "KernelPageSize: %llu kB", &kb) == 1)
			ps = kb << 10;
	}
	fclose(f);
	return ps;
}

static int check_region(struct fl_engine *e, const struct fl_region_desc *d,
			struct fl_source *src)
{
	uint64_t ps = d->page_size;

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
	for (int i = 0; i < e->nregions; i++) {
		struct region *r = e->regions[i];

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
	uint64_t mps = mapped_page_size(e->client_pid, d->addr);

	if (mps && mps != ps)
		return fl_err(-EINVAL,
			      "region 0x%llx: page_size %llu, but the memory "
			      "there has %llu KiB pages",
			      (unsigned long long)d->addr,
			      (unsigned long long)ps,
			      (unsigned long long)(mps >> 10));
	return 0;
}

int fl_engine_add_region(struct fl_engine *e, const struct fl_region_desc *d,
			 struct fl_source *src)
{
	struct region *r;
	int ret;

	if (!e || !d || !src)
		return fl_err(-EINVAL, "add_region: missing argument");
	pthread_rwlock_wrlock(&e->lock);
	ret = check_region(e, d, src);
	if (ret == 0 && (d->flags & FL_REGION_REGISTER)) {
		ret = uffd_register(e->uffd, d->addr, d->len,
				    UFFDIO_REGISTER_MODE_MISSING |
				    (d->flags & FL_REGION_MINOR ?
				     UFFDIO_REGISTER_MODE_MINOR : 0), NULL);
		if (ret < 0)
			fl_err(ret, "region 0x%llx+%llu: cannot register: %s",
			       (unsigned long long)d->addr,
			       (unsigned long long)d->len, strerror(-ret));
	}
	if (ret == 0)
		ret = region_new(d, src, &r);
	if (ret == 0 && (ret = share_state(e, r)) < 0)
		region_free(r);
	if (ret == 0) {
		ret = add_region_locked(e, r);
		if (ret < 0)
			region_free(r);
	}
	pthread_rwlock_unlock(&e->lock);
	return ret;
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
	pthread_mutex_lock(&e->ra_lock);
	trace_free(&e->replay);
	e->replay = t;
	e->replay_next = 0;
	e->replay_off = 0;
	pthread_cond_signal(&e->ra_cond);
	pthread_mutex_unlock(&e->ra_lock);
	/* Started without anything for the filler to do: it has now. */
	if (ret == 0 && e->threads && !e->filler_running)
		ret = prefetch_start(e);
	return ret;
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
	if (e->prefetch || e->background || e->replay.n) {
		int ret = prefetch_start(e);

		if (ret < 0) {
			fl_engine_stop(e);
			return fl_err(ret, "cannot start the prefetch thread");
		}
	}
	/* Taken over: faults the dead server read are asleep; fault again. */
	pthread_rwlock_rdlock(&e->lock);
	for (int i = 0; e->takeover && i < e->nregions; i++)
		engine_wake(e, e->regions[i]->addr, e->regions[i]->len);
	pthread_rwlock_unlock(&e->lock);
	return 0;
}

int fl_engine_fd(const struct fl_engine *e)
{
	return e->uffd;
}

int fl_engine_process(struct fl_engine *e)
{
	int total = 0, n;

	pthread_mutex_lock(&e->process_lock);
	do {
		n = pump(e, e->process_worker);
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

int fl_engine_finished(const struct fl_engine *e)
{
	return atomic_load(&e->finished);
}

void fl_engine_destroy(struct fl_engine *e)
{
	if (!e)
		return;
	fl_engine_detach(e);
	fl_engine_stop(e);
	for (int i = 0; i < e->nregions; i++)
		region_free(e->regions[i]);
	free(e->regions);
	if (e->own_uffd)
		close(e->uffd);
	close(e->stopfd);
	if (e->pagemap_fd >= 0)
		close(e->pagemap_fd);
	while (e->workers) {	/* only now: see engine_worker() */
		struct worker *w = e->workers;

		e->workers = w->next;
		worker_free(w);
	}
	worker_free(e->process_worker);
	pthread_rwlock_destroy(&e->lock);
	pthread_mutex_destroy(&e->process_lock);
	pthread_mutex_destroy(&e->ra_lock);
	pthread_mutex_destroy(&e->why_lock);
	pthread_mutex_destroy(&e->woken_lock);
	pthread_cond_destroy(&e->ra_cond);
	trace_free(&e->replay);
	if (e->state_map)
		munmap((void *)e->state_map, e->state_size);
	if (e->rec) {
		trace_free(e->rec);
		free(e->rec);
	}
	free(e);
}
