// SPDX-License-Identifier: Apache-2.0
/*
 * session.c - one client's session, from accept to teardown: refusals
 * (which kill a client whose uffd arrived), the handshake, serving, the
 * hand-over of its descriptors to the supervisor, takeover, the end.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
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
#include "daemon/supervise.h"
#include "kernel/proc.h"
#include "source/source.h"
#include "util/clock.h"
#include "util/error.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD	77	/* Linux 6.5 */
#endif

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
		slog(s, "cannot write its stats to %s: %s", path,
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
	slog(s, "restore complete: %llu MiB in %llu ms (%llu faults, %llu "
	     "pages ahead of them, %llu in the background%s)%s",
	     (unsigned long long)(s->bytes >> 20),
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

static void teardown_engine(struct daemon *d, struct session *s,
			    const char *why, uint64_t ms)
{
	struct fl_stats st;
	uint64_t miss, all;

	char killed[200];

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
	/* Restored since the last progress check: say it now. */
	if (!s->restored && st.restore_complete)
		say_restored(s, &st, now_ms());
	slog(s, "ended (%s) after %llu ms: %llu faults, %llu pages copied, %llu zeroed, %llu MiB, p50 %llu us, p99 %llu us",
	     why, (unsigned long long)ms, (unsigned long long)st.faults,
	     (unsigned long long)st.pages_copied,
	     (unsigned long long)st.pages_zeroed,
	     (unsigned long long)(st.bytes_copied >> 20),
	     (unsigned long long)fl_stats_percentile(&st, 50) / 1000,
	     (unsigned long long)fl_stats_percentile(&st, 99) / 1000);
	if (st.pages_poisoned || st.source_errors || fl_engine_error(s->engine)[0])
		slog(s, "%llu pages poisoned, %llu source errors; the first: %s",
		     (unsigned long long)st.pages_poisoned,
		     (unsigned long long)st.source_errors,
		     fl_engine_error(s->engine)[0] ?
		     fl_engine_error(s->engine) : "(no message)");
	write_stats(d, s, &st, ms);
	if (d->cfg->record) {
		if (fl_engine_save_trace(s->engine, d->cfg->record) < 0)
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
	fc_parser_free(s->parser);
	close(s->sock);
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

	if (s->stored) {	/* first: a server started later never adopts it */
		struct store_rec drop = { .kind = STORE_DROP, .id = s->id };

		store_send(d->store_fd, &drop, NULL, 0);
	}
	if (s->engine)
		fl_engine_detach(s->engine);
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
		slog(s, "closed: %s", why);
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
 * The fds mh carries (SCM_RIGHTS): the first kept in *keep if that is -1
 * (NULL: none kept), the rest closed.  Returns how many there were.
 */
static int take_fds(struct msghdr *mh, int *keep)
{
	int count = 0;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		int n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		int *fds = (int *)CMSG_DATA(c);

		for (int i = 0; i < n; i++, count++) {
			if (keep && *keep < 0)
				*keep = fds[i];
			else
				close(fds[i]);
		}
	}
	return count;
}

/*
 * Room for the fds and for what a socket may add uninvited
 * (SCM_CREDENTIALS with SO_PASSCRED, as systemd's PassCredentials= sets, a
 * security label, a pidfd): else the uffd does not fit and looks like a
 * daemon out of descriptors.
 */
union handshake_ctl {
	char b[CMSG_SPACE(sizeof(int) * MAX_FDS_PER_MSG) +
	       CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(256) +
	       CMSG_SPACE(sizeof(int))];
	struct cmsghdr align;
};

/* Read what the client has sent into buf; its fds go to take_fds(). */
static ssize_t handshake_recv(struct session *s, char *buf, size_t len,
			      int *msg_flags)
{
	union handshake_ctl ctl;
	struct iovec iov = { buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = ctl.b,
			     .msg_controllen = sizeof(ctl.b) };
	ssize_t n = recvmsg(s->sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);

	if (n >= 0)	/* on failure the control buffer holds nothing */
		s->nfds += take_fds(&mh, &s->uffd);	/* the one uffd */
	*msg_flags = mh.msg_flags;
	return n;
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
	int flags, trunc = 0, tries = 0, err;

	shutdown(s->sock, SHUT_RD);
	while (handshake_recv(s, buf, sizeof(buf), &flags) > 0 &&
	       ++tries < 256)
		trunc |= flags & MSG_CTRUNC;
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
	} else {
		snprintf(line, sizeof(line), "%s; its uffd was handed over, "
			 "and killing the client failed (%s)", why,
			 err == -ESRCH ? "it had exited" : strerror(-err));
	}
	session_end(d, s, line);
}

/*
 * The client is signalled (refused, or killed by the engine) through a
 * pidfd only, never by a pid reused since: the socket's own (SO_PEERPIDFD,
 * Linux 6.5: taken at connect), or -1.
 */
static int peer_pidfd(int sock)
{
	int fd = -1;
	socklen_t len = sizeof(fd);

	return getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, &fd, &len) < 0 ?
	       -1 : fd;
}

/*
 * A session in the handshake state for the client on fd, its credentials
 * from SO_PEERCRED; on the daemon's list.  NULL (fd closed) if out of
 * memory.
 */
struct session *session_new(struct daemon *d, int fd, int id,
				   uint64_t t_start)
{
	struct session *s = calloc(1, sizeof(*s));
	struct ucred cred;
	socklen_t cl = sizeof(cred);

	if (!s || fc_parser_new(&s->parser) < 0) {
		slog(NULL, "out of memory: refusing a client");
		free(s);
		close(fd);
		return NULL;
	}
	s->id = id;
	s->sock = fd;
	s->uffd = -1;
	s->pidfd = -1;
	s->state_fd = -1;
	s->t_start = t_start;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0) {
		s->pid = cred.pid;
		s->uid = cred.uid;
		/* Before Linux 6.5, one opened now: the client is waiting. */
		s->pidfd = peer_pidfd(fd);
		if (s->pidfd < 0)
			s->pidfd = proc_pidfd_open(s->pid);
	}
	s->next = d->sessions;
	d->sessions = s;
	d->nsessions++;
	return s;
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

/* Hand a serving session's descriptors to the supervisor. */
static void store_session(struct daemon *d, struct session *s,
			  const struct fl_region_desc *regs, int n)
{
	static struct store_rec rec;
	int fds[STORE_NFDS] = { s->sock, fl_engine_uffd(s->engine),
				s->state_fd };

	rec = (struct store_rec){ .kind = STORE_SESSION, .id = s->id,
				  .pid = s->pid, .uid = s->uid,
				  .t_start = s->t_start, .nregions = n };
	for (int i = 0; i < n; i++)
		rec.regs[i] = (struct store_region){ regs[i].addr, regs[i].len,
						     regs[i].page_size,
						     regs[i].src_offset };
	if (store_send(d->store_fd, &rec, fds, STORE_NFDS) == 0)
		s->stored = true;
	else
		slog(s, "cannot hand its descriptors to the supervisor: it "
		     "will not survive a restart of the server");
}

static int start_serving(struct daemon *d, struct session *s,
			 struct fl_region_desc *regs, int n, bool takeover)
{
	const struct serve_config *cfg = d->cfg;
	struct fl_engine_opts o = {
		.uffd = s->uffd,
		.chunk_size = cfg->chunk,
		.on_error = cfg->on_error,
		/* 0: a peer in a pid namespace we cannot see (REMOTE) */
		.client_pid = s->pid > 0 ? s->pid : 0,
		/* Taken at connect; none: never killed by pid (poisoned) */
		.client_pidfd = s->pidfd >= 0 ? s->pidfd : -1,
		.flags = FL_ENGINE_ADOPT | FL_ENGINE_OWN_UFFD |
			 (s->pid > 0 ? FL_ENGINE_CLIENT_PIDFD :
			  FL_ENGINE_CLIENT_REMOTE) |
			 cfg->engine_flags,
	};
	int ret;

	/* Recording: every first touch must fault, so nothing is filled ahead. */
	if (cfg->record)
		o.flags |= FL_ENGINE_NO_PREFETCH | FL_ENGINE_NO_BACKGROUND;

	if (s->uffd < 0)
		return fl_err(-EINVAL, "handshake: no uffd in SCM_RIGHTS");
	if (!is_uffd(s->uffd))
		return fl_err(-EINVAL, "handshake: the fd sent is not a userfaultfd");
	if (d->store_fd >= 0 && s->state_fd < 0 &&
	    (s->state_fd = state_memfd(regs, n)) < 0)
		return s->state_fd;
	if (s->state_fd >= 0) {
		o.flags |= FL_ENGINE_SHARED_STATE |
			   (takeover ? FL_ENGINE_TAKEOVER : 0);
		o.state_fd = s->state_fd;
	}
	ret = fl_engine_create(&o, &s->engine);
	if (ret < 0)
		return ret;
	s->uffd = -1;	/* the engine owns it now */
	for (int i = 0; i < n && ret == 0; i++) {
		ret = fl_engine_add_region(s->engine, &regs[i], d->src);
		s->bytes += regs[i].len;
	}
	if (ret == 0 && cfg->record)
		ret = fl_engine_record(s->engine);
	if (ret == 0 && cfg->replay)
		ret = fl_engine_replay(s->engine, cfg->replay);
	if (ret == 0)
		ret = fl_engine_start(s->engine, cfg->threads ? cfg->threads : 1);
	if (ret < 0)
		return ret;
	s->state = S_SERVING;
	if (s->pidfd >= 0) {	/* the engine has its own now */
		close(s->pidfd);
		s->pidfd = -1;
	}
	s->nregions = n;
	s->t_serving = now_ms();
	slog(s, "%s %d region%s, %llu MiB, from %s",
	     takeover ? "taken over: serving" : "serving", n, n > 1 ? "s" : "",
	     (unsigned long long)(s->bytes >> 20), d->src->desc);
	if (takeover)
		s->stored = true;	/* the supervisor has it already */
	else if (d->store_fd >= 0)
		store_session(d, s, regs, n);
	return 0;
}

/*
 * Supervised: each read of a handshake is bracketed for the supervisor.
 * Before it, STORE_READING (should this server die in the read, what it
 * took is lost); after it, STORE_DATA with what it got (n bytes, maybe the
 * uffd), which the supervisor keeps for the next server.
 */
static void say_reading(struct daemon *d, struct session *s)
{
	struct store_rec r = { .kind = STORE_READING, .id = s->id };

	if (s->stored)
		store_send(d->store_fd, &r, NULL, 0);
}

static void say_read(struct daemon *d, struct session *s, const char *buf,
		     ssize_t n, int new_uffd)
{
	static struct store_rec r;

	if (!s->stored)
		return;
	r.kind = STORE_DATA;
	r.id = s->id;
	r.nbytes = n > 0 && n <= STORE_BYTES_MAX ? (uint32_t)n : 0;
	memcpy(r.bytes, buf, r.nbytes);
	if (n > STORE_BYTES_MAX)	/* too long to keep: stays "reading" */
		return;
	store_send(d->store_fd, &r, &new_uffd, new_uffd >= 0);
}

/* n bytes of the handshake are in (its fds taken): parse, maybe serve. */
static void handshake_bytes(struct daemon *d, struct session *s,
			    const char *buf, size_t n, int flags)
{
	struct fl_region_desc regs[FC_REGIONS_MAX];

	s->got_bytes = true;
	if ((flags & MSG_CTRUNC) && !s->nfds) {
		/* The kernel could not install the fd here: EMFILE. */
		refuse(d, s, "cannot receive the client's uffd: the daemon is "
		       "out of file descriptors");
		return;
	}
	if (flags & MSG_CTRUNC || s->nfds > 1) {
		char why[96];

		snprintf(why, sizeof(why),
			 "bad handshake: %s%d fds in SCM_RIGHTS, expected exactly one",
			 (flags & MSG_CTRUNC) ? "more than " : "",
			 s->nfds);
		refuse(d, s, why);
		return;
	}
	int ret = fc_parser_feed(s->parser, buf, n, fl_source_size(d->src),
				 regs, FC_REGIONS_MAX);

	if (ret == -EAGAIN)
		return;
	if (ret > 0)
		ret = start_serving(d, s, regs, ret, false);
	if (ret < 0) {
		char why[320];

		snprintf(why, sizeof(why), "bad handshake: %s", fl_last_error());
		refuse(d, s, why);
	}
}

/* Bytes (and maybe the fd) of the handshake arrived. */
void handshake_input(struct daemon *d, struct session *s)
{
	char buf[4096];
	int flags, had = s->uffd;

	say_reading(d, s);
	ssize_t n = handshake_recv(s, buf, sizeof(buf), &flags);
	int err = errno;

	say_read(d, s, buf, n, s->uffd != had ? s->uffd : -1);
	if (n < 0 && (err == EAGAIN || err == EINTR))
		return;
	if (n <= 0) {
		refuse(d, s, n < 0 ? "receive failed" : s->got_bytes ?
		       "bad handshake: truncated JSON (the client closed the socket mid-array)" :
		       "client closed before the handshake");
		return;
	}
	handshake_bytes(d, s, buf, (size_t)n, flags);
}

/* The client wrote (or closed) while being served. */
void serving_input(struct daemon *d, struct session *s, short revents)
{
	char buf[512];
	ssize_t n = recv(s->sock, buf, sizeof(buf), MSG_DONTWAIT);

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) ||
	    (n < 0 && (revents & (POLLHUP | POLLERR)))) {
		session_end(d, s, "client closed the socket");
		return;
	}
	/* Firecracker sends nothing more; anything else is ignored. */
}

/* Serve one session the last server had, as the supervisor kept it. */
static void adopt_one(struct daemon *d, const struct store_rec *rec,
		      const int *fds)
{
	struct fl_region_desc regs[FC_REGIONS_MAX];
	struct session *s = calloc(1, sizeof(*s));

	if (!s) {
		for (int i = 0; i < STORE_NFDS; i++)
			close(fds[i]);
		return;
	}
	*s = (struct session){ .id = rec->id, .sock = fds[STORE_SOCK],
			       .uffd = fds[STORE_UFFD],
			       .pidfd = peer_pidfd(fds[STORE_SOCK]),
			       .state_fd = fds[STORE_STATE], .pid = rec->pid,
			       .uid = rec->uid, .t_start = rec->t_start,
			       .nfds = 1 };
	for (int i = 0; i < rec->nregions; i++)
		regs[i] = (struct fl_region_desc){
			.addr = rec->regs[i].addr, .len = rec->regs[i].len,
			.page_size = rec->regs[i].page_size,
			.src_offset = rec->regs[i].src_offset };
	fcntl(s->sock, F_SETFL, fcntl(s->sock, F_GETFL) | O_NONBLOCK);
	s->next = d->sessions;
	d->sessions = s;
	d->nsessions++;
	if (start_serving(d, s, regs, rec->nregions, true) < 0) {
		char why[320];

		s->stored = true;	/* the supervisor must forget it too */
		snprintf(why, sizeof(why), "cannot take it over: %s",
			 fl_last_error());
		session_end(d, s, why);
	}
}

/*
 * Did the read a dead server had under way take nothing?  Only if it was
 * the handshake's first and the client's first bytes are still queued
 * with the uffd on them (a client sends the uffd with its first bytes, as
 * Firecracker does): a peek shows them.  A read that took a prefix leaves
 * the rest without the fd; one that took it all leaves nothing.
 */
static bool read_took_nothing(struct session *s, const struct store_rec *rec)
{
	union handshake_ctl ctl;
	char c;
	struct iovec iov = { &c, 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = ctl.b,
			     .msg_controllen = sizeof(ctl.b) };

	if (rec->nbytes || s->uffd >= 0)
		return false;
	if (recvmsg(s->sock, &mh, MSG_PEEK | MSG_DONTWAIT |
		    MSG_CMSG_CLOEXEC) != 1)
		return false;
	/* The peek's copies of the fds are ours: closed. */
	return take_fds(&mh, NULL) > 0 && !(mh.msg_flags & MSG_CTRUNC);
}

/*
 * A client whose handshake the last server had accepted.  If it had begun
 * reading it, what it read (the uffd, maybe) died with it: the client is
 * killed, as any refused client that may have handed over its uffd;
 * unless that read took nothing (read_took_nothing()).
 */
static void adopt_pending(struct daemon *d, const struct store_rec *rec,
			  int fd, int uffd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	struct session *s = session_new(d, fd, rec->id, rec->t_start);

	if (!s) {
		if (uffd >= 0)
			close(uffd);
		return;
	}
	s->stored = true;
	s->uffd = uffd;
	s->nfds = uffd >= 0;
	if (rec->flags & STORE_WAS_READING && read_took_nothing(s, rec)) {
		/* Read anew, whole, when its socket polls in. */
		slog(s, "taken over: its handshake, still unread when the "
		     "server reading it died");
		return;
	}
	if (rec->flags & STORE_WAS_READING) {
		s->nfds = 1;	/* may have been handed over, to the dead server */
		refuse(d, s, "handshake cut short: the server reading it died");
		return;
	}
	slog(s, "taken over: its handshake (%u bytes read)", rec->nbytes);
	if (rec->nbytes || uffd >= 0)
		handshake_bytes(d, s, rec->bytes, rec->nbytes, 0);
}

/*
 * Supervised: the sessions a server before this one was serving, handed
 * over by the supervisor, then STORE_ADOPT_END with the last session id.
 */
void adopt_sessions(struct daemon *d)
{
	static struct store_rec rec;
	int fds[STORE_NFDS], nfds, n = 0;

	for (;;) {
		int ret = store_recv(d->store_fd, &rec, fds, &nfds);

		if (ret == -EBADMSG)
			continue;
		if (ret < 0 || rec.kind == STORE_ADOPT_END) {
			if (ret == 0 && rec.id > d->next_id)
				d->next_id = rec.id;
			break;
		}
		if (rec.kind == STORE_ADOPT && nfds == STORE_NFDS) {
			adopt_one(d, &rec, fds);
			n++;
			continue;
		}
		if (rec.kind == STORE_ADOPT_PENDING && nfds >= 1) {
			adopt_pending(d, &rec, fds[0], nfds > 1 ? fds[1] : -1);
			n++;
			continue;
		}
		while (nfds)
			close(fds[--nfds]);
	}
	if (n)
		slog(NULL, "took over %d session%s from the server before",
		     n, n == 1 ? "" : "s");
}

/*
 * SIGUSR2 from the supervisor (its SIGHUP: an upgrade): stop issuing
 * ioctls for every session and exit at once; the next server takes them
 * over from the supervisor.  Nothing is closed or unlinked.
 */
void hand_over_and_exit(struct daemon *d)
{
	for (struct session *s = d->sessions; s; s = s->next)
		if (s->engine)
			fl_engine_detach(s->engine);
	slog(NULL, "handing %d session%s over to the next server",
	     d->nsessions, d->nsessions == 1 ? "" : "s");
	_exit(0);
}

