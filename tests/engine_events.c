// SPDX-License-Identifier: Apache-2.0
/*
 * engine_events.c - non-cooperative events: REMOVE (MADV_DONTNEED, balloon)
 * makes pages read as zeros from then on, UNMAP drops regions, REMAP moves
 * them and serving continues at the new address; under a uffd without
 * UNMAP events (Firecracker's), memory unmapped or mapped anew never makes
 * a thread fault forever.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "faultline.h"
#include "load.h"
#include "tap.h"
#include "util.h"

#define SEED 0xe7e7

/* What the cases share: the snapshot's source and its length. */
static struct fl_source *src;
static const uint64_t len = 16 << 20;

static struct fl_engine *serve(struct fl_source *src, uint8_t *mem,
			       uint64_t len, uint64_t off)
{
	struct fl_engine_opts o = { .uffd = -1, .chunk_size = 64 << 10 };
	struct fl_engine *e;
	struct fl_region_desc d = { .addr = (uintptr_t)mem, .len = len, .page_size = PAGE, .src_offset = off, .flags = FL_REGION_REGISTER };

	if (fl_engine_create(&o, &e) < 0 || fl_engine_add_region(e, &d, src) < 0 ||
	    fl_engine_start(e, 2) < 0)
		BAIL("engine setup: %s", fl_last_error());
	return e;
}

/* A uffd as Firecracker makes it: REMOVE events only (no UNMAP, no REMAP). */
static int fc_uffd(void)
{
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	struct uffdio_api api = { .api = UFFD_API,
				  .features = UFFD_FEATURE_EVENT_REMOVE };

	if (fd < 0 || ioctl(fd, UFFDIO_API, &api) < 0)
		BAIL("userfaultfd: %m");
	return fd;
}

static int fc_register(int uffd, void *mem, uint64_t len)
{
	struct uffdio_register r = {
		.range = { (uintptr_t)mem, len },
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};

	return ioctl(uffd, UFFDIO_REGISTER, &r);
}

static struct fl_engine *fc_serve(struct fl_source *src, int uffd,
				  uint8_t *mem, uint64_t len)
{
	struct fl_engine_opts o = {
		.uffd = uffd, .chunk_size = 64 << 10,
		.flags = FL_ENGINE_ADOPT | FL_ENGINE_NO_PREFETCH |
			 FL_ENGINE_NO_BACKGROUND,
	};
	struct fl_region_desc d = { .addr = (uintptr_t)mem, .len = len,
				    .page_size = PAGE };
	struct fl_engine *e;

	if (fc_register(uffd, mem, len) < 0 || fl_engine_create(&o, &e) < 0 ||
	    fl_engine_add_region(e, &d, src) < 0 || fl_engine_start(e, 1) < 0)
		BAIL("engine setup: %s", fl_last_error());
	return e;
}

/*
 * Memory changed under a Firecracker-style uffd (no UNMAP events): no
 * fault may be answered with a wake alone, or its thread faults forever.
 */
static int case_fc_style(void)
{
	struct fl_stats st;
	uint64_t len = 4 << 20;
	int uffd = fc_uffd();
	uint8_t *mem = map_anon(len, 0);
	struct fl_engine *e = fc_serve(src, uffd, mem, len);

	alarm(20);	/* a fault loop fails the test, not the run */
	/* A removed page unmapped before a fault on its chunk. */
	ok(same_as_file(mem, PAGE, 0, SEED, 0), "page 0 served");
	madvise(mem, PAGE, MADV_DONTNEED);
	madvise(mem + 5 * PAGE, PAGE, MADV_DONTNEED);
	munmap(mem, PAGE);
	ok(is_zero_mem(mem + 5 * PAGE, PAGE) &&
	   same_as_file(mem + 6 * PAGE, PAGE, 6 * PAGE, SEED, 0),
	   "a removed page whose chunk starts with an unmapped page reads "
	   "zeros (the COPY's ENOENT for that page no longer ends the fill)");
	fl_engine_destroy(e);
	close(uffd);
	munmap(mem + PAGE, len - PAGE);

	/* Unmapped and mapped anew at the same address, registered again. */
	uffd = fc_uffd();
	mem = map_anon(len, 0);
	e = fc_serve(src, uffd, mem, len);
	ok(same_as_file(mem, PAGE, 0, SEED, 0), "page 0 served");
	ok(mmap(mem, len, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == mem &&
	   fc_register(uffd, mem, len) == 0, "memory mapped anew, registered");
	ok(same_as_file(mem, PAGE, 0, SEED, 0),
	   "a page filled before reads the snapshot in the new memory, not "
	   "zeros: no event said it was removed (a thread that faults again "
	   "after a wake is filled)");
	fl_engine_stats(e, &st);
	ok(st.faults <= 4 && st.pages_zeroed == 0,
	   "... in %llu faults, none answered with zeros",
	   (unsigned long long)st.faults);
	fl_engine_destroy(e);
	close(uffd);
	munmap(mem, len);
	alarm(0);
	return 0;
}

/* A uffd that asks for no events at all: MADV_DONTNEED goes unseen. */
static int bare_uffd(void)
{
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	struct uffdio_api api = { .api = UFFD_API };

	if (fd < 0 || ioctl(fd, UFFDIO_API, &api) < 0)
		BAIL("userfaultfd: %m");
	return fd;
}

static void *touch_page(void *p)
{
	return (void *)(uintptr_t)*(volatile uint64_t *)p;
}

/* Wait until fd has a message to read (a fault is queued). */
static int wait_readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 5000) == 1 ? 0 : -1;
}

/*
 * A fault message that is stale by the time it is served: the client has
 * since unmapped the memory and mapped new memory at the same address,
 * registered with another uffd (the daemon's next session).  The kernel
 * lets the old uffd fill that memory too.  The old engine must answer
 * with a wake alone: a fill would land in the new session's memory, which
 * then takes the page as present (EEXIST) and serves what the old engine
 * put there (zeros, before this was fixed: 1 wrong page in ~300 sessions
 * in serve_bad under load).
 */
static int case_stale_fault(void)
{
	struct fl_engine_opts o = { .uffd = -1, .chunk_size = PAGE,
		.flags = FL_ENGINE_ADOPT | FL_ENGINE_NO_PREFETCH |
			 FL_ENGINE_NO_BACKGROUND };
	uint64_t len = 1 << 20;
	int u1 = bare_uffd(), u2;
	uint8_t *mem = map_anon(len, 0);
	struct fl_region_desc d = { .addr = (uintptr_t)mem, .len = len,
				    .page_size = PAGE };
	struct fl_engine *e1, *e2;
	struct fl_stats st;
	pthread_t t;
	void *got;

	alarm(20);
	o.uffd = u1;
	if (fc_register(u1, mem, len) < 0 || fl_engine_create(&o, &e1) < 0 ||
	    fl_engine_add_region(e1, &d, src) < 0)
		BAIL("engine setup: %s", fl_last_error());
	/* Page 3 served (driven by hand: fl_engine_process). */
	pthread_create(&t, NULL, touch_page, mem + 3 * PAGE);
	wait_readable(u1);
	fl_engine_process(e1);
	pthread_join(t, &got);
	ok((uint64_t)(uintptr_t)got == pattern_word(3 * PAGE, SEED),
	   "stale: page 3 served by the first engine");
	/* Emptied with no event, faulted on again: a message is queued. */
	madvise(mem + 3 * PAGE, PAGE, MADV_DONTNEED);
	pthread_create(&t, NULL, touch_page, mem + 3 * PAGE);
	ok(wait_readable(u1) == 0, "stale: a second fault on page 3 queued");
	/* The client moves on: new memory at the same address, new uffd. */
	ok(mmap(mem, len, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == mem,
	   "stale: memory mapped anew at the same address");
	u2 = fc_uffd();
	o.uffd = u2;
	if (fc_register(u2, mem, len) < 0 || fl_engine_create(&o, &e2) < 0 ||
	    fl_engine_add_region(e2, &d, src) < 0 || fl_engine_start(e2, 1) < 0)
		BAIL("engine 2 setup: %s", fl_last_error());
	/* The old engine reads the old message only now. */
	fl_engine_process(e1);
	pthread_join(t, &got);
	ok((uint64_t)(uintptr_t)got == pattern_word(3 * PAGE, SEED) &&
	   same_as_file(mem, len, 0, SEED, 0),
	   "stale: the new session's memory holds the snapshot (the stale "
	   "fault was answered by a wake, not a fill)");
	fl_engine_stats(e1, &st);
	ok(st.pages_zeroed == 0 && st.pages_copied == 1,
	   "stale: the old engine filled nothing more (%llu copied, %llu "
	   "zeroed)", (unsigned long long)st.pages_copied,
	   (unsigned long long)st.pages_zeroed);
	fl_engine_destroy(e1);
	fl_engine_destroy(e2);
	close(u1);
	close(u2);
	munmap(mem, len);
	alarm(0);
	return 0;
}

/* REMOVE of touched and untouched pages. */
static int case_remove(void)
{
	struct fl_stats st;
	uint8_t *mem = map_anon(len, 0);
	struct fl_engine *e = serve(src, mem, len, 0);

	ok(same_as_file(mem, 4 << 20, 0, SEED, 0), "first 4 MiB served");
	madvise(mem + (1 << 20), 2 << 20, MADV_DONTNEED);	/* touched */
	madvise(mem + (8 << 20), 1 << 20, MADV_DONTNEED);	/* never touched */
	ok(is_zero_mem(mem + (1 << 20), 2 << 20), "removed touched range reads zeros");
	ok(is_zero_mem(mem + (8 << 20), 1 << 20), "removed untouched range reads zeros");
	ok(same_as_file(mem, 1 << 20, 0, SEED, 0) &&
	   same_as_file(mem + (3 << 20), 5 << 20, 3 << 20, SEED, 0) &&
	   same_as_file(mem + (9 << 20), 7 << 20, 9 << 20, SEED, 0),
	   "everything else still equals the snapshot");
	memset(mem + (1 << 20), 0xab, PAGE);
	madvise(mem + (1 << 20), PAGE, MADV_DONTNEED);
	ok(is_zero_mem(mem + (1 << 20), PAGE), "written then removed again: zeros");
	fl_engine_stop(e);
	fl_engine_stats(e, &st);
	ok(st.events >= 3, "REMOVE events applied (%llu)",
	   (unsigned long long)st.events);
	fl_engine_destroy(e);
	munmap(mem, len);
	return 0;
}

/* REMAP: mremap the region elsewhere, half of it touched. */
static int case_remap(void)
{
	struct fl_engine *e;
	uint8_t *mem;

	mem = map_anon(len, 0);
	e = serve(src, mem, len, 0);
	ok(same_as_file(mem, 4 << 20, 0, SEED, 0), "before mremap: served");
	uint8_t *hole = map_anon(len, 0);
	uint8_t *moved = mremap(mem, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, hole);

	ok(moved == hole, "region moved by mremap");
	ok(same_as_file(moved, len, 0, SEED, 0),
	   "after mremap every byte at the new address equals the snapshot");
	fl_engine_destroy(e);
	munmap(moved, len);
	return 0;
}

/* Partial REMAP: move the second half only. */
static int case_partial_remap(void)
{
	struct fl_engine *e;
	uint8_t *mem, *hole, *moved;

	mem = map_anon(len, 0);
	e = serve(src, mem, len, 0);
	hole = map_anon(len / 2, 0);
	moved = mremap(mem + len / 2, len / 2, len / 2,
		       MREMAP_MAYMOVE | MREMAP_FIXED, hole);
	ok(moved == hole && same_as_file(moved, len / 2, len / 2, SEED, 0),
	   "second half moved alone: served from its own file offset");
	ok(same_as_file(mem, len / 2, 0, SEED, 0), "first half still served in place");
	fl_engine_destroy(e);
	munmap(mem, len / 2);
	munmap(moved, len / 2);
	return 0;
}

/*
 * The second half moved away and back again: the first region must
 * no longer claim the vacated range (it would answer with zeros).
 */
static int case_away_and_back(void)
{
	struct fl_engine *e;
	uint8_t *mem, *hole, *moved;

	mem = map_anon(len, 0);
	e = serve(src, mem, len, 0);
	hole = map_anon(len / 2, 0);
	moved = mremap(mem + len / 2, len / 2, len / 2,
		       MREMAP_MAYMOVE | MREMAP_FIXED, hole);
	uint8_t *back = mremap(moved, len / 2, len / 2,
			       MREMAP_MAYMOVE | MREMAP_FIXED, mem + len / 2);

	ok(back == mem + len / 2 &&
	   same_as_file(mem + len / 2, len / 2, len / 2, SEED, 0),
	   "half moved away and back: its snapshot bytes, not zeros");
	fl_engine_destroy(e);
	munmap(mem, len);
	return 0;
}

/* A hole unmapped in the middle: both sides are still served. */
static int case_hole(void)
{
	struct fl_engine *e;
	uint8_t *mem;

	mem = map_anon(len, 0);
	e = serve(src, mem, len, 0);
	munmap(mem + (4 << 20), 4 << 20);
	ok(same_as_file(mem, 4 << 20, 0, SEED, 0) &&
	   same_as_file(mem + (8 << 20), len - (8 << 20), 8 << 20, SEED, 0),
	   "middle unmapped: the head and the tail are still served");
	fl_engine_destroy(e);
	munmap(mem, 4 << 20);
	munmap(mem + (8 << 20), len - (8 << 20));
	return 0;
}

/* UNMAP drops the region: the engine keeps serving the other one. */
static int case_unmap(void)
{
	struct fl_engine *e;
	uint8_t *a = map_anon(4 << 20, 0), *b = map_anon(4 << 20, 0);
	struct fl_engine_opts o = { .uffd = -1 };

	fl_engine_create(&o, &e);
	struct fl_region_desc da = { .addr = (uintptr_t)a, .len = 4 << 20, .page_size = PAGE, .src_offset = 0, .flags = FL_REGION_REGISTER };
	struct fl_region_desc db = { .addr = (uintptr_t)b, .len = 4 << 20, .page_size = PAGE, .src_offset = 4 << 20, .flags = FL_REGION_REGISTER };

	fl_engine_add_region(e, &da, src);
	fl_engine_add_region(e, &db, src);
	fl_engine_start(e, 1);
	ok(same_as_file(a, PAGE, 0, SEED, 0), "region a served");
	munmap(a, 4 << 20);
	ok(same_as_file(b, 4 << 20, 4 << 20, SEED, 0),
	   "after unmapping a, region b is served");
	fl_engine_destroy(e);
	munmap(b, 4 << 20);
	return 0;
}

/*
 * A registered VMA grown in place by mremap: the new pages belong to
 * no region.  They read as zeros (anonymous memory), and the fault
 * does not loop.
 */
static int case_grown(void)
{
	struct fl_engine_opts o = { .uffd = -1 };
	struct fl_engine *e;
	struct fl_stats st;
	uint8_t *g = mmap(NULL, 8 * PAGE, PROT_NONE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	munmap(g + 2 * PAGE, 6 * PAGE);		/* room to grow into */
	munmap(g, 2 * PAGE);
	g = mmap(g, 2 * PAGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	fl_engine_create(&o, &e);
	struct fl_region_desc dg = { .addr = (uintptr_t)g, .len = 2 * PAGE,
				     .page_size = PAGE,
				     .flags = FL_REGION_REGISTER };

	fl_engine_add_region(e, &dg, src);
	fl_engine_start(e, 1);
	ok(same_as_file(g, 2 * PAGE, 0, SEED, 0), "small region served");
	ok(mremap(g, 2 * PAGE, 4 * PAGE, 0) == g, "VMA grown in place");
	ok(is_zero_mem(g + 3 * PAGE, PAGE),
	   "a page beyond every region reads zeros (no fault loop)");
	fl_engine_stop(e);
	fl_engine_stats(e, &st);
	ok(st.faults < 10, "it took %llu faults, not a loop",
	   (unsigned long long)st.faults);
	fl_engine_destroy(e);
	munmap(g, 4 * PAGE);
	return 0;
}

static const struct tap_case cases[] = {
	{ "REMOVE", case_remove },
	{ "REMAP", case_remap },
	{ "partial REMAP", case_partial_remap },
	{ "moved away and back", case_away_and_back },
	{ "a hole unmapped", case_hole },
	{ "UNMAP", case_unmap },
	{ "a VMA grown in place", case_grown },
	{ "Firecracker-style uffd", case_fc_style },
	{ "a stale fault", case_stale_fault },
};

int main(void)
{
	char *path;

	load_start();
	path = make_snapshot(len, SEED, NULL, 0);
	fl_source_open(path, &src);
	TAP_RUN(cases);
	fl_source_put(src);
	drop_snapshot(path);
	return done_testing();
}
