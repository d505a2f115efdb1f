/* SPDX-License-Identifier: Apache-2.0 */
/*
 * io.h - regular files only, paths beneath a directory with no link
 * followed, and file transfers that move every byte or
 * say why not (sockets: sock.h).
 */
#ifndef FAULTLINE_UTIL_IO_H
#define FAULTLINE_UTIL_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/*
 * Open path for reading: a regular file only (a FIFO would block the open
 * until a writer came; a device is no snapshot).  The fd, or -errno with
 * the error set (fl_last_error) when quiet is false.  *st (if st) is the
 * file's stat.
 */
int open_regular(const char *path, struct stat *st, bool quiet);

/*
 * Open rel beneath the directory dirfd with no symbolic link followed,
 * the last component included, and nothing outside it (no "..", not
 * absolute): openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), or the same
 * rule walked component by component with O_NOFOLLOW where the kernel
 * lacks openat2.  flags and mode as openat's (O_CLOEXEC implied).  The
 * fd, or -errno: -ELOOP for a link on the way, -EXDEV for a path out.
 */
int io_open_beneath(int dirfd, const char *rel, int flags, mode_t mode);
/* mkdirat of rel, its parent opened by io_open_beneath: 0 or -errno. */
int io_mkdir_beneath(int dirfd, const char *rel, mode_t mode);
/* What an io_*_beneath error means, for a message after the path. */
const char *io_beneath_strerror(int err);

/* Read exactly len bytes at off: 0, -errno, or -EIO at end of file. */
int pread_full(int fd, void *buf, size_t len, uint64_t off);
/* Write all len bytes at off: 0 or -errno. */
int pwrite_full(int fd, const void *buf, size_t len, uint64_t off);
#endif
