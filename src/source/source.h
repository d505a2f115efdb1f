/* SPDX-License-Identifier: Apache-2.0 */
/*
 * source.h - where page contents come from, behind one small vtable.
 *
 * A source is a byte-addressable snapshot of known size.  read() fills a
 * buffer; map() offers the bytes for the kernel to copy; hole() reports
 * ranges known to be zero without reading them; hint() announces a future
 * read; extent() says which ranges a source used as a layer holds.
 * Implementations (constructors in impl.h, chosen in open.c): file.c (a
 * raw memory file), image.c (a compressed chunked image,
 * docs/image-format.md), http.c (either behind an http(s) URL, with
 * store/http_cache.c), peer.c (what a live post-copy sender sends,
 * tcp://), criu_ps.c (CRIU's page server, for lazy-pages); layers.c (a
 * base with diffs over it), concat.c (files end to end) and criu_dump.c
 * (a CRIU dump: its tasks over its pages) are built of other sources.
 */
#ifndef FAULTLINE_SOURCE_H
#define FAULTLINE_SOURCE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/note.h"

struct fl_source;
struct fl_source_opts;
struct image;

struct fl_source_ops {
	const char *name;
	/* Read exactly len bytes at off into buf: 0, or -errno. */
	int (*read)(struct fl_source *s, void *buf, size_t len, uint64_t off);
	/*
	 * Optional: a pointer to [off, off+len) that UFFDIO_COPY may copy
	 * from directly (one copy instead of two), or NULL.  Never read in
	 * user space: the kernel turns a fault on it (a truncated file) into
	 * EFAULT, where a user-space read would be SIGBUS.
	 */
	const void *(*map)(struct fl_source *s, uint64_t off, size_t len);
	/* Optional: true if [off, off+len) is known to read as zeros. */
	bool (*hole)(struct fl_source *s, uint64_t off, size_t len);
	/* Optional: [off, off+len) will be read soon. */
	void (*hint)(struct fl_source *s, uint64_t off, size_t len);
	/*
	 * Optional, asked of a source used as a layer over others
	 * (layers.c): from off (< size, len > 0), the length of the run this
	 * source holds (*held true) or does not hold at all (*held false: the
	 * layers below show through), at least 1 and at most len.  Not
	 * hole(): a held run may read as zeros (a page a diff wrote as
	 * zeros), and a run a base does not hold still reads as its hole()
	 * says.  Without it a source holds everything.
	 */
	uint64_t (*extent)(struct fl_source *s, uint64_t off, uint64_t len,
			   bool *held);
	/*
	 * Optional, for a source built of others (layers.c): the bytes its
	 * remote parts fetched and read from their caches, summed, as
	 * fl_source_remote_bytes() below; -ENODATA if none is remote.
	 */
	int (*remote_bytes)(const struct fl_source *s, uint64_t *fetched,
			    uint64_t *cached);
	/*
	 * Optional: the faultline image whose pages this source serves on
	 * top (format/image.h: its content id, its parent's): an image's
	 * own; a stack's, its top layer's.  NULL for anything else.
	 */
	const struct image *(*image)(const struct fl_source *s);
	void (*destroy)(struct fl_source *s);
};

struct fl_source {
	const struct fl_source_ops *ops;
	uint64_t size;
	atomic_int refs;
	char desc[256];		/* for messages: the path or URL, no secrets */
	struct note note;	/* fl_source_opts' note callback */
	/*
	 * A remote source counts where its bytes came from (the daemon's
	 * metrics): fetched from the origin, or read from the local cache.
	 * below: the source this one reads through (an image over HTTP).
	 */
	bool remote;
	_Atomic uint64_t bytes_fetched, bytes_cached;
	struct fl_source *below;
};

/*
 * Is spec a source's form (a path, http(s)://, tcp://HOST:PORT), without
 * opening it?  0, or -EINVAL with the error saying what is wrong: an
 * unsupported scheme, a malformed tcp:// address.
 */
int source_check_spec(const char *spec);
/* Initialise the common part; refs starts at 1. */
void source_init(struct fl_source *s, const struct fl_source_ops *ops,
		 uint64_t size, const char *desc);


/* s->ops->image(s), or NULL if s has no such op. */
static inline const struct image *source_image(const struct fl_source *s)
{
	return s->ops->image ? s->ops->image(s) : NULL;
}

/* Take the note callback of o (may be NULL) for s. */
void source_set_note(struct fl_source *s, const struct fl_source_opts *o);
/* Tell s's note callback, if any (s may be NULL), one line: one a second. */
void source_note(struct fl_source *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The same with no rate limit: for what is said once (s may be NULL). */
void source_say(struct fl_source *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
