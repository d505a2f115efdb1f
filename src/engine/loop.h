/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loop.h - the fault loop (loop.c), for the engine's life cycle.
 */
#ifndef FAULTLINE_ENGINE_LOOP_H
#define FAULTLINE_ENGINE_LOOP_H

#include "engine/core.h"

/* Read what is pending and serve it all: messages read, or -errno. */
int engine_pump(struct fl_engine *e, struct worker *w);
/* An engine thread: poll the uffd and pump until stopped (arg: worker). */
void *engine_thread(void *arg);

#endif
