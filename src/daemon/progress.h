/* SPDX-License-Identifier: Apache-2.0 */
/*
 * progress.h - the restore progress the server logs (progress.c).
 */
#ifndef FAULTLINE_DAEMON_PROGRESS_H
#define FAULTLINE_DAEMON_PROGRESS_H

#include "daemon/daemon.h"

/*
 * Every 250 ms of the control loop: say which sessions finished their
 * restore, and with --progress draw the restoring sessions' bar.
 */
void progress_check(struct daemon *d);

#endif
