/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proc.h - a process's memory as /proc describes it, and pidfds: the one
 * way to signal another process that cannot reach a pid reused since.
 */
#ifndef FAULTLINE_KERNEL_PROC_H
#define FAULTLINE_KERNEL_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * The page size of the mapping at addr in process pid (0: this one), from
 * its smaps: KernelPageSize in bytes, or 0 when that cannot be told (no
 * mapping there, pid < 0: a process we cannot name, or smaps unreadable).
 */
uint64_t proc_page_size(pid_t pid, uint64_t addr);

/*
 * Is [addr, addr + len) of process pid (0: this one) registered with a
 * userfaultfd in MISSING mode ("um" in the VmFlags of every mapping in
 * it)?  1 or 0; -1 if that cannot be told (no mapping there, pid < 0, or
 * smaps unreadable).  Which uffd it is registered with, smaps does not say.
 */
int proc_uffd_registered(pid_t pid, uint64_t addr, uint64_t len);

/*
 * Is the page at addr mapped?  Through pagemap_fd (another process's
 * /proc/PID/pagemap) if >= 0, else mincore in this process (pid 0 or
 * ours).  1 or 0; -1 if that cannot be told.
 */
int proc_resident(int pagemap_fd, pid_t pid, uint64_t addr);

/*
 * Is a Unix socket listening, bound to exactly this path, in this network
 * namespace (/proc/net/unix)?  1 or 0; -1 if that cannot be told.  Asks
 * without connecting: a connection would be a client to the server.
 */
int proc_unix_listening(const char *path);

/* The inode of that listening socket ("socket:[N]" in /proc/PID/fd): 0 if
 * none listens there, -1 if that cannot be told. */
long proc_unix_listen_inode(const char *path);

/*
 * A pidfd (close-on-exec) for process pid, or -errno (-ESRCH: it is gone).
 * It names the process that has the pid now: pin a client while it is
 * known to be alive.
 */
int proc_pidfd_open(pid_t pid);

/* Send sig through pidfd: 0, or -errno (-ESRCH: that process is gone). */
int proc_pidfd_signal(int pidfd, int sig);

/*
 * PAGEMAP_SCAN (Linux 6.7) through fd, /proc/self/pagemap: the pages of
 * [start, end) written since they were last write-protected (uffd
 * WP_ASYNC), as up to n ranges in vec, write-protected again in the same
 * walk when rearm.  Returns the ranges found; *next is where the walk
 * stopped (end, or the start of what did not fit in vec).  -errno:
 * -ENOTTY or -EINVAL when the kernel has no such scan, -EPERM... as the
 * ioctl says.
 */
struct page_region;
int proc_scan_written(int fd, uint64_t start, uint64_t end,
		      struct page_region *vec, size_t n, bool rearm,
		      uint64_t *next);

#endif
