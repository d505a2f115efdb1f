// SPDX-License-Identifier: Apache-2.0
/*
 * supervise.c - keeps VMs served across the server's crash or upgrade:
 * `faultline serve` starts as this supervisor, runs the server as its
 * child, holds every session's descriptors (the store channel), restarts
 * the server when it dies and re-executes it on SIGHUP.
 *
 * Decision: the supervisor parses nothing a client sends; what it keeps
 * is opaque to it (docs/architecture.md, Surviving the server's death).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/supervise.h"

#define MAX_STORED	1024
#define MAX_BACKOFF_MS	1000	/* a crash-looping server restarts this late */

/* ---- the store protocol -------------------------------------------------- */

static size_t rec_len(const struct store_rec *r)
{
	return offsetof(struct store_rec, regs) +
	       (r->nbytes ? r->nbytes : (size_t)r->nregions *
				       sizeof(struct store_region));
}

static bool rec_valid(const struct store_rec *r, size_t n)
{
	return n >= offsetof(struct store_rec, regs) && r->nregions >= 0 &&
	       r->nregions <= FC_REGIONS_MAX &&
	       r->nbytes <= STORE_BYTES_MAX && !(r->nbytes && r->nregions) &&
	       n == rec_len(r);
}

int store_send(int fd, const struct store_rec *rec, const int *fds,
	       int nfds)
{
	union {
		char b[CMSG_SPACE(sizeof(int) * STORE_NFDS)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { (void *)rec, 0 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (nfds < 0 || nfds > STORE_NFDS || !rec_valid(rec, rec_len(rec)))
		return -EINVAL;
	iov.iov_len = rec_len(rec);
	if (nfds) {
		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.b;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);

		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	do {
		n = sendmsg(fd, &mh, MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : 0;
}

int store_recv(int fd, struct store_rec *rec, int *fds, int *nfds)
{
	union {
		char b[CMSG_SPACE(sizeof(int) * STORE_NFDS)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { rec, sizeof(*rec) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = ctl.b,
			     .msg_controllen = sizeof(ctl.b) };
	ssize_t n;

	*nfds = 0;
	do {
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n == 0)
		return -ENODATA;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c;
	     c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));

		for (int i = 0; i < k; i++) {
			int v;

			memcpy(&v, CMSG_DATA(c) + i * sizeof(int), sizeof(v));
			if (*nfds < STORE_NFDS)
				fds[(*nfds)++] = v;
			else
				close(v);
		}
	}
	if (!rec_valid(rec, (size_t)n) || (mh.msg_flags & MSG_TRUNC)) {
		while (*nfds)
			close(fds[--*nfds]);
		return -EBADMSG;
	}
	return 0;
}

/* ---- the supervisor ------------------------------------------------------ */

struct stored {
	struct store_rec *rec;	/* rec_len(rec->nregions) bytes */
	int fds[STORE_NFDS];	/* -1 where none (a pending one: sock only) */
	bool serving;		/* STORE_SESSION, not STORE_PENDING */
};

struct sup {
	char self[PATH_MAX];	/* the binary, as resolved at start */
	char **argv;
	sigset_t sigs;
	int sig_fd;
	int listen_fd;		/* from STORE_LISTEN, or -1 */
	int store_fd;		/* our end of the current server's channel */
	pid_t server;
	int quick;		/* deaths in a row before STORE_READY */
	int last_id;
	bool stopping;		/* SIGTERM/SIGINT forwarded */
	bool upgrading;		/* SIGHUP: a handover asked for */
	struct stored *tab[MAX_STORED];
	int ntab;
};

#define say(fmt, ...) \
	fprintf(stderr, "faultline: supervisor: " fmt "\n", __VA_ARGS__)

static void stored_free(struct stored *st)
{
	for (int i = 0; i < STORE_NFDS; i++)
		if (st->fds[i] >= 0)
			close(st->fds[i]);
	free(st->rec);
	free(st);
}

static void drop_session(struct sup *s, int id);

/* STORE_PENDING (nfds 1) or STORE_SESSION (nfds STORE_NFDS): keep it. */
static void keep_session(struct sup *s, const struct store_rec *rec,
			 const int *fds, int nfds)
{
	bool serving = rec->kind == STORE_SESSION;
	struct stored *st = calloc(1, sizeof(*st));
	/* A pending one gets room for its handshake's bytes (STORE_DATA). */
	size_t len = serving ? rec_len(rec) : sizeof(*rec);

	drop_session(s, rec->id);	/* a pending one now serving */
	if (st)
		st->rec = malloc(len);
	if (!st || !st->rec || nfds != (serving ? STORE_NFDS : 1) ||
	    s->ntab == MAX_STORED) {
		say("cannot keep session %d (%d fds): it will not survive a "
		    "restart of the server", rec->id, nfds);
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		if (st)
			free(st->rec);
		free(st);
		return;
	}
	memcpy(st->rec, rec, rec_len(rec));
	for (int i = 0; i < STORE_NFDS; i++)
		st->fds[i] = i < nfds ? fds[i] : -1;
	st->serving = serving;
	s->tab[s->ntab++] = st;
	if (rec->id > s->last_id)
		s->last_id = rec->id;
}

static void drop_session(struct sup *s, int id)
{
	for (int i = 0; i < s->ntab; i++) {
		if (s->tab[i]->rec->id != id)
			continue;
		stored_free(s->tab[i]);
		s->tab[i] = s->tab[--s->ntab];
		return;
	}
}

/*
 * What one read of a pending handshake got: its bytes appended, its uffd
 * kept (taken out of fds).  Kept whole, the read is no longer lost should
 * the server die; a handshake too long to keep stays "was reading".
 */
static void pending_data(struct stored *st, const struct store_rec *rec,
			 int *fds, int *nfds)
{
	struct store_rec *p = st->rec;

	if (rec->nbytes > STORE_BYTES_MAX - p->nbytes) {
		p->flags |= STORE_WAS_READING;
		p->nbytes = STORE_BYTES_MAX + 1;	/* never cleared again */
		return;
	}
	if (p->nbytes > STORE_BYTES_MAX)
		return;
	memcpy(p->bytes + p->nbytes, rec->bytes, rec->nbytes);
	p->nbytes += rec->nbytes;
	if (*nfds && st->fds[STORE_UFFD] < 0) {
		st->fds[STORE_UFFD] = fds[0];
		fds[0] = fds[--*nfds];
	}
	p->flags &= ~STORE_WAS_READING;
}

/* Apply one message from the server; -ENODATA once it has gone. */
static int store_input(struct sup *s)
{
	static struct store_rec rec;
	int fds[STORE_NFDS], nfds;
	int ret = store_recv(s->store_fd, &rec, fds, &nfds);

	if (ret == -EBADMSG || ret == -EAGAIN)
		return 0;
	if (ret < 0)
		return ret;
	if (rec.kind == STORE_LISTEN && nfds == 1) {
		if (s->listen_fd >= 0)
			close(s->listen_fd);
		s->listen_fd = fds[0];
		return 0;
	}
	if (rec.kind == STORE_SESSION || rec.kind == STORE_PENDING) {
		keep_session(s, &rec, fds, nfds);
		return 0;
	}
	if (rec.kind == STORE_DROP)
		drop_session(s, rec.id);
	if (rec.kind == STORE_READY)
		s->quick = -1;	/* this one started: not a crash loop */
	for (int i = 0; i < s->ntab; i++) {
		struct stored *st = s->tab[i];

		if (st->rec->id != rec.id || st->serving)
			continue;
		if (rec.kind == STORE_READING)
			st->rec->flags |= STORE_WAS_READING;
		if (rec.kind == STORE_DATA)
			pending_data(st, &rec, fds, &nfds);
	}
	while (nfds)
		close(fds[--nfds]);
	return 0;
}

/* Hand every stored session to the new server, then the end marker. */
static void hand_over(struct sup *s)
{
	struct store_rec end = { .kind = STORE_ADOPT_END };

	for (int i = 0; i < s->ntab; i++) {
		struct stored *st = s->tab[i];

		int pfds[2] = { st->fds[STORE_SOCK], st->fds[STORE_UFFD] };

		uint32_t nbytes = st->rec->nbytes;

		st->rec->kind = st->serving ? STORE_ADOPT : STORE_ADOPT_PENDING;
		if (nbytes > STORE_BYTES_MAX)	/* overgrown: none of it */
			st->rec->nbytes = 0;
		int ret = store_send(s->store_fd, st->rec,
				     st->serving ? st->fds : pfds,
				     st->serving ? STORE_NFDS :
				     1 + (pfds[1] >= 0));

		st->rec->nbytes = nbytes;
		if (ret < 0)
			say("cannot hand session %d over: %s", st->rec->id,
			    strerror(-ret));
	}
	end.id = s->last_id;
	store_send(s->store_fd, &end, NULL, 0);
}

/* Start the server: this binary again, the store channel at STORE_FD_ENV. */
static int start_server(struct sup *s)
{
	int sv[2];
	char num[16];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	pid_t pid = fork();

	if (pid < 0) {
		int err = errno;

		close(sv[0]);
		close(sv[1]);
		return -err;
	}
	if (pid == 0) {
		/* The server dies with us: nothing would hold its sessions. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		/*
		 * SIGTERM and SIGINT stay blocked across exec: one that comes
		 * before the server has its signalfd waits for it (it would
		 * kill it); so does SIGUSR2, the handover request.
		 */
		sigset_t keep;

		sigemptyset(&keep);
		sigaddset(&keep, SIGHUP);
		sigaddset(&keep, SIGCHLD);
		sigprocmask(SIG_UNBLOCK, &keep, NULL);
		int fd = dup(sv[1]);	/* without CLOEXEC */

		snprintf(num, sizeof(num), "%d", fd);
		setenv(STORE_FD_ENV, num, 1);
		if (s->listen_fd >= 0) {
			int l = dup(s->listen_fd);

			snprintf(num, sizeof(num), "%d", l);
			setenv(LISTEN_FD_ENV, num, 1);
		}
		execv(s->self, s->argv);
		say("cannot execute %s: %s", s->self, strerror(errno));
		_exit(127);
	}
	close(sv[1]);
	s->store_fd = sv[0];
	s->server = pid;
	s->quick = s->quick < 0 ? 0 : s->quick;
	hand_over(s);
	return 0;
}

/* The server has exited: drain what it sent, then restart it or stop. */
static int server_gone(struct sup *s, int status)
{
	bool crashed = WIFSIGNALED(status) ||
		       (s->upgrading && WIFEXITED(status) &&
			WEXITSTATUS(status) == 0);

	while (s->store_fd >= 0 && store_input(s) == 0)
		;
	if (s->store_fd >= 0)
		close(s->store_fd);
	s->store_fd = -1;
	s->server = 0;
	if (s->stopping || !crashed)	/* drained, --once, or a start error */
		return WIFEXITED(status) ? WEXITSTATUS(status) :
		       128 + WTERMSIG(status);
	if (s->upgrading) {
		say("server handed over; starting %s anew, %d sessions to "
		    "adopt", s->self, s->ntab);
	} else {
		say("server died (signal %d); restarting it, %d sessions to "
		    "adopt", WTERMSIG(status), s->ntab);
		/*
		 * Dying again and again before it is ready (a crash at
		 * start): restart it later each time, never give up (the
		 * VMs would hang).
		 */
		if (++s->quick > 2) {
			unsigned int ms = 25u << (s->quick < 8 ? s->quick : 8);

			usleep((ms < MAX_BACKOFF_MS ? ms : MAX_BACKOFF_MS) *
			       1000);
		}
	}
	s->upgrading = false;
	int ret = start_server(s);

	if (ret < 0) {
		say("cannot start the server: %s", strerror(-ret));
		return 1;
	}
	return -1;	/* serving again */
}

static int on_sup_signal(struct sup *s)
{
	struct signalfd_siginfo si;
	int status;

	if (read(s->sig_fd, &si, sizeof(si)) != sizeof(si))
		return -1;
	switch (si.ssi_signo) {
	case SIGCHLD:
		while (s->server) {
			pid_t p = waitpid(-1, &status, WNOHANG);

			if (p <= 0)
				break;
			if (p == s->server)
				return server_gone(s, status);
		}
		return -1;
	case SIGHUP:
		if (s->server && !s->stopping) {
			s->upgrading = true;
			kill(s->server, SIGUSR2);
		}
		return -1;
	default:		/* SIGTERM, SIGINT: the server drains */
		s->stopping = true;
		if (s->listen_fd >= 0)	/* not accepting: its copy goes */
			close(s->listen_fd);
		s->listen_fd = -1;
		if (s->server)
			kill(s->server, (int)si.ssi_signo);
		return -1;
	}
}

int supervise_run(char **argv)
{
	static struct sup s = { .listen_fd = -1, .store_fd = -1 };
	ssize_t n = readlink("/proc/self/exe", s.self, sizeof(s.self) - 1);
	int ret = -1;

	if (n <= 0) {
		fprintf(stderr, "faultline serve: cannot find its own binary: "
			"%s\n", strerror(errno));
		return 1;
	}
	s.self[n] = 0;
	s.argv = argv;
	/* Three descriptors a session: as many as the server may take. */
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	/* Socket activation names this process: the listener is ours. */
	const char *lfds = getenv("LISTEN_FDS"), *lpid = getenv("LISTEN_PID");

	if (lfds && lpid && atoi(lpid) == getpid() && atoi(lfds) >= 1) {
		s.listen_fd = 3;	/* SD_LISTEN_FDS_START */
		fcntl(3, F_SETFD, FD_CLOEXEC);
		unsetenv("LISTEN_FDS");
		unsetenv("LISTEN_PID");
	}
	sigemptyset(&s.sigs);
	sigaddset(&s.sigs, SIGTERM);
	sigaddset(&s.sigs, SIGINT);
	sigaddset(&s.sigs, SIGHUP);
	sigaddset(&s.sigs, SIGCHLD);
	sigprocmask(SIG_BLOCK, &s.sigs, NULL);
	sigset_t usr2;

	sigemptyset(&usr2);
	sigaddset(&usr2, SIGUSR2);	/* inherited blocked by the server */
	sigprocmask(SIG_BLOCK, &usr2, NULL);
	signal(SIGPIPE, SIG_IGN);
	s.sig_fd = signalfd(-1, &s.sigs, SFD_CLOEXEC);
	if (s.sig_fd < 0 || (ret = start_server(&s)) < 0) {
		fprintf(stderr, "faultline serve: cannot start the server: "
			"%s\n", strerror(s.sig_fd < 0 ? errno : -ret));
		return 1;
	}
	for (ret = -1; ret < 0;) {
		/* A server gone (EOF) is only polled again once restarted. */
		struct pollfd p[2] = {
			{ .fd = s.sig_fd, .events = POLLIN },
			{ .fd = s.store_fd, .events = POLLIN },
		};
		int fd = s.store_fd;

		if (poll(p, s.store_fd >= 0 ? 2 : 1, -1) < 0 && errno != EINTR)
			break;
		if (s.store_fd >= 0 && p[1].revents &&
		    store_input(&s) == -ENODATA && s.store_fd == fd) {
			close(s.store_fd);	/* SIGCHLD follows */
			s.store_fd = -1;
		}
		if (p[0].revents)
			ret = on_sup_signal(&s);
	}
	while (s.ntab)
		stored_free(s.tab[--s.ntab]);
	return ret < 0 ? 1 : ret;
}
