// SPDX-License-Identifier: Apache-2.0
/*
 * io.c - opening a file that must be regular, and file transfers that
 * move every byte or say why not: one loop per kind, for every layer
 * (sockets' are sock.c's).
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "util/error.h"
#include "util/io.h"

int open_regular(const char *path, struct stat *st, bool quiet)
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

int pread_full(int fd, void *buf, size_t len, uint64_t off)
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

int pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pwrite(fd, (const char *)buf + done, len - done,
				   (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		done += (size_t)n;
	}
	return 0;
}
