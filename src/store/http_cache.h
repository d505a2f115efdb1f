/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_cache.h - a size-bounded local cache of remote blocks (`--cache DIR`)
 * for the HTTP source.
 */
#ifndef FAULTLINE_HTTP_CACHE_H
#define FAULTLINE_HTTP_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct http_cache;

struct note;

/*
 * Open (creating if needed) the cache directory dir, bounded to max_bytes
 * of block files.  0 or -errno with a message naming dir.  note (may be
 * NULL: its owner's, a source's or a store's) hears what the cache skips
 * (a symbolic link in it) or cannot do (a write, the disk full).
 */
int http_cache_open(const char *dir, uint64_t max_bytes,
		    struct note *note, struct http_cache **out);
void http_cache_close(struct http_cache *c);

/*
 * Copy block `block` (len bytes) of the object named by key into dst.
 * True only if the cached block exists and its XXH64 checks; a bad block
 * is removed (dst then holds garbage: the caller fetches it again).
 */
bool http_cache_get(struct http_cache *c, uint64_t key, uint64_t block,
		    void *dst, size_t len);

/* Store a block; failures only cost a later refetch, so none is reported. */
void http_cache_put(struct http_cache *c, uint64_t key, uint64_t block,
		    const void *src, size_t len);

/*
 * The same for a chunk of a chunk store, named by its SHA-256 (32 bytes)
 * alone: shared by every image and store URL that holds it.  drop removes
 * one found bad.
 */
bool http_cache_get_chunk(struct http_cache *c, const uint8_t *sha,
			  void *dst, size_t len);
void http_cache_put_chunk(struct http_cache *c, const uint8_t *sha,
			  const void *src, size_t len);
void http_cache_drop_chunk(struct http_cache *c, const uint8_t *sha);

/* Bytes of block files the cache holds (this process's view). */
uint64_t http_cache_bytes(struct http_cache *c);

#endif
