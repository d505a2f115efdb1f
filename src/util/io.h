/* SPDX-License-Identifier: Apache-2.0 */
/*
 * io.h - regular files only, and file transfers that move every byte or
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

/* Read exactly len bytes at off: 0, -errno, or -EIO at end of file. */
int pread_full(int fd, void *buf, size_t len, uint64_t off);
/* Write all len bytes at off: 0 or -errno. */
int pwrite_full(int fd, const void *buf, size_t len, uint64_t off);
#endif
