// SPDX-License-Identifier: Apache-2.0
/*
 * open.c - the one place that knows every kind of source: a spec string
 * (an http(s) URL, tcp:// for a post-copy peer, an image by its magic, or
 * a raw memory file) picks the implementation; with layers (fl_source_opts)
 * each is opened so and stacked over the base by layers.c.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "faultline.h"
#include "format/image.h"
#include "source/impl.h"
#include "source/layers.h"
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
	if (!strncmp(spec, "tcp://", 6))
		return source_peer_check(spec);
	n = scheme_len(spec);
	if (n && access(spec, F_OK) < 0)	/* not a file named so */
		return fl_err(-EINVAL, "%s: unsupported scheme %.*s:// "
			      "(http://, https://, tcp://, or a file's path)",
			      spec, (int)n, spec);
	return 0;
}

/* One source of a checked spec: a URL, tcp://, an image, a file. */
static int open_one(const char *spec, const struct fl_source_opts *opts,
		    struct fl_source **out)
{
	static const struct fl_source_opts none;

	if (is_url(spec))
		return source_http_open(spec, opts ? opts : &none, out);
	if (!strncmp(spec, "tcp://", 6))
		return source_peer_open(spec, opts, out);
	if (image_has_magic(spec))
		return source_image_open(spec, out);
	return source_file_open(spec, out);
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
	ret = open_one(spec, opts, &base);
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
