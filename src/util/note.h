/* SPDX-License-Identifier: Apache-2.0 */
/*
 * note.h - a one-line note to whoever opened a source or a store (the
 * daemon's log, the CLI's stderr): fl_source_opts.note and its argument.
 * Decision: its own small struct below the stores and the sources, so a
 * store (the --cache, a transfer's retry) says things the same way a
 * source does without knowing what a source is.
 */
#ifndef FAULTLINE_UTIL_NOTE_H
#define FAULTLINE_UTIL_NOTE_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>

struct note {
	void (*fn)(void *arg, const char *line);	/* NULL: say nothing */
	void *arg;
	_Atomic uint64_t last_ns;	/* the last rate-limited note */
};

/* Take fn and arg (fn may be NULL) for n; no note said yet. */
void note_set(struct note *n, void (*fn)(void *arg, const char *line),
	      void *arg);
/* One line to n's callback, if any (n may be NULL): one a second. */
void note_vrate(struct note *n, const char *fmt, va_list ap);
void note_rate(struct note *n, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The same with no rate limit: for what is said once. */
void note_vsay(struct note *n, const char *fmt, va_list ap);
void note_say(struct note *n, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
