// SPDX-License-Identifier: Apache-2.0
/*
 * listen.c - the server's listener: the socket bound (or systemd's, or
 * the supervisor's), clients accepted, by this server or by a supervisor
 * that accepts (SUP_WANT, one client at a time; SUP_ACCEPTED, which the
 * loop reads with the rest of the supervisor's messages), each taken as a
 * session in its handshake, or refused at once (uid, limits).
 *
 * Decision: a client's socket is kept by the supervisor before anything
 * is done with it (SUP_PENDING, or accepted by the supervisor itself), so
 * that a server dying at any point leaves no client waiting for ever.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/allow.h"
#include "daemon/daemon.h"
#include "daemon/listen.h"
#include "daemon/log.h"
#include "daemon/session.h"
#include "daemon/supchan.h"
#include "daemon/supervise.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/sock.h"

/*
 * --socket-owner: the socket file just bound at path given to its uid.
 * The directory may be the jail's uid's own, which could put a symlink
 * in the socket's place meanwhile: the file is opened without following
 * one, and must be a socket this process owns, before it is chowned.
 */
static int give_socket(const struct serve_config *cfg, const char *path)
{
	int fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC), ret = 0;
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0)
		ret = -errno;
	else if (!S_ISSOCK(st.st_mode) || st.st_uid != geteuid())
		ret = -EPERM;
	else if (fchownat(fd, "", cfg->socket_uid, cfg->socket_gid,
			  AT_EMPTY_PATH) < 0)
		ret = -errno;
	if (fd >= 0)
		close(fd);
	return ret < 0 ? fl_err(ret, "--socket-owner %u: %s: %s",
				(unsigned int)cfg->socket_uid, path,
				ret == -EPERM ? "replaced under the daemon "
				"(not the socket it bound)" :
				strerror(-ret)) : 0;
}

int listen_on(struct daemon *d, const char *path)
{
	if (!path && sock_activated()) {
		d->listen_fd = SOCK_ACTIVATED_FD;
		fcntl(d->listen_fd, F_SETFD, FD_CLOEXEC);
		fcntl(d->listen_fd, F_SETFL,
		      fcntl(d->listen_fd, F_GETFL) | O_NONBLOCK);
		return 0;
	}
	if (!path)
		return fl_err(-EINVAL, "--socket PATH is required (no LISTEN_FDS from systemd)");
	if (strlen(path) >= SOCK_UNIX_PATH_MAX)
		return fl_err(-ENAMETOOLONG, "--socket %s: path too long", path);
	int ret = sock_claim_unix(path);

	if (ret < 0)
		return ret;
	int fd = sock_listen_unix(path, 128);

	if (fd < 0)
		return fd;
	/* --socket-owner: before anyone is told it listens. */
	if (d->cfg->socket_chown && (ret = give_socket(d->cfg, path)) < 0) {
		close(fd);
		unlink(path);
		return ret;
	}
	d->listen_fd = fd;
	d->own_socket = true;
	return 0;
}

void stop_listening(struct daemon *d)
{
	if (d->listen_fd < 0)
		return;
	close(d->listen_fd);
	d->listen_fd = -1;
	if (d->own_socket)
		unlink(d->cfg->socket_path);
}

/*
 * The one client has come (cfg->one_client): nobody else is served, by
 * this server or any after it (the supervisor forgets the listener).
 */
void listen_no_more(struct daemon *d)
{
	struct sup_rec r = { .kind = SUP_LISTEN };

	stop_listening(d);
	if (d->sup_fd >= 0)
		sup_send(d->sup_fd, &r, NULL, 0);
}

/* ---- accepting ------------------------------------------------------- */

/*
 * Sessions at most: MAX_SESSIONS, or fewer when the descriptor limit is
 * low (a serving session holds its socket, the uffd, the engine's eventfd,
 * the client's pagemap and pidfd, and supervised its state memfd; a
 * handshake a pidfd too), keeping FD_RESERVE for the rest.
 */
#define FDS_PER_SESSION	6
#define FD_RESERVE	64

int max_sessions(void)
{
	struct rlimit rl;
	rlim_t n = MAX_SESSIONS;

	/* The soft limit (1024 under systemd) up to the hard one first. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		n = rl.rlim_cur > FD_RESERVE + FDS_PER_SESSION ?
		    (rl.rlim_cur - FD_RESERVE) / FDS_PER_SESSION : 1;
	return n < MAX_SESSIONS ? (int)n : MAX_SESSIONS;
}

/*
 * accept() failed for want of descriptors (something else holds them).
 * The client would stay in the backlog, and poll() report it again at
 * once: take it with the spare descriptor and close it (a VMM then fails
 * its snapshot load instead of hanging), say so once, and when even that
 * fails leave the listener alone for 100 ms instead of spinning.
 */
static void accept_no_fds(struct daemon *d)
{
	int fd = -1;

	if (d->spare_fd >= 0) {
		close(d->spare_fd);
		fd = sock_accept(d->listen_fd, SOCK_CLOEXEC, NULL, 0);
		if (fd >= 0)
			close(fd);
		d->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
	if (!d->fds_warned)
		serr(NULL, "out of file descriptors with %d sessions: refusing "
		     "clients (raise the limit: ulimit -n, LimitNOFILE=)",
		     d->nsessions);
	d->fds_warned = true;
	if (fd < 0)
		d->accept_paused = now_ms() + 100;
}

/*
 * Test-only injection point: with FAULTLINE_TEST_PAUSE_AFTER_ACCEPT in
 * its environment, the first server (not one restarted after it) stops
 * itself with SIGSTOP the moment it holds its first client's socket, so
 * that a test can kill it there (tests/serve_keep).  Nothing else reads
 * the variable; unset, this is one getenv() a server.
 */
static void test_pause_after_accept(void)
{
	static int armed = -1;

	if (armed < 0)
		armed = getenv("FAULTLINE_TEST_PAUSE_AFTER_ACCEPT") &&
			!getenv(RESTART_ENV);
	if (armed) {
		armed = 0;
		raise(SIGSTOP);
	}
}

/*
 * A client's socket, taken by this server (unsupervised, or a supervisor
 * that does not accept) or accepted by the supervisor, which already
 * keeps it (kept): a session in its handshake from here.
 */
static void take_client(struct daemon *d, int fd, int id, uint64_t t,
			bool kept)
{
	struct session *s = session_new(d, d->proto, fd, id, t);

	if (!s) {
		if (kept)
			sup_drop_id(d, id);
		return;
	}
	s->sup_kept = kept;
	if (!uid_allowed(d->cfg, s->uid)) {
		session_to(s, SESS_REFUSED, uid_refusal(d->cfg));
		return;
	}
	/* Sessions being torn down make clients wait (see loop), not this. */
	if (d->nsessions > d->max_sessions) {
		char why[96];

		snprintf(why, sizeof(why), "too many sessions (%d, what the "
			 "descriptor limit allows)", d->max_sessions);
		session_to(s, SESS_REFUSED, why);
		return;
	}
	slog(s, "connected");
	if (d->cfg->one_client)		/* CRIU's restorer connects once */
		listen_no_more(d);
}

static void accept_one(struct daemon *d)
{
	int fd = sock_accept(d->listen_fd, SOCK_CLOEXEC | SOCK_NONBLOCK, NULL,
			     0);

	if (fd == -EMFILE || fd == -ENFILE)
		accept_no_fds(d);
	if (fd < 0)
		return;
	d->fds_warned = false;
	test_pause_after_accept();
	int id = ++d->next_id;
	uint64_t t = now_ms();
	/* Kept at once, should this server die (supchan.h). */
	bool kept = d->sup_fd >= 0 && sup_pending(d, id, fd, t);

	take_client(d, fd, id, t, kept);
}

/*
 * SUP_ACCEPTED: a client the supervisor accepted, and keeps under a number
 * of its own (rec->id < 0) until told the session's id.  ret: what
 * sup_recv() said (-EMFILE: its socket did not come); f is taken.
 */
void listen_accepted(struct daemon *d, const struct sup_rec *rec,
		     struct sock_fds *f, int ret)
{
	int id;

	d->wanted = false;
	test_pause_after_accept();
	id = ++d->next_id;
	sup_name(d, rec->id, id);
	if (ret == 0 && f->n == 1) {
		fcntl(f->fd[0], F_SETFL, fcntl(f->fd[0], F_GETFL) | O_NONBLOCK);
		take_client(d, f->fd[0], id, rec->t_start, true);
		return;
	}
	/* Its socket never came: the supervisor closes its copy. */
	serr(NULL, "out of file descriptors with %d sessions: a client "
	     "refused (its connection closed)", d->nsessions);
	sup_drop_id(d, id);
	sock_fds_close(f);
}

/*
 * Accept while there is room, or when live sessions alone fill every
 * place (the client is refused at once, saying why).  When sessions being
 * torn down (still holding their descriptors) are what fills them, a new
 * client waits in the backlog until one has gone, then is served.
 */
static bool may_accept(struct daemon *d)
{
	return d->nsessions >= d->max_sessions ||
	       d->nsessions + tearing_now(d) < d->max_sessions;
}

/*
 * The listener's place in the loop's poll: the listener itself, or the
 * supervisor's channel when it accepts (asked for one client at a time).
 * 1 if p was filled, else 0.
 */
int listen_pollfd(struct daemon *d, struct pollfd *p)
{
	if (d->sup_accepts) {
		if (d->listen_fd >= 0 && may_accept(d) && !d->wanted) {
			sup_want(d);
			d->wanted = true;
		}
		*p = (struct pollfd){ .fd = d->sup_fd, .events = POLLIN };
		return 1;
	}
	if (d->listen_fd >= 0 && may_accept(d) &&
	    now_ms() >= d->accept_paused) {
		*p = (struct pollfd){ .fd = d->listen_fd, .events = POLLIN };
		return 1;
	}
	return 0;
}

void listen_accept(struct daemon *d)
{
	if (d->listen_fd >= 0)
		accept_one(d);
}
