// SPDX-License-Identifier: Apache-2.0
/*
 * engine_mem.c - the engine across memory types: one table of cases, each
 * run on every type it declares (anonymous 4 KiB, hugetlb 2 MiB, a memfd
 * in MINOR mode; tests/mem_types.h).  Every page equals the snapshot, zero
 * ranges read zeros, removal follows the type's own semantics (private
 * memory reads zeros after MADV_DONTNEED; shared memory keeps its page
 * cache until MADV_REMOVE), each page is filled once.  Hugetlb: zero huge
 * pages are served as zeroed copies (ZEROPAGE does not work there), an
 * unaligned replayed range fills each huge page on its own, and a fault
 * that finds the pool empty gets SIGBUS.  MINOR: a clone mapping the same
 * memfd is served without copying, a VMA grown past its region does not
 * fault for ever, and MINOR without a memfd is refused.
 *
 * Decision: the table replaces engine_hugetlb.c and engine_minor.c, which
 * copied engine_basic.c's cases by hand for their memory type; each case
 * declares the uffd features it needs beyond its type's and is skipped,
 * saying why, where the kernel lacks them.  Hugetlb pages come from
 * huge_reserve() (nr_hugepages raised, and put back at exit).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>

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
	alarm(120);
	fl_engine_destroy(e);
	munmap(g, 2 * len);
	close(fd);
}

#define ANON	MEM_BIT(MEM_ANON)
#define HUGE	MEM_BIT(MEM_HUGETLB)
#define MINOR	MEM_BIT(MEM_SHMEM_MINOR)

static const struct mem_case cases[] = {
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

	signal(SIGINT, restore);
	signal(SIGTERM, restore);
	signal(SIGALRM, restore);
	alarm(120);	/* a fault left looping must fail the test, not hang it */
	snap = make_snapshot(LEN + HPAGE, SEED, zeros, 1);
	if (fl_source_open(snap, &src) < 0)
		BAIL("source: %s", fl_last_error());
	mem_run(cases, (int)(sizeof(cases) / sizeof(*cases)));
	fl_source_put(src);
	drop_snapshot(snap);
	return done_testing();
}
