// SPDX-License-Identifier: Apache-2.0
/*
 * loop.c - the server's control loop: one thread polls a signalfd, the
 * listener (listen.c), every session's socket and the control socket;
 * each session's engine serves its faults on its own threads, so a slow
 * or broken client never delays another.  Each wake also serves the
 * children that forked, ends the sessions whose client is gone (or, for a
 * protocol that says so, whose restore is complete), times handshakes out
 * and checks the progress; the supervisor's messages (a client it
 * accepted, a session it kept) are read here.
 *
 * Decision: the loop alone touches the session list; every change of a
 * session it decides is a step of session_to() (session.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "daemon/ctl.h"
#include "daemon/daemon.h"
#include "daemon/handshake.h"
#include "daemon/listen.h"
#include "daemon/log.h"
#include "daemon/loop.h"
#include "daemon/progress.h"
#include "daemon/report.h"
#include "daemon/session.h"
#include "daemon/supchan.h"
#include "daemon/supervise.h"
#include "daemon/takeover.h"
#include "util/clock.h"

/*
 * A message from the supervisor while serving: a client it accepted
 * (listen.c), or whether it kept a session (session_kept()).
 */
static void from_supervisor(struct daemon *d)
{
	struct sup_rec *rec = d->sup_in;
	struct sock_fds f = { .n = 0 };
	int ret = sup_recv(d->sup_fd, rec, &f);

	if (ret < 0 && ret != -EMFILE)
		return;
	if (rec->kind == SUP_ACCEPTED) {
		listen_accepted(d, rec, &f, ret);
		return;
	}
	if (rec->kind == SUP_KEPT)
		session_kept(d, rec->id, rec->err);
	sock_fds_close(&f);
}

static void handshake_timeout(struct session *s)
{
	char why[160];

	snprintf(why, sizeof(why), "bad handshake: %s after the timeout",
		 s->proto->unfinished);
	session_to(s, SESS_REFUSED, why);
}

/*
 * Is s restored?  Asked at every wake of the loop for a session that ends
 * then (the engine wakes it, fl_engine_notify_restored()), not only at the
 * progress check: a CRIU restore is done when its last session ends.
 */
static bool restored_now(struct session *s, uint64_t now)
{
	struct fl_stats st;

	if (!s->restored && fl_engine_stats(s->engine, &st) == 0 &&
	    st.restore_complete)
		say_restored(s, &st, now);
	return s->restored;
}

static void check_sessions(struct daemon *d)
{
	uint64_t now = now_ms();
	struct session *s = d->sessions, *next;

	for (; s; s = next) {
		next = s->next;
		/*
		 * A client without a socket (named by its connection, or
		 * forked) and of unknown pid: nothing says it has exited but
		 * its memory gone, asked about once a second (fork.h).
		 */
		if (s->state == SESS_SERVING && s->sock < 0 &&
		    now - s->t_probe >= 1000) {
			s->t_probe = now;
			fl_engine_client_alive(s->engine);
		}
		if (s->state == SESS_SERVING && fl_engine_finished(s->engine))
			session_to(s, SESS_DRAINING, "client gone");
		else if (s->state == SESS_SERVING &&
			 s->proto->end_when_restored && restored_now(s, now))
			session_to(s, SESS_DRAINING,
				   "restored: its memory is its own");
		else if (s->state == SESS_HANDSHAKE &&
			 now - s->t_start > (uint64_t)d->cfg->handshake_timeout_ms)
			handshake_timeout(s);
	}
}

static void on_signal(struct daemon *d)
{
	struct signalfd_siginfo si;

	if (read(d->sig_fd, &si, sizeof(si)) != sizeof(si))
		return;
	/*
	 * Supervised, signals count only from the supervisor, which forwards
	 * its own as SUPERVISE_STOP_SIG (systemctl kill signals every process
	 * of the unit: one SIGTERM would count twice and end the sessions at
	 * once).
	 */
	if (d->sup_fd >= 0 && ((pid_t)si.ssi_pid != getppid() ||
				 si.ssi_signo == SIGTERM ||
				 si.ssi_signo == SIGINT))
		return;
	if (si.ssi_signo == (uint32_t)SUPERVISE_STOP_SIG)
		si.ssi_signo = (uint32_t)si.ssi_int;
	if (si.ssi_signo == SIGUSR2 && d->sup_fd >= 0)
		hand_over_and_exit(d);
	if (si.ssi_signo == SIGUSR2 || si.ssi_signo == SIGHUP)
		return;
	if (!d->draining) {
		d->draining = true;
		stop_listening(d);
		slog(NULL, "signal %u: not accepting; draining %d session%s%s",
		     si.ssi_signo, d->nsessions, d->nsessions == 1 ? "" : "s",
		     d->nsessions ? " (a second Ctrl-C or SIGTERM abandons "
		     "their VMs: a fault still to come is never answered)" :
		     "");
		return;
	}
	if (d->sessions)
		slog(NULL, "signal %u again: abandoning %d session%s",
		     si.ssi_signo, d->nsessions, d->nsessions == 1 ? "" : "s");
	while (d->sessions)
		session_to(d->sessions, SESS_DRAINING, "daemon stopping");
}

int serve_loop(struct daemon *d)
{
	size_t max = MAX_SESSIONS + 3 + CTL_POLLFDS_MAX;
	struct pollfd *pfd = calloc(max, sizeof(*pfd));
	struct session **who = calloc(max, sizeof(*who));

	if (!pfd || !who) {
		free(pfd);
		free(who);
		return -ENOMEM;
	}
	for (;;) {
		int n = 0;

		if (d->draining && !d->nsessions)
			break;
		if (d->cfg->once && d->ended)
			break;
		if (d->cfg->one_client && d->listen_fd < 0 && !d->nsessions &&
		    !d->forks && !tearing_now(d))
			break;
		pfd[n] = (struct pollfd){ .fd = d->sig_fd, .events = POLLIN };
		who[n++] = NULL;
		pfd[n] = (struct pollfd){ .fd = d->torn_fd, .events = POLLIN };
		who[n++] = NULL;
		if (listen_pollfd(d, &pfd[n]))
			who[n++] = NULL;
		int first = n;

		/*
		 * Sessions with a socket only: those are bounded by accept
		 * (max_sessions); a CRIU task or a fork has none, and may be
		 * many more.
		 */
		for (struct session *s = d->sessions; s; s = s->next) {
			if (s->sock < 0)
				continue;
			pfd[n] = (struct pollfd){ .fd = s->sock, .events = POLLIN };
			who[n++] = s;
		}
		int ctl_first = n;

		n += ctl_pollfds(d, pfd + n);
		for (int i = ctl_first; i < n; i++)
			who[i] = NULL;
		if (poll(pfd, (nfds_t)n, 200) < 0 && errno != EINTR)
			break;
		if (pfd[0].revents) {
			on_signal(d);
			continue;	/* sessions may be gone: poll anew */
		}
		if (pfd[1].revents) {	/* a teardown ended, or a fork */
			eventfd_t v;

			eventfd_read(d->torn_fd, &v);
		}
		take_forks(d);
		for (int i = first; i < n; i++) {
			struct session *s = who[i];

			if (!pfd[i].revents || !s || pfd[i].fd != s->sock)
				continue;
			if (s->state == SESS_HANDSHAKE)
				handshake_input(d, s);
			else
				serving_input(s, pfd[i].revents);
		}
		if (first == 3 && pfd[2].revents && d->sup_accepts)
			from_supervisor(d);
		else if (first == 3 && pfd[2].revents)
			listen_accept(d);
		ctl_service(d, pfd + ctl_first, n - ctl_first);
		check_sessions(d);
		progress_check(d);
	}
	while (d->sessions)
		session_to(d->sessions, SESS_DRAINING, "daemon stopping");
	wait_teardowns(d);
	free(pfd);
	free(who);
	return 0;
}
