/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proto.h - the seam between the daemon and the protocols its clients
 * speak: a handshake fed bytes and descriptors as reads deliver them, the
 * clients (uffd, regions, pid) it names, input while serving, and what the
 * supervisor keeps of it to take a session over.
 *
 * Decision: a protocol is data (one ops table, protos[] in proto.c) and
 * the daemon's files (a session's, its handshake's, a takeover's) call
 * nothing else of it, so that Firecracker's handshake, its guest_memfd
 * protocol and CRIU's lazy-pages socket are each one file, not each a
 * fork of the session.
 */
#ifndef FAULTLINE_DAEMON_PROTO_H
#define FAULTLINE_DAEMON_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "faultline.h"

/* A protocol's descriptors kept for the supervisor, at most. */
#define PROTO_KEEP_FDS	16

/* One client a complete handshake names: what one engine serves. */
struct proto_client {
	int uffd;		/* handed to the session (its engine owns it) */
	int32_t pid;		/* as the protocol names it; 0: it names none
				 * (the socket's peer is the client) */
	int nregions;
	const struct fl_region_desc *regions;	/* the protocol's, until free */
};

/*
 * What the supervisor keeps of a protocol's state, opaque to it: a blob
 * (malloc'd by keep(), freed by the caller) and descriptors (lent: the
 * supervisor channel passes copies).
 */
struct proto_keep {
	void *blob;
	size_t len;
	int fds[PROTO_KEEP_FDS];
	int nfds;
};

struct proto_ops {
	const char *name;
	/*
	 * Descriptors one handshake may carry in all; with named(), in one
	 * read (the clients' uffds then come one by one).
	 */
	int max_fds;
	/* An unfinished handshake, for the log ("incomplete JSON array"). */
	const char *unfinished;
	/*
	 * The client's memory is its own once restored: its session ends
	 * then, closing the uffd (CRIU: what is not lazy reads as zeros, as
	 * the kernel fills it).  false: it ends when the client does.
	 */
	bool end_when_restored;
	/*
	 * Clients may fork while served (their uffds ask for fork events):
	 * each child is served as a session of its own (fl_engine_create_forking()).
	 */
	bool forks;
	/*
	 * A handshake state; the memory file's size bounds every region;
	 * arg is serve_config.proto_arg (what the protocol needs to know).
	 */
	int (*open)(void **st, uint64_t src_size, const void *arg);
	/*
	 * What one read got: len bytes (maybe 0) and nfds descriptors, the
	 * protocol's from now on (it closes what it does not keep).  0 for
	 * more, the number of clients (>= 1) once complete and valid, or
	 * -errno with fl_last_error() naming the field and value at fault.
	 */
	int (*feed)(void *st, const char *buf, size_t len, const int *fds,
		    int nfds);
	/*
	 * Client i (0 <= i < what feed returned, or named() said); its uffd
	 * is the caller's from then on.
	 */
	int (*client)(void *st, int i, struct proto_client *out);
	/*
	 * Optional: clients named so far, before the handshake is complete.
	 * A protocol that has it names clients as they come (CRIU: one a
	 * restored task, which may fault before the last has come), each
	 * served at once as a session of its own without a socket, and its
	 * connection ends once complete.  NULL: one client, the connection
	 * its session (Firecracker).
	 */
	int (*named)(void *st);
	/*
	 * Input while serving: the bytes and descriptors the client sent on
	 * sock (replies go there), for its engine e.  NULL: the client sends
	 * nothing more (what it sends is ignored, EOF is its end).  0 to go
	 * on, -errno ends the session (the log says fl_last_error()).
	 */
	int (*input)(void *st, int sock, struct fl_engine *e, const char *buf,
		     size_t len, const int *fds, int nfds);
	/* What the supervisor must keep to take this state over: 0/-errno. */
	int (*keep)(void *st, struct proto_keep *k);
	/*
	 * A state just opened, given what keep() made (the descriptors are
	 * its from now on): returns as feed() does.
	 */
	int (*restore)(void *st, const void *blob, size_t len, const int *fds,
		       int nfds);
	void (*free)(void *st);
};

/* Every protocol, NULL-terminated (proto.c); the first is the default. */
extern const struct proto_ops *const protos[];

/* The protocol called name (NULL: the default), or NULL. */
const struct proto_ops *proto_find(const char *name);

/* Firecracker's UFFD handshake (proto_fc.c). */
extern const struct proto_ops proto_fc;
/*
 * CRIU's lazy-pages socket (proto_criu.c); arg: the source, a CRIU
 * dump's (fl_source_criu_tasks()).
 */
extern const struct proto_ops proto_criu;

#endif
