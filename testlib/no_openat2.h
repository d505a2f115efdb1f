/* SPDX-License-Identifier: Apache-2.0 */
/*
 * no_openat2.h - make openat2 fail with ENOSYS in this process and its
 * children, as on a kernel older than 5.6: the tests of the library's
 * O_NOFOLLOW walk (util/io.c's fallback) run the same cases both ways.
 */
#ifndef FAULTLINE_TESTLIB_NO_OPENAT2_H
#define FAULTLINE_TESTLIB_NO_OPENAT2_H

/*
 * A seccomp filter (no_new_privs set first, so no root is needed): 0 once
 * openat2 itself says ENOSYS, or -errno.  For a child: it cannot be undone.
 */
int no_openat2(void);

#endif
