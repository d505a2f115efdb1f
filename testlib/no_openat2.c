// SPDX-License-Identifier: Apache-2.0
/*
 * no_openat2.c - openat2 made to fail ENOSYS by seccomp, the way a kernel
 * without it answers (no_openat2.h).
 *
 * Decision: a filter, not an LD_PRELOAD shim: the library calls openat2
 * by syscall(2), and the CLI a test runs inherits the filter across exec.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "no_openat2.h"

int no_openat2(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
		return -errno;
	/* The filter holds: openat2 itself says ENOSYS now. */
	return syscall(SYS_openat2, AT_FDCWD, ".", NULL, 0) < 0 &&
	       errno == ENOSYS ? 0 : -EPERM;
}
