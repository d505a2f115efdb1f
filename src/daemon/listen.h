/* SPDX-License-Identifier: Apache-2.0 */
/*
 * listen.h - the server's listener and its clients accepted (listen.c),
 * for serve.c and the control loop.
 */
#ifndef FAULTLINE_DAEMON_LISTEN_H
#define FAULTLINE_DAEMON_LISTEN_H

#include <poll.h>

#include "daemon/daemon.h"
#include "daemon/supchan.h"

/* Listen on path (NULL: systemd's socket): 0, or -errno with the reason. */
int listen_on(struct daemon *d, const char *path);
/* Close the listener (and unlink the socket this server bound). */
void stop_listening(struct daemon *d);
/* The one client has come: nobody else is served, by any server. */
void listen_no_more(struct daemon *d);
/* Sessions at most, as the descriptor limit allows (raised to the hard). */
int max_sessions(void);
/* Fill p with what the loop polls for clients: 1, or 0 (nothing now). */
int listen_pollfd(struct daemon *d, struct pollfd *p);
/* The listener polled in (not the supervisor's channel): accept a client. */
void listen_accept(struct daemon *d);
/*
 * SUP_ACCEPTED (rec, its fds f, sup_recv()'s ret): the client the
 * supervisor accepted taken as a session; f is taken.
 */
void listen_accepted(struct daemon *d, const struct sup_rec *rec,
		     struct sock_fds *f, int ret);

#endif
