/* SPDX-License-Identifier: Apache-2.0 */
/*
 * supchan.h - the supervisor channel between `faultline serve`'s supervisor and
 * its server (SOCK_SEQPACKET, one record a message), and the server's side
 * of the bracket: what it tells the supervisor of each session.
 *
 * Decision: a record is protocol-neutral, a header, a counted array of
 * regions and the protocol's own blob (proto.h keep()), with any number of
 * descriptors: the supervisor keeps what a protocol asks, and parses none
 * of it.
 */
#ifndef FAULTLINE_DAEMON_SUPCHAN_H
#define FAULTLINE_DAEMON_SUPCHAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "faultline.h"
#include "util/sock.h"

enum sup_kind {
	SUP_LISTEN = 1,	/* server -> supervisor: fds = { listener }, or
				 * none: no server listens again (one client) */
	SUP_PENDING,		/* server -> supervisor: accepted, fds = { sock } */
	SUP_READING,		/* server -> supervisor: id's handshake being read */
	SUP_DATA,		/* server -> supervisor: the handshake's state */
	SUP_SESSION,		/* server -> supervisor: a session serving */
	SUP_DROP,		/* server -> supervisor: session id ended */
	SUP_READY,		/* server -> supervisor: took over, serving */
	SUP_ADOPT,		/* supervisor -> server: serve this session */
	SUP_ADOPT_PENDING,	/* supervisor -> server: a handshake, flags */
	SUP_ADOPT_END,	/* supervisor -> server: no more; id = last id */
	SUP_WANT,		/* server -> supervisor: accept one client for
				 * the listener's protocol (proto) */
	SUP_ACCEPTED,		/* supervisor -> server: fds = { sock }, kept
				 * as pending under id < 0 until SUP_NAME */
	SUP_NAME,		/* server -> supervisor: accepted conn is id */
	SUP_KEPT,		/* supervisor -> server: session id kept (err
				 * 0), or not (-errno): serve it, or end it */
};

/*
 * SUP_ADOPT_PENDING flags: the dead server was reading it, and what it
 * read is lost (it died in the read, or the state outgrew a record).
 */
#define SUP_WAS_READING	1
/*
 * SUP_SESSION / SUP_ADOPT: a session without a socket (its connection
 * named it, or it forked): the descriptors start at SUP_UFFD.
 */
#define SUP_NO_SOCK		2
/*
 * SUP_SESSION: answer with SUP_KEPT (a server that waits for it before
 * it serves; an older one does not ask, and is never sent one).
 */
#define SUP_ACK		4

/*
 * One record at most, header included.  A SOCK_SEQPACKET message must fit
 * the sender's socket buffer: 212,992 bytes by default (wmem_default), the
 * largest message measured 212,960.  192 KiB leaves room; at 32 bytes a
 * region that is about 6,000 regions, or a blob near 192 KiB.
 */
#define SUP_REC_MAX		(192u << 10)
#define SUP_FDS_MAX		SOCK_FDS_MAX

/*
 * The descriptors of SUP_SESSION / SUP_ADOPT, in order, the protocol's
 * kept ones after them.  SUP_PENDING / SUP_ADOPT_PENDING: SUP_SOCK,
 * then the protocol's; SUP_DATA: the protocol's alone.
 */
enum { SUP_SOCK, SUP_UFFD, SUP_STATE, SUP_NFDS };

struct sup_region {
	uint64_t addr, len, page_size, src_offset;
};

/*
 * One message: everything a server needs to serve a session it did not
 * accept, never more.  data[] holds nregions struct sup_region, then
 * nblob bytes of the protocol's blob.
 */
struct sup_rec {
	uint32_t kind;		/* enum sup_kind */
	int32_t id;
	int32_t pid;		/* the socket's peer (SO_PEERCRED) */
	uint32_t uid;
	uint64_t t_start;	/* ms, CLOCK_MONOTONIC (system-wide) */
	int32_t client_pid;	/* the protocol's name for the client, or 0 */
	uint32_t flags;		/* SUP_WAS_READING, SUP_NO_SOCK */
	int32_t conn;		/* named by this connection, still under way
				 * when stored (its prefetch held), or 0;
				 * SUP_NAME: the accepted one's id < 0 */
	int32_t err;		/* SUP_KEPT: 0, or why not (-errno) */
	uint32_t nregions;
	uint32_t nblob;
	char proto[16];		/* the protocol's name (proto.h) */
	uint64_t data[];	/* 8-byte aligned */
};

static inline struct sup_region *sup_regions(const struct sup_rec *r)
{
	return (struct sup_region *)r->data;
}

static inline void *sup_blob(const struct sup_rec *r)
{
	return (char *)r->data + r->nregions * sizeof(struct sup_region);
}

static inline size_t sup_len(const struct sup_rec *r)
{
	return sizeof(*r) + r->nregions * sizeof(struct sup_region) +
	       r->nblob;
}

/* A zeroed record of kind with room for its payload (NULL: too large). */
struct sup_rec *sup_rec_new(uint32_t kind, int id, uint32_t nregions,
				uint32_t nblob);
/* Send rec (and nfds fds) as one message; 0 or -errno (-EMSGSIZE). */
int sup_send(int fd, const struct sup_rec *rec, const int *fds,
	       int nfds);
/*
 * Receive one message into rec (SUP_REC_MAX bytes) and its fds into f;
 * 0, -ENODATA at EOF, or -errno.  A malformed message is -EBADMSG with
 * its fds closed; a whole record whose descriptors could not all be
 * received (the receiver out of them) is -EMFILE, rec valid, fds closed.
 */
int sup_recv(int fd, struct sup_rec *rec, struct sock_fds *f);

/* ---- the server's side: what it says of its sessions -------------------- */

struct daemon;
struct session;

/*
 * Accepted by this server (a supervisor that does not accept): its socket
 * kept, should this server die; sent before anything else is done with it
 * (a server killed between accept() and this loses the connection, and a
 * client that had sent its uffd waits for ever).  true if kept.
 */
bool sup_pending(struct daemon *d, int id, int sock, uint64_t t_start);
/* Ask the supervisor to accept one client (it answers SUP_ACCEPTED). */
void sup_want(struct daemon *d);
/* The client the supervisor accepted as tmp (< 0) is session id. */
void sup_name(struct daemon *d, int tmp, int id);
/* Session id ended (or never became one): no later server adopts it. */
void sup_drop_id(struct daemon *d, int id);
/* Before a read of its handshake (what that read takes may be lost). */
void sup_reading(struct daemon *d, struct session *s);
/* After a read: the protocol's state as it now is (keep()). */
void sup_data(struct daemon *d, struct session *s);
/*
 * Serving: socket, uffd, state memfd, s->regions, the protocol's keep.  0
 * if sent (with SUP_ACK when d->sup_accepts: SUP_KEPT will say if it was
 * kept), or -errno: not kept.  Sent by session_to() alone.
 */
int sup_session(struct daemon *d, struct session *s);

#endif
