// SPDX-License-Identifier: Apache-2.0
/*
 * open.c - the one place that knows every kind of source: a spec string
 * (an http(s) URL, tcp:// for a post-copy peer, an image by its magic, or
 * a raw memory file) picks the implementation.
 */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "faultline.h"
#include "format/image.h"
#include "source/impl.h"
#include "util/error.h"
#include "util/zero.h"

static bool is_url(const char *spec)
{
	return !strncasecmp(spec, "http://", 7) ||
	       !strncasecmp(spec, "https://", 8);
}

int fl_source_open_ex(const char *spec, const struct fl_source_opts *opts,
		      struct fl_source **out)
{
	static const struct fl_source_opts none;

	if (!spec || !*spec || !out)
		return fl_err(-EINVAL, "source: empty path");
	if (opts && !is_zero(opts->reserved, sizeof(opts->reserved)))
		return fl_err(-EINVAL, "source options: reserved space is not "
			      "zero (options of a newer libfaultline than %s?)",
			      FL_VERSION);
	if (is_url(spec))
		return source_http_open(spec, opts ? opts : &none, out);
	if (!strncmp(spec, "tcp://", 6))
		return source_peer_open(spec, opts, out);
	if (image_has_magic(spec))
		return source_image_open(spec, out);
	return source_file_open(spec, out);
}

int fl_source_open(const char *spec, struct fl_source **out)
{
	return fl_source_open_ex(spec, NULL, out);
}
