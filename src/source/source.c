/*
 * source.c - the common part of every source: its size, description and
 * reference count.  Which implementation a spec names is open.c's choice.
 */
#include <stdio.h>

#include "faultline.h"
#include "source/source.h"

void source_init(struct fl_source *s, const struct fl_source_ops *ops,
		 uint64_t size, const char *desc)
{
	s->ops = ops;
	s->size = size;
	atomic_init(&s->refs, 1);
	snprintf(s->desc, sizeof(s->desc), "%s", desc);
}

uint64_t fl_source_size(const struct fl_source *src)
{
	return src->size;
}

struct fl_source *fl_source_get(struct fl_source *src)
{
	atomic_fetch_add(&src->refs, 1);
	return src;
}

void fl_source_put(struct fl_source *src)
{
	if (src && atomic_fetch_sub(&src->refs, 1) == 1)
		src->ops->destroy(src);
}
