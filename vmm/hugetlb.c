// SPDX-License-Identifier: Apache-2.0
/*
 * hugetlb.c - reserving 2 MiB pages and giving them back, once for the VMM,
 * every benchmark and test (hugetlb.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "hugetlb.h"

#define NR_HUGE		"/proc/sys/vm/nr_hugepages"
#define FREE_HUGE	"/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"

/*
 * Pages we added to nr_hugepages, given back by subtraction: two programs
 * that reserve at once (a test beside a benchmark) each take back only
 * what they added, where restoring an absolute old value would shrink
 * the other's pool under it.
 */
static long huge_added;
static bool huge_atexit;

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
	long cur = sys_read_long(NR_HUGE);

	if (huge_added > 0 && cur >= 0)
		sys_write_long(NR_HUGE, cur > huge_added ? cur - huge_added : 0);
	huge_added = 0;
}

void huge_forget(void)
{
	huge_added = 0;
}

int huge_reserve(long n)
{
	long cur = sys_read_long(NR_HUGE), free_now = sys_read_long(FREE_HUGE);

	if (cur < 0)
		return -ENOENT;
	if (free_now >= n)
		return 0;
	long add = n - (free_now > 0 ? free_now : 0);

	if (!huge_atexit) {
		huge_atexit = true;
		atexit(huge_restore);
	}
	if (sys_write_long(NR_HUGE, cur + add))
		return -EACCES;
	huge_added += sys_read_long(NR_HUGE) - cur;
	return sys_read_long(FREE_HUGE) >= n ? 0 : -ENOMEM;
}
