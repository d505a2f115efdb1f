// SPDX-License-Identifier: Apache-2.0
/*
 * supervise.c - keeps VMs served across the server's crash or upgrade:
 * `faultline serve` starts as this supervisor, runs the server as its
 * child, holds every session's descriptors (the supervisor channel), restarts
 * the server when it dies and re-executes it on SIGHUP.
 *
 * Decision: the supervisor parses nothing a client sends; what it keeps
 * is opaque to it, whatever the protocol: a record (supchan.h) and its
 * descriptors (docs/architecture.md, Surviving the server's death).
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

#include "daemon/log.h"
#include "daemon/supchan.h"
#include "daemon/supervise.h"
#include "util/clock.h"
#include "util/sock.h"

#define MAX_BACKOFF_MS	1000	/* a crash-looping server restarts this late */

/* ---- the supervisor ------------------------------------------------------ */

struct stored {
	struct sup_rec *rec;	/* sup_len(rec) bytes */
	int *fds;		/* as the record's kind orders them */
	int nfds;
	bool serving;		/* SUP_SESSION, not SUP_PENDING */
};

struct sup {
	char self[PATH_MAX];	/* the binary, as resolved at start */
	char **argv;
	sigset_t sigs;
	int sig_fd;
	int listen_fd;		/* from SUP_LISTEN, or -1 */
	bool listen_done;	/* SUP_LISTEN without one: none again */
	int sup_fd;		/* our end of the current server's channel */
	pid_t server;
	int quick;		/* deaths in a row before SUP_READY */
	int last_id;
	bool stopping;		/* SIGTERM/SIGINT forwarded */
	bool upgrading;		/* SIGHUP: a handover asked for */
	bool started;		/* a server ran before the next one */
	struct sup_rec *in;	/* SUP_REC_MAX bytes: one message */
	struct stored **tab;	/* every session kept: as many as come */
	int ntab, cap;
	int want;		/* clients the server asked for (SUP_WANT) */
	char proto[16];		/* the protocol it asked them for */
	int tmp_id;		/* accepted, not yet named: ids below 0 */
	int spare_fd;		/* given up to close a client when out of fds */
	bool fds_warned;
	struct out *out;	/* messages to the server, waiting for room */
	int nout, outcap;
};

/* A message to the server that did not fit in the channel yet. */
struct out {
	uint32_t kind;		/* SUP_ACCEPTED (its socket from the table),
				 * SUP_KEPT */
	int32_t id, err;
	uint64_t t_start;
};

/* A line of the supervisor's, at prio (log.h). */
#define say(prio, ...)	log_line(prio, "supervisor", __VA_ARGS__)

static void close_fds(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		close(fds[i]);
}

static void stored_free(struct stored *st)
{
	close_fds(st->fds, st->nfds);
	free(st->fds);
	free(st->rec);
	free(st);
}

static void drop_session(struct sup *s, int id);

/* A copy of rec and of the n fds f holds from first on (taken). */
static int stored_set(struct stored *st, const struct sup_rec *rec,
		      struct sock_fds *f, int first)
{
	struct sup_rec *r = malloc(sup_len(rec));
	int n = f->n - first, *fds = malloc(sizeof(int) * (size_t)(n + 1));

	if (!r || !fds) {
		free(r);
		free(fds);
		return -ENOMEM;
	}
	memcpy(r, rec, sup_len(rec));
	memcpy(fds, f->fd + first, sizeof(int) * (size_t)n);
	f->n = first;
	free(st->rec);
	free(st->fds);
	st->rec = r;
	st->fds = fds;
	st->nfds = n;
	return 0;
}

/*
 * Room for one more session in the table: no bound but memory (a CRIU
 * tree, or a client that forks, may be thousands of sessions, each of
 * which would read zeros after a takeover if it were not kept).
 */
static int tab_room(struct sup *s)
{
	if (s->ntab < s->cap)
		return 0;
	int nc = s->cap ? 2 * s->cap : 64;
	struct stored **t = realloc(s->tab, sizeof(*t) * (size_t)nc);

	if (!t)
		return -ENOMEM;
	s->tab = t;
	s->cap = nc;
	return 0;
}

static struct stored *find_session(struct sup *s, int id)
{
	for (int i = 0; i < s->ntab; i++)
		if (s->tab[i]->rec->id == id)
			return s->tab[i];
	return NULL;
}

/*
 * To the server, in order: at once if its channel has room, else queued
 * and sent when it has (flush_out()).  Never blocks: the server may be
 * sending to us meanwhile, and both would wait on the other.  A server
 * that dies takes the queue with it (what it was told is kept anyway).
 */
static int send_now(struct sup *s, const struct out *o)
{
	struct sup_rec r = { .kind = o->kind, .id = o->id, .err = o->err,
			       .t_start = o->t_start };
	struct stored *st = o->kind == SUP_ACCEPTED ?
			    find_session(s, o->id) : NULL;

	if (o->kind == SUP_ACCEPTED && !st)
		return 0;	/* dropped meanwhile */
	return sup_send(s->sup_fd, &r, st ? st->fds : NULL, st ? 1 : 0);
}

static void flush_out(struct sup *s)
{
	int i = 0;

	while (i < s->nout && send_now(s, &s->out[i]) != -EAGAIN)
		i++;
	memmove(s->out, s->out + i, sizeof(*s->out) * (size_t)(s->nout - i));
	s->nout -= i;
}

static void to_server(struct sup *s, struct out o)
{
	if (s->sup_fd < 0)
		return;
	if (!s->nout && send_now(s, &o) != -EAGAIN)
		return;
	if (s->nout == s->outcap) {
		int nc = s->outcap ? 2 * s->outcap : 64;
		struct out *q = realloc(s->out, sizeof(*q) * (size_t)nc);

		if (!q) {	/* the server waits; the socket stays kept */
			say(LOG_ERR, "out of memory: cannot answer the server "
			    "(session %d)", o.id);
			return;
		}
		s->out = q;
		s->outcap = nc;
	}
	s->out[s->nout++] = o;
}

/*
 * SUP_PENDING (fds: the socket) or SUP_SESSION: keep it, in the place
 * of what was kept of it before (its handshake), which stays if this
 * cannot be kept.  ret: what sup_recv() said (-EMFILE: descriptors
 * lost).  A server that asks (SUP_ACK) is told which (SUP_KEPT) and
 * serves the session only if kept.
 */
static void keep_session(struct sup *s, const struct sup_rec *rec,
			 struct sock_fds *f, int ret)
{
	bool serving = rec->kind == SUP_SESSION;
	int need = !serving ? 1 : rec->flags & SUP_NO_SOCK ? SUP_NFDS - 1 :
		   SUP_NFDS;
	struct stored *st = calloc(1, sizeof(*st));

	if (!ret && f->n < need)
		ret = -EBADMSG;
	if (!ret && !st)
		ret = -ENOMEM;
	if (!ret)
		ret = tab_room(s);
	if (!ret)
		ret = stored_set(st, rec, f, 0);
	if (ret < 0) {
		say(LOG_ERR, "cannot keep session %d (%s): %s", rec->id,
		    ret == -EMFILE ? "out of file descriptors" :
		    strerror(-ret), rec->flags & SUP_ACK ? "the server "
		    "is told so, and does not serve it" : "it will not "
		    "survive a restart of the server");
		sock_fds_close(f);
		free(st);
	} else {
		drop_session(s, rec->id);	/* a pending one now serving */
		st->serving = serving;
		s->tab[s->ntab++] = st;
		if (rec->id > s->last_id)
			s->last_id = rec->id;
	}
	if (rec->flags & SUP_ACK)
		to_server(s, (struct out){ .kind = SUP_KEPT, .id = rec->id,
					   .err = ret < 0 ? ret : 0 });
}

/*
 * A client on the listener, for the server that asked for one: kept at
 * once (as a handshake not begun, under a number of ours until the
 * server names it), then handed to the server.  Whatever happens to the
 * server from here, its next one has the client.
 */
static void accept_client(struct sup *s)
{
	struct sup_rec rec = { .kind = SUP_PENDING, .id = s->tmp_id - 1,
				 .t_start = now_ms() };
	struct sock_fds f = { .n = 1 };

	f.fd[0] = sock_accept(s->listen_fd, SOCK_CLOEXEC, NULL, 0);
	if (f.fd[0] == -EMFILE || f.fd[0] == -ENFILE) {
		/* Taken with the spare and closed: the client is told. */
		if (s->spare_fd >= 0) {
			close(s->spare_fd);
			f.fd[0] = sock_accept(s->listen_fd, SOCK_CLOEXEC,
					      NULL, 0);
			if (f.fd[0] >= 0)
				close(f.fd[0]);
			s->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		}
		if (!s->fds_warned)
			say(LOG_ERR, "out of file descriptors with %d sessions "
			    "kept: closing clients (raise the limit: ulimit "
			    "-n, LimitNOFILE=)", s->ntab);
		s->fds_warned = true;
		return;
	}
	if (f.fd[0] < 0)
		return;
	s->fds_warned = false;
	memcpy(rec.proto, s->proto, sizeof(rec.proto));
	keep_session(s, &rec, &f, 0);
	if (!find_session(s, rec.id)) {
		say(LOG_ERR, "cannot keep a client: its connection closed");
		return;
	}
	s->tmp_id--;
	s->want--;
	to_server(s, (struct out){ .kind = SUP_ACCEPTED, .id = rec.id,
				   .t_start = rec.t_start });
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
 * What a pending handshake's protocol holds after a read (SUP_DATA): it
 * replaces the blob and the descriptors kept before (the socket stays).
 * Kept whole, the read is no longer lost should the server die.
 */
static void pending_data(struct stored *st, const struct sup_rec *rec,
			 struct sock_fds *f)
{
	struct sup_rec *r = malloc(sizeof(*r) + rec->nblob);
	int *fds = malloc(sizeof(int) * (size_t)(1 + f->n));

	if (!r || !fds) {	/* the old state stays, "was reading" */
		free(r);
		free(fds);
		return;
	}
	*r = *st->rec;
	r->nregions = 0;
	r->nblob = rec->nblob;
	memcpy(sup_blob(r), sup_blob(rec), rec->nblob);
	r->flags &= ~SUP_WAS_READING;
	fds[0] = st->fds[SUP_SOCK];
	close_fds(st->fds + 1, st->nfds - 1);
	memcpy(fds + 1, f->fd, sizeof(int) * (size_t)f->n);
	free(st->rec);
	free(st->fds);
	st->rec = r;
	st->fds = fds;
	st->nfds = 1 + f->n;
	f->n = 0;
}

/* Apply one message from the server; -ENODATA once it has gone. */
static int sup_input(struct sup *s)
{
	struct sup_rec *rec = s->in;
	struct sock_fds f = { .n = 0 };
	int ret = sup_recv(s->sup_fd, rec, &f);
	struct stored *st;

	if (ret == -EBADMSG)
		return 0;
	if (ret < 0 && ret != -EMFILE)
		return ret;
	if (rec->kind == SUP_LISTEN && !ret && f.n <= 1) {
		if (s->listen_fd >= 0)
			close(s->listen_fd);
		s->listen_fd = f.n ? f.fd[0] : -1;
		s->listen_done = !f.n;
		return 0;
	}
	if (rec->kind == SUP_SESSION || rec->kind == SUP_PENDING) {
		keep_session(s, rec, &f, ret);
		return 0;
	}
	if (rec->kind == SUP_WANT) {
		s->want = 1;
		memcpy(s->proto, rec->proto, sizeof(s->proto));
	}
	if (rec->kind == SUP_NAME && (st = find_session(s, rec->conn))) {
		st->rec->id = rec->id;	/* accepted: its session's id now */
		if (rec->id > s->last_id)
			s->last_id = rec->id;
	}
	if (rec->kind == SUP_DROP)
		drop_session(s, rec->id);
	if (rec->kind == SUP_READY)
		s->quick = -1;	/* this one started: not a crash loop */
	for (int i = 0; i < s->ntab; i++) {
		st = s->tab[i];
		if (st->rec->id != rec->id || st->serving)
			continue;
		/* A state whose descriptors were lost is no state to restore. */
		if (rec->kind == SUP_READING ||
		    (rec->kind == SUP_DATA && ret == -EMFILE))
			st->rec->flags |= SUP_WAS_READING;
		else if (rec->kind == SUP_DATA)
			pending_data(st, rec, &f);
	}
	sock_fds_close(&f);
	return 0;
}

/* Hand every stored session to the new server, then the end marker. */
static void hand_over(struct sup *s)
{
	struct sup_rec end = { .kind = SUP_ADOPT_END };

	for (int i = 0; i < s->ntab; i++) {
		struct stored *st = s->tab[i];

		if (st->rec->id < 0)	/* accepted, never named: name it */
			st->rec->id = ++s->last_id;
		st->rec->kind = st->serving ? SUP_ADOPT : SUP_ADOPT_PENDING;
		int ret = sup_send(s->sup_fd, st->rec, st->fds, st->nfds);

		if (ret < 0)
			say(LOG_ERR, "cannot hand session %d over: %s", st->rec->id,
			    strerror(-ret));
	}
	end.id = s->last_id;
	sup_send(s->sup_fd, &end, NULL, 0);
}

/* Start the server: this binary again, the supervisor channel at SUP_FD_ENV. */
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
		setenv(SUP_FD_ENV, num, 1);
		setenv(SUP_ACCEPTS_ENV, "1", 1);
		if (s->started)
			setenv(RESTART_ENV, "1", 1);
		if (s->listen_fd >= 0 || s->listen_done) {
			int l = s->listen_done ? -1 : dup(s->listen_fd);

			snprintf(num, sizeof(num), "%d", l);
			setenv(LISTEN_FD_ENV, num, 1);
		}
		execv(s->self, s->argv);
		say(LOG_ERR, "cannot execute %s: %s", s->self, strerror(errno));
		_exit(127);
	}
	close(sv[1]);
	s->sup_fd = sv[0];
	s->server = pid;
	s->started = true;
	s->quick = s->quick < 0 ? 0 : s->quick;
	s->want = 0;
	s->nout = 0;	/* for the server before: its sessions go over */
	hand_over(s);
	/* From now on never blocked by a server that does not read. */
	fcntl(s->sup_fd, F_SETFL, fcntl(s->sup_fd, F_GETFL) | O_NONBLOCK);
	return 0;
}

/* The server has exited: drain what it sent, then restart it or stop. */
static int server_gone(struct sup *s, int status)
{
	bool crashed = WIFSIGNALED(status) ||
		       (s->upgrading && WIFEXITED(status) &&
			WEXITSTATUS(status) == 0);

	while (s->sup_fd >= 0 && sup_input(s) == 0)
		;
	if (s->sup_fd >= 0)
		close(s->sup_fd);
	s->sup_fd = -1;
	s->server = 0;
	if (s->stopping || !crashed)	/* drained, --once, or a start error */
		return WIFEXITED(status) ? WEXITSTATUS(status) :
		       128 + WTERMSIG(status);
	if (s->upgrading) {
		say(LOG_INFO, "server handed over; starting %s anew, %d sessions to "
		    "adopt", s->self, s->ntab);
	} else {
		say(LOG_WARNING, "server died (signal %d); restarting it, %d sessions to "
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
		say(LOG_ERR, "cannot start the server: %s", strerror(-ret));
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
			sigqueue(s->server, SUPERVISE_STOP_SIG, (union sigval){
				 .sival_int = (int)si.ssi_signo });
		return -1;
	}
}

int supervise_run(char **argv)
{
	static struct sup s = { .listen_fd = -1, .sup_fd = -1 };
	ssize_t n = readlink("/proc/self/exe", s.self, sizeof(s.self) - 1);
	int ret = -1;

	if (n <= 0) {
		fprintf(stderr, "faultline serve: cannot find its own binary: "
			"%s\n", strerror(errno));
		return 1;
	}
	s.self[n] = 0;
	s.argv = argv;
	s.in = malloc(SUP_REC_MAX);
	if (!s.in) {
		fprintf(stderr, "faultline serve: out of memory\n");
		return 1;
	}
	/* Three descriptors a session: as many as the server may take. */
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	/* Socket activation names this process: the listener is ours. */
	if (sock_activated()) {
		s.listen_fd = SOCK_ACTIVATED_FD;
		fcntl(s.listen_fd, F_SETFD, FD_CLOEXEC);
		unsetenv("LISTEN_FDS");
		unsetenv("LISTEN_PID");
	}
	unsetenv(RESTART_ENV);	/* ours to set, for the servers after one */
	sigemptyset(&s.sigs);
	sigaddset(&s.sigs, SIGTERM);
	sigaddset(&s.sigs, SIGINT);
	sigaddset(&s.sigs, SIGHUP);
	sigaddset(&s.sigs, SIGCHLD);
	sigprocmask(SIG_BLOCK, &s.sigs, NULL);
	sigset_t usr2;

	sigemptyset(&usr2);
	sigaddset(&usr2, SIGUSR2);	/* inherited blocked by the server */
	sigaddset(&usr2, SUPERVISE_STOP_SIG);
	sigprocmask(SIG_BLOCK, &usr2, NULL);
	signal(SIGPIPE, SIG_IGN);
	s.sig_fd = signalfd(-1, &s.sigs, SFD_CLOEXEC);
	if (s.sig_fd < 0 || (ret = start_server(&s)) < 0) {
		fprintf(stderr, "faultline serve: cannot start the server: "
			"%s\n", strerror(s.sig_fd < 0 ? errno : -ret));
		return 1;
	}
	s.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	for (ret = -1; ret < 0;) {
		/*
		 * A server gone (EOF) is only polled again once restarted;
		 * the listener only while the server asks for a client.
		 */
		struct pollfd p[3] = {
			{ .fd = s.sig_fd, .events = POLLIN },
			{ .fd = s.sup_fd,
			  .events = POLLIN | (s.nout ? POLLOUT : 0) },
			{ .fd = s.listen_fd, .events = POLLIN },
		};
		int fd = s.sup_fd;
		bool listen = s.sup_fd >= 0 && s.want > 0 && s.listen_fd >= 0;

		if (poll(p, s.sup_fd < 0 ? 1 : listen ? 3 : 2, -1) < 0 &&
		    errno != EINTR)
			break;
		if (s.sup_fd >= 0 && p[1].revents & POLLOUT)
			flush_out(&s);
		if (s.sup_fd >= 0 && p[1].revents & ~POLLOUT &&
		    sup_input(&s) == -ENODATA && s.sup_fd == fd) {
			close(s.sup_fd);	/* SIGCHLD follows */
			s.sup_fd = -1;
		}
		if (listen && p[2].revents && s.sup_fd >= 0 &&
		    s.listen_fd == p[2].fd)
			accept_client(&s);
		if (p[0].revents)
			ret = on_sup_signal(&s);
	}
	while (s.ntab)
		stored_free(s.tab[--s.ntab]);
	free(s.tab);
	free(s.in);
	free(s.out);
	return ret < 0 ? 1 : ret;
}
