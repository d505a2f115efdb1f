// SPDX-License-Identifier: Apache-2.0
/*
 * huge_lock.c - the host-wide hugetlb lock of huge_lock.h: flock() on a
 * file in /run, so that it goes with the program however it ends.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <unistd.h>

#include "huge_lock.h"
#include "hugetlb.h"
#include "tap.h"

static int lock_fd = -1;

static int open_lock(void)
{
	int fd = open(HUGE_LOCK_PATH, O_RDWR | O_CREAT | O_CLOEXEC, 0644);

	if (fd < 0)
		fd = open(HUGE_LOCK_FALLBACK, O_RDWR | O_CREAT | O_CLOEXEC,
			  0644);
	return fd < 0 ? -errno : fd;
}

int huge_lock(void)
{
	int fd;

	if (lock_fd >= 0)
		return 0;
	fd = open_lock();
	if (fd < 0)
		return fd;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		/* the wait is not the test's time: its alarm paused */
		unsigned int left = alarm(0);

		diag("waiting for the hugetlb pool: another program holds "
		     "%s", HUGE_LOCK_PATH);
		while (flock(fd, LOCK_EX) < 0) {
			if (errno != EINTR) {
				int ret = -errno;

				close(fd);
				alarm(left);
				return ret;
			}
		}
		alarm(left);
	}
	lock_fd = fd;
	return 0;
}

void huge_unlock(void)
{
	huge_restore();
	if (lock_fd >= 0) {
		close(lock_fd);
		lock_fd = -1;
	}
}
