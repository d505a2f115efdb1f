/* SPDX-License-Identifier: Apache-2.0 */
/*
 * daemon.h - the state of `faultline serve`'s server, shared by its files:
 * serve.c (starting it), listen.c (the listener, accepting), loop.c (the
 * control loop), session.c (a session's states and their one transition
 * function), serving.c (its engine), report.c (what it says of itself),
 * handshake.c (receiving it), takeover.c (adopting, handing over),
 * supchan.c (the supervisor's channel), log.c (the log), progress.c (the
 * progress bar), ctl.c (the control socket and the metrics listener) with
 * status.c and metrics.c (what they answer).  No functions.
 */
#ifndef FAULTLINE_DAEMON_DAEMON_H
#define FAULTLINE_DAEMON_DAEMON_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/proto.h"
#include "daemon/config.h"
#include "faultline.h"

#define MAX_SESSIONS	8192	/* with a descriptor limit that allows it */

/*
 * A session's life, changed by session_to() alone (session.c), which
 * checks each step against its table, logs it and sends the supervisor
 * the record that belongs to it:
 *
 *   HANDSHAKE -> SERVING, or -> KEEPING -> SERVING (supervised: SUP_SESSION,
 *                and a supervisor that acknowledges answers SUP_KEPT)
 *   ADOPTED   -> SERVING (taken over: the supervisor keeps it already)
 *   HANDSHAKE, ADOPTED, KEEPING -> REFUSED (the client not served: killed
 *                if it handed its uffd over) -> DRAINING
 *   any of them -> DRAINING (SUP_DROP, engine detached, socket shut, off
 *                the list) -> ENDED (torn down on a thread of its own)
 *
 * A client a connection named, or a forked child, starts in HANDSHAKE
 * (its handshake was its connection's, its parent's) and leaves it at once.
 */
enum sess_state {
	SESS_HANDSHAKE,		/* its handshake being received */
	SESS_ADOPTED,		/* taken over from the server before this one */
	SESS_KEEPING,		/* engine made, not started until kept */
	SESS_SERVING,		/* engine started */
	SESS_REFUSED,		/* not served (passing to DRAINING) */
	SESS_DRAINING,		/* ended: being torn down */
	SESS_ENDED,		/* torn down: freed */
	SESS_NSTATES
};

struct session {
	struct daemon *d;
	int id;
	int sock;		/* -1: a client its connection named (named()) */
	pid_t pid;		/* the socket's peer (SO_PEERCRED) */
	uid_t uid;
	enum sess_state state;
	const struct proto_ops *proto;
	void *pstate;		/* the protocol's state */
	int32_t client_pid;	/* the protocol's name for the client (0) */
	int uffd;
	int pidfd;		/* the client, during the handshake (or -1) */
	int state_fd;		/* memfd of its page states (or -1) */
	bool sup_kept;		/* the supervisor keeps its descriptors */
	int nfds;		/* fds received so far, in all */
	bool got_bytes;		/* some of the handshake arrived */
	int named;		/* clients of named() started as sessions */
	int parent;		/* forked: its parent's session id (else 0) */
	int conn;		/* named: its connection's session id (else 0) */
	bool held;		/* named: no prefetch until the connection
				 * ends (its engine's gate, in any state) */
	uint64_t t_probe;	/* ms: without a socket, last asked if alive */
	struct fl_engine *engine;
	int nregions;
	uint64_t bytes;
	uint64_t t_start;	/* ms, CLOCK_MONOTONIC */
	uint64_t t_serving;	/* ms, when the handshake was done */
	bool restored;		/* "restore complete" was said (a fact of
				 * SERVING, read by its teardown too) */
	uint64_t restore_ms;	/* from the handshake to that */
	uint64_t missing, total;	/* bytes, at the last progress scan */
	uint64_t t_scan;	/* ms, that scan (status.c reuses it a while) */
	struct sess_region *regions;	/* what it serves (nregions) */
	struct session *next;
};

/* A region a session serves, as the status shows it. */
struct sess_region {
	uint64_t addr, len, page_size, src_offset;
};

/*
 * What the server has done since it started, for the metrics: sessions
 * that ended are added here (their counters and latency histogram), so
 * that a total never goes down when a session leaves.  d->lock.
 */
struct daemon_totals {
	struct fl_stats ended;	/* counters of the sessions that ended */
	uint64_t served;	/* sessions that began serving */
	uint64_t refused;	/* clients refused (any reason) */
	uint64_t killed;	/* clients killed (refused, or a page failed) */
	uint64_t restored;	/* sessions whose restore completed */
};

struct daemon {
	const struct serve_config *cfg;
	const struct proto_ops *proto;	/* what the listener speaks */
	struct fl_source *src;
	int listen_fd;
	bool own_socket;	/* we bound it: unlink at exit */
	int sig_fd;
	int next_id;
	int nsessions;
	int ended;
	bool draining;
	struct session *sessions;
	pthread_mutex_t lock;	/* tearing, forks */
	pthread_cond_t torn;
	int tearing;		/* sessions being torn down */
	int torn_fd;		/* eventfd: a teardown ended (wakes the loop) */
	uint64_t t_progress;	/* ms, last progress check */
	uint64_t prev_done;	/* bytes restored at that check */
	int last_step;		/* not a terminal: last 10 % step said */
	bool tty;		/* stderr is a terminal */
	int max_sessions;	/* what the descriptor limit allows */
	int spare_fd;		/* given up to refuse a client when out of fds */
	uint64_t accept_paused;	/* ms: listener ignored until then */
	bool fds_warned;	/* "out of file descriptors" said */
	int sup_fd;		/* to the supervisor (or -1: unsupervised) */
	bool sup_accepts;	/* it accepts and acknowledges (SUP_ACCEPTS_ENV) */
	bool wanted;		/* a client asked of it (SUP_WANT) */
	struct sup_rec *sup_in;	/* its messages (SUP_REC_MAX) */
	bool listen_given;	/* the listener came from the supervisor */
	struct fork_rec *forks;	/* children to serve (lock; torn_fd wakes) */
	bool shared_trace;	/* --record with named clients: one working
				 * set for them all (merge_trace()) */
	bool trace_fresh;	/* the first merge replaces the file */
	struct daemon_totals tot;	/* lock */
	uint64_t t_up;		/* ms: this server started */
	struct ctl *ctl;	/* the control socket and metrics (ctl.c) */
};

/* A forked client waiting for its session (serving.c). */
struct fork_rec {
	struct fl_engine_child c;
	const struct proto_ops *proto;
	uid_t uid;
	int parent;
	struct fork_rec *next;
};

#endif
