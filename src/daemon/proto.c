// SPDX-License-Identifier: Apache-2.0
/*
 * proto.c - the list of protocols the daemon speaks (proto.h).
 *
 * Decision: one table, so that a protocol is added by one file and one
 * line here; nothing else in the daemon names a protocol.
 */
#include <string.h>

#include "daemon/proto.h"

const struct proto_ops *const protos[] = {
	&proto_fc,
	&proto_criu,
	NULL,
};

const struct proto_ops *proto_find(const char *name)
{
	if (!name)
		return protos[0];
	for (int i = 0; protos[i]; i++)
		if (!strcmp(protos[i]->name, name))
			return protos[i];
	return NULL;
}
