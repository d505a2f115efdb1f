/* SPDX-License-Identifier: Apache-2.0 */
/*
 * size.h - a size as a log line says it: "512 bytes", "4 KiB", "4.9 KiB",
 * "1.5 MiB", "3 GiB".  A whole number of its unit is shown without a
 * decimal; anything else with one, so a size that is not exact says so.
 *
 * Decision: returned by value (size_str(n).s), so that one printf may
 * show several sizes without a buffer each; the string lives until the
 * end of the statement that called it.
 */
#ifndef FAULTLINE_UTIL_SIZE_H
#define FAULTLINE_UTIL_SIZE_H

#include <stdint.h>
#include <stdio.h>

struct size_str {
	char s[24];
};

static inline struct size_str size_str(uint64_t n)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB" };
	struct size_str r;
	uint64_t unit = 1024, tenths;
	int u = 0;

	if (n < 1024) {
		snprintf(r.s, sizeof(r.s), "%llu byte%s", (unsigned long long)n,
			 n == 1 ? "" : "s");
		return r;
	}
	/* The next unit once this one would round to 1024.0. */
	while (u < 3 && n >= unit * 1024 - unit / 20) {
		unit <<= 10;
		u++;
	}
	tenths = n / unit * 10 + (n % unit * 10 + unit / 2) / unit;
	if (n % unit == 0)
		snprintf(r.s, sizeof(r.s), "%llu %s",
			 (unsigned long long)(n / unit), units[u]);
	else
		snprintf(r.s, sizeof(r.s), "%llu.%llu %s",
			 (unsigned long long)(tenths / 10),
			 (unsigned long long)(tenths % 10), units[u]);
	return r;
}

#endif
