/* SPDX-License-Identifier: Apache-2.0 */
/*
 * keeper.h - a process holding a copy of each served uffd whose client
 * kept none, so that the server's death leaves faults waiting instead of
 * the kernel unregistering the memory (keeper.c).
 */
#ifndef FAULTLINE_DAEMON_KEEPER_H
#define FAULTLINE_DAEMON_KEEPER_H

#include <stdint.h>
#include <sys/types.h>

/* Fork the keeper (before any thread): the fd to talk to it, or -errno. */
int keeper_start(pid_t *pid);
/* Hand it a copy of session id's uffd (keeper < 0: none). */
void keeper_hold(int keeper, uint32_t id, int uffd);
/* Session id ended: its copy is closed. */
void keeper_drop(int keeper, uint32_t id);
/* The server ends: the keeper exits once it holds nothing. */
void keeper_stop(int keeper, pid_t pid);

#endif
