/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3_store.h - writing a chunk store in a bucket (s3_store.c): a signed
 * HEAD to ask whether an object is there, a signed PUT to upload one, a
 * LIST and a DELETE for gc.
 */
#ifndef FAULTLINE_SOURCE_S3_STORE_H
#define FAULTLINE_SOURCE_S3_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct s3_store;

/*
 * The store at s3://BUCKET[/PREFIX] for writing, credentials from the
 * environment as for reading (s3.c).  0, or -errno with a message naming
 * what is missing.
 */
int s3_store_open(const char *spec, struct s3_store **out);

/*
 * Is the object name (relative to the store's prefix) there?  0 with its
 * size (HEAD: 200), -ENOENT if not (404), else -EIO with one line naming
 * the object, the status and S3's <Code>.  Safe from several threads.
 */
int s3_store_head(struct s3_store *s, const char *name, uint64_t *size);

/*
 * Upload buf as the object name unless it is there (If-None-Match: *):
 * 0 and *size len, or the size of the one already there; else -errno
 * with one line naming the object, the status and S3's <Code>.
 */
int s3_store_put(struct s3_store *s, const char *name, const void *buf,
		 size_t len, uint64_t *size);

/*
 * Upload buf as the object spec (s3://BUCKET/KEY, which may replace one):
 * the index of an image.  0 or -errno with one line.
 */
int s3_store_put_spec(struct s3_store *s, const char *spec, const void *buf,
		      size_t len);

/*
 * The object spec (s3://BUCKET/KEY) read whole, at most max bytes (a
 * longer body fails the transfer): 0 with *buf (malloc'd) and *len,
 * -ENOENT if there is none (404), else -errno with one line.
 */
int s3_store_get_spec(struct s3_store *s, const char *spec, size_t max,
		      void **buf, size_t *len);

/*
 * Every object whose name (relative to the store's prefix) starts with
 * sub: key() called with each name and size, in key order, page after
 * page (ListObjectsV2); a negative return stops it and is returned.  0,
 * or -errno with one line.
 */
int s3_store_list(struct s3_store *s, const char *sub,
		  int (*key)(void *arg, const char *name, uint64_t size),
		  void *arg);

/* Delete the object name (relative to the prefix): 0 or -errno, one line. */
int s3_store_delete(struct s3_store *s, const char *name);

/*
 * The lock s holds (s3_lock.c takes and drops it: s3_lock.h), as the
 * store's own requests ask it: a chunk's PUT once it is known lost, a
 * DELETE unless it is surely still ours, an index's PUT unless the store
 * confirms it right then.  Decision: the lock gives these to the store
 * when it is taken, so the requests below it never call up into it.
 */
struct s3_lock;
struct s3_held_ops {
	int (*check)(struct s3_lock *l, bool strict);
	int (*confirm)(struct s3_lock *l);
	const char *(*name)(const struct s3_lock *l);
	/* take it away (s3_store_close: the lock goes with the store) */
	void (*drop)(struct s3_store *s, struct s3_lock *l);
};
/* s now holds l (NULL: none), asked through ops. */
void s3_store_hold(struct s3_store *s, struct s3_lock *l,
		   const struct s3_held_ops *ops);
/* The lock s holds, or NULL. */
struct s3_lock *s3_store_held(const struct s3_store *s);

/* An object's size and times, by the store's clock (0: not sent). */
struct s3_stat {
	uint64_t size;
	time_t lm;		/* Last-Modified */
	time_t date;		/* Date: the store's now */
};

/*
 * HEAD (body NULL) or GET the object name: 0 with st filled in and, for a
 * GET, the start of its body (NUL-terminated, at most n - 1 bytes);
 * -ENOENT if it is not there; else -errno with one line.
 */
int s3_store_stat(struct s3_store *s, const char *name, char *body, size_t n,
		  struct s3_stat *st);

/* PUT buf as the object name, replacing it: 0 or -errno with one line. */
int s3_store_replace(struct s3_store *s, const char *name, const void *buf,
		     size_t len);

/* How s's requests are signed (t->url: the prefix's URL, a '/' at its end). */
struct s3_target *s3_store_target(struct s3_store *s);

/* The store's spec, "s3://BUCKET/PREFIX/" (with a '/'). */
const char *s3_store_spec(const struct s3_store *s);

void s3_store_close(struct s3_store *s);

#endif
