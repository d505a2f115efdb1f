// SPDX-License-Identifier: Apache-2.0
/*
 * hugetlb.c - reserving 2 MiB pages and giving them back, once for the VMM,
 * every benchmark and test (hugetlb.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "hugetlb.h"

#define NR_HUGE		"/proc/sys/vm/nr_hugepages"
#define FREE_HUGE	"/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"

static long huge_old = -1;	/* nr_hugepages before us, or -1 */

long sys_read_long(const char *path)
{
	FILE *f = fopen(path, "r");
	long v = -1;

	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

int sys_write_long(const char *path, long v)
{
	FILE *f = fopen(path, "w");
	int ret;

	if (!f)
		return -errno;
	ret = fprintf(f, "%ld\n", v) < 0 ? -EIO : 0;
	if (fclose(f) && !ret)
		ret = -errno;
	return ret;
}

void huge_restore(void)
{
	if (huge_old >= 0)
		sys_write_long(NR_HUGE, huge_old);
	huge_old = -1;
}

void huge_forget(void)
{
	huge_old = -1;
}

int huge_reserve(long n)
{
	long cur = sys_read_long(NR_HUGE), free_now = sys_read_long(FREE_HUGE);

	if (cur < 0)
		return -ENOENT;
	if (free_now >= n)
		return 0;
	if (huge_old < 0) {
		huge_old = cur;
		atexit(huge_restore);
	}
	if (sys_write_long(NR_HUGE, cur + n - (free_now > 0 ? free_now : 0)))
		return -EACCES;
	return sys_read_long(FREE_HUGE) >= n ? 0 : -ENOMEM;
}
