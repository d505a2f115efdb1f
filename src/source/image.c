// SPDX-License-Identifier: Apache-2.0
/*
 * image.c - a source backed by a compressed chunked image
 * (src/format/image.c, docs/image-format.md).
 *
 * Decisions: a read that covers a whole chunk decompresses straight into the
 * caller's buffer (the engine's usual case: no extra copy, no cache); a
 * read of part of a chunk goes through a small LRU cache of decompressed
 * chunks so neighbouring partial reads decompress once.  Once some chunk is
 * read whole a second time (sessions of one daemon restoring one snapshot),
 * whole reads go through the cache too, and a chunk being decompressed is
 * waited for (single flight): each is decompressed once for all.  Slots are
 * pinned while in use, so copies in and out run outside the mutex, which
 * only guards slot bookkeeping.  Decompression state is per thread (in
 * image.c), so engine threads read concurrently.  Every decompression is
 * hash-checked; a bad chunk fails the read with -EBADMSG / -EIO and a
 * message naming the chunk, and is never cached.  No map(): the bytes only
 * exist after decompression.  The image's bytes come from a file, or
 * from another source (source_image_over: an image fetched over HTTP).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faultline.h"
#include "util/error.h"
#include "format/image.h"
#include "store/chunk_store.h"
#include "store/store.h"
#include "source/impl.h"

#define CACHE_BYTES	(32u << 20)	/* the most, once shared */
#define CACHE_MAX_SLOTS	64
#define CACHE_MIN_SLOTS	2
#define CACHE_ONE_SLOTS	16		/* the most for one reader */

struct chunk_slot {
	void *buf;		/* chunk_size bytes, allocated on first use */
	uint64_t idx;		/* chunk held or being decompressed */
	uint64_t used;		/* LRU clock */
	unsigned int pins;	/* readers copying out, or the filler */
	bool filling;		/* the filler is decompressing idx */
	bool ready;
	unsigned int fills;	/* fills begun: a waiter knows its own */
	int err;		/* the last fill's, and its line: */
	char why[200];		/* given to every reader that waited */
};

struct source_image {
	struct fl_source base;
	struct image *img;
	struct fl_source *lower;	/* holds the image's bytes, or NULL */
	pthread_mutex_t mu;
	pthread_cond_t filled;		/* a slot's filling ended */
	uint64_t clock;
	unsigned int nslots;
	struct chunk_slot slots[CACHE_MAX_SLOTS];
	atomic_uchar *seen;		/* per chunk: read whole before */
	atomic_bool shared;		/* a chunk was read whole twice */
};

#define to_image(s) ((struct source_image *)(s))

/*
 * Should a whole read of chunk i go through the cache?  Once any chunk has
 * been read whole twice (sessions of one daemon restoring the same
 * snapshot), every chunk does, so that it is decompressed once for all.
 */
static bool chunk_shared(struct source_image *si, uint64_t i)
{
	if (atomic_load_explicit(&si->shared, memory_order_relaxed))
		return true;
	if (!si->seen || !atomic_exchange(&si->seen[i], 1))
		return false;
	atomic_store(&si->shared, true);
	return true;
}

/* A slot holding or filling chunk i, or NULL.  Called with mu held. */
static struct chunk_slot *slot_find(struct source_image *si, uint64_t i)
{
	for (unsigned int k = 0; k < si->nslots; k++) {
		struct chunk_slot *sl = &si->slots[k];

		if ((sl->ready || sl->filling) && sl->idx == i)
			return sl;
	}
	return NULL;
}

/*
 * The least recently used unpinned slot, or NULL.  Called with mu held.
 * One reader's partial reads rarely come back to a chunk, so until the
 * source is shared only the first CACHE_ONE_SLOTS slots are used (each
 * slot's buffer is allocated, and its pages faulted in, on first use).
 */
static struct chunk_slot *slot_victim(struct source_image *si)
{
	unsigned int n = si->nslots;
	struct chunk_slot *victim = NULL;

	if (!atomic_load_explicit(&si->shared, memory_order_relaxed) &&
	    n > CACHE_ONE_SLOTS)
		n = CACHE_ONE_SLOTS;
	for (unsigned int k = 0; k < n; k++) {
		struct chunk_slot *sl = &si->slots[k];

		if (!sl->pins && (!victim || !sl->ready ||
				  (victim->ready && sl->used < victim->used)))
			victim = sl;
	}
	return victim;
}

/* Decompress chunk i into the victim sl, pinned; mu held, dropped inside. */
static int slot_fill(struct source_image *si, struct chunk_slot *sl,
		     uint64_t i)
{
	int ret;

	sl->pins = 1;
	sl->idx = i;
	sl->ready = false;
	sl->filling = true;
	sl->fills++;
	pthread_mutex_unlock(&si->mu);
	if (!sl->buf)
		sl->buf = malloc(si->img->hdr.chunk_size);
	ret = sl->buf ? image_read_chunk(si->img, i, sl->buf) :
			fl_err(-ENOMEM, "%s: chunk %llu: no memory",
			       si->base.desc, (unsigned long long)i);
	pthread_mutex_lock(&si->mu);
	sl->filling = false;
	sl->ready = !ret;
	sl->err = ret;
	if (ret)
		snprintf(sl->why, sizeof(sl->why), "%s", fl_last_error());
	sl->used = ++si->clock;
	pthread_cond_broadcast(&si->filled);
	return ret;
}

/*
 * A pinned slot holding chunk i, or NULL with *err set: 0 if every slot is
 * pinned (the caller decompresses privately), or the fill's -errno.  One
 * reader decompresses a chunk; the others wait for it (single flight).
 */
static struct chunk_slot *slot_get(struct source_image *si, uint64_t i,
				   int *err)
{
	struct chunk_slot *sl;

	*err = 0;
	pthread_mutex_lock(&si->mu);
	while ((sl = slot_find(si, i)) && sl->filling) {
		unsigned int fills = sl->fills;

		pthread_cond_wait(&si->filled, &si->mu);
		if (sl->fills == fills && !sl->filling && !sl->ready) {
			/* the fill waited for failed: its error, for all */
			*err = fl_err(sl->err, "%s", sl->why);
			pthread_mutex_unlock(&si->mu);
			return NULL;
		}
	}
	if (sl) {
		sl->pins++;
		sl->used = ++si->clock;
	} else if ((sl = slot_victim(si))) {
		*err = slot_fill(si, sl, i);
		if (*err) {
			sl->pins--;
			sl = NULL;
		}
	}
	pthread_mutex_unlock(&si->mu);
	return sl;
}

static void slot_put(struct source_image *si, struct chunk_slot *sl)
{
	pthread_mutex_lock(&si->mu);
	sl->pins--;
	pthread_mutex_unlock(&si->mu);
}

/* Copy [from, from+n) of chunk i to dst, through the cache. */
static int read_cached(struct source_image *si, uint64_t i, void *dst,
		       size_t from, size_t n)
{
	struct chunk_slot *sl;
	void *tmp;
	int ret;

	sl = slot_get(si, i, &ret);
	if (sl) {
		memcpy(dst, (char *)sl->buf + from, n);
		slot_put(si, sl);
		return 0;
	}
	if (ret)
		return ret;
	/* Every slot busy: decompress privately. */
	tmp = malloc(si->img->hdr.chunk_size);
	if (!tmp)
		return -ENOMEM;
	ret = image_read_chunk(si->img, i, tmp);
	if (!ret)
		memcpy(dst, (char *)tmp + from, n);
	free(tmp);
	return ret;
}

static int image_src_read(struct fl_source *s, void *buf, size_t len,
			  uint64_t off)
{
	struct source_image *si = to_image(s);
	struct image *img = si->img;
	uint64_t cs = img->hdr.chunk_size;
	char *dst = buf;

	if (off > s->size || len > s->size - off)
		return -ERANGE;
	while (len) {
		uint64_t i = off / cs;
		size_t from = (size_t)(off - i * cs);
		size_t clen = image_chunk_len(img, i);
		size_t n = clen - from < len ? clen - from : len;
		int ret;

		if (img->index[i].kind == IMAGE_ZERO) {
			memset(dst, 0, n);
			ret = 0;
		} else if (n == clen && !chunk_shared(si, i)) {
			ret = image_read_chunk(img, i, dst);
		} else {
			ret = read_cached(si, i, dst, from, n);
		}
		if (ret < 0)
			return ret;
		dst += n;
		off += n;
		len -= n;
	}
	return 0;
}

static bool image_src_hole(struct fl_source *s, uint64_t off, size_t len)
{
	struct image *img = to_image(s)->img;
	uint64_t cs = img->hdr.chunk_size;

	if (!len || off > s->size || len > s->size - off)
		return false;
	for (uint64_t i = off / cs; i <= (off + len - 1) / cs; i++)
		if (img->index[i].kind != IMAGE_ZERO)
			return false;
	return true;
}

static void image_src_hint(struct fl_source *s, uint64_t off, size_t len)
{
	struct image *img = to_image(s)->img;
	uint64_t cs = img->hdr.chunk_size;
	uint64_t start = UINT64_MAX, end = 0;

	/* a store's objects are not in the image: nothing to read ahead */
	if (!len || off > s->size || len > s->size - off ||
	    image_in_store(&img->hdr))
		return;
	for (uint64_t i = off / cs; i <= (off + len - 1) / cs; i++) {
		const struct image_entry *e = &img->index[i];

		if (e->kind == IMAGE_ZERO)
			continue;
		if (e->offset < start)
			start = e->offset;
		if (e->offset + e->stored_len > end)
			end = e->offset + e->stored_len;
	}
	if (start >= end)
		return;
	if (img->fd >= 0)
		posix_fadvise(img->fd, (off_t)start, (off_t)(end - start),
			      POSIX_FADV_WILLNEED);
	else if (to_image(s)->lower->ops->hint)
		to_image(s)->lower->ops->hint(to_image(s)->lower, start,
					      end - start);
}

/* A diff image holds the pages of its map; any other image, all. */
static uint64_t image_src_extent(struct fl_source *s, uint64_t off,
				 uint64_t len, bool *held)
{
	const struct image *img = to_image(s)->img;
	uint64_t ps = img->hdr.page_size, p = off / ps, end;

	*held = image_holds(img, p);
	if (!img->held)
		return len;
	end = (p + 1) * ps;
	while (end < off + len) {
		p = end / ps;
		/* a whole byte of the map alike: eight pages at once */
		if (p % 8 == 0 && img->held[p / 8] == (*held ? 0xff : 0) &&
		    (p + 8) * ps <= s->size) {
			end += 8 * ps;
			continue;
		}
		if (image_holds(img, p) != *held)
			break;
		end += ps;
	}
	return end - off < len ? end - off : len;
}

/* What the image's bytes and its store's objects took from afar. */
static int image_src_remote_bytes(const struct fl_source *s,
				  uint64_t *fetched, uint64_t *cached)
{
	const struct source_image *si = to_image(s);
	struct image_store *st = si->img->store;
	int ret = si->lower ?
		  fl_source_remote_bytes(si->lower, fetched, cached) : -ENODATA;

	if (ret < 0)
		*fetched = *cached = 0;
	if (!st || !st->remote)
		return ret;
	*fetched += atomic_load(&st->bytes_fetched);
	*cached += atomic_load(&st->bytes_cached);
	return 0;
}

static const struct image *image_src_image(const struct fl_source *s)
{
	return to_image(s)->img;
}

static void image_src_destroy(struct fl_source *s)
{
	struct source_image *si = to_image(s);

	for (unsigned int k = 0; k < si->nslots; k++)
		free(si->slots[k].buf);
	free(si->seen);
	pthread_cond_destroy(&si->filled);
	pthread_mutex_destroy(&si->mu);
	image_close(si->img);
	fl_source_put(si->lower);
	free(si);
}

static const struct fl_source_ops image_ops = {
	.name = "image",
	.read = image_src_read,
	.hole = image_src_hole,
	.hint = image_src_hint,
	.extent = image_src_extent,
	.image = image_src_image,
	.remote_bytes = image_src_remote_bytes,
	.destroy = image_src_destroy,
};

static int image_src_new(struct image *img, struct fl_source *lower,
			 const char *desc, struct fl_source **out)
{
	struct source_image *si = calloc(1, sizeof(*si));
	unsigned int n;

	if (!si)
		return -ENOMEM;
	si->img = img;
	si->lower = lower;
	n = CACHE_BYTES / img->hdr.chunk_size;
	si->nslots = n < CACHE_MIN_SLOTS ? CACHE_MIN_SLOTS :
		     n > CACHE_MAX_SLOTS ? CACHE_MAX_SLOTS : n;
	/* a missing map only costs sharing: every whole read decodes */
	si->seen = calloc(img->hdr.total_size / img->hdr.chunk_size + 1, 1);
	pthread_mutex_init(&si->mu, NULL);
	pthread_cond_init(&si->filled, NULL);
	source_init(&si->base, &image_ops, img->hdr.total_size, desc);
	si->base.below = lower;
	*out = &si->base;
	return 0;
}

int source_image_open(const char *path, struct fl_source **out)
{
	struct image *img;
	int ret = image_open(path, &img);

	if (ret < 0)
		return ret;
	ret = store_attach_at(img, path, NULL);	/* version 3: its store */
	if (ret < 0) {
		image_close(img);
		return ret;
	}
	ret = image_src_new(img, NULL, path, out);
	if (ret < 0)
		image_close(img);
	return ret;
}

static int lower_read(void *arg, void *buf, size_t len, uint64_t off)
{
	struct fl_source *lower = arg;

	return lower->ops->read(lower, buf, len, off);
}

int source_image_over(struct fl_source *lower, const char *name,
		      const char *url, const struct fl_source_opts *o,
		      struct fl_source **out)
{
	struct image *img;
	int ret = image_open_reader(name, lower->size, lower_read, lower,
				    &img);

	if (ret == 0) {		/* version 3: its store, beside its URL */
		ret = store_attach_at(img, url, o);
		if (ret < 0)
			image_close(img);
	}
	if (ret < 0) {
		fl_source_put(lower);
		return ret;
	}
	ret = image_src_new(img, lower, lower->desc, out);
	if (ret < 0) {
		image_close(img);
		fl_source_put(lower);
	}
	return ret;
}
