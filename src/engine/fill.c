// SPDX-License-Identifier: Apache-2.0
/*
 * fill.c - resolving a claimed run of pages, for faults and prefetch alike.
 *
 * A run is filled with one operation, the cheapest that is right (see
 * resolve()); the kernel's partial-progress and error rules are folded in
 * here, and every ioctl passes the gate that fl_engine_detach() closes.
 * A page the source cannot produce is poisoned or its client killed.
 *
 * Decision: one struct fill_ctx (fill.h) describes the run being resolved;
 * the steps that go page by page (a run across a VMA's end, a source that
 * failed mid-run) resolve a copy of it for one page, so the functions are
 * ordered callee first and none calls back up.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/cache.h"
#include "engine/core.h"
#include "engine/fill.h"
#include "engine/gate.h"
#include "kernel/proc.h"
#include "source/source.h"
#include "util/error.h"
#include "util/zero.h"

#define PROBE_BYTES	256	/* read to tell a data run from a zero run */
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ	22	/* Linux 5.14 */
#endif

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

/* ---- resolving ---------------------------------------------------------- */

/*
 * Kill another process's client, once, through its pidfd: never a process
 * that got its pid after it was gone.  Said before it is done (the daemon
 * learns of the kill from the client's socket closing, which may come
 * before this thread runs again: it reads fl_engine_finished() after
 * fl_engine_stop()), and only by the first thread here: a second one's
 * kill would fail once the client is reaped, and must not unsay the first.
 */
static void kill_client(struct fl_engine *e)
{
	if (atomic_exchange(&e->killed, true))
		return;
	if (proc_pidfd_signal(e->client_pidfd, SIGKILL) < 0)
		atomic_store(&e->killed, false);
}

/* This process is the client (pid 0, or ours). */
static bool client_is_us(const struct fl_engine *e)
{
	return e->client_pid == 0 || e->client_pid == getpid();
}

/* The run's next n pages are done: c describes the rest. */
static void advance(struct fill_ctx *c, uint64_t n)
{
	c->pg += n;
	c->npg -= n;
	if (c->src)
		c->src += n << c->r->page_shift;
}

/*
 * Pages that cannot be served, ever (the run of c): POISON them (SIGBUS
 * in a thread that touches one) or kill the client, by the engine's
 * on_error policy.  They are never left for a fault or background
 * restore to retry.
 */
static int fail_pages(const struct fill_ctx *c)
{
	struct fl_engine *e = c->e;
	struct region *r = c->r;
	uint64_t pg = c->pg, npg = c->npg;

	note_failure(e);
	/*
	 * Poison by policy; in-process or for a pid unknown, first; and for
	 * another process we hold no pidfd of (nobody we may kill).
	 */
	bool poison = e->on_error == FL_ON_ERROR_POISON || e->client_pid <= 0 ||
		      (!client_is_us(e) && e->client_pidfd < 0);
	uint64_t step = npg;	/* pages per POISON: 1 after an ENOENT */

	while (poison && npg) {
		uint64_t addr = region_page_addr(r, pg), done = 0;
		uint64_t n = step < npg ? step : npg;
		int ret = engine_fill(e, UFFD_OP_POISON, addr,
				      0, n << r->page_shift, &done);
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
			if (ret == -ENOENT)
				stat_add(&e->st.pages_gone, 1);
			if (ret == -EEXIST)	/* its sleeper: this page's */
				engine_wake(e, region_page_addr(r, pg),
					    r->page_size);
			pg++;
			npg--;
			continue;
		}
		if (ret == -ESRCH) {	/* the client is gone: nobody to kill */
			region_set(r, pg, npg, PG_MISSING);
			engine_finish(e);
			return -ESRCH;
		}
		fl_err(ret, "0x%llx: cannot poison it either: %s",
		       (unsigned long long)addr, strerror(-ret));
		break;
	}
	if (!npg)
		return 0;
	/* Poisoning impossible (or not the policy): the client must go. */
	if (e->client_pidfd >= 0) {
		kill_client(e);
	} else if (client_is_us(e)) {
		/*
		 * The client is this process (no UFFDIO_POISON here: Linux
		 * before 6.6): its faulting thread would sleep for ever.
		 * Served or killed: say why, and go.
		 */
		fprintf(stderr, "libfaultline: a page can be neither served "
			"nor poisoned (%s): killing this process\n", e->why);
		kill(getpid(), SIGKILL);
	}
	region_set(r, pg, npg, PG_MISSING);
	engine_finish(e);
	return -ESRCH;
}

/* The cause of this thread's last source failure, for the rest of a run. */
static __thread char last_cause[1024];
/*
 * This thread's source failures: run_failed() asks whether its page
 * failed, which the engine's counter cannot say while other threads fail
 * pages of their own (it would fail good pages with the rest of a run).
 */
static __thread uint64_t my_source_errors;

/*
 * The source cannot produce the run of c: never serve it wrong.  Poison
 * it (SIGBUS in the faulting thread) or kill the client, by policy.
 */
static int source_failed(const struct fill_ctx *c, int err)
{
	char *cause = last_cause;
	const struct region *r = c->r;

	/*
	 * The source said why (an image's chunk and hashes, HTTP's status
	 * or curl's reason) when its read failed: keep that, not errno's
	 * word for it (each read starts with the thread's message cleared,
	 * so this one is the read's).
	 */
	snprintf(cause, sizeof(last_cause), "%s",
		 fl_last_error()[0] ? fl_last_error() : strerror(-err));
	stat_add(&c->e->st.source_errors, 1);
	my_source_errors++;
	fl_err(err, "source %s: cannot read offset %llu (+%llu): %s",
	       r->src->desc,
	       (unsigned long long)(r->src_off + (c->pg << r->page_shift)),
	       (unsigned long long)(c->npg << r->page_shift), cause);
	return fail_pages(c);
}

/* What a fill's error means for the pages not filled (fill_failed()). */
enum fill_err {
	FE_RETRY,	/* EAGAIN (events pending), ENOMEM, EFAULT: hand back */
	FE_CLIENT_GONE,	/* ESRCH: the engine finishes */
	FE_GONE,	/* ENOENT for one page: no mapping there any more */
	FE_PAGEWISE,	/* ENOENT for a run: it crosses a VMA's end */
	FE_SOURCE,	/* EFAULT copying from the source's mapping */
	FE_REFUSED,	/* anything else: the kernel refuses it for good */
};

static enum fill_err classify(int err, unsigned int how, uint64_t npages)
{
	switch (err) {
	case -EFAULT:
		return how & FILL_FROM_MAP ? FE_SOURCE : FE_RETRY;
	case -ENOENT:
		return npages > 1 ? FE_PAGEWISE : FE_GONE;
	case -ESRCH:
		return FE_CLIENT_GONE;
	case -EAGAIN:
	case -ENOMEM:
		return FE_RETRY;
	default:
		return FE_REFUSED;
	}
}

/* Account the first n pages of c's run (done bytes) as filled by c->op. */
static void note_filled(const struct fill_ctx *c, uint64_t n, uint64_t done,
			bool zero)
{
	struct engine_stats *st = &c->e->st;

	region_set(c->r, c->pg, n, PG_PRESENT);
	atomic_store_explicit(&c->e->last_fill_ns, now_ns(),
			      memory_order_relaxed);
	stat_add(zero ? &st->pages_zeroed : &st->pages_copied, n);
	if (!zero && c->op != UFFD_OP_CONTINUE)	/* CONTINUE copies nothing */
		stat_add(&st->bytes_copied, done);
	if (c->op == UFFD_OP_MOVE)
		stat_add(&st->pages_moved, n);
	if (c->counter)
		stat_add(c->counter, n);
}

/*
 * Fill the claimed run of c with c->op from c->src, EEXIST pages taken
 * as present on the way.  Returns 0, or the first error with c advanced
 * to the pages not filled.
 */
static int fill_ops(struct fill_ctx *c)
{
	struct fl_engine *e = c->e;
	struct region *r = c->r;
	bool zero = c->op == UFFD_OP_ZEROPAGE || c->src == (uintptr_t)zero_buf;
	int ret = 0;

	while (c->npg) {
		uint64_t addr = region_page_addr(r, c->pg), done = 0;

		ret = engine_fill(e, c->op, addr, c->src,
				  c->npg << r->page_shift, &done);
		if (c->op == UFFD_OP_MOVE && done == 0 && ret != 0 &&
		    ret != -EEXIST && ret != -EAGAIN && ret != -ESRCH) {
			/* Not movable here (shmem, EBUSY...): copy from now on. */
			atomic_store(&e->use_move, false);
			c->op = UFFD_OP_COPY;
			continue;
		}
		note_filled(c, done >> r->page_shift, done, zero);
		advance(c, done >> r->page_shift);
		if (ret != -EEXIST)
			break;
		/*
		 * Into hugetlb memory with the pool empty, this kernel (6.18)
		 * answers EEXIST, not ENOMEM: believe it only if the page is
		 * there, or the thread would fault on it forever.
		 */
		addr = region_page_addr(r, c->pg);
		if (r->page_size >= HUGE_2M &&
		    proc_resident(e->pagemap_fd, e->client_pid, addr) == 0) {
			ret = -ENOMEM;
			break;
		}
		/* Populated behind our back: it is present; wake its waiters. */
		stat_add(&e->st.eexist, 1);
		region_set(r, c->pg, 1, PG_PRESENT);
		engine_wake(e, addr, r->page_size);
		advance(c, 1);
		ret = 0;
	}
	return ret;
}

/*
 * The pages of c a fill left with err.  Never a loop on them: each kind
 * of error is handed back or failed for good (a run that crosses a VMA's
 * end was done page by page before: fill_claimed()).
 */
static int fill_failed(const struct fill_ctx *c, int err)
{
	struct region *r = c->r;
	uint64_t addr = region_page_addr(r, c->pg);
	uint64_t len = c->npg << r->page_shift;

	switch (classify(err, c->how, c->npg)) {
	case FE_SOURCE:		/* the source file truncated under the copy */
		fl_err(-EIO, "the file shrank under the copy (COPY: %s)",
		       strerror(-err));
		return source_failed(c, -EIO);
	case FE_REFUSED:
		/*
		 * EINVAL (the memory is not what the region says: hugetlb
		 * pages described as 4 KiB), EPERM, ENOSPC...: refused again
		 * on every fault and every background pass.  Fail the pages
		 * as a source error does (SIGBUS or the client killed).
		 */
		fl_err(err, "0x%llx+%llu: the kernel refuses to fill it: %s",
		       (unsigned long long)addr, (unsigned long long)len,
		       strerror(-err));
		return fail_pages(c);
	case FE_PAGEWISE:
	case FE_GONE:
		/*
		 * Unmapped without an UNMAP event (Firecracker asks for
		 * none): background restore must not retry it forever, and
		 * no event said it reads zeros.
		 */
		region_set(r, c->pg, c->npg, PG_GONE);
		stat_add(&c->e->st.pages_gone, c->npg);
		break;
	case FE_RETRY:
		region_set(r, c->pg, c->npg, c->prior);
		if (err == -EAGAIN)
			stat_add(&c->e->st.eagain, 1);
		break;
	case FE_CLIENT_GONE:
		region_set(r, c->pg, c->npg, c->prior);
		engine_finish(c->e);
		return err;
	}
	/*
	 * Another worker may have skipped a fault on these pages because
	 * they were ours (busy): wake them, the threads fault again and the
	 * faults are read anew.  A spurious wake is harmless.
	 */
	engine_wake(c->e, addr, len);
	return err;
}

/*
 * The whole run fails when it does not lie in one registered VMA (the
 * rest unmapped, or the region split by mprotect or madvise): find out
 * page by page which pages have no mapping; the others are filled.  Stops
 * at an error that is not about the page itself, handing the rest back.
 */
static int fill_pagewise(struct fill_ctx *c)
{
	while (c->npg) {
		struct fill_ctx one = *c;
		int ret;

		one.npg = 1;
		ret = fill_ops(&one);
		if (ret)
			ret = fill_failed(&one, ret);
		c->op = one.op;		/* MOVE may have given up */
		advance(c, 1);
		if (ret == -EAGAIN || ret == -ESRCH || ret == -EFAULT ||
		    ret == -ENOMEM) {
			region_set(c->r, c->pg, c->npg, c->prior);
			return ret;
		}
	}
	return 0;
}

/*
 * Resolve the claimed run of c with c->op from c->src.  Pages not filled
 * are handed back in state c->prior.
 */
static int fill_claimed(struct fill_ctx *c)
{
	int ret = fill_ops(c);

	if (ret == 0)
		return 0;
	if (classify(ret, c->how, c->npg) == FE_PAGEWISE)
		return fill_pagewise(c);
	return fill_failed(c, ret);
}

/* fill_claimed() with op from src. */
static int fill_with(struct fill_ctx *c, enum uffd_fill_op op, uint64_t src)
{
	c->op = op;
	c->src = src;
	return fill_claimed(c);
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
 * MADV_POPULATE_READ the source pages of [off, off+len) (map is the
 * source's mapping of off; a layered source has one per layer, so the
 * blocks done are the mapping's, not the source's).  For a fill of 2 MiB
 * or more (block) the 2 MiB blocks around it, once per block and worker:
 * a background piece comes in several runs of the same block.  Else only
 * its own pages: a random fault, or a replayed run of a random trace,
 * would map a whole block it does not need (fault-latency during a
 * restore: 16-32 us p50 served instead of 64-128).  Each time (again) for
 * hugetlb, where a source page evicted since would mean ENOMEM.
 */
static int map_source(struct worker *w, const struct fl_source *src,
		      const void *map, uint64_t off, size_t len, bool again,
		      bool block)
{
	uint64_t align = block ? HUGE_2M : 4096;
	uint64_t lo = off & ~(align - 1);
	uint64_t hi = (off + len + align - 1) & ~(align - 1);
	const uint8_t *base = (const uint8_t *)map - off;

	if (hi > src->size)
		hi = (src->size + 4095) & ~4095ull;
	if (!again && w->pop_map == base && lo >= w->pop_lo && hi <= w->pop_hi)
		return 0;
	if (madvise((void *)(base + lo), hi - lo, MADV_POPULATE_READ) < 0) {
		w->pop_map = NULL;
		return -errno;
	}
	w->pop_map = base;
	w->pop_lo = lo;
	w->pop_hi = hi;
	return 0;
}

/*
 * Resolve the claimed run of c by the cheapest means: zero pages for
 * removed pages, holes and all-zero data; for shared-memory regions
 * (minor mode) one write into the page cache and UFFDIO_CONTINUE; MOVE
 * out of the staging buffer in-process when enabled; COPY otherwise.  A
 * source that cannot produce the run (its read, or the write into the
 * memfd, failed) is left to the caller: *src_err says why, nothing filled.
 */
static int resolve(struct fill_ctx *c, int *src_err)
{
	struct region *r = c->r;
	struct fl_source *src = r->src;
	uint64_t off = r->src_off + (c->pg << r->page_shift);
	uint64_t moff = r->memfd_off + (c->pg << r->page_shift);
	size_t len = (size_t)(c->npg << r->page_shift);
	bool zero = c->prior == PG_REMOVED;
	bool move = atomic_load(&c->e->use_move);
	int ret;

	/*
	 * A clone region: the page in the cache's fill map (filled now, or
	 * waited for), then mapped.  Never by the page cache's say: a hole
	 * planted with zeros is there too.
	 */
	if (r->cache) {
		ret = scache_fill(r->cache, off, len, c->w->buf);
		if (ret < 0)
			return *src_err = ret;
		return fill_with(c, UFFD_OP_CONTINUE, 0);
	}
	/* Shared memory keeps its page cache across MADV_DONTNEED. */
	if (r->memfd >= 0 && memfd_cached(r->memfd, moff, len))
		return fill_with(c, UFFD_OP_CONTINUE, 0);
	if (!zero && src->ops->hole && src->ops->hole(src, off, len))
		zero = true;
	const void *map = zero || r->memfd >= 0 || move || !src->ops->map ?
			  NULL : src->ops->map(src, off, len);

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
	if (map && map_source(c->w, src, map, off, len,
			      r->page_size >= HUGE_2M, c->how & FILL_BLOCK) < 0)
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
		fl_err_clear();	/* a failure's cause is the read's own */
		ret = src->ops->read(src, head, probe, off);
		if (ret < 0)
			return *src_err = ret;
		if (!is_zero(head, probe)) {
			c->how |= FILL_FROM_MAP;
			return fill_with(c, UFFD_OP_COPY, (uintptr_t)map);
		}
	}
	if (!zero) {
		fl_err_clear();
		ret = src->ops->read(src, c->w->buf, len, off);
		if (ret < 0)
			return *src_err = ret;
		zero = is_zero(c->w->buf, len);
	}
	/*
	 * No ZEROPAGE on hugetlbfs; nor while writes are tracked: it has no
	 * write-protect mode, and a write between it and a protection
	 * would go unseen.
	 */
	if (zero && (r->page_size >= HUGE_2M || atomic_load(&c->e->track)))
		return fill_with(c, UFFD_OP_COPY, (uintptr_t)zero_buf);
	if (zero)
		return fill_with(c, UFFD_OP_ZEROPAGE, 0);
	if (r->memfd >= 0) {
		fl_err_clear();
		int64_t n = memfd_fill(r->memfd, c->w->buf, moff, len);

		if (n < 0)
			return *src_err = (int)n;
		stat_add(&c->e->st.bytes_copied, (uint64_t)n);
		return fill_with(c, UFFD_OP_CONTINUE, 0);
	}
	return fill_with(c, r->page_size < HUGE_2M && move ? UFFD_OP_MOVE :
			 UFFD_OP_COPY, (uintptr_t)c->w->buf);
}

/*
 * The source could not produce the run of c (err): fill it page by page
 * until a page fails too, so that the readable pages before the failure
 * (a file truncated mid-chunk) are served, not failed with it; from that
 * page on the run fails at once.  A source that gave up waiting
 * (-ETIMEDOUT: an origin that answers nothing) would wait as long again
 * for the first page, and the faulting thread with it: the run fails
 * whole.
 */
static int run_failed(const struct fill_ctx *c, int err)
{
	if (c->npg == 1 || err == -ETIMEDOUT)
		return source_failed(c, err);
	for (uint64_t i = 0; i < c->npg; i++) {
		uint64_t errs = my_source_errors;
		struct fill_ctx one = *c;
		int serr = 0, ret;

		one.pg = c->pg + i;
		one.npg = 1;
		ret = resolve(&one, &serr);
		if (serr)
			ret = source_failed(&one, serr);
		/*
		 * The rest of the run from c's pages, not one's: a fill
		 * advances one past the pages it filled.
		 */
		if (ret < 0 && ret != -ENOENT) {
			region_set(c->r, c->pg + i + 1, c->npg - i - 1,
				   c->prior);
			return ret;
		}
		/*
		 * This page failed as well: the rest would too (the end of
		 * the file, a server that answers errors) and each try could
		 * take a remote source's whole retry budget.  Fail them now.
		 */
		if (my_source_errors != errs) {
			struct fill_ctx rest = *c;

			if (i + 1 == c->npg)
				return 0;
			rest.pg = c->pg + i + 1;
			rest.npg = c->npg - i - 1;
			fl_err(err, "%s", last_cause);	/* that page's cause */
			return source_failed(&rest, err);
		}
	}
	return 0;
}

int fill_run(struct fill_ctx *c)
{
	int serr = 0;
	int ret = resolve(c, &serr);

	return serr ? run_failed(c, serr) : ret;
}

/*
 * Fill every missing (and, for faults, removed) page of [first, last) of
 * job's region in runs.  Pages busy in another worker are left to it: its
 * COPY wakes our faulting thread too.  Prefetch never fills removed pages:
 * the memory was given back (balloon) and stays unpopulated until touched.
 */
int engine_fill_range(const struct fill_ctx *job, uint64_t first,
		      uint64_t last)
{
	struct fl_engine *e = job->e;
	struct region *r = job->r;
	unsigned int how = job->how;
	uint64_t i = first;
	bool ran = false;
	uint64_t max_bytes = job->max_run && job->max_run < FL_MAX_CHUNK ?
			     job->max_run : FL_MAX_CHUNK;

	if ((last - first) << r->page_shift >= HUGE_2M)
		how |= FILL_BLOCK;

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
		struct fill_ctx c = *job;

		c.how = how;
		c.pg = i;
		c.npg = j - i;
		c.prior = s;
		int ret = fill_run(&c);

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

/*
 * Fill the page at page (ps bytes) as new memory reads: zeros (a zeroed
 * huge page on hugetlbfs, where ZEROPAGE is refused), or for shared
 * memory whose page cache has it (ZEROPAGE says EEXIST) that page.
 */
int fill_zeros(struct fl_engine *e, uint64_t page, uint64_t ps)
{
	uint64_t done;
	int ret = ps >= HUGE_2M || atomic_load(&e->track) ?
		  engine_fill(e, UFFD_OP_COPY, page, (uintptr_t)zero_buf, ps,
			      &done) :
		  engine_fill(e, UFFD_OP_ZEROPAGE, page, 0, ps, &done);

	if (ret == -EEXIST)	/* in the page cache: map it */
		ret = engine_fill(e, UFFD_OP_CONTINUE, page, 0, ps, &done);
	return ret;
}

/* The zero buffer (once per process); 0, or -ENOMEM. */
int fill_init(void)
{
	pthread_once(&zero_once, zero_init);
	return zero_buf ? 0 : -ENOMEM;
}
