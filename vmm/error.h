/* SPDX-License-Identifier: Apache-2.0 */
/*
 * error.h - the test VMM's one-line failure messages, from any thread.
 */
#ifndef FAULTLINE_VMM_ERROR_H
#define FAULTLINE_VMM_ERROR_H

/* Why the last vmm_* call failed, in one line (from any thread). */
const char *vmm_error(void);
/* Record a message and return ret (a -errno). */
int vmm_fail(int ret, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
