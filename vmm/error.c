/*
 * error.c - the test VMM's last failure message.  One buffer for the whole
 * process, not one per thread: a vCPU thread's failure is the one the
 * caller of vmm_run() must see.
 */
#include <stdarg.h>
#include <stdio.h>

#include "error.h"

static char vmm_msg[256];

const char *vmm_error(void)
{
	return vmm_msg;
}

int vmm_fail(int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(vmm_msg, sizeof(vmm_msg), fmt, ap);
	va_end(ap);
	return ret;
}
