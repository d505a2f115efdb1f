/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mem_types.h - the memory types the engine's table of cases runs on
 * (tests/engine_mem.c): anonymous 4 KiB pages, hugetlb 2 MiB pages, and a
 * memfd mapped shared and served in MINOR mode; mapping each, its region
 * descriptor, and the runner of the table.
 *
 * Decision: one table of cases {name, fn, memory types, features} run
 * across every memory type a case declares, as the kernel's
 * tools/testing/selftests/mm/uffd-unit-tests.c does, instead of one
 * program per memory type with cases copied by hand.  A case the kernel
 * (its uffd features) or the machine (no hugetlb pool) cannot run is a TAP
 * skip of its points, with the reason.
 */
#ifndef FAULTLINE_TEST_MEM_TYPES_H
#define FAULTLINE_TEST_MEM_TYPES_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "faultline.h"
#include "huge_lock.h"
#include "hugetlb.h"
#include "kernel/uffd.h"
#include "tap.h"
#include "util.h"

enum mem_kind { MEM_ANON, MEM_HUGETLB, MEM_SHMEM_MINOR, MEM_NKINDS };

#define MEM_BIT(k)	(1u << (k))
#define MEM_ALL		(MEM_BIT(MEM_NKINDS) - 1)
#define MEM_HUGE_POOL	8	/* 2 MiB pages reserved for the hugetlb cases */
#define MEM_CASE_SECS	120	/* one case at most, then SIGALRM */

struct mem_type {
	enum mem_kind kind;
	const char *name;
	uint64_t page;		/* its page size */
	uint64_t features;	/* UFFD_FEATURE_* the kernel must have */
};

static const struct mem_type mem_types[MEM_NKINDS] = {
	[MEM_ANON] = { MEM_ANON, "anon 4K", PAGE, 0 },
	[MEM_HUGETLB] = { MEM_HUGETLB, "hugetlb 2M", HPAGE,
			  UFFD_FEATURE_MISSING_HUGETLBFS },
	/* registered MISSING | MINOR: a page not in the memfd yet is missing */
	[MEM_SHMEM_MINOR] = { MEM_SHMEM_MINOR, "memfd minor", PAGE,
			      UFFD_FEATURE_MISSING_SHMEM |
			      UFFD_FEATURE_MINOR_SHMEM },
};

/* Memory of one type: where it is mapped and, for a memfd, its fd. */
struct mem_area {
	uint8_t *addr;
	uint64_t len;
	int fd;			/* the memfd, or -1 */
};

/* Another shared mapping of a memfd area (a clone of its VMM); or NULL. */
static inline uint8_t *mem_map_again(const struct mem_area *a)
{
	void *p = mmap(NULL, a->len, PROT_READ | PROT_WRITE, MAP_SHARED,
		       a->fd, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* Map len bytes of memory of type m (a new memfd for MINOR); 0 or -errno. */
static inline int mem_map(const struct mem_type *m, uint64_t len,
			  struct mem_area *a)
{
	a->addr = NULL;
	a->len = len;
	a->fd = -1;
	if (m->kind != MEM_SHMEM_MINOR) {
		a->addr = map_anon(len, m->kind == MEM_HUGETLB);
		return a->addr ? 0 : -ENOMEM;
	}
	a->fd = memfd_create("fl-mem", MFD_CLOEXEC);
	if (a->fd < 0 || ftruncate(a->fd, (off_t)len) < 0)
		return -errno;
	a->addr = mem_map_again(a);
	return a->addr ? 0 : -errno;
}

static inline void mem_unmap(struct mem_area *a)
{
	if (a->addr)
		munmap(a->addr, a->len);
	if (a->fd >= 0)
		close(a->fd);
	a->addr = NULL;
	a->fd = -1;
}

/* The region for area a at snapshot offset off: MINOR with its memfd. */
static inline struct fl_region_desc mem_region(const struct mem_type *m,
					       const struct mem_area *a,
					       uint64_t off)
{
	struct fl_region_desc d = {
		.addr = (uintptr_t)a->addr, .len = a->len, .page_size = m->page,
		.src_offset = off, .flags = FL_REGION_REGISTER,
	};

	if (m->kind == MEM_SHMEM_MINOR) {
		d.flags |= FL_REGION_MINOR;
		d.memfd = a->fd;
	}
	return d;
}

/* One case of the table. */
struct mem_case {
	const char *name;
	void (*fn)(const struct mem_type *m);
	unsigned int mems;		/* MEM_BIT()s it runs on */
	uint64_t features;		/* UFFD_FEATURE_* beyond the type's */
	int points[MEM_NKINDS];		/* points it makes on each type */
};

/*
 * Run every case on every memory type it declares, or skip its points
 * saying why: the kernel lacks a feature, or the machine the memory.
 * Each case gets MEM_CASE_SECS of its own (alarm(), re-armed before it):
 * a fault left looping fails the test, and a table that grows, or runs
 * slowly under load or TSan, does not run out of one program-wide limit.
 */
static inline void mem_run(const struct mem_case *cases, int ncases)
{
	struct uffd_caps caps = { 0 };
	char why[MEM_NKINDS][160] = { "" };
	char reason[512];
	int r;

	if (uffd_query(&caps) < 0)
		caps.features = 0;
	/* the pool is the host's: one suite's cases in it at a time */
	r = huge_lock();
	if (r == 0)
		r = huge_reserve(MEM_HUGE_POOL);
	if (r < 0)
		snprintf(why[MEM_HUGETLB], sizeof(why[0]), "cannot reserve %d "
			 "2 MiB hugetlb pages: %s", MEM_HUGE_POOL,
			 strerror(-r));
	for (int c = 0; c < ncases; c++) {
		const struct mem_case *k = &cases[c];

		for (int t = 0; t < MEM_NKINDS; t++) {
			const struct mem_type *m = &mem_types[t];
			uint64_t lack = (m->features | k->features) &
					~caps.features;

			if (!(k->mems & MEM_BIT(t)))
				continue;
			if (lack) {
				snprintf(reason, sizeof(reason), "%s on %s: the "
					 "kernel lacks uffd features 0x%llx",
					 k->name, m->name,
					 (unsigned long long)lack);
				skip(k->points[t], reason);
			} else if (why[t][0]) {
				snprintf(reason, sizeof(reason), "%s on %s: %s",
					 k->name, m->name, why[t]);
				skip_missing(k->points[t], "hugetlb pages",
					     reason);
			} else {
				diag("%s on %s", k->name, m->name);
				alarm(MEM_CASE_SECS);
				k->fn(m);
			}
		}
	}
	huge_unlock();
}

#endif
