/* SPDX-License-Identifier: Apache-2.0 */
/*
 * load.h - CPU load as a test condition: with FL_LOAD set (to anything but
 * "" or "0"), load_start() forks one process per online CPU that spins
 * until the test exits, so races that need a preempted thread (a daemon
 * thread descheduled between two ioctls, a client slow to read) happen.
 *
 * Decisions: call it first in main(), before any thread, descriptor or
 * cleanup handler exists: a spinner is a fork of an almost empty process,
 * shares nothing with the test, never returns into it and leaves by
 * _exit() or SIGKILL, so none of the test's atexit handlers run in it.
 * The spinners are our own children (PR_SET_PDEATHSIG kills them if the
 * test dies by a signal; a double fork would lose that), which is safe
 * because no test reaps "any child": su_reap(), serve_alive() and the
 * tests' own waitpid() calls all name their pid.  A test that wants to
 * wait for any child must call load_stop() first.  load_stop() runs at
 * exit, only in the process that started the spinners (a forked test
 * child that calls exit() leaves them alone), and may be called again.
 */
#ifndef FAULTLINE_TEST_LOAD_H
#define FAULTLINE_TEST_LOAD_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"

#define LOAD_MAX	256	/* spinners at most */

static pid_t load_pids[LOAD_MAX];
static int load_n;
static pid_t load_owner;	/* the process that forked them; 0: none */

/* Kill and reap the spinners; only in their parent, and only once. */
static inline void load_stop(void)
{
	if (!load_owner || getpid() != load_owner)
		return;
	for (int i = 0; i < load_n; i++)
		kill(load_pids[i], SIGKILL);
	for (int i = 0; i < load_n; i++)
		while (waitpid(load_pids[i], NULL, 0) < 0 && errno == EINTR)
			;
	load_n = 0;
}

static inline __attribute__((noreturn)) void load_spin(pid_t parent)
{
	static const int sigs[] = { SIGALRM, SIGTERM, SIGINT, SIGHUP,
				    SIGPIPE, SIGCHLD };
	volatile unsigned long x = 0;
	long maxfd = sysconf(_SC_OPEN_MAX);
	int fd;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)	/* the parent died before the prctl */
		_exit(0);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(*sigs); i++)
		signal(sigs[i], SIG_DFL);
	/* hold nothing of the test's: not prove's pipe, no socket, no file */
	fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
	}
	if (maxfd < 0 || maxfd > 65536)
		maxfd = 65536;
	for (fd = 3; fd < maxfd; fd++)
		close(fd);
	for (;;)
		x++;
}

/* With FL_LOAD set: one spinner per online CPU.  Returns how many run. */
static inline int load_start(void)
{
	const char *v = getenv("FL_LOAD");
	pid_t self = getpid();
	long n;

	if (!v || !*v || !strcmp(v, "0"))
		return 0;
	if (load_owner == self)
		return load_n;		/* already started */
	n = sysconf(_SC_NPROCESSORS_ONLN);
	if (n < 1)
		n = 1;
	if (n > LOAD_MAX)
		n = LOAD_MAX;
	load_owner = self;
	load_n = 0;
	atexit(load_stop);
	fflush(stdout);
	fflush(stderr);
	for (long i = 0; i < n; i++) {
		pid_t pid = fork();

		if (pid == 0)
			load_spin(self);
		if (pid < 0) {
			diag("load: fork: %s", strerror(errno));
			break;
		}
		load_pids[load_n++] = pid;
	}
	diag("under load: %d spinning processes", load_n);
	return load_n;
}

#endif
