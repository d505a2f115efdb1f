/* SPDX-License-Identifier: Apache-2.0 */
/*
 * allow.h - who may be served (allow.c).
 */
#ifndef FAULTLINE_DAEMON_ALLOW_H
#define FAULTLINE_DAEMON_ALLOW_H

#include <stdbool.h>
#include <sys/types.h>

#include "daemon/config.h"

/* May a peer of uid be served (--allow-uid, --socket-owner)? */
bool uid_allowed(const struct serve_config *cfg, uid_t uid);
/* The refusal's words when it may not. */
const char *uid_refusal(const struct serve_config *cfg);

#endif
