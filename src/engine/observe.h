/* SPDX-License-Identifier: Apache-2.0 */
/*
 * observe.h - what the daemon's live status reads of an engine beyond
 * faultline.h (prefetch.c): the state of background restore.
 *
 * Decision: internal, as fork.h is: a state name is the daemon's to show
 * an operator and may change with the fillers' policy, where the public
 * API would have to keep it for ever.
 */
#ifndef FAULTLINE_ENGINE_OBSERVE_H
#define FAULTLINE_ENGINE_OBSERVE_H

#include "faultline.h"

enum engine_bg {
	ENGINE_BG_OFF,		/* disabled (FL_ENGINE_NO_BACKGROUND, recording) */
	ENGINE_BG_WAITING,	/* for faults to pause (the quiet period) */
	ENGINE_BG_RUNNING,	/* the fillers are restoring */
	ENGINE_BG_STOPPED,	/* hugetlb pool empty: faults only */
	ENGINE_BG_DONE,		/* nothing left missing */
};

/* Where background restore of e is now (a glance: it may change at once). */
enum engine_bg engine_background_state(struct fl_engine *e);

#endif
