// SPDX-License-Identifier: Apache-2.0
/*
 * serve.c - the server of `faultline serve`: listening, accepting, and the
 * control loop (one thread polls the listener, a signalfd and every
 * session's socket; each session's engine serves its faults on its own
 * threads, so a slow or broken client never delays another).  A session's
 * life is session.c's, its handshake handshake.c's (in the protocol the
 * listener speaks, proto.h), a takeover takeover.c's; the life cycle is
 * in docs/architecture.md.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "daemon/allow.h"
#include "daemon/ctl.h"
#include "daemon/daemon.h"
#include "daemon/handshake.h"
#include "daemon/log.h"
#include "daemon/progress.h"
#include "daemon/session.h"
#include "daemon/supchan.h"
#include "daemon/supervise.h"
#include "daemon/takeover.h"
#include "kernel/proc.h"
#include "source/source.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/size.h"
#include "util/sock.h"

/* A remote source waiting for its origin: say so in the log. */
static void source_note_log(void *arg, const char *line)
{
	(void)arg;
	slog(NULL, "%s", line);
}

/* ---- listening ---------------------------------------------------------- */

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

static int listen_on(struct daemon *d, const char *path)
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

static void stop_listening(struct daemon *d)
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
static void listen_no_more(struct daemon *d)
{
	struct sup_rec r = { .kind = SUP_LISTEN };

	stop_listening(d);
	if (d->sup_fd >= 0)
		sup_send(d->sup_fd, &r, NULL, 0);
}

/* ---- sessions ----------------------------------------------------------- */

/*
 * Sessions at most: MAX_SESSIONS, or fewer when the descriptor limit is
 * low (a serving session holds its socket, the uffd, the engine's eventfd,
 * the client's pagemap and pidfd, and supervised its state memfd; a
 * handshake a pidfd too), keeping FD_RESERVE for the rest.
 */
#define FDS_PER_SESSION	6
#define FD_RESERVE	64

static int max_sessions(void)
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
	s->stored = kept;
	if (!uid_allowed(d->cfg, s->uid)) {
		refuse(d, s, uid_refusal(d->cfg));
		return;
	}
	/* Sessions being torn down make clients wait (see loop), not this. */
	if (d->nsessions > d->max_sessions) {
		char why[96];

		snprintf(why, sizeof(why), "too many sessions (%d, what the "
			 "descriptor limit allows)", d->max_sessions);
		refuse(d, s, why);
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
 * A message from the supervisor while serving: a client it accepted (and
 * keeps, under a number of its own until told the session's id), or
 * whether it kept a session (session_kept()).
 */
static void from_supervisor(struct daemon *d)
{
	struct sup_rec *rec = d->sup_in;
	struct sock_fds f = { .n = 0 };
	int ret = sup_recv(d->sup_fd, rec, &f), id;

	if (ret < 0 && ret != -EMFILE)
		return;
	if (rec->kind == SUP_KEPT) {
		session_kept(d, rec->id, rec->err);
	} else if (rec->kind == SUP_ACCEPTED) {
		d->wanted = false;
		test_pause_after_accept();
		id = ++d->next_id;
		sup_name(d, rec->id, id);
		if (ret == 0 && f.n == 1) {
			fcntl(f.fd[0], F_SETFL,
			      fcntl(f.fd[0], F_GETFL) | O_NONBLOCK);
			take_client(d, f.fd[0], id, rec->t_start, true);
			return;
		}
		/* Its socket never came: the supervisor closes its copy. */
		serr(NULL, "out of file descriptors with %d sessions: a client "
		     "refused (its connection closed)", d->nsessions);
		sup_drop_id(d, id);
	}
	sock_fds_close(&f);
}

/* ---- the control loop --------------------------------------------------- */

static void handshake_timeout(struct daemon *d, struct session *s)
{
	char why[160];

	snprintf(why, sizeof(why), "bad handshake: %s after the timeout",
		 s->proto->unfinished);
	refuse(d, s, why);
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
		if (s->state == S_SERVING && s->sock < 0 &&
		    now - s->t_probe >= 1000) {
			s->t_probe = now;
			fl_engine_client_alive(s->engine);
		}
		if (s->state == S_SERVING && fl_engine_finished(s->engine))
			session_end(d, s, "client gone");
		else if (s->state == S_SERVING && s->proto->end_when_restored &&
			 restored_now(s, now))
			session_end(d, s, "restored: its memory is its own");
		else if (s->state == S_HANDSHAKE &&
			 now - s->t_start > (uint64_t)d->cfg->handshake_timeout_ms)
			handshake_timeout(d, s);
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
		session_end(d, d->sessions, "daemon stopping");
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

static int loop(struct daemon *d)
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
		/* The supervisor accepts: asked for one client at a time. */
		if (d->sup_accepts) {
			if (d->listen_fd >= 0 && may_accept(d) && !d->wanted) {
				sup_want(d);
				d->wanted = true;
			}
			pfd[n] = (struct pollfd){ .fd = d->sup_fd, .events = POLLIN };
			who[n++] = NULL;
		} else if (d->listen_fd >= 0 && may_accept(d) &&
			   now_ms() >= d->accept_paused) {
			pfd[n] = (struct pollfd){ .fd = d->listen_fd, .events = POLLIN };
			who[n++] = NULL;
		}
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
			if (s->state == S_HANDSHAKE)
				handshake_input(d, s);
			else
				serving_input(d, s, pfd[i].revents);
		}
		if (first == 3 && d->sup_accepts && pfd[2].revents)
			from_supervisor(d);
		else if (first == 3 && d->listen_fd >= 0 && pfd[2].revents)
			accept_one(d);
		ctl_service(d, pfd + ctl_first, n - ctl_first);
		check_sessions(d);
		progress_check(d);
	}
	while (d->sessions)
		session_end(d, d->sessions, "daemon stopping");
	wait_teardowns(d);
	free(pfd);
	free(who);
	return 0;
}

/*
 * Run by the supervisor: the supervisor channel and, after the first start,
 * the listener it keeps (supervise.c).  Taken out of the environment, so
 * that nothing this process starts inherits them.
 */
static void supervised_fds(struct daemon *d)
{
	const char *st = getenv(SUP_FD_ENV), *l = getenv(LISTEN_FD_ENV);

	d->sup_fd = st ? atoi(st) : -1;
	if (d->sup_fd >= 0)
		fcntl(d->sup_fd, F_SETFD, FD_CLOEXEC);
	/* A supervisor that accepts and acknowledges (an older one does not). */
	d->sup_accepts = d->sup_fd >= 0 && getenv(SUP_ACCEPTS_ENV) &&
			 (d->sup_in = malloc(SUP_REC_MAX));
	if (l && d->sup_fd >= 0) {
		d->listen_given = true;		/* -1: listen no more */
		d->listen_fd = atoi(l);
		d->own_socket = d->cfg->socket_path != NULL;
		fcntl(d->listen_fd, F_SETFD, FD_CLOEXEC);
		fcntl(d->listen_fd, F_SETFL,
		      fcntl(d->listen_fd, F_GETFL) | O_NONBLOCK);
	}
	unsetenv(SUP_FD_ENV);
	unsetenv(LISTEN_FD_ENV);
	unsetenv(SUP_ACCEPTS_ENV);
}

/*
 * --record with a protocol whose connections name their clients: one
 * trace for them all (session.c merge_trace()); a server taking over
 * goes on from what the one before it wrote.
 */
static int shared_trace(struct daemon *d)
{
	if (!d->cfg->record || !d->proto->named)
		return 0;
	d->shared_trace = true;
	/*
	 * The first server starts the file anew (a run before this one
	 * wrote it): gone now, or, when it is also the trace replayed,
	 * replaced by the first merge; a server taking over goes on from it.
	 */
	if (!d->listen_given && (!d->cfg->replay ||
				 strcmp(d->cfg->replay, d->cfg->record)))
		unlink(d->cfg->record);
	else if (!d->listen_given)
		d->trace_fresh = true;
	return 0;
}

/* A trace to replay that cannot be read: said at start, not per session. */
static int check_replay(const struct serve_config *cfg)
{
	return cfg->replay ? fl_trace_check(cfg->replay) : 0;
}

/* A --stats-json path that cannot work: said now, not at a session's end. */
static int check_stats_json(const struct serve_config *cfg)
{
	int fd;

	if (!cfg->stats_json)
		return 0;
	fd = stats_open(cfg->stats_json);
	if (fd < 0)
		return fl_err(fd, "--stats-json %s: %s", cfg->stats_json,
			      fd == -EINVAL ? "not a regular file" :
			      strerror(-fd));
	close(fd);
	return 0;
}

/*
 * Signals only through the signalfd, blocked before any thread exists (a
 * tcp:// source starts its own at open): a thread that left SIGTERM
 * unblocked would take it with the default action, and the daemon would
 * die instead of draining its sessions.
 */
static void block_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGUSR2);
	sigaddset(set, SUPERVISE_STOP_SIG);
	sigaddset(set, SIGHUP);	/* the supervisor's: ignored here */
	pthread_sigmask(SIG_BLOCK, set, NULL);
}

/* The memory to serve (d->src), whole 4 KiB pages, and a shared trace. */
static int open_source(struct daemon *d)
{
	const struct serve_config *cfg = d->cfg;
	struct fl_source_opts so = { .cache_dir = cfg->cache_dir,
				     .cache_max_bytes = cfg->cache_max,
				     .note = source_note_log,
				     .layers = cfg->layers,
				     .nlayers = cfg->nlayers };
	uint64_t size;
	int ret = 0;

	if (cfg->source)
		d->src = fl_source_get(cfg->source);
	else
		ret = fl_source_open_ex(cfg->mem_file, &so, &d->src);
	if (ret < 0)
		return ret;
	size = fl_source_size(d->src);
	if (!cfg->source && size == 0)
		ret = fl_err(-EINVAL, "%s: empty (0 bytes): no guest memory "
			     "to serve", cfg->mem_file);
	else if (!cfg->source && size % 4096)
		ret = fl_err(-EINVAL, "%s is %s (%llu bytes): not a whole "
			     "number of 4 KiB pages, as a guest's memory is",
			     cfg->mem_file, size_str(size).s,
			     (unsigned long long)size);
	else
		ret = shared_trace(d);
	if (ret < 0) {
		fl_source_put(d->src);
		d->src = NULL;
	}
	return ret;
}

/*
 * Listening: say so (criu's --status-fd), before the supervisor is given
 * the listener (a server dying between the two listens anew, and says it
 * again), never after a restart that inherited it; then adopt what the
 * supervisor kept and tell it this server is ready.
 */
static void announce(struct daemon *d)
{
	const struct serve_config *cfg = d->cfg;

	if (cfg->status_fd > 0) {
		if (!d->listen_given && write(cfg->status_fd, "", 1) != 1)
			swarn(NULL, "--status-fd %d: %m", cfg->status_fd);
		close(cfg->status_fd);
	}
	if (d->sup_fd >= 0 && !d->listen_given) {
		struct sup_rec l = { .kind = SUP_LISTEN };

		sup_send(d->sup_fd, &l, &d->listen_fd, 1);
	}
	slog(NULL, "serving %s (%s) on %s", d->src->desc,
	     size_str(fl_source_size(d->src)).s,
	     cfg->socket_path ? cfg->socket_path : "the systemd socket");
	if (d->sup_fd >= 0) {
		struct sup_rec r = { .kind = SUP_READY };

		adopt_sessions(d);
		/* Its one client came to a server before this one. */
		if (cfg->one_client && d->nsessions && d->listen_fd >= 0)
			listen_no_more(d);
		sup_send(d->sup_fd, &r, NULL, 0);
	}
}

static void teardown(struct daemon *d)
{
	ctl_close(d);
	if (d->spare_fd >= 0)
		close(d->spare_fd);
	if (d->sig_fd >= 0)
		close(d->sig_fd);
	if (d->torn_fd >= 0)
		close(d->torn_fd);
	fl_source_put(d->src);
	free(d->sup_in);
}

int serve_run(const struct serve_config *cfg)
{
	struct daemon d = { .cfg = cfg, .listen_fd = -1, .sig_fd = -1,
			    .sup_fd = -1,
			    .lock = PTHREAD_MUTEX_INITIALIZER,
			    .torn = PTHREAD_COND_INITIALIZER, .torn_fd = -1,
			    .last_step = -1, .tty = isatty(2),
			    .t_up = now_ms() };
	sigset_t set;
	int ret;

	d.proto = proto_find(cfg->protocol);
	if (!d.proto)
		return fl_err(-EINVAL, "--protocol %s: not a protocol faultline "
			      "speaks", cfg->protocol);
	ret = check_replay(cfg);
	if (ret < 0)
		return ret;
	block_signals(&set);
	supervised_fds(&d);
	ret = check_stats_json(cfg);
	if (!ret)
		ret = open_source(&d);
	if (ret < 0) {
		free(d.sup_in);
		return ret;
	}
	/* All set up before listening: a client that sees it listen is served. */
	d.max_sessions = max_sessions();
	d.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	d.torn_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	signal(SIGPIPE, SIG_IGN);
	d.sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	/*
	 * Status and metrics, before the listener (all there once a client
	 * sees it listen): a start error at the first start; a server taking
	 * over goes on without them (its sessions matter more).
	 */
	ret = ctl_open(&d);
	if (ret < 0 && !d.listen_given)
		goto out;
	if (ret < 0)
		swarn(NULL, "no status or metrics: %s", fl_last_error());
	ret = d.listen_given ? 0 : listen_on(&d, cfg->socket_path);
	if (ret < 0)
		goto out;
	announce(&d);
	ret = loop(&d);
	stop_listening(&d);
out:
	teardown(&d);
	return ret;
}
