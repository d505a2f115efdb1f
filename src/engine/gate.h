/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gate.h - the ioctl gate and the engine's end (gate.c).
 */
#ifndef FAULTLINE_ENGINE_GATE_H
#define FAULTLINE_ENGINE_GATE_H

#include "engine/core.h"

/* Every fill, poison and wake passes this gate (fl_engine_detach). */
int engine_fill(struct fl_engine *e, enum uffd_fill_op op, uint64_t dst,
		uint64_t src, uint64_t len, uint64_t *done);
int engine_wake(struct fl_engine *e, uint64_t start, uint64_t len);
/* Write-protection off for [start, start+len), and its threads woken. */
int engine_unprotect(struct fl_engine *e, uint64_t start, uint64_t len);

/* The client is gone or must go: the engine's threads end. */
void engine_finish(struct fl_engine *e);
/* Keep this thread's last error as the engine's first failure, if none yet. */
void note_failure(struct fl_engine *e);

#endif
