// SPDX-License-Identifier: Apache-2.0
/*
 * mem.c - guest memory for each backend.
 *
 * Decision: the uffd backend is Firecracker's, not a convenient variant:
 * fc_client.c maps MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE (and
 * MAP_HUGETLB for 2 MiB pages), asks only for EVENT_REMOVE, registers
 * MISSING and sends the one-message handshake, so what a handler serves
 * here it serves to Firecracker.  Guest memory is always MAP_NORESERVE,
 * which also keeps it from merging with the VMM's low memory, so smaps
 * describes it alone.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "error.h"
#include "hugetlb.h"
#include "kernel/uffd.h"
#include "mem.h"
#include "util/io.h"
#include "util/size.h"

#define MAP_HUGE_2MB_FLAG	(21 << 26)	/* MAP_HUGE_SHIFT = 26 */

/*
 * MAP_NORESERVE hugetlb memory maps without any pages to back it, and a
 * fill that finds none fails deep inside the handler: check up front.
 */
static int check_huge_pages(const struct vmm_mem *m)
{
	long free = sys_read_long("/sys/kernel/mm/hugepages/hugepages-2048kB/"
				  "free_hugepages");

	if (free > 0 && (uint64_t)free * (2ULL << 20) >= m->size)
		return 0;
	return vmm_fail(-ENOMEM, "%s of 2 MiB hugetlb pages needed, "
			"%s free (reserve them in "
			"/proc/sys/vm/nr_hugepages)", size_str(m->size).s,
			size_str(free > 0 ? (uint64_t)free << 21 : 0).s);
}

/* At m->addr if set (MAP_FIXED: in place of what is there), else anywhere. */
static int map_anon(struct vmm_mem *m)
{
	int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;

	if (m->page_size > 4096)
		flags |= MAP_HUGETLB | MAP_HUGE_2MB_FLAG;
	if (m->addr)
		flags |= MAP_FIXED;
	m->addr = mmap(m->addr, m->size, PROT_READ | PROT_WRITE, flags, -1, 0);
	if (m->addr != MAP_FAILED)
		return 0;
	m->addr = NULL;
	return vmm_fail(-errno, "cannot map %s of guest memory: %s",
			size_str(m->size).s, strerror(errno));
}

static int prepopulate(struct vmm_mem *m, int fd)
{
	int ret = pread_full(fd, m->addr, m->size, 0);

	if (ret < 0)
		return vmm_fail(ret, "cannot read the memory file: %s",
				ret == -EIO ? "short file" : strerror(-ret));
	return 0;
}

static int map_file(struct vmm_mem *m, int fd)
{
	m->addr = mmap(NULL, m->size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_NORESERVE, fd, 0);
	if (m->addr != MAP_FAILED)
		return 0;
	m->addr = NULL;
	return vmm_fail(-errno, "cannot map the memory file: %s",
			strerror(errno));
}

static int map_uffd(struct vmm_mem *m)
{
	int ret = fc_client_map(&m->fc, 1, &m->size, m->page_size);

	if (ret < 0)
		return vmm_fail(ret, "cannot map a Firecracker-style uffd "
				"region of %s: %s", size_str(m->size).s,
				uffd_strerror(ret));
	m->addr = m->fc.regions[0].addr;
	return 0;
}

/*
 * Write tracking for --reset: WP_ASYNC or WP_SYNC, whichever the engine
 * takes; where it has none (-EOPNOTSUPP) the reset still works, dropping
 * every page filled, and the note says why.
 */
static int track_writes(struct vmm_mem *m)
{
	int ret = fl_engine_track_writes(m->e);

	if (ret > 0) {
		m->tracking = ret;
		return 0;
	}
	if (ret == -EOPNOTSUPP) {
		snprintf(m->track_note, sizeof(m->track_note), "%s",
			 fl_last_error());
		return 0;
	}
	return vmm_fail(ret, "in-process engine: write tracking: %s",
			fl_last_error());
}

static int engine_open(struct vmm_mem *m, const struct vmm_config *c,
		       bool track)
{
	struct fl_engine_opts eo = {
		.uffd = -1,
		.chunk_size = c->chunk,
		.flags = c->engine_flags,
	};
	struct fl_region_desc rd = {
		.addr = (uintptr_t)m->addr,
		.len = m->size,
		.page_size = m->page_size,
		.flags = FL_REGION_REGISTER,
	};
	int ret;

	if ((ret = fl_source_open(c->mem_file, &m->src)) < 0 ||
	    (ret = fl_engine_create(&eo, &m->e)) < 0 ||
	    (ret = fl_engine_add_region(m->e, &rd, m->src)) < 0 ||
	    (c->replay && (ret = fl_engine_replay(m->e, c->replay)) < 0))
		return vmm_fail(ret, "in-process engine: %s", fl_last_error());
	return track ? track_writes(m) : 0;
}

int vmm_mem_open(struct vmm_mem *m, const struct vmm_config *c, int fd)
{
	int ret;

	memset(m, 0, sizeof(*m));
	fc_client_init(&m->fc);
	m->backend = c->backend;
	m->size = c->mem_size;
	m->page_size = c->huge ? 2ULL << 20 : 4096;
	if (c->huge && (ret = check_huge_pages(m)) < 0)
		return ret;
	switch (c->backend) {
	case VMM_PREPOPULATED:
		ret = map_anon(m);
		if (ret == 0)
			ret = prepopulate(m, fd);
		break;
	case VMM_FILE:
		ret = map_file(m, fd);
		break;
	case VMM_UFFD:
		ret = map_uffd(m);
		break;
	case VMM_INPROC:
		ret = map_anon(m);
		if (ret == 0)
			ret = engine_open(m, c, c->resets > 0);
		break;
	default:
		ret = vmm_fail(-EINVAL, "unknown backend %d", c->backend);
	}
	if (ret < 0)
		vmm_mem_close(m);
	return ret;
}

int vmm_mem_start(struct vmm_mem *m, const struct vmm_config *c)
{
	int ret = 0;

	if (m->backend == VMM_UFFD) {
		/* A handler still starting gets a moment to listen. */
		ret = fc_client_connect_wait(&m->fc, c->socket, 3000);
		if (ret < 0)
			return vmm_fail(ret, "cannot hand the uffd to %s: %s",
					c->socket, strerror(-ret));
	} else if (m->backend == VMM_INPROC) {
		ret = fl_engine_start(m->e, 1);
		if (ret < 0)
			return vmm_fail(ret, "in-process engine: %s",
					fl_last_error());
	}
	return 0;
}

static void engine_close(struct vmm_mem *m)
{
	if (m->e) {
		fl_engine_stop(m->e);
		fl_engine_destroy(m->e);
	}
	if (m->src)
		fl_source_put(m->src);
	m->e = NULL;
	m->src = NULL;
}

int vmm_mem_renew(struct vmm_mem *m, const struct vmm_config *c)
{
	int ret;

	if (m->backend != VMM_INPROC)
		return vmm_fail(-EINVAL, "a fresh restore is the inproc "
				"backend's");
	engine_close(m);
	m->tracking = 0;
	ret = map_anon(m);
	if (ret == 0)
		ret = engine_open(m, c, false);
	if (ret == 0)
		ret = vmm_mem_start(m, c);
	return ret;
}

int vmm_mem_discard(struct vmm_mem *m, uint64_t off, uint64_t len)
{
	if (madvise(m->addr + off, len, MADV_DONTNEED) < 0)
		return vmm_fail(-errno, "madvise(DONTNEED) of guest memory "
				"[%llu, +%llu): %s", (unsigned long long)off,
				(unsigned long long)len, strerror(errno));
	return 0;
}

/* Sum "Anonymous:" or "Private_Hugetlb:" over the VMAs in [lo, hi). */
uint64_t vmm_mem_resident(const struct vmm_mem *m)
{
	uintptr_t lo = (uintptr_t)m->addr, hi = lo + m->size, a, b;
	bool in = false;
	uint64_t sum = 0, kb;
	char line[256];
	FILE *f = fopen("/proc/self/smaps", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		/* "lo-hi perms ..." starts a VMA; "Name: value" lines follow */
		if (sscanf(line, "%lx-%lx ", &a, &b) == 2) {
			in = a < hi && b > lo;
			continue;
		}
		if (in && (sscanf(line, "Anonymous: %lu kB", &kb) == 1 ||
			   sscanf(line, "Private_Hugetlb: %lu kB", &kb) == 1))
			sum += kb << 10;
	}
	fclose(f);
	return sum;
}

void vmm_mem_close(struct vmm_mem *m)
{
	engine_close(m);
	if (m->backend == VMM_UFFD) {
		if (m->fc.sock >= 0)
			fc_client_end(&m->fc, 5000);
		else
			fc_client_close(&m->fc);
	} else if (m->addr) {
		munmap(m->addr, m->size);
	}
	memset(m, 0, sizeof(*m));
	m->fc.uffd = m->fc.sock = -1;
}
