// SPDX-License-Identifier: Apache-2.0
/*
 * progress.c - the server's restore progress: which sessions finished
 * their restore (one log line each), and with --progress one bar for
 * every session still restoring (a line per 10 % step on a log).
 *
 * Decision: progress is read from a scan of each engine's page states
 * that never waits for an engine busy with events, so the control loop
 * never stalls behind a slow source.
 */
#include <stdio.h>

#include "daemon/log.h"
#include "daemon/progress.h"
#include "daemon/report.h"
#include "util/clock.h"
#include "util/size.h"

#define PROGRESS_MS	250	/* how often sessions' progress is checked */
#define BAR_WIDTH	30

/*
 * The restore of every session still restoring, as one line: a bar
 * redrawn in place on a terminal, a line per 10 % step otherwise.
 */
static void draw_progress(struct daemon *d, int n, uint64_t done,
			  uint64_t total, uint64_t ms)
{
	unsigned int pct = (unsigned int)(done * 100 / total);
	double rate = ms ? (double)(done - d->prev_done) * 1000.0 / (double)ms : 0;
	char bar[BAR_WIDTH + 1], line[160];

	if (done < d->prev_done)	/* a session ended or began */
		rate = 0;
	d->prev_done = done;
	if (!d->tty) {
		if ((int)pct / 10 == d->last_step)
			return;
		d->last_step = (int)pct / 10;
		slog(NULL, "restoring %d session%s: %u%% (%s of %s)",
		     n, n > 1 ? "s" : "", pct, size_str(done).s,
		     size_str(total).s);
		return;
	}
	unsigned int full = (unsigned int)(done * BAR_WIDTH / total);

	for (unsigned int i = 0; i < BAR_WIDTH; i++)
		bar[i] = i < full ? '#' : '-';
	bar[BAR_WIDTH] = 0;
	snprintf(line, sizeof(line), "faultline: restoring %d session%s [%s] "
		 "%3u%% %s/%s %s/s", n, n > 1 ? "s" : "", bar, pct,
		 size_str(done).s, size_str(total).s,
		 size_str((uint64_t)rate).s);
	put_bar(line);
}

/*
 * Every PROGRESS_MS: sessions whose restore completed (the engine's own
 * flag, read without its lock), and with --progress the bar, from a scan
 * of each session's page states that never waits for an engine busy with
 * events (the control loop must not stall behind a slow source).
 */
void progress_check(struct daemon *d)
{
	uint64_t now = now_ms(), done = 0, total = 0;
	uint64_t ms = now - d->t_progress;
	int n = 0;

	if (ms < PROGRESS_MS)
		return;
	d->t_progress = now;
	for (struct session *s = d->sessions; s; s = s->next) {
		struct fl_stats st;
		uint64_t miss, all;

		if (s->state != SESS_SERVING || s->restored ||
		    fl_engine_stats(s->engine, &st) < 0)
			continue;
		if (st.restore_complete) {
			say_restored(s, &st, now);
			continue;
		}
		if (!d->cfg->progress)
			continue;
		if (fl_engine_progress(s->engine, &miss, &all) == 0) {
			s->missing = miss;
			s->total = all;
			s->t_scan = now;
		}
		if (s->total && !s->missing) {	/* all of it faulted in */
			say_restored(s, &st, now);
			continue;
		}
		done += s->total - s->missing;
		total += s->total;
		n += s->total != 0;
	}
	if (!d->cfg->progress)
		return;
	if (n) {
		draw_progress(d, n, done, total, ms);
	} else {
		if (log_bar_shown())	/* nothing restoring: no bar */
			put_bar("");
		d->last_step = -1;
	}
}
