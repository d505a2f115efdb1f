/* SPDX-License-Identifier: Apache-2.0 */
/*
 * zero.h - the one all-zero check: a run read from a snapshot is served
 * as zero pages, a chunk stored as a hole, a block sent as "zero".
 */
#ifndef FAULTLINE_UTIL_ZERO_H
#define FAULTLINE_UTIL_ZERO_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* True if the len bytes at p are all zero (memcmp against itself). */
static inline bool is_zero(const void *p, size_t len)
{
	const unsigned char *c = p;

	return len == 0 || (c[0] == 0 && !memcmp(c, c + 1, len - 1));
}

#endif
