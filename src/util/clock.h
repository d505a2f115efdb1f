/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clock.h - the one monotonic clock every layer times things with, and a
 * clearly named wall clock for what must survive a reboot (cache ages).
 */
#ifndef FAULTLINE_UTIL_CLOCK_H
#define FAULTLINE_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC, ns: durations, timeouts, latencies. */
static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t now_ms(void)
{
	return now_ns() / 1000000ull;
}

static inline double now_s(void)
{
	return (double)now_ns() * 1e-9;
}

/* CLOCK_REALTIME, ns: timestamps stored on disk. */
static inline uint64_t wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
