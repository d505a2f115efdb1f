// SPDX-License-Identifier: Apache-2.0
/*
 * error.c - per-thread last error message, so every -errno a user can cause
 * comes with one line naming the input and what was wrong.
 */
#include <stdarg.h>
#include <stdio.h>

#include "faultline.h"
#include "util/error.h"

static __thread char last_error[256];

int fl_err(int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
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

const char *fl_version(void)
{
	return FL_VERSION;
}
