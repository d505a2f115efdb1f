// SPDX-License-Identifier: Apache-2.0
/*
 * engine_hugetlb.c - 2 MiB hugetlb regions: every huge page equals the
 * snapshot, zero huge pages are served as zeroed copies (ZEROPAGE does not
 * work on hugetlbfs), removed huge pages read as zeros, and a fault that
 * finds the pool empty gets SIGBUS.  Reserves pages
 * through /proc/sys/vm/nr_hugepages and restores the old value.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "faultline.h"
#include "tap.h"
#include "util.h"
#include "hugetlb.h"

#define SEED 0x4a9e
#define NHUGE 8

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

/*
 * More huge pages mapped than the pool holds: the fault that finds the
 * pool empty gets SIGBUS, as the kernel answers it, instead of faulting
 * forever (this kernel answers such a COPY with EEXIST, not ENOMEM).
 */
static void test_pool_empty(struct fl_source *src)
{
	uint64_t len = (NHUGE + 1) * HPAGE;	/* the whole snapshot */
	uint8_t *mem = map_anon(len, 1);
	struct fl_engine_opts o = { .uffd = -1, .flags =
				    FL_ENGINE_NO_PREFETCH | FL_ENGINE_NO_BACKGROUND };
	struct fl_region_desc d = { .addr = (uintptr_t)mem, .len = len,
				    .page_size = HPAGE, .flags = FL_REGION_REGISTER };
	struct touch t = { .addr = mem + NHUGE * HPAGE };
	struct fl_engine *e;
	struct fl_stats st;
	pthread_t th;
	int good = 1;

	signal(SIGBUS, on_bus);
	if (!mem || fl_engine_create(&o, &e) < 0 ||
	    fl_engine_add_region(e, &d, src) < 0 || fl_engine_start(e, 1) < 0)
		BAIL("pool test: %s", fl_last_error());
	for (int i = 0; i < NHUGE; i++)		/* the whole pool */
		good &= i == 3 ? is_zero_mem(mem + i * HPAGE, 4096) :	/* a hole */
			same_as_file(mem + i * HPAGE, 4096, i * HPAGE, SEED, 0);
	ok(good, "pool empty: the pool's %d pages filled right", NHUGE);
	pthread_create(&th, NULL, touch_page, &t);
	for (int i = 0; i < 500 && !atomic_load(&t.done); i++)
		usleep(10000);
	ok(atomic_load(&t.done) && atomic_load(&got_bus), "pool empty: the next fault gets SIGBUS, not "
	   "an endless fault");
	fl_engine_stop(e);	/* a touch still faulting would hang here */
	fl_engine_stats(e, &st);
	is_int(st.pages_poisoned, 1, "pool empty: one page poisoned");
	if (atomic_load(&t.done))
		pthread_join(th, NULL);
	fl_engine_destroy(e);
	munmap(mem, len);
	signal(SIGBUS, SIG_DFL);
}

static void restore(int sig)
{
	huge_restore();
	signal(sig, SIG_DFL);
	raise(sig);
}

int main(void)
{
	uint64_t len = NHUGE * HPAGE;
	uint64_t zeros[] = { 3 * HPAGE, HPAGE };
	struct fl_source *src;
	struct fl_engine *e;
	struct fl_stats st;

	signal(SIGINT, restore);
	signal(SIGTERM, restore);
	signal(SIGALRM, restore);
	alarm(120);	/* a fault left looping must fail the test, not hang it */
	if (huge_reserve(NHUGE) < 0) {
		huge_restore();
		skip_all("cannot reserve 2 MiB hugetlb pages");
	}
	char *path = make_snapshot(len + HPAGE, SEED, zeros, 1);
	uint8_t *mem = map_anon(len, 1);

	ok(mem != NULL, "mapped %d hugetlb pages", NHUGE);
	fl_source_open(path, &src);
	struct fl_engine_opts o = { .uffd = -1, .chunk_size = 64 << 10 };

	fl_engine_create(&o, &e);
	/* Offset by one huge page into the file, as a second region would be. */
	struct fl_region_desc d = { .addr = (uintptr_t)mem, .len = len, .page_size = HPAGE, .src_offset = HPAGE, .flags = FL_REGION_REGISTER };
	int ret = fl_engine_add_region(e, &d, src);

	ok(ret == 0, "hugetlb region registered (%s)", ret ? fl_last_error() : "ok");
	fl_engine_start(e, 2);
	/* Touch the last huge page first, then the rest. */
	ok(same_as_file(mem + len - HPAGE, HPAGE, len, SEED, 0),
	   "last huge page equals the snapshot");
	ok(is_zero_mem(mem + 2 * HPAGE, HPAGE), "zero huge page reads zeros");
	ok(same_as_file(mem, 2 * HPAGE, HPAGE, SEED, 0) &&
	   same_as_file(mem + 3 * HPAGE, len - 4 * HPAGE, 4 * HPAGE, SEED, 0),
	   "every other huge page equals the snapshot");
	madvise(mem + HPAGE, HPAGE, MADV_DONTNEED);
	ok(is_zero_mem(mem + HPAGE, HPAGE), "removed huge page reads zeros");
	fl_engine_stop(e);
	fl_engine_stats(e, &st);
	is_int(st.pages_copied, NHUGE - 1, "7 huge pages copied, one per fault");
	is_int(st.pages_zeroed, 2, "zero page and removed page zero-filled");
	fl_engine_destroy(e);
	munmap(mem, len);

	/*
	 * A replayed trace range that is not aligned to huge pages spans two
	 * of them, both zero: each is filled on its own from the 2 MiB zero
	 * buffer (one 4 MiB fill would copy whatever memory follows it).
	 * Snapshot: data, then zeros from 6M; region: file [2M, 10M); trace:
	 * file [7M, 9M).
	 */
	uint64_t hz[] = { 6ull << 20, 4ull << 20 };
	char *hpath = make_snapshot(10ull << 20, SEED, hz, 1);
	struct fl_source *hsrc;
	char trace[64];
	uint64_t rec[4] = { 0, 1, 7ull << 20, 2ull << 20 };
	FILE *f;

	snprintf(trace, sizeof(trace), "/tmp/fl-htrace-%d", getpid());
	f = fopen(trace, "wb");
	memcpy(rec, "FLTRACE1", 8);
	fwrite(rec, sizeof(rec), 1, f);
	fclose(f);
	mem = map_anon(4 * HPAGE, 1);
	struct fl_engine_opts ro = { .uffd = -1, .flags =
				     FL_ENGINE_NO_PREFETCH | FL_ENGINE_NO_BACKGROUND };
	struct fl_region_desc rd = { .addr = (uintptr_t)mem, .len = 4 * HPAGE,
				     .page_size = HPAGE, .src_offset = HPAGE,
				     .flags = FL_REGION_REGISTER };

	fl_source_open(hpath, &hsrc);
	fl_engine_create(&ro, &e);
	fl_engine_add_region(e, &rd, hsrc);
	ok(fl_engine_replay(e, trace) == 0, "unaligned trace loaded");
	fl_engine_start(e, 1);
	for (int i = 0; i < 500; i++) {
		fl_engine_stats(e, &st);
		if (st.pages_replayed >= 2)
			break;
		usleep(10000);
	}
	is_int(st.pages_replayed, 2, "both huge pages under the range replayed");
	ok(is_zero_mem(mem + 2 * HPAGE, 2 * HPAGE),
	   "both zero huge pages read zeros");
	ok(same_as_file(mem, 2 * HPAGE, HPAGE, SEED, 0),
	   "the pages before them fault in right");
	fl_engine_destroy(e);
	munmap(mem, 4 * HPAGE);
	unlink(trace);
	fl_source_put(hsrc);
	drop_snapshot(hpath);
	test_pool_empty(src);
	fl_source_put(src);
	drop_snapshot(path);
	huge_restore();
	return done_testing();
}
