/* SPDX-License-Identifier: Apache-2.0 */
/*
 * session.h - a session's life (session.c), for the control loop.
 */
#ifndef FAULTLINE_DAEMON_SESSION_H
#define FAULTLINE_DAEMON_SESSION_H

#include "daemon/daemon.h"

/* A session in the handshake state for the client on fd, on d's list. */
struct session *session_new(struct daemon *d, int fd, int id,
			    uint64_t t_start);
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
/* Bytes (and maybe the uffd) of a handshake arrived. */
void handshake_input(struct daemon *d, struct session *s);
/* The client wrote (or closed) while being served. */
void serving_input(struct daemon *d, struct session *s, short revents);
/* Say once that a session's restore is complete. */
void say_restored(struct session *s, const struct fl_stats *st,
		  uint64_t now);
/* Supervised: take over what the server before this one served. */
void adopt_sessions(struct daemon *d);
/* Supervised, SIGUSR2: detach every engine and exit (an upgrade). */
void hand_over_and_exit(struct daemon *d);

#endif
