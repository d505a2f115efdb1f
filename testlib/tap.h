/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tap.h - a minimal TAP producer for the test programs (run by prove).
 *
 * Tests call ok()/is_int()/skip() and finish with done_testing(), which
 * prints the plan and returns the exit status.
 *
 * Decision: a point that cannot run because a real component the suite
 * uses is missing (criu, nginx, the S3 test server, Prometheus, strace,
 * gnuplot, hugetlb pages, root) goes through skip_missing() or
 * skip_all_missing(), never skip(): on a user's machine it is a skip that
 * names the component, and in CI (CI=true, or FL_REQUIRE_ALL=1) it is a
 * failure that names it, so CI is never green with a part untested.
 * skip() stays for what is legitimately absent (a kernel feature, /dev/kvm
 * where TCG stands in).
 */
#include <stdbool.h>
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

/*
 * Is every component required?  FL_REQUIRE_ALL when set (1 yes, 0 or
 * "false" no), else CI (CI=true: yes).
 */
bool tap_require_all(void);

/*
 * n points that need component, which is missing (why: how it was found
 * missing, or how to get it): "ok N # skip COMPONENT missing: why" here,
 * "not ok N - required in CI: COMPONENT missing (why)" when required.
 * Either way one line on stderr names it, so prove shows it.
 */
void skip_missing(int n, const char *component, const char *why);

/*
 * The whole program needs component: plan 0 with the reason (exits 0),
 * or, when required, a failed point naming it and the plan (exits 1).
 */
__attribute__((noreturn))
void skip_all_missing(const char *component, const char *why);

/* Failed test points so far. */
int tap_failures(void);

/* Print the plan; the program's exit status. */
int done_testing(void);

/*
 * One case of a program's table: its name (a "# name" line before it) and
 * the function that makes its points.  State the cases share is a
 * file-static fixture of the program.  A case returns 0, or -1 when what
 * it failed to set up leaves the cases after it nothing to run on.
 */
struct tap_case {
	const char *name;
	int (*fn)(void);
};

/* Run n cases in order; stops at the first that returns -1. */
void tap_run_cases(const struct tap_case *cases, int n);

#define TAP_RUN(cases) \
	tap_run_cases((cases), (int)(sizeof(cases) / sizeof((cases)[0])))

#define BAIL(...) do { printf("Bail out! " __VA_ARGS__); printf("\n"); \
		       exit(255); } while (0)

#endif
