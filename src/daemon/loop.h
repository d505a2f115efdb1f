/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loop.h - the server's control loop (loop.c).
 */
#ifndef FAULTLINE_DAEMON_LOOP_H
#define FAULTLINE_DAEMON_LOOP_H

#include "daemon/daemon.h"

/*
 * Poll and serve until drained (SIGTERM), the first session's end (once),
 * or the one client's (one_client); then every session ended and torn
 * down.  0, or -errno.
 */
int serve_loop(struct daemon *d);

#endif
