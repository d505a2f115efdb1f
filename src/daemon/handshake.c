// SPDX-License-Identifier: Apache-2.0
/*
 * handshake.c - receiving a client's handshake: each read's bytes and
 * descriptors fed to the session's protocol (proto.h), each read bracketed
 * for the supervisor, and what the protocol concludes: more to come, the
 * client served, or refused with the protocol's reason.
 *
 * Decision: the descriptor checks that hold for any protocol (the daemon
 * out of descriptors, more than the protocol takes) are made here, once;
 * everything else a client sends is its protocol's to judge.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <sys/socket.h>

#include "daemon/daemon.h"
#include "daemon/handshake.h"
#include "daemon/log.h"
#include "daemon/session.h"
#include "daemon/supchan.h"
#include "util/error.h"
#include "util/sock.h"

/* Refuse s for a bad handshake, with the protocol's one-line reason. */
static void refuse_bad(struct session *s)
{
	char why[320];

	snprintf(why, sizeof(why), "bad handshake: %s", fl_last_error());
	session_to(s, SESS_REFUSED, why);
}

/*
 * A protocol that names clients as they come (named()): each served at
 * once, in a session of its own; the connection ends once complete.
 */
static void named_fed(struct daemon *d, struct session *s, int ret)
{
	char why[96];

	if (ret >= 0) {
		int r = session_named(d, s, s->proto->named(s->pstate));

		ret = r < 0 ? r : ret;
	}
	if (ret < 0) {
		refuse_bad(s);
	} else if (ret == 0) {
		sup_data(d, s);	/* after: its clients are kept as theirs */
	} else {
		session_release(d, s->id);
		snprintf(why, sizeof(why), "handshake complete: %d client%s "
			 "served", s->named, s->named == 1 ? "" : "s");
		session_to(s, SESS_DRAINING, why);
	}
}

void handshake_fed(struct daemon *d, struct session *s, int ret)
{
	struct proto_client c;

	if (s->proto->named) {
		named_fed(d, s, ret);
		return;
	}
	if (ret == 0)
		return;		/* more to come */
	if (ret > 1) {
		ret = fl_err(-EINVAL, "%d clients on one connection: this "
			     "daemon serves one a connection", ret);
	} else if (ret == 1) {
		ret = s->proto->client(s->pstate, 0, &c);
		if (ret == 0) {
			s->uffd = c.uffd;
			s->client_pid = c.pid;
			ret = session_engine(d, s, c.regions, c.nregions);
		}
	}
	if (ret < 0)
		refuse_bad(s);
	else if (session_serve(s, "serving") < 0)	/* not kept, say */
		session_to(s, SESS_REFUSED, fl_last_error());
}

/*
 * One read's worth: its descriptors checked (the daemon out of them, more
 * than the protocol takes), bytes and descriptors fed to the protocol, its
 * state kept by the supervisor, then what the protocol concluded.
 */
static void handshake_read(struct daemon *d, struct session *s,
			   const char *buf, size_t n, struct sock_fds *f)
{
	int max = s->proto->max_fds;

	s->got_bytes = true;
	s->nfds += f->n + f->dropped;
	if (s->proto->named)	/* clients come one by one: max in one read */
		max = s->nfds - f->n - f->dropped + max;
	if (f->ctrunc && !s->nfds) {
		/*
		 * The kernel could not install the fd here (EMFILE), but the
		 * client did hand its uffd over, and nobody will serve it:
		 * counted, so that the refusal kills the client.
		 */
		s->nfds = 1;
		session_to(s, SESS_REFUSED, "cannot receive the client's uffd: the daemon is "
		       "out of file descriptors");
		return;
	}
	if (f->ctrunc || s->nfds > max) {
		char why[128];

		sock_fds_close(f);
		snprintf(why, sizeof(why), "bad handshake: %s%d fds in "
			 "SCM_RIGHTS, expected %s%d", f->ctrunc ? "more than " :
			 "", s->nfds, max == 1 ? "exactly " : "at most ", max);
		session_to(s, SESS_REFUSED, why);
		return;
	}
	int ret = s->proto->feed(s->pstate, buf, n, f->fd, f->n);

	if (!s->proto->named)	/* named_fed() keeps it after its clients */
		sup_data(d, s);
	handshake_fed(d, s, ret);
}

void handshake_input(struct daemon *d, struct session *s)
{
	char buf[4096], why[160];
	struct sock_fds f;
	ssize_t n;

	sup_reading(d, s);
	n = sock_recv_fds(s->sock, buf, sizeof(buf), MSG_DONTWAIT, &f,
			  s->proto->max_fds);
	if (n > 0) {
		handshake_read(d, s, buf, (size_t)n, &f);
		return;
	}
	sup_data(d, s);	/* took nothing: as it was */
	if (n == -EAGAIN || n == -EINTR)
		return;
	snprintf(why, sizeof(why), "bad handshake: truncated: %s (the client "
		 "closed the socket mid-handshake)", s->proto->unfinished);
	session_to(s, SESS_REFUSED, n < 0 ? "receive failed" : s->got_bytes ?
		   why : "client closed before the handshake");
}
