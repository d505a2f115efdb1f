/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stats.h - the engine's counters and latency histogram (stats.c).
 */
#ifndef FAULTLINE_ENGINE_STATS_H
#define FAULTLINE_ENGINE_STATS_H

#include "engine/core.h"

/* One fault served, ns after it was read. */
void stats_record_latency(struct engine_stats *st, uint64_t ns);

#endif
