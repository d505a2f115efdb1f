// SPDX-License-Identifier: Apache-2.0
/*
 * peer_link.c - the connections of a live post-copy source (peer.c): dial
 * the sender, receive blocks into the mapping on the demand link and the
 * background stream, redial when a link drops, give up after the retry
 * window (the protocol is peer_proto.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
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
#include "util/sock.h"
#include "source/impl.h"
#include "source/peer_state.h"
#include "util/clock.h"

/* The CLOCK_MONOTONIC time ms from now, for pthread_cond_timedwait. */
struct timespec peer_deadline_ms(unsigned int ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_nsec += (long)(ms % 1000) * 1000000l;
	ts.tv_sec += ms / 1000 + ts.tv_nsec / 1000000000l;
	ts.tv_nsec %= 1000000000l;
	return ts;
}


/* The sender's words, for our log: ASCII only (no terminal escapes). */
static void printable(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
			*s = '?';
}

/*
 * Open one connection of the session and say hello.  role STREAM sends the
 * bitmap of held blocks.  On failure p->why says what happened.
 */
int peer_dial(struct peer *p, int role, struct peer_hello *welcome)
{
	int fd = sock_connect_tcp(p->host, p->port, DIAL_TIMEOUT_MS, p->why,
				  sizeof(p->why)), ret;

	if (fd < 0)
		return fd;
	sock_tune_tcp(fd);

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

	sock_set_timeout(fd, SO_RCVTIMEO, 2 * DIAL_TIMEOUT_MS);
	sock_set_timeout(fd, SO_SNDTIMEO, 2 * DIAL_TIMEOUT_MS);
	ret = send_full(fd, msg, mlen);
	free(msg);

	struct peer_hdr rh;
	char text[PEER_MAX_ERRMSG + 1] = "";

	if (!ret)
		ret = recv_full(fd, &rh, sizeof(rh));
	if (!ret && le16toh(rh.type) == PEER_ERROR &&
	    le32toh(rh.len) <= PEER_MAX_ERRMSG) {
		recv_full(fd, text, le32toh(rh.len));
		printable(text);
		close(fd);
		if (le16toh(rh.flags) & PEER_F_CHANGED) {
			snprintf(p->why, sizeof(p->why),
				 "the sender's file changed");
			return -ESTALE;
		}
		snprintf(p->why, sizeof(p->why), "sender refused: %.*s",
			 PEER_MAX_ERRMSG, text);
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
	sock_set_timeout(fd, SO_RCVTIMEO, 0);
	sock_set_timeout(fd, SO_SNDTIMEO, 0);
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
	printable(text);
	pthread_mutex_lock(&p->lock);
	snprintf(p->failmsg, sizeof(p->failmsg), "%s", text);
	if (h->flags & PEER_F_CHANGED) {
		p->dead = p->changed = true;
		snprintf(p->why, sizeof(p->why), "the sender's file changed");
	} else if (!h->b) {
		p->dead = true;
		snprintf(p->why, sizeof(p->why), "sender failed: %.*s",
			 PEER_MAX_ERRMSG, text);
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
	sock_set_timeout(fd, SO_RCVTIMEO, 2 * DIAL_TIMEOUT_MS);
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
			sock_set_timeout(fd, SO_RCVTIMEO, DONE_POLL_MS);
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
	struct timespec ts = peer_deadline_ms(ms);

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
	sock_set_timeout(dfd, SO_SNDTIMEO,
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
void *peer_manager(void *arg)
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
			dfd = peer_dial(p, PEER_ROLE_DEMAND, &w);
		if (dfd >= 0)
			sfd = peer_dial(p, PEER_ROLE_STREAM, &w);
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
		source_note(&p->base, "%s: %s; redialling for up to %u s",
			    p->base.desc, p->why, p->retry_ms / 1000);
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

