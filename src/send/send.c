// SPDX-License-Identifier: Apache-2.0
/*
 * send.c - the sending side of live post-copy: serves a memory file to
 * tcp:// sources (src/source/peer.c) over the protocol in
 * source/peer_proto.h.  Above the sources, apart from the receiver: no
 * source opens it, so the sources' dispatcher (source/open.c) reaches the
 * tcp:// kind without reaching up.
 *
 * Decisions: a session is the receiver's two connections, each with its
 * own thread and its own socket, so a demand reply is written the moment
 * it is read from the file and never waits behind the stream (the socket
 * buffers are per connection).  The stream sends every block the receiver
 * does not hold and that was not sent on demand, continuing after the last
 * demanded block (the guest's locality) and wrapping, so a quiet guest
 * still gets everything.  Blocks are read with pread per block (a
 * truncated file is an ERROR for those blocks, not a crash) and all-zero
 * blocks travel as a header only.  The file's identity (dev, inode, size,
 * mtime) is taken at start and checked with fstat before each session and
 * after each block is read: a changed file is refused, never served, so a
 * receiver cannot mix two versions of it (peer_proto.h).  A session counts
 * as complete only when the receiver says it holds every block (HAVE_ALL).
 * One log line per session on stderr.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "faultline.h"
#include "format/image.h"
#include "util/error.h"
#include "source/peer_proto.h"
#include "send/send.h"
#include "util/clock.h"
#include "util/note.h"
#include "util/io.h"
#include "util/sock.h"
#include "util/size.h"
#include "util/zero.h"

#define HELLO_TIMEOUT_MS 5000
#define MAX_CONNS	256	/* connection threads at once, at most */
#define FD_RESERVE	32	/* descriptors kept for everything else */
#define ACCEPT_BACKOFF_MS 100	/* out of descriptors: wait, don't spin */

struct sender {
	const struct send_config *cfg;
	int fd;			/* the memory file */
	uint64_t size, nblocks;
	uint64_t file_id;	/* identity of the file at start (never 0) */
	uint32_t bsize;
	int done_fd;		/* eventfd: a session ended complete (--once) */
	int max_conns;		/* connection threads allowed (max_conns()) */
	pthread_mutex_t lock;	/* sessions */
	struct send_session *sessions;
	atomic_int nthreads;	/* connection threads running */
};

struct send_session {
	struct sender *snd;
	uint64_t token;
	char peer[64];
	int dfd, sfd;		/* -1 until attached; closed by the last put */
	_Atomic uint8_t *sent;	/* per block: sent here, or held there */
	_Atomic uint64_t jump;	/* stream continues here (UINT64_MAX: no) */
	atomic_bool ended;
	atomic_bool acked;	/* the receiver said HAVE_ALL */
	atomic_bool changed;	/* stopped: the file changed (logged once) */
	atomic_int refs;
	uint64_t t0;
	_Atomic uint64_t bytes, demand, stream, zero, again, held;
	_Atomic uint64_t nsent;	/* blocks marked in sent[] */
	struct send_session *next;
};

/* Where the sender's lines go (send_config's note): one sender a process. */
static struct note send_note;
#define send_log(...)	note_say(&send_note, __VA_ARGS__)

static int send_msg(struct send_session *s, int fd, uint16_t type,
		    uint16_t flags, uint64_t a, uint64_t b, const void *data,
		    uint32_t len)
{
	struct peer_hdr h = {
		.type = htole16(type), .flags = htole16(flags),
		.len = htole32(len), .a = htole64(a), .b = htole64(b),
	};
	struct iovec iov[2] = { { &h, sizeof(h) }, { (void *)data, len } };
	int ret = sock_send_iov(fd, iov, len ? 2 : 1);

	if (!ret && s)
		atomic_fetch_add(&s->bytes, sizeof(h) + len);
	return ret;
}


/* The file's identity: dev, inode, size and mtime folded to 64 bits, not 0. */
static uint64_t file_id(const struct stat *st)
{
	const uint64_t v[] = {
		(uint64_t)st->st_dev, (uint64_t)st->st_ino,
		(uint64_t)st->st_size, (uint64_t)st->st_mtim.tv_sec,
		(uint64_t)st->st_mtim.tv_nsec,
	};
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < sizeof(v) / sizeof(*v); i++) {
		h ^= v[i];
		h *= 0x100000001b3ull;
		h ^= h >> 29;
	}
	return h ? h : 1;
}

/* Is the open file still the one the sender started with? */
static bool file_unchanged(struct sender *snd)
{
	struct stat st;

	return !fstat(snd->fd, &st) && file_id(&st) == snd->file_id;
}

#define CHANGED_MSG "the sender's file changed since it started"

/* Read block b and send it on fd (DATA, or ERROR if it cannot be read). */
static int send_block(struct send_session *s, int fd, uint64_t b, char *buf)
{
	struct sender *snd = s->snd;
	uint64_t off = b * snd->bsize;
	uint32_t len = (uint32_t)(snd->size - off < snd->bsize ?
				  snd->size - off : snd->bsize);
	int ret = pread_full(snd->fd, buf, len, off);

	/*
	 * The kernel updates mtime before it changes a byte, so a block read
	 * before this check matched is from the file the session started on.
	 */
	if (!file_unchanged(snd)) {
		if (!atomic_exchange(&s->changed, true))
			send_log("session %s: %s: %s, ending it", s->peer,
			     snd->cfg->mem_file, CHANGED_MSG);
		send_msg(s, fd, PEER_ERROR, PEER_F_CHANGED, b, 0, CHANGED_MSG,
			 (uint32_t)strlen(CHANGED_MSG));
		return -ESTALE;
	}
	if (ret < 0) {
		char why[PEER_MAX_ERRMSG];
		int n = snprintf(why, sizeof(why), "%s: offset %llu: %s",
				 snd->cfg->mem_file, (unsigned long long)off,
				 ret == -EIO ? "file ends early" :
				 strerror(-ret));

		send_log("%s", why);
		return send_msg(s, fd, PEER_ERROR, 0, b, 1, why,
				(uint32_t)(n < (int)sizeof(why) ? n :
					   (int)sizeof(why) - 1));
	}
	if (is_zero(buf, len)) {
		atomic_fetch_add(&s->zero, 1);
		return send_msg(s, fd, PEER_DATA, PEER_F_ZERO, b, 0, NULL, 0);
	}
	return send_msg(s, fd, PEER_DATA, 0, b, 0, buf, len);
}

/* ---- sessions ----------------------------------------------------------- */

static void session_put(struct send_session *s)
{
	if (atomic_fetch_sub(&s->refs, 1) != 1)
		return;
	struct sender *snd = s->snd;
	uint64_t ns = now_ns() - s->t0;
	bool complete = atomic_load(&s->acked);

	send_log("session %s token %016llx: sent %llu bytes in %.3f s (%llu "
	     "blocks: %llu on demand, %llu streamed, %llu zero, %llu again; "
	     "receiver held %llu); %s",
	     s->peer, (unsigned long long)s->token,
	     (unsigned long long)atomic_load(&s->bytes), (double)ns / 1e9,
	     (unsigned long long)snd->nblocks,
	     (unsigned long long)atomic_load(&s->demand),
	     (unsigned long long)atomic_load(&s->stream),
	     (unsigned long long)atomic_load(&s->zero),
	     (unsigned long long)atomic_load(&s->again),
	     (unsigned long long)atomic_load(&s->held),
	     complete ? "complete" : atomic_load(&s->changed) ?
	     "ended: the file changed" : "ended early");
	if (complete) {
		uint64_t one = 1;

		if (write(snd->done_fd, &one, sizeof(one)) < 0) {
			/* the counter cannot overflow */
		}
	}
	if (s->dfd >= 0)
		close(s->dfd);
	if (s->sfd >= 0)
		close(s->sfd);
	free((void *)s->sent);
	free(s);
}

/* End s: both connections shut down; threads see it and put their refs. */
static void send_session_end(struct send_session *s)
{
	struct sender *snd = s->snd;

	pthread_mutex_lock(&snd->lock);
	if (!atomic_exchange(&s->ended, true)) {
		for (struct send_session **pp = &snd->sessions; *pp;
		     pp = &(*pp)->next) {
			if (*pp == s) {
				*pp = s->next;
				break;
			}
		}
		if (s->dfd >= 0)
			shutdown(s->dfd, SHUT_RDWR);
		if (s->sfd >= 0)
			shutdown(s->sfd, SHUT_RDWR);
		pthread_mutex_unlock(&snd->lock);
		session_put(s);		/* the list's reference */
		return;
	}
	pthread_mutex_unlock(&snd->lock);
}

static bool mark_sent(struct send_session *s, uint64_t b)
{
	uint8_t zero = 0;

	if (!atomic_compare_exchange_strong(&s->sent[b], &zero, 1))
		return false;
	atomic_fetch_add(&s->nsent, 1);
	return true;
}

/* Demand connection: REQ in, DATA out, until the receiver goes. */
static void serve_demand(struct send_session *s, int fd, char *buf)
{
	struct sender *snd = s->snd;

	for (;;) {
		struct peer_hdr h;

		if (recv_full(fd, &h, sizeof(h)) < 0)
			return;
		uint64_t a = le64toh(h.a), n = le64toh(h.b);

		if (le16toh(h.type) != PEER_REQ || h.len || a >= snd->nblocks ||
		    n > snd->nblocks - a) {
			send_log("session %s: bad request (type %u, %llu+%llu)",
			     s->peer, le16toh(h.type), (unsigned long long)a,
			     (unsigned long long)n);
			return;
		}
		for (uint64_t b = a; b < a + n; b++) {
			if (!mark_sent(s, b))
				atomic_fetch_add(&s->again, 1);
			atomic_fetch_add(&s->demand, 1);
			if (send_block(s, fd, b, buf) < 0)
				return;
		}
		atomic_store(&s->jump, a + n);
	}
}

/* Stream connection: every block not held and not sent yet, then DONE. */
static void serve_stream(struct send_session *s, int fd, char *buf)
{
	struct sender *snd = s->snd;
	uint64_t pos = 0, scanned = 0;

	while (!atomic_load(&s->ended)) {
		uint64_t j = atomic_exchange(&s->jump, UINT64_MAX);

		if (j != UINT64_MAX) {
			pos = j;
			scanned = 0;
		}
		if (pos >= snd->nblocks)
			pos = 0;
		if (atomic_load(&s->nsent) == snd->nblocks ||
		    scanned >= snd->nblocks) {
			if (atomic_load(&s->nsent) == snd->nblocks)
				break;
			scanned = 0;	/* a demand may have moved us: rescan */
			continue;
		}
		uint64_t b = pos++;

		scanned++;
		if (!mark_sent(s, b))
			continue;
		atomic_fetch_add(&s->stream, 1);
		if (send_block(s, fd, b, buf) < 0)
			return;
	}
	if (atomic_load(&s->ended) ||
	    send_msg(s, fd, PEER_DONE, 0, 0, 0, NULL, 0) < 0)
		return;
	/*
	 * Hold the connection until the receiver says it has every block
	 * (the session is complete) or it, or the session, ends.
	 */
	struct peer_hdr h;

	if (!recv_full(fd, &h, sizeof(h)) &&
	    le16toh(h.type) == PEER_HAVE_ALL && !h.len)
		atomic_store(&s->acked, true);
}

struct conn {
	struct sender *snd;
	int fd;
	char peer[64];
};

static void refuse_conn(int fd, const char *peer, const char *why,
		   uint16_t flags)
{
	send_log("connection from %s refused: %s", peer, why);
	send_msg(NULL, fd, PEER_ERROR, flags, 0, 0, why, (uint32_t)strlen(why));
}

static int send_welcome(struct sender *snd, struct send_session *s, int fd,
			int role)
{
	struct peer_hello w = {
		.magic = htole32(PEER_MAGIC), .version = htole16(PEER_VERSION),
		.role = htole16((uint16_t)role), .token = htole64(s->token),
		.size = htole64(snd->size), .block_size = htole32(snd->bsize),
		.file_id = htole64(snd->file_id),
	};

	return send_msg(s, fd, PEER_WELCOME, 0, 0, 0, &w, sizeof(w));
}

static struct send_session *send_session_new(struct sender *snd,
					     uint64_t token, const char *peer,
					     int dfd)
{
	struct send_session *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->sent = calloc(snd->nblocks, 1);
	if (!s->sent) {
		free(s);
		return NULL;
	}
	s->snd = snd;
	s->token = token;
	snprintf(s->peer, sizeof(s->peer), "%s", peer);
	s->dfd = dfd;
	s->sfd = -1;
	atomic_init(&s->jump, UINT64_MAX);
	atomic_init(&s->refs, 2);	/* the list's and the demand thread's */
	s->t0 = now_ns();

	/* A receiver redialing replaces its old session, if still here. */
	struct send_session *old = NULL;

	pthread_mutex_lock(&snd->lock);
	for (struct send_session *o = snd->sessions; o; o = o->next)
		if (o->token == token)
			old = o;
	if (old)
		atomic_fetch_add(&old->refs, 1);
	s->next = snd->sessions;
	snd->sessions = s;
	pthread_mutex_unlock(&snd->lock);
	if (old) {
		send_session_end(old);
		session_put(old);
	}
	return s;
}

/*
 * Attach stream connection sfd to the live session with token that has
 * none yet, in one step under the lock (two stream HELLOs racing must not
 * both attach); NULL if there is none.
 */
static struct send_session *session_attach_stream(struct sender *snd,
					     uint64_t token, int sfd)
{
	struct send_session *s;

	pthread_mutex_lock(&snd->lock);
	for (s = snd->sessions; s; s = s->next)
		if (s->token == token && s->sfd < 0 && !atomic_load(&s->ended))
			break;
	if (s) {
		atomic_fetch_add(&s->refs, 1);
		s->sfd = sfd;
	}
	pthread_mutex_unlock(&snd->lock);
	return s;
}

static void *conn_thread(void *arg)
{
	struct conn *c = arg;
	struct sender *snd = c->snd;
	int fd = c->fd;
	struct peer_hdr h;
	struct peer_hello hi = { 0 };
	struct send_session *s = NULL;
	char *buf = malloc(snd->bsize);
	uint8_t *bm = NULL;

	if (!buf)
		goto out;
	sock_tune_tcp(fd);
	sock_set_timeout(fd, SO_RCVTIMEO, HELLO_TIMEOUT_MS);
	if (recv_full(fd, &h, sizeof(h)) < 0)
		goto out;
	uint32_t len = le32toh(h.len);
	/* Magic and version first: an older receiver's hello is shorter. */
	size_t hlen = len < sizeof(hi) ? len : sizeof(hi);

	if (le16toh(h.type) != PEER_HELLO || hlen < 8 ||
	    recv_full(fd, &hi, hlen) < 0 ||
	    le32toh(hi.magic) != PEER_MAGIC) {
		send_log("connection from %s: not a faultline receiver",
			 c->peer);
		goto out;
	}
	if (le16toh(hi.version) != PEER_VERSION || len < sizeof(hi)) {
		refuse_conn(fd, c->peer, "protocol version not supported", 0);
		goto out;
	}
	if (!file_unchanged(snd)) {
		refuse_conn(fd, c->peer, CHANGED_MSG, PEER_F_CHANGED);
		goto out;
	}
	if (hi.file_id && le64toh(hi.file_id) != snd->file_id) {
		refuse_conn(fd, c->peer, "the sender serves another file "
			    "than the receiver started from", PEER_F_CHANGED);
		goto out;
	}
	uint64_t token = le64toh(hi.token);
	int role = le16toh(hi.role);
	size_t bmlen = (snd->nblocks + 7) / 8;

	if (role == PEER_ROLE_DEMAND && len == sizeof(hi)) {
		s = send_session_new(snd, token, c->peer, fd);
		if (!s)
			goto out;
		fd = -1;	/* the session closes it */
		if (send_welcome(snd, s, s->dfd, role) < 0)
			goto end;
		sock_set_timeout(s->dfd, SO_RCVTIMEO, 0);
		serve_demand(s, s->dfd, buf);
		goto end;
	}
	if (role == PEER_ROLE_DEMAND) {
		refuse_conn(fd, c->peer, "a demand hello carries no bitmap", 0);
		goto out;
	}
	if (role != PEER_ROLE_STREAM) {
		refuse_conn(fd, c->peer, "unknown role", 0);
		goto out;
	}
	if (le64toh(hi.size) != snd->size ||
	    le32toh(hi.block_size) != snd->bsize ||
	    len != sizeof(hi) + bmlen) {
		refuse_conn(fd, c->peer, "size or block size differ from the "
		       "sender's file", PEER_F_CHANGED);
		goto out;
	}
	bm = malloc(bmlen ? bmlen : 1);
	if (!bm || recv_full(fd, bm, bmlen) < 0)
		goto out;
	s = session_attach_stream(snd, token, fd);
	if (!s) {
		refuse_conn(fd, c->peer, "no demand connection for this token",
			    0);
		goto out;
	}
	fd = -1;	/* the session closes it */
	for (uint64_t b = 0; b < snd->nblocks; b++)
		if (bm[b / 8] & (1u << (b % 8)) && mark_sent(s, b))
			atomic_fetch_add(&s->held, 1);
	if (send_welcome(snd, s, s->sfd, role) < 0)
		goto end;
	sock_set_timeout(s->sfd, SO_RCVTIMEO, 0);
	if (atomic_load(&s->ended))
		shutdown(s->sfd, SHUT_RDWR);	/* ended while attaching */
	serve_stream(s, s->sfd, buf);
end:
	send_session_end(s);
	session_put(s);
out:
	if (fd >= 0)
		close(fd);
	free(bm);
	free(buf);
	free(c);
	atomic_fetch_sub(&snd->nthreads, 1);
	return NULL;
}

/* ---- listening ---------------------------------------------------------- */

/*
 * How many connections may be open at once: each holds a descriptor and a
 * thread until its receiver leaves (a demand connection may stay idle for
 * the whole migration), so anyone who can connect could otherwise take
 * every descriptor.  Over the limit a connection is refused with a
 * message; the limit leaves FD_RESERVE descriptors for the rest.
 */
static int max_conns(void)
{
	struct rlimit rl;
	rlim_t n = MAX_CONNS;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		n = rl.rlim_cur > FD_RESERVE + 4 ? rl.rlim_cur - FD_RESERVE : 4;
	return n < MAX_CONNS ? (int)n : MAX_CONNS;
}

/*
 * accept4() failed with err.  Out of descriptors or memory, the connection
 * stays queued and poll() reports it again at once: wait a little instead
 * of spinning, and say so once per episode.
 */
static void accept_failed(int err, bool *warned)
{
	if (err != EMFILE && err != ENFILE && err != ENOBUFS && err != ENOMEM)
		return;		/* ECONNABORTED and the like: next one */
	if (!*warned)
		send_log("cannot accept connections: %s; retrying every %d ms",
		     strerror(err), ACCEPT_BACKOFF_MS);
	*warned = true;
	poll(NULL, 0, ACCEPT_BACKOFF_MS);
}

/* The memory file, checked and measured for the protocol's limits. */
static int sender_open(struct sender *snd, const struct send_config *cfg)
{
	struct stat st;

	snd->bsize = cfg->block_size ? cfg->block_size : PEER_DEF_BLOCK;
	if (snd->bsize < PEER_MIN_BLOCK || snd->bsize > PEER_MAX_BLOCK ||
	    (snd->bsize & (snd->bsize - 1)))
		return fl_err(-EINVAL, "--block-size %u: must be a power of "
			      "two from 4K to 2M", snd->bsize);
	if (image_refuse(cfg->mem_file, "send", true) < 0)
		return -EINVAL;
	snd->fd = open_regular(cfg->mem_file, &st, false);
	if (snd->fd < 0)
		return snd->fd;
	snd->size = (uint64_t)st.st_size;
	snd->file_id = file_id(&st);
	snd->nblocks = (snd->size + snd->bsize - 1) / snd->bsize;
	if (!st.st_size)
		return fl_err(-EINVAL, "%s: empty", cfg->mem_file);
	if (snd->size > PEER_MAX_SIZE || snd->nblocks > PEER_MAX_BLOCKS)
		return fl_err(-EFBIG, "%s: %llu blocks of %u: more than a "
			      "receiver takes (%llu); use a larger --block-size",
			      cfg->mem_file, (unsigned long long)snd->nblocks,
			      snd->bsize, PEER_MAX_BLOCKS);
	return 0;
}

/* One connection accepted: a thread of its own, or refused past the cap. */
static void accept_conn(struct sender *snd, int lfd, bool *warned)
{
	char peer[64];
	int fd = sock_accept(lfd, SOCK_CLOEXEC, peer, sizeof(peer));
	struct conn *c;
	pthread_attr_t at;
	pthread_t t;

	if (fd < 0) {
		accept_failed(-fd, warned);
		return;
	}
	*warned = false;
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return;
	}
	c->snd = snd;
	c->fd = fd;
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	if (atomic_load(&snd->nthreads) >= snd->max_conns) {
		refuse_conn(fd, c->peer, "too many connections", 0);
		close(fd);
		free(c);
		return;
	}
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	atomic_fetch_add(&snd->nthreads, 1);
	if (pthread_create(&t, &at, conn_thread, c)) {
		atomic_fetch_sub(&snd->nthreads, 1);
		close(fd);
		free(c);
	}
	pthread_attr_destroy(&at);
}

/* End every session, and let their threads log and finish a while. */
static void end_sessions(struct sender *snd)
{
	for (;;) {
		pthread_mutex_lock(&snd->lock);
		struct send_session *s = snd->sessions;

		if (s)
			atomic_fetch_add(&s->refs, 1);
		pthread_mutex_unlock(&snd->lock);
		if (!s)
			break;
		send_session_end(s);
		session_put(s);
	}
	/* A thread stuck in a send is abandoned after 2 s. */
	for (int i = 0; i < 200 && atomic_load(&snd->nthreads); i++)
		usleep(10000);
}

int send_run(const struct send_config *cfg)
{
	struct sender snd = { .cfg = cfg, .fd = -1, .done_fd = -1 };
	sigset_t mask;
	int lfd = -1, sfd = -1, ret;
	bool warned = false;	/* accept4() failures logged */

	note_set(&send_note, cfg->note, cfg->note_arg);
	ret = sender_open(&snd, cfg);
	if (ret < 0) {
		if (snd.fd >= 0)
			close(snd.fd);
		return ret;
	}
	snd.max_conns = max_conns();
	pthread_mutex_init(&snd.lock, NULL);
	lfd = sock_listen_tcp(cfg->listen, 64);
	if (lfd < 0) {
		char why[256];

		snprintf(why, sizeof(why), "%s", fl_last_error());
		ret = fl_err(lfd, "--listen %s", why);
		goto out;
	}
	/* Signals only through the signalfd; every thread inherits the mask. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC);
	snd.done_fd = eventfd(0, EFD_CLOEXEC);
	if (sfd < 0 || snd.done_fd < 0) {
		ret = fl_err(-errno, "send: signalfd/eventfd: %m");
		goto out;
	}
	send_log("serving %s (%s, %llu block%s of %s, id %016llx) on %s",
		 cfg->mem_file, size_str(snd.size).s,
		 (unsigned long long)snd.nblocks, snd.nblocks == 1 ? "" : "s",
		 size_str(snd.bsize).s,
		 (unsigned long long)snd.file_id, cfg->listen);
	for (;;) {
		struct pollfd pfd[3] = { { lfd, POLLIN, 0 }, { sfd, POLLIN, 0 },
					 { snd.done_fd, POLLIN, 0 } };
		struct signalfd_siginfo si;
		uint64_t n;

		if (poll(pfd, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			ret = fl_err(-errno, "send: poll: %m");
			break;
		}
		if (pfd[1].revents) {
			if (read(sfd, &si, sizeof(si)) > 0)
				send_log("signal %u: stopping", si.ssi_signo);
			break;
		}
		if (pfd[2].revents && read(snd.done_fd, &n, sizeof(n)) > 0 &&
		    cfg->once)
			break;
		if (pfd[0].revents & POLLIN)
			accept_conn(&snd, lfd, &warned);
	}
	end_sessions(&snd);
out:
	if (lfd >= 0)
		close(lfd);
	if (sfd >= 0)
		close(sfd);
	/*
	 * A thread still running (detached, stuck in a send) uses snd: the
	 * process exits right after this returns, so snd.fd stays open.
	 */
	return ret;
}
