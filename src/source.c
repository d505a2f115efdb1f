/*
 * source.c - the source vtable's common part: reference counting and the
 * choice of implementation from a spec string (a URL, an image by its
 * magic, or a raw memory file).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "faultline.h"
#include "error.h"
#include "image.h"
#include "source.h"

int source_open_file(const char *path, struct stat *st, bool quiet)
{
	struct stat sb;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK), ret;

	if (fd < 0)
		return quiet ? -errno : fl_err(-errno, "%s: cannot open: %m",
					       path);
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		ret = quiet ? -EINVAL : fl_err(-EINVAL, "%s: not a regular "
					       "file", path);
		close(fd);
		return ret;
	}
	fcntl(fd, F_SETFL, 0);	/* O_NONBLOCK was for the open only */
	if (st)
		*st = sb;
	return fd;
}

int source_pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done,
				  (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;	/* the file ended (truncated?) */
		done += (size_t)n;
	}
	return 0;
}

void source_init(struct fl_source *s, const struct fl_source_ops *ops,
		 uint64_t size, const char *desc)
{
	s->ops = ops;
	s->size = size;
	atomic_init(&s->refs, 1);
	snprintf(s->desc, sizeof(s->desc), "%s", desc);
}

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
	if (is_url(spec))
		return source_http_open(spec, opts ? opts : &none, out);
	if (!strncmp(spec, "tcp://", 6))
		return source_peer_open(spec, out);
	if (image_has_magic(spec))
		return source_image_open(spec, out);
	return source_file_open(spec, out);
}

int fl_source_open(const char *spec, struct fl_source **out)
{
	return fl_source_open_ex(spec, NULL, out);
}

uint64_t fl_source_size(const struct fl_source *src)
{
	return src->size;
}

struct fl_source *fl_source_get(struct fl_source *src)
{
	atomic_fetch_add(&src->refs, 1);
	return src;
}

void fl_source_put(struct fl_source *src)
{
	if (src && atomic_fetch_sub(&src->refs, 1) == 1)
		src->ops->destroy(src);
}
