/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reset.h - taking pages back to the snapshot (reset.c): the internal
 * primitive a public reset to the snapshot (fl_engine_reset) builds on.
 */
#ifndef FAULTLINE_ENGINE_RESET_H
#define FAULTLINE_ENGINE_RESET_H

#include "engine/core.h"

/*
 * [addr, addr+len) of every region: pages become RESET (not filled, and
 * a REMOVE event leaves them so).  Returns the pages marked.
 */
int64_t engine_reset_begin(struct fl_engine *e, uint64_t addr, uint64_t len);
/*
 * After the caller dropped them (MADV_DONTNEED).  When no other reset is
 * under way, every RESET page of every region (wherever a REMAP carried
 * it) becomes MISSING, threads that faulted on them meanwhile are woken,
 * and background restore looks again.  Returns the pages made missing
 * (0 while another reset is under way).
 */
int64_t engine_reset_end(struct fl_engine *e, uint64_t addr, uint64_t len);
/*
 * Both, with the drop between them: in-process engines only (the
 * memory is this process's), with the engine's threads or another
 * thread reading its uffd (the drop waits for its REMOVE event to be
 * read).  Returns the pages reset, or -errno.
 */
int64_t engine_reset_range(struct fl_engine *e, uint64_t addr, uint64_t len);

#endif
