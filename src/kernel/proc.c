// SPDX-License-Identifier: Apache-2.0
/*
 * proc.c - what /proc and mincore say about a process's memory: the page
 * size mapped at an address (smaps) and whether a page is resident; and
 * pidfds, through which alone another process is ever signalled.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernel/proc.h"
#include "kernel/uapi/uffd_compat.h"

/*
 * The page size of the mapping at addr in process pid (0: this one), from
 * its smaps: KernelPageSize in bytes, or 0 when that cannot be told (no
 * mapping there, or a process whose smaps we may not read).
 */
uint64_t proc_page_size(pid_t pid, uint64_t addr)
{
	char path[40], line[256];
	unsigned long long lo, hi, kb;
	bool in = false;
	uint64_t ps = 0;
	FILE *f;

	if (pid < 0)	/* another process we cannot name: unknown */
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/smaps", pid > 0 ? pid : getpid());
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (!ps && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx-%llx ", &lo, &hi) == 2)	/* a VMA */
			in = addr >= lo && addr < hi;
		else if (in && sscanf(line, "KernelPageSize: %llu kB", &kb) == 1)
			ps = kb << 10;
	}
	fclose(f);
	return ps;
}

/* "VmFlags: rd wr mr mw me ac um" names flag (two letters) among them. */
static bool vmflags_have(const char *line, const char *flag)
{
	for (const char *p = line + 8; (p = strstr(p, flag)); p += 2)
		if (p[-1] == ' ' && (p[2] == ' ' || p[2] == '\n' || !p[2]))
			return true;
	return false;
}

int proc_uffd_registered(pid_t pid, uint64_t addr, uint64_t len)
{
	char path[40], line[512];
	unsigned long long lo, hi;
	bool in = false;
	int seen = 0, ret = 1;
	FILE *f;

	if (pid < 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/smaps", pid > 0 ? pid : getpid());
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (ret == 1 && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx-%llx ", &lo, &hi) == 2)	/* a VMA */
			in = lo < addr + len && hi > addr;
		else if (in && !strncmp(line, "VmFlags:", 8)) {
			seen++;
			if (!vmflags_have(line, "um"))
				ret = 0;
		}
	}
	fclose(f);
	return seen ? ret : -1;
}

/*
 * Is the page at addr mapped in the client?  1 or 0; -1 if that cannot be
 * told (another process whose pagemap we may not read).
 */
int proc_resident(int pagemap_fd, pid_t pid, uint64_t addr)
{
	unsigned char v = 0;
	uint64_t ent;

	if (pagemap_fd >= 0)
		return pread(pagemap_fd, &ent, sizeof(ent),
			     (off_t)(addr / 4096 * sizeof(ent))) ==
		       (ssize_t)sizeof(ent) ? (int)(ent >> 63) : -1;
	if (pid != 0 && pid != getpid())
		return -1;	/* another process: not our address space */
	return mincore((void *)(uintptr_t)addr, 4096, &v) == 0 && (v & 1);
}

long proc_unix_listen_inode(const char *path)
{
	FILE *f = fopen("/proc/net/unix", "re");
	char line[512];
	long ino = 0;

	if (!f)
		return -1;
	while (!ino && fgets(line, sizeof(line), f)) {
		unsigned int flags = 0;
		long i = 0;
		char p[256] = "";

		/* Num RefCount Protocol Flags Type St Inode Path */
		if (sscanf(line, "%*s %*s %*s %x %*s %*s %ld %255s", &flags,
			   &i, p) == 3 && (flags & 0x10000) && !strcmp(p, path))
			ino = i > 0 ? i : 1;	/* __SO_ACCEPTCON: listening */
	}
	fclose(f);
	return ino;
}

int proc_unix_listening(const char *path)
{
	long ino = proc_unix_listen_inode(path);

	return ino < 0 ? -1 : ino > 0;
}

int proc_pidfd_open(pid_t pid)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);

	return fd < 0 ? -errno : fd;	/* pidfds are always close-on-exec */
}

int proc_pidfd_signal(int pidfd, int sig)
{
	return syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) < 0 ?
	       -errno : 0;
}

int proc_scan_written(int fd, uint64_t start, uint64_t end,
		      struct page_region *vec, size_t n, bool rearm,
		      uint64_t *next)
{
	struct pm_scan_arg a = {
		.size = sizeof(a),
		.flags = PM_SCAN_CHECK_WPASYNC | (rearm ? PM_SCAN_WP_MATCHING : 0),
		.start = start,
		.end = end,
		.vec = (uintptr_t)vec,
		.vec_len = n,
		.category_mask = PAGE_IS_WRITTEN,
		.return_mask = PAGE_IS_WRITTEN,
	};
	int ret = ioctl(fd, PAGEMAP_SCAN, &a);

	if (ret < 0)
		return -errno;
	*next = a.walk_end;
	return ret;
}
