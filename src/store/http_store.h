/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_store.h - a store read by URL (http_store.c): one object's
 * fetch, for that kind and a bucket's reads alike, and its opening.
 */
#ifndef FAULTLINE_STORE_HTTP_STORE_H
#define FAULTLINE_STORE_HTTP_STORE_H

#include <stddef.h>

struct http_origin;

/*
 * The object name (relative to h's URL, the store's root) fetched whole,
 * exactly len bytes, into buf: one GET with http_xfer.c's retries and
 * deadline.  0 or -errno with one line naming the store and the object.
 */
int http_store_fetch(struct http_origin *h, const char *name, void *buf,
		     size_t len);

/*
 * The read-only store at url, an http(s) URL prefix, opened by
 * store_open() (store.h).  0 with *out, or -errno.
 */
struct store;
int http_store_open(const char *url, struct store **out);

#endif
