/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tap.h - a minimal TAP producer for the test programs (run by prove).
 *
 * Tests call ok()/is_int()/skip() and finish with done_testing(), which
 * prints the plan and returns the exit status.
 */
#ifndef FAULTLINE_TAP_H
#define FAULTLINE_TAP_H

#include <stdio.h>
#include <stdlib.h>

/* One test point: "ok N - ..." or "not ok N - ..."; returns cond. */
__attribute__((format(printf, 2, 3)))
int ok(int cond, const char *fmt, ...);

#define is_int(got, want, name) ({					\
	long long _g = (long long)(got), _w = (long long)(want);	\
	int _r = ok(_g == _w, "%s", name);				\
	if (!_r)							\
		printf("#   got %lld, want %lld\n", _g, _w);		\
	_r; })

/* A "# ..." line. */
__attribute__((format(printf, 1, 2)))
void diag(const char *fmt, ...);

/* n test points skipped, with the reason. */
void skip(int n, const char *why);

/* Skip a whole program: plan 0 with a reason (exits). */
void skip_all(const char *why);

/* Failed test points so far. */
int tap_failures(void);

/* Print the plan; the program's exit status. */
int done_testing(void);

#define BAIL(...) do { printf("Bail out! " __VA_ARGS__); printf("\n"); \
		       exit(255); } while (0)

#endif
