/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics.h - the server's metrics in Prometheus' text exposition format
 * (metrics.c), for GET /metrics (ctl.c).
 */
#ifndef FAULTLINE_DAEMON_METRICS_H
#define FAULTLINE_DAEMON_METRICS_H

#include <stddef.h>

#include "daemon/daemon.h"

#define METRICS_CONTENT_TYPE	"text/plain; version=0.0.4; charset=utf-8"

/* The exposition, malloc'd (its length in *len); NULL if out of memory. */
char *metrics_text(struct daemon *d, size_t *len);

#endif
