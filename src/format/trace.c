// SPDX-License-Identifier: Apache-2.0
/*
 * trace.c - record and load working-set traces.
 *
 * File format (little-endian):
 *   8 bytes  magic "FLTRACE1"
 *   8 bytes  number of entries N
 *   N x 16   {u64 source offset, u64 length}, in the order first touched
 * Offsets are into the snapshot (source), not host addresses, so a trace
 * recorded on one restore applies to any later restore of the same
 * snapshot, wherever its memory is mapped.  Loading keeps the order the
 * guest first touched them in (what a restarted guest touches next is what
 * replay must fill first) and merges each entry into the run before it
 * when the two touch or overlap, so a stream of faults becomes one large
 * fill; a range touched again later is left to the fill, which skips
 * pages already there.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "faultline.h"
#include "util/error.h"
#include "format/trace.h"

static const char magic[8] = "FLTRACE1";

int trace_init(struct trace *t)
{
	memset(t, 0, sizeof(*t));
	return -pthread_mutex_init(&t->lock, NULL);
}

void trace_free(struct trace *t)
{
	free(t->runs);
	pthread_mutex_destroy(&t->lock);
	memset(t, 0, sizeof(*t));
}

static int push(struct trace *t, uint64_t off, uint64_t len)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 256;
		struct trace_run *r = realloc(t->runs, cap * sizeof(*r));

		if (!r)
			return -ENOMEM;
		t->runs = r;
		t->cap = cap;
	}
	t->runs[t->n++] = (struct trace_run){ off, len };
	return 0;
}

int trace_add(struct trace *t, uint64_t off, uint64_t len)
{
	pthread_mutex_lock(&t->lock);
	int ret = push(t, off, len);

	pthread_mutex_unlock(&t->lock);
	return ret;
}

int trace_save(struct trace *t, const char *path)
{
	FILE *f = fopen(path, "wb");
	int ret = 0;

	if (!f)
		return fl_err(-errno, "trace %s: cannot create: %m", path);
	pthread_mutex_lock(&t->lock);
	uint64_t n = htole64(t->n);

	if (fwrite(magic, 8, 1, f) != 1 || fwrite(&n, 8, 1, f) != 1)
		ret = -EIO;
	for (size_t i = 0; i < t->n && !ret; i++) {
		uint64_t e[2] = { htole64(t->runs[i].off),
				  htole64(t->runs[i].len) };

		if (fwrite(e, sizeof(e), 1, f) != 1)
			ret = -EIO;
	}
	pthread_mutex_unlock(&t->lock);
	if (fclose(f) != 0 && !ret)
		ret = -errno;
	return ret ? fl_err(ret, "trace %s: write failed", path) : 0;
}

int trace_load(struct trace *t, const char *path)
{
	FILE *f = fopen(path, "rb");
	char m[8];
	uint64_t n;
	int ret = 0;

	if (!f)
		return fl_err(-errno, "trace %s: cannot open: %m", path);
	if (fread(m, 8, 1, f) != 1 || memcmp(m, magic, 8) ||
	    fread(&n, 8, 1, f) != 1) {
		fclose(f);
		return fl_err(-EINVAL, "trace %s: not a faultline trace", path);
	}
	n = le64toh(n);
	for (uint64_t i = 0; i < n && !ret; i++) {
		uint64_t e[2];

		if (fread(e, sizeof(e), 1, f) != 1)
			ret = fl_err(-EINVAL, "trace %s: truncated at entry %llu of %llu",
				     path, (unsigned long long)i,
				     (unsigned long long)n);
		else if (le64toh(e[1]) && le64toh(e[0]) + le64toh(e[1]) > le64toh(e[0]))
			ret = push(t, le64toh(e[0]), le64toh(e[1]));
	}
	fclose(f);
	if (ret < 0)
		return ret;
	size_t out = 0;

	for (size_t i = 0; i < t->n; i++) {
		struct trace_run *last = out ? &t->runs[out - 1] : NULL;
		uint64_t off = t->runs[i].off, end = off + t->runs[i].len;

		/* The same stream: grows the run before it, either way. */
		if (last && off <= last->off + last->len && end >= last->off) {
			uint64_t lend = last->off + last->len;

			last->off = off < last->off ? off : last->off;
			last->len = (end > lend ? end : lend) - last->off;
		} else {
			t->runs[out++] = t->runs[i];
		}
	}
	t->n = out;
	return 0;
}

int fl_trace_check(const char *path)
{
	struct trace t;
	int ret = trace_init(&t);

	if (!ret)
		ret = trace_load(&t, path);
	trace_free(&t);
	return ret;
}

int fl_trace_merge(const char *into, const char *part)
{
	char tmp[4096];
	struct trace t;
	int ret = trace_init(&t);

	if (snprintf(tmp, sizeof(tmp), "%s.%d.merge", into, (int)getpid()) >=
	    (int)sizeof(tmp))
		ret = fl_err(-ENAMETOOLONG, "%s: path too long", into);
	if (!ret && access(into, F_OK) == 0)
		ret = trace_load(&t, into);
	if (!ret)
		ret = trace_load(&t, part);
	if (!ret)
		ret = trace_save(&t, tmp);
	if (!ret && rename(tmp, into) < 0)
		ret = fl_err(-errno, "%s: %m", into);
	if (ret < 0)
		unlink(tmp);
	trace_free(&t);
	return ret;
}
