// SPDX-License-Identifier: Apache-2.0
/*
 * session.c - one client's session, from accept to teardown: its
 * credentials, refusals (which kill a client whose uffd arrived), the
 * engine started on what its protocol's handshake named, input while
 * serving, the end, and the teardown on a thread of its own.
 *
 * Decision: a session knows its protocol only through proto.h; receiving
 * the handshake is handshake.c's, the supervisor's takeover takeover.c's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/daemon.h"
#include "daemon/log.h"
#include "daemon/session.h"
#include "daemon/status.h"
#include "daemon/supchan.h"
#include "kernel/proc.h"
#include "source/source.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/size.h"
#include "util/sock.h"

/*
 * Open the --stats-json file for one append: a regular file only, never
 * waited on (a FIFO without a reader, say).  The fd, or -errno.
 */
int stats_open(const char *path)
{
	struct stat st;

	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
		return -EINVAL;	/* a FIFO's open could block, or fail */
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC |
		      O_NONBLOCK, 0644);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

/*
 * One JSON object per line, the session then its counters, written by one
 * write() to a file opened for append: lines from concurrent teardowns
 * never mix, and no lock is held that the control loop would wait on.
 * A failed write is logged (once until one succeeds again).
 */
static void write_stats(struct daemon *d, struct session *s,
			const struct fl_stats *st, uint64_t ms)
{
	static atomic_bool failing;
	const char *path = d->cfg->stats_json;

	if (!path)
		return;
	char *js = fl_stats_json(st), restore[24] = "null", *line = NULL;
	int fd = stats_open(path), n = -1;

	if (s->restored)
		snprintf(restore, sizeof(restore), "%llu",
			 (unsigned long long)s->restore_ms);
	if (js)
		n = asprintf(&line, "{\"session\":%d,\"pid\":%d,\"uid\":%u,"
			     "\"regions\":%d,\"bytes\":%llu,\"duration_ms\":%llu,"
			     "\"restore_ms\":%s,\"stats\":%s}\n",
			     s->id, (int)s->pid, (unsigned int)s->uid,
			     s->nregions, (unsigned long long)s->bytes,
			     (unsigned long long)ms, restore, js);
	if (n < 0)
		line = NULL;	/* asprintf leaves it undefined */
	int err = fd < 0 ? -fd : n <= 0 ? ENOMEM : 0;

	if (!err) {
		ssize_t wr = write(fd, line, (size_t)n);

		err = wr == n ? 0 : wr < 0 ? errno : ENOSPC;	/* short: full */
	}
	if (err && !atomic_exchange(&failing, true))
		serr(s, "cannot write its stats to %s: %s", path,
		     err == EINVAL ? "not a regular file" : strerror(err));
	if (!err)
		atomic_store(&failing, false);
	if (fd >= 0)
		close(fd);
	free(line);
	free(js);
}

/* One session's restore is complete: say so once, with what it took. */
void say_restored(struct session *s, const struct fl_stats *st,
			 uint64_t now)
{
	char poisoned[48] = "", gone[96] = "";

	s->restored = true;
	pthread_mutex_lock(&s->d->lock);
	s->d->tot.restored++;
	pthread_mutex_unlock(&s->d->lock);
	/* The filler's own clock is exact; else the first check that saw it. */
	s->restore_ms = st->restore_complete ? st->restore_ms :
			now - s->t_serving;
	if (st->pages_poisoned)
		snprintf(poisoned, sizeof(poisoned), ", %llu pages poisoned",
			 (unsigned long long)st->pages_poisoned);
	if (st->pages_gone)
		snprintf(gone, sizeof(gone), "; %llu pages were not mapped in "
			 "the client: nothing delivered there",
			 (unsigned long long)st->pages_gone);
	slog(s, "restore complete: %s in %llu ms (%llu faults, %llu "
	     "pages ahead of them, %llu in the background%s)%s",
	     size_str(s->bytes).s,
	     (unsigned long long)s->restore_ms,
	     (unsigned long long)st->faults,
	     (unsigned long long)(st->pages_prefetched + st->pages_replayed),
	     (unsigned long long)st->pages_background, poisoned, gone);
}

/* A session taken off the control loop, torn down on a thread of its own. */
struct teardown {
	struct daemon *d;
	struct session *s;
	uint64_t ms;
	char why[160];
};

/*
 * The clients one connection names make one restore (CRIU: the tasks of
 * a dump, at their own offsets of the pages), so they share one working
 * set: this session's trace added to the daemon's, and the file written
 * anew (whole, renamed over), so that it holds every client's so far.
 */
static int merge_trace(struct daemon *d, struct session *s)
{
	char part[PATH_MAX];
	int ret;

	static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;

	snprintf(part, sizeof(part), "%s.%d.%d.part", d->cfg->record,
		 (int)getpid(), s->id);
	ret = fl_engine_save_trace(s->engine, part);
	pthread_mutex_lock(&trace_lock);
	if (ret == 0 && d->trace_fresh) {
		if (rename(part, d->cfg->record) < 0)
			ret = fl_err(-errno, "%s: %m", d->cfg->record);
		d->trace_fresh = ret < 0;
	} else if (ret == 0) {
		ret = fl_trace_merge(d->cfg->record, part);
	}
	unlink(part);
	pthread_mutex_unlock(&trace_lock);
	return ret;
}

static void teardown_engine(struct daemon *d, struct session *s,
			    const char *why, uint64_t ms)
{
	struct fl_stats st;
	uint64_t miss, all;

	char killed[200], lat[128];

	/* Stopped first: a kill under way has said how it went. */
	fl_engine_stop(s->engine);
	if (fl_engine_finished(s->engine) == FL_FINISHED_KILLED) {
		snprintf(killed, sizeof(killed), "client killed by faultline: "
			 "a page could not be served%s", d->cfg->on_error ==
			 FL_ON_ERROR_KILL ? " (--on-source-error kill)" : "");
		why = killed;
	}
	fl_engine_progress(s->engine, &miss, &all);	/* restored by now? */
	fl_engine_stats(s->engine, &st);
	pthread_mutex_lock(&d->lock);
	stats_add(&d->tot.ended, &st);
	d->tot.killed += fl_engine_finished(s->engine) == FL_FINISHED_KILLED;
	pthread_mutex_unlock(&d->lock);
	/* Restored since the last progress check: say it now. */
	if (!s->restored && st.restore_complete)
		say_restored(s, &st, now_ms());
	fmt_latency(lat, sizeof(lat), &st);
	slog(s, "ended (%s) after %llu ms: %llu faults, %llu pages copied, %llu zeroed, %s; fault latency %s",
	     why, (unsigned long long)ms, (unsigned long long)st.faults,
	     (unsigned long long)st.pages_copied,
	     (unsigned long long)st.pages_zeroed,
	     size_str(st.bytes_copied).s, lat);
	if (st.pages_poisoned || st.source_errors || fl_engine_error(s->engine)[0])
		serr(s, "%llu pages poisoned, %llu source errors; the first: %s",
		     (unsigned long long)st.pages_poisoned,
		     (unsigned long long)st.source_errors,
		     fl_engine_error(s->engine)[0] ?
		     fl_engine_error(s->engine) : "(no message)");
	write_stats(d, s, &st, ms);
	if (d->cfg->record) {
		if ((d->shared_trace ? merge_trace(d, s) :
		     fl_engine_save_trace(s->engine, d->cfg->record)) < 0)
			slog(s, "%s", fl_last_error());
		else
			slog(s, "working set (%llu faults) written to %s",
			     (unsigned long long)st.faults, d->cfg->record);
	}
	fl_engine_destroy(s->engine);	/* closes the uffd */
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

static void *teardown_main(void *arg)
{
	struct teardown *t = arg;
	struct daemon *d = t->d;

	teardown_engine(d, t->s, t->why, t->ms);
	session_free(t->s);
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

/*
 * End a session.  First, here and at once, its engine is detached: no
 * ioctl of this session is issued from then on, so none can land in new
 * memory the client maps at the same addresses for its next session (the
 * kernel lets any uffd of a process fill any registered VMA of it).  Then
 * the socket is shut down: the client's EOF says its memory is its own
 * again.  Stopping the engine waits for its threads, which may be inside a
 * slow source read (HTTP retries, a post-copy peer): that happens on a
 * detached thread, so the control loop keeps accepting and serving.
 */
void session_end(struct daemon *d, struct session *s, const char *why)
{
	uint64_t ms = now_ms() - s->t_start;

	sup_drop(d, s);	/* first: a server started later never adopts it */
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
	d->nsessions--;
	d->ended++;
	if (!s->engine) {
		slog_at(s->refused ? LOG_WARNING : LOG_INFO, s, "closed: %s",
			why);
		if (s->uffd >= 0)
			close(s->uffd);
		session_free(s);
		return;
	}

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
			return;
		}
		pthread_attr_destroy(&attr);
		pthread_mutex_lock(&d->lock);
		d->tearing--;
		pthread_mutex_unlock(&d->lock);
		free(t);
	}
	teardown_engine(d, s, why, ms);	/* no thread to be had: here */
	session_free(s);
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
 * Refuse a client that is not (or not yet) served, for any reason.  Its
 * socket is shut for reading first: whatever it sends from then on fails
 * (EPIPE), and what it sent before is read here, so it is known for sure
 * whether it handed over a uffd.  A client that did is killed (SIGKILL
 * through its pidfd, never a reused pid), as Firecracker's documentation
 * asks of a handler that cannot serve: nobody would ever serve that uffd,
 * and its VM's first fault would sleep for ever.  The log says which.
 */
void refuse(struct daemon *d, struct session *s, const char *why)
{
	char buf[4096], line[480];
	struct sock_fds f;
	int trunc = 0, tries = 0, err;

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
	s->refused = true;	/* logged as a warning */
	session_end(d, s, line);
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
	int ret = start_serving(d, s, c->regions, c->nregions, false);

	if (ret < 0) {
		char why[320];

		snprintf(why, sizeof(why), "cannot serve it: %s",
			 fl_last_error());
		session_end(d, s, why);
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

/* The regions, for the status (none if out of memory: only not shown). */
static void keep_regions(struct session *s, const struct fl_region_desc *regs,
			 int n)
{
	s->regions = calloc((size_t)n, sizeof(*s->regions));
	for (int i = 0; s->regions && i < n; i++)
		s->regions[i] = (struct sess_region){
			.addr = regs[i].addr, .len = regs[i].len,
			.page_size = regs[i].page_size ? regs[i].page_size : 4096,
			.src_offset = regs[i].src_offset };
}

/* Its engine started: serving from here, said in one line (what). */
static int serve_now(struct daemon *d, struct session *s, const char *what)
{
	int ret = fl_engine_start(s->engine, d->cfg->threads ?
				  d->cfg->threads : 1);

	if (ret < 0)
		return ret;
	s->state = S_SERVING;
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

int start_serving(struct daemon *d, struct session *s,
		  const struct fl_region_desc *regs, int n, bool takeover)
{
	const struct serve_config *cfg = d->cfg;
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
	keep_regions(s, regs, n);
	if (takeover) {
		s->stored = true;	/* the supervisor has it already */
		return serve_now(d, s, "taken over: serving");
	}
	if (d->sup_fd < 0)
		return serve_now(d, s, s->parent ? "forked: serving" : "serving");
	/*
	 * Never served unless kept: a server that died would take the only
	 * copy of its descriptors with it (lazy pages would read as zeros).
	 * The engine starts once the supervisor says it kept them.
	 */
	ret = sup_session(d, s, regs, n);
	if (ret < 0) {
		s->unkept = true;
		return fl_err(ret, "the supervisor cannot be handed its "
			      "descriptors (%s): not served", strerror(-ret));
	}
	if (!d->sup_accepts)	/* it does not answer: sent is kept */
		return serve_now(d, s, s->parent ? "forked: serving" :
				 "serving");
	s->state = S_KEEPING;
	return 0;
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

	while (s && (s->id != id || s->state != S_KEEPING))
		s = s->next;
	if (!s)
		return;
	if (!err) {
		if (serve_now(d, s, s->parent ? "forked: serving" :
			      "serving") < 0) {
			snprintf(why, sizeof(why), "cannot serve it: %s",
				 fl_last_error());
			session_end(d, s, why);
		}
		return;
	}
	snprintf(why, sizeof(why), "not served: the supervisor could not "
		 "keep it (%s), and it would not survive a restart of the "
		 "server", strerror(-err));
	if (s->sock >= 0) {
		refuse(d, s, why);
		return;
	}
	/* Named by a connection still under way: that restore fails. */
	while (c && (c->id != s->conn || c->sock < 0))
		c = c->next;
	snprintf(why + strlen(why), sizeof(why) - strlen(why), "; %s",
		 c ? "its restorer refused" : "its client cannot be killed "
		 "(its pid is another namespace's): its memory reads as zeros");
	session_end(d, s, why);
	if (c)
		refuse(d, c, "a client it named could not be kept by the "
		       "supervisor");
}

/*
 * The client wrote (or closed) while being served: its protocol takes what
 * it sent (one that takes nothing ignores it); EOF is the client's end.
 */
void serving_input(struct daemon *d, struct session *s, short revents)
{
	char buf[4096];
	struct sock_fds f;
	ssize_t n = sock_recv_fds(s->sock, buf, sizeof(buf), MSG_DONTWAIT, &f,
				  s->proto->input ? s->proto->max_fds : 0);

	if (n == 0 || (n < 0 && n != -EAGAIN && n != -EINTR) ||
	    (n < 0 && (revents & (POLLHUP | POLLERR)))) {
		session_end(d, s, "client closed the socket");
		return;
	}
	if (n < 0 || !s->proto->input)
		return;
	int ret = s->proto->input(s->pstate, s->sock, s->engine, buf,
				  (size_t)n, f.fd, f.n);

	if (ret < 0) {
		char why[320];

		snprintf(why, sizeof(why), "%s", fl_last_error());
		session_end(d, s, why);
	}
}
