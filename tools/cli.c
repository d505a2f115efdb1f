// SPDX-License-Identifier: Apache-2.0
/*
 * cli.c - what every subcommand shares: exit status and size arguments.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "daemon/log.h"
#include "faultline.h"

int cli_exit(const char *cmd, int ret)
{
	if (ret >= 0)
		return 0;
	fprintf(stderr, "faultline %s: %s\n", cmd,
		*fl_last_error() ? fl_last_error() : strerror(-ret));
	return 1;
}

int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno)
		return -EINVAL;
	int shift = 0;

	switch (toupper((unsigned char)*end)) {
	case 'K': shift = 10; end++; break;
	case 'M': shift = 20; end++; break;
	case 'G': shift = 30; end++; break;
	}
	if (*end == 'i' || *end == 'B')
		end += (*end == 'i') + (end[*end == 'i'] == 'B');
	if (*end || (shift && v > (~0ULL >> shift)))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

/* A file the daemon will write later: its directory must take it now. */
int cli_check_writable(const char *path)
{
	char dir[PATH_MAX];
	char *slash;

	if (access(path, F_OK) == 0)
		return access(path, W_OK) < 0 ? -errno : 0;
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == dir)
		dir[1] = 0;
	else
		*slash = 0;
	return access(dir, W_OK | X_OK) < 0 ? -errno : 0;
}

int cli_log_level(const char *cmd, const char *name)
{
	int level = log_level_parse(name);

	if (level < 0) {
		fprintf(stderr, "faultline %s: --log-level '%s': must be error, "
			"warning, info or debug\n", cmd, name);
		return 2;
	}
	log_init(level);
	return 0;
}
