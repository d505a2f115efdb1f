// SPDX-License-Identifier: Apache-2.0
/*
 * concat.c - raw files end to end as one source (concat.h): each file is
 * a file source (file.c: mapped for the kernel's copy, holes found with
 * SEEK_DATA), and a read that crosses files is split between them.
 *
 * Decision: map() and hole() answer only for a range inside one file (a
 * region never crosses two: CRIU's ranges are each one task's), so that
 * the one-copy path of file.c is kept; anything else is read.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "faultline.h"
#include "source/concat.h"
#include "source/impl.h"
#include "util/error.h"

struct part {
	struct fl_source *src;
	uint64_t base;
};

struct concat {
	struct fl_source s;
	int n;
	struct part p[];
};

/* The part holding off (off < size). */
static const struct part *part_at(const struct concat *c, uint64_t off)
{
	int lo = 0, hi = c->n - 1;

	while (lo < hi) {
		int mid = (lo + hi + 1) / 2;

		if (c->p[mid].base <= off)
			lo = mid;
		else
			hi = mid - 1;
	}
	return &c->p[lo];
}

static bool within(const struct part *p, uint64_t off, size_t len)
{
	return off - p->base + len <= p->src->size;
}

static int concat_read(struct fl_source *s, void *buf, size_t len,
		       uint64_t off)
{
	struct concat *c = (struct concat *)s;

	if (off > s->size || len > s->size - off)
		return -EIO;
	while (len) {
		const struct part *p = part_at(c, off);
		uint64_t in = off - p->base;
		size_t n = p->src->size - in < len ? p->src->size - in : len;
		int ret = p->src->ops->read(p->src, buf, n, in);

		if (ret < 0)
			return ret;
		buf = (char *)buf + n;
		off += n;
		len -= n;
	}
	return 0;
}

static const void *concat_map(struct fl_source *s, uint64_t off, size_t len)
{
	struct concat *c = (struct concat *)s;

	if (off >= s->size || !len)
		return NULL;
	const struct part *p = part_at(c, off);

	if (!p->src->ops->map || !within(p, off, len))
		return NULL;
	return p->src->ops->map(p->src, off - p->base, len);
}

static bool concat_hole(struct fl_source *s, uint64_t off, size_t len)
{
	struct concat *c = (struct concat *)s;

	if (off >= s->size || !len)
		return false;
	const struct part *p = part_at(c, off);

	return p->src->ops->hole && within(p, off, len) &&
	       p->src->ops->hole(p->src, off - p->base, len);
}

static void concat_hint(struct fl_source *s, uint64_t off, size_t len)
{
	struct concat *c = (struct concat *)s;

	if (off >= s->size || !len)
		return;
	const struct part *p = part_at(c, off);

	if (p->src->ops->hint && within(p, off, len))
		p->src->ops->hint(p->src, off - p->base, len);
}

static void concat_destroy(struct fl_source *s)
{
	struct concat *c = (struct concat *)s;

	for (int i = 0; i < c->n; i++)
		fl_source_put(c->p[i].src);
	free(c);
}

static const struct fl_source_ops concat_ops = {
	.name = "concat",
	.read = concat_read,
	.map = concat_map,
	.hole = concat_hole,
	.hint = concat_hint,
	.destroy = concat_destroy,
};

int source_concat_open(const char *const *paths, int n, const char *desc,
		       struct fl_source **out)
{
	struct concat *c = calloc(1, sizeof(*c) + sizeof(c->p[0]) *
				  (size_t)(n > 0 ? n : 1));
	uint64_t size = 0;

	if (!c)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		struct fl_source *f;
		int ret = source_file_open(paths[i], &f);

		if (ret < 0) {
			concat_destroy(&c->s);
			return ret;
		}
		if (!f->size) {		/* no room: never a part */
			fl_source_put(f);
			continue;
		}
		c->p[c->n++] = (struct part){ f, size };
		size += f->size;
	}
	source_init(&c->s, &concat_ops, size, desc);
	*out = &c->s;
	return 0;
}
