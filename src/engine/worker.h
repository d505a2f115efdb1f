/* SPDX-License-Identifier: Apache-2.0 */
/*
 * worker.h - a thread's staging buffer and fault queue (worker.c).
 */
#ifndef FAULTLINE_ENGINE_WORKER_H
#define FAULTLINE_ENGINE_WORKER_H

#include "engine/core.h"

struct worker *worker_new(bool huge);
void worker_free(struct worker *w);
/* A worker owned by e, freed by fl_engine_destroy(). */
struct worker *engine_worker(struct fl_engine *e);

#endif
