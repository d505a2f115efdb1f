// SPDX-License-Identifier: Apache-2.0
/*
 * source.c - the common part of every source: its size, description and
 * reference count.  Which implementation a spec names is open.c's choice.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "faultline.h"
#include "source/source.h"
#include "util/note.h"

void source_init(struct fl_source *s, const struct fl_source_ops *ops,
		 uint64_t size, const char *desc)
{
	s->ops = ops;
	s->size = size;
	atomic_init(&s->refs, 1);
	snprintf(s->desc, sizeof(s->desc), "%s", desc);
	note_set(&s->note, NULL, NULL);
	s->remote = false;
	atomic_init(&s->bytes_fetched, 0);
	atomic_init(&s->bytes_cached, 0);
	s->below = NULL;
}

int fl_source_remote_bytes(const struct fl_source *s, uint64_t *fetched,
			   uint64_t *cached)
{
	while (s && !s->remote) {
		if (s->ops->remote_bytes)
			return s->ops->remote_bytes(s, fetched, cached);
		s = s->below;
	}
	if (!s)
		return -ENODATA;
	*fetched = atomic_load(&s->bytes_fetched);
	*cached = atomic_load(&s->bytes_cached);
	return 0;
}

void source_set_note(struct fl_source *s, const struct fl_source_opts *o)
{
	note_set(&s->note, o ? o->note : NULL, o ? o->note_arg : NULL);
}

void source_note(struct fl_source *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	note_vrate(s ? &s->note : NULL, fmt, ap);
	va_end(ap);
}

void source_say(struct fl_source *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	note_vsay(s ? &s->note : NULL, fmt, ap);
	va_end(ap);
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
