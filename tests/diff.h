/* SPDX-License-Identifier: Apache-2.0 */
/*
 * diff.h - diff snapshots as Firecracker writes them, for the layer
 * tests (tests/layers.c, tests/serve_layers.c): a sparse file of the
 * base's size with the pages dirtied since the base written, a page the
 * guest zeroed written as zeros, holes elsewhere; and the memory a stack
 * of them makes, to check every byte against.
 *
 * Decision: a written run's word at offset o is o ^ seed (serve_util.h's
 * pattern), a seed per layer, so a wrong byte says which layer it came
 * from and where.
 */
#ifndef FAULTLINE_TEST_DIFF_H
#define FAULTLINE_TEST_DIFF_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * [off, off+len) written: pattern words of seed, or zeros if seed is 0;
 * with every > 1, only one 4 KiB page in every `every` of it (the pages
 * of one fill then come from several layers).
 */
struct diff_run {
	uint64_t off, len, seed;
	unsigned int every;
};
#define DIFF_RUN(off, len, seed)	{ (off), (len), (seed), 1 }
#define DIFF_PAGES(off, len, seed, every) { (off), (len), (seed), (every) }

/* dir/name, in one of 8 buffers used in turn. */
static inline const char *diff_path(const char *dir, const char *name)
{
	static char bufs[8][128];
	static int n;
	char *p = bufs[n++ % 8];

	snprintf(p, sizeof(bufs[0]), "%s/%s", dir, name);
	return p;
}

static inline void diff_fill(uint8_t *p, uint64_t off, uint64_t len,
			     uint64_t seed)
{
	for (uint64_t i = 0; i < len; i += 8) {
		uint64_t w = seed ? (off + i) ^ seed : 0;

		memcpy(p + i, &w, 8);
	}
}

/*
 * Write the diff runs[0..n) to a new sparse file of size bytes at path;
 * apply the same runs to mem (size bytes, the memory below), if not NULL.
 * 0 or -errno.
 */
static inline int diff_write(const char *path, uint64_t size,
			     const struct diff_run *runs, int n, uint8_t *mem)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int ret = fd < 0 || ftruncate(fd, (off_t)size) < 0 ? -errno : 0;

	for (int i = 0; i < n && !ret; i++) {
		uint64_t step = runs[i].every > 1 ? runs[i].every * 4096ull : 0;
		uint64_t len = step ? 4096 : runs[i].len;
		uint8_t *buf = malloc(len);

		uint64_t end = runs[i].off + runs[i].len;

		for (uint64_t off = runs[i].off; buf && !ret && off < end;
		     off += step ? step : len) {
			diff_fill(buf, off, len, runs[i].seed);
			if (pwrite(fd, buf, len, (off_t)off) != (ssize_t)len)
				ret = -EIO;
			else if (mem)
				memcpy(mem + off, buf, len);
		}
		ret = buf ? ret : -ENOMEM;
		free(buf);
	}
	if (fd >= 0)
		close(fd);
	return ret;
}

/*
 * Does the file at path have its first data at first, and a hole at
 * 0 before it (a filesystem that reports holes page by page)?
 */
static inline bool diff_holes_seen(const char *path, uint64_t first)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	bool seen = fd >= 0 && lseek(fd, 0, SEEK_DATA) == (off_t)first &&
		    (first == 0 || lseek(fd, 0, SEEK_HOLE) == 0);

	if (fd >= 0)
		close(fd);
	return seen;
}

#endif
