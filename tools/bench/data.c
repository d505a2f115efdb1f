// SPDX-License-Identifier: Apache-2.0
/*
 * data.c - what benchmarks restore from and into: pattern memory files,
 * mappings, uffd ranges, and a thread that keeps the other CPU busy.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "bench.h"
#include "fc_client.h"
#include "kernel/uffd.h"
#include "cli.h"
#include "util/clock.h"

/* ---- data --------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static uint64_t block[PMD_SIZE_BYTES / 8];
static pthread_once_t block_once = PTHREAD_ONCE_INIT;

static void block_init(void)
{
	for (size_t i = 0; i < PMD_SIZE_BYTES / 8; i++)
		block[i] = splitmix64(i) | 1;	/* never a zero word */
}

/*
 * Page p of the pattern is page (p % 512) of a fixed random 2 MiB block with
 * its first word replaced by the page number: every page is distinct, so a
 * page landing at the wrong address changes the checksum.
 */
void bench_pattern(void *buf, size_t len, uint64_t off)
{
	uint8_t *b = buf;

	pthread_once(&block_once, block_init);
	for (size_t o = 0; o < len; o += 4096) {
		uint64_t pg = (off + o) >> 12;

		memcpy(b + o, (uint8_t *)block + (pg % 512) * 4096, 4096);
		*(uint64_t *)(b + o) = ~pg;
	}
}

uint64_t bench_sum(const void *buf, size_t len)
{
	return XXH3_64bits(buf, len);
}

uint64_t bench_pattern_sum(uint64_t len)
{
	static uint8_t tmp[PMD_SIZE_BYTES];
	XXH3_state_t *st = XXH3_createState();
	uint64_t h;

	if (!st)
		return 0;
	XXH3_64bits_reset(st);
	for (uint64_t off = 0; off < len; off += sizeof(tmp)) {
		size_t n = len - off < sizeof(tmp) ? len - off : sizeof(tmp);

		bench_pattern(tmp, n, off);
		XXH3_64bits_update(st, tmp, n);
	}
	h = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	return h;
}

int bench_memfile(uint64_t len, char *path, bool unlink_it)
{
	size_t bs = 2 * MIB;
	uint8_t *buf = malloc(bs);
	int fd, ret = 0;

	if (!buf)
		return -ENOMEM;
	snprintf(path, 64, "/tmp/faultline-bench-XXXXXX");
	fd = mkstemp(path);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	if (unlink_it)
		unlink(path);
	else
		bench_path_add(path);
	for (uint64_t off = 0; off < len && !ret; off += bs) {
		size_t n = len - off < bs ? len - off : bs;

		bench_pattern(buf, n, off);
		if (pwrite(fd, buf, n, (off_t)off) != (ssize_t)n)
			ret = errno ? -errno : -EIO;
	}
	/* Clean pages: no writeback while we measure; then warm them. */
	if (!ret)
		fdatasync(fd);
	for (uint64_t off = 0; off < len && !ret; off += bs) {
		size_t n = len - off < bs ? len - off : bs;

		if (pread(fd, buf, n, (off_t)off) != (ssize_t)n)
			ret = -EIO;
	}
	if (ret) {
		close(fd);
		if (!unlink_it)
			bench_unlink(path);
	}
out:
	free(buf);
	return ret ? ret : fd;
}

int bench_uffd_range(void *dst, size_t len, bool move)
{
	uint64_t feat = 0;
	int uffd = uffd_create(move ? UFFD_FEATURE_MOVE : 0, &feat);
	int ret;

	if (uffd < 0)
		return uffd;
	ret = move && !(feat & UFFD_FEATURE_MOVE) ? -EOPNOTSUPP :
	      uffd_register(uffd, (uintptr_t)dst, len,
			    UFFDIO_REGISTER_MODE_MISSING, NULL);
	if (ret < 0) {
		close(uffd);
		return ret;
	}
	return uffd;
}

void *bench_map(size_t len)
{
	size_t slop = PMD_SIZE_BYTES;
	uint8_t *p = mmap(NULL, len + slop, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p == MAP_FAILED)
		return NULL;

	uintptr_t a = ((uintptr_t)p + slop - 1) & ~(uintptr_t)(slop - 1);
	size_t head = a - (uintptr_t)p;

	if (head)
		munmap(p, head);
	if (slop - head)
		munmap((uint8_t *)a + len, slop - head);
	return (void *)a;
}

void bench_unmap(void *p, size_t len)
{
	if (p)
		munmap(p, len);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

int bench_prefault(void *p, size_t len)
{
	return madvise(p, len, MADV_POPULATE_WRITE) < 0 ? -errno : 0;
}

int64_t bench_thp_bytes(const void *addr, size_t len)
{
	uintptr_t lo = (uintptr_t)addr, hi = lo + len;
	FILE *f = fopen("/proc/self/smaps", "re");
	char *line = NULL;
	size_t cap = 0;
	int64_t sum = 0;
	bool in = false;

	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		unsigned long s, e;
		unsigned long long kb;

		if (sscanf(line, "%lx-%lx ", &s, &e) == 2 &&
		    strchr(line, '-') < strchr(line, ' '))
			in = s < hi && e > lo;
		else if (in && sscanf(line, "AnonHugePages: %llu kB", &kb) == 1)
			sum += (int64_t)kb << 10;
	}
	free(line);
	fclose(f);
	return sum > (int64_t)len ? (int64_t)len : sum;
}

/* ---- the busy thread ---------------------------------------------------- */

static void *busy_main(void *arg)
{
	struct bench_busy *b = arg;
	volatile uint8_t *m = b->mem;
	uint64_t n = 0;

	while (!atomic_load_explicit(&b->stop, memory_order_relaxed)) {
		for (size_t o = 0; o < b->len; o += 4096)
			m[o]++;
		n++;
		__atomic_store_n(&b->touches, n, __ATOMIC_RELAXED);
	}
	return NULL;
}

int bench_busy_start(struct bench_busy *b)
{
	cpu_set_t me, other;
	int cur = sched_getcpu(), ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
	int ret;

	memset(b, 0, sizeof(*b));
	atomic_init(&b->stop, false);
	if (cur < 0)
		cur = 0;
	b->cpu = ncpu > 1 ? (cur + 1) % ncpu : cur;
	b->len = 4 * MIB;
	b->mem = bench_map(b->len);
	if (!b->mem)
		return -ENOMEM;
	madvise(b->mem, b->len, MADV_HUGEPAGE);
	memset(b->mem, 1, b->len);

	/* Pin the caller where it is, the busy thread on the other CPU. */
	if (sched_getaffinity(0, sizeof(b->saved), &b->saved) == 0) {
		CPU_ZERO(&me);
		CPU_SET(cur, &me);
		b->pinned = sched_setaffinity(0, sizeof(me), &me) == 0;
	}

	pthread_attr_t attr;

	pthread_attr_init(&attr);
	CPU_ZERO(&other);
	CPU_SET(b->cpu, &other);
	pthread_attr_setaffinity_np(&attr, sizeof(other), &other);
	ret = pthread_create(&b->thread, &attr, busy_main, b);
	pthread_attr_destroy(&attr);
	if (ret) {
		bench_busy_stop(b);
		return -ret;
	}
	b->running = true;
	/* Measure only once it is really running on its CPU. */
	while (!__atomic_load_n(&b->touches, __ATOMIC_RELAXED))
		sched_yield();
	return 0;
}

void bench_busy_stop(struct bench_busy *b)
{
	if (b->running) {
		atomic_store(&b->stop, true);
		pthread_join(b->thread, NULL);
		b->running = false;
	}
	if (b->pinned) {
		sched_setaffinity(0, sizeof(b->saved), &b->saved);
		b->pinned = false;
	}
	if (b->mem) {
		bench_unmap(b->mem, b->len);
		b->mem = NULL;
	}
}

/*
 * Wait until every page of [p, p+len) is resident, polling mincore() every
 * millisecond from the first page not yet seen resident (a filled page
 * stays).  0, -ETIMEDOUT after 120 s, or -errno.
 */
int bench_wait_resident(const void *addr, uint64_t len)
{
	const uint8_t *p = addr;
	unsigned char vec[4096];
	double deadline = bench_now() + 120;
	uint64_t off = 0;

	while (off < len) {
		uint64_t n = len - off, i = 0;

		if (n > sizeof(vec) * 4096)
			n = sizeof(vec) * 4096;
		if (mincore((void *)(p + off), n, vec) < 0)
			return -errno;
		while (i < n / 4096 && (vec[i] & 1))
			i++;
		off += i * 4096;
		if (i == n / 4096)
			continue;
		if (bench_now() > deadline)
			return -ETIMEDOUT;
		usleep(1000);
	}
	return 0;
}

#define PIPE_MAX_PATH	"/proc/sys/fs/pipe-max-size"

static void pipe_max_write(long v)
{
	FILE *f = fopen(PIPE_MAX_PATH, "w");

	if (f) {
		fprintf(f, "%ld\n", v);
		fclose(f);
	}
}

long bench_pipe_max_raise(long want)
{
	FILE *f = fopen(PIPE_MAX_PATH, "r");
	long old = -1;

	if (f && fscanf(f, "%ld", &old) != 1)
		old = -1;
	if (f)
		fclose(f);
	if (old < 0 || old >= want)
		return -1;
	pipe_max_write(want);
	bench_pipe_max_note(old);
	return old;
}

void bench_pipe_max_put(long old)
{
	if (old >= 0)
		pipe_max_write(old);
	bench_pipe_max_note(-1);
}
