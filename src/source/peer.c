/*
 * peer.c - a live post-copy source: the memory file is on another
 * host, where `faultline send` serves it (tcp://HOST:PORT[?retry_ms=N]).
 *
 * Decisions: everything received is kept in a local anonymous mapping of
 * the file's size with one state byte per block, so a block is fetched once
 * and read() of a held block is a memcpy with no lock.  A missing block is
 * requested on the demand connection and read() waits on a condvar; the
 * bulk of the file arrives meanwhile on a second connection, the background
 * stream, so a demand reply never queues behind it (QEMU's postcopy-preempt
 * idea; the wire format is in peer_proto.h).  One thread per connection
 * receives straight into the mapping.  A dropped connection is redialed
 * (both connections, same token) and the stream resumes from the bitmap of
 * held blocks; if the sender stays unreachable for the retry window, every
 * read of a block not held fails with -EIO (the engine poisons the page):
 * never wrong data.  A read never waits longer than the retry window either
 * (a sender alive but stuck: stopped, hung disk), and a demand link with
 * requests unanswered that long is dropped and redialed.  The sender's file
 * identity from the first WELCOME must match on every reconnect: a sender
 * now serving another file (or one whose file changed) is never used again,
 * so the copy never mixes two snapshots.  Once every block is held the
 * receiver says HAVE_ALL, so the sender knows the transfer completed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <endian.h>

#include "faultline.h"
#include "util/error.h"
#include "source/peer_proto.h"
#include "util/io.h"
#include "source/impl.h"
#include "util/clock.h"

#define DEF_RETRY_MS	10000
#define DIAL_TIMEOUT_MS	1000
#define MIN_WAIT_MS	1000	/* a read waits max(retry_ms, this) */
#define DONE_POLL_MS	100	/* after DONE: how often the stream checks */
#define MAX_RUNS	64

enum { B_MISSING, B_WRITING, B_HAVE, B_FAILED };
#define BF_ZERO		(1u << 0)	/* received as PEER_F_ZERO */
#define BF_DIRTY	(1u << 1)	/* a failed receive left bytes in it */

struct peer {
	struct fl_source base;
	char host[256], port[32];
	unsigned int retry_ms;
	uint64_t token;
	uint32_t bsize;
	uint64_t nblocks;
	uint64_t file_id;		/* the sender's file, from the first WELCOME */
	char *mem;			/* the file's bytes, as received */
	_Atomic uint8_t *state;		/* B_*, per block */
	uint8_t *bflags;		/* BF_*, owned by whoever set B_WRITING */
	uint32_t *req_gen;		/* gen a REQ was sent in (lock) */

	pthread_mutex_t lock;		/* everything below */
	pthread_cond_t cond;		/* blocks arrived, link up/down, dead */
	uint32_t gen;			/* connection generation */
	bool connected, dead, stopping;
	bool changed;			/* dead because the sender's file changed */
	bool stalled;			/* the link was dropped: no answer */
	char why[160];			/* last connection error / dead reason */
	char failmsg[PEER_MAX_ERRMSG + 1];	/* sender's ERROR text */

	pthread_mutex_t wlock;		/* REQ writes; wfd under it */
	int wfd;			/* demand fd while connected, else -1 */
	int dfd, sfd;			/* current fds (lock), for shutdown */
	int first_dfd;			/* the connection open() made */

	pthread_t mgr;
	bool mgr_running;

	_Atomic uint64_t have, from_demand, from_stream, dups, requests;
	_Atomic uint64_t bytes, connects, complete_ns;
	_Atomic uint64_t demand_rx_ns;	/* last message on the demand link */
};

#define to_peer(s) ((struct peer *)(s))

/* The CLOCK_MONOTONIC time ms from now, for pthread_cond_timedwait. */
static struct timespec deadline_ms(unsigned int ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_nsec += (long)(ms % 1000) * 1000000l;
	ts.tv_sec += ms / 1000 + ts.tv_nsec / 1000000000l;
	ts.tv_nsec %= 1000000000l;
	return ts;
}

static uint64_t block_len(const struct peer *p, uint64_t b)
{
	uint64_t off = b * p->bsize;

	return p->base.size - off < p->bsize ? p->base.size - off : p->bsize;
}

static int dial_addr(const struct addrinfo *ai)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC |
			SOCK_NONBLOCK, ai->ai_protocol);
	int err = 0;
	socklen_t elen = sizeof(err);

	if (fd < 0)
		return -errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		struct pollfd pfd = { fd, POLLOUT, 0 };

		if (errno != EINPROGRESS) {
			err = errno;
			goto fail;
		}
		int n = poll(&pfd, 1, DIAL_TIMEOUT_MS);

		if (n <= 0) {
			err = n == 0 ? ETIMEDOUT : errno;
			goto fail;
		}
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen);
		if (err)
			goto fail;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	peer_tune_socket(fd);
	return fd;
fail:
	close(fd);
	return -err;
}

/*
 * Open one connection of the session and say hello.  role STREAM sends the
 * bitmap of held blocks.  On failure p->why says what happened.
 */
static int dial(struct peer *p, int role, struct peer_hello *welcome)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
	int fd = -ENOENT, ret;

	ret = getaddrinfo(p->host, p->port, &hints, &res);
	if (ret) {
		int err = ret == EAI_SYSTEM ? errno : ret == EAI_MEMORY ?
			  ENOMEM : ret == EAI_AGAIN ? EAGAIN : EHOSTUNREACH;

		snprintf(p->why, sizeof(p->why), "cannot resolve %.60s: %s",
			 p->host, gai_strerror(ret));
		return err ? -err : -EHOSTUNREACH;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		fd = dial_addr(ai);
		if (fd >= 0)
			break;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		snprintf(p->why, sizeof(p->why), "cannot connect: %s",
			 strerror(-fd));
		return fd;
	}

	size_t bmlen = role == PEER_ROLE_STREAM ? (p->nblocks + 7) / 8 : 0;
	size_t mlen = sizeof(struct peer_hdr) + sizeof(struct peer_hello) + bmlen;
	char *msg = calloc(1, mlen);
	struct peer_hdr *h = (struct peer_hdr *)msg;
	struct peer_hello *hi = (struct peer_hello *)(h + 1);
	uint8_t *bm = (uint8_t *)(hi + 1);

	if (!msg) {
		close(fd);
		return -ENOMEM;
	}
	h->type = htole16(PEER_HELLO);
	h->len = htole32((uint32_t)(sizeof(*hi) + bmlen));
	hi->magic = htole32(PEER_MAGIC);
	hi->version = htole16(PEER_VERSION);
	hi->role = htole16((uint16_t)role);
	hi->token = htole64(p->token);
	hi->size = htole64(p->base.size);
	hi->block_size = htole32(p->bsize);
	hi->file_id = htole64(p->file_id);	/* 0 until the first WELCOME */
	for (uint64_t b = 0; b < bmlen * 8 && b < p->nblocks; b++)
		if (atomic_load(&p->state[b]) == B_HAVE)
			bm[b / 8] |= (uint8_t)(1u << (b % 8));

	peer_set_timeout(fd, SO_RCVTIMEO, 2 * DIAL_TIMEOUT_MS);
	peer_set_timeout(fd, SO_SNDTIMEO, 2 * DIAL_TIMEOUT_MS);
	ret = send_full(fd, msg, mlen);
	free(msg);

	struct peer_hdr rh;
	char text[PEER_MAX_ERRMSG + 1] = "";

	if (!ret)
		ret = recv_full(fd, &rh, sizeof(rh));
	if (!ret && le16toh(rh.type) == PEER_ERROR &&
	    le32toh(rh.len) <= PEER_MAX_ERRMSG) {
		recv_full(fd, text, le32toh(rh.len));
		close(fd);
		if (le16toh(rh.flags) & PEER_F_CHANGED) {
			snprintf(p->why, sizeof(p->why),
				 "the sender's file changed");
			return -ESTALE;
		}
		snprintf(p->why, sizeof(p->why), "sender refused: %s", text);
		return -EPROTO;
	}
	if (!ret && (le16toh(rh.type) != PEER_WELCOME ||
		     le32toh(rh.len) != sizeof(*welcome)))
		ret = -EPROTO;
	if (!ret)
		ret = recv_full(fd, welcome, sizeof(*welcome));
	if (!ret && (le32toh(welcome->magic) != PEER_MAGIC ||
		     le16toh(welcome->version) != PEER_VERSION))
		ret = -EPROTO;
	if (ret) {
		snprintf(p->why, sizeof(p->why), "handshake failed: %s",
			 ret == -EPROTO ? "not a faultline sender" :
			 strerror(-ret));
		close(fd);
		return ret;
	}
	peer_set_timeout(fd, SO_RCVTIMEO, 0);
	peer_set_timeout(fd, SO_SNDTIMEO, 0);
	welcome->size = le64toh(welcome->size);
	welcome->block_size = le32toh(welcome->block_size);
	welcome->file_id = le64toh(welcome->file_id);
	return fd;
}

/* ---- receiving ---------------------------------------------------------- */

static void mark_have(struct peer *p, uint64_t b, bool demand)
{
	atomic_store_explicit(&p->state[b], B_HAVE, memory_order_release);
	atomic_fetch_add(demand ? &p->from_demand : &p->from_stream, 1);
	pthread_mutex_lock(&p->lock);
	if (atomic_fetch_add(&p->have, 1) + 1 == p->nblocks)
		atomic_store(&p->complete_ns, now_ns());
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

/* One DATA message: keep the first copy of a block, drop the others. */
static int recv_data(struct peer *p, int fd, const struct peer_hdr *h,
		     bool demand, char *scratch)
{
	uint64_t b = h->a;
	uint32_t len = h->len;
	bool zero = h->flags & PEER_F_ZERO;

	if (b >= p->nblocks || (zero ? len != 0 : len != block_len(p, b)))
		return -EPROTO;
	uint8_t expect = B_MISSING;

	if (!atomic_compare_exchange_strong(&p->state[b], &expect, B_WRITING)) {
		atomic_fetch_add(&p->dups, 1);
		return len ? recv_full(fd, scratch, len) : 0;
	}
	char *dst = p->mem + b * p->bsize;
	int ret = 0;

	if (zero) {
		if (p->bflags[b] & BF_DIRTY)
			memset(dst, 0, block_len(p, b));
		p->bflags[b] = BF_ZERO;
	} else {
		p->bflags[b] = BF_DIRTY;
		ret = recv_full(fd, dst, len);
		if (ret) {
			atomic_store(&p->state[b], B_MISSING);
			return ret;
		}
		p->bflags[b] = 0;
		atomic_fetch_add(&p->bytes, len);
	}
	mark_have(p, b, demand);
	return 0;
}

/* The sender cannot produce [a, a+b) (b == 0: anything at all). */
static int recv_error(struct peer *p, int fd, const struct peer_hdr *h)
{
	char text[PEER_MAX_ERRMSG + 1] = "";

	if (h->len > PEER_MAX_ERRMSG || recv_full(fd, text, h->len))
		return -EPROTO;
	pthread_mutex_lock(&p->lock);
	snprintf(p->failmsg, sizeof(p->failmsg), "%s", text);
	if (h->flags & PEER_F_CHANGED) {
		p->dead = p->changed = true;
		snprintf(p->why, sizeof(p->why), "the sender's file changed");
	} else if (!h->b) {
		p->dead = true;
		snprintf(p->why, sizeof(p->why), "sender failed: %s", text);
	}
	/* [a, a+b) clipped to the file; a hostile count must not wrap. */
	uint64_t end = h->a >= p->nblocks ? h->a :
		       h->b > p->nblocks - h->a ? p->nblocks : h->a + h->b;

	for (uint64_t b = h->a; b < end; b++) {
		uint8_t expect = B_MISSING;

		atomic_compare_exchange_strong(&p->state[b], &expect, B_FAILED);
	}
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	return h->b && !(h->flags & PEER_F_CHANGED) ? 0 : -EPROTO;
}

struct link {
	struct peer *p;
	int dfd, sfd;
	int ret;
};

static bool complete(struct peer *p)
{
	return atomic_load(&p->have) == p->nblocks;
}

/*
 * Every block is held and the stream said DONE: tell the sender (HAVE_ALL,
 * so it counts the session complete), then wait for it to close, so that
 * our close cannot reset the connection before it has read that.
 */
static void say_have_all(struct peer *p, int fd, char *scratch)
{
	struct peer_hdr h = { .type = htole16(PEER_HAVE_ALL) };

	if (send_full(fd, &h, sizeof(h)) < 0)
		return;
	shutdown(fd, SHUT_WR);
	peer_set_timeout(fd, SO_RCVTIMEO, 2 * DIAL_TIMEOUT_MS);
	while (recv(fd, scratch, p->bsize, 0) > 0)
		;
}

/*
 * Receive on one connection until it fails, the source stops, or every
 * block is held (the stream: and DONE was seen, then HAVE_ALL is sent).
 * Returns 1 when complete, else the error.
 */
static int receive(struct peer *p, int fd, bool demand)
{
	char *scratch = malloc(p->bsize);
	bool done = false;
	int ret = 0;

	if (!scratch)
		return -ENOMEM;
	for (;;) {
		struct peer_hdr h;

		if (complete(p) && (demand || done))
			break;
		ret = recv_full(fd, &h, sizeof(h));
		/* After DONE nothing more comes: poll for the demand link. */
		if (ret == -ETIMEDOUT && done)
			continue;
		if (ret)
			break;
		if (demand)
			atomic_store(&p->demand_rx_ns, now_ns());
		h.type = le16toh(h.type);
		h.flags = le16toh(h.flags);
		h.len = le32toh(h.len);
		h.a = le64toh(h.a);
		h.b = le64toh(h.b);
		if (h.type == PEER_DATA) {
			ret = recv_data(p, fd, &h, demand, scratch);
		} else if (h.type == PEER_ERROR) {
			ret = recv_error(p, fd, &h);
		} else if (h.type == PEER_DONE && !h.len && !demand) {
			done = true;
			peer_set_timeout(fd, SO_RCVTIMEO, DONE_POLL_MS);
			ret = 0;
		} else {
			ret = -EPROTO;
		}
		if (ret)
			break;
	}
	if (!demand && done && complete(p))
		say_have_all(p, fd, scratch);
	free(scratch);
	if (complete(p))
		return 1;
	return ret;
}

static void *demand_thread(void *arg)
{
	struct link *l = arg;

	l->ret = receive(l->p, l->dfd, true);
	if (l->ret != 1)	/* complete: the stream ends itself after DONE */
		shutdown(l->sfd, SHUT_RDWR);	/* wakes the stream receiver */
	return NULL;
}

static void sleep_ms(struct peer *p, unsigned int ms)
{
	struct timespec ts = deadline_ms(ms);

	pthread_mutex_lock(&p->lock);
	if (!p->stopping)
		pthread_cond_timedwait(&p->cond, &p->lock, &ts);
	pthread_mutex_unlock(&p->lock);
}

/* Serve one connected session until it ends; 1 when complete. */
static int run_link(struct peer *p, int dfd, int sfd)
{
	struct link l = { p, dfd, sfd, 0 };
	pthread_t t;
	int ret;

	/* A stuck sender: REQ writes give up too (then the link redials). */
	peer_set_timeout(dfd, SO_SNDTIMEO,
			 p->retry_ms > MIN_WAIT_MS ? p->retry_ms : MIN_WAIT_MS);
	atomic_store(&p->demand_rx_ns, now_ns());
	pthread_mutex_lock(&p->wlock);
	p->wfd = dfd;
	pthread_mutex_unlock(&p->wlock);
	pthread_mutex_lock(&p->lock);
	p->dfd = dfd;
	p->sfd = sfd;
	p->gen++;
	p->connected = true;
	p->stalled = false;
	atomic_fetch_add(&p->connects, 1);
	pthread_cond_broadcast(&p->cond);	/* waiters re-request */
	bool stop = p->stopping;
	pthread_mutex_unlock(&p->lock);

	if (stop || pthread_create(&t, NULL, demand_thread, &l)) {
		ret = -ECANCELED;
		shutdown(dfd, SHUT_RDWR);
	} else {
		ret = receive(p, sfd, false);
		shutdown(dfd, SHUT_RDWR);	/* wakes the demand receiver */
		pthread_join(t, NULL);
		if (l.ret == 1)
			ret = 1;
		else if (ret != 1 && ret != -ECONNRESET && l.ret)
			ret = l.ret;
	}
	pthread_mutex_lock(&p->lock);
	p->connected = false;
	p->dfd = p->sfd = -1;
	if (ret < 0 && !p->dead)
		snprintf(p->why, sizeof(p->why), "connection lost: %s",
			 p->stalled ? "the sender stopped answering" :
			 ret == -ECONNRESET ? "closed by the sender" :
			 strerror(-ret));
	pthread_mutex_unlock(&p->lock);
	pthread_mutex_lock(&p->wlock);
	p->wfd = -1;
	pthread_mutex_unlock(&p->wlock);
	close(dfd);
	close(sfd);
	return ret;
}

/* Keeps the session connected: dials, receives, redials, gives up. */
static void *manager(void *arg)
{
	struct peer *p = arg;
	int dfd = p->first_dfd;
	uint64_t down_since = now_ns();
	unsigned int backoff = 50;

	p->first_dfd = -1;
	for (;;) {
		pthread_mutex_lock(&p->lock);
		bool stop = p->stopping || p->dead;
		pthread_mutex_unlock(&p->lock);
		if (stop || atomic_load(&p->have) == p->nblocks)
			break;

		struct peer_hello w = { .size = p->base.size,
					.block_size = p->bsize };
		int sfd = -1;

		if (dfd < 0)
			dfd = dial(p, PEER_ROLE_DEMAND, &w);
		if (dfd >= 0)
			sfd = dial(p, PEER_ROLE_STREAM, &w);
		/*
		 * Another file (or this one changed): never mix the two.  No
		 * DATA was read on these connections yet.
		 */
		if (dfd == -ESTALE || sfd == -ESTALE ||
		    (sfd >= 0 && (w.size != p->base.size ||
				  w.block_size != p->bsize ||
				  w.file_id != p->file_id))) {
			if (sfd >= 0)
				close(sfd);
			if (dfd >= 0)
				close(dfd);
			dfd = -1;
			pthread_mutex_lock(&p->lock);
			snprintf(p->why, sizeof(p->why),
				 "the sender's file changed");
			p->dead = p->changed = true;
			pthread_mutex_unlock(&p->lock);
			break;
		}
		if (sfd >= 0) {
			if (run_link(p, dfd, sfd) == 1)
				break;
			dfd = -1;
			down_since = now_ns();
			backoff = 50;
			continue;
		}
		if (dfd >= 0)
			close(dfd);
		dfd = -1;
		if (now_ns() - down_since >= p->retry_ms * 1000000ull) {
			pthread_mutex_lock(&p->lock);
			p->dead = true;
			char why[sizeof(p->why)];

			snprintf(why, sizeof(why), "%s", p->why);
			snprintf(p->why, sizeof(p->why),
				 "sender unreachable for %u ms (%.100s)",
				 p->retry_ms, why);
			pthread_mutex_unlock(&p->lock);
			break;
		}
		sleep_ms(p, backoff);
		backoff = backoff * 2 > 500 ? 500 : backoff * 2;
	}
	if (dfd >= 0)
		close(dfd);
	pthread_mutex_lock(&p->lock);
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* ---- the source vtable -------------------------------------------------- */

/* Send REQs for runs (under wlock, never to a stale fd). */
static void send_reqs(struct peer *p, struct peer_hdr *reqs, int n,
		      uint32_t gen)
{
	pthread_mutex_lock(&p->wlock);
	pthread_mutex_lock(&p->lock);
	bool same = p->gen == gen && p->connected;
	pthread_mutex_unlock(&p->lock);
	if (same && p->wfd >= 0) {
		if (send_full(p->wfd, reqs, sizeof(*reqs) * (size_t)n) < 0)
			shutdown(p->wfd, SHUT_RDWR);	/* receivers redial */
		else
			atomic_fetch_add(&p->requests, (uint64_t)n);
	}
	pthread_mutex_unlock(&p->wlock);
}

static bool held(struct peer *p, uint64_t first, uint64_t end)
{
	for (uint64_t b = first; b < end; b++)
		if (atomic_load_explicit(&p->state[b], memory_order_acquire) !=
		    B_HAVE)
			return false;
	return true;
}

/*
 * Make sure blocks [first, end) are held: request the missing ones not yet
 * requested on this connection, and (if wait) sleep until they arrive.
 */
static int demand_blocks(struct peer *p, uint64_t first, uint64_t end, bool wait)
{
	struct peer_hdr reqs[MAX_RUNS];
	unsigned int wait_ms = p->retry_ms > MIN_WAIT_MS ? p->retry_ms :
			       MIN_WAIT_MS;
	struct timespec until = deadline_ms(wait_ms);
	int ret = 0;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		bool missing = false, failed = false;
		int n = 0;

		for (uint64_t b = first; b < end; b++) {
			uint8_t st = atomic_load(&p->state[b]);

			if (st == B_HAVE)
				continue;
			if (st == B_FAILED) {
				failed = true;
				break;
			}
			missing = true;
			if (!p->connected || p->req_gen[b] == p->gen)
				continue;
			if (n && le64toh(reqs[n - 1].a) +
				 le64toh(reqs[n - 1].b) == b) {
				reqs[n - 1].b = htole64(le64toh(reqs[n - 1].b)
							+ 1);
			} else if (n < MAX_RUNS) {
				reqs[n++] = (struct peer_hdr){
					.type = htole16(PEER_REQ),
					.a = htole64(b), .b = htole64(1) };
			} else {
				continue;
			}
			p->req_gen[b] = p->gen;
		}
		if (failed) {
			ret = fl_err(-EIO, "%s: the sender cannot read offset "
				     "%llu: %s", p->base.desc,
				     (unsigned long long)first * p->bsize,
				     p->failmsg);
			break;
		}
		if (!missing)
			break;
		if (n) {
			uint32_t gen = p->gen;

			pthread_mutex_unlock(&p->lock);
			send_reqs(p, reqs, n, gen);
			pthread_mutex_lock(&p->lock);
			continue;
		}
		if (p->changed) {
			ret = fl_err(-EIO, "%s: the sender's file changed; "
				     "offset %llu was not received before",
				     p->base.desc,
				     (unsigned long long)first * p->bsize);
			break;
		}
		if (p->dead || p->stopping) {
			ret = fl_err(-EIO, "%s: offset %llu not received: %s",
				     p->base.desc,
				     (unsigned long long)first * p->bsize,
				     p->stopping ? "source closed" : p->why);
			break;
		}
		if (!wait)
			break;
		if (pthread_cond_timedwait(&p->cond, &p->lock, &until) !=
		    ETIMEDOUT)
			continue;
		if (held(p, first, end))
			break;
		/*
		 * Link down: the manager gives up retry_ms after it went
		 * down, within one more dial at most; that answer is better.
		 */
		if (!p->connected) {
			until = deadline_ms(DIAL_TIMEOUT_MS);
			continue;
		}
		/*
		 * Alive but stuck (stopped, hung disk)?  Nothing on the demand
		 * link for the whole window: drop it, the manager redials (and
		 * gives up if the sender does not answer that either).
		 */
		if (now_ns() - atomic_load(&p->demand_rx_ns) >=
		    wait_ms * 1000000ull) {
			p->stalled = true;
			if (p->dfd >= 0)
				shutdown(p->dfd, SHUT_RDWR);
			if (p->sfd >= 0)
				shutdown(p->sfd, SHUT_RDWR);
		}
		ret = fl_err(-EIO, "%s: offset %llu not received within %u ms: "
			     "the sender does not answer", p->base.desc,
			     (unsigned long long)first * p->bsize, wait_ms);
		break;
	}
	pthread_mutex_unlock(&p->lock);
	return ret;
}

static int peer_read(struct fl_source *s, void *buf, size_t len, uint64_t off)
{
	struct peer *p = to_peer(s);

	if (off > s->size || len > s->size - off)
		return -ERANGE;
	if (!len)
		return 0;
	uint64_t first = off / p->bsize, end = (off + len - 1) / p->bsize + 1;

	if (!held(p, first, end)) {
		int ret = demand_blocks(p, first, end, true);

		if (ret < 0)
			return ret;
	}
	memcpy(buf, p->mem + off, len);
	return 0;
}

static bool peer_hole(struct fl_source *s, uint64_t off, size_t len)
{
	struct peer *p = to_peer(s);

	if (!len || off > s->size || len > s->size - off)
		return false;
	uint64_t first = off / p->bsize, end = (off + len - 1) / p->bsize + 1;

	if (!held(p, first, end))
		return false;
	for (uint64_t b = first; b < end; b++)
		if (!(p->bflags[b] & BF_ZERO))
			return false;
	return true;
}

static void peer_hint(struct fl_source *s, uint64_t off, size_t len)
{
	struct peer *p = to_peer(s);

	if (!len || off > s->size || len > s->size - off)
		return;
	uint64_t first = off / p->bsize, end = (off + len - 1) / p->bsize + 1;

	if (!held(p, first, end))
		demand_blocks(p, first, end, false);
}

static void peer_destroy(struct fl_source *s)
{
	struct peer *p = to_peer(s);

	pthread_mutex_lock(&p->lock);
	p->stopping = true;
	if (p->dfd >= 0)
		shutdown(p->dfd, SHUT_RDWR);
	if (p->sfd >= 0)
		shutdown(p->sfd, SHUT_RDWR);
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	if (p->mgr_running)
		pthread_join(p->mgr, NULL);
	if (p->first_dfd >= 0)
		close(p->first_dfd);
	if (p->mem)
		munmap(p->mem, p->base.size);
	free((void *)p->state);
	free(p->bflags);
	free(p->req_gen);
	pthread_mutex_destroy(&p->lock);
	pthread_mutex_destroy(&p->wlock);
	pthread_cond_destroy(&p->cond);
	free(p);
}

static const struct fl_source_ops peer_ops = {
	.name = "peer",
	.read = peer_read,
	.hole = peer_hole,
	.hint = peer_hint,
	.destroy = peer_destroy,
};

int source_peer_stats(struct fl_source *s, struct peer_stats *out)
{
	struct peer *p = to_peer(s);

	if (!s || s->ops != &peer_ops)
		return -EINVAL;
	*out = (struct peer_stats){
		.size = s->size, .block_size = p->bsize,
		.nblocks = p->nblocks,
		.blocks_have = atomic_load(&p->have),
		.blocks_demand = atomic_load(&p->from_demand),
		.blocks_stream = atomic_load(&p->from_stream),
		.dups = atomic_load(&p->dups),
		.requests = atomic_load(&p->requests),
		.bytes_received = atomic_load(&p->bytes),
		.connects = atomic_load(&p->connects),
		.complete_ns = atomic_load(&p->complete_ns),
	};
	pthread_mutex_lock(&p->lock);
	out->dead = p->dead;
	out->changed = p->changed;
	pthread_mutex_unlock(&p->lock);
	return 0;
}

/* "tcp://HOST:PORT[?retry_ms=N]", HOST may be [v6]. */
static int parse_spec(struct peer *p, const char *spec)
{
	const char *h = spec + strlen("tcp://"), *q = strchr(h, '?');
	size_t hl = q ? (size_t)(q - h) : strlen(h);
	char hp[sizeof(p->host) + sizeof(p->port)];

	if (!hl || hl >= sizeof(hp))
		return -EINVAL;
	memcpy(hp, h, hl);
	hp[hl] = 0;
	char *colon = strrchr(hp, ':');

	if (!colon || !colon[1] || colon == hp)
		return -EINVAL;
	*colon = 0;
	char *host = hp;

	if (*host == '[') {
		size_t n = strlen(host);

		if (n < 3 || host[n - 1] != ']')
			return -EINVAL;
		host[n - 1] = 0;
		host++;
	}
	char *end;
	unsigned long port = strtoul(colon + 1, &end, 10);

	if (*end || !port || port > 65535 || strlen(host) >= sizeof(p->host))
		return -EINVAL;
	snprintf(p->host, sizeof(p->host), "%s", host);
	snprintf(p->port, sizeof(p->port), "%lu", port);
	p->retry_ms = DEF_RETRY_MS;
	if (q) {
		unsigned long v;

		if (strncmp(q + 1, "retry_ms=", 9))
			return -EINVAL;
		v = strtoul(q + 10, &end, 10);
		if (*end || !q[10] || v > 24ul * 3600 * 1000)
			return -EINVAL;
		p->retry_ms = (unsigned int)v;
	}
	return 0;
}

int source_peer_open(const char *spec, struct fl_source **out)
{
	struct peer *p = calloc(1, sizeof(*p));
	struct peer_hello w;
	int fd, ret;

	if (!p)
		return -ENOMEM;
	if (parse_spec(p, spec) < 0) {
		free(p);
		return fl_err(-EINVAL, "%s: expected tcp://HOST:PORT"
			      "[?retry_ms=N]", spec);
	}
	p->first_dfd = p->dfd = p->sfd = p->wfd = -1;
	pthread_condattr_t ca;

	pthread_mutex_init(&p->lock, NULL);
	pthread_mutex_init(&p->wlock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (getrandom(&p->token, sizeof(p->token), 0) != sizeof(p->token))
		p->token = now_ns() ^ ((uint64_t)getpid() << 32);
	source_init(&p->base, &peer_ops, 0, spec);
	if (strchr(p->base.desc, '?'))	/* options are not its name */
		*strchr(p->base.desc, '?') = 0;

	/* The first connection tells the size; retried like any other. */
	uint64_t t0 = now_ns();
	unsigned int backoff = 50;

	while ((fd = dial(p, PEER_ROLE_DEMAND, &w)) < 0) {
		if (now_ns() - t0 >= p->retry_ms * 1000000ull ||
		    fd == -EPROTO || fd == -ESTALE) {
			ret = fl_err(fd, "%s: %s", p->base.desc, p->why);
			goto fail;
		}
		usleep(backoff * 1000);
		backoff = backoff * 2 > 500 ? 500 : backoff * 2;
	}
	if (!w.size || !w.file_id || w.block_size < PEER_MIN_BLOCK ||
	    w.block_size > PEER_MAX_BLOCK ||
	    (w.block_size & (w.block_size - 1))) {
		close(fd);
		ret = fl_err(-EPROTO, "%s: sender offers size %llu, block "
			     "size %u: not servable", p->base.desc,
			     (unsigned long long)w.size, w.block_size);
		goto fail;
	}
	if (w.size > PEER_MAX_SIZE ||
	    (w.size + w.block_size - 1) / w.block_size > PEER_MAX_BLOCKS) {
		close(fd);
		ret = fl_err(-EFBIG, "%s: sender offers %llu bytes in blocks "
			     "of %u: more than a receiver takes (%llu blocks, "
			     "%llu TiB)", p->base.desc,
			     (unsigned long long)w.size, w.block_size,
			     PEER_MAX_BLOCKS, PEER_MAX_SIZE >> 40);
		goto fail;
	}
	p->first_dfd = fd;
	p->file_id = w.file_id;
	p->base.size = w.size;
	p->bsize = w.block_size;
	p->nblocks = (w.size + w.block_size - 1) / w.block_size;
	p->mem = mmap(NULL, w.size, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	p->state = calloc(p->nblocks, 1);
	p->bflags = calloc(p->nblocks, 1);
	p->req_gen = calloc(p->nblocks, sizeof(*p->req_gen));
	if (p->mem == MAP_FAILED) {
		p->mem = NULL;
		ret = fl_err(-ENOMEM, "%s: cannot map %llu bytes for the "
			     "received copy", p->base.desc,
			     (unsigned long long)w.size);
		goto fail;
	}
	if (!p->state || !p->bflags || !p->req_gen) {
		ret = fl_err(-ENOMEM, "%s: no memory for the state of %llu "
			     "blocks", p->base.desc,
			     (unsigned long long)p->nblocks);
		goto fail;
	}
	ret = pthread_create(&p->mgr, NULL, manager, p);
	if (ret) {
		ret = fl_err(-ret, "%s: cannot start the receiver thread",
			     p->base.desc);
		goto fail;
	}
	p->mgr_running = true;
	*out = &p->base;
	return 0;
fail:
	peer_destroy(&p->base);
	return ret;
}
