// SPDX-License-Identifier: Apache-2.0
/*
 * io.c - opening a file that must be regular, opening a path beneath a
 * directory with no symbolic link followed, and file transfers that move
 * every byte or say why not: one loop per kind, for every layer (sockets'
 * are sock.c's).
 *
 * Beneath: openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) where the kernel
 * has it (Linux 5.6); where it does not (ENOSYS), the same rule walked
 * by hand, one component at a time, each opened O_NOFOLLOW.  ".." and an
 * absolute path are refused before either, so both agree on every path.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
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

/* ---- beneath a directory ------------------------------------------------- */

#ifndef SYS_openat2
#define SYS_openat2 437		/* every architecture since Linux 5.6 */
#endif

static atomic_bool no_openat2;	/* the kernel said ENOSYS once */

/* No "..", not absolute: both ways of resolving then agree. */
static bool rel_ok(const char *rel)
{
	if (rel[0] == '/' || !rel[0])
		return false;
	for (const char *c = rel; *c; c += strcspn(c, "/"), c += *c == '/')
		if (!strncmp(c, "..", 2) && (c[2] == '/' || !c[2]))
			return false;
	return true;
}

/* The O_NOFOLLOW walk, for a kernel without openat2. */
static int open_walk(int dirfd, const char *rel, int flags, mode_t mode)
{
	char name[256];
	int cur = dirfd, fd;
	struct stat st;

	for (;;) {
		size_t k = strcspn(rel, "/");
		bool last = !rel[k] || !rel[k + strspn(rel + k, "/")];

		if (k >= sizeof(name)) {
			fd = -ENAMETOOLONG;
			break;
		}
		memcpy(name, rel, k);
		name[k] = 0;
		fd = last ? openat(cur, name, flags | O_NOFOLLOW, mode) :
		     openat(cur, name, O_PATH | O_DIRECTORY | O_NOFOLLOW |
			    O_CLOEXEC);
		if (fd < 0)
			fd = -errno;
		/* O_PATH | O_NOFOLLOW opens a link itself; ENOTDIR: a link? */
		if ((fd >= 0 && (last ? (flags & O_PATH) : 0) &&
		     (fstat(fd, &st) < 0 || S_ISLNK(st.st_mode))) ||
		    (fd == -ENOTDIR &&
		     fstatat(cur, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		     S_ISLNK(st.st_mode))) {
			if (fd >= 0)
				close(fd);
			fd = -ELOOP;
		}
		if (cur != dirfd)
			close(cur);
		if (fd < 0 || last)
			break;
		cur = fd;
		rel += k + strspn(rel + k, "/");
	}
	return fd;
}

int io_open_beneath(int dirfd, const char *rel, int flags, mode_t mode)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC) & ~(uint64_t)O_NOFOLLOW,
		.mode = flags & (O_CREAT | O_TMPFILE) ? mode : 0,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS,
	};
	long fd;

	if (!rel_ok(rel))
		return -EXDEV;
	if (!atomic_load(&no_openat2)) {
		fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
		if (fd >= 0)
			return (int)fd;
		if (errno != ENOSYS)
			return -errno;
		atomic_store(&no_openat2, true);
	}
	return open_walk(dirfd, rel, flags | O_CLOEXEC, mode);
}

int io_mkdir_beneath(int dirfd, const char *rel, mode_t mode)
{
	const char *slash = strrchr(rel, '/');
	char parent[4096];
	int pfd = dirfd, ret = 0;

	if (!rel_ok(rel))
		return -EXDEV;
	if (slash) {
		if ((size_t)(slash - rel) >= sizeof(parent))
			return -ENAMETOOLONG;
		snprintf(parent, sizeof(parent), "%.*s", (int)(slash - rel),
			 rel);
		pfd = io_open_beneath(dirfd, parent, O_PATH | O_DIRECTORY, 0);
		if (pfd < 0)
			return pfd;
	}
	if (mkdirat(pfd, slash ? slash + 1 : rel, mode) < 0)
		ret = -errno;
	if (pfd != dirfd)
		close(pfd);
	return ret;
}

const char *io_beneath_strerror(int err)
{
	if (err == -ELOOP)
		return "a symbolic link on the way: not followed";
	if (err == -EXDEV)
		return "a path leading out of its directory: refused";
	return strerror(-err);
}
