// SPDX-License-Identifier: Apache-2.0
/*
 * allow.c - who may be served: the peer uids `faultline serve` accepts
 * (--allow-uid, --socket-owner), checked on a new client and on every
 * session a restarted server adopts.
 *
 * Decision: by default only root, the daemon's own uid and the socket's
 * owner: a snapshot's pages go only to clients allowed to have them.
 */
#include <unistd.h>

#include "daemon/allow.h"

bool uid_allowed(const struct serve_config *cfg, uid_t uid)
{
	if (!cfg->nallow)
		return uid == 0 || uid == getuid() ||
		       (cfg->socket_chown && uid == cfg->socket_uid);
	for (int i = 0; i < cfg->nallow; i++)
		if (cfg->allow_uids[i] == uid)
			return true;
	return false;
}

const char *uid_refusal(const struct serve_config *cfg)
{
	return cfg->nallow ? "uid not allowed (not in --allow-uid)" :
	       "uid not allowed (only root, the daemon's own and "
	       "--socket-owner's)";
}
