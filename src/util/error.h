/* SPDX-License-Identifier: Apache-2.0 */
/*
 * error.h - one-line error messages for the caller (fl_last_error()).
 */
#ifndef FAULTLINE_ERROR_H
#define FAULTLINE_ERROR_H

/* Record a message for this thread and return ret (a -errno). */
int fl_err(int ret, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Forget this thread's message: what fails next says why itself, or nothing. */
void fl_err_clear(void);

#endif
