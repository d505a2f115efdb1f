/* SPDX-License-Identifier: Apache-2.0 */
/*
 * util.h - shared helpers for the library tests: snapshot files with a
 * recognisable pattern, page verification, hugetlb reservation.
 */
#ifndef FAULTLINE_TEST_UTIL_H
#define FAULTLINE_TEST_UTIL_H

#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "faultline.h"

#define PAGE 4096ull
#define HPAGE (2ull << 20)

/* The CLI: build/faultline, or $FAULTLINE_BIN. */
static inline const char *cli_bin(void)
{
	const char *b = getenv("FAULTLINE_BIN");

	return b && *b ? b : "build/faultline";
}

/* "DIR/NAME", in one of 8 buffers used in turn (8 at once in a call). */
static inline char *path_in(const char *dir, const char *name)
{
	static char bufs[8][256];
	static int n;
	char *p = bufs[n++ % 8];

	snprintf(p, 256, "%s/%s", dir, name);
	return p;
}

/* `faultline image ARGS`, its output into DIR/cli.out: its exit status. */
static inline int run_image_cli(const char *dir, const char *args)
{
	char cmd[2048];
	int st;

	snprintf(cmd, sizeof(cmd), "%s image %s >%s/cli.out 2>&1", cli_bin(),
		 args, dir);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The pattern word at file offset off: wrong pages never match by luck. */
static inline uint64_t pattern_word(uint64_t off, uint64_t seed)
{
	return (off * 0x9E3779B97F4A7C15ull) ^ seed ^ (off >> 3);
}

/*
 * Write a snapshot of size bytes to a new temp file.  Byte ranges listed in
 * zeros[] (pairs of offset, length; nz pairs) are left zero.  The path is
 * malloc'd: give it back with drop_snapshot().
 */
static inline char *make_snapshot(uint64_t size, uint64_t seed,
				  const uint64_t *zeros, int nz)
{
	static int seq;
	char *path = malloc(64);
	uint64_t *buf = malloc(1 << 20);

	snprintf(path, 64, "/tmp/fl-test-%d-%d.mem", getpid(), seq++);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);

	for (uint64_t off = 0; off < size; off += 1 << 20) {
		uint64_t n = size - off < (1 << 20) ? size - off : (1 << 20);

		for (uint64_t i = 0; i < n / 8; i++)
			buf[i] = pattern_word(off + i * 8, seed);
		for (int z = 0; z < nz; z++) {
			uint64_t zs = zeros[2 * z], ze = zs + zeros[2 * z + 1];

			for (uint64_t i = 0; i < n / 8; i++)
				if (off + i * 8 >= zs && off + i * 8 < ze)
					buf[i] = 0;
		}
		if (pwrite(fd, buf, n, (off_t)off) != (ssize_t)n)
			abort();
	}
	close(fd);
	free(buf);
	return path;
}

/* Remove a snapshot make_snapshot() wrote, and free its path. */
static inline void drop_snapshot(char *path)
{
	unlink(path);
	free(path);
}

/* Does the memory at p hold the file's bytes from offset off? */
static inline int same_as_file(const void *p, uint64_t len, uint64_t off,
			       uint64_t seed, int zero)
{
	const uint64_t *w = p;

	for (uint64_t i = 0; i < len / 8; i++) {
		uint64_t want = zero ? 0 : pattern_word(off + i * 8, seed);

		if (w[i] != want)
			return 0;
	}
	return 1;
}

static inline int is_zero_mem(const void *p, uint64_t len)
{
	const uint64_t *w = p;

	for (uint64_t i = 0; i < len / 8; i++)
		if (w[i])
			return 0;
	return 1;
}

static inline void *map_anon(uint64_t len, int huge)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE |
		       (huge ? MAP_HUGETLB | (21 << MAP_HUGE_SHIFT) : 0), -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* The caller's own event loop: poll the uffd, process, until stop is set. */
struct caller_loop {
	struct fl_engine *e;
	atomic_int stop;
};

static inline void *caller_loop_main(void *arg)
{
	struct caller_loop *l = arg;

	while (!atomic_load(&l->stop)) {
		struct pollfd p = { .fd = fl_engine_uffd(l->e), .events = POLLIN };

		if (poll(&p, 1, 20) > 0 && fl_engine_process(l->e) < 0)
			break;
	}
	return NULL;
}

#endif
