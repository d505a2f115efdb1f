// SPDX-License-Identifier: Apache-2.0
/*
 * peer.c - a live post-copy source: the memory file is on another host,
 * where `faultline send` serves it (tcp://HOST:PORT[?retry_ms=N]).  This
 * file is the source vtable and open; peer_link.c keeps the connections.
 *
 * Decisions: everything received is kept in a local anonymous mapping of
 * the file's size with one state byte per block, so a block is fetched
 * once and read() of a held block is a memcpy with no lock; a missing block
 * is requested on the demand connection while the bulk arrives on the
 * background stream (the design, with reconnects and the sender's file
 * identity, in docs/architecture.md).  Never wrong data: a block the
 * sender cannot give in the retry window fails with -EIO.
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
#include "util/sock.h"
#include "source/impl.h"
#include "source/peer_state.h"
#include "util/clock.h"

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
	struct timespec until = peer_deadline_ms(wait_ms);
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
		 * Link down: the peer_manager gives up retry_ms after it went
		 * down, within one more dial at most; that answer is better.
		 */
		if (!p->connected) {
			until = peer_deadline_ms(DIAL_TIMEOUT_MS);
			continue;
		}
		/*
		 * Alive but stuck (stopped, hung disk)?  Nothing on the demand
		 * link for the whole window: drop it, the peer_manager redials (and
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

#define PEER_SPEC_FORM	"expected tcp://HOST:PORT[?retry_ms=N]"

/*
 * "tcp://HOST:PORT[?retry_ms=N]", HOST may be [v6]: 0, or -EINVAL with
 * the error saying what is wrong.
 */
static int parse_spec(struct peer *p, const char *spec)
{
	const char *h = spec + strlen("tcp://"), *q = strchr(h, '?');
	size_t hl = q ? (size_t)(q - h) : strlen(h);
	char hp[sizeof(p->host) + sizeof(p->port)], why[300], *end;
	unsigned long v;

	if (!hl || hl >= sizeof(hp))
		return fl_err(-EINVAL, "%s: %s", spec, PEER_SPEC_FORM);
	memcpy(hp, h, hl);
	hp[hl] = 0;
	if (sock_split_hostport(hp, p->host, sizeof(p->host), p->port,
				sizeof(p->port)) < 0) {
		snprintf(why, sizeof(why), "%s", fl_last_error());
		return fl_err(-EINVAL, "tcp://%s", why);
	}
	if (!p->host[0])
		return fl_err(-EINVAL, "%s: no host; %s", spec, PEER_SPEC_FORM);
	p->retry_ms = DEF_RETRY_MS;
	if (!q)
		return 0;
	if (strncmp(q + 1, "retry_ms=", 9) ||
	    (v = strtoul(q + 10, &end, 10), *end) || !q[10] ||
	    v > 24ul * 3600 * 1000)
		return fl_err(-EINVAL, "%s: %s (N: milliseconds, at most a "
			      "day)", spec, PEER_SPEC_FORM);
	p->retry_ms = (unsigned int)v;
	return 0;
}

int source_peer_check(const char *spec)
{
	struct peer *p = calloc(1, sizeof(*p));
	int ret = p ? parse_spec(p, spec) : -ENOMEM;

	free(p);
	return ret;
}

int source_peer_open(const char *spec, const struct fl_source_opts *o,
		     struct fl_source **out)
{
	struct peer *p = calloc(1, sizeof(*p));
	struct peer_hello w;
	int fd, ret;

	if (!p)
		return -ENOMEM;
	if (parse_spec(p, spec) < 0) {
		free(p);
		return -EINVAL;
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
	source_set_note(&p->base, o);
	if (strchr(p->base.desc, '?'))	/* options are not its name */
		*strchr(p->base.desc, '?') = 0;

	/* The first connection tells the size; retried like any other. */
	uint64_t t0 = now_ns();
	unsigned int backoff = 50;

	while ((fd = peer_dial(p, PEER_ROLE_DEMAND, &w)) < 0) {
		if (now_ns() - t0 >= p->retry_ms * 1000000ull ||
		    fd == -EPROTO || fd == -ESTALE) {
			ret = fl_err(fd, "%s: %s", p->base.desc, p->why);
			goto fail;
		}
		source_note(&p->base, "%s: %s; retrying for up to %u s",
			    p->base.desc, p->why, p->retry_ms / 1000);
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
	ret = pthread_create(&p->mgr, NULL, peer_manager, p);
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
