// SPDX-License-Identifier: Apache-2.0
/*
 * engine_args.c - bad arguments are rejected with -EINVAL and a message that
 * names what was wrong.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "faultline.h"
#include "tap.h"
#include "util.h"

static int is_zero_buf(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

static void expect_einval(int ret, const char *what, const char *word)
{
	ok(ret == -EINVAL && strstr(fl_last_error(), word),
	   "%s: -EINVAL naming '%s' (%d: %s)", what, word, ret, fl_last_error());
}

/* What the cases share: the snapshot, its source, the engine and memory. */
static struct {
	char *path;
	struct fl_source *src;
	struct fl_engine *e;
	void *mem;
	uint64_t base;		/* 2 MiB aligned in mem */
	struct fl_region_desc d;
} fx;

/* Engine options: chunk sizes, error policy, client, reserved space. */
static int case_engine_opts(void)
{
	struct fl_engine *e;
	struct fl_engine_opts o = { .uffd = -1, .chunk_size = 3000 };

	expect_einval(fl_engine_create(&o, &e), "chunk 3000", "chunk size 3000");
	o.chunk_size = 4 << 20;
	expect_einval(fl_engine_create(&o, &e), "chunk 4M", "chunk size");
	o.chunk_size = 2048;
	expect_einval(fl_engine_create(&o, &e), "chunk 2K", "chunk size");
	o.chunk_size = 0;
	o.on_error = 7;
	expect_einval(fl_engine_create(&o, &e), "on_error 7", "on_error");
	o.on_error = 0;
	o.flags = FL_ENGINE_CLIENT_PIDFD;
	o.client_pidfd = -1;
	expect_einval(fl_engine_create(&o, &e), "a client_pidfd, no pid",
		      "client's pid");
	o.client_pid = getppid();
	o.client_pidfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ok(fl_engine_create(&o, &e) == -EBADF &&
	   strstr(fl_last_error(), "not a pidfd"),
	   "client_pidfd that is no pidfd: -EBADF saying so (%s)",
	   fl_last_error());
	close(o.client_pidfd);
	o.flags = 0;
	o.client_pid = 0;
	o.client_pidfd = 0;

	/* 0.3: what this library does not know must be zero. */
	o.reserved[7] = 1;
	expect_einval(fl_engine_create(&o, &e), "engine opts with non-zero "
		      "reserved space", "reserved");
	o.reserved[7] = 0;
	o.flags = 1u << 31;
	expect_einval(fl_engine_create(&o, &e), "an unknown engine flag",
		      "unknown");
	o.flags = 0;
	o.client_pid = -1;
	expect_einval(fl_engine_create(&o, &e), "client_pid -1 (0.2's "
		      "remote client: FL_ENGINE_CLIENT_REMOTE now)", "client_pid");
	o.client_pid = getpid();
	o.flags = FL_ENGINE_CLIENT_REMOTE;
	expect_einval(fl_engine_create(&o, &e), "a remote client with our "
		      "own pid", "client_pid");
	o.flags = 0;
	o.client_pid = 0;
	return 0;
}

/* Sources: source options, missing files, directories, FIFOs. */
static int case_sources(void)
{
	struct fl_source *src;
	struct fl_source_opts so = { .reserved[0] = 1 };

	expect_einval(fl_source_open_ex(fx.path, &so, &src), "source opts with "
		      "non-zero reserved space", "reserved");

	ok(fl_source_open("/nonexistent/snap", &src) == -ENOENT &&
	   strstr(fl_last_error(), "/nonexistent/snap"),
	   "missing file: -ENOENT naming the path (%s)", fl_last_error());
	ok(fl_source_open("/tmp", &src) == -EINVAL,
	   "a directory is not a source (%s)", fl_last_error());
	/* A FIFO: the open must not wait for a writer that never comes. */
	char fifo[64];

	snprintf(fifo, sizeof(fifo), "/tmp/fl-fifo-%d", getpid());
	alarm(10);
	ok(mkfifo(fifo, 0600) == 0 && fl_source_open(fifo, &src) == -EINVAL &&
	   strstr(fl_last_error(), "not a regular file"),
	   "a FIFO is refused at once, not waited on (%s)", fl_last_error());
	unlink(fifo);
	alarm(0);
	return 0;
}

/* The uffd: fork events, not a uffd, no UFFDIO_API, a zeroed struct. */
static int case_uffd(void)
{
	struct fl_engine *e;

	int ffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
	struct uffdio_api api = { .api = UFFD_API,
				  .features = UFFD_FEATURE_EVENT_FORK };

	if (ffd < 0 || ioctl(ffd, UFFDIO_API, &api) < 0) {
		skip(1, "no userfaultfd with fork events here");
	} else {
		struct fl_engine_opts fo = { .uffd = ffd,
					     .flags = FL_ENGINE_ADOPT };

		expect_einval(fl_engine_create(&fo, &e), "uffd with EVENT_FORK",
			      "fork events");
	}
	if (ffd >= 0)
		close(ffd);
	/* Not a userfaultfd; a userfaultfd whose UFFDIO_API was never done. */
	struct fl_engine_opts no = { .uffd = open("/dev/null", O_RDONLY),
				     .flags = FL_ENGINE_ADOPT };

	expect_einval(fl_engine_create(&no, &e), "/dev/null as the uffd",
		      "not a userfaultfd");
	close(no.uffd);
	no.uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
	expect_einval(fl_engine_create(&no, &e), "a uffd without UFFDIO_API",
		      "never done");
	close(no.uffd);
	/* A zeroed struct is the default engine, never an adoption of fd 0. */
	struct fl_engine_opts zero = { 0 };

	int ret = fl_engine_create(&zero, &e);

	ok(ret == 0 && fl_engine_uffd(e) > 0, "zeroed options: an engine "
	   "with a uffd of its own (fd %d), not fd 0 (%s)",
	   ret ? -1 : fl_engine_uffd(e), ret ? fl_last_error() : "");
	if (ret == 0)
		fl_engine_destroy(e);
	zero.uffd = 7;
	expect_einval(fl_engine_create(&zero, &e), "uffd 7 without "
		      "FL_ENGINE_ADOPT", "FL_ENGINE_ADOPT");
	return 0;
}

/* Regions the engine refuses, each with the word that names why. */
static int case_bad_regions(void)
{
	struct fl_engine_opts o = { .uffd = -1 };

	ok(fl_source_open(fx.path, &fx.src) == 0, "open snapshot");
	ok(fl_engine_create(&o, &fx.e) == 0, "create engine with defaults");

	struct fl_engine *e = fx.e;
	struct fl_source *src = fx.src;

	fx.mem = map_anon(4 << 20, 0);
	fx.base = ((uint64_t)(uintptr_t)fx.mem + (2 << 20) - 1) &
		  ~((2ull << 20) - 1);
	fx.d = (struct fl_region_desc){ .addr = fx.base, .len = 1 << 20,
					.page_size = 8192 };

	expect_einval(fl_engine_add_region(e, &fx.d, src), "page size 8192",
		      "page_size 8192");
	fx.d.page_size = 4096;
	fx.d.addr = fx.base + 100;
	expect_einval(fl_engine_add_region(e, &fx.d, src), "unaligned address",
		      "multiples of page_size");
	fx.d.addr = fx.base;
	fx.d.len = 1000;
	expect_einval(fl_engine_add_region(e, &fx.d, src), "unaligned length",
		      "multiples of page_size");
	fx.d.len = 0;
	expect_einval(fl_engine_add_region(e, &fx.d, src), "zero length",
		      "non-zero");
	fx.d.len = 2 << 20;
	expect_einval(fl_engine_add_region(e, &fx.d, src), "beyond the file",
		      "beyond the end");
	fx.d.len = 1 << 20;
	fx.d.src_offset = ~0ull - 4095;
	expect_einval(fl_engine_add_region(e, &fx.d, src), "offset overflow",
		      "beyond the end");
	fx.d.src_offset = 0;
	/* Memory nobody registered, added without FL_REGION_REGISTER: it
	 * would read zeros forever after (the kernel's answer). */
	expect_einval(fl_engine_add_region(e, &fx.d, src), "unregistered memory",
		      "not registered with userfaultfd");
	/* (with FL_REGION_REGISTER it is added: "good region added") */

	/* Pages not what the region says: no COPY could ever fill them
	 * (Firecracker's handshake saying 4096 for hugetlb memory). */
	void *huge = mmap(NULL, 2 << 20, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB |
			  MAP_NORESERVE, -1, 0);

	if (huge == MAP_FAILED) {
		skip_missing(1, "hugetlb", "a MAP_HUGETLB mapping is refused "
			     "here");
	} else {
		fx.d.addr = (uintptr_t)huge;
		fx.d.page_size = 4096;
		fx.d.len = 1 << 20;
		expect_einval(fl_engine_add_region(e, &fx.d, src),
			      "hugetlb memory described as 4 KiB pages",
			      "2048 KiB pages");
		/* A client in a pid namespace we cannot see: not our memory. */
		struct fl_engine_opts po = { .uffd = -1,
			.flags = FL_ENGINE_CLIENT_REMOTE };
		struct fl_engine *pe;

		ok(fl_engine_create(&po, &pe) == 0 &&
		   fl_engine_add_region(pe, &fx.d, src) == 0,
		   "client pid unknown (REMOTE): this process's mappings are not "
		   "taken for the client's (%s)", fl_last_error());
		fl_engine_destroy(pe);
		munmap(huge, 2 << 20);
		fx.d.addr = fx.base;
	}
	return 0;
}

/* The last refusals, then good regions served, started once. */
static int case_good_regions(void)
{
	struct fl_engine *e = fx.e;
	struct fl_source *src = fx.src;
	uint64_t base = fx.base;
	int ret;

	fx.d.src_offset = 0;
	fx.d.addr = ~0ull - 4095;
	fx.d.len = 8192;
	expect_einval(fl_engine_add_region(e, &fx.d, src), "address wraps",
		      "wraps");
	fx.d.addr = base;
	fx.d.len = 1 << 20;
	fx.d.flags = 1u << 30;
	expect_einval(fl_engine_add_region(e, &fx.d, src), "an unknown region "
		      "flag", "region flags");
	fx.d.flags = FL_REGION_REGISTER;
	fx.d.reserved[3] = 1;
	expect_einval(fl_engine_add_region(e, &fx.d, src), "a region with "
		      "non-zero reserved space", "reserved");
	fx.d.reserved[3] = 0;
	fx.d.flags = FL_REGION_REGISTER;
	ok(fl_engine_add_region(e, &fx.d, src) == 0, "good region added");
	/* A zeroed descriptor but where and how long: 4 KiB pages. */
	struct fl_region_desc zd = { 0 };

	zd.addr = base + (1 << 20);
	zd.len = 1 << 20;
	zd.flags = FL_REGION_REGISTER;
	ret = fl_engine_add_region(e, &zd, src);
	ok(ret == 0, "a zeroed region descriptor (page_size 0) is added, "
	   "as 4 KiB pages (%s)", ret ? fl_last_error() : "");
	fx.d.addr = base + (512 << 10);
	expect_einval(fl_engine_add_region(e, &fx.d, src), "overlap", "overlaps");
	fx.d.addr = base;
	fx.d.page_size = 2 << 20;
	fx.d.len = 2 << 20;
	expect_einval(fl_engine_add_region(e, &fx.d, src), "huge region beyond file",
		      "beyond the end");
	expect_einval(fl_engine_start(e, 0), "zero threads", "threads 0");
	ok(fl_engine_start(e, 1) == 0, "start one thread");
	ok(fl_engine_start(e, 1) == -EBUSY, "second start is -EBUSY");
	ok(same_as_file((void *)(uintptr_t)base, 1 << 20, 0, 1, 0),
	   "region still served after all the rejected calls");
	ok(same_as_file((void *)(uintptr_t)(base + (1 << 20)), 1 << 20, 0, 1,
			0), "the page_size 0 region is served");
	return 0;
}

/* Statistics by size: a shorter reader, a longer one, too short. */
static int case_stats(void)
{
	struct fl_engine *e = fx.e;
	size_t fixed = offsetof(struct fl_stats, faults);
	size_t big = sizeof(struct fl_stats) + 64;
	struct fl_stats st;
	unsigned char *b = malloc(big);
	int ret = fl_engine_stats(e, &st);	/* before its counts are printed */

	ok(ret == 0 && st.pages_copied > 0,
	   "fl_engine_stats(): the caller's size (%llu pages copied)",
	   (unsigned long long)st.pages_copied);
	memset(&st, 0xff, sizeof(st));
	ok(fl_engine_stats_sized(e, &st, fixed) == 0 && st.lat_hist[0] !=
	   ~0ull && st.faults == ~0ull, "an older reader's size: its "
	   "prefix filled, nothing written past it");
	memset(b, 0xff, big);
	ok(b && fl_engine_stats_sized(e, (struct fl_stats *)b, big) == 0 &&
	   ((struct fl_stats *)b)->pages_copied > 0 &&
	   is_zero_buf(b + sizeof(st), 64), "a newer reader's size: "
	   "counters this library lacks read 0");
	ok(fl_engine_stats_sized(e, &st, fixed - 8) == -EINVAL,
	   "a size short of the fixed fields: -EINVAL (%s)", fl_last_error());
	char *js = fl_stats_json_sized(&st, fixed);

	ok(js && strstr(js, "\"faults\":0"), "JSON of an older reader's "
	   "stats: counters past its size read 0");
	ok(js && strstr(js, "\"latency_ns_p50_le\":") &&
	   strstr(js, "\"latency_ns_p99_le\":"), "JSON: the percentiles "
	   "named as the bucket bounds they are (_le)");
	free(js);
	free(b);
	fl_engine_stop(e);
	expect_einval(fl_engine_start(e, 1), "start after stop",
		      "does not start again");
	return 0;
}

static const struct tap_case cases[] = {
	{ "engine options", case_engine_opts },
	{ "sources", case_sources },
	{ "the uffd", case_uffd },
	{ "bad regions", case_bad_regions },
	{ "good regions", case_good_regions },
	{ "statistics by size", case_stats },
};

int main(void)
{
	fx.path = make_snapshot(1 << 20, 1, NULL, 0);
	TAP_RUN(cases);
	fl_engine_destroy(fx.e);
	fl_source_put(fx.src);
	munmap(fx.mem, 4 << 20);
	drop_snapshot(fx.path);
	return done_testing();
}
