/* SPDX-License-Identifier: Apache-2.0 */
/*
 * session.h - a session's life (session.c), for the control loop,
 * handshake.c and takeover.c.
 */
#ifndef FAULTLINE_DAEMON_SESSION_H
#define FAULTLINE_DAEMON_SESSION_H

#include "daemon/daemon.h"

/*
 * A session in the handshake state of protocol p for the client on fd, on
 * d's list, its credentials from SO_PEERCRED.  NULL (fd closed) if out of
 * memory.
 */
struct session *session_new(struct daemon *d, const struct proto_ops *p,
			    int fd, int id, uint64_t t_start);
/* Refuse a client not (yet) served; killed if its uffd had arrived. */
void refuse(struct daemon *d, struct session *s, const char *why);
/* Detach its engine, shut its socket, tear it down (on a thread). */
void session_end(struct daemon *d, struct session *s, const char *why);
/* Open the --stats-json file for one append: the fd, or -errno. */
int stats_open(const char *path);
/* Wait for sessions still being torn down. */
void wait_teardowns(struct daemon *d);
/* Sessions being torn down (still holding descriptors). */
int tearing_now(struct daemon *d);
/*
 * Serve n regions with s->uffd (taken by the engine): the engine started,
 * supervised once the supervisor keeps the descriptors (S_KEEPING until it
 * says so, session_kept(); on takeover, kept by it already).  0 or -errno
 * with the reason set (s->unkept: they could not be handed to it).
 */
int start_serving(struct daemon *d, struct session *s,
		  const struct fl_region_desc *regs, int n, bool takeover);
/* The supervisor kept session id (err 0), or could not: serve, or end it. */
void session_kept(struct daemon *d, int id, int err);
/*
 * Start a session for each client conn's protocol named (named()) up to
 * upto: 0, or -errno (that client's session ended, the reason set).
 */
int session_named(struct daemon *d, struct session *conn, int upto);
/* conn's handshake is complete: prefetch for the sessions it named. */
void session_release(struct daemon *d, int conn);
/* Serve the children that forked since (queued by engine threads). */
void take_forks(struct daemon *d);
/* The client wrote (or closed) while being served. */
void serving_input(struct daemon *d, struct session *s, short revents);
/* Say once that a session's restore is complete. */
void say_restored(struct session *s, const struct fl_stats *st,
		  uint64_t now);

#endif
