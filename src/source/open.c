// SPDX-License-Identifier: Apache-2.0
/*
 * open.c - the one place that knows every kind of source: a spec string
 * (an http(s) URL, s3://BUCKET/KEY, tcp:// for a post-copy peer, an image
 * by its magic, a CRIU dump's images directory, or a raw memory file)
 * picks the implementation; with layers (fl_source_opts) each is opened
 * so and stacked over the base by layers.c.  A diff image opened as the
 * base brings its chain: its parents, found by the names they are
 * recorded under beside it (the same directory or URL prefix), stacked
 * under it; layers.c checks each against the content id its child names.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "faultline.h"
#include "format/image.h"
#include "source/criu_dump.h"
#include "source/impl.h"
#include "source/layers.h"
#include "store/s3.h"
#include "util/error.h"
#include "util/zero.h"

static bool is_url(const char *spec)
{
	return !strncasecmp(spec, "http://", 7) ||
	       !strncasecmp(spec, "https://", 8);
}

/* The length of spec's "SCHEME://" scheme, or 0 if it names none. */
static size_t scheme_len(const char *spec)
{
	size_t n = 0;

	if (!isalpha((unsigned char)spec[0]))
		return 0;
	while (isalnum((unsigned char)spec[n]) ||
	       (spec[n] && strchr("+-.", spec[n])))
		n++;
	return strncmp(spec + n, "://", 3) ? 0 : n;
}

int source_check_spec(const char *spec)
{
	size_t n;

	if (!spec || !*spec)
		return fl_err(-EINVAL, "source: empty path");
	if (is_url(spec))
		return 0;
	if (s3_is_spec(spec))
		return s3_check_spec(spec);
	if (!strncmp(spec, "tcp://", 6))
		return source_peer_check(spec);
	n = scheme_len(spec);
	if (n && access(spec, F_OK) < 0)	/* not a file named so */
		return fl_err(-EINVAL, "%s: unsupported scheme %.*s:// "
			      "(http://, https://, s3://, tcp://, or a file's path)",
			      spec, (int)n, spec);
	return 0;
}

static bool is_dir(const char *spec)
{
	struct stat st;

	return stat(spec, &st) == 0 && S_ISDIR(st.st_mode);
}

/*
 * A directory is a source only as a CRIU dump: one without pstree.img is
 * refused as what it is, not as a dump with a file missing.
 */
static int open_dir(const char *dir, struct fl_source **out)
{
	char p[PATH_MAX];

	if (snprintf(p, sizeof(p), "%s/pstree.img", dir) >= (int)sizeof(p) ||
	    access(p, F_OK) < 0)
		return fl_err(-EINVAL, "%s: a directory, and no CRIU dump "
			      "(no pstree.img): not a source", dir);
	return source_criu_open(dir, NULL, out);
}

/*
 * One source of a checked spec: a URL, tcp://, an image, a CRIU dump's
 * directory, a file.
 */
static int open_one(const char *spec, const struct fl_source_opts *opts,
		    struct fl_source **out)
{
	static const struct fl_source_opts none;

	if (is_url(spec))
		return source_http_open(spec, opts ? opts : &none, out);
	if (s3_is_spec(spec))
		return source_s3_open(spec, opts ? opts : &none, out);
	if (!strncmp(spec, "tcp://", 6))
		return source_peer_open(spec, opts, out);
	if (image_has_magic(spec))
		return source_image_open(spec, out);
	if (is_dir(spec))
		return open_dir(spec, out);
	return source_file_open(spec, out);
}

/*
 * The spec of a parent named name beside spec: in its directory, or for a
 * URL under its prefix (up to its last '/', the query dropped: a
 * presigned URL's signature is for one object), the name percent-encoded.
 */
static int parent_spec(const char *spec, const char *name, char *out,
		       size_t size)
{
	size_t n, at;
	const char *slash;

	if (is_url(spec)) {
		const char *host = strstr(spec, "://") + 3;

		n = strcspn(spec, "?#");
		while (n > (size_t)(host - spec) && spec[n - 1] != '/')
			n--;
		if (n == (size_t)(host - spec))	/* http://host: no path */
			n = strcspn(spec, "?#");
		at = (size_t)snprintf(out, size, "%.*s%s", (int)n, spec,
				      spec[n ? n - 1 : 0] == '/' ? "" : "/");
		for (const unsigned char *c = (const unsigned char *)name;
		     *c && at + 4 < size; c++)
			at += (size_t)snprintf(out + at, size - at,
					       isalnum(*c) ||
					       strchr("-._~", *c) ? "%c" :
					       "%%%02X", *c);
		return at + 4 < size ? 0 : -ENAMETOOLONG;
	}
	slash = strrchr(spec, '/');
	n = slash ? (size_t)(slash - spec) + 1 : 0;
	return (size_t)snprintf(out, size, "%.*s%s", (int)n, spec, name) <
	       size ? 0 : -ENAMETOOLONG;
}

/* Are specs a and b the same: the same file, or the same URL? */
static bool same_spec(const char *a, const char *b)
{
	struct stat sa, sb;

	if (is_url(a) || is_url(b))
		return !strcmp(a, b);
	return !strcmp(a, b) ||
	       (stat(a, &sa) == 0 && stat(b, &sb) == 0 &&
		sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino);
}

#define CHAIN_SPEC	4096

/* "a -> b -> c" of specs[0..n), cut to fit buf. */
static void chain_str(char (*specs)[CHAIN_SPEC], unsigned int n, char *buf,
		      size_t size)
{
	size_t at = 0;

	buf[0] = 0;
	for (unsigned int i = 0; i < n && at < size; i++)
		at += (size_t)snprintf(buf + at, size - at, "%s%s",
				       i ? " -> " : "", specs[i]);
}

/*
 * top (opened from spec) is a diff image: its parents, each found by the
 * name its child records, beside the child, up to an image that is no
 * diff, stacked under it.  Takes over the reference to top.
 */
static int open_chain(const char *spec, struct fl_source *top,
		      const struct fl_source_opts *o, struct fl_source **out)
{
	struct fl_source *chain[FL_MAX_LAYERS + 1], *layers[FL_MAX_LAYERS];
	char (*specs)[CHAIN_SPEC] = malloc((FL_MAX_LAYERS + 2) *
					   sizeof(*specs));
	const struct image *img;
	unsigned int n = 1;
	char why[1024], id[IMAGE_ID_HEX];
	int ret = 0;

	chain[0] = top;
	if (!specs) {
		fl_source_put(top);
		return -ENOMEM;
	}
	snprintf(specs[0], CHAIN_SPEC, "%s", spec);
	while ((img = source_image(chain[n - 1])) &&
	       image_is_diff(&img->hdr)) {
		image_id_hex(img->hdr.parent_id, id);
		if (n > FL_MAX_LAYERS) {
			ret = fl_err(-ELOOP, "%s: a chain of more than %d diff "
				     "images over a base (the parent of %s "
				     "is %s, image %s)", spec, FL_MAX_LAYERS,
				     specs[n - 1], img->hdr.parent_name, id);
			break;
		}
		if (parent_spec(specs[n - 1], img->hdr.parent_name, specs[n],
				CHAIN_SPEC) < 0) {
			ret = fl_err(-ENAMETOOLONG, "%s: the path of its parent "
				     "%s is too long", specs[n - 1],
				     img->hdr.parent_name);
			break;
		}
		for (unsigned int i = 0; i < n && !ret; i++)
			if (same_spec(specs[i], specs[n])) {
				chain_str(specs, n + 1, why, sizeof(why));
				ret = fl_err(-ELOOP, "%s: its chain of parents "
					     "loops: %s", spec, why);
			}
		if (ret)
			break;
		fl_err_clear();
		ret = open_one(specs[n], o, &chain[n]);
		if (ret < 0) {
			snprintf(why, sizeof(why), "%s", *fl_last_error() ?
				 fl_last_error() : strerror(-ret));
			fl_err(ret, "%s: its parent %s (image %s): %s (give "
			       "the chain as layers instead: --layer)",
			       specs[n - 1], specs[n], id, why);
			break;
		}
		n++;
	}
	free(specs);
	if (ret < 0) {
		while (n--)
			fl_source_put(chain[n]);
		return ret;
	}
	for (unsigned int i = 0; i + 1 < n; i++)	/* bottom first */
		layers[i] = chain[n - 2 - i];
	return source_layers_open(chain[n - 1], layers, n - 1, out);
}

/* A diff image opened as the base: its chain under it. */
static int open_base(const char *spec, const struct fl_source_opts *o,
		     struct fl_source **out)
{
	const struct image *img;
	int ret = open_one(spec, o, out);

	if (ret < 0 || !(img = source_image(*out)) ||
	    !image_is_diff(&img->hdr))
		return ret;
	return open_chain(spec, *out, o, out);
}

/* The ABI rule (faultline.h): options grow out of reserved space. */
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(struct fl_source_opts) == 96,
	       "fl_source_opts keeps its size");
#endif

static int check_opts(const struct fl_source_opts *o)
{
	if (!is_zero(o->reserved, sizeof(o->reserved)) || o->reserved32)
		return fl_err(-EINVAL, "source options: reserved space is not "
			      "zero (options of a newer libfaultline than %s?)",
			      FL_VERSION);
	if (o->nlayers > FL_MAX_LAYERS)
		return fl_err(-EINVAL, "source options: %u layers (at most %d)",
			      o->nlayers, FL_MAX_LAYERS);
	if (o->nlayers && !o->layers)
		return fl_err(-EINVAL, "source options: %u layers, and layers "
			      "is NULL", o->nlayers);
	for (unsigned int i = 0; i < o->nlayers; i++)
		if (source_check_spec(o->layers[i]) < 0)
			return -EINVAL;
	return 0;
}

/* base under the layers of o, each opened as base was. */
static int open_layers(struct fl_source *base, const struct fl_source_opts *o,
		       struct fl_source **out)
{
	struct fl_source *l[FL_MAX_LAYERS];
	unsigned int i, n = o->nlayers;
	char why[256];
	int ret = 0;

	for (i = 0; i < n && ret == 0; i++)
		ret = open_one(o->layers[i], o, &l[i]);
	if (ret == 0)
		return source_layers_open(base, l, n, out);
	snprintf(why, sizeof(why), "%s", *fl_last_error() ? fl_last_error() :
		 strerror(-ret));
	fl_err(ret, "layer %u of %u: %s", i, n, why);
	while (--i > 0)		/* the ones below the one that failed */
		fl_source_put(l[i - 1]);
	fl_source_put(base);
	return ret;
}

int fl_source_open_ex(const char *spec, const struct fl_source_opts *opts,
		      struct fl_source **out)
{
	struct fl_source *base;
	int ret = source_check_spec(spec);

	if (ret < 0)
		return ret;
	if (!out)
		return fl_err(-EINVAL, "source: no place for it (out is NULL)");
	if (opts && (ret = check_opts(opts)) < 0)
		return ret;
	ret = open_base(spec, opts, &base);
	if (ret < 0 || !opts || !opts->nlayers) {
		if (!ret)
			*out = base;
		return ret;
	}
	return open_layers(base, opts, out);
}

int fl_source_open(const char *spec, struct fl_source **out)
{
	return fl_source_open_ex(spec, NULL, out);
}
