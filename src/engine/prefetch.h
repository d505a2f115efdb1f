/* SPDX-License-Identifier: Apache-2.0 */
/*
 * prefetch.h - the fillers: readahead windows, trace replay and
 * background restore (prefetch.c), driven by the fault loop and the life
 * cycle.
 */
#ifndef FAULTLINE_ENGINE_PREFETCH_H
#define FAULTLINE_ENGINE_PREFETCH_H

#include "engine/core.h"

/* e->pf from the options, and its end (struct prefetch: prefetch.c's). */
void prefetch_init(struct fl_engine *e, const struct fl_engine_opts *opts);
void prefetch_free(struct fl_engine *e);
/* Start the fillers, if there is anything for them to do. */
int prefetch_start(struct fl_engine *e);
void prefetch_stop(struct fl_engine *e);
/* A fault was read at ns: background restore waits for quiet. */
void prefetch_fault_read(struct fl_engine *e, uint64_t ns);
/*
 * Replay t (taken over: t is the engine's now), from its first run;
 * running: the engine's threads run, so fillers start if none do.
 */
int prefetch_replay(struct fl_engine *e, struct trace *t, bool running);
/* r is going away (engine lock held exclusively). */
void prefetch_forget(struct fl_engine *e, struct region *r);
/* r may have shrunk (engine lock held exclusively): no job past its end. */
void prefetch_clip(struct fl_engine *e, struct region *r);
/* Regions changed (engine lock held exclusively): restart background. */
void prefetch_regions_changed(struct fl_engine *e);

#endif
