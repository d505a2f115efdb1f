// SPDX-License-Identifier: Apache-2.0
/*
 * error.c - the test VMM's last failure message.  One buffer for the whole
 * process, not one per thread: a vCPU thread's failure is the one the
 * caller of vmm_run() must see.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "error.h"

static char vmm_msg[256];
static pthread_mutex_t msg_lock = PTHREAD_MUTEX_INITIALIZER;

const char *vmm_error(void)
{
	return vmm_msg;
}

int vmm_fail(int ret, const char *fmt, ...)
{
	char line[sizeof(vmm_msg)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&msg_lock);	/* vCPU threads fail at once too */
	memcpy(vmm_msg, line, sizeof(line));
	pthread_mutex_unlock(&msg_lock);
	return ret;
}
