/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store.h - the store channel between `faultline serve`'s supervisor and
 * its server (SOCK_SEQPACKET, one record a message), and the server's side
 * of the bracket: what it tells the supervisor of each session.
 *
 * Decision: a record is protocol-neutral, a header, a counted array of
 * regions and the protocol's own blob (proto.h keep()), with any number of
 * descriptors: the supervisor keeps what a protocol asks, and parses none
 * of it.
 */
#ifndef FAULTLINE_DAEMON_STORE_H
#define FAULTLINE_DAEMON_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "faultline.h"
#include "util/sock.h"

enum store_kind {
	STORE_LISTEN = 1,	/* server -> supervisor: fds = { listener }, or
				 * none: no server listens again (one client) */
	STORE_PENDING,		/* server -> supervisor: accepted, fds = { sock } */
	STORE_READING,		/* server -> supervisor: id's handshake being read */
	STORE_DATA,		/* server -> supervisor: the handshake's state */
	STORE_SESSION,		/* server -> supervisor: a session serving */
	STORE_DROP,		/* server -> supervisor: session id ended */
	STORE_READY,		/* server -> supervisor: took over, serving */
	STORE_ADOPT,		/* supervisor -> server: serve this session */
	STORE_ADOPT_PENDING,	/* supervisor -> server: a handshake, flags */
	STORE_ADOPT_END,	/* supervisor -> server: no more; id = last id */
	STORE_WANT,		/* server -> supervisor: accept one client for
				 * the listener's protocol (proto) */
	STORE_ACCEPTED,		/* supervisor -> server: fds = { sock }, kept
				 * as pending under id < 0 until STORE_NAME */
	STORE_NAME,		/* server -> supervisor: accepted conn is id */
	STORE_KEPT,		/* supervisor -> server: session id kept (err
				 * 0), or not (-errno): serve it, or end it */
};

/*
 * STORE_ADOPT_PENDING flags: the dead server was reading it, and what it
 * read is lost (it died in the read, or the state outgrew a record).
 */
#define STORE_WAS_READING	1
/*
 * STORE_SESSION / STORE_ADOPT: a session without a socket (its connection
 * named it, or it forked): the descriptors start at STORE_UFFD.
 */
#define STORE_NO_SOCK		2
/*
 * STORE_SESSION: answer with STORE_KEPT (a server that waits for it before
 * it serves; an older one does not ask, and is never sent one).
 */
#define STORE_ACK		4

/*
 * One record at most, header included.  A SOCK_SEQPACKET message must fit
 * the sender's socket buffer: 212,992 bytes by default (wmem_default), the
 * largest message measured 212,960.  192 KiB leaves room; at 32 bytes a
 * region that is about 6,000 regions, or a blob near 192 KiB.
 */
#define STORE_REC_MAX		(192u << 10)
#define STORE_FDS_MAX		SOCK_FDS_MAX

/*
 * The descriptors of STORE_SESSION / STORE_ADOPT, in order, the protocol's
 * kept ones after them.  STORE_PENDING / STORE_ADOPT_PENDING: STORE_SOCK,
 * then the protocol's; STORE_DATA: the protocol's alone.
 */
enum { STORE_SOCK, STORE_UFFD, STORE_STATE, STORE_NFDS };

struct store_region {
	uint64_t addr, len, page_size, src_offset;
};

/*
 * One message: everything a server needs to serve a session it did not
 * accept, never more.  data[] holds nregions struct store_region, then
 * nblob bytes of the protocol's blob.
 */
struct store_rec {
	uint32_t kind;		/* enum store_kind */
	int32_t id;
	int32_t pid;		/* the socket's peer (SO_PEERCRED) */
	uint32_t uid;
	uint64_t t_start;	/* ms, CLOCK_MONOTONIC (system-wide) */
	int32_t client_pid;	/* the protocol's name for the client, or 0 */
	uint32_t flags;		/* STORE_WAS_READING, STORE_NO_SOCK */
	int32_t conn;		/* named by this connection, still under way
				 * when stored (its prefetch held), or 0;
				 * STORE_NAME: the accepted one's id < 0 */
	int32_t err;		/* STORE_KEPT: 0, or why not (-errno) */
	uint32_t nregions;
	uint32_t nblob;
	char proto[16];		/* the protocol's name (proto.h) */
	uint64_t data[];	/* 8-byte aligned */
};

static inline struct store_region *store_regions(const struct store_rec *r)
{
	return (struct store_region *)r->data;
}

static inline void *store_blob(const struct store_rec *r)
{
	return (char *)r->data + r->nregions * sizeof(struct store_region);
}

static inline size_t store_len(const struct store_rec *r)
{
	return sizeof(*r) + r->nregions * sizeof(struct store_region) +
	       r->nblob;
}

/* A zeroed record of kind with room for its payload (NULL: too large). */
struct store_rec *store_rec_new(uint32_t kind, int id, uint32_t nregions,
				uint32_t nblob);
/* Send rec (and nfds fds) as one message; 0 or -errno (-EMSGSIZE). */
int store_send(int fd, const struct store_rec *rec, const int *fds,
	       int nfds);
/*
 * Receive one message into rec (STORE_REC_MAX bytes) and its fds into f;
 * 0, -ENODATA at EOF, or -errno.  A malformed message is -EBADMSG with
 * its fds closed; a whole record whose descriptors could not all be
 * received (the receiver out of them) is -EMFILE, rec valid, fds closed.
 */
int store_recv(int fd, struct store_rec *rec, struct sock_fds *f);

/* ---- the server's side: what it says of its sessions -------------------- */

struct daemon;
struct session;

/*
 * Accepted by this server (a supervisor that does not accept): its socket
 * kept, should this server die; sent before anything else is done with it
 * (a server killed between accept() and this loses the connection, and a
 * client that had sent its uffd waits for ever).  true if kept.
 */
bool store_pending(struct daemon *d, int id, int sock, uint64_t t_start);
/* Ask the supervisor to accept one client (it answers STORE_ACCEPTED). */
void store_want(struct daemon *d);
/* The client the supervisor accepted as tmp (< 0) is session id. */
void store_name(struct daemon *d, int tmp, int id);
/* Session id ended (or never became one): no later server adopts it. */
void store_drop_id(struct daemon *d, int id);
/* Before a read of its handshake (what that read takes may be lost). */
void store_reading(struct daemon *d, struct session *s);
/* After a read: the protocol's state as it now is (keep()). */
void store_data(struct daemon *d, struct session *s);
/*
 * Serving: socket, uffd, state memfd, regions, the protocol's keep.  0 if
 * sent (with STORE_ACK when d->sup_accepts: STORE_KEPT will say if it was kept),
 * or -errno: not kept.
 */
int store_session(struct daemon *d, struct session *s,
		  const struct fl_region_desc *regs, int n);
/* Ended: no later server adopts it. */
void store_drop(struct daemon *d, struct session *s);

#endif
