/* SPDX-License-Identifier: Apache-2.0 */
/*
 * session.h - a session's life: its state machine (session.c) and what
 * it serves (serving.c), for the control loop, the listener, handshake.c
 * and takeover.c.
 */
#ifndef FAULTLINE_DAEMON_SESSION_H
#define FAULTLINE_DAEMON_SESSION_H

#include "daemon/daemon.h"

/* ---- session.c: the state machine ---------------------------------------- */

/*
 * A session in the handshake state of protocol p for the client on fd, on
 * d's list, its credentials from SO_PEERCRED.  NULL (fd closed) if out of
 * memory.
 */
struct session *session_new(struct daemon *d, const struct proto_ops *p,
			    int fd, int id, uint64_t t_start);
/*
 * The one way a session changes state (daemon.h, enum sess_state): the
 * step checked against the table (another is a bug: logged, -EINVAL,
 * nothing done), logged, and done with the supervisor's record that
 * belongs to it.  why: SERVING's line begins with it ("serving", "taken
 * over: serving"); REFUSED's and DRAINING's reason.
 *   KEEPING  SUP_SESSION sent, the engine not started (SUP_KEPT starts it)
 *   SERVING  from HANDSHAKE, supervised: SUP_SESSION first; the engine
 *            started
 *   REFUSED  the client killed if its uffd arrived, then DRAINING
 *   DRAINING SUP_DROP (if the supervisor keeps it), engine detached,
 *            socket shut, off d's list; torn down on a thread, to ENDED
 * 0, or -errno with the reason set (KEEPING, SERVING: it stays where it
 * was, for the caller to end or refuse).  After REFUSED or DRAINING, s is
 * no longer the caller's.
 */
int session_to(struct session *s, enum sess_state to, const char *why);
/* The state's name, as the status and the log say it. */
const char *sess_state_name(enum sess_state st);
/* Wait for sessions still being torn down. */
void wait_teardowns(struct daemon *d);
/* Sessions being torn down (still holding descriptors). */
int tearing_now(struct daemon *d);

/* ---- serving.c: its engine ----------------------------------------------- */

/*
 * The engine of a session leaving HANDSHAKE or ADOPTED, on n regions with
 * s->uffd (taken by the engine), not started: 0, or -errno with the reason
 * set (what the handshake named cannot be served).
 */
int session_engine(struct daemon *d, struct session *s,
		   const struct fl_region_desc *regs, int n);
/*
 * Its engine made: the step to SERVING (line "what ..."), or to KEEPING
 * until a supervisor that acknowledges has kept it (session_kept()).
 * session_to()'s return.
 */
int session_serve(struct session *s, const char *what);
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
void serving_input(struct session *s, short revents);

#endif
