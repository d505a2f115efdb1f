/* SPDX-License-Identifier: Apache-2.0 */
/*
 * supervise.h - faultline serve's supervisor, and the store protocol it
 * speaks with the server process it runs.
 */
#ifndef FAULTLINE_SUPERVISE_H
#define FAULTLINE_SUPERVISE_H

#include <stdint.h>
#include <sys/types.h>

#include "daemon/proto_fc.h"

/* The server's end of the store channel, and the listener, by number. */
#define STORE_FD_ENV	"FAULTLINE_STORE_FD"
#define LISTEN_FD_ENV	"FAULTLINE_LISTEN_FD"

enum store_kind {
	STORE_LISTEN = 1,	/* server -> supervisor: fds = { listener } */
	STORE_PENDING,		/* server -> supervisor: accepted, fds = { sock } */
	STORE_READING,		/* server -> supervisor: id's handshake being read */
	STORE_DATA,		/* server -> supervisor: what that read got */
	STORE_SESSION,		/* server -> supervisor: a session serving */
	STORE_DROP,		/* server -> supervisor: session id ended */
	STORE_READY,		/* server -> supervisor: took over, serving */
	STORE_ADOPT,		/* supervisor -> server: serve this session */
	STORE_ADOPT_PENDING,	/* supervisor -> server: a handshake, flags */
	STORE_ADOPT_END,	/* supervisor -> server: no more; id = last id */
};

/*
 * STORE_ADOPT_PENDING flags: the dead server was reading it, and what it
 * read is lost (it died in the read, or the handshake outgrew bytes[]).
 */
#define STORE_WAS_READING	1
#define STORE_BYTES_MAX		(FC_REGIONS_MAX * 32)

/* A session's fds in a STORE_SESSION / STORE_ADOPT message, in order. */
enum { STORE_SOCK, STORE_UFFD, STORE_STATE, STORE_NFDS };

struct store_region {
	uint64_t addr, len, page_size, src_offset;
};

/*
 * One message: everything a server needs to serve a session it did not
 * accept (the handshake as parsed, the peer's credentials), never more.
 */
struct store_rec {
	uint32_t kind;		/* enum store_kind */
	int32_t id;
	int32_t pid;
	uint32_t uid;
	uint64_t t_start;	/* ms, CLOCK_MONOTONIC (system-wide) */
	int32_t nregions;	/* regs[] (STORE_SESSION, STORE_ADOPT) */
	int32_t flags;		/* STORE_WAS_READING */
	uint32_t nbytes;	/* bytes[] (STORE_DATA, STORE_ADOPT_PENDING) */
	uint32_t pad;
	union {
		struct store_region regs[FC_REGIONS_MAX];
		char bytes[STORE_BYTES_MAX];	/* the handshake so far */
	};
};

/* Send rec (and nfds fds) as one SOCK_SEQPACKET message; 0 or -errno. */
int store_send(int fd, const struct store_rec *rec, const int *fds,
	       int nfds);
/*
 * Receive one message into rec and up to STORE_NFDS fds (the count in
 * *nfds); 0, -ENODATA at EOF, or -errno.  A malformed message is -EBADMSG
 * with its fds closed.
 */
int store_recv(int fd, struct store_rec *rec, int *fds, int *nfds);

/*
 * Run `faultline serve` as the supervisor: start the server (this binary,
 * argv again, with the store channel), keep every session's descriptors,
 * restart the server when it dies, re-execute it on SIGHUP.  Returns the
 * exit status.
 */
int supervise_run(char **argv);

#endif
