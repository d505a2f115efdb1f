/* SPDX-License-Identifier: Apache-2.0 */
/*
 * peer_state.h - a live post-copy source's state, shared by peer.c (the
 * source vtable, open) and peer_link.c (the connections that fill it).
 */
#ifndef FAULTLINE_SOURCE_PEER_STATE_H
#define FAULTLINE_SOURCE_PEER_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "source/peer_proto.h"
#include "source/source.h"

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
	char why[256];			/* last connection error / dead reason */
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
struct timespec peer_deadline_ms(unsigned int ms);
/* Connect both links, keep them up, receive (a thread: arg is the peer). */
void *peer_manager(void *arg);
/* Dial one link (role PEER_ROLE_*): its fd, welcome filled in, or -errno. */
int peer_dial(struct peer *p, int role, struct peer_hello *welcome);

static inline uint64_t block_len(const struct peer *p, uint64_t b)
{
	uint64_t off = b * p->bsize;

	return p->base.size - off < p->bsize ? p->base.size - off : p->bsize;
}

#endif
