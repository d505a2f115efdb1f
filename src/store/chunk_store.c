// SPDX-License-Identifier: Apache-2.0
/*
 * chunk_store.c - a chunk store's names (docs/image-format.md, "Chunk
 * store"): an object's name by its hash, where an image's store is from
 * the image's place, and the store path an image records.  The stores
 * themselves are store.h's (a directory, a URL, a bucket).
 *
 * Decision: paths and specs only, nothing opened here (but realpath()),
 * so every kind of store and the image source share one spelling.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "format/image.h"
#include "store/chunk_store.h"
#include "store/store_ops.h"
#include "store/s3.h"
#include "util/error.h"

void store_chunk_name(const uint8_t *hash, char *buf, size_t n)
{
	char hex[IMAGE_HASH_HEX];

	image_hash_hex(hash, hex);
	snprintf(buf, n, STORE_CHUNKS "/%.2s/%s", hex, hex);
}

bool store_is_s3(const char *spec)
{
	return s3_is_spec(spec);
}

bool store_is_http(const char *spec)
{
	return !strncasecmp(spec, "http://", 7) ||
	       !strncasecmp(spec, "https://", 8);
}

bool store_spec_local(const char *spec)
{
	return !store_is_s3(spec) && !store_is_http(spec);
}

/* Remove "." and ".." segments from the path that starts at p (in place). */
static void remove_dots(char *p)
{
	char *out = p, *in = p;

	while (*in) {
		size_t k = strcspn(in + 1, "/") + 1;	/* "/seg" */

		if (k == 2 && in[1] == '.') {
			/* "/." */
		} else if (k == 3 && in[1] == '.' && in[2] == '.') {
			while (out > p && *--out != '/')
				;
		} else {
			memmove(out, in, k);
			out += k;
		}
		in += k;
	}
	*out = 0;
}

int store_resolve(const char *spec, const char *rel, char *out, size_t n)
{
	size_t base;

	if (!store_spec_local(spec)) {
		const char *host = strstr(spec, "://") + 3;
		size_t h = (size_t)(host - spec), path;

		base = strcspn(spec, "?#");
		path = h + strcspn(host, "/?#");
		while (base > path && spec[base - 1] != '/')
			base--;
		if (base <= path) {	/* http://host: the root */
			if ((size_t)snprintf(out, n, "%.*s/%s", (int)path, spec,
					     rel) >= n)
				return -ENAMETOOLONG;
		} else if ((size_t)snprintf(out, n, "%.*s%s", (int)base, spec,
					    rel) >= n) {
			return -ENAMETOOLONG;
		}
		remove_dots(out + path);
		if (!out[path])
			snprintf(out + path, n - path, "/");
		return 0;
	}
	base = strrchr(spec, '/') ? (size_t)(strrchr(spec, '/') - spec) + 1 : 0;
	if (!base && !strcmp(rel, "."))
		return (size_t)snprintf(out, n, ".") < n ? 0 : -ENAMETOOLONG;
	return (size_t)snprintf(out, n, "%.*s%s", (int)base, spec, rel) < n ?
	       0 : -ENAMETOOLONG;
}

int store_relative(const char *image_path, const char *dir, char *out,
		   size_t n)
{
	char *img_dir = strdup(image_path), *slash, *a = NULL, *b = NULL;
	size_t i = 0, common = 0, at = 0;
	int ret = 0;

	if (!img_dir)
		return -ENOMEM;
	slash = strrchr(img_dir, '/');
	if (slash)
		slash == img_dir ? (void)(slash[1] = 0) : (void)(*slash = 0);
	a = realpath(slash ? img_dir : ".", NULL);
	b = realpath(dir, NULL);
	if (!a || !b) {
		ret = fl_err(-errno, "%s: %m", !a ? (slash ? img_dir : ".") :
			     dir);
		goto out;
	}
	if (!strcmp(a, "/") || !strcmp(b, "/")) {	/* the root: absolute */
		ret = fl_err(-EINVAL, "--store %s: the store and the image's "
			     "directory must both be below /", dir);
		goto out;
	}
	/* the longest common prefix of whole components */
	for (i = 0; a[i] && a[i] == b[i]; i++)
		if (a[i] == '/')
			common = i;
	if ((!a[i] || a[i] == '/') && (!b[i] || b[i] == '/'))
		common = i;
	out[0] = 0;
	for (const char *c = a + common; *c; c++)	/* up from a */
		if (*c == '/')
			at += (size_t)snprintf(out + at, n > at ? n - at : 0,
					       "%s..", at ? "/" : "");
	if (b[common])			/* down to b */
		at += (size_t)snprintf(out + at, n > at ? n - at : 0, "%s%s",
				       at ? "/" : "", b + common + 1);
	if (!at)
		at = (size_t)snprintf(out, n, ".");
	if (at >= n || !image_store_path_ok(out))
		ret = fl_err(-ENAMETOOLONG, "--store %s: its path from the "
			     "image's directory cannot be recorded (at most "
			     "%d bytes, no control characters)", dir,
			     IMAGE_STORE_PATH_MAX);
out:
	free(img_dir);
	free(a);
	free(b);
	return ret;
}

int store_relative_s3(const char *image, const char *store, char *out,
		      size_t n)
{
	char root[1024];
	const char *ib = image + 5, *ik = strchr(ib, '/'), *sk, *c;
	size_t common = 0, at = 0, dir;
	int ret = s3_root_spec(store, root, sizeof(root));

	if (ret < 0)
		return ret;
	sk = strchr(root + 5, '/') + 1;		/* "PREFIX/" or "" */
	if (!ik || (size_t)(ik - ib) != (size_t)(sk - 1 - (root + 5)) ||
	    strncmp(ib, root + 5, (size_t)(ik - ib)))
		return fl_err(-EINVAL, "%s: the image must be in the bucket of "
			      "its store %s", image, store);
	ik++;
	if (strstr(ik, "//") || strstr(sk, "//"))
		return fl_err(-EINVAL, "%s: an empty path segment ('//') in "
			      "the image's or the store's key", image);
	dir = strrchr(ik, '/') ? (size_t)(strrchr(ik, '/') - ik) + 1 : 0;
	/* the longest common prefix of whole segments of "DIR/", "PREFIX/" */
	for (size_t i = 0; i < dir && ik[i] == sk[i]; i++)
		if (ik[i] == '/')
			common = i + 1;
	out[0] = 0;
	for (c = ik + common; c < ik + dir; c++)	/* up from the image */
		if (*c == '/')
			at += (size_t)snprintf(out + at, n > at ? n - at : 0,
					       "%s..", at ? "/" : "");
	if (sk[common])				/* down to the store */
		at += (size_t)snprintf(out + at, n > at ? n - at : 0, "%s%.*s",
				       at ? "/" : "",
				       (int)strlen(sk + common) - 1,
				       sk + common);
	if (!at)
		at = (size_t)snprintf(out, n, ".");
	if (at >= n || !image_store_path_ok(out))
		return fl_err(-ENAMETOOLONG, "--store %s: its path from the "
			      "image's prefix cannot be recorded (at most %d "
			      "bytes, no control characters)", store,
			      IMAGE_STORE_PATH_MAX);
	return 0;
}
