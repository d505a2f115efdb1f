/* SPDX-License-Identifier: Apache-2.0 */
/*
 * report.h - what a session says of itself (report.c).
 */
#ifndef FAULTLINE_DAEMON_REPORT_H
#define FAULTLINE_DAEMON_REPORT_H

#include "daemon/daemon.h"

/* Open the --stats-json file for one append: the fd, or -errno. */
int stats_open(const char *path);
/* Say once that a session's restore is complete. */
void say_restored(struct session *s, const struct fl_stats *st,
		  uint64_t now);
/*
 * At its end (on its teardown thread): its engine stopped, its line, its
 * stats and trace written, the engine destroyed (closing the uffd).
 */
void report_end(struct daemon *d, struct session *s, const char *why,
		uint64_t ms);

#endif
