/* SPDX-License-Identifier: Apache-2.0 */
/*
 * takeover.h - the server's side of a takeover (takeover.c).
 */
#ifndef FAULTLINE_DAEMON_TAKEOVER_H
#define FAULTLINE_DAEMON_TAKEOVER_H

#include "daemon/daemon.h"

/* Supervised: take over what the server before this one served. */
void adopt_sessions(struct daemon *d);
/* Supervised, SIGUSR2: detach every engine and exit (an upgrade). */
void hand_over_and_exit(struct daemon *d);

#endif
