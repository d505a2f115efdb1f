/* SPDX-License-Identifier: Apache-2.0 */
/*
 * chunk_store.h - a chunk store's names (docs/image-format.md, "Chunk
 * store"): ROOT/chunks/HH/HASH, one object per distinct chunk, named by
 * the SHA-256 of its uncompressed bytes, and where an image's store is;
 * the stores themselves (directory, URL, bucket) are store/store.h's.
 */
#ifndef FAULTLINE_STORE_CHUNK_STORE_H
#define FAULTLINE_STORE_CHUNK_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/image.h"

/* Is spec a bucket's place, s3://BUCKET[/KEY]? */
bool store_is_s3(const char *spec);
/* Is spec an http:// or https:// URL? */
bool store_is_http(const char *spec);
/* Is spec a path on this machine (neither a URL nor s3://)? */
bool store_spec_local(const char *spec);

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

#endif
