/*
 * engine_hugetlb.c - 2 MiB hugetlb regions: every huge page equals the
 * snapshot, zero huge pages are served as zeroed copies (ZEROPAGE does not
 * work on hugetlbfs), removed huge pages read as zeros.  Reserves pages
 * through /proc/sys/vm/nr_hugepages and restores the old value.
 */
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "faultline.h"
#include "tap.h"
#include "util.h"

#define SEED 0x4a9e
#define NHUGE 8

static void restore(int sig)
{
	hugetlb_restore();
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
	if (hugetlb_reserve(NHUGE) < 0) {
		hugetlb_restore();
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
	unlink(hpath);
	free(hpath);
	fl_source_put(src);
	unlink(path);
	hugetlb_restore();
	return done_testing();
}
