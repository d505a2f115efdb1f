// SPDX-License-Identifier: Apache-2.0
/*
 * tap.c - the TAP producer of tap.h: one count of test points and of
 * failures for the whole program, and the one place that decides whether
 * a missing component is a skip (a user's machine) or a failure (CI).
 */
#include <stdarg.h>
#include <string.h>
#include <strings.h>

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

void tap_run_cases(const struct tap_case *cases, int n)
{
	for (int i = 0; i < n; i++) {
		diag("%s", cases[i].name);
		if (cases[i].fn() < 0)
			return;
	}
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

bool tap_require_all(void)
{
	const char *v = getenv("FL_REQUIRE_ALL");

	if (!v || !*v)
		v = getenv("CI");
	return v && *v && strcmp(v, "0") && strcasecmp(v, "false") &&
	       strcasecmp(v, "no");
}

/* The line prove shows whatever its verbosity (stderr passes through). */
static void say_missing(const char *what, const char *component,
			const char *why, bool required)
{
	fflush(stdout);
	fprintf(stderr, "# %s missing (%s): %s %s\n", component, why, what,
		required ? "failed: required in CI (CI=true or FL_REQUIRE_ALL=1)"
			 : "skipped (CI=true or FL_REQUIRE_ALL=1 would fail it)");
}

void skip_missing(int n, const char *component, const char *why)
{
	bool required = tap_require_all();
	char what[32];

	snprintf(what, sizeof(what), "%d point%s", n, n == 1 ? "" : "s");
	say_missing(what, component, why, required);
	for (int i = 0; i < n; i++) {
		if (required) {
			printf("not ok %d - required in CI: %s missing (%s)\n",
			       ++tap_n, component, why);
			tap_failed++;
		} else {
			printf("ok %d # skip %s missing: %s\n", ++tap_n,
			       component, why);
		}
	}
	fflush(stdout);
}

void skip_all_missing(const char *component, const char *why)
{
	if (tap_require_all()) {
		say_missing("the program", component, why, true);
		printf("not ok %d - required in CI: %s missing (%s)\n",
		       ++tap_n, component, why);
		tap_failed++;
		exit(done_testing());
	}
	say_missing(tap_n ? "the program's other points" : "the program",
		    component, why, false);
	if (tap_n)	/* points made already: no plan 0 */
		exit(done_testing());
	printf("1..0 # skip %s missing: %s\n", component, why);
	exit(0);
}
