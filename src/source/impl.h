/* SPDX-License-Identifier: Apache-2.0 */
/*
 * impl.h - the constructors of the source implementations, for open.c
 * (and for a source built on another: http.c over image.c).
 */
#ifndef FAULTLINE_SOURCE_IMPL_H
#define FAULTLINE_SOURCE_IMPL_H

#include "source/source.h"

/* Constructors, one per implementation; return 0 or -errno. */
int source_file_open(const char *path, struct fl_source **out);
int source_image_open(const char *path, struct fl_source **out);
/* tcp://HOST:PORT[?retry_ms=N]: a live post-copy sender (peer.c). */
/* Is spec a tcp:// source's form?  0, or -EINVAL saying what is wrong. */
int source_peer_check(const char *spec);
int source_peer_open(const char *spec, const struct fl_source_opts *o,
		     struct fl_source **out);
/*
 * An image whose bytes are read from lower (takes over the caller's
 * reference, also on failure); name is used in messages.  A version 3
 * image's chunk store is found from url (the image's) and read with o.
 */
int source_image_over(struct fl_source *lower, const char *name,
		      const char *url, const struct fl_source_opts *o,
		      struct fl_source **out);
/* An http:// or https:// URL of a raw memory file or an image. */
int source_http_open(const char *url, const struct fl_source_opts *o,
		     struct fl_source **out);
/*
 * s3://BUCKET/KEY: an http source at the object's URL, its requests
 * signed with the credentials of the environment (store/s3.c).
 */
int source_s3_open(const char *spec, const struct fl_source_opts *o,
		   struct fl_source **out);

#endif
