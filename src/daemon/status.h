/* SPDX-License-Identifier: Apache-2.0 */
/*
 * status.h - what the server tells about itself and its sessions
 * (status.c): a sample of each session, the totals, and the status
 * document `faultline status` reads from the control socket.
 */
#ifndef FAULTLINE_DAEMON_STATUS_H
#define FAULTLINE_DAEMON_STATUS_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/daemon.h"

/* The request line the control socket answers with the status document. */
#define CTL_REQ_STATUS	"status"

/* One session as it is now. */
struct sess_sample {
	bool serving;		/* st and the rest are valid */
	struct fl_stats st;
	uint64_t missing, total;	/* bytes; total 0: not scanned yet */
	const char *background;	/* "off", "held", "waiting", "running",
				 * "stopped", "done" */
	uint64_t age_ms;
};

/* Add from's counters and latency histogram to to's. */
void stats_add(struct fl_stats *to, const struct fl_stats *from);
/*
 * Sample s (control thread).  Its progress comes from a scan of its page
 * states at most once a second (fl_engine_progress()), else the last.
 */
void sess_sample(struct session *s, uint64_t now, struct sess_sample *out);
/*
 * The server's totals: t as kept, and in all its counters of the sessions
 * that ended and of those alive (control thread; takes d->lock).
 */
void daemon_totals(struct daemon *d, struct daemon_totals *t,
		   struct fl_stats *all);
/* The status document (JSON), malloc'd; NULL if out of memory. */
char *status_json(struct daemon *d);

#endif
