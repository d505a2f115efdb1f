/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handshake.h - receiving a client's handshake (handshake.c).
 */
#ifndef FAULTLINE_DAEMON_HANDSHAKE_H
#define FAULTLINE_DAEMON_HANDSHAKE_H

#include "daemon/daemon.h"

/* Bytes (and maybe descriptors) of a handshake arrived on s's socket. */
void handshake_input(struct daemon *d, struct session *s);
/*
 * What the protocol's feed() or restore() returned: 0 waits for more, a
 * complete handshake is served, an error refuses the client.
 */
void handshake_fed(struct daemon *d, struct session *s, int ret);

#endif
