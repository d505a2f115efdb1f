// SPDX-License-Identifier: Apache-2.0
/*
 * report.c - what a session says of itself: its restore complete (once),
 * and at its end the line with its counters, the --stats-json line and
 * the working set (--record), its engine then destroyed.
 *
 * Decision: run on the session's teardown thread (session.c), never the
 * control loop's: stopping an engine may wait for a slow source read, and
 * the lines are written whole (one write() to a file opened for append),
 * so that concurrent teardowns need no lock the loop would wait on.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/daemon.h"
#include "daemon/log.h"
#include "daemon/report.h"
#include "daemon/status.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/size.h"

/*
 * Open the --stats-json file for one append: a regular file only, never
 * waited on (a FIFO without a reader, say).  The fd, or -errno.
 */
int stats_open(const char *path)
{
	struct stat st;

	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
		return -EINVAL;	/* a FIFO's open could block, or fail */
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC |
		      O_NONBLOCK, 0644);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

/*
 * One JSON object per line, the session then its counters, written by one
 * write() to a file opened for append: lines from concurrent teardowns
 * never mix, and no lock is held that the control loop would wait on.
 * A failed write is logged (once until one succeeds again).
 */
static void write_stats(struct daemon *d, struct session *s,
			const struct fl_stats *st, uint64_t ms)
{
	static atomic_bool failing;
	const char *path = d->cfg->stats_json;

	if (!path)
		return;
	char *js = fl_stats_json(st), restore[24] = "null", *line = NULL;
	int fd = stats_open(path), n = -1;

	if (s->restored)
		snprintf(restore, sizeof(restore), "%llu",
			 (unsigned long long)s->restore_ms);
	if (js)
		n = asprintf(&line, "{\"session\":%d,\"pid\":%d,\"uid\":%u,"
			     "\"regions\":%d,\"bytes\":%llu,\"duration_ms\":%llu,"
			     "\"restore_ms\":%s,\"stats\":%s}\n",
			     s->id, (int)s->pid, (unsigned int)s->uid,
			     s->nregions, (unsigned long long)s->bytes,
			     (unsigned long long)ms, restore, js);
	if (n < 0)
		line = NULL;	/* asprintf leaves it undefined */
	int err = fd < 0 ? -fd : n <= 0 ? ENOMEM : 0;

	if (!err) {
		ssize_t wr = write(fd, line, (size_t)n);

		err = wr == n ? 0 : wr < 0 ? errno : ENOSPC;	/* short: full */
	}
	if (err && !atomic_exchange(&failing, true))
		serr(s, "cannot write its stats to %s: %s", path,
		     err == EINVAL ? "not a regular file" : strerror(err));
	if (!err)
		atomic_store(&failing, false);
	if (fd >= 0)
		close(fd);
	free(line);
	free(js);
}

/* One session's restore is complete: say so once, with what it took. */
void say_restored(struct session *s, const struct fl_stats *st,
			 uint64_t now)
{
	char poisoned[48] = "", gone[96] = "";

	s->restored = true;
	pthread_mutex_lock(&s->d->lock);
	s->d->tot.restored++;
	pthread_mutex_unlock(&s->d->lock);
	/* The filler's own clock is exact; else the first check that saw it. */
	s->restore_ms = st->restore_complete ? st->restore_ms :
			now - s->t_serving;
	if (st->pages_poisoned)
		snprintf(poisoned, sizeof(poisoned), ", %llu pages poisoned",
			 (unsigned long long)st->pages_poisoned);
	if (st->pages_gone)
		snprintf(gone, sizeof(gone), "; %llu pages were not mapped in "
			 "the client: nothing delivered there",
			 (unsigned long long)st->pages_gone);
	slog(s, "restore complete: %s in %llu ms (%llu faults, %llu "
	     "pages ahead of them, %llu in the background%s)%s",
	     size_str(s->bytes).s,
	     (unsigned long long)s->restore_ms,
	     (unsigned long long)st->faults,
	     (unsigned long long)(st->pages_prefetched + st->pages_replayed),
	     (unsigned long long)st->pages_background, poisoned, gone);
}

/*
 * The clients one connection names make one restore (CRIU: the tasks of
 * a dump, at their own offsets of the pages), so they share one working
 * set: this session's trace added to the daemon's, and the file written
 * anew (whole, renamed over), so that it holds every client's so far.
 */
static int merge_trace(struct daemon *d, struct session *s)
{
	char part[PATH_MAX];
	int ret;

	static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;

	snprintf(part, sizeof(part), "%s.%d.%d.part", d->cfg->record,
		 (int)getpid(), s->id);
	ret = fl_engine_save_trace(s->engine, part);
	pthread_mutex_lock(&trace_lock);
	if (ret == 0 && d->trace_fresh) {
		if (rename(part, d->cfg->record) < 0)
			ret = fl_err(-errno, "%s: %m", d->cfg->record);
		d->trace_fresh = ret < 0;
	} else if (ret == 0) {
		ret = fl_trace_merge(d->cfg->record, part);
	}
	unlink(part);
	pthread_mutex_unlock(&trace_lock);
	return ret;
}

/*
 * Its engine stopped (waiting for a read under way), what it did logged,
 * counted, written (--stats-json, --record), and destroyed.
 */
void report_end(struct daemon *d, struct session *s, const char *why,
		uint64_t ms)
{
	struct fl_stats st;
	uint64_t miss, all;

	char killed[200], lat[128];

	/* Stopped first: a kill under way has said how it went. */
	fl_engine_stop(s->engine);
	if (fl_engine_finished(s->engine) == FL_FINISHED_KILLED) {
		snprintf(killed, sizeof(killed), "client killed by faultline: "
			 "a page could not be served%s", d->cfg->on_error ==
			 FL_ON_ERROR_KILL ? " (--on-source-error kill)" : "");
		why = killed;
	}
	fl_engine_progress(s->engine, &miss, &all);	/* restored by now? */
	fl_engine_stats(s->engine, &st);
	pthread_mutex_lock(&d->lock);
	stats_add(&d->tot.ended, &st);
	d->tot.killed += fl_engine_finished(s->engine) == FL_FINISHED_KILLED;
	pthread_mutex_unlock(&d->lock);
	/* Restored since the last progress check: say it now. */
	if (!s->restored && st.restore_complete)
		say_restored(s, &st, now_ms());
	fmt_latency(lat, sizeof(lat), &st);
	slog(s, "ended (%s) after %llu ms: %llu faults, %llu pages copied, %llu zeroed, %s; fault latency %s",
	     why, (unsigned long long)ms, (unsigned long long)st.faults,
	     (unsigned long long)st.pages_copied,
	     (unsigned long long)st.pages_zeroed,
	     size_str(st.bytes_copied).s, lat);
	if (st.pages_poisoned || st.source_errors || fl_engine_error(s->engine)[0])
		serr(s, "%llu pages poisoned, %llu source errors; the first: %s",
		     (unsigned long long)st.pages_poisoned,
		     (unsigned long long)st.source_errors,
		     fl_engine_error(s->engine)[0] ?
		     fl_engine_error(s->engine) : "(no message)");
	write_stats(d, s, &st, ms);
	if (d->cfg->record) {
		if ((d->shared_trace ? merge_trace(d, s) :
		     fl_engine_save_trace(s->engine, d->cfg->record)) < 0)
			slog(s, "%s", fl_last_error());
		else
			slog(s, "working set (%llu faults) written to %s",
			     (unsigned long long)st.faults, d->cfg->record);
	}
	fl_engine_destroy(s->engine);	/* closes the uffd */
}
