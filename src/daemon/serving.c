// SPDX-License-Identifier: Apache-2.0
/*
 * serving.c - what a session serves: its engine made on the regions its
 * handshake named (or a takeover's record, a named client's, a forked
 * child's), the supervisor's answer whether it kept it, the clients a
 * connection names and the children that fork, and the client's input
 * while served.
 *
 * Decision: everything here ends in a step of the session's state machine
 * (session_to()); no session changes state, ends or is refused otherwise.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/daemon.h"
#include "daemon/log.h"
#include "daemon/session.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/sock.h"

/*
 * A client forked (fl_engine_create_forking(); on the engine thread that read the
 * event): queued for the control loop, which alone touches the session
 * list, and the loop woken.
 */
static int forked(void *arg, struct fl_engine_child *c)
{
	struct session *s = arg;
	struct daemon *d = s->d;
	struct fork_rec *f = malloc(sizeof(*f));

	if (!f)
		return -ENOMEM;
	*f = (struct fork_rec){ .c = *c, .proto = s->proto, .uid = s->uid,
				.parent = s->id };
	pthread_mutex_lock(&d->lock);
	f->next = d->forks;
	d->forks = f;
	if (d->torn_fd >= 0 && eventfd_write(d->torn_fd, 1) < 0) {
		/* the loop polls again within 200 ms anyway */
	}
	pthread_mutex_unlock(&d->lock);
	return 0;
}

/*
 * A session without a socket for a client that did not connect itself:
 * one a connection named (named()), or a forked child (parent > 0, its
 * page states in state_fd).  Serving at once; 0, or -errno with the
 * reason set (the session ended, its uffd closed).
 */
static int session_client(struct daemon *d, const struct proto_ops *p,
			  uid_t uid, const struct proto_client *c,
			  int parent, int conn, int state_fd)
{
	struct session *s = calloc(1, sizeof(*s));

	if (!s) {
		close(c->uffd);
		if (state_fd >= 0)
			close(state_fd);
		return fl_err(-ENOMEM, "out of memory");
	}
	*s = (struct session){ .d = d, .id = ++d->next_id, .sock = -1,
			       .uid = uid, .proto = p, .client_pid = c->pid,
			       .uffd = c->uffd, .pidfd = -1,
			       .state_fd = state_fd, .parent = parent,
			       .conn = conn, .held = conn > 0,
			       .t_start = now_ms(), .next = d->sessions };
	d->sessions = s;
	d->nsessions++;
	int ret = session_engine(d, s, c->regions, c->nregions);

	if (ret == 0)
		ret = session_serve(s, parent ? "forked: serving" : "serving");
	if (ret < 0) {
		char why[320];

		snprintf(why, sizeof(why), "cannot serve it: %s",
			 fl_last_error());
		session_to(s, SESS_DRAINING, why);
	}
	return ret;
}

int session_named(struct daemon *d, struct session *conn, int upto)
{
	struct proto_client c;
	int ret = 0;

	while (ret == 0 && conn->named < upto) {
		ret = conn->proto->client(conn->pstate, conn->named++, &c);
		if (ret == 0)
			ret = session_client(d, conn->proto, conn->uid, &c, 0,
					     conn->id, -1);
	}
	return ret;
}

void session_release(struct daemon *d, int conn)
{
	unsigned int fl = d->cfg->engine_flags;

	if (d->cfg->record)
		fl |= FL_ENGINE_NO_PREFETCH | FL_ENGINE_NO_BACKGROUND;
	for (struct session *s = d->sessions; s; s = s->next) {
		if (s->conn != conn || !s->held)
			continue;
		s->held = false;
		if (!s->engine)
			continue;
		/* The trace first: background restore must not go before it. */
		if ((d->cfg->replay &&
		     fl_engine_replay(s->engine, d->cfg->replay) < 0) ||
		    fl_engine_prefetch_release(s->engine, fl) < 0)
			swarn(s, "no prefetch: %s", fl_last_error());
	}
}

void take_forks(struct daemon *d)
{
	pthread_mutex_lock(&d->lock);
	struct fork_rec *f = d->forks;

	d->forks = NULL;
	pthread_mutex_unlock(&d->lock);
	while (f) {
		struct fork_rec *next = f->next;
		struct proto_client c = { .uffd = f->c.uffd,
					  .nregions = f->c.nregions,
					  .regions = f->c.regions };

		if (d->draining) {	/* nobody will serve it: say so */
			swarn(NULL, "a child of session %d forked as the daemon "
			     "stops: not served", f->parent);
			close(f->c.uffd);
			close(f->c.state_fd);
		} else {
			session_client(d, f->proto, f->uid, &c, f->parent, 0,
				       f->c.state_fd);
		}
		free(f->c.regions);
		free(f);
		f = next;
	}
}

static bool is_uffd(int fd)
{
	char link[64], target[64];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return false;
	target[n] = 0;
	return strcmp(target, "anon_inode:[userfaultfd]") == 0;
}

/*
 * Supervised: a memfd for the session's page states (one byte a page of
 * every region), which the supervisor keeps for the next server.
 */
static int state_memfd(const struct fl_region_desc *regs, int n)
{
	uint64_t pages = 0;

	for (int i = 0; i < n; i++)
		pages += regs[i].len / regs[i].page_size;
	int fd = memfd_create("faultline-state", MFD_CLOEXEC);

	if (fd < 0)
		return fl_err(-errno, "cannot create the state memfd: %m");
	if (ftruncate(fd, (off_t)(pages ? pages : 1)) < 0) {
		int err = -errno;

		close(fd);
		return fl_err(err, "cannot size the state memfd: %s",
			      strerror(-err));
	}
	return fd;
}

/*
 * The regions as given (a page size of 0: 4 KiB), for the supervisor's
 * record (SUP_SESSION) and the status.  0, or -ENOMEM.
 */
static int keep_regions(struct session *s, const struct fl_region_desc *regs,
			int n)
{
	s->regions = calloc(n > 0 ? (size_t)n : 1, sizeof(*s->regions));
	if (!s->regions)
		return fl_err(-ENOMEM, "out of memory");
	for (int i = 0; i < n; i++)
		s->regions[i] = (struct sess_region){
			.addr = regs[i].addr, .len = regs[i].len,
			.page_size = regs[i].page_size,
			.src_offset = regs[i].src_offset };
	return 0;
}

int session_engine(struct daemon *d, struct session *s,
		   const struct fl_region_desc *regs, int n)
{
	const struct serve_config *cfg = d->cfg;
	bool takeover = s->state == SESS_ADOPTED;
	/*
	 * The socket's peer is the client unless the protocol names another
	 * (a pid of another namespace, never signalled); 0: a peer in a pid
	 * namespace we cannot see.
	 */
	bool peer = !s->client_pid && s->pid > 0;
	struct fl_engine_opts o = {
		.uffd = s->uffd,
		.chunk_size = cfg->chunk,
		.on_error = cfg->on_error,
		/* 0 with REMOTE: not a pid we may signal or look at */
		.client_pid = peer ? s->pid : 0,
		/* Taken at connect; none: never killed by pid (poisoned) */
		.client_pidfd = peer && s->pidfd >= 0 ? s->pidfd : -1,
		.flags = FL_ENGINE_ADOPT | FL_ENGINE_OWN_UFFD |
			 (peer ? FL_ENGINE_CLIENT_PIDFD : FL_ENGINE_CLIENT_REMOTE) |
			 cfg->engine_flags,
	};
	int ret;

	/*
	 * Recording: every first touch must fault, so nothing is filled
	 * ahead; held: not until the client's memory is in place (fork.h).
	 */
	if (cfg->record || s->held)
		o.flags |= FL_ENGINE_NO_PREFETCH | FL_ENGINE_NO_BACKGROUND;

	if (s->uffd < 0)
		return fl_err(-EINVAL, "handshake: no uffd in SCM_RIGHTS");
	if (!is_uffd(s->uffd))
		return fl_err(-EINVAL, "handshake: the fd sent is not a userfaultfd");
	if (d->sup_fd >= 0 && s->state_fd < 0 &&
	    (s->state_fd = state_memfd(regs, n)) < 0)
		return s->state_fd;
	if (s->state_fd >= 0) {
		/* A forked child starts where its parent was (fork.h). */
		o.flags |= FL_ENGINE_SHARED_STATE |
			   (takeover || s->parent ? FL_ENGINE_TAKEOVER : 0);
		o.state_fd = s->state_fd;
	}
	ret = fl_engine_create_forking(&o, s->proto->forks ? forked : NULL, s,
				    &s->engine);
	if (ret < 0)
		return ret;
	s->uffd = -1;	/* the engine owns it now */
	/* Ends once restored: the loop woken then, not at its next check. */
	if (s->proto->end_when_restored && d->torn_fd >= 0)
		fl_engine_notify_restored(s->engine, d->torn_fd);
	for (int i = 0; i < n && ret == 0; i++) {
		ret = fl_engine_add_region(s->engine, &regs[i], d->src);
		s->bytes += regs[i].len;
	}
	if (ret == 0 && cfg->record)
		ret = fl_engine_record(s->engine);
	/* Held: replayed once released, as the rest of prefetch. */
	if (ret == 0 && cfg->replay && !s->held)
		ret = fl_engine_replay(s->engine, cfg->replay);
	if (ret < 0)
		return ret;
	s->nregions = n;
	return keep_regions(s, regs, n);
}

int session_serve(struct session *s, const char *what)
{
	struct daemon *d = s->d;

	if (s->state == SESS_HANDSHAKE && d->sup_fd >= 0 && d->sup_accepts)
		return session_to(s, SESS_KEEPING, what);
	return session_to(s, SESS_SERVING, what);
}

/*
 * The supervisor's answer for session id (SUP_KEPT): serve it, or end
 * it with one line; a client whose socket we hold is killed, as any
 * refused client that handed its uffd over.  A session that ended
 * meanwhile is not there: nothing to do.
 */
void session_kept(struct daemon *d, int id, int err)
{
	struct session *s = d->sessions, *c = d->sessions;
	char why[240];

	while (s && (s->id != id || s->state != SESS_KEEPING))
		s = s->next;
	if (!s)
		return;
	if (!err) {
		if (session_to(s, SESS_SERVING, s->parent ? "forked: serving" :
			       "serving") < 0) {
			snprintf(why, sizeof(why), "cannot serve it: %s",
				 fl_last_error());
			session_to(s, SESS_DRAINING, why);
		}
		return;
	}
	snprintf(why, sizeof(why), "not served: the supervisor could not "
		 "keep it (%s), and it would not survive a restart of the "
		 "server", strerror(-err));
	if (s->sock >= 0) {
		session_to(s, SESS_REFUSED, why);
		return;
	}
	/* Named by a connection still under way: that restore fails. */
	while (c && (c->id != s->conn || c->sock < 0))
		c = c->next;
	snprintf(why + strlen(why), sizeof(why) - strlen(why), "; %s",
		 c ? "its restorer refused" : "its client cannot be killed "
		 "(its pid is another namespace's): its memory reads as zeros");
	session_to(s, SESS_DRAINING, why);
	if (c)
		session_to(c, SESS_REFUSED, "a client it named could not be kept by the "
		       "supervisor");
}

/*
 * The client wrote (or closed) while being served: its protocol takes what
 * it sent (one that takes nothing ignores it); EOF is the client's end.
 */
void serving_input(struct session *s, short revents)
{
	char buf[4096];
	struct sock_fds f;
	ssize_t n = sock_recv_fds(s->sock, buf, sizeof(buf), MSG_DONTWAIT, &f,
				  s->proto->input ? s->proto->max_fds : 0);

	if (n == 0 || (n < 0 && n != -EAGAIN && n != -EINTR) ||
	    (n < 0 && (revents & (POLLHUP | POLLERR)))) {
		session_to(s, SESS_DRAINING, "client closed the socket");
		return;
	}
	if (n < 0 || !s->proto->input)
		return;
	int ret = s->proto->input(s->pstate, s->sock, s->engine, buf,
				  (size_t)n, f.fd, f.n);

	if (ret < 0) {
		char why[320];

		snprintf(why, sizeof(why), "%s", fl_last_error());
		session_to(s, SESS_DRAINING, why);
	}
}
