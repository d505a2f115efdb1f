// SPDX-License-Identifier: Apache-2.0
/*
 * version.c - the version of the library linked at run time, for a caller
 * that was built against another header: as a string, as numbers, and as
 * a check (liburing's three calls, but the check answers 0 or -errno as
 * every call of the API does, rather than true when the library is old).
 */
#include <errno.h>

#include "faultline.h"
#include "util/error.h"

const char *fl_version(void)
{
	return FL_VERSION;
}

int fl_version_major(void)
{
	return FL_VERSION_MAJOR;
}

int fl_version_minor(void)
{
	return FL_VERSION_MINOR;
}

/* major.minor or newer: compared as a pair, the major number first. */
int fl_check_version(int major, int minor)
{
	if (FL_VERSION_MAJOR > major ||
	    (FL_VERSION_MAJOR == major && FL_VERSION_MINOR >= minor))
		return 0;
	return fl_err(-EOPNOTSUPP, "libfaultline %d.%d is older than the "
		      "%d.%d asked for", FL_VERSION_MAJOR, FL_VERSION_MINOR,
		      major, minor);
}
