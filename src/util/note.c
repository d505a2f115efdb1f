// SPDX-License-Identifier: Apache-2.0
/*
 * note.c - one-line notes to a caller's callback (util/note.h), rate
 * limited to one a second where a loop could repeat them (a retry).
 */
#include <stdio.h>

#include "util/clock.h"
#include "util/note.h"

void note_set(struct note *n, void (*fn)(void *arg, const char *line),
	      void *arg)
{
	n->fn = fn;
	n->arg = arg;
	atomic_init(&n->last_ns, 0);
}

void note_vsay(struct note *n, const char *fmt, va_list ap)
{
	char line[320];

	if (!n || !n->fn)
		return;
	vsnprintf(line, sizeof(line), fmt, ap);
	n->fn(n->arg, line);
}

void note_vrate(struct note *n, const char *fmt, va_list ap)
{
	uint64_t now = now_ns(), last;

	if (!n || !n->fn)
		return;
	last = atomic_load(&n->last_ns);
	if ((last && now - last < 1000000000ull) ||
	    !atomic_compare_exchange_strong(&n->last_ns, &last, now))
		return;
	note_vsay(n, fmt, ap);
}

void note_rate(struct note *n, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	note_vrate(n, fmt, ap);
	va_end(ap);
}

void note_say(struct note *n, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	note_vsay(n, fmt, ap);
	va_end(ap);
}
