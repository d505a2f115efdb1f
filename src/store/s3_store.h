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
 * Locks, so that gc never deletes an object a create is about to name:
 * PREFIX/locks/create-ID (shared) and PREFIX/locks/gc-ID (exclusive),
 * each with an owner and a lease timed by the store's clock, renewed
 * while held (s3_lock.c, which says how).  A create that meets a live
 * gc's lock tries again for up to S3_LOCK_WAIT_MS; a gc that meets any
 * live lock gives up (-EBUSY, the line naming the lock), deleting
 * nothing; a lock whose lease ran out is taken over, said in one line.
 * While held, a chunk's PUT fails once the lock is known lost, a DELETE
 * unless the lock is surely still ours, and an index's PUT unless the
 * store confirms it right then.  0 or -errno with one line.
 */
#define S3_LOCKS	"locks/"
#define S3_LOCK_WAIT_MS	(5 * 60 * 1000)
int s3_store_lock(struct s3_store *s, bool exclusive);
/* Take ours away (best effort: a lock left behind is taken over later). */
void s3_store_unlock(struct s3_store *s);

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

/* The store's spec, "s3://BUCKET/PREFIX/" (with a '/'). */
const char *s3_store_spec(const struct s3_store *s);

void s3_store_close(struct s3_store *s);

#endif
