/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl.h - the control socket (`faultline status`) and the metrics
 * listener (GET /metrics), served on the control loop (ctl.c).
 */
#ifndef FAULTLINE_DAEMON_CTL_H
#define FAULTLINE_DAEMON_CTL_H

#include <poll.h>
#include <stddef.h>

#include "daemon/daemon.h"
#include "util/sock.h"

#define CTL_CONNS_MAX	16	/* connections answered at once */
#define CTL_POLLFDS_MAX	(2 + CTL_CONNS_MAX)

/* The control socket's path for a listening socket's: PATH.ctl. */
int ctl_path_for(const char *sock_path, char *buf, size_t len);
/*
 * "PORT" or ":PORT" -> "127.0.0.1:PORT" (loopback unless an address is
 * given); anything else as it is.  0, or -EINVAL (no port).
 */
int metrics_bind_spec(const char *arg, char *buf, size_t len);
/*
 * Open what d->cfg asks for (control_path, metrics_addr): 0, or -errno
 * with the error set.  Nothing asked: 0, and d->ctl stays NULL.
 */
int ctl_open(struct daemon *d);
/* Close both, and every connection; the control socket's file removed. */
void ctl_close(struct daemon *d);
/* Add what to poll (at most CTL_POLLFDS_MAX) to pfd: how many. */
int ctl_pollfds(struct daemon *d, struct pollfd *pfd);
/* Serve what poll() reported on the n entries ctl_pollfds() added. */
void ctl_service(struct daemon *d, const struct pollfd *pfd, int n);

#endif
