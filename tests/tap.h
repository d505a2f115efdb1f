/*
 * tap.h - a minimal TAP producer for the test programs (run by prove).
 *
 * Tests call ok()/is_int()/skip() and finish with done_testing(), which
 * prints the plan and returns the exit status.
 */
#ifndef FAULTLINE_TAP_H
#define FAULTLINE_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int tap_n, tap_failed;

static inline __attribute__((format(printf, 2, 3)))
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

#define is_int(got, want, name) ({					\
	long long _g = (long long)(got), _w = (long long)(want);	\
	int _r = ok(_g == _w, "%s", name);				\
	if (!_r)							\
		printf("#   got %lld, want %lld\n", _g, _w);		\
	_r; })

static inline __attribute__((format(printf, 1, 2)))
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

static inline void skip(int n, const char *why)
{
	for (int i = 0; i < n; i++)
		printf("ok %d # skip %s\n", ++tap_n, why);
	fflush(stdout);
}

/* Skip a whole program: plan 0 with a reason. */
static inline void skip_all(const char *why)
{
	printf("1..0 # skip %s\n", why);
	exit(0);
}

static inline int done_testing(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

#define BAIL(...) do { printf("Bail out! " __VA_ARGS__); printf("\n"); \
		       exit(255); } while (0)

#endif
