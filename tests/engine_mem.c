// SPDX-License-Identifier: Apache-2.0
/*
 * engine_mem.c - what the engine does on every memory type: one table of
 * cases, each run on every memory type it declares (anonymous 4 KiB,
 * hugetlb 2 MiB, a memfd in MINOR mode; tests/mem_types.h).  On all
 * three: every page equals the snapshot under random access by 4
 * threads, for several chunk sizes and engine threads, and is copied
 * exactly once; a region ending at the end of the file; zero chunks never
 * copied (ZEROPAGE on anonymous memory and shmem, a COPY from the zero
 * buffer on hugetlb); the caller-driven loop; fl_engine_wait() with a
 * background restore and no fault; a snapshot with a zero range read
 * back, then removal by the type's own semantics (private memory reads
 * zeros after MADV_DONTNEED; shared memory keeps its page cache until
 * MADV_REMOVE).  Hugetlb: an unaligned replayed range fills each huge
 * page on its own, and a fault that finds the pool empty gets SIGBUS.
 * MINOR: a clone mapping the same memfd is served without copying, a VMA
 * grown past its region does not fault for ever, and MINOR without a
 * memfd is refused.
 *
 * Decision: the table replaces engine_basic.c (anonymous memory only),
 * and engine_hugetlb.c and engine_minor.c, which copied its cases by hand
 * for their memory type; a case runs on the types where its assertion
 * means something, with the same numbers in each type's pages (fewer of
 * them on hugetlb, within half the pool), declares the uffd features it
 * needs beyond its type's and is skipped, saying why, where the kernel
 * lacks them.  Hugetlb pages come from huge_reserve() (nr_hugepages
 * raised, and put back at exit).  Run a second time under load
 * (FL_LOAD, LOAD_TESTS in the Makefile): no point asserts how threads
 * were scheduled, only generous bounds on how long what must happen may
 * take.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>

#include "load.h"
#include "mem_types.h"

#define SEED	0x4a9e
#define LEN	(16ull << 20)		/* 8 huge pages */

/*
 * The snapshot: LEN + 2 MiB, zero in [6 MiB, 8 MiB); regions start 2 MiB
 * into it, as a second region would, so region [4 MiB, 6 MiB) is zero.
 */
static char *snap;
static struct fl_source *src;

#define REG_OFF		HPAGE
#define ZERO_AT		(2 * HPAGE)	/* region offset of the zero range */

static struct fl_engine *engine(const struct fl_engine_opts *o,
				const struct fl_region_desc *d, int *ret)
{
	struct fl_engine *e;

	if (fl_engine_create(o, &e) < 0)
		BAIL("engine: %s", fl_last_error());
	*ret = fl_engine_add_region(e, d, src);
	return e;
}

/*
 * The flat snapshot: FLAT_SIZE bytes of data and no zeros, for the cases
 * that count every page as copied (engine_basic.c's, folded in here).
 */
#define FLAT_SIZE	(64ull << 20)
static char *flat;
static struct fl_source *fsrc;

/*
 * A region of len bytes, cut on hugetlb to half the pool mem_run()
 * reserved (MEM_HUGE_POOL pages): the same case on huge pages, in fewer
 * of them.  Half: the pool is the machine's, programs beside this one
 * (another test) take pages from it while a case runs, and a fill that
 * finds it empty fails the case.
 */
static uint64_t fit(const struct mem_type *m, uint64_t len)
{
	uint64_t max = MEM_HUGE_POOL / 2 * HPAGE;

	return m->kind == MEM_HUGETLB && len > max ? max : len;
}

/* Map len bytes of m and serve them from s at off with options o. */
static struct fl_engine *serve(const struct mem_type *m, uint64_t len,
			       struct fl_source *s, uint64_t off,
			       const struct fl_engine_opts *o,
			       struct mem_area *a, int *ret)
{
	struct fl_region_desc d;
	struct fl_engine *e;

	if (mem_map(m, len, a) < 0)
		BAIL("%s: cannot map %llu bytes", m->name,
		     (unsigned long long)len);
	d = mem_region(m, a, off);
	if (fl_engine_create(o, &e) < 0)
		BAIL("engine: %s", fl_last_error());
	*ret = fl_engine_add_region(e, &d, s);
	return e;
}

struct toucher {
	uint8_t *mem;
	uint64_t len, off, page;
	unsigned int seed;
	int bad;
};

/* As many random pages as the region has, each compared whole. */
static void *touch_random(void *arg)
{
	struct toucher *t = arg;
	uint64_t npages = t->len / t->page;

	for (uint64_t i = 0; i < npages; i++) {
		uint64_t pg = (uint64_t)rand_r(&t->seed) % npages;

		if (!same_as_file(t->mem + pg * t->page, t->page,
				  t->off + pg * t->page, SEED, 0))
			t->bad++;
	}
	return NULL;
}

/*
 * len bytes at file offset off served with chunk bytes by threads engine
 * threads, 4 threads touching pages at random.  Hugetlb: the chunk is at
 * least the 2 MiB page.
 */
static void random_access(const struct mem_type *m, uint64_t len,
			  uint64_t off, uint64_t chunk, unsigned int threads)
{
	struct fl_engine_opts o = { .uffd = -1, .chunk_size = chunk };
	struct toucher t[4];
	pthread_t th[4];
	struct mem_area a;
	struct fl_engine *e;
	struct fl_stats st;
	int bad = 0, ret;

	len = fit(m, len);
	e = serve(m, len, fsrc, off, &o, &a, &ret);
	fl_engine_start(e, threads);
	for (int i = 0; i < 4; i++) {
		t[i] = (struct toucher){ a.addr, len, off, m->page,
					 17u * i + 1, 0 };
		pthread_create(&th[i], NULL, touch_random, &t[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		bad += t[i].bad;
	}
	int all = same_as_file(a.addr, len, off, SEED, 0);

	fl_engine_stop(e);	/* stats settle after the wake */
	fl_engine_stats(e, &st);
	ok(ret == 0 && bad == 0 && all, "%s: chunk %llu, %u engine threads: "
	   "%d wrong pages, full compare %s", m->name,
	   (unsigned long long)chunk, threads, bad, all ? "equal" : "DIFFERS");
	ok(st.pages_copied == len / m->page, "%s: chunk %llu: every page "
	   "copied exactly once (%llu of %llu)", m->name,
	   (unsigned long long)chunk, (unsigned long long)st.pages_copied,
	   (unsigned long long)(len / m->page));
	fl_engine_destroy(e);
	mem_unmap(&a);
}

/* Every page equals the snapshot under random multi-threaded access. */
static void case_random(const struct mem_type *m)
{
	random_access(m, 32 << 20, 0, 4096, 1);
	random_access(m, 32 << 20, 8 << 20, 64 << 10, 2);
	random_access(m, 32 << 20, 32 << 20, 2 << 20, 3);
}

/*
 * A region ending exactly at the end of the file, served with 2 MiB
 * chunks.  37 pages of 4 KiB: the fault on the last page fills the chunk
 * clipped to the region, the whole of it, so the region is compared once
 * the engine stopped.  3 huge pages: a chunk is one page (FL_MAX_CHUNK)
 * and nothing is clipped; the pages before the last are filled by their
 * own faults (or the background restore, if it got there first), so the
 * region is compared while the engine runs.
 */
static void case_edges(const struct mem_type *m)
{
	uint64_t n = m->kind == MEM_HUGETLB ? 3 : 37;
	uint64_t len = n * m->page, off = FLAT_SIZE - len;
	struct fl_engine_opts o = { .uffd = -1, .chunk_size = 2 << 20 };
	struct fl_engine *e;
	struct fl_stats st;
	struct mem_area a;
	char name[96];
	int ret;

	e = serve(m, len, fsrc, off, &o, &a, &ret);
	if (ret)
		BAIL("%s: edges: %s", m->name, fl_last_error());
	fl_engine_start(e, 1);
	int last = same_as_file(a.addr + len - m->page, m->page,
				off + len - m->page, SEED, 0);
	int huge = m->kind == MEM_HUGETLB;
	int whole = huge && same_as_file(a.addr, len, off, SEED, 0);

	fl_engine_stop(e);
	fl_engine_stats(e, &st);
	ok(last, "%s: last page of a region ending at EOF is right", m->name);
	snprintf(name, sizeof(name), huge ?
		 "%s: each of the %llu pages copied once" :
		 "%s: 2M chunk clipped to the %llu-page region", m->name,
		 (unsigned long long)n);
	is_int(st.pages_copied, n, name);
	if (!huge)
		whole = same_as_file(a.addr, len, off, SEED, 0);
	ok(whole, "%s: whole edge region right", m->name);
	fl_engine_destroy(e);
	mem_unmap(&a);
}

/*
 * n pages of data, n of zeros, then one data page, served by faults in
 * 256 KiB chunks (one page on hugetlb).  The zeros are never copied: a
 * ZEROPAGE on anonymous memory and on shmem (where it puts a zeroed page
 * in the memfd's page cache: nothing is written to it), a COPY from the
 * engine's zero buffer on hugetlb (no ZEROPAGE there); both are counted
 * as zeroed, and neither as bytes copied.
 */
static void case_zero_chunks(const struct mem_type *m)
{
	uint64_t n = m->kind == MEM_HUGETLB ? 2 : 256, pg = m->page;
	uint64_t zeros[] = { n * pg, n * pg };
	uint64_t len = (2 * n + 1) * pg;
	char *path = make_snapshot(len, SEED, zeros, 1);
	/*
	 * Faults only: a background run over data and zeros together is
	 * one COPY (right, but not what this counts), and when it starts
	 * depends on the machine's speed (it failed this test once, under
	 * TSan in CI).
	 */
	struct fl_engine_opts o = { .uffd = -1, .chunk_size = 256 << 10,
		.flags = FL_ENGINE_NO_PREFETCH | FL_ENGINE_NO_BACKGROUND };
	static const char *const how[MEM_NKINDS] = {
		[MEM_ANON] = "ZEROPAGE",
		[MEM_HUGETLB] = "COPY from the zero buffer",
		[MEM_SHMEM_MINOR] = "ZEROPAGE into the page cache",
	};
	struct fl_source *zsrc;
	struct fl_engine *e;
	struct fl_stats st;
	struct mem_area a;
	char name[96];
	int ret;

	if (fl_source_open(path, &zsrc) < 0)
		BAIL("zero chunks: %s", fl_last_error());
	e = serve(m, len, zsrc, 0, &o, &a, &ret);
	if (ret)
		BAIL("%s: zero chunks: %s", m->name, fl_last_error());
	fl_engine_start(e, 1);
	ok(is_zero_mem(a.addr + n * pg, n * pg), "%s: zero range reads zero",
	   m->name);
	ok(same_as_file(a.addr, n * pg, 0, SEED, 0) &&
	   same_as_file(a.addr + 2 * n * pg, pg, 2 * n * pg, SEED, 0),
	   "%s: data around the zero range is right", m->name);
	fl_engine_stop(e);
	fl_engine_stats(e, &st);
	snprintf(name, sizeof(name), "%s: zero chunks resolved with %s",
		 m->name, how[m->kind]);
	is_int(st.pages_zeroed, n, name);
	snprintf(name, sizeof(name), "%s: no zero byte was copied", m->name);
	is_int(st.bytes_copied, (n + 1) * pg, name);
	fl_engine_destroy(e);
	fl_source_put(zsrc);
	mem_unmap(&a);
	drop_snapshot(path);
}

/* The caller's own loop (poll the fd, fl_engine_process) serves it all. */
static void case_caller_driven(const struct mem_type *m)
{
	uint64_t len = 8 << 20;
	struct caller_loop l;
	struct fl_engine *e;
	struct mem_area a;
	pthread_t th;
	int ret;

	e = serve(m, len, fsrc, 4 << 20, NULL, &a, &ret);
	if (ret)
		BAIL("%s: caller-driven: %s", m->name, fl_last_error());
	l.e = e;
	atomic_init(&l.stop, 0);
	pthread_create(&th, NULL, caller_loop_main, &l);
	ok(same_as_file(a.addr, len, 4 << 20, SEED, 0), "%s: caller-driven "
	   "loop (fd + process) serves every byte", m->name);
	atomic_store(&l.stop, 1);
	pthread_join(th, NULL);
	ok(fl_engine_process(e) == 0, "%s: process with nothing pending "
	   "returns 0", m->name);

	/* Restored by the caller's loop, before any engine thread started. */
	uint64_t miss = 1, all = 0;
	struct fl_stats st;

	fl_engine_progress(e, &miss, &all);
	/* apart: the message's arguments are read before ok()'s condition */
	int good = fl_engine_start(e, 1) == 0 &&
		   fl_engine_stats(e, &st) == 0;

	ok(good && miss == 0 && st.restore_complete && st.restore_ms == 0,
	   "%s: restored before the threads started: restore_ms %llu (0)",
	   m->name, good ? (unsigned long long)st.restore_ms : 0ull);
	fl_engine_destroy(e);
	mem_unmap(&a);
}

/*
 * fl_engine_wait(): the restore completes with no fault at all (background
 * restore), every byte right after.
 */
static void case_wait(const struct mem_type *m)
{
	uint64_t len = fit(m, 16 << 20);
	struct fl_engine_opts o = { .quiet_ms = 1 };
	struct fl_engine *e;
	struct fl_stats st;
	struct mem_area a;
	int ret;

	e = serve(m, len, fsrc, 0, &o, &a, &ret);
	if (ret || fl_engine_start(e, 1) < 0)
		BAIL("%s: wait: %s", m->name, fl_last_error());
	ret = fl_engine_wait(e, 20000);
	fl_engine_stats(e, &st);
	ok(ret == 0 && st.restore_complete && st.faults == 0,
	   "%s: fl_engine_wait: the restore completed with no fault (%d, "
	   "%llu faults)", m->name, ret, (unsigned long long)st.faults);
	ok(same_as_file(a.addr, len, 0, SEED, 0), "%s: fl_engine_wait: every "
	   "byte there once it returns", m->name);
	fl_engine_destroy(e);
	mem_unmap(&a);
}

/*
 * Every byte, the zero range, removal and how each page was filled: the
 * last page first, then the zero range, then the rest.
 */
static void case_snapshot(const struct mem_type *m)
{
	struct fl_engine_opts o = { .uffd = -1, .chunk_size = 64 << 10 };
	struct mem_area a;
	struct fl_region_desc d;
	struct fl_engine *e;
	struct fl_stats st;
	int ret;

	ok(mem_map(m, LEN, &a) == 0, "%s: mapped %llu MiB", m->name,
	   (unsigned long long)(LEN >> 20));
	if (!a.addr)
		BAIL("%s: cannot map", m->name);
	d = mem_region(m, &a, REG_OFF);
	e = engine(&o, &d, &ret);
	ok(ret == 0, "%s: region registered%s (%s)", m->name,
	   m->kind == MEM_SHMEM_MINOR ? " MISSING|MINOR" : "",
	   ret ? fl_last_error() : "ok");
	if (ret)
		BAIL("%s: %s", m->name, fl_last_error());
	fl_engine_start(e, 2);
	ok(same_as_file(a.addr + LEN - m->page, m->page,
			REG_OFF + LEN - m->page, SEED, 0),
	   "%s: last page equals the snapshot", m->name);
	ok(is_zero_mem(a.addr + ZERO_AT, HPAGE), "%s: zero range reads zeros",
	   m->name);
	ok(same_as_file(a.addr, ZERO_AT, REG_OFF, SEED, 0) &&
	   same_as_file(a.addr + ZERO_AT + HPAGE, LEN - ZERO_AT - HPAGE,
			REG_OFF + ZERO_AT + HPAGE, SEED, 0),
	   "%s: every other byte equals the snapshot", m->name);
	if (m->kind == MEM_SHMEM_MINOR) {
		madvise(a.addr, 1 << 20, MADV_DONTNEED);
		ok(same_as_file(a.addr, 1 << 20, REG_OFF, SEED, 0),
		   "%s: MADV_DONTNEED: shared memory keeps its contents",
		   m->name);
		madvise(a.addr + (12 << 20), 1 << 20, MADV_REMOVE);
		ok(is_zero_mem(a.addr + (12 << 20), 1 << 20),
		   "%s: MADV_REMOVE: reads zeros", m->name);
	} else {
		madvise(a.addr + HPAGE, HPAGE, MADV_DONTNEED);
		ok(is_zero_mem(a.addr + HPAGE, HPAGE),
		   "%s: removed range (MADV_DONTNEED) reads zeros", m->name);
		ok(same_as_file(a.addr, HPAGE, REG_OFF, SEED, 0),
		   "%s: the page before it still the snapshot", m->name);
	}
	fl_engine_stop(e);
	fl_engine_stats(e, &st);
	switch (m->kind) {
	case MEM_HUGETLB:
		is_int(st.pages_copied, LEN / HPAGE - 1,
		       "hugetlb 2M: 7 huge pages copied, one per fault");
		is_int(st.pages_zeroed, 2,
		       "hugetlb 2M: zero page and removed page zero-filled");
		break;
	case MEM_ANON:
		/* a background run may COPY zeros: count fills, not kinds */
		is_int(st.pages_copied + st.pages_zeroed,
		       LEN / PAGE + HPAGE / PAGE, "anon 4K: every page filled "
		       "once, the removed ones again (as zeros)");
		ok(st.pages_zeroed >= HPAGE / PAGE, "anon 4K: the removed "
		   "range zero-filled (%llu zeroed)",
		   (unsigned long long)st.pages_zeroed);
		break;
	default:
		ok(st.pages_copied > 0, "%s: pages written once into the page "
		   "cache (%llu)", m->name,
		   (unsigned long long)st.pages_copied);
		break;
	}
	fl_engine_destroy(e);
	mem_unmap(&a);
}

/*
 * A replayed trace range that is not aligned to huge pages spans two of
 * them, both zero: each is filled on its own from the 2 MiB zero buffer
 * (one 4 MiB fill would copy whatever memory follows it).  Snapshot:
 * data, then zeros from 6M; region: file [2M, 10M); trace: file [7M, 9M).
 */
static void case_trace_unaligned(const struct mem_type *m)
{
	uint64_t hz[] = { 6ull << 20, 4ull << 20 };
	char *hpath = make_snapshot(10ull << 20, SEED, hz, 1);
	uint64_t rec[4] = { 0, 1, 7ull << 20, 2ull << 20 };
	struct fl_engine_opts o = { .uffd = -1, .flags =
				    FL_ENGINE_NO_PREFETCH | FL_ENGINE_NO_BACKGROUND };
	struct fl_source *hsrc;
	struct fl_engine *e;
	struct fl_stats st;
	struct mem_area a;
	char trace[64];
	FILE *f;

	snprintf(trace, sizeof(trace), "/tmp/fl-htrace-%d", getpid());
	f = fopen(trace, "wb");
	memcpy(rec, "FLTRACE1", 8);
	if (!f || fwrite(rec, sizeof(rec), 1, f) != 1)
		BAIL("cannot write %s", trace);
	fclose(f);
	if (mem_map(m, 4 * HPAGE, &a) < 0 || fl_source_open(hpath, &hsrc) < 0)
		BAIL("%s: trace case: cannot map or open", m->name);

	struct fl_region_desc d = mem_region(m, &a, HPAGE);

	if (fl_engine_create(&o, &e) < 0 || fl_engine_add_region(e, &d, hsrc))
		BAIL("%s: %s", m->name, fl_last_error());
	ok(fl_engine_replay(e, trace) == 0, "%s: unaligned trace loaded",
	   m->name);
	fl_engine_start(e, 1);
	/* a minute: however loaded, a replay that takes longer has hung */
	for (int i = 0; i < 6000; i++) {
		fl_engine_stats(e, &st);
		if (st.pages_replayed >= 2)
			break;
		usleep(10000);
	}
	is_int(st.pages_replayed, 2, "hugetlb 2M: both huge pages under the "
	       "range replayed");
	ok(is_zero_mem(a.addr + 2 * HPAGE, 2 * HPAGE),
	   "%s: both zero huge pages read zeros", m->name);
	ok(same_as_file(a.addr, 2 * HPAGE, HPAGE, SEED, 0),
	   "%s: the pages before them fault in right", m->name);
	fl_engine_destroy(e);
	mem_unmap(&a);
	unlink(trace);
	fl_source_put(hsrc);
	drop_snapshot(hpath);
}

static sigjmp_buf bus_jmp;
/* Set by the touching thread (its handler), read by main: atomics. */
static atomic_int got_bus;

static void on_bus(int sig)
{
	(void)sig;
	atomic_store(&got_bus, 1);
	siglongjmp(bus_jmp, 1);
}

struct touch {
	uint8_t *addr;
	atomic_int done;
};

/* Touch one page; a SIGBUS (poisoned page) ends the touch too. */
static void *touch_page(void *arg)
{
	struct touch *t = arg;

	if (!sigsetjmp(bus_jmp, 1))
		(void)*(volatile uint8_t *)t->addr;
	atomic_store(&t->done, 1);
	return NULL;
}

#define FREE_HUGE	"/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"
#define POOL_MAX	32	/* free pages the empty-pool case takes at most */

/*
 * More huge pages mapped than the pool holds: the fault that finds the
 * pool empty gets SIGBUS, as the kernel answers it, instead of faulting
 * forever (this kernel answers such a COPY with EEXIST, not ENOMEM).  The
 * pool is the machine's: other programs may have raised it, so the case
 * maps one page more than it holds free now.
 */
static void case_pool_empty(const struct mem_type *m)
{
	long n = sys_read_long(FREE_HUGE);
	uint64_t zeros[] = { 3 * HPAGE, HPAGE };
	struct fl_engine_opts o = { .uffd = -1, .flags =
				    FL_ENGINE_NO_PREFETCH | FL_ENGINE_NO_BACKGROUND };
	struct fl_source *psrc;
	struct fl_engine *e;
	struct fl_stats st;
	struct mem_area a;
	struct touch t;
	pthread_t th;
	char *path;
	int good = 1;

	if (n < 4 || n > POOL_MAX) {
		char why[128];

		snprintf(why, sizeof(why), "pool empty: %ld free huge pages "
			 "(4 to %d wanted: other programs use the pool)", n,
			 POOL_MAX);
		skip(3, why);
		return;
	}
	/* a snapshot one page longer than the free pool, a hole at 3 */
	path = make_snapshot((uint64_t)(n + 1) * HPAGE, SEED, zeros, 1);
	if (fl_source_open(path, &psrc) < 0 ||
	    mem_map(m, (uint64_t)(n + 1) * HPAGE, &a) < 0)
		BAIL("pool test: cannot open or map");
	struct fl_region_desc d = mem_region(m, &a, 0);

	t = (struct touch){ .addr = a.addr + n * HPAGE };
	signal(SIGBUS, on_bus);
	if (fl_engine_create(&o, &e) < 0 || fl_engine_add_region(e, &d, psrc) < 0 ||
	    fl_engine_start(e, 1) < 0)
		BAIL("pool test: %s", fl_last_error());
	for (int i = 0; i < n; i++)		/* the whole pool */
		good &= i == 3 ? is_zero_mem(a.addr + i * HPAGE, 4096) :	/* a hole */
			same_as_file(a.addr + i * HPAGE, 4096, i * HPAGE, SEED, 0);
	ok(good, "pool empty: the pool's %ld pages filled right", n);
	pthread_create(&th, NULL, touch_page, &t);
	/* a minute: a SIGBUS never takes that long, an endless fault does */
	for (int i = 0; i < 6000 && !atomic_load(&t.done); i++)
		usleep(10000);
	ok(atomic_load(&t.done) && atomic_load(&got_bus), "pool empty: the "
	   "next fault gets SIGBUS, not an endless fault");
	fl_engine_stop(e);	/* a touch still faulting would hang here */
	fl_engine_stats(e, &st);
	is_int(st.pages_poisoned, 1, "pool empty: one page poisoned");
	if (atomic_load(&t.done))
		pthread_join(th, NULL);
	fl_engine_destroy(e);
	mem_unmap(&a);
	fl_source_put(psrc);
	drop_snapshot(path);
	signal(SIGBUS, SIG_DFL);
}

/* A clone maps the same memfd: everything is in the page cache. */
static void case_clone(const struct mem_type *m)
{
	struct fl_engine_opts o = { .uffd = -1 };
	struct fl_engine *e;
	struct fl_stats st;
	struct mem_area a, c;
	int ret;

	if (mem_map(m, LEN, &a) < 0)
		BAIL("clone: cannot map");
	struct fl_region_desc d = mem_region(m, &a, REG_OFF);

	e = engine(&o, &d, &ret);
	if (ret || fl_engine_start(e, 2) < 0)
		BAIL("clone: %s", fl_last_error());
	for (uint64_t off = 0; off < LEN; off += PAGE)	/* fill the memfd */
		(void)*(volatile uint8_t *)(a.addr + off);
	fl_engine_destroy(e);

	c = a;
	c.addr = mem_map_again(&a);
	if (!c.addr)
		BAIL("clone: cannot map the memfd again");
	d = mem_region(m, &c, REG_OFF);
	e = engine(&o, &d, &ret);
	if (ret || fl_engine_start(e, 2) < 0)
		BAIL("clone: %s", fl_last_error());
	ok(same_as_file(c.addr, ZERO_AT, REG_OFF, SEED, 0) &&
	   same_as_file(c.addr + ZERO_AT + HPAGE, LEN - ZERO_AT - HPAGE,
			REG_OFF + ZERO_AT + HPAGE, SEED, 0),
	   "%s: clone: every byte right", m->name);
	fl_engine_stop(e);
	fl_engine_stats(e, &st);
	is_int(st.bytes_copied, 0, "memfd minor: clone: nothing read or "
	       "written, only CONTINUE");
	ok(st.pages_copied > 0, "%s: clone: pages mapped (%llu)", m->name,
	   (unsigned long long)st.pages_copied);
	fl_engine_destroy(e);
	munmap(c.addr, c.len);
	mem_unmap(&a);
}

static void case_no_memfd(const struct mem_type *m)
{
	struct mem_area a;
	struct fl_engine *e;

	if (mem_map(m, LEN, &a) < 0)
		BAIL("no memfd: cannot map");
	struct fl_region_desc bad = mem_region(m, &a, 0);

	bad.memfd = -1;
	bad.flags = FL_REGION_MINOR;
	fl_engine_create(NULL, &e);
	ok(fl_engine_add_region(e, &bad, src) == -EINVAL,
	   "%s without a memfd: -EINVAL (%s)", m->name, fl_last_error());
	fl_engine_destroy(e);
	mem_unmap(&a);
}

/*
 * The VMA grown by mremap past the region: its pages are no region's.  A
 * page the memfd already holds is mapped (a minor fault: ZEROPAGE answers
 * EEXIST there, and only waking made the thread fault for ever); a page it
 * does not hold reads zeros.
 */
static void case_grown(const struct mem_type *m)
{
	uint64_t len = 4 << 20;
	int fd = memfd_create("fl-grow", MFD_CLOEXEC);
	uint8_t buf[PAGE];
	struct fl_engine_opts o = {
		.uffd = -1,
		.flags = FL_ENGINE_NO_PREFETCH | FL_ENGINE_NO_BACKGROUND,
	};
	struct fl_engine *e;

	memset(buf, 0xab, sizeof(buf));
	if (ftruncate(fd, 2 * len) ||
	    pwrite(fd, buf, PAGE, len + PAGE) != PAGE)	/* beyond it */
		BAIL("memfd");
	struct mem_area a = { .len = len, .fd = fd };

	a.addr = mem_map_again(&a);
	struct fl_region_desc d = mem_region(m, &a, 0);

	if (!a.addr || fl_engine_create(&o, &e) ||
	    fl_engine_add_region(e, &d, src) || fl_engine_start(e, 1))
		BAIL("engine: %s", fl_last_error());
	alarm(20);
	ok(same_as_file(a.addr, PAGE, 0, SEED, 0), "grown: region served");
	uint8_t *g = mremap(a.addr, len, 2 * len, MREMAP_MAYMOVE);

	ok(g != MAP_FAILED && g[len + PAGE] == 0xab && g[len + 2 * PAGE] == 0,
	   "grown past the region: a page in the memfd reads it, one not "
	   "in it reads zeros (no fault loop)");
	alarm(MEM_CASE_SECS);
	fl_engine_destroy(e);
	munmap(g, 2 * len);
	close(fd);
}

#define ANON	MEM_BIT(MEM_ANON)
#define HUGE	MEM_BIT(MEM_HUGETLB)
#define MINOR	MEM_BIT(MEM_SHMEM_MINOR)

/*
 * Case x memory type x points.  The cases of engine_basic.c (random
 * access to snapshot, below) mean the same on every type: each page is
 * right and filled once, counted in that type's pages, and zero chunks
 * are never copied, by the type's own mechanism (docs/architecture.md,
 * "Data flow").  Hugetlb only: an unaligned trace and an empty pool are
 * about 2 MiB pages from a pool.  MINOR only: a clone, a missing memfd
 * and a grown VMA are about the memfd behind the mapping.  No case needs
 * a uffd feature beyond its memory type's.
 */
static const struct mem_case cases[] = {
	{ "random access", case_random, ANON | HUGE | MINOR, 0,
	  { [MEM_ANON] = 6, [MEM_HUGETLB] = 6, [MEM_SHMEM_MINOR] = 6 } },
	{ "edges", case_edges, ANON | HUGE | MINOR, 0,
	  { [MEM_ANON] = 3, [MEM_HUGETLB] = 3, [MEM_SHMEM_MINOR] = 3 } },
	{ "zero chunks", case_zero_chunks, ANON | HUGE | MINOR, 0,
	  { [MEM_ANON] = 4, [MEM_HUGETLB] = 4, [MEM_SHMEM_MINOR] = 4 } },
	{ "caller-driven", case_caller_driven, ANON | HUGE | MINOR, 0,
	  { [MEM_ANON] = 3, [MEM_HUGETLB] = 3, [MEM_SHMEM_MINOR] = 3 } },
	{ "wait", case_wait, ANON | HUGE | MINOR, 0,
	  { [MEM_ANON] = 2, [MEM_HUGETLB] = 2, [MEM_SHMEM_MINOR] = 2 } },
	{ "snapshot", case_snapshot, ANON | HUGE | MINOR, 0,
	  { [MEM_ANON] = 9, [MEM_HUGETLB] = 9, [MEM_SHMEM_MINOR] = 8 } },
	{ "unaligned trace", case_trace_unaligned, HUGE, 0,
	  { [MEM_HUGETLB] = 4 } },
	{ "pool empty", case_pool_empty, HUGE, 0, { [MEM_HUGETLB] = 3 } },
	{ "clone", case_clone, MINOR, 0, { [MEM_SHMEM_MINOR] = 3 } },
	{ "no memfd", case_no_memfd, MINOR, 0, { [MEM_SHMEM_MINOR] = 1 } },
	{ "grown", case_grown, MINOR, 0, { [MEM_SHMEM_MINOR] = 2 } },
};

static void restore(int sig)
{
	huge_restore();
	signal(sig, SIG_DFL);
	raise(sig);
}

int main(void)
{
	uint64_t zeros[] = { REG_OFF + ZERO_AT, HPAGE };
	struct fl_stats st = { .lat_ns_max = 1500 };

	load_start();	/* first: FL_LOAD spinners fork from an empty process */
	signal(SIGINT, restore);
	signal(SIGTERM, restore);
	signal(SIGALRM, restore);
	alarm(MEM_CASE_SECS);	/* the setup; mem_run() re-arms it per case */
	snap = make_snapshot(LEN + HPAGE, SEED, zeros, 1);
	if (fl_source_open(snap, &src) < 0)
		BAIL("source: %s", fl_last_error());
	flat = make_snapshot(FLAT_SIZE, SEED, NULL, 0);
	if (fl_source_open(flat, &fsrc) < 0)
		BAIL("source: %s", fl_last_error());
	is_int(fl_source_size(fsrc), FLAT_SIZE, "source size");
	/* no memory in these two: once, not per type */
	st.lat_hist[10] = 5;	/* [1024, 2048) ns */
	is_int(fl_stats_percentile(&st, 99), 1500, "a percentile is at most "
	       "the largest latency seen");
	mem_run(cases, (int)(sizeof(cases) / sizeof(*cases)));
	fl_source_put(fsrc);
	drop_snapshot(flat);
	fl_source_put(src);
	drop_snapshot(snap);
	return done_testing();
}
