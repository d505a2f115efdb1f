// SPDX-License-Identifier: Apache-2.0
/*
 * keeper.c - a process that holds a copy of every served uffd whose
 * client gave its own away (CRIU's restorer closes its uffd once sent), so
 * that the server's death does not close the last one: the kernel would
 * then unregister the memory, and what was still lazy would read as
 * zeros.  With the keeper holding it, a fault waits instead.
 *
 * Decision: a forked child of the server, not of its threads' making (it
 * starts before any), talking over a SOCK_SEQPACKET pair: HOLD with the
 * descriptor, DROP when the session ends; at EOF with nothing held it
 * exits, with something held (the server died mid-restore) it says so
 * once and keeps it until it is killed.  It never serves a page.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/keeper.h"
#include "util/sock.h"

struct keep_msg {
	uint32_t op;		/* KEEP_HOLD, KEEP_DROP */
	uint32_t id;		/* the session */
};

enum { KEEP_HOLD = 1, KEEP_DROP = 2 };

#define KEEP_MAX	4096

static void keeper_main(int sock)
{
	static struct { uint32_t id; int fd; } held[KEEP_MAX];
	int n = 0;

	prctl(PR_SET_NAME, "faultline-keep");
	for (;;) {
		struct keep_msg m;
		struct sock_fds f;
		ssize_t r = sock_recv_fds(sock, (char *)&m, sizeof(m), 0, &f, 1);

		if (r == -EINTR)
			continue;
		if (r <= 0)
			break;
		if (r != sizeof(m)) {
			sock_fds_close(&f);
			continue;
		}
		if (m.op == KEEP_HOLD && f.n == 1 && n < KEEP_MAX) {
			held[n].id = m.id;
			held[n++].fd = f.fd[0];
			continue;
		}
		sock_fds_close(&f);
		for (int i = 0; m.op == KEEP_DROP && i < n; i++) {
			if (held[i].id != m.id)
				continue;
			close(held[i].fd);
			held[i] = held[--n];
			break;
		}
	}
	if (!n)
		_exit(0);
	fprintf(stderr, "faultline: the server died with %d client%s' memory "
		"not all in: their uffds are held by pid %d, so that their "
		"faults wait instead of reading zeros (end the clients, then "
		"this process)\n", n, n == 1 ? "" : "s", (int)getpid());
	for (;;)
		pause();
}

int keeper_start(pid_t *pid)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	*pid = fork();
	if (*pid < 0) {
		int err = -errno;

		close(sv[0]);
		close(sv[1]);
		return err;
	}
	if (*pid == 0) {
		sigset_t all;

		/* Signals as the default has them: SIGTERM ends it. */
		sigemptyset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL);
		close(sv[0]);
		for (int fd = 3; fd < 1024; fd++)
			if (fd != sv[1])
				close(fd);
		keeper_main(sv[1]);
	}
	close(sv[1]);
	return sv[0];
}

void keeper_hold(int keeper, uint32_t id, int uffd)
{
	struct keep_msg m = { KEEP_HOLD, id };

	if (keeper >= 0)
		sock_send_fds(keeper, &m, sizeof(m), &uffd, 1);
}

void keeper_drop(int keeper, uint32_t id)
{
	struct keep_msg m = { KEEP_DROP, id };

	if (keeper >= 0)
		sock_send_fds(keeper, &m, sizeof(m), NULL, 0);
}

void keeper_stop(int keeper, pid_t pid)
{
	if (keeper < 0)
		return;
	close(keeper);
	/* Holding nothing, it exits at once; else it is left to its task. */
	for (int i = 0; i < 100 && waitpid(pid, NULL, WNOHANG) == 0; i++)
		usleep(10000);
}
