// SPDX-License-Identifier: Apache-2.0
/*
 * engine_minor.c - minor-fault mode for shared memory: a memfd mapped
 * MAP_SHARED, registered MISSING | MINOR, filled by one write into the page
 * cache and UFFDIO_CONTINUE.  Every byte equals the snapshot; a clone
 * mapping the same memfd is served without copying anything; zero ranges
 * read zeros; MADV_DONTNEED keeps shared memory's contents (page cache)
 * and MADV_REMOVE makes it read zeros, as the kernel's own semantics say.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "faultline.h"
#include "tap.h"
#include "util.h"

#define SEED 0x3170
#define LEN (16ull << 20)

static uint8_t *map_shared(int fd)
{
	void *p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	return p == MAP_FAILED ? NULL : p;
}

static struct fl_engine *serve(struct fl_source *src, uint8_t *mem, int fd)
{
	struct fl_engine_opts o = { .uffd = -1 };
	struct fl_engine *e;
	struct fl_region_desc d = {
		.addr = (uintptr_t)mem, .len = LEN, .page_size = PAGE,
		.flags = FL_REGION_REGISTER | FL_REGION_MINOR, .memfd = fd,
	};

	if (fl_engine_create(&o, &e) < 0)
		BAIL("engine: %s", fl_last_error());
	if (fl_engine_add_region(e, &d, src) < 0) {
		diag("%s", fl_last_error());
		return NULL;
	}
	fl_engine_start(e, 2);
	return e;
}

/*
 * The VMA grown by mremap past the region: its pages are no region's.  A
 * page the memfd already holds is mapped (a minor fault: ZEROPAGE answers
 * EEXIST there, and only waking made the thread fault for ever); a page it
 * does not hold reads zeros.
 */
static void grown(struct fl_source *src)
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
	uint8_t *mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED,
			    fd, 0);
	struct fl_region_desc d = {
		.addr = (uintptr_t)mem, .len = len, .page_size = PAGE,
		.flags = FL_REGION_REGISTER | FL_REGION_MINOR, .memfd = fd,
	};

	if (fl_engine_create(&o, &e) || fl_engine_add_region(e, &d, src) ||
	    fl_engine_start(e, 1))
		BAIL("engine: %s", fl_last_error());
	alarm(20);
	ok(same_as_file(mem, PAGE, 0, SEED, 0), "grown: region served");
	uint8_t *g = mremap(mem, len, 2 * len, MREMAP_MAYMOVE);

	ok(g != MAP_FAILED && g[len + PAGE] == 0xab && g[len + 2 * PAGE] == 0,
	   "grown past the region: a page in the memfd reads it, one not "
	   "in it reads zeros (no fault loop)");
	alarm(0);
	fl_engine_destroy(e);
	munmap(g, 2 * len);
	close(fd);
}

int main(void)
{
	uint64_t zeros[] = { 2 << 20, 1 << 20 };
	char *path = make_snapshot(LEN, SEED, zeros, 1);
	struct fl_source *src;
	struct fl_stats st;
	int fd = memfd_create("fl-minor", MFD_CLOEXEC);

	ftruncate(fd, LEN);
	fl_source_open(path, &src);
	uint8_t *mem = map_shared(fd);
	struct fl_engine *e = serve(src, mem, fd);

	ok(e != NULL, "shared memory region registered MISSING|MINOR");
	if (!e)
		return done_testing();
	ok(same_as_file(mem, 2 << 20, 0, SEED, 0) &&
	   same_as_file(mem + (3 << 20), LEN - (3 << 20), 3 << 20, SEED, 0),
	   "every byte equals the snapshot");
	ok(is_zero_mem(mem + (2 << 20), 1 << 20), "zero range reads zeros");
	madvise(mem, 1 << 20, MADV_DONTNEED);
	ok(same_as_file(mem, 1 << 20, 0, SEED, 0),
	   "MADV_DONTNEED: shared memory keeps its contents");
	madvise(mem + (4 << 20), 1 << 20, MADV_REMOVE);
	ok(is_zero_mem(mem + (4 << 20), 1 << 20), "MADV_REMOVE: reads zeros");
	fl_engine_stop(e);
	fl_engine_stats(e, &st);
	ok(st.pages_copied > 0, "pages written once into the page cache (%llu)",
	   (unsigned long long)st.pages_copied);
	fl_engine_destroy(e);

	/* A clone maps the same memfd: everything is in the page cache. */
	uint8_t *clone = map_shared(fd);
	struct fl_engine *e2 = serve(src, clone, fd);

	ok(same_as_file(clone + (1 << 20), 1 << 20, 1 << 20, SEED, 0) &&
	   same_as_file(clone + (5 << 20), LEN - (5 << 20), 5 << 20, SEED, 0),
	   "clone: every byte right");
	fl_engine_stop(e2);
	fl_engine_stats(e2, &st);
	is_int(st.bytes_copied, 0, "clone: nothing read or written, only CONTINUE");
	ok(st.pages_copied > 0, "clone: pages mapped (%llu)",
	   (unsigned long long)st.pages_copied);
	fl_engine_destroy(e2);

	struct fl_engine *e3;
	struct fl_region_desc bad = { .addr = (uintptr_t)clone, .len = LEN,
				      .page_size = PAGE, .memfd = -1,
				      .flags = FL_REGION_MINOR };

	fl_engine_create(NULL, &e3);
	ok(fl_engine_add_region(e3, &bad, src) == -EINVAL,
	   "minor mode without a memfd: -EINVAL (%s)", fl_last_error());
	fl_engine_destroy(e3);
	munmap(mem, LEN);
	munmap(clone, LEN);
	close(fd);
	grown(src);
	fl_source_put(src);
	drop_snapshot(path);
	return done_testing();
}
