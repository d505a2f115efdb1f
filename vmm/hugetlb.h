/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hugetlb.h - 2 MiB hugetlb pages for the VMM, a benchmark or a test, taken
 * from /proc/sys/vm/nr_hugepages and always given back.
 */
#ifndef FAULTLINE_VMM_HUGETLB_H
#define FAULTLINE_VMM_HUGETLB_H

/*
 * Make sure at least n free 2 MiB pages exist: raise nr_hugepages by what
 * is missing, and take back what was added at exit (or huge_restore()).
 * 0, -ENOENT (no hugetlb), -EACCES, or -ENOMEM (the kernel found fewer).
 */
int huge_reserve(long n);

/* Take back from nr_hugepages the pages huge_reserve() added. */
void huge_restore(void);

/* A number from (or to) a /proc or /sys file: the value or -1; 0 or -errno. */
long sys_read_long(const char *path);
int sys_write_long(const char *path, long v);

/* In a forked child: the pool is the parent's to restore, not ours. */
void huge_forget(void);

#endif
