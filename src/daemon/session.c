// SPDX-License-Identifier: Apache-2.0
/*
 * session.c - a session's life as one state machine (daemon.h: enum
 * sess_state): its creation, and session_to(), the one function that
 * moves a session from one state to the next.  Each step is checked
 * against the table of steps, logged, and sends the supervisor the record
 * that belongs to it: SUP_SESSION on leaving the handshake, supervised
 * (the supervisor keeps its descriptors before it is served), SUP_DROP on
 * draining (no later server adopts it).  A refusal is a step too, which
 * kills a client whose uffd arrived; the teardown, on a thread of its
 * own, is the step to ENDED.
 *
 * Decision: what happens on entering a state is here, once, whoever asks
 * for the step (the handshake, the loop, the supervisor's answer, a
 * takeover); the callers decide only when, and say why.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/daemon.h"
#include "daemon/log.h"
#include "daemon/report.h"
#include "daemon/session.h"
#include "daemon/supchan.h"
#include "kernel/proc.h"
#include "source/source.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/size.h"
#include "util/sock.h"

static const char *const state_names[SESS_NSTATES] = {
	[SESS_HANDSHAKE] = "handshake", [SESS_ADOPTED] = "adopted",
	[SESS_KEEPING] = "keeping", [SESS_SERVING] = "serving",
	[SESS_REFUSED] = "refused", [SESS_DRAINING] = "draining",
	[SESS_ENDED] = "ended",
};

#define TO(st)	(1u << (st))

/* The steps there are: from each state, the states it may go to. */
static const unsigned int steps[SESS_NSTATES] = {
	[SESS_HANDSHAKE] = TO(SESS_KEEPING) | TO(SESS_SERVING) |
			   TO(SESS_REFUSED) | TO(SESS_DRAINING),
	[SESS_ADOPTED] = TO(SESS_SERVING) | TO(SESS_DRAINING),
	[SESS_KEEPING] = TO(SESS_SERVING) | TO(SESS_REFUSED) |
			 TO(SESS_DRAINING),
	[SESS_SERVING] = TO(SESS_DRAINING),
	[SESS_REFUSED] = TO(SESS_DRAINING),
	[SESS_DRAINING] = TO(SESS_ENDED),
};

const char *sess_state_name(enum sess_state st)
{
	return st < SESS_NSTATES ? state_names[st] : "?";
}

static void session_free(struct session *s)
{
	if (s->pidfd >= 0)
		close(s->pidfd);
	if (s->state_fd >= 0)
		close(s->state_fd);
	if (s->pstate)
		s->proto->free(s->pstate);
	if (s->sock >= 0)
		close(s->sock);
	free(s->regions);
	free(s);
}

/* A session taken off the control loop, torn down on a thread of its own. */
struct teardown {
	struct daemon *d;
	struct session *s;
	uint64_t ms;
	char why[160];
};

static void *teardown_main(void *arg)
{
	struct teardown *t = arg;
	struct daemon *d = t->d;

	report_end(d, t->s, t->why, t->ms);
	session_to(t->s, SESS_ENDED, NULL);
	free(t);
	/*
	 * The eventfd is written under the lock: once the last teardown has
	 * said so, none touches it again, and the daemon may close it
	 * (found by ThreadSanitizer: the write raced with that close).
	 */
	pthread_mutex_lock(&d->lock);
	if (d->torn_fd >= 0 && eventfd_write(d->torn_fd, 1) < 0) {
		/* the counter cannot overflow: one write per session */
	}
	d->tearing--;
	pthread_cond_broadcast(&d->torn);
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

int tearing_now(struct daemon *d)
{
	pthread_mutex_lock(&d->lock);
	int n = d->tearing;

	pthread_mutex_unlock(&d->lock);
	return n;
}

/* Torn down on a thread of its own: 0, or -errno (no thread: here). */
static int teardown_start(struct daemon *d, struct session *s,
			  const char *why, uint64_t ms)
{
	struct teardown *t = malloc(sizeof(*t));
	pthread_attr_t attr;
	pthread_t th;

	if (t) {
		*t = (struct teardown){ .d = d, .s = s, .ms = ms };
		snprintf(t->why, sizeof(t->why), "%s", why);
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_mutex_lock(&d->lock);
		d->tearing++;
		pthread_mutex_unlock(&d->lock);
		if (pthread_create(&th, &attr, teardown_main, t) == 0) {
			pthread_attr_destroy(&attr);
			return 0;
		}
		pthread_attr_destroy(&attr);
		pthread_mutex_lock(&d->lock);
		d->tearing--;
		pthread_mutex_unlock(&d->lock);
		free(t);
	}
	return -EAGAIN;
}

/* Wait for sessions still being torn down (their stats, their traces). */
void wait_teardowns(struct daemon *d)
{
	pthread_mutex_lock(&d->lock);
	while (d->tearing)
		pthread_cond_wait(&d->torn, &d->lock);
	pthread_mutex_unlock(&d->lock);
}

/*
 * Leaving the handshake, supervised: the supervisor is handed the
 * session's descriptors first (SUP_SESSION).  Never served unless kept: a
 * server that died would take the only copy of them with it (lazy pages
 * would read as zeros).
 */
static int keep(struct session *s)
{
	int ret = sup_session(s->d, s);

	if (ret < 0)
		return fl_err(ret, "the supervisor cannot be handed its "
			      "descriptors (%s): not served", strerror(-ret));
	return 0;
}

/* SERVING: its engine started, and said in one line (what). */
static int to_serving(struct session *s, const char *what)
{
	struct daemon *d = s->d;
	int ret = 0;

	if (s->state == SESS_HANDSHAKE && d->sup_fd >= 0)
		ret = keep(s);
	if (ret == 0)
		ret = fl_engine_start(s->engine, d->cfg->threads ?
				      d->cfg->threads : 1);
	if (ret < 0)
		return ret;
	s->state = SESS_SERVING;
	if (s->pidfd >= 0) {	/* the engine has its own now */
		close(s->pidfd);
		s->pidfd = -1;
	}
	s->t_serving = now_ms();
	pthread_mutex_lock(&d->lock);
	d->tot.served++;
	pthread_mutex_unlock(&d->lock);
	slog(s, "%s %d region%s, %s, from %s", what, s->nregions,
	     s->nregions == 1 ? "" : "s", size_str(s->bytes).s, d->src->desc);
	return 0;
}

/*
 * DRAINING.  First, here and at once, its engine is detached: no ioctl of
 * this session is issued from then on, so none can land in new memory the
 * client maps at the same addresses for its next session (the kernel lets
 * any uffd of a process fill any registered VMA of it).  Then the socket
 * is shut down: the client's EOF says its memory is its own again.
 * Stopping the engine waits for its threads, which may be inside a slow
 * source read (HTTP retries, a post-copy peer): that happens on a detached
 * thread, so the control loop keeps accepting and serving.
 */
static void to_draining(struct session *s, const char *why)
{
	struct daemon *d = s->d;
	uint64_t ms = now_ms() - s->t_start;
	bool refused = s->state == SESS_REFUSED;	/* a warning */

	if (s->sup_kept)	/* first: a later server never adopts it */
		sup_drop_id(d, s->id);
	if (s->engine)
		fl_engine_detach(s->engine);
	if (s->sock >= 0)
		shutdown(s->sock, SHUT_RDWR);

	for (struct session **pp = &d->sessions; *pp; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	}
	s->state = SESS_DRAINING;
	d->nsessions--;
	d->ended++;
	if (!s->engine) {
		slog_at(refused ? LOG_WARNING : LOG_INFO, s, "closed: %s",
			why);
		if (s->uffd >= 0)
			close(s->uffd);
		session_to(s, SESS_ENDED, NULL);
		return;
	}
	if (teardown_start(d, s, why, ms) < 0) {
		report_end(d, s, why, ms);	/* no thread to be had: here */
		session_to(s, SESS_ENDED, NULL);
	}
}

/*
 * REFUSED: a client that is not (or not yet) served, for any reason.  Its
 * socket is shut for reading first: whatever it sends from then on fails
 * (EPIPE), and what it sent before is read here, so it is known for sure
 * whether it handed over a uffd.  A client that did is killed (SIGKILL
 * through its pidfd, never a reused pid), as Firecracker's documentation
 * asks of a handler that cannot serve: nobody would ever serve that uffd,
 * and its VM's first fault would sleep for ever.  The log says which;
 * then DRAINING, its line a warning.
 */
static void to_refused(struct session *s, const char *why)
{
	struct daemon *d = s->d;
	char buf[4096], line[480];
	struct sock_fds f;
	int trunc = 0, tries = 0, err;

	s->state = SESS_REFUSED;
	pthread_mutex_lock(&d->lock);
	d->tot.refused++;
	pthread_mutex_unlock(&d->lock);
	shutdown(s->sock, SHUT_RD);
	while (tries++ < 256 && sock_recv_fds(s->sock, buf, sizeof(buf),
					      MSG_DONTWAIT, &f,
					      SOCK_FDS_MAX) > 0) {
		s->nfds += f.n + f.dropped;
		trunc |= f.ctrunc;
		sock_fds_close(&f);
	}
	if (!s->nfds && !trunc) {
		snprintf(line, sizeof(line), "%s (no uffd was handed over)",
			 why);
	} else if (s->pidfd < 0 || s->pid == getpid()) {
		snprintf(line, sizeof(line), "%s; its uffd was handed over, "
			 "but the client cannot be killed (%s): its faults "
			 "will hang", why, s->pidfd < 0 ? "no pidfd" :
			 "it is this process");
	} else if ((err = proc_pidfd_signal(s->pidfd, SIGKILL)) == 0) {
		snprintf(line, sizeof(line), "%s; client killed (its uffd "
			 "would never be served)", why);
		pthread_mutex_lock(&d->lock);
		d->tot.killed++;
		pthread_mutex_unlock(&d->lock);
	} else {
		snprintf(line, sizeof(line), "%s; its uffd was handed over, "
			 "and killing the client failed (%s)", why,
			 err == -ESRCH ? "it had exited" : strerror(-err));
	}
	session_to(s, SESS_DRAINING, line);
}

int session_to(struct session *s, enum sess_state to, const char *why)
{
	enum sess_state from = s->state;
	int ret = 0;

	if (to >= SESS_NSTATES || !(steps[from] & TO(to))) {
		serr(s, "bug: no step from %s to %s (%s): ignored",
		     sess_state_name(from), sess_state_name(to),
		     why ? why : "");
		return -EINVAL;
	}
	slog_at(LOG_DEBUG, s, "%s -> %s%s%s", sess_state_name(from),
		sess_state_name(to), why ? ": " : "", why ? why : "");
	switch (to) {
	case SESS_KEEPING:	/* until the supervisor's SUP_KEPT */
		ret = keep(s);
		if (ret == 0)
			s->state = SESS_KEEPING;
		break;
	case SESS_SERVING:
		ret = to_serving(s, why);
		break;
	case SESS_REFUSED:
		to_refused(s, why);
		break;
	case SESS_DRAINING:
		to_draining(s, why);
		break;
	case SESS_ENDED:
		s->state = SESS_ENDED;
		session_free(s);
		break;
	default:		/* HANDSHAKE, ADOPTED: where sessions begin */
		break;
	}
	return ret;
}

struct session *session_new(struct daemon *d, const struct proto_ops *p,
			    int fd, int id, uint64_t t_start)
{
	struct session *s = calloc(1, sizeof(*s));
	struct sock_cred cred;

	if (!s || p->open(&s->pstate, fl_source_size(d->src), d->cfg->proto_arg) < 0) {
		serr(NULL, "out of memory: refusing a client");
		free(s);
		close(fd);
		return NULL;
	}
	s->d = d;
	s->proto = p;
	s->id = id;
	s->sock = fd;
	s->uffd = -1;
	s->pidfd = -1;
	s->state_fd = -1;
	s->t_start = t_start;
	if (sock_peer_cred(fd, &cred) == 0) {
		s->pid = cred.pid;
		s->uid = cred.uid;
		/*
		 * The client is signalled (refused, or killed by the engine)
		 * through a pidfd only, never by a pid reused since.
		 */
		s->pidfd = sock_peer_pidfd(fd, true);
		if (s->pidfd < 0)
			s->pidfd = -1;
	}
	s->next = d->sessions;
	d->sessions = s;
	d->nsessions++;
	return s;
}

