/* SPDX-License-Identifier: Apache-2.0 */
/*
 * chunk_store.h - a chunk store in a directory (docs/image-format.md, "Chunk
 * store"): DIR/chunks/HH/HASH, one object per distinct chunk, named by
 * the SHA-256 of its uncompressed bytes; written by image_create (--store),
 * read by version 3 images, swept by store_gc.
 */
#ifndef FAULTLINE_STORE_CHUNK_STORE_H
#define FAULTLINE_STORE_CHUNK_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/image.h"

#define STORE_CHUNKS	"chunks"	/* DIR/chunks/HH/HASH */
#define STORE_LOCK	".lock"		/* DIR/.lock: create shares, gc owns */
/* DIR/chunks/HH/.tmp-*: an object being written; older ones are swept */
#define STORE_STALE_TMP_S 3600

/* "chunks/HH/HASH" of hash, relative to the store's root. */
void store_chunk_name(const uint8_t *hash, char *buf, size_t n);

/*
 * Where the store of the image at spec (a path, an http(s) URL or an
 * s3:// spec, whose bucket is taken as a URL's host) is:
 * rel (its store path) from spec's directory or URL prefix, a URL's dot
 * segments resolved (and its query dropped).  0 or -ENAMETOOLONG.
 */
int store_resolve(const char *spec, const char *rel, char *out, size_t n);

/*
 * The store path an image at image_path records for the store at dir:
 * dir relative to image_path's directory ("." if the same).  0 or -errno
 * with a message.
 */
int store_relative(const char *image_path, const char *dir, char *out,
		   size_t n);

/*
 * The store path an image at s3://BUCKET/KEY records for the store at
 * s3://BUCKET[/PREFIX] (the same bucket): the prefix relative to KEY's
 * "directory", "." if the same.  0 or -errno with a message.
 */
int store_relative_s3(const char *image, const char *store, char *out,
		      size_t n);

/* A directory store for reading: 0 or -errno with a message. */
int store_dir_open(const char *dir, struct image_store **out);

/*
 * The chunk store at url, an http(s) URL prefix or s3://BUCKET/PREFIX
 * (http_store.c), cached by hash in o's cache, its notes to o's
 * callback.  0 or -errno with a message.
 */
struct fl_source_opts;
int http_store_open(const char *url, const struct fl_source_opts *o,
		    struct image_store **out);

/* Attach the directory store a version 3 image at path names. */
int store_attach_dir(struct image *img, const char *path);

/* ---- writing ------------------------------------------------------------ */

struct s3_store;

struct store_writer {
	char dir[4096];
	int dfd;		/* the store's root */
	int lock;		/* DIR/.lock, held shared while writing */
	unsigned int seq;
	struct s3_store *s3;	/* s3://BUCKET/PREFIX: a bucket's, else NULL */
};

/* Is dir a store in a bucket, s3://BUCKET[/PREFIX]? */
bool store_is_s3(const char *dir);

/*
 * Open (creating DIR and DIR/chunks if need be) and take the store's lock
 * shared, so no gc runs until store_close (an author starts the registry
 * next: registry_open_write).  For s3://BUCKET[/PREFIX]:
 * the credentials from the environment, nothing asked of the bucket
 * yet, no lock.  0 or -errno with a message.
 */
int store_open_write(const char *dir, struct store_writer *w);
/*
 * The size of the object hash if the store has it, else -ENOENT; in a
 * bucket, any other answer to the HEAD is an error (-EIO with one line).
 * Safe from several threads.
 */
int store_has(struct store_writer *w, const uint8_t *hash, uint64_t *size);
/*
 * Write the object hash (len bytes) unless it is there already: then
 * *size is the size of the one there (which may be another encoding of
 * the same chunk) and *wrote false.  0 or -errno with a message.
 */
int store_put(struct store_writer *w, const uint8_t *hash, const void *buf,
	      size_t len, uint64_t *size, bool *wrote);
/* Every object written so far on stable storage: 0 or -errno. */
int store_sync(struct store_writer *w);
void store_close(struct store_writer *w);

#endif
