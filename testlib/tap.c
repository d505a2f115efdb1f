// SPDX-License-Identifier: Apache-2.0
/*
 * tap.c - the TAP producer of tap.h: one count of test points and of
 * failures for the whole program.
 */
#include <stdarg.h>

#include "tap.h"

static int tap_n, tap_failed;

int ok(int cond, const char *fmt, ...)
{
	va_list ap;

	printf("%s %d - ", cond ? "ok" : "not ok", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (!cond)
		tap_failed++;
	return cond;
}

void diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

void skip(int n, const char *why)
{
	for (int i = 0; i < n; i++)
		printf("ok %d # skip %s\n", ++tap_n, why);
	fflush(stdout);
}

void skip_all(const char *why)
{
	printf("1..0 # skip %s\n", why);
	exit(0);
}

int tap_failures(void)
{
	return tap_failed;
}

int done_testing(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}
