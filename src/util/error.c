// SPDX-License-Identifier: Apache-2.0
/*
 * error.c - per-thread last error message, so every -errno a user can cause
 * comes with one line naming the input and what was wrong.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "faultline.h"
#include "util/error.h"

static __thread char last_error[1024];	/* a deep URL and its cause */

/*
 * Formatted aside first: an argument may be fl_last_error() itself (a
 * prefix added to the error below), which vsnprintf would overwrite as
 * it reads it.
 */
int fl_err(int ret, const char *fmt, ...)
{
	char msg[sizeof(last_error)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	memcpy(last_error, msg, sizeof(last_error));
	return ret;
}

void fl_err_clear(void)
{
	last_error[0] = 0;
}

const char *fl_last_error(void)
{
	return last_error;
}
