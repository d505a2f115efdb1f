/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fork.h - the engine's side of fork following (fork.c; its API,
 * fl_engine_create_forking() and the rest, is in faultline.h): a FORK
 * event's child, with the parent's regions and page states as they are
 * at the fork, handed to the engine's fork handler.
 *
 * Decision: an engine created without a handler still refuses a uffd with
 * fork events, so that the Firecracker path keeps its guarantee.
 */
#ifndef FAULTLINE_ENGINE_FORK_H
#define FAULTLINE_ENGINE_FORK_H

#include <stdbool.h>

#include "faultline.h"

/* A FORK event's child, in e (loop.c, engine lock held exclusively). */
void engine_forked(struct fl_engine *e, int uffd);

#endif
