/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clone.h - adding regions to an engine (engine.c), for clone regions
 * served from a snapshot cache (clone.c) as for any other.
 */
#ifndef FAULTLINE_ENGINE_CLONE_H
#define FAULTLINE_ENGINE_CLONE_H

#include "faultline.h"

/*
 * fl_engine_add_region(), the region served from cache when it is not
 * NULL (registered MISSING | MINOR with FL_REGION_REGISTER).
 */
int engine_add_region(struct fl_engine *e, const struct fl_region_desc *d,
		      struct fl_source *src, struct fl_cache *cache);

#endif
