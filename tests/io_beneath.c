// SPDX-License-Identifier: Apache-2.0
/*
 * io_beneath.c - io_open_beneath() and io_mkdir_beneath() (src/util/io.c)
 * on their edges, with openat2 and with it made to fail ENOSYS by a
 * seccomp filter (the O_NOFOLLOW walk): a plain path opens; "..", an
 * absolute path, a link in the middle or at the end are refused; O_CREAT
 * on a dangling link creates nothing outside; O_PATH on a link refused.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "no_openat2.h"
#include "tap.h"
#include "util/io.h"

static char dir[64], out[80];
static int dfd;

/* Each case: 0 if it held; messages as diag. */
static int cases(void)
{
	int bad = 0, fd;
	struct stat st;

#define CHECK(expr, want, what) do {					\
		fd = (expr);						\
		if ((want) == 0 ? fd < 0 : fd != (want)) {		\
			printf("# %s: %d\n", what, fd);			\
			bad++;						\
		}							\
		if (fd >= 0)						\
			close(fd);					\
	} while (0)
	CHECK(io_open_beneath(dfd, "a/b/file", O_RDONLY, 0), 0, "plain");
	CHECK(io_open_beneath(dfd, "a//b/./file", O_RDONLY, 0), 0, "dots");
	CHECK(io_open_beneath(dfd, "a/../a/b/file", O_RDONLY, 0), -EXDEV, "..");
	CHECK(io_open_beneath(dfd, "/etc/passwd", O_RDONLY, 0), -EXDEV, "abs");
	CHECK(io_open_beneath(dfd, "mid/b/file", O_RDONLY, 0), -ELOOP, "mid");
	CHECK(io_open_beneath(dfd, "a/b/last", O_RDONLY, 0), -ELOOP, "last");
	CHECK(io_open_beneath(dfd, "a/b/last", O_PATH, 0), -ELOOP, "O_PATH");
	CHECK(io_open_beneath(dfd, "a/b/dangle", O_WRONLY | O_CREAT, 0600),
	      -ELOOP, "O_CREAT on a dangling link");
	if (stat(out, &st) == 0)
		printf("# created %s through a link\n", out), bad++;
	CHECK(io_mkdir_beneath(dfd, "mid/new", 0700), -ELOOP, "mkdir");
	CHECK(io_mkdir_beneath(dfd, "a/new", 0700), 0, "mkdir plain");
	rmdir("a/new");
	return bad;
}


int main(void)
{
	char cmd[1024];
	pid_t pid;
	int st;

	snprintf(dir, sizeof(dir), "/tmp/fl-beneath-%d", (int)getpid());
	snprintf(out, sizeof(out), "%s-outside", dir);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/a/b %s-o && touch %s/a/b/file "
		 "%s-o/file && ln -s %s-o/file %s/a/b/last && ln -s %s "
		 "%s/a/b/dangle && ln -s %s/a %s/mid", dir, dir, dir, dir, dir,
		 dir, out, dir, dir, dir);
	if (system(cmd) != 0 || (dfd = open(dir, O_PATH | O_DIRECTORY)) < 0 ||
	    chdir(dir) < 0)
		BAIL("setup %s", dir);
	ok(cases() == 0, "openat2: every case");
	fflush(stdout);
	pid = fork();
	if (pid == 0)
		_exit(no_openat2() ? 2 : cases() ? 1 : 0);
	ok(waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
	   WEXITSTATUS(st) == 0, "openat2 ENOSYS (the O_NOFOLLOW walk): every "
	   "case");
	snprintf(cmd, sizeof(cmd), "rm -rf %s %s-o %s", dir, dir, out);
	if (chdir("/") || system(cmd))
		diag("cleanup failed");
	return done_testing();
}
