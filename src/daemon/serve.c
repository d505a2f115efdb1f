// SPDX-License-Identifier: Apache-2.0
/*
 * serve.c - the server of `faultline serve`, started: its protocol, the
 * source it serves, the descriptors a supervisor handed it, the signals,
 * the control socket, the listener (listen.c), what a server before it
 * kept (takeover.c); then the control loop (loop.c) until it stops.  A
 * session's life is session.c's; the life cycle is in
 * docs/architecture.md.
 *
 * Decision: everything is set up before the listener is announced, so a
 * client that sees it listen is served.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "daemon/ctl.h"
#include "daemon/daemon.h"
#include "daemon/listen.h"
#include "daemon/log.h"
#include "daemon/loop.h"
#include "daemon/report.h"
#include "daemon/serve.h"
#include "daemon/supchan.h"
#include "daemon/supervise.h"
#include "daemon/takeover.h"
#include "source/source.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/size.h"

/* A remote source waiting for its origin: say so in the log. */
static void source_note_log(void *arg, const char *line)
{
	(void)arg;
	slog(NULL, "%s", line);
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
	ret = serve_loop(&d);
	stop_listening(&d);
out:
	teardown(&d);
	return ret;
}
