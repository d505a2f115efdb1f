// SPDX-License-Identifier: Apache-2.0
/*
 * open.c - the one place that knows every kind of source: a spec string
 * (an http(s) URL, tcp:// for a post-copy peer, an image by its magic, or
 * a raw memory file) picks the implementation.
 */
#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

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

int fl_source_open_ex(const char *spec, const struct fl_source_opts *opts,
		      struct fl_source **out)
{
	static const struct fl_source_opts none;
	int ret = source_check_spec(spec);

	if (ret < 0)
		return ret;
	if (!out)
		return fl_err(-EINVAL, "source: no place for it (out is NULL)");
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
